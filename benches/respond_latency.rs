//! Dialog answer round trip: `respond_to_dialog` against raw CDP round trips, on the fake browser.
//!
//! Custom harness (`harness = false`): `cargo bench --bench respond_latency`.
//!
//! Every variant talks to the same `FakeBrowser` (one thread per connection, `TCP_NODELAY`), in
//! the same run, interleaved sample by sample:
//! * `respond_to_dialog`: the fake opens an alert, the supervisor's snapshot shows it, then the
//!   timed call writes `Page.handleJavaScriptDialog` and returns after the fake's
//!   `javascriptDialogClosed` event and reply were read and the close published.
//! * `sup.call("Browser.getVersion", Route::Browser)`: a plain round trip through the supervisor.
//! * raw client `Browser.getVersion`: a plain tungstenite client, request then blocking read.
//! * raw client `Page.handleJavaScriptDialog`: the same client attached to the page answers an
//!   alert itself (the same fake work as the supervisor's answer: closed event + reply).
//!
//! Target (issue): `respond_to_dialog` <= 1.1 x the raw round trip + 20 us.
//!
//! Environment: `RESPOND_SAMPLES` (default 2000).

mod common;

use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{Config, DialogAction, Route, Supervisor, SupervisorRegistry};
use common::*;
use hdrhistogram::Histogram;
use serde_json::json;

const WARMUP: usize = 200;

fn main() {
    let (date, nproc) = machine();
    let samples: usize = env_or("RESPOND_SAMPLES", 2000, |v| *v > 0);
    let started = Instant::now();
    println!("respond_latency: {date}, nproc = {nproc}");

    let fake = FakeBrowser::start().expect("start the fake browser");
    let registry = SupervisorRegistry::new(Config::default());
    let sup = registry
        .get_or_start("respond", &fake.ws_url())
        .expect("start the supervisor");
    let mut raw = RawClient::connect(&fake.ws_url());
    let session = raw.attach_sequence(None);
    raw.events.clear();

    let free = measure(&fake, &sup, &mut raw, &session, samples);
    let pinned = pin_process_to_cpu0().then(|| measure(&fake, &sup, &mut raw, &session, samples));
    println!(
        "{samples} samples per variant after {WARMUP} warm-up, interleaved; every variant talks \
         to the same FakeBrowser over loopback (the fake serialises each answer with serde_json \
         and records every command; a dialog answer also sends javascriptDialogClosed first)."
    );
    let free_line = report(
        "free: the scheduler places every thread (a reply often wakes a thread on the idle vCPU)",
        &free,
    );
    let pinned_line = match &pinned {
        Some(p) => report(
            "pinned: every thread of the process on CPU 0 (no idle-vCPU wake-ups; the work alone)",
            p,
        ),
        None => "pinned run skipped (sched_setaffinity failed)".to_string(),
    };
    println!("Total bench time: {:.1} s", started.elapsed().as_secs_f64());
    println!();
    println!(
        "README: respond_latency ({date}, nproc={nproc}, fake browser, loopback, {samples} \
         samples): {free_line}; {pinned_line}."
    );
    drop(raw);
    drop(registry);
    drop(fake);
}

/// Prints one run's table and verdicts; returns its summary for the README line.
fn report(title: &str, r: &Run) -> String {
    println!();
    println!("{title}");
    lat_header();
    lat_row("raw client: Browser.getVersion round trip", &r.raw, None);
    lat_row(
        "raw client: Page.handleJavaScriptDialog",
        &r.raw_dialog,
        Some(&r.raw),
    );
    lat_row(
        "sup.call(Browser.getVersion, Route::Browser)",
        &r.call,
        Some(&r.raw),
    );
    lat_row("sup.respond_to_dialog (Accept)", &r.resp, Some(&r.raw));
    let r50 = q_us(&r.resp, 0.5);
    let r99 = q_us(&r.resp, 0.99);
    let mut verdicts = Vec::new();
    for (name, h) in [
        ("raw Browser.getVersion", &r.raw),
        ("raw Page.handleJavaScriptDialog", &r.raw_dialog),
        ("sup.call Browser.getVersion", &r.call),
    ] {
        let lim50 = 1.1 * q_us(h, 0.5) + 20.0;
        let lim99 = 1.1 * q_us(h, 0.99) + 20.0;
        let ok = r50 <= lim50;
        println!(
            "Target respond_to_dialog <= 1.1 x {name} + 20 us: p50 {} ({r50:.1} us vs limit \
             {lim50:.1} us, ratio {:.2}x); p99 {} ({r99:.1} us vs limit {lim99:.1} us).",
            verdict(ok),
            r50 / q_us(h, 0.5),
            verdict(r99 <= lim99)
        );
        verdicts.push(format!("vs {name}: {}", verdict(ok)));
    }
    let short = title.split(':').next().unwrap_or(title);
    format!(
        "{short}: respond_to_dialog p50 {r50:.1} us / p99 {r99:.1} us vs raw Browser.getVersion \
         {:.1} / {:.1} us, raw handleJavaScriptDialog {:.1} / {:.1} us, sup.call {:.1} / {:.1} \
         us; target <= 1.1x raw + 20 us at p50: {}",
        q_us(&r.raw, 0.5),
        q_us(&r.raw, 0.99),
        q_us(&r.raw_dialog, 0.5),
        q_us(&r.raw_dialog, 0.99),
        q_us(&r.call, 0.5),
        q_us(&r.call, 0.99),
        verdicts.join(", ")
    )
}

/// The four variants' histograms: respond_to_dialog, sup.call, raw getVersion, raw dialog answer.
struct Run {
    resp: Histogram<u64>,
    call: Histogram<u64>,
    raw: Histogram<u64>,
    raw_dialog: Histogram<u64>,
}

/// One interleaved measurement of every variant.
fn measure(
    fake: &FakeBrowser,
    sup: &Supervisor,
    raw: &mut RawClient,
    session: &str,
    samples: usize,
) -> Run {
    let session = session.to_string();
    let mut h_resp = new_hist();
    let mut h_call = new_hist();
    let mut h_raw = new_hist();
    let mut h_raw_dialog = new_hist();
    let t_wait = Duration::from_secs(5);
    for i in 0..WARMUP + samples {
        let keep = i >= WARMUP;
        // 1. respond_to_dialog.
        fake.open_dialog("alert", "respond me", "");
        let d = sup.wait_for_dialog(t_wait).expect("the dialog");
        let t0 = Instant::now();
        sup.respond_to_dialog(DialogAction::Accept, None, Some(&d.id))
            .expect("respond_to_dialog");
        let el = t0.elapsed();
        if keep {
            record(&mut h_resp, el);
        }
        // The raw client received the opening event too (the fake sends the closed event only
        // to the answering connection): drop it.
        raw.wait_event("Page.javascriptDialogOpening");
        raw.events.clear();
        // 2. sup.call, browser-level.
        let t0 = Instant::now();
        sup.call(
            "Browser.getVersion",
            json!({}),
            Route::Browser,
            Duration::from_secs(5),
        )
        .expect("Browser.getVersion");
        let el = t0.elapsed();
        if keep {
            record(&mut h_call, el);
        }
        // 3. raw client, browser-level.
        let t0 = Instant::now();
        raw.call("Browser.getVersion", json!({}), None);
        let el = t0.elapsed();
        if keep {
            record(&mut h_raw, el);
        }
        // 4. raw client answers a dialog itself.
        fake.open_dialog("alert", "raw answer", "");
        raw.wait_event("Page.javascriptDialogOpening");
        // The supervisor must have seen this dialog too, or its remote close below could be
        // mistaken for the next sample's dialog closing.
        sup.wait_for_dialog(t_wait)
            .expect("the supervisor sees the dialog");
        let t0 = Instant::now();
        raw.call(
            "Page.handleJavaScriptDialog",
            json!({"accept": true}),
            Some(&session),
        );
        let el = t0.elapsed();
        if keep {
            record(&mut h_raw_dialog, el);
        }
        // The fake told only the raw client that its dialog closed: tell every connection (the
        // supervisor records a remote close) and let both settle before the next sample.
        fake.close_dialog_remotely();
        sup.wait_for(t_wait, |s| s.pending_dialogs.is_empty())
            .expect("the remote close");
        raw.wait_event("Page.javascriptDialogClosed");
        raw.events.clear();
    }
    Run {
        resp: h_resp,
        call: h_call,
        raw: h_raw,
        raw_dialog: h_raw_dialog,
    }
}
