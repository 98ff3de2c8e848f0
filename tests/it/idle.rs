//! An idle supervisor makes no wake-ups: its reader and watchdog threads stay blocked (no
//! context switches) while nothing arrives.
//!
//! Other tests run in the same process, so only this supervisor's threads are watched, told
//! apart by name: `cdp-reader-<task>` and `cdp-watchdog-<task>`, which Linux cuts to 15 bytes
//! ([`READER`], [`WATCHDOG`]). No other test of this binary uses a task id starting with `id`;
//! one that did would make this test fail (more than two threads match), never pass wrongly.

use std::time::Duration;

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{Config, DialogAction, SupervisorRegistry};

/// (name, voluntary + involuntary context switches) of every thread of this process.
fn thread_switches() -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in dir.flatten() {
        let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
            continue;
        };
        let field = |k: &str| {
            status
                .lines()
                .find(|l| l.starts_with(k))
                .and_then(|l| l.split_whitespace().nth(1))
                .map(str::to_string)
        };
        let name = field("Name:").unwrap_or_default();
        let n = |k| field(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        out.push((
            name,
            n("voluntary_ctxt_switches:") + n("nonvoluntary_ctxt_switches:"),
        ));
    }
    out
}

/// The task this test starts, and the names its two threads show in `/proc` (15 bytes at most).
const TASK: &str = "idle";
const READER: &str = "cdp-reader-idle";
const WATCHDOG: &str = "cdp-watchdog-id";

fn ours(switches: &[(String, u64)]) -> Vec<(String, u64)> {
    let mut v: Vec<_> = switches
        .iter()
        .filter(|(n, _)| n == READER || n == WATCHDOG)
        .cloned()
        .collect();
    v.sort();
    v
}

#[test]
fn idle_supervisor_threads_do_not_wake_up() {
    let fake = FakeBrowser::start().unwrap();
    let reg = SupervisorRegistry::new(Config::default());
    let sup = reg.get_or_start(TASK, &fake.ws_url()).unwrap();
    // Exercise both threads first: a dialog arms and then cancels the watchdog.
    fake.open_dialog("alert", "arm the watchdog", "");
    sup.wait_for_dialog(Duration::from_secs(5)).expect("dialog");
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap();
    sup.wait_for(Duration::from_secs(5), |s| !s.recent_dialogs.is_empty())
        .expect("closed");
    // Let the last writes and cancels settle, then measure a quiet window. Sleeping is the
    // measurement here: nothing should happen during it.
    std::thread::sleep(Duration::from_millis(100));
    let before = ours(&thread_switches());
    assert_eq!(
        before.len(),
        2,
        "expected one reader and one watchdog: {before:?}"
    );
    std::thread::sleep(Duration::from_millis(1500));
    let after = ours(&thread_switches());
    assert_eq!(before, after, "an idle supervisor thread woke up");
    eprintln!("idle for 1.5 s: {after:?} (context switches unchanged)");
    reg.stop_all();
}
