//! Start latency: `registry.get_or_start` until attached, on the fake browser and on real
//! headless Chromium, against the raw attach sequence done by a plain tungstenite client.
//!
//! Custom harness (`harness = false`): `cargo bench --bench start`.
//!
//! * Fake: [`FAKE_STARTS`] x (`get_or_start` timed, then `stop`, untimed), one task id reused.
//!   Baseline: a plain client doing connect + the same attach sequence on the same fake.
//! * Chromium (skipped loudly when none is installed): [`CHROMIUM_STARTS`] samples per variant,
//!   interleaved, on the same `about:blank` page; each connection is closed after its sample,
//!   which detaches its session. The raw sequence: connect (TCP + WebSocket handshake),
//!   `Target.getTargets`, `Target.attachToTarget {flatten}`, then `Page.enable`,
//!   `Runtime.enable`, `Page.getFrameTree`, `Target.setAutoAttach` pipelined and all four
//!   replies awaited — what `get_or_start` did before issue 32; by default it no longer sends
//!   `Runtime.enable` (SPEC §19), so the raw sequence is one command longer than its own.

mod common;

use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::unversioned::{LaunchedBrowser, find_browser};
use cdp_supervisor::{Config, SupervisorRegistry};
use common::*;

const FAKE_STARTS: usize = 500;
const CHROMIUM_STARTS: usize = 150;
const WARMUP: usize = 10;

/// Alternates `sup` and `raw` samples on `url`.
fn measure(url: &str, n: usize) -> (hdrhistogram::Histogram<u64>, hdrhistogram::Histogram<u64>) {
    let registry = SupervisorRegistry::new(Config::default());
    let mut h_sup = new_hist();
    let mut h_raw = new_hist();
    for i in 0..WARMUP + n {
        let t0 = Instant::now();
        let sup = registry.get_or_start("start", url).expect("get_or_start");
        let el = t0.elapsed();
        assert!(sup.snapshot().page_session_id.is_some());
        drop(sup);
        registry.stop("start");
        if i >= WARMUP {
            record(&mut h_sup, el);
        }
        let t0 = Instant::now();
        let mut c = RawClient::connect(url);
        c.attach_sequence(None);
        let el = t0.elapsed();
        let _ = c.ws.close(None);
        let _ = c.ws.flush();
        drop(c);
        if i >= WARMUP {
            record(&mut h_raw, el);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    (h_sup, h_raw)
}

fn main() {
    let (date, nproc) = machine();
    let started = Instant::now();
    println!("start: {date}, nproc = {nproc}");
    println!(
        "Timed: get_or_start (connect, WebSocket handshake, reader + watchdog threads, attach \
         sequence, first snapshot) vs a plain client's connect + the same attach sequence. \
         {WARMUP} warm-up samples each; stop/close untimed."
    );

    let fake = FakeBrowser::start().expect("start the fake browser");
    let (f_sup, f_raw) = measure(&fake.ws_url(), FAKE_STARTS);
    drop(fake);
    println!();
    println!("Fake browser ({FAKE_STARTS} samples per variant, interleaved):");
    lat_header();
    lat_row("raw client: connect + attach sequence", &f_raw, None);
    lat_row("get_or_start -> attached", &f_sup, Some(&f_raw));
    let fp50_ms = q_us(&f_sup, 0.5) / 1000.0;
    let fake_ok = fp50_ms <= 2.0;
    println!(
        "Target fake p50 <= 2 ms: {} ({:.3} ms; p99 {:.3} ms).",
        verdict(fake_ok),
        fp50_ms,
        q_us(&f_sup, 0.99) / 1000.0
    );

    let mut chrome_summary = "Chromium: SKIPPED (none installed)".to_string();
    match find_browser(None) {
        Ok(Some(exe)) => {
            let browser = LaunchedBrowser::launch(&exe).expect("launch Chromium");
            // Let the browser settle (first page load) before measuring.
            std::thread::sleep(Duration::from_millis(500));
            let (c_sup, c_raw) = measure(browser.ws_url(), CHROMIUM_STARTS);
            drop(browser);
            println!();
            println!(
                "Headless Chromium {} ({CHROMIUM_STARTS} samples per variant, interleaved, same \
                 about:blank page):",
                exe.display()
            );
            lat_header();
            lat_row("raw client: connect + attach sequence", &c_raw, None);
            lat_row("get_or_start -> attached", &c_sup, Some(&c_raw));
            let ratio = q_us(&c_sup, 0.5) / q_us(&c_raw, 0.5);
            let ok = ratio <= 1.2;
            println!(
                "Target Chromium p50 within 1.2x the raw attach sequence: {} ({ratio:.2}x: {:.3} \
                 ms vs {:.3} ms).",
                verdict(ok),
                q_us(&c_sup, 0.5) / 1000.0,
                q_us(&c_raw, 0.5) / 1000.0
            );
            chrome_summary = format!(
                "Chromium get_or_start p50 {:.2} ms / p99 {:.2} ms vs raw attach sequence {:.2} / \
                 {:.2} ms ({ratio:.2}x, target 1.2x {})",
                q_us(&c_sup, 0.5) / 1000.0,
                q_us(&c_sup, 0.99) / 1000.0,
                q_us(&c_raw, 0.5) / 1000.0,
                q_us(&c_raw, 0.99) / 1000.0,
                verdict(ok)
            );
        }
        _ => println!("SKIPPED: no Chromium (the real-browser half of the start bench)"),
    }
    println!("Total bench time: {:.1} s", started.elapsed().as_secs_f64());
    println!();
    println!(
        "README: start ({date}, nproc={nproc}): fake get_or_start p50 {:.2} ms / p99 {:.2} ms vs \
         raw connect+attach {:.2} / {:.2} ms (target p50 <= 2 ms {}); {chrome_summary}.",
        q_us(&f_sup, 0.5) / 1000.0,
        q_us(&f_sup, 0.99) / 1000.0,
        q_us(&f_raw, 0.5) / 1000.0,
        q_us(&f_raw, 0.99) / 1000.0,
        verdict(fake_ok)
    );
}
