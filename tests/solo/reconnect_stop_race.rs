//! `stop` raced against a reconnect, 1,000 times (issue 12, finding 1; SPEC §3: "`stop` returns
//! within 1 s in every interleaving with a reconnect"). Runs alone, in `tests/solo`, so the thread count
//! is ours.
//!
//! Each race: start a supervisor on the fake browser, drop its connection, wait a varying delay,
//! call `stop`. The reconnect back-off is shortened to 1 ms so that the reconnect's handshake
//! lands a millisecond or two after the drop, and the delays sweep across it: before the
//! back-off ends, while the reconnect connects, within ±200 µs of the fake writing its
//! `101 Switching Protocols`, and while the supervisor re-attaches. The test reports where the
//! `stop` calls landed relative to that 101 and requires many of them inside the ±200 µs window.

use std::io::Write;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{Config, SupervisorRegistry};

const RACES: usize = 1_000;
/// `stop` must return within this (SPEC §3).
const STOP_BOUND: Duration = Duration::from_secs(1);
/// How long the test waits for one `stop` before calling it a hang.
const HANG: Duration = Duration::from_secs(3);
/// The window around the 101 answer that the issue saw hang (SIGINT within ±200 µs).
const WINDOW_US: i64 = 200;

fn threads() -> usize {
    crate::self_status("Threads").expect("/proc/self/status has Threads") as usize
}

/// Waits (with a deadline) until the thread count is back at `base`. Exiting threads give no
/// signal to wait on, so this re-reads /proc every few milliseconds.
fn settle(base: usize) -> usize {
    let deadline = Instant::now()
        .checked_add(Duration::from_secs(10))
        .expect("a deadline within range");
    loop {
        let t = threads();
        if t <= base || Instant::now() >= deadline {
            return t;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Microseconds from `b` to `a` (negative when `a` is earlier).
fn micros_between(a: Instant, b: Instant) -> i64 {
    if a >= b {
        (a - b).as_micros() as i64
    } else {
        -((b - a).as_micros() as i64)
    }
}

pub(crate) fn stop_during_a_reconnect_returns_within_a_second_in_a_thousand_races() {
    let fake = FakeBrowser::start().unwrap();
    let reg = SupervisorRegistry::new(
        Config::default()
            .with_reconnect_attempts(3)
            .unwrap()
            .with_reconnect_backoff(Duration::from_millis(1)),
    );
    let base_threads = threads();

    // The drop-to-101 latency, learnt from the races themselves (starts at a guess).
    let mut to_101: Vec<u64> = vec![1_500];
    let mut offsets: Vec<i64> = Vec::with_capacity(RACES);
    let mut before_any_101 = 0usize;
    let mut stop_times = Vec::with_capacity(RACES);
    let all = Instant::now();
    for i in 0..RACES {
        let sup = reg
            .get_or_start("race", &fake.ws_url())
            .unwrap_or_else(|e| panic!("race {i}: start failed: {e}"));
        let upgrades_before = fake.upgrade_instants().len();
        // Delay: mostly within ±600 µs of the learnt drop-to-101 latency, every fourth race
        // anywhere from 0 to twice it (back-off, connect, re-attach).
        let mut sorted = to_101.clone();
        sorted.sort_unstable();
        let typical = sorted[sorted.len() / 2] as i64;
        let spread = (i as i64 * 7_919) % 1_201 - 600;
        let delay_us = if i % 4 == 3 {
            (i as i64 * 104_729) % (2 * typical + 1)
        } else {
            (typical + spread).max(0)
        };
        let dropped = Instant::now();
        fake.drop_connections();
        let until = dropped + Duration::from_micros(delay_us as u64);
        // A spin, not a sleep: the point is to land within microseconds of the handshake.
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        // `stop` runs on this thread; the guard only turns a hang into a failure.
        let (tx, rx) = mpsc::channel::<()>();
        let hang_guard = std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(HANG) {
                // Straight to the stderr handle: the harness would swallow `eprintln!`.
                let _ = writeln!(
                    std::io::stderr(),
                    "race {i}: stop did not return within {HANG:?} (delay {delay_us} µs)"
                );
                std::process::exit(101);
            }
        });
        let stop_at = Instant::now();
        assert!(reg.stop("race"), "race {i}: the task was registered");
        let took = stop_at.elapsed();
        drop(tx);
        hang_guard.join().unwrap();
        assert!(!sup.is_alive(), "race {i}: stopped");
        drop(sup);
        stop_times.push(took);
        assert!(
            took < STOP_BOUND,
            "race {i}: stop took {took:?} (delay {delay_us} µs)"
        );
        let upgrades = fake.upgrade_instants();
        match upgrades.get(upgrades_before) {
            Some(&at_101) => {
                to_101.push(at_101.saturating_duration_since(dropped).as_micros() as u64);
                offsets.push(micros_between(stop_at, at_101));
            }
            None => before_any_101 += 1,
        }
    }
    let elapsed = all.elapsed();
    stop_times.sort_unstable();
    let in_window = offsets.iter().filter(|o| o.abs() <= WINDOW_US).count();
    let before = offsets.iter().filter(|o| **o < -WINDOW_US).count();
    let after = offsets.iter().filter(|o| **o > WINDOW_US).count();
    let mut sorted = to_101.clone();
    sorted.sort_unstable();
    eprintln!(
        "{RACES} stop-during-reconnect races in {elapsed:?}: stop p50 {:?}, p99 {:?}, max {:?}; \
         drop-to-101 median {} µs; stop landed {before_any_101}x before any reconnect handshake, \
         {before}x earlier than 200 µs before the 101, {in_window}x within ±{WINDOW_US} µs of it, \
         {after}x later (while re-attaching or after)",
        stop_times[RACES / 2],
        stop_times[RACES * 99 / 100],
        stop_times[RACES - 1],
        sorted[sorted.len() / 2],
    );
    assert!(
        in_window >= 100,
        "only {in_window} of {RACES} races landed within ±{WINDOW_US} µs of the 101"
    );
    let after_threads = settle(base_threads);
    assert!(
        after_threads <= base_threads,
        "threads: {base_threads} before, {after_threads} after"
    );
    assert!(reg.get("race").is_none());
}
