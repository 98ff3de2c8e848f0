//! 1,000 start/stop cycles against one fake browser leave no thread, socket or registry slot
//! behind. Runs alone, in `tests/solo`, so the thread and descriptor counts are ours.

use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{Config, SupervisorRegistry};

const CYCLES: usize = 1_000;
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

/// Waits (with a deadline) until the thread and descriptor counts are back at the baseline.
/// Exiting threads give no signal to wait on, so this re-reads /proc every few milliseconds.
fn settle(base_threads: usize, base_fds: usize) -> (usize, usize) {
    let deadline = Instant::now()
        .checked_add(WAIT)
        .expect("a deadline within range");
    loop {
        let (t, f) = (threads(), fds());
        if (t <= base_threads && f <= base_fds) || Instant::now() >= deadline {
            return (t, f);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

pub(crate) fn a_thousand_start_stop_cycles_leak_no_threads_sockets_or_slots() {
    let fake = FakeBrowser::start().unwrap();
    let reg = SupervisorRegistry::new(Config::default().with_reconnect_attempts(0).unwrap());
    // Baseline: the fake's own threads (accept, timer) and sockets, no supervisor yet.
    let (base_threads, base_fds) = (threads(), fds());
    let names_before = thread_names();

    let mut starts = Vec::with_capacity(CYCLES);
    let mut stops = Vec::with_capacity(CYCLES);
    let mut peak_threads = 0;
    let all = Instant::now();
    for i in 0..CYCLES {
        // Half the cycles reuse one task id, half use a fresh one each time.
        let task = if i % 2 == 0 {
            "same".to_string()
        } else {
            format!("task-{i}")
        };
        let t = Instant::now();
        let sup = reg
            .get_or_start(&task, &fake.ws_url())
            .unwrap_or_else(|e| panic!("cycle {i}: start failed: {e}"));
        starts.push(t.elapsed());
        assert!(sup.is_active(), "cycle {i}");
        if i % 100 == 0 {
            peak_threads = peak_threads.max(threads());
        }
        let t = Instant::now();
        assert!(reg.stop(&task), "cycle {i}: stop found the supervisor");
        stops.push(t.elapsed());
        assert!(!sup.is_alive(), "cycle {i}");
    }
    let total = all.elapsed();
    assert!(reg.tasks().is_empty(), "slots left: {:?}", reg.tasks());
    assert!(
        fake.wait_for_connections(0, WAIT),
        "the fake still has {} live connections",
        fake.connection_count()
    );
    assert_eq!(fake.accepted_count(), CYCLES);
    let (after_threads, after_fds) = settle(base_threads, base_fds);

    starts.sort();
    stops.sort();
    eprintln!(
        "{CYCLES} start/stop cycles in {total:?}: {:?} per cycle; start p50 {:?} p99 {:?} max {:?}; \
         stop p50 {:?} p99 {:?} max {:?}",
        total / CYCLES as u32,
        percentile(&starts, 0.5),
        percentile(&starts, 0.99),
        starts[CYCLES - 1],
        percentile(&stops, 0.5),
        percentile(&stops, 0.99),
        stops[CYCLES - 1],
    );
    eprintln!(
        "threads {base_threads} -> {after_threads} (peak sampled {peak_threads}), \
         fds {base_fds} -> {after_fds}"
    );
    assert_eq!(
        after_threads,
        base_threads,
        "threads leaked; before {names_before:?}, after {:?}",
        thread_names()
    );
    assert_eq!(after_fds, base_fds, "file descriptors leaked");
    assert!(
        stops[CYCLES - 1] < Duration::from_secs(1),
        "a stop took {:?}",
        stops[CYCLES - 1]
    );
}
