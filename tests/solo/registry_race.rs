//! 16 threads racing `get_or_start`/`stop` on 4 tasks: never two live supervisors for a task,
//! no thread left behind. Runs alone, in `tests/solo`, so the thread count is ours.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{Config, Supervisor, SupervisorRegistry};

fn thread_count() -> u64 {
    crate::self_status("Threads").unwrap_or(0)
}

pub(crate) fn racing_get_or_start_and_stop_never_leaves_two_live_supervisors_or_threads() {
    let fakes: Vec<FakeBrowser> = (0..4).map(|_| FakeBrowser::start().unwrap()).collect();
    let urls: Vec<String> = fakes.iter().map(FakeBrowser::ws_url).collect();
    let baseline = thread_count();
    let reg = Arc::new(SupervisorRegistry::new(Config::default()));
    let seen: Arc<Mutex<HashMap<usize, Vec<Arc<Supervisor>>>>> = Arc::default();
    let stop_flag = Arc::new(AtomicBool::new(false));
    let violations = Arc::new(AtomicUsize::new(0));
    let (starts, stops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));

    let checker = {
        let (seen, stop_flag, violations) = (seen.clone(), stop_flag.clone(), violations.clone());
        std::thread::spawn(move || {
            let mut checks = 0u64;
            while !stop_flag.load(Ordering::Relaxed) {
                for sups in seen.lock().unwrap().values() {
                    if sups.iter().filter(|s| s.is_alive()).count() > 1 {
                        violations.fetch_add(1, Ordering::Relaxed);
                    }
                }
                checks += 1;
                std::thread::yield_now();
            }
            checks
        })
    };
    let end = Instant::now()
        .checked_add(Duration::from_secs(2))
        .expect("a deadline within range");
    let workers: Vec<_> = (0..16)
        .map(|i| {
            let (reg, urls, seen) = (reg.clone(), urls.clone(), seen.clone());
            let (starts, stops) = (starts.clone(), stops.clone());
            std::thread::spawn(move || {
                let mut n = i as u64 * 7919 + 1;
                while Instant::now() < end {
                    n = n
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let task = (n >> 33) as usize % 4;
                    let name = format!("task-{task}");
                    if (n >> 40).is_multiple_of(3) {
                        reg.stop(&name);
                        stops.fetch_add(1, Ordering::Relaxed);
                    } else if let Ok(s) = reg.get_or_start(&name, &urls[task]) {
                        starts.fetch_add(1, Ordering::Relaxed);
                        let mut seen = seen.lock().unwrap();
                        let list = seen.entry(task).or_default();
                        if !list.iter().any(|x| Arc::ptr_eq(x, &s)) {
                            list.push(s);
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    stop_flag.store(true, Ordering::Relaxed);
    let checks = checker.join().unwrap();
    let distinct: usize = seen.lock().unwrap().values().map(Vec::len).sum();
    eprintln!(
        "{} get_or_start, {} stop, {distinct} distinct supervisors, {checks} invariant checks",
        starts.load(Ordering::Relaxed),
        stops.load(Ordering::Relaxed)
    );
    assert_eq!(
        violations.load(Ordering::Relaxed),
        0,
        "two live supervisors seen for one task"
    );
    for (task, sups) in seen.lock().unwrap().iter() {
        let alive: Vec<_> = sups.iter().filter(|s| s.is_alive()).collect();
        assert!(alive.len() <= 1, "task {task}: {} alive", alive.len());
        if let Some(a) = alive.first() {
            let current = reg
                .get(&format!("task-{task}"))
                .expect("the live one is registered");
            assert!(
                Arc::ptr_eq(a, &current),
                "a live supervisor not in the registry (zombie)"
            );
        }
    }
    assert!(distinct > 4, "the race did not exercise restarts");
    reg.stop_all();
    seen.lock().unwrap().clear();
    drop(reg);
    for f in &fakes {
        assert!(
            f.wait_for_connections(0, Duration::from_secs(5)),
            "a connection left open"
        );
    }
    // A thread's exit signals nothing we can wait on (the fake's connection threads end after
    // their sockets close), so re-read /proc under a deadline.
    let deadline = Instant::now()
        .checked_add(Duration::from_secs(5))
        .expect("a deadline within range");
    while thread_count() > baseline && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(thread_count(), baseline, "threads left behind");
}
