//! Cancelled starts leave no thread, socket or registry slot of the whole process behind
//! (issue 20 item 12). Runs alone, in `tests/solo`, so the counts are ours.
//!
//! * 200 starts cancelled while attaching (the fake never answers `Target.attachToTarget`, so
//!   each would wait for its 15 s `start_timeout`): each returns at once, and the process is
//!   back at its baseline right after.
//! * 20 starts cancelled while connecting (a peer that accepts TCP and never answers the
//!   WebSocket upgrade): each returns at once; the abandoned connects end on their helper
//!   threads by the connect's own deadline (1 s here), and then the process is back at its
//!   baseline.
//! * 100 plain starts (no token) stopped from another thread, and 20 cut short by their
//!   registry's close, while attaching (issue 28 item 12): the same.

use cdp_supervisor::StartRequest;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use cdp_supervisor::fake::{FakeBrowser, Rule};
use cdp_supervisor::{CancelToken, Config, Error, StartOptions, SupervisorRegistry};

const WAIT: Duration = Duration::from_secs(10);

fn threads() -> usize {
    crate::self_status("Threads").expect("/proc/self/status has Threads") as usize
}

fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

fn thread_names() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|n| n.trim().to_string())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Re-reads the counts (exiting threads give no signal to wait on) until they are back at the
/// baseline or `within` has passed; returns them and how long it took.
fn settle(base: (usize, usize), within: Duration) -> ((usize, usize), Duration) {
    let started = Instant::now();
    loop {
        let now = (threads(), fds());
        if (now.0 <= base.0 && now.1 <= base.1) || started.elapsed() >= within {
            return (now, started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Runs `start` on a scoped thread, calls `ready` until it says the start is where it should
/// be cancelled, cancels, and returns the result and the time from cancel to return.
fn cancel_during(
    start: impl FnOnce(&CancelToken) -> Result<(), Error> + Send,
    ready: impl FnOnce(),
) -> (Result<(), Error>, Duration) {
    let cancel = CancelToken::new();
    std::thread::scope(|s| {
        let running = s.spawn(|| {
            let r = start(&cancel);
            (r, Instant::now())
        });
        ready();
        let t = Instant::now();
        cancel.cancel();
        let (r, returned) = running.join().expect("the start does not panic");
        (r, returned - t)
    })
}

pub(crate) fn cancelled_starts_leave_no_threads_sockets_or_slots() {
    const CYCLES: usize = 200;
    let fake = FakeBrowser::start().unwrap();
    fake.set_rule("Target.attachToTarget", Rule::Ignore);
    let reg = SupervisorRegistry::new(
        Config::default()
            .with_start_timeout(Duration::from_secs(15))
            .unwrap()
            .with_reconnect_attempts(0)
            .unwrap(),
    );
    let base = (threads(), fds());
    let names_before = thread_names();
    let mut took = Vec::with_capacity(CYCLES);
    let mut peak = 0;
    for i in 0..CYCLES {
        let options = StartOptions::default().with_new_page(i % 2 == 0);
        let attaches = i + 1;
        let (r, t) = cancel_during(
            |cancel| {
                reg.start(
                    StartRequest::new("solo-cancel", &fake.ws_url())
                        .with_options(options)
                        .with_cancel(cancel),
                )
                .map(drop)
            },
            || {
                wait_for_attach(&fake, attaches);
                peak = peak.max(threads());
            },
        );
        assert!(
            matches!(r, Err(Error::StartCancelled { .. })),
            "cycle {i}: {r:?}"
        );
        took.push(t);
    }
    assert_nothing_left(
        &format!("{CYCLES} starts cancelled while attaching (thread peak {peak})"),
        (&reg, &fake),
        base,
        &names_before,
        took,
    );
}

/// Waits until `fake` has received its `n`th `Target.attachToTarget`.
fn wait_for_attach(fake: &FakeBrowser, n: usize) {
    let seen = std::cell::Cell::new(0);
    fake.wait_for_command(
        |c| {
            if c["method"] == "Target.attachToTarget" {
                seen.set(seen.get() + 1);
            }
            seen.get() >= n
        },
        WAIT,
    )
    .expect("the start is attaching");
}

/// After a run of starts cut short while attaching: no slot, connection, page, thread or
/// descriptor left (against `base`), and each start returned within 1 s of its cut (`took`).
/// Prints the figures, headed `what`.
fn assert_nothing_left(
    what: &str,
    (reg, fake): (&SupervisorRegistry, &FakeBrowser),
    base: (usize, usize),
    names_before: &[String],
    mut took: Vec<Duration>,
) {
    assert!(reg.tasks().is_empty(), "slots left: {:?}", reg.tasks());
    assert!(fake.wait_for_connections(0, WAIT), "connections left");
    assert_eq!(fake.page_target_ids(), ["PAGE-1"], "pages left");
    let (after, settled) = settle(base, WAIT);
    took.sort();
    let slowest = took[took.len() - 1];
    eprintln!(
        "{what}: cut -> return p50 {:?} p99 {:?} max {slowest:?}; threads {} -> {}, fds {} -> \
         {}, back at baseline {settled:?} after the last",
        percentile(&took, 0.5),
        percentile(&took, 0.99),
        base.0,
        after.0,
        base.1,
        after.1,
    );
    assert_eq!(
        after.0,
        base.0,
        "threads leaked; before {names_before:?}, after {:?}",
        thread_names()
    );
    assert_eq!(after.1, base.1, "file descriptors leaked");
    assert!(
        slowest < Duration::from_secs(1),
        "a start cut short took {slowest:?}"
    );
}

pub(crate) fn starts_cancelled_while_connecting_leave_nothing_once_their_deadline_passes() {
    const CYCLES: usize = 20;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "ws://127.0.0.1:{}/devtools/browser/x",
        listener.local_addr().unwrap().port()
    );
    let reg = SupervisorRegistry::new(
        Config::default()
            .with_start_timeout(Duration::from_secs(1))
            .unwrap(),
    );
    let base = (threads(), fds());
    let mut peers = Vec::new();
    let mut took = Vec::with_capacity(CYCLES);
    for i in 0..CYCLES {
        let (r, t) = cancel_during(
            |cancel| {
                reg.start(StartRequest::new("solo-connect", &url).with_cancel(cancel))
                    .map(drop)
            },
            || peers.push(listener.accept().expect("the start connects").0),
        );
        assert!(
            matches!(r, Err(Error::StartCancelled { .. })),
            "cycle {i}: {r:?}"
        );
        took.push(t);
    }
    assert!(reg.tasks().is_empty());
    // Our ends of the connections stay open: the helpers end by their own deadline.
    let ended_at = Instant::now();
    let (after, settled) = settle((base.0, base.1 + CYCLES), WAIT);
    drop(peers);
    let after = (after.0, fds());
    took.sort();
    eprintln!(
        "{CYCLES} starts cancelled while connecting: cancel -> return p50 {:?} max {:?}; the \
         abandoned connects (1 s deadline) were gone {settled:?} after the last cancel \
         ({:?} after it returned); threads {} -> {}, fds {} -> {}",
        percentile(&took, 0.5),
        took[CYCLES - 1],
        ended_at.elapsed(),
        base.0,
        after.0,
        base.1,
        after.1,
    );
    assert_eq!(after.0, base.0, "threads: {:?}", thread_names());
    assert_eq!(after.1, base.1, "file descriptors");
    assert!(took[CYCLES - 1] < Duration::from_secs(1), "{took:?}");
}

/// Issue 28 item 12: a stop (or the registry's close) from another thread cuts a plain start
/// short, with no token of the caller's: 100 starts stopped while attaching and 20 registries
/// closed with a start attaching; each start returns at once, and the process is back at its
/// baseline right after.
pub(crate) fn starts_cut_short_by_stop_or_close_leave_no_threads_sockets_or_slots() {
    const STOPS: usize = 100;
    const CLOSES: usize = 20;
    let fake = FakeBrowser::start().unwrap();
    fake.set_rule("Target.attachToTarget", Rule::Ignore);
    let config = Config::default()
        .with_start_timeout(Duration::from_secs(15))
        .unwrap()
        .with_reconnect_attempts(0)
        .unwrap();
    let reg = SupervisorRegistry::new(config.clone());
    let base = (threads(), fds());
    let names_before = thread_names();
    let mut took = Vec::with_capacity(STOPS + CLOSES);
    for i in 0..STOPS + CLOSES {
        let closing = (i >= STOPS).then(|| SupervisorRegistry::new(config.clone()));
        let target = closing.as_ref().unwrap_or(&reg);
        let options = StartOptions::default().with_new_page(i % 2 == 0);
        let (r, t) = std::thread::scope(|s| {
            let running = s.spawn(|| {
                let r = target
                    .start(StartRequest::new("solo-stop", &fake.ws_url()).with_options(options));
                (r, Instant::now())
            });
            wait_for_attach(&fake, i + 1);
            let t = Instant::now();
            match &closing {
                Some(c) => c.close(),
                None => assert!(reg.stop("solo-stop")),
            }
            let (r, returned) = running.join().expect("the start does not panic");
            (r, returned.saturating_duration_since(t))
        });
        assert!(
            matches!(r, Err(Error::StartCancelled { .. })),
            "cycle {i}: {r:?}"
        );
        took.push(t);
    }
    assert_nothing_left(
        &format!("{STOPS} starts stopped and {CLOSES} closed while attaching"),
        (&reg, &fake),
        base,
        &names_before,
        took,
    );
}
