//! Closing a task's own page (`StartOptions::new_page`) at stop, on the fake browser: a
//! `Target.closeTarget` answered `{success: true}` while the page stays open (what Chromium 156
//! does when the close meets a commit: `e2e_own_page`) is sent again until the page goes, and
//! the stop stays within its budget when the page never goes.

use cdp_supervisor::StartRequest;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cdp_supervisor::fake::{FakeBrowser, Rule};
use cdp_supervisor::{Config, StartOptions, Supervisor, SupervisorRegistry, SupervisorState};
use serde_json::{Value, json};

use crate::common;

const WAIT: Duration = Duration::from_secs(5);

/// The `Target.closeTarget` commands the fake received for `page`.
fn closes_of(fake: &FakeBrowser, page: &str) -> usize {
    fake.received()
        .iter()
        .filter(|c| c["method"] == "Target.closeTarget" && c["params"]["targetId"] == page)
        .count()
}

/// Starts `task` on `fake` with a page of its own; returns its registry, supervisor, page target
/// and session.
fn start_with_own_page(
    fake: &FakeBrowser,
    task: &str,
) -> (SupervisorRegistry, Arc<Supervisor>, String, String) {
    let reg = SupervisorRegistry::new(Config::default());
    let sup = reg
        .start(
            StartRequest::new(task, &fake.ws_url())
                .with_options(StartOptions::default().with_new_page(true)),
        )
        .expect("start with a page of its own");
    let snap = sup.snapshot();
    let page = snap.page_target_id.clone().expect("its page");
    let session = snap.page_session_id.clone().expect("its session");
    assert_ne!(page, fake.page_target_id(), "a page of its own");
    (reg, sup, page, session)
}

#[test]
fn stop_closes_its_own_page_again_while_it_stays_and_ends_once_it_is_gone() {
    let fake = FakeBrowser::start().unwrap();
    // Answered, and the page stays.
    fake.set_rule("Target.closeTarget", Rule::Reply(json!({"success": true})));
    let (reg, sup, page, session) = start_with_own_page(&fake, "own-page-stays");
    let (took, closes_when_gone) = std::thread::scope(|s| {
        let stop = s.spawn(|| {
            let t = Instant::now();
            reg.stop("own-page-stays");
            t.elapsed()
        });
        common::wait_until(WAIT, || (closes_of(&fake, &page) >= 2).then_some(()))
            .expect("a second Target.closeTarget while the page stays");
        let closes = closes_of(&fake, &page);
        // The page goes, as Chromium says it: its session detaches.
        fake.emit(
            None,
            "Target.detachedFromTarget",
            json!({"sessionId": session, "targetId": page}),
        );
        (stop.join().unwrap(), closes)
    });
    let closes = closes_of(&fake, &page);
    eprintln!("stop took {took:?}; {closes} Target.closeTarget ({closes_when_gone} when it went)");
    assert!(
        closes <= closes_when_gone + 1,
        "no close after the page went, but the one in flight: {closes}"
    );
    assert!(took < Duration::from_secs(1), "stop took {took:?}");
    assert!(reg.tasks().is_empty());
    // The page went because the stop closed it: stopped on purpose, not dead.
    assert_eq!(sup.state(), SupervisorState::Stopped);
    assert_eq!(sup.snapshot().state, SupervisorState::Stopped);
}

#[test]
fn stop_gives_up_on_its_own_page_that_never_goes_within_its_budget() {
    let fake = FakeBrowser::start().unwrap();
    fake.set_rule("Target.closeTarget", Rule::Reply(json!({"success": true})));
    let (reg, sup, page, _) = start_with_own_page(&fake, "own-page-never-goes");
    let t = Instant::now();
    reg.stop("own-page-never-goes");
    let took = t.elapsed();
    let closes = closes_of(&fake, &page);
    eprintln!("stop took {took:?}; {closes} Target.closeTarget");
    assert!(took < Duration::from_secs(1), "stop took {took:?}");
    assert!(closes >= 3, "sent again while the page stayed: {closes}");
    assert_eq!(sup.snapshot().state, SupervisorState::Stopped);
    let others: Vec<Value> = fake
        .received()
        .into_iter()
        .filter(|c| c["method"] == "Target.closeTarget" && c["params"]["targetId"] != page)
        .collect();
    assert!(others.is_empty(), "only its own page is closed: {others:?}");
}

/// `PageChoice::FirstListed` (the Hermes drop-in's `legacy_first_page`): the browser's first
/// listed page is taken whatever its URL, and one that is listed but gone by the time it is
/// attached (`Target.attachToTarget`: "No target with given id found", as Chromium answers for
/// a page closed a moment before) is passed over for the next on the same connection. The
/// default choice takes the first page with a web URL, so it attaches to the gone one and fails.
#[test]
fn first_listed_page_choice_passes_over_a_listed_page_that_is_gone() {
    use cdp_supervisor::{Error, PageChoice};
    let fake = FakeBrowser::start().unwrap();
    let page = fake.page_target_id();
    let listed = json!({"targetInfos": [
        {"targetId": "GONE", "type": "page", "url": "http://gone.test/", "title": "",
         "attached": false, "browserContextId": "C1"},
        {"targetId": page, "type": "page", "url": "chrome://newtab/", "title": "",
         "attached": false, "browserContextId": "C1"},
    ]});
    fake.set_rule("Target.getTargets", Rule::Reply(listed));
    let reg = SupervisorRegistry::new(Config::default());
    let first_listed = StartOptions::default().with_page_choice(PageChoice::FirstListed);
    let sup = reg
        .start(StartRequest::new("first-listed", &fake.ws_url()).with_options(first_listed))
        .expect("the next listed page is taken");
    assert_eq!(
        sup.snapshot().page_target_id.as_deref(),
        Some(page.as_str())
    );
    let attaches: Vec<Value> = fake
        .received()
        .into_iter()
        .filter(|c| c["method"] == "Target.attachToTarget")
        .map(|c| c["params"]["targetId"].clone())
        .collect();
    assert_eq!(attaches, [json!("GONE"), json!(page)]);
    let created = fake
        .received()
        .iter()
        .any(|c| c["method"] == "Target.createTarget");
    assert!(!created, "no page of its own");
    reg.stop("first-listed");
    let e = reg
        .start(
            StartRequest::new("first-usable", &fake.ws_url()).with_options(StartOptions::default()),
        )
        .expect_err("the default choice takes the gone page");
    assert!(
        matches!(&e, Error::Cdp { method, .. } if method == "Target.attachToTarget"),
        "{e:?}"
    );
}
