//! An idle supervisor makes no wake-ups: its reader and watchdog threads stay blocked (no
//! context switches) while nothing arrives. The one exception (issue 28 item 9): while popups
//! the task let go past both caps are open, the watchdog probes the task's renderer about once
//! a second; once none is left it is quiet again.
//!
//! Other tests run in the same process, so only this supervisor's threads are watched, told
//! apart by name: `cdp-reader-<task>` and `cdp-watchdog-<task>`, which Linux cuts to 15 bytes
//! ([`READER`], [`WATCHDOG`]). No other test of this binary uses a task id starting with `id`;
//! one that did would make these tests fail (more than two threads match), never pass wrongly.
//! The two tests here take [`ONE_AT_A_TIME`] for the same reason.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cdp_supervisor::fake::{FakeBrowser, Rule};
use cdp_supervisor::unversioned::registry_without_popup_watcher;
use cdp_supervisor::{Config, DialogAction, Limits, Supervisor, SupervisorRegistry};
use serde_json::{Value, json};

/// Held by each test of this file: both start a task named [`TASK`].
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

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
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
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

/// The fake's page, and the popups it opens in the test below.
const PAGE: &str = "PAGE-1";

/// Browser-level auto-attach hands over popup `n` of the page, paused.
fn popup_attached(fake: &FakeBrowser, n: usize) {
    let info = json!({"targetId": format!("POP-{n}"), "type": "page", "title": "",
                      "url": "about:blank", "attached": true, "openerId": PAGE,
                      "openerFrameId": PAGE, "browserContextId": "CTX-1"});
    fake.emit(
        None,
        "Target.attachedToTarget",
        json!({"sessionId": format!("SID-{n}"), "targetInfo": info, "waitingForDebugger": true}),
    );
}

/// `Target.getTargets` with the page and its popups `POP-0`..`POP-{n-1}`.
fn targets(n: usize) -> Value {
    let mut infos = vec![json!({"targetId": PAGE, "type": "page"})];
    infos.extend(
        (0..n).map(|i| json!({"targetId": format!("POP-{i}"), "type": "page", "openerId": PAGE})),
    );
    json!({ "targetInfos": infos })
}

/// A task on `fake` with both popup caps at 1 (the third popup is let go), whose
/// `Target.getTargets` lists its page and `listed` popups, and whose page answers the probe.
fn caps_1_and_1(fake: &FakeBrowser, listed: usize) -> (SupervisorRegistry, Arc<Supervisor>) {
    fake.set_rule("Target.getTargets", Rule::Reply(targets(listed)));
    fake.set_rule(
        "Performance.getMetrics",
        Rule::Reply(json!({"metrics": []})),
    );
    let limits = Limits::default()
        .with_pages_max(1)
        .with_watched_pages_max(1);
    let reg = registry_without_popup_watcher(Config::default().with_limits(limits).unwrap());
    let sup = reg.get_or_start(TASK, &fake.ws_url()).unwrap();
    (reg, sup)
}

/// Issue 28 item 9: past both popup caps (1 + 1 here, so the third popup is let go) the
/// watchdog probes the task's page about once a second, with no call made: it wakes up. Once
/// the let-go popup has closed (`Target.getTargets` no longer lists it) the probe stops, and
/// both threads are quiet again.
#[test]
fn past_both_popup_caps_the_watchdog_probes_until_no_let_go_popup_is_left() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fake = FakeBrowser::start().unwrap();
    let (reg, sup) = caps_1_and_1(&fake, 3);
    let session = sup
        .snapshot()
        .page_session_id
        .clone()
        .expect("page session");
    for n in 0..3 {
        popup_attached(&fake, n);
    }
    let is_probe =
        |c: &Value| c["method"] == "Performance.getMetrics" && c["sessionId"] == session.as_str();
    let probes = || fake.received().iter().filter(|c| is_probe(c)).count();
    let last_id = |c: Option<Value>| c.and_then(|c| c["id"].as_u64()).unwrap_or(0);
    // With no call made: a first probe, then a second.
    let first = last_id(fake.wait_for_command(is_probe, Duration::from_secs(5)));
    assert!(first > 0, "no probe past both caps");
    let second = fake.wait_for_command(
        |c| is_probe(c) && c["id"].as_u64() > Some(first),
        Duration::from_secs(5),
    );
    assert!(second.is_some(), "no second probe");
    let before = ours(&thread_switches());
    let seen = probes();
    std::thread::sleep(Duration::from_millis(1500));
    let after = ours(&thread_switches());
    let probed = probes() - seen;
    eprintln!(
        "past both caps, 1.5 s with a let-go popup open: {probed} probe(s); {before:?} -> {after:?}"
    );
    assert_ne!(before, after, "the watchdog must probe");
    assert!((1..=2).contains(&probed), "{probed} probes in 1.5 s");
    assert!(
        fake.received()
            .iter()
            .all(|c| c["method"] != "Input.dispatchMouseEvent"),
        "the probe of a renderer that answers sends nothing a page could see"
    );
    // The let-go popup closes: the next probe finds none left and stops.
    let asked = last_id(fake.received().last().cloned());
    fake.set_rule("Target.getTargets", Rule::Reply(targets(2)));
    fake.wait_for_command(
        |c| c["method"] == "Target.getTargets" && c["id"].as_u64() > Some(asked),
        Duration::from_secs(5),
    )
    .expect("a probe after the popup closed");
    // Let that probe end, then measure a quiet window (the sleep is the measurement).
    std::thread::sleep(Duration::from_millis(200));
    let before = ours(&thread_switches());
    std::thread::sleep(Duration::from_millis(1500));
    let after = ours(&thread_switches());
    eprintln!("no let-go popup left, idle for 1.5 s: {after:?} (context switches unchanged)");
    assert_eq!(
        before, after,
        "the probe must stop once no let-go popup is left"
    );
    reg.stop_all();
}

/// Issue 28 item 9's rule the other way round: with popups up to both caps (1 followed, 1
/// watched) and none let go, an idle supervisor still makes no wake-ups and never probes.
#[test]
fn below_both_popup_caps_an_idle_supervisor_does_not_wake_up_nor_probe() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fake = FakeBrowser::start().unwrap();
    let (reg, sup) = caps_1_and_1(&fake, 2);
    for n in 0..2 {
        popup_attached(&fake, n);
    }
    // Both popups were resumed (the last command of their setup).
    let resumed = |n: usize| {
        let sid = format!("SID-{n}");
        move |c: &Value| {
            c["method"] == "Runtime.runIfWaitingForDebugger" && c["sessionId"] == sid.as_str()
        }
    };
    for n in 0..2 {
        fake.wait_for_command(resumed(n), Duration::from_secs(5))
            .unwrap_or_else(|| panic!("popup {n} resumed"));
    }
    // The second popup's resume is written before the batch's publish that says it was not
    // followed: wait for that publish, not only for the first popup's.
    let snap = sup
        .wait_for(Duration::from_secs(5), |s| {
            s.pages.len() == 2 && s.pages_truncated
        })
        .unwrap_or_else(|| {
            panic!(
                "one popup followed, the other past the cap: {}",
                sup.snapshot().to_json()
            )
        });
    assert_eq!(snap.pages[1].target_id, "POP-0", "{}", snap.to_json());
    let received = fake.received();
    assert!(
        received
            .iter()
            .any(|c| c["method"] == "Page.enable" && c["sessionId"] == "SID-1"),
        "the second popup is watched"
    );
    assert!(
        received
            .iter()
            .all(|c| c["method"] != "Target.detachFromTarget"),
        "no popup let go"
    );
    // Let the writes settle, then measure a quiet window (the sleep is the measurement).
    std::thread::sleep(Duration::from_millis(200));
    let sent_before = fake.received().len();
    let before = ours(&thread_switches());
    assert_eq!(before.len(), 2, "one reader and one watchdog: {before:?}");
    std::thread::sleep(Duration::from_millis(1500));
    let after = ours(&thread_switches());
    eprintln!("two popups, none let go, idle for 1.5 s: {after:?} (context switches unchanged)");
    assert_eq!(before, after, "an idle supervisor below both caps woke up");
    // Nothing sent since the popups' setup (`Target.getTargets` went once, when attaching).
    let received = fake.received();
    assert_eq!(
        received.len(),
        sent_before,
        "sent while idle: {:?}",
        &received[sent_before..]
    );
    let probed = received.iter().any(|c| {
        ["Performance.getMetrics", "Input.dispatchMouseEvent"]
            .contains(&c["method"].as_str().unwrap_or_default())
    });
    assert!(!probed, "probed below both caps");
    reg.stop_all();
}
