//! Dialog detection and answer latency on real headless Chromium, against a plain CDP client in
//! the same run.
//!
//! Custom harness (`harness = false`): `cargo bench --bench chromium_latency`. Without a
//! Chromium-family browser it prints one `SKIPPED: no Chromium` line and exits 0.
//!
//! * The supervisor attaches to the launched browser's `about:blank` page (no iframes: Chromium
//!   cancels an open dialog when any frame commits a navigation).
//! * A second, plain tungstenite client attaches to the same page with its own flat session and
//!   `Page.enable`, so both receive `Page.javascriptDialogOpening`.
//! * Each sample: the plain client sends `Runtime.evaluate("setTimeout(() => alert('x'), 0)")`
//!   at t0 and reads until its own session's opening event (floor = its receive time - t0);
//!   meanwhile a waiter thread blocked in `sup.wait_for` stamps when the snapshot shows the
//!   dialog (supervisor = that time - t0). Then `respond_to_dialog` is timed, and after the close
//!   a raw `Runtime.evaluate("1")` round trip of the plain client (the raw floor for respond).
//!   (A like-for-like floor, the plain client answering the dialog itself, is not used: with
//!   the supervisor's session also attached, Chromium 156 did not answer the plain client's
//!   `Page.handleJavaScriptDialog` within 30 s.)
//!
//! Environment: `CHROMIUM_SAMPLES` (default 300).

mod common;

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use cdp_supervisor::launch::{LaunchedBrowser, find_browser};
use cdp_supervisor::{Config, DialogAction, SupervisorRegistry};
use common::*;
use serde_json::json;

const WARMUP: usize = 20;

fn main() {
    let (date, nproc) = machine();
    let samples: usize = std::env::var("CHROMIUM_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n: &usize| *n > 0)
        .unwrap_or(400);
    let exe = match find_browser(None) {
        Ok(Some(p)) => p,
        Ok(None) => {
            println!("SKIPPED: no Chromium (chromium_latency needs a Chromium-family browser)");
            return;
        }
        Err(e) => {
            println!("SKIPPED: no Chromium ({e})");
            return;
        }
    };
    let started = Instant::now();
    println!("chromium_latency: {date}, nproc = {nproc}");
    let browser = LaunchedBrowser::launch(&exe).expect("launch Chromium");
    let version = shell(exe.to_str().unwrap_or("chromium"), &["--version"]).unwrap_or_default();
    println!("browser: {} ({version})", exe.display());

    let registry = SupervisorRegistry::new(Config::default());
    let sup = registry
        .get_or_start("chromium", browser.ws_url())
        .expect("start the supervisor");
    let page = sup
        .snapshot()
        .page_target_id
        .clone()
        .expect("the page target");
    let mut raw = RawClient::connect(browser.ws_url());
    let session = raw.attach_sequence(Some(&page));
    let s = Some(session.as_str());
    // Make sure the page has finished loading about:blank.
    let ready = raw.call(
        "Runtime.evaluate",
        json!({"expression": "document.readyState", "returnByValue": true}),
        s,
    );
    println!(
        "page {page}: readyState {}; supervisor and plain client each attached with their own \
         flat session and Page.enable",
        ready["result"]["value"]
    );

    // The waiter: blocked in wait_for until a dialog with a new id is pending.
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (seen_tx, seen_rx) = mpsc::channel::<(String, Instant)>();
    let waiter = {
        let sup = Arc::clone(&sup);
        thread::spawn(move || {
            let mut last = String::new();
            while go_rx.recv().is_ok() {
                let l = last.clone();
                let snap = sup.wait_for(Duration::from_secs(10), move |s| {
                    s.pending_dialogs.first().is_some_and(|d| d.id != l)
                });
                let t = Instant::now();
                let Some(snap) = snap else {
                    let _ = seen_tx.send((String::new(), t));
                    continue;
                };
                last = snap.pending_dialogs[0].id.clone();
                let _ = seen_tx.send((last.clone(), t));
            }
        })
    };

    let mut h_floor = new_hist();
    let mut h_sup = new_hist();
    let mut h_diff = new_hist();
    let mut h_resp = new_hist();
    let mut h_eval = new_hist();

    let mut sup_first = 0usize;
    for i in 0..WARMUP + samples {
        let keep = i >= WARMUP;
        go_tx.send(()).expect("waiter");
        thread::sleep(Duration::from_micros(300)); // the waiter is parked in wait_for
        let t0 = Instant::now();
        let id = raw.send(
            "Runtime.evaluate",
            json!({"expression": "setTimeout(() => alert('x'), 0); 1"}),
            s,
        );
        let floor_at = loop {
            let v = raw.recv();
            if v["method"] == "Page.javascriptDialogOpening" && v["sessionId"] == session.as_str() {
                break Instant::now();
            }
        };
        let (did, sup_at) = seen_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the waiter");
        assert!(!did.is_empty(), "the supervisor never saw dialog {i}");
        if keep {
            record(&mut h_floor, floor_at - t0);
            record(&mut h_sup, sup_at - t0);
            if sup_at >= floor_at {
                record(&mut h_diff, sup_at - floor_at);
            } else {
                sup_first += 1;
                record(&mut h_diff, Duration::from_nanos(1));
            }
        }
        let _ = id;
        let t1 = Instant::now();
        sup.respond_to_dialog(DialogAction::Accept, None, Some(&did))
            .expect("respond_to_dialog");
        let el = t1.elapsed();
        if keep {
            record(&mut h_resp, el);
        }
        raw.wait_event("Page.javascriptDialogClosed");
        raw.events.clear();
        let t1 = Instant::now();
        raw.call("Runtime.evaluate", json!({"expression": "1"}), s);
        let el = t1.elapsed();
        if keep {
            record(&mut h_eval, el);
        }
        raw.events.clear();
    }
    drop(go_tx);
    let _ = waiter.join();

    println!(
        "{samples} samples after {WARMUP} warm-up. t0 = the plain client's write of \
         Runtime.evaluate(setTimeout(alert)); both receivers are blocked (plain client in read(), \
         supervisor waiter in wait_for's condvar). Respond floor: the plain client's \
         Runtime.evaluate('1') round trip right after the dialog closed."
    );
    println!();
    lat_header();
    lat_row(
        "floor: plain client got Page.javascriptDialogOpening",
        &h_floor,
        None,
    );
    lat_row(
        "supervisor: wait_for sees pending dialog",
        &h_sup,
        Some(&h_floor),
    );
    lat_row("supervisor minus floor (same sample)", &h_diff, None);
    println!();
    lat_row("floor: plain client Runtime.evaluate('1')", &h_eval, None);
    lat_row("supervisor: respond_to_dialog", &h_resp, Some(&h_eval));
    println!();
    println!(
        "The supervisor saw the dialog before the plain client in {sup_first} of {samples} samples \
         (counted as 0 in the difference row)."
    );
    let det = q_us(&h_sup, 0.5) / q_us(&h_floor, 0.5);
    let resp = q_us(&h_resp, 0.5) / q_us(&h_eval, 0.5);

    println!(
        "Target detection <= 1.1x floor (p50): {} ({det:.3}x, {:.1} us vs {:.1} us, p50 of the \
         per-sample difference {:.1} us). Target respond <= 1.1x raw round trip (p50): {} \
         ({resp:.2}x, {:.1} us vs {:.1} us).",
        verdict(det <= 1.1),
        q_us(&h_sup, 0.5),
        q_us(&h_floor, 0.5),
        q_us(&h_diff, 0.5),
        verdict(resp <= 1.1),
        q_us(&h_resp, 0.5),
        q_us(&h_eval, 0.5)
    );
    println!("Total bench time: {:.1} s", started.elapsed().as_secs_f64());
    println!();
    println!(
        "README: chromium_latency ({date}, nproc={nproc}, {version}): alert detection p50 {:.0} us \
         / p99 {:.0} us from trigger vs plain CDP client {:.0} / {:.0} us ({det:.2}x, target 1.1x \
         {}); respond_to_dialog p50 {:.0} / p99 {:.0} us vs raw Runtime.evaluate {:.0} / {:.0} us \
         ({resp:.2}x, target 1.1x {}); {samples} samples.",
        q_us(&h_sup, 0.5),
        q_us(&h_sup, 0.99),
        q_us(&h_floor, 0.5),
        q_us(&h_floor, 0.99),
        verdict(det <= 1.1),
        q_us(&h_resp, 0.5),
        q_us(&h_resp, 0.99),
        q_us(&h_eval, 0.5),
        q_us(&h_eval, 0.99),
        verdict(resp <= 1.1)
    );
    drop(raw);
    drop(registry);
    drop(browser);
}
