//! Dialog detection latency: from the server writing `Page.javascriptDialogOpening` to a thread
//! polling `sup.snapshot().pending_dialogs` seeing it.
//!
//! Custom harness (`harness = false`): `cargo bench --bench detect_latency`.
//!
//! * Server: the bench's own minimal CDP peer (`common::Peer`) on loopback; the opening event is
//!   pre-encoded and written with one `write_all`; t0 is taken just before the write.
//! * Subject: a supervisor attached to the peer; a spinner thread polls `sup.snapshot()` until a
//!   dialog with a new id is pending and stamps the time. The main thread then answers the dialog
//!   (`respond_to_dialog`, which returns once the close is published) before the next sample.
//! * Baseline (same run, same peer, interleaved sample by sample): a plain tungstenite client
//!   blocked in `read()` on its own thread receives the same frame and parses it into a
//!   `serde_json::Value`, then stamps the time.
//!
//! Environment: `DETECT_SAMPLES` (default 3000).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use cdp_supervisor::{Config, DialogAction};
use common::*;
use tungstenite::Message;

const WARMUP: usize = 200;
const TARGET_P50_US: f64 = 20.0;
const TARGET_P99_US: f64 = 200.0;

fn main() {
    let (date, nproc) = machine();
    let samples: usize = env_or("DETECT_SAMPLES", 3000, |v| *v > 0);
    let started = Instant::now();
    println!("detect_latency: {date}, nproc = {nproc}");

    let peer = Peer::start();
    // No popup watcher: its connection to the peer would take the place the baseline client's
    // connection is looked for at (`peer.conn(1)`), and detection does not go through it.
    let registry = cdp_supervisor::unversioned::registry_without_popup_watcher(Config::default());
    let sup = registry
        .get_or_start("detect", &peer.ws_url())
        .expect("start the supervisor");
    let conn = peer.conn(0);
    let session = conn
        .wait_page_session(Duration::from_secs(5))
        .expect("the page session");
    let opening = frame(&dialog_opening(&session, "detect me"));

    // The spinner: polls the snapshot, reports each newly pending dialog id with its time.
    let stop = Arc::new(AtomicBool::new(false));
    let (seen_tx, seen_rx) = mpsc::channel::<(String, Instant)>();
    let spinner = {
        let sup = Arc::clone(&sup);
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            let mut last = String::new();
            while !stop.load(Ordering::Relaxed) {
                let found = sup.with_snapshot(|s| {
                    s.pending_dialogs
                        .first()
                        .filter(|d| d.id != last)
                        .map(|d| d.id.clone())
                });
                if let Some(id) = found {
                    let t = Instant::now();
                    last = id.clone();
                    let _ = seen_tx.send((id, t));
                }
                std::hint::spin_loop();
            }
        })
    };

    // The baseline client: blocked in read() on its own thread.
    let (base_tx, base_rx) = mpsc::channel::<Instant>();
    let base_client = {
        let url = peer.ws_url();
        thread::spawn(move || {
            let mut c = RawClient::connect(&url);
            while let Ok(Message::Text(t)) = c.ws.read() {
                let v: serde_json::Value = serde_json::from_str(t.as_str()).expect("JSON");
                let at = Instant::now();
                std::hint::black_box(&v);
                if base_tx.send(at).is_err() {
                    return;
                }
            }
        })
    };
    let base_conn = peer.conn(1);

    let mut h_sup = new_hist();
    let mut h_base = new_hist();
    for i in 0..WARMUP + samples {
        // Supervisor sample.
        let t0 = conn.write_stamped(&opening);
        let (id, seen) = seen_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the spinner saw the dialog");
        if i >= WARMUP {
            record(&mut h_sup, seen - t0);
        }
        sup.respond_to_dialog(DialogAction::Accept, None, Some(&id))
            .expect("answer the dialog");
        assert!(sup.snapshot().pending_dialogs.is_empty());
        // Baseline sample.
        let t0 = base_conn.write_stamped(&opening);
        let seen = base_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the baseline client got the frame");
        if i >= WARMUP {
            record(&mut h_base, seen - t0);
        }
        thread::sleep(Duration::from_micros(200));
    }
    stop.store(true, Ordering::Relaxed);
    let _ = spinner.join();

    println!(
        "{samples} samples per variant after {WARMUP} warm-up, interleaved; t0 = just before the \
         peer's write_all of the pre-encoded Page.javascriptDialogOpening frame; 200 us pause \
         between samples. Threads while measuring: supervisor reader (blocked in peek), spinner \
         (busy), peer/baseline threads idle; the baseline client is blocked in read()."
    );
    println!();
    lat_header();
    lat_row("baseline: tungstenite read() + Value parse", &h_base, None);
    lat_row(
        "supervisor: write -> snapshot().pending_dialogs",
        &h_sup,
        Some(&h_base),
    );
    println!();
    let (p50, p99) = (q_us(&h_sup, 0.5), q_us(&h_sup, 0.99));
    let (b50, b99) = (q_us(&h_base, 0.5), q_us(&h_base, 0.99));
    let ok50 = p50 <= TARGET_P50_US;
    let ok99 = p99 <= TARGET_P99_US;
    println!(
        "Target p50 <= {TARGET_P50_US} us: {} ({p50:.1} us; baseline {b50:.1} us, supervisor adds \
         {:.1} us). Target p99 <= {TARGET_P99_US} us: {} ({p99:.1} us; baseline {b99:.1} us).",
        verdict(ok50),
        p50 - b50,
        verdict(ok99)
    );
    println!("Total bench time: {:.1} s", started.elapsed().as_secs_f64());
    println!();
    println!(
        "README: detect_latency ({date}, nproc={nproc}): dialog event written -> visible in \
         snapshot().pending_dialogs p50 {p50:.1} us / p99 {p99:.1} us vs plain tungstenite \
         read+parse p50 {b50:.1} us / p99 {b99:.1} us ({} samples each, loopback); targets \
         p50 <= 20 us {}, p99 <= 200 us {}.",
        samples,
        verdict(ok50),
        verdict(ok99)
    );
    drop(registry);
    drop(peer);
    let _ = base_client.join();
}
