//! The popup watcher's life on the fake browser (issue 28 point 1): it closes with the last task
//! of its browser, however that task ends, and opens again for the next; it never connects to
//! an endpoint that is not a browser's own.
//!
//! The fake hands pages over like Chromium (`set_auto_attach_pages`), so a registry connects a
//! watcher to it: its connections are the tasks' plus, while one is open, the watcher's.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::config::{Config, StartOptions};
use crate::fake::FakeBrowser;
use crate::registry::SupervisorRegistry;
use crate::supervisor::Supervisor;

use super::browser_path;

const WAIT: Duration = Duration::from_secs(5);

/// What the issue asks of a closing watcher: gone within 1 s of its last task.
const CLOSED_WITHIN: Duration = Duration::from_secs(1);

fn fake() -> FakeBrowser {
    let fake = FakeBrowser::start().expect("fake browser");
    fake.set_auto_attach_pages(true);
    fake
}

fn served(sup: &Supervisor) -> bool {
    !sup.follows_popups_itself()
}

fn own_page() -> StartOptions {
    StartOptions::default().with_new_page(true)
}

#[test]
fn the_watcher_closes_with_the_last_task_and_opens_again_for_the_next() {
    let fake = fake();
    let reg = SupervisorRegistry::new(Config::default());
    let a = reg
        .get_or_start_with("a", &fake.ws_url(), own_page())
        .unwrap();
    assert!(served(&a), "the watcher serves the first task");
    assert!(
        fake.wait_for_connections(2, WAIT),
        "the task's and the watcher's"
    );
    let b = reg
        .get_or_start_with("b", &fake.ws_url(), own_page())
        .unwrap();
    assert!(served(&b));
    assert!(fake.wait_for_connections(3, WAIT), "one watcher for both");
    assert_eq!(fake.accepted_count(), 3);

    assert!(reg.stop("a"));
    assert!(fake.wait_for_connections(2, WAIT), "b and the watcher");
    assert!(reg.stop("b"));
    assert!(
        fake.wait_for_connections(0, CLOSED_WITHIN),
        "the watcher is gone within 1 s of its last task: {} connections",
        fake.connection_count()
    );

    let c = reg
        .get_or_start_with("c", &fake.ws_url(), own_page())
        .unwrap();
    assert!(served(&c), "a new watcher serves the next task");
    assert!(fake.wait_for_connections(2, WAIT));
    assert_eq!(
        fake.accepted_count(),
        5,
        "the next task's and a new watcher's"
    );
}

#[test]
fn a_task_that_dies_closes_its_idle_watcher() {
    let fake = fake();
    let reg = SupervisorRegistry::new(Config::default().with_reconnect_attempts(0));
    let sup = reg.get_or_start("dies", &fake.ws_url()).unwrap();
    assert!(served(&sup));
    assert!(fake.wait_for_connections(2, WAIT));
    // The task's page goes: it ends dead, and nobody stops it.
    let page = fake.page_target_id();
    for session in fake.page_sessions() {
        fake.emit(
            None,
            "Target.detachedFromTarget",
            json!({"sessionId": session, "targetId": page}),
        );
    }
    assert!(
        sup.wait_for(WAIT, |s| s.state.is_final()).is_some(),
        "the task ends"
    );
    assert!(
        fake.wait_for_connections(0, CLOSED_WITHIN),
        "the watcher closes within 1 s of its last task's end: {} connections",
        fake.connection_count()
    );
    assert_eq!(reg.tasks(), ["dies"], "the dead task keeps its slot");
}

#[test]
fn a_start_racing_the_last_stop_is_served_by_an_open_watcher() {
    let fake = fake();
    let reg = Arc::new(SupervisorRegistry::new(Config::default()));
    reg.get_or_start_with("t0", &fake.ws_url(), own_page())
        .unwrap();
    for i in 1..=20 {
        let stop = {
            let reg = Arc::clone(&reg);
            std::thread::spawn(move || reg.stop(&format!("t{}", i - 1)))
        };
        let sup = reg
            .get_or_start_with(&format!("t{i}"), &fake.ws_url(), own_page())
            .unwrap();
        assert!(stop.join().unwrap());
        assert!(served(&sup), "round {i}: served by a watcher");
        assert!(
            fake.wait_for_connections(2, WAIT),
            "round {i}: the task's and one open watcher's, not {}",
            fake.connection_count()
        );
    }
}

#[test]
fn an_endpoint_with_a_browser_per_connection_never_sees_a_watcher() {
    let fake = fake();
    fake.set_new_browser_per_connection(true);
    let reg = SupervisorRegistry::new(Config::default());
    for (i, url) in [fake.ws_url(), fake.http_url()].iter().enumerate() {
        let sup = reg.get_or_start(&format!("t{i}"), url).unwrap();
        assert!(!served(&sup), "{url}: the task follows its popups itself");
    }
    assert_eq!(fake.accepted_count(), 2, "the tasks' connections alone");
}

#[test]
fn no_watcher_follows_a_registry_without_one_or_a_task_that_does_not_follow_popups() {
    let fake = fake();
    let reg = SupervisorRegistry::new(Config::default().with_follow_popups(false));
    reg.get_or_start("off", &fake.ws_url()).unwrap();
    let reg2 = SupervisorRegistry::with_popup_watcher(Config::default(), false);
    reg2.get_or_start("own", &fake.ws_url()).unwrap();
    assert_eq!(fake.accepted_count(), 2, "the tasks' connections alone");
}

#[test]
fn a_browser_path_is_devtools_browser_and_an_id_after_any_prefix() {
    assert_eq!(browser_path("/devtools/browser/abc"), Some(("", "abc")));
    assert_eq!(
        browser_path("/bl/devtools/browser/x-1"),
        Some(("/bl", "x-1"))
    );
    assert_eq!(browser_path("/devtools/browser/"), None);
    assert_eq!(browser_path("/"), None);
    assert_eq!(browser_path(""), None);
    assert_eq!(browser_path("/devtools/page/abc"), None);
    assert_eq!(browser_path("/chromium"), None);
    assert_eq!(browser_path("/xdevtools/browser/abc"), None);
}
