//! Dialog detection and answer latency on real headless Chromium, against plain CDP clients in
//! the same run.
//!
//! Custom harness (`harness = false`): `cargo bench --bench chromium_latency`. Without a
//! Chromium-family browser it prints one `SKIPPED: no Chromium` line and exits 0.
//!
//! **Setup.** Two `about:blank` pages, A and B, are created the same way
//! (`Target.createTarget {newWindow: true}`: in windows of their own both stay `visible`; a second
//! tab in one window makes the first `hidden`, which changes how Chromium schedules it). No iframes:
//! Chromium cancels an open dialog when any frame commits a navigation. A *trigger* connection
//! holds one bare flat session per page (no domain enabled) and raises every alert with
//! `Runtime.evaluate("setTimeout(() => alert('x'), 0)")`, so the trigger's reply never lands on a
//! measured client. Before every trigger it does one untimed `Runtime.evaluate("1")` round trip on
//! that page: after a dialog closes the renderer stays busy for a millisecond or more, and without
//! this settle step the next sample queues behind that work (measured on the launch page: floor
//! p50 ~2.5 ms instead of ~0.7 ms, with a long tail).
//!
//! **Detection** (phase 1, page A). The supervisor and a plain tungstenite client both attach to A
//! with the same attach sequence (flat session, `Page.enable`, `Runtime.enable`,
//! `Page.getFrameTree`, `Target.setAutoAttach`; the supervisor without `Runtime.enable` since
//! issue 32, SPEC §19: dialogs are `Page` events), so both receive the same
//! `Page.javascriptDialogOpening`. t0 = the trigger connection's write.
//! * floor: when the plain client, blocked in `read()` like the supervisor's reader, has read and
//!   parsed its opening event;
//! * supervisor: when an observer thread, armed just before the trigger, sees the dialog in the
//!   snapshot. Samples alternate between two observers, each its own thread: a poller reading
//!   `with_snapshot` (wait-free) with `yield_now()` between checks (no condvar hop on the path),
//!   and a thread blocked in `sup.wait_for` (the condvar the reader notifies after publishing).
//!   Both stop at a deadline. Either stamp is an upper bound of the publish: a yielded poller runs again only
//!   after whatever else is runnable on its vCPU, and the waiter needs a wake-up;
//! * reader stamp: the dialog's `opened_at`, which the supervisor's reader takes (wall clock)
//!   while it applies the event, just before it builds and publishes the snapshot: a lower bound
//!   of the publish that no observer disturbs.
//!
//! Each sample records both latencies and the signed paired difference (supervisor minus plain,
//! same dialog). The 1.1x target is judged on the ratio of the medians, as the issue states it,
//! and on the paired median. With 2 vCPUs shared with Chromium's processes, one side or the other
//! is occasionally seen over 0.5 ms late (a runnable thread waiting for a vCPU); Chromium's own
//! latency ranges from 0.5 to 5+ ms between samples, so those outliers move the median of one
//! column much more than the paired median moves. The poller is the worse observer here: it keeps
//! its vCPU looking busy to the scheduler, and having spun it owes CPU time (EEVDF lag), so once
//! it has yielded it runs again only after Chromium's runnable threads: it sees the publish more
//! than 0.5 ms late in 20-40% of samples. The blocked waiter is woken straight after the publish
//! (sharing one thread between both observers made the waiter late as well).
//!
//! **Respond** (phase 2, like-for-like). The plain client leaves A. Each page then has exactly one
//! client with the Page domain enabled (the one that answers) plus the bare trigger session: the
//! supervisor on A, a second plain client (same attach sequence) on B. Halfway the roles swap (the
//! supervisor is stopped, a new one attaches to B, the plain client moves to A), because Chromium
//! answers a dialog on one page several hundred microseconds faster than on the other however they
//! are created or focused. Per sample, in alternating order:
//! (a) trigger on the supervised page, wait (untimed) until the snapshot shows the dialog, then
//! time `sup.respond_to_dialog(Accept, None, Some(id))`;
//! (b) trigger on the plain page, wait for the plain client's `Page.javascriptDialogOpening`, then
//! time `Page.handleJavaScriptDialog {accept: true}` from its write until its reply is read.
//! Both wait for the same thing: Chromium runs the dialog callback, sends
//! `Page.javascriptDialogClosed`, then the command's reply, on the same socket (the order is
//! printed). `respond_to_dialog` returns once the supervisor's reader has read both, published the
//! closed dialog and handed over the reply (`link::Shared::call` waits for exactly that reply,
//! spinning with `yield_now` for 50 us before parking); the plain client returns once it has read
//! and parsed the reply, having read and parsed the closed event on the way. After each pair the
//! plain client's raw `Runtime.evaluate("1")` round trip on its settled page is timed as well: the
//! issue's original floor, which makes Chromium do much less than answering a dialog (answering
//! takes Chromium itself ~3 ms here, whoever sends it; an evaluate ~0.5 ms).
//!
//! Every wait on Chromium has a deadline and panics with what it waited for. The browser is a
//! `LaunchedBrowser` owned by `main`, so a panic unwinds through its `Drop`, which kills the whole
//! process group and removes the profile; the observer thread ends at its own deadline.
//!
//! Environment: `CHROMIUM_SAMPLES` (default 300: per detection observer, and respond pairs).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cdp_supervisor::unversioned::{LaunchedBrowser, find_browser};
use cdp_supervisor::{
    Config, DialogAction, Snapshot, StartOptions, Supervisor, SupervisorRegistry,
};
use common::*;
use hdrhistogram::Histogram;
use serde_json::{Value, json};

const WARMUP: usize = 20;
/// Longest wait for any one step Chromium takes.
const STEP: Duration = Duration::from_secs(10);
const TRIGGER: &str = "setTimeout(() => alert('x'), 0); 1";
const TARGET: f64 = 1.1;

fn main() {
    let (date, nproc) = machine();
    let samples: usize = env_or("CHROMIUM_SAMPLES", 300, |v| *v > 0);
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
    // Owned by main: a panic anywhere below unwinds through its Drop (kills the process group).
    let browser = LaunchedBrowser::launch(&exe).expect("launch Chromium");
    let version = shell(exe.to_str().unwrap_or("chromium"), &["--version"]).unwrap_or_default();
    println!("browser: {} ({version})", exe.display());
    let url = browser.ws_url();

    let mut trig = RawClient::connect(url);
    let page_a = new_window(&mut trig);
    let page_b = new_window(&mut trig);
    let trig_a = bare_session(&mut trig, &page_a);
    let trig_b = bare_session(&mut trig, &page_b);
    let registry = SupervisorRegistry::new(Config::default());
    let sup = start_on(&registry, "sup-a", url, &page_a);

    // ---------------------------------------------------------------- phase 1: detection
    let mut plain = RawClient::connect(url);
    let ps = plain.attach_sequence(Some(&page_a));
    println!(
        "phase 1: page A {page_a} ({}): supervisor and plain client attached (flat session, \
         Page/Runtime enabled), trigger session bare; page B idle",
        page_state(&mut trig, &trig_a)
    );
    // One thread per observer: a thread that has just spun keeps a scheduling debt (EEVDF lag)
    // that would delay its wake-up in a following wait_for sample.
    let observers = [
        Observer::start(Arc::clone(&sup), Mode::Yield),
        Observer::start(Arc::clone(&sup), Mode::Wait),
    ];
    let mut det = [Detection::new(samples), Detection::new(samples)];
    for i in 0..2 * (WARMUP + samples) {
        let mode = if i % 2 == 0 { Mode::Yield } else { Mode::Wait };
        settle(&mut trig, &trig_a);
        let observer = &observers[mode as usize];
        observer.arm();
        let t0 = Instant::now();
        let t0_wall = epoch_ns();
        let tid = trig.send(
            "Runtime.evaluate",
            json!({"expression": TRIGGER}),
            Some(&trig_a),
        );
        let floor_at = {
            let deadline = t0 + STEP;
            loop {
                let v = recv_by(&mut plain, deadline, "the plain client's dialog opening");
                if v["method"] == "Page.javascriptDialogOpening" && v["sessionId"] == ps.as_str() {
                    break Instant::now();
                }
            }
        };
        let seen = observer.seen();
        reply_by(&mut trig, tid, t0 + STEP);
        if i >= 2 * WARMUP {
            det[mode as usize].add(t0, t0_wall, floor_at, &seen);
        }
        // Close it (untimed) and let both clients see the close.
        sup.respond_to_dialog(DialogAction::Accept, None, Some(&seen.id))
            .expect("respond_to_dialog (detection phase)");
        event_by(
            &mut plain,
            "Page.javascriptDialogClosed",
            Instant::now()
                .checked_add(STEP)
                .expect("a deadline within range"),
        );
        plain.events.clear();
        no_dialog_by(
            &sup,
            Instant::now()
                .checked_add(STEP)
                .expect("a deadline within range"),
        );
    }
    for o in observers {
        o.stop();
    }
    // The plain client leaves page A: from now on each page has one Page-enabled client.
    plain.call("Target.detachFromTarget", json!({"sessionId": ps}), None);
    drop(plain);

    // ---------------------------------------------------------------- phase 2: respond
    let mut h_resp = new_hist();
    let mut h_handle = new_hist();
    let mut h_eval = new_hist();
    let mut d_resp: Vec<i64> = Vec::with_capacity(samples);
    let mut order_seen: Vec<String> = Vec::new();
    let mut sup = sup;
    let mut p2 = RawClient::connect(url);
    let mut s2 = String::new();
    for round in 0..2 {
        let (sup_page, sup_trig, plain_page, plain_trig) = if round == 0 {
            (&page_a, &trig_a, &page_b, &trig_b)
        } else {
            (&page_b, &trig_b, &page_a, &trig_a)
        };
        if round == 1 {
            // Swap the roles: nobody may keep the Page domain on a page it no longer answers.
            let old = sup.task_id().to_string();
            drop(sup);
            assert!(registry.stop(&old), "stop the first supervisor");
            p2.call("Target.detachFromTarget", json!({"sessionId": s2}), None);
            sup = start_on(&registry, "sup-b", url, sup_page);
        }
        s2 = p2.attach_sequence(Some(plain_page));
        p2.events.clear();
        println!(
            "phase 2, round {}: supervisor on {sup_page} ({}), plain client on {plain_page} ({}); \
             trigger sessions bare on both",
            round + 1,
            page_state(&mut trig, sup_trig),
            page_state(&mut trig, plain_trig)
        );
        let n = if round == 0 {
            samples / 2
        } else {
            samples - samples / 2
        };
        for i in 0..WARMUP + n {
            let mut resp = Duration::ZERO;
            let mut handle = Duration::ZERO;
            let sides = if i % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for supervised in sides {
                if supervised {
                    resp = supervised_answer(&sup, &mut trig, sup_trig);
                } else {
                    let (el, order) = plain_answer(&mut p2, &s2, &mut trig, plain_trig);
                    handle = el;
                    if order_seen.is_empty() {
                        order_seen = order;
                    }
                }
            }
            settle(&mut trig, plain_trig);
            let t = Instant::now();
            let id = p2.send("Runtime.evaluate", json!({"expression": "1"}), Some(&s2));
            reply_by(&mut p2, id, t + STEP);
            let eval = t.elapsed();
            p2.events.clear();
            if i >= WARMUP {
                record(&mut h_resp, resp);
                record(&mut h_handle, handle);
                record(&mut h_eval, eval);
                d_resp.push(resp.as_nanos() as i64 - handle.as_nanos() as i64);
            }
        }
    }

    // ---------------------------------------------------------------- report
    println!(
        "{samples} detection samples per observer (interleaved) and {samples} respond pairs \
         (sides alternate, roles swap halfway), after {WARMUP} warm-up each; t0 = the trigger \
         connection's write; every trigger follows an untimed Runtime.evaluate('1') on its page."
    );
    println!();
    lat_header();
    for (m, d) in [Mode::Yield, Mode::Wait].into_iter().zip(&det) {
        lat_row(
            &format!("floor: plain client got opening ({})", m.short()),
            &d.floor,
            None,
        );
        lat_row(m.row(), &d.sup, Some(&d.floor));
        lat_row(
            "  supervisor: reader applied it (opened_at)",
            &d.reader,
            Some(&d.floor),
        );
    }
    println!();
    lat_row("floor: plain Page.handleJavaScriptDialog", &h_handle, None);
    lat_row("supervisor: respond_to_dialog", &h_resp, Some(&h_handle));
    lat_row("raw: plain Runtime.evaluate('1')", &h_eval, None);
    lat_row(
        "supervisor: respond_to_dialog vs evaluate",
        &h_resp,
        Some(&h_eval),
    );
    println!();
    println!("Paired differences, supervisor minus plain client (same dialog), us:");
    for (m, d) in [Mode::Yield, Mode::Wait].into_iter().zip(&det) {
        println!(
            "  {:<9} {}; its reader stamp {}",
            m.short(),
            Spread::of(&d.d_sup).show(),
            Spread::of(&d.d_reader).show()
        );
    }
    let rr = Spread::of(&d_resp);
    println!(
        "  respond   {} (adjacent answers on the two pages). Order on the plain client after \
         handleJavaScriptDialog: {}.",
        rr.show(),
        order_seen.join(" -> ")
    );
    let verdicts: Vec<Verdict> = det.iter().map(Detection::verdict).collect();
    for (m, v) in [Mode::Yield, Mode::Wait].into_iter().zip(&verdicts) {
        println!(
            "Target detection <= {TARGET}x floor, {}: ratio of p50s {} ({:.3}x: {:.1} us vs {:.1} \
             us); paired median {:+.1} us = {:.3}x of the floor p50: {}. {}.",
            m.short(),
            verdict(v.ratio <= TARGET),
            v.ratio,
            v.sup50,
            v.floor50,
            v.paired50,
            v.paired_ratio,
            verdict(v.paired_ratio <= TARGET),
            v.dominates()
        );
    }
    let resp = q_us(&h_resp, 0.5) / q_us(&h_handle, 0.5);
    let resp_eval = q_us(&h_resp, 0.5) / q_us(&h_eval, 0.5);
    println!(
        "Target respond <= {TARGET}x plain Page.handleJavaScriptDialog (p50): {} ({resp:.3}x: \
         {:.1} us vs {:.1} us; paired median {:+.1} us). Against the raw Runtime.evaluate('1') \
         round trip (p50): {} ({resp_eval:.2}x: vs {:.1} us).",
        verdict(resp <= TARGET),
        q_us(&h_resp, 0.5),
        q_us(&h_handle, 0.5),
        rr.p50,
        verdict(resp_eval <= TARGET),
        q_us(&h_eval, 0.5)
    );
    println!("Total bench time: {:.1} s", started.elapsed().as_secs_f64());
    println!();
    let (y, w) = (&verdicts[0], &verdicts[1]);
    let (ys, ws) = (Spread::of(&det[0].d_sup), Spread::of(&det[1].d_sup));
    println!(
        "README: chromium_latency ({date}, nproc={nproc}, {version}): alert detection, snapshot \
         poller p50 {:.0} / p99 {:.0} us from trigger vs plain CDP client {:.0} / {:.0} us \
         ({:.2}x, target {TARGET}x {}; paired p50 {:+.0} us, p10..p90 {:+.0}..{:+.0} us, {:.3}x \
         {}); wait_for p50 {:.0} vs {:.0} us ({:.2}x {}; paired p50 {:+.0} us, p10..p90 \
         {:+.0}..{:+.0} us, {:.3}x {}); respond_to_dialog p50 {:.0} / p99 {:.0} us vs plain \
         Page.handleJavaScriptDialog {:.0} / {:.0} us ({resp:.2}x, target {TARGET}x {}; paired p50 \
         {:+.0} us) and raw Runtime.evaluate {:.0} / {:.0} us ({resp_eval:.2}x, {}); {samples} \
         samples each.",
        y.sup50,
        q_us(&det[0].sup, 0.99),
        y.floor50,
        q_us(&det[0].floor, 0.99),
        y.ratio,
        verdict(y.ratio <= TARGET),
        ys.p50,
        ys.p10,
        ys.p90,
        y.paired_ratio,
        verdict(y.paired_ratio <= TARGET),
        w.sup50,
        w.floor50,
        w.ratio,
        verdict(w.ratio <= TARGET),
        ws.p50,
        ws.p10,
        ws.p90,
        w.paired_ratio,
        verdict(w.paired_ratio <= TARGET),
        q_us(&h_resp, 0.5),
        q_us(&h_resp, 0.99),
        q_us(&h_handle, 0.5),
        q_us(&h_handle, 0.99),
        verdict(resp <= TARGET),
        rr.p50,
        q_us(&h_eval, 0.5),
        q_us(&h_eval, 0.99),
        verdict(resp_eval <= TARGET)
    );
    drop(p2);
    drop(trig);
    drop(sup);
    drop(registry);
    drop(browser);
}

/// Starts a supervisor on exactly `page`.
fn start_on(registry: &SupervisorRegistry, task: &str, url: &str, page: &str) -> Arc<Supervisor> {
    let sup = registry
        .get_or_start_with(
            task,
            url,
            StartOptions::default().with_target_id(page.to_string()),
        )
        .expect("start the supervisor");
    assert_eq!(
        sup.snapshot().page_target_id.as_deref(),
        Some(page),
        "the supervisor attached to another page"
    );
    sup
}

// ------------------------------------------------------------------------------------------------
// Phase 1 bookkeeping.

/// One observer's detection samples.
struct Detection {
    floor: Histogram<u64>,
    sup: Histogram<u64>,
    reader: Histogram<u64>,
    d_sup: Vec<i64>,
    d_reader: Vec<i64>,
}

/// The figures a detection verdict rests on, in microseconds.
struct Verdict {
    floor50: f64,
    sup50: f64,
    ratio: f64,
    paired50: f64,
    paired_ratio: f64,
    /// Samples in which the supervisor side was seen more than [`LATE_NS`] after the plain client.
    sup_late: usize,
    /// Samples in which the plain client got the event more than [`LATE_NS`] after the supervisor.
    plain_late: usize,
    n: usize,
}

/// A paired difference this large is a thread waiting for a vCPU, not work.
const LATE_NS: i64 = 500_000;

impl Verdict {
    /// Which figure dominates the ratio of medians: the supervisor's own cost or scheduling noise.
    fn dominates(&self) -> String {
        let gap = self.sup50 - self.floor50;
        let outliers = format!(
            "in {} of {} samples the supervisor side was seen > 0.5 ms after the plain client, \
             in {} the plain client > 0.5 ms after it (a thread waiting for a vCPU behind \
             Chromium's)",
            self.sup_late, self.n, self.plain_late
        );
        if (gap - self.paired50).abs() > self.paired50.abs().max(10.0) {
            format!(
                "Scheduling outliers dominate the ratio of medians (difference of medians \
                 {gap:+.1} us vs paired median {:+.1} us): {outliers}; Chromium's own spread turns \
                 those into a shift of the median",
                self.paired50
            )
        } else {
            format!(
                "The supervisor's own cost dominates the gap (difference of medians {gap:+.1} us \
                 ~ paired median {:+.1} us); {outliers}",
                self.paired50
            )
        }
    }
}

impl Detection {
    fn new(n: usize) -> Detection {
        Detection {
            floor: new_hist(),
            sup: new_hist(),
            reader: new_hist(),
            d_sup: Vec::with_capacity(n),
            d_reader: Vec::with_capacity(n),
        }
    }

    fn add(&mut self, t0: Instant, t0_wall: i64, floor_at: Instant, seen: &Seen) {
        let floor = (floor_at - t0).as_nanos() as i64;
        let reader = seen.opened_at_ns - t0_wall;
        record(&mut self.floor, floor_at - t0);
        record(&mut self.sup, seen.at - t0);
        record(&mut self.reader, Duration::from_nanos(reader.max(1) as u64));
        self.d_sup.push(signed_ns(seen.at, floor_at));
        self.d_reader.push(reader - floor);
    }

    fn verdict(&self) -> Verdict {
        let floor50 = q_us(&self.floor, 0.5);
        let sup50 = q_us(&self.sup, 0.5);
        let paired50 = Spread::of(&self.d_sup).p50;
        Verdict {
            floor50,
            sup50,
            ratio: sup50 / floor50,
            paired50,
            paired_ratio: (floor50 + paired50) / floor50,
            sup_late: self.d_sup.iter().filter(|d| **d > LATE_NS).count(),
            plain_late: self.d_sup.iter().filter(|d| **d < -LATE_NS).count(),
            n: self.d_sup.len(),
        }
    }
}

// ------------------------------------------------------------------------------------------------
// The two answer paths of phase 2.

/// Settles the page, then raises an alert on it from the trigger connection; returns when the
/// trigger's write started.
fn raise_alert(trig: &mut RawClient, session: &str) -> Instant {
    settle(trig, session);
    let start = Instant::now();
    let id = trig.send(
        "Runtime.evaluate",
        json!({"expression": TRIGGER}),
        Some(session),
    );
    reply_by(trig, id, start + STEP);
    start
}

/// (a): triggers an alert on the supervised page, waits (untimed) until the snapshot shows it,
/// then times `respond_to_dialog`.
fn supervised_answer(sup: &Supervisor, trig: &mut RawClient, session: &str) -> Duration {
    raise_alert(trig, session);
    let snap = sup
        .wait_for(STEP, |s| !s.pending_dialogs.is_empty())
        .unwrap_or_else(|| panic!("the supervisor saw no dialog within {STEP:?}"));
    let did = snap.pending_dialogs[0].id.clone();
    let t = Instant::now();
    sup.respond_to_dialog(DialogAction::Accept, None, Some(&did))
        .expect("respond_to_dialog");
    let el = t.elapsed();
    no_dialog_by(
        sup,
        Instant::now()
            .checked_add(STEP)
            .expect("a deadline within range"),
    );
    el
}

/// (b): triggers an alert on the plain client's page, waits for its opening event, then times
/// `Page.handleJavaScriptDialog` until the reply. Returns the time and the message order seen.
fn plain_answer(
    p2: &mut RawClient,
    s2: &str,
    trig: &mut RawClient,
    session: &str,
) -> (Duration, Vec<String>) {
    let start = raise_alert(trig, session);
    event_by(p2, "Page.javascriptDialogOpening", start + STEP);
    p2.events.clear();
    let t = Instant::now();
    let hid = p2.send(
        "Page.handleJavaScriptDialog",
        json!({"accept": true}),
        Some(s2),
    );
    let mut order = Vec::new();
    let deadline = t + STEP;
    loop {
        let v = recv_by(
            p2,
            deadline,
            "the plain client's Page.handleJavaScriptDialog reply",
        );
        if v.get("id").and_then(Value::as_u64) == Some(hid) {
            if let Some(e) = v.get("error") {
                panic!("Page.handleJavaScriptDialog failed: {e}");
            }
            break;
        }
        order.push(v["method"].as_str().unwrap_or("?").to_string());
    }
    let el = t.elapsed();
    order.push("reply".into());
    (el, order)
}

// ------------------------------------------------------------------------------------------------
// CDP helpers, each with a deadline.

/// `Target.createTarget {url: about:blank, newWindow: true}`; returns once the page has loaded.
fn new_window(c: &mut RawClient) -> String {
    let target = c.call(
        "Target.createTarget",
        json!({"url": "about:blank", "newWindow": true}),
        None,
    )["targetId"]
        .as_str()
        .expect("Target.createTarget's targetId")
        .to_string();
    let s = bare_session(c, &target);
    let deadline = Instant::now()
        .checked_add(STEP)
        .expect("a deadline within range");
    while !page_state(c, &s).starts_with("complete") {
        assert!(
            Instant::now() < deadline,
            "the new page {target} never finished loading about:blank"
        );
        thread::sleep(Duration::from_millis(5));
    }
    c.call("Target.detachFromTarget", json!({"sessionId": s}), None);
    target
}

/// Attaches a bare flat session (no domain enabled) to `target`.
fn bare_session(c: &mut RawClient, target: &str) -> String {
    c.call(
        "Target.attachToTarget",
        json!({"targetId": target, "flatten": true}),
        None,
    )["sessionId"]
        .as_str()
        .expect("sessionId")
        .to_string()
}

/// `document.readyState/visibilityState` of the page behind `session`.
fn page_state(c: &mut RawClient, session: &str) -> String {
    c.call(
        "Runtime.evaluate",
        json!({"expression": "document.readyState + '/' + document.visibilityState",
            "returnByValue": true}),
        Some(session),
    )["result"]["value"]
        .as_str()
        .unwrap_or("?")
        .to_string()
}

/// One `Runtime.evaluate("1")` round trip on `session`: returns once the page's main thread has
/// run a task, i.e. is done with the previous dialog's aftermath.
fn settle(c: &mut RawClient, session: &str) {
    let t = Instant::now();
    let id = c.send(
        "Runtime.evaluate",
        json!({"expression": "1"}),
        Some(session),
    );
    reply_by(c, id, t + STEP);
}

/// Reads one message, panicking once `deadline` has passed (each read also has the client's 10 s
/// socket time-out).
fn recv_by(c: &mut RawClient, deadline: Instant, what: &str) -> Value {
    assert!(
        Instant::now() < deadline,
        "timed out waiting for {what} ({STEP:?})"
    );
    c.recv()
}

/// Reads until the reply to `id` (events are queued), with a deadline; panics on a CDP error.
fn reply_by(c: &mut RawClient, id: u64, deadline: Instant) -> Value {
    loop {
        let v = recv_by(c, deadline, "a command reply");
        if v.get("id").and_then(Value::as_u64) == Some(id) {
            if let Some(e) = v.get("error") {
                panic!("CDP error for id {id}: {e}");
            }
            return v["result"].clone();
        }
        if v.get("method").is_some() {
            c.events.push_back(v);
        }
    }
}

/// Returns the first event named `method` (queued ones first), with a deadline.
fn event_by(c: &mut RawClient, method: &str, deadline: Instant) -> Value {
    if let Some(i) = c.events.iter().position(|e| e["method"] == method) {
        return c.events.remove(i).expect("queued event");
    }
    loop {
        let v = recv_by(c, deadline, method);
        if v["method"] == method {
            return v;
        }
        if v.get("method").is_some() {
            c.events.push_back(v);
        }
    }
}

/// Waits until the snapshot has no pending dialog.
fn no_dialog_by(sup: &Supervisor, deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now());
    assert!(
        sup.wait_for(left, |s| s.pending_dialogs.is_empty())
            .is_some(),
        "the supervisor's snapshot still shows a dialog after {STEP:?}"
    );
}

// ------------------------------------------------------------------------------------------------
// Clocks and statistics.

/// The wall clock in ns since the epoch (the clock of `PendingDialog::opened_at`).
fn epoch_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// `a - b` in signed nanoseconds.
fn signed_ns(a: Instant, b: Instant) -> i64 {
    if a >= b {
        (a - b).as_nanos() as i64
    } else {
        -((b - a).as_nanos() as i64)
    }
}

/// p10/p50/p90 of signed nanosecond samples, in microseconds, and how many were negative.
struct Spread {
    p10: f64,
    p50: f64,
    p90: f64,
    negative: usize,
    n: usize,
}

impl Spread {
    fn of(v: &[i64]) -> Spread {
        let mut s = v.to_vec();
        s.sort_unstable();
        let q = |q: f64| {
            if s.is_empty() {
                return 0.0;
            }
            let i = ((q * (s.len() - 1) as f64).round() as usize).min(s.len() - 1);
            s[i] as f64 / 1000.0
        };
        Spread {
            p10: q(0.1),
            p50: q(0.5),
            p90: q(0.9),
            negative: s.iter().filter(|d| **d < 0).count(),
            n: s.len(),
        }
    }

    fn show(&self) -> String {
        format!(
            "p10 {:+.1} / p50 {:+.1} / p90 {:+.1} (supervisor first in {} of {})",
            self.p10, self.p50, self.p90, self.negative, self.n
        )
    }
}

// ------------------------------------------------------------------------------------------------
// The supervisor-side observer of phase 1.

/// How one detection sample observes the supervisor.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// Poll `with_snapshot`, `yield_now()` between checks.
    Yield = 0,
    /// Block in `sup.wait_for` (the condvar the reader notifies after a publish).
    Wait = 1,
}

impl Mode {
    fn short(self) -> &'static str {
        match self {
            Mode::Yield => "poller",
            Mode::Wait => "wait_for",
        }
    }

    fn row(self) -> &'static str {
        match self {
            Mode::Yield => "  supervisor: poller (yield) saw it",
            Mode::Wait => "  supervisor: wait_for (condvar) woke with it",
        }
    }
}

/// What the observer saw.
struct Seen {
    id: String,
    /// When the observer saw the dialog in the snapshot.
    at: Instant,
    /// The dialog's `opened_at` (the reader's wall-clock stamp), ns since the epoch.
    opened_at_ns: i64,
}

/// A thread that, once armed, waits (polling or blocked, per its mode) until a dialog it has not
/// reported yet is pending, and stamps when it saw it; every wait ends at a deadline.
struct Observer {
    go: Option<mpsc::Sender<()>>,
    armed: Arc<AtomicBool>,
    seen: mpsc::Receiver<Option<Seen>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Observer {
    fn start(sup: Arc<Supervisor>, mode: Mode) -> Observer {
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (seen_tx, seen_rx) = mpsc::channel();
        let armed = Arc::new(AtomicBool::new(false));
        let a = Arc::clone(&armed);
        let is_new =
            |s: &Snapshot, last: &str| s.pending_dialogs.first().is_some_and(|d| d.id != last);
        let seen = |s: &Snapshot, at: Instant| Seen {
            id: s.pending_dialogs[0].id.clone(),
            at,
            opened_at_ns: (s.pending_dialogs[0].opened_at * 1e9) as i64,
        };
        let thread = thread::Builder::new()
            .name(format!("observer-{}", mode.short()))
            .spawn(move || {
                let mut last = String::new();
                while go_rx.recv().is_ok() {
                    let deadline = Instant::now()
                        .checked_add(STEP)
                        .expect("a deadline within range");
                    a.store(true, Ordering::Release);
                    let found = match mode {
                        Mode::Wait => {
                            let l = last.clone();
                            sup.wait_for(STEP, move |s| is_new(s, &l))
                                .map(|s| seen(&s, Instant::now()))
                        }
                        Mode::Yield => loop {
                            if sup.with_snapshot(|s| is_new(s, &last)) {
                                let at = Instant::now();
                                break Some(sup.with_snapshot(|s| seen(s, at)));
                            }
                            if Instant::now() >= deadline {
                                break None;
                            }
                            thread::yield_now();
                        },
                    };
                    a.store(false, Ordering::Release);
                    if let Some(s) = &found {
                        last.clone_from(&s.id);
                    }
                    if seen_tx.send(found).is_err() {
                        return;
                    }
                }
            })
            .expect("spawn the observer thread");
        Observer {
            go: Some(go_tx),
            armed,
            seen: seen_rx,
            thread: Some(thread),
        }
    }

    /// Starts one observation and returns once the thread is at it.
    fn arm(&self) {
        self.go
            .as_ref()
            .expect("observer running")
            .send(())
            .expect("the observer thread is gone");
        let deadline = Instant::now()
            .checked_add(Duration::from_secs(1))
            .expect("a deadline within range");
        while !self.armed.load(Ordering::Acquire) {
            assert!(
                Instant::now() < deadline,
                "the observer thread never started"
            );
            thread::yield_now();
        }
    }

    /// What the observer saw; panics when it saw nothing within its deadline.
    fn seen(&self) -> Seen {
        match self.seen.recv_timeout(STEP + Duration::from_secs(1)) {
            Ok(Some(s)) => s,
            Ok(None) => panic!("the supervisor's snapshot showed no dialog within {STEP:?}"),
            Err(e) => panic!("the observer thread did not report: {e}"),
        }
    }

    fn stop(mut self) {
        drop(self.go.take());
        if let Some(t) = self.thread.take() {
            assert!(t.join().is_ok(), "the observer thread panicked");
        }
    }
}
