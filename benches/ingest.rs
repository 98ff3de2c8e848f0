//! Ingest throughput: CDP events per second one supervisor applies, measured until its snapshot
//! reflects the last one.
//!
//! Custom harness (`harness = false`): `cargo bench --bench ingest`.
//!
//! * Server: the bench's own minimal CDP peer (`common::Peer`, same attach answers as the fake)
//!   on loopback. The event stream is pre-encoded once (a cycle of [`CYCLE`] WebSocket frames,
//!   repeated): per 10 events 6 `Runtime.consoleAPICalled` errors, 2 `Page.frameNavigated` of one
//!   of [`CHILD_FRAMES`] child frames (attached before the run, URL alternating so each
//!   navigation changes the tree), one `Page.javascriptDialogOpening` and one
//!   `Page.javascriptDialogClosed`. The main thread writes the cycles with `write_all` as fast as
//!   the socket takes them, then one console error with a unique marker; the clock stops when
//!   `sup.wait_for` sees the marker as the last console entry.
//! * Baseline (same run, same peer, same bytes): a plain tungstenite client that reads the
//!   frames and parses each into a `serde_json::Value` (the floor of receiving + parsing), and
//!   one that only receives (no parse).
//!
//! Environment: `INGEST_EVENTS` (default 300000) events per run.

mod common;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use cdp_supervisor::{Config, SupervisorRegistry};
use common::*;
use tungstenite::Message;

/// Events in the pre-encoded cycle.
const CYCLE: usize = 1000;
/// Child frames navigated in the stream.
const CHILD_FRAMES: usize = 4;
/// Runs per variant (interleaved).
const RUNS: usize = 3;
/// Target from the issue.
const TARGET_EPS: f64 = 300_000.0;

/// The cycle of mixed events, pre-encoded as WebSocket frames.
fn cycle_bytes(session: &str) -> (Vec<u8>, Vec<usize>, [usize; 4]) {
    let mut out = Vec::new();
    let mut ends = Vec::with_capacity(CYCLE);
    let mut navs = 0usize;
    let mut counts = [0usize; 4]; // console, nav, open, close
    for j in 0..CYCLE {
        let text = match j % 10 {
            1 | 6 => {
                let f = navs % CHILD_FRAMES;
                let variant = (navs / CHILD_FRAMES) % 2;
                navs += 1;
                counts[1] += 1;
                frame_navigated(
                    session,
                    &format!("FRAME-{f}"),
                    &format!("http://peer.test/frame/{f}?v={variant}"),
                )
            }
            4 => {
                counts[2] += 1;
                dialog_opening(session, &format!("ingest dialog {j}"))
            }
            8 => {
                counts[3] += 1;
                dialog_closed(session)
            }
            _ => {
                counts[0] += 1;
                console_error(session, &format!("ingest error {j}"))
            }
        };
        push_frame(&mut out, &text);
        ends.push(out.len());
    }
    (out, ends, counts)
}

struct Run {
    secs: f64,
    events: usize,
    publishes: u64,
}

impl Run {
    fn eps(&self) -> f64 {
        self.events as f64 / self.secs
    }
}

fn main() {
    let (date, nproc) = machine();
    let events: usize = env_or("INGEST_EVENTS", 300_000, |v| *v >= CYCLE);
    let cycles = events / CYCLE;
    let started = Instant::now();
    println!("ingest: {date}, nproc = {nproc}");

    let peer = Peer::start();
    let registry = SupervisorRegistry::new(Config::default());
    let sup = registry
        .get_or_start("ingest", &peer.ws_url())
        .expect("start the supervisor");
    let conn = peer.conn(0);
    let session = conn
        .wait_page_session(Duration::from_secs(5))
        .expect("the page session");
    let mut setup = Vec::new();
    for f in 0..CHILD_FRAMES {
        push_frame(&mut setup, &frame_attached(&session, &format!("FRAME-{f}")));
        push_frame(
            &mut setup,
            &frame_navigated(
                &session,
                &format!("FRAME-{f}"),
                &format!("http://peer.test/frame/{f}?v=1"),
            ),
        );
    }
    conn.write(&setup);
    sup.wait_for(Duration::from_secs(5), |s| {
        s.frame_tree.children.len() == CHILD_FRAMES
    })
    .expect("the child frames in the snapshot");
    let (cycle, ends, counts) = cycle_bytes(&session);
    let frame_bytes = cycle.len() as f64 / CYCLE as f64;
    println!(
        "Stream: {cycles} x a pre-encoded cycle of {CYCLE} ({} console errors, \
         {} frameNavigated over {CHILD_FRAMES} child frames, {} dialog openings, {} closings; \
         {frame_bytes:.0} B/frame on average) + 1 marker console error, written by the main thread \
         on loopback; {RUNS} runs per variant, interleaved.",
        counts[0], counts[1], counts[2], counts[3]
    );
    println!(
        "Supervisor: dialog_policy = {} (each opening arms the watchdog, each closing cancels it).",
        registry.config().dialog_policy().as_str()
    );

    // Baseline clients: connection 1 parses, connection 2 only receives.
    let best = |runs: &[Run]| runs.iter().map(Run::eps).fold(0.0f64, f64::max);
    let median = |runs: &[Run]| {
        let mut v: Vec<f64> = runs.iter().map(Run::eps).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut baselines = Vec::new();
    for (i, parse) in [(1usize, true), (2, false)] {
        let url = peer.ws_url();
        let (go_tx, go_rx) = mpsc::channel::<usize>();
        let (done_tx, done_rx) = mpsc::channel::<Instant>();
        let h = thread::spawn(move || {
            let mut c = RawClient::connect(&url);
            while let Ok(count) = go_rx.recv() {
                let mut bytes = 0usize;
                for _ in 0..count {
                    match c.ws.read().expect("baseline read") {
                        Message::Text(t) => {
                            if parse {
                                let v: serde_json::Value =
                                    serde_json::from_str(t.as_str()).expect("JSON");
                                bytes += usize::from(v.is_object());
                            } else {
                                bytes += t.len();
                            }
                        }
                        other => panic!("unexpected {other:?}"),
                    }
                }
                std::hint::black_box(bytes);
                let _ = done_tx.send(Instant::now());
            }
        });
        let pc = peer.conn(i);
        baselines.push((pc, go_tx, done_rx, h));
    }

    let mut summary = Vec::new();
    for (scenario, per_frame, cycles) in [
        ("bulk: write_all of 1000-event cycles", false, cycles),
        (
            "per-frame: one write() per event",
            true,
            (cycles / 3).max(1),
        ),
    ] {
        let n = cycles * CYCLE + 1;
        let stream = |pc: &PeerConn, marker: &[u8]| {
            for _ in 0..cycles {
                if per_frame {
                    let mut at = 0;
                    for &e in &ends {
                        pc.write(&cycle[at..e]);
                        at = e;
                    }
                } else {
                    pc.write(&cycle);
                }
            }
            pc.write(marker);
        };
        let mut sup_runs: Vec<Run> = Vec::new();
        let mut base_runs: Vec<Run> = Vec::new();
        let mut recv_runs: Vec<Run> = Vec::new();
        for run in 0..RUNS {
            // Baselines first (parse, then receive-only).
            for (bi, (pc, go, done, _)) in baselines.iter().enumerate() {
                go.send(n).expect("baseline thread");
                let marker = frame(&console_error(&session, &format!("base marker {run}")));
                let t0 = Instant::now();
                stream(pc, &marker);
                let t1 = done.recv().expect("baseline done");
                let r = Run {
                    secs: (t1 - t0).as_secs_f64(),
                    events: n,
                    publishes: 0,
                };
                if bi == 0 {
                    base_runs.push(r);
                } else {
                    recv_runs.push(r);
                }
            }
            // The supervisor.
            let tag = format!("INGEST-END-{per_frame}-{run}");
            let marker = frame(&console_error(&session, &tag));
            let v0 = sup.snapshot().version;
            let t0 = Instant::now();
            stream(&conn, &marker);
            let snap = sup
                .wait_for(Duration::from_secs(60), |s| {
                    s.console_errors.last().is_some_and(|e| e.text == tag)
                })
                .expect("the marker in the snapshot");
            let secs = t0.elapsed().as_secs_f64();
            assert_eq!(snap.frame_tree.children.len(), CHILD_FRAMES);
            assert!(snap.pending_dialogs.is_empty(), "a dialog is left open");
            sup_runs.push(Run {
                secs,
                events: n,
                publishes: snap.version - v0,
            });
            thread::sleep(Duration::from_millis(50));
        }

        println!();
        println!("Scenario {scenario}, {n} events per run:");
        println!(
            "{:<52} {:>12} {:>12} {:>10} {:>10} {:>14}",
            "variant", "best ev/s", "median ev/s", "x base", "publishes", "events/publish"
        );
        println!("{}", "-".repeat(116));
        let base_med = median(&base_runs);
        let rows: [(&str, &[Run]); 3] = [
            ("supervisor (write -> snapshot shows the marker)", &sup_runs),
            ("baseline: tungstenite read + serde_json::Value", &base_runs),
            ("floor: tungstenite read only (no parse)", &recv_runs),
        ];
        for (name, runs) in rows {
            let pubs: u64 = runs.iter().map(|r| r.publishes).sum::<u64>() / runs.len() as u64;
            let (p, per) = if pubs > 0 {
                (format!("{pubs}"), format!("{:.1}", n as f64 / pubs as f64))
            } else {
                ("-".into(), "-".into())
            };
            println!(
                "{:<52} {:>12.0} {:>12.0} {:>9.2}x {:>10} {:>14}",
                name,
                best(runs),
                median(runs),
                median(runs) / base_med,
                p,
                per
            );
        }
        for (i, r) in sup_runs.iter().enumerate() {
            println!(
                "  supervisor run {i}: {:.3} s, {:.0} events/s, {} publishes ({:.1} events/publish)",
                r.secs,
                r.eps(),
                r.publishes,
                r.events as f64 / r.publishes.max(1) as f64
            );
        }
        let sup_med = median(&sup_runs);
        let ok = sup_med >= TARGET_EPS;
        println!(
            "Target >= {TARGET_EPS:.0} events/s (median run): {} ({sup_med:.0} events/s, {:.2}x \
             the target; {:.2}x the parse baseline).",
            verdict(ok),
            sup_med / TARGET_EPS,
            sup_med / base_med
        );
        let avg_pubs = sup_runs.iter().map(|r| r.publishes).sum::<u64>() / RUNS as u64;
        summary.push(format!(
            "{} {sup_med:.0} ev/s vs parse baseline {base_med:.0} ev/s ({:.2}x), {avg_pubs} \
             publishes per {n} events, target {}",
            if per_frame {
                "per-frame writes"
            } else {
                "bulk"
            },
            sup_med / base_med,
            verdict(ok)
        ));
    }
    println!();
    println!("Total bench time: {:.1} s", started.elapsed().as_secs_f64());
    println!();
    println!(
        "README: ingest ({date}, nproc={nproc}): mixed CDP events applied by one supervisor until \
         the snapshot shows the last one (median of {RUNS} runs; baseline = plain tungstenite \
         client parsing to serde_json::Value): {}; target >= 300k events/s.",
        summary.join("; ")
    );
    drop(registry);
    drop(baselines);
    drop(peer);
}
