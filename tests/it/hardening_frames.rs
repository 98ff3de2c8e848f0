//! Hardening of frame tracking, crashes, replies and page loss (issue 12, findings 4, 6, 9, 10
//! and 11), on the I/O-free state machine and on the scripted fake CDP browser.
//!
//! * Frame-parent cycles from the wire (self-parents, 2- and 3-cycles, re-parenting through
//!   `frameAttached`, `frameNavigated` and `attachedToTarget`) are rejected, and every walk of
//!   the frame map ends: each scenario runs on a helper thread with a deadline, so a regression
//!   fails the test instead of hanging it.
//! * A reply nested deeper than the JSON decoder's limit is an error, never `Ok(null)`.
//! * `Inspector.targetCrashed` / `Target.targetCrashed` mark the page or frame `crashed`, calls
//!   into it fail at once, and a navigation clears it.
//! * The page's detach fails only the calls on dead sessions; the browser-level
//!   `Target.closeTarget` that closed it still gets its (later) reply.
//! * `Page.navigatedWithinDocument` keeps `frame_tree` URLs current.

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::fakes::{WAIT, barrier, frame_navigated, page_session, wait_snapshot};
use cdp_supervisor::FrameEntry;
use cdp_supervisor::fake::{FakeBrowser, Rule};
use cdp_supervisor::unversioned::{CallKind, Core, CoreSettings, Deadline, Now, PendingCall};
use cdp_supervisor::{BridgeMode, DialogPolicy, Limits};
use cdp_supervisor::{
    Config, Error, Route, Snapshot, StartOptions, Supervisor, SupervisorRegistry,
};
use serde_json::{Value, json};

const PAGE: &str = "PAGE-1";

// ------------------------------------------------------------------ the state machine alone

fn core() -> Core {
    let settings = CoreSettings {
        policy: DialogPolicy::MustRespond,
        dialog_timeout: Duration::from_secs(300),
        bridge: BridgeMode::Off,
        follow_popups: false,
        browser_auto_attach: true,
        capture_console: false,
        limits: Limits::default(),
    };
    let mut core = Core::new("t", "ws://x/", settings);
    let now = Now::read();
    core.register(
        1,
        PendingCall {
            method: "Target.attachToTarget".into(),
            session_id: None,
            kind: CallKind::AttachPage {
                target_id: "MAIN".into(),
            },
            reply: None,
            expires: Deadline::NEVER,
        },
        now,
    );
    core.on_text(r#"{"id":1,"result":{"sessionId":"S1"}}"#, now);
    core.on_text(
        &json!({"method": "Page.frameNavigated", "sessionId": "S1",
                "params": {"frame": {"id": "MAIN", "url": "http://a.test/"}}})
        .to_string(),
        now,
    );
    core
}

fn ev(session: &str, method: &str, params: Value) -> String {
    json!({"method": method, "sessionId": session, "params": params}).to_string()
}

fn attached(frame: &str, parent: &str) -> String {
    ev(
        "S1",
        "Page.frameAttached",
        json!({"frameId": frame, "parentFrameId": parent}),
    )
}

fn detached(frame: &str) -> String {
    ev(
        "S1",
        "Page.frameDetached",
        json!({"frameId": frame, "reason": "remove"}),
    )
}

fn navigated(frame: &str, parent: &str) -> String {
    ev(
        "S1",
        "Page.frameNavigated",
        json!({"frame": {"id": frame, "parentId": parent, "url": "http://b.test/"}}),
    )
}

fn oopif(session: &str, frame: &str, parent: &str) -> String {
    ev(
        "S1",
        "Target.attachedToTarget",
        json!({"sessionId": session, "waitingForDebugger": false,
               "targetInfo": {"targetId": frame, "type": "iframe", "url": "http://c.test/",
                              "parentFrameId": parent}}),
    )
}

/// Feeds `msgs` to a fresh core on a helper thread and returns the last snapshot, or panics if
/// that takes longer than two seconds (a walk that loops).
fn run_bounded(what: &str, msgs: Vec<String>) -> Snapshot {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut core = core();
        let now = Now::read();
        for m in &msgs {
            core.on_text(m, now);
            let _ = core.take_outgoing();
            if let Some(s) = core.take_published() {
                let _ = s.to_json();
            }
        }
        let _ = tx.send(core.snapshot());
    });
    rx.recv_timeout(Duration::from_secs(2))
        .unwrap_or_else(|_| panic!("{what}: the state machine did not finish within 2 s"))
}

fn parent_of(s: &Snapshot, frame: &str) -> Option<String> {
    s.frames.get(frame).and_then(|r| r.parent_frame_id.clone())
}

/// No frame is its own ancestor.
fn assert_acyclic(s: &Snapshot) {
    for id in s.frames.keys() {
        let mut cur = parent_of(s, id);
        for _ in 0..=s.frames.len() {
            match cur {
                Some(p) if p == *id => panic!("{id} is its own ancestor"),
                Some(p) => cur = parent_of(s, &p),
                None => break,
            }
        }
        assert!(cur.is_none(), "the parent chain of {id} does not end");
    }
}

#[test]
fn self_parent_frame_is_rejected_and_its_detach_ends() {
    let s = run_bounded(
        "self-parent then detach",
        vec![attached("X", "X"), detached("X"), attached("Y", "MAIN")],
    );
    assert!(
        !s.frames.contains_key("X"),
        "a self-parented frame is not inserted"
    );
    assert_eq!(parent_of(&s, "Y").as_deref(), Some("MAIN"));
    assert_acyclic(&s);
}

#[test]
fn two_and_three_cycles_through_frame_attached_are_rejected() {
    let s = run_bounded(
        "2-cycle",
        vec![
            attached("A", "MAIN"),
            attached("B", "A"),
            attached("A", "B"),
            detached("A"),
        ],
    );
    assert!(!s.frames.contains_key("A") && !s.frames.contains_key("B"));
    assert_acyclic(&s);
    let s = run_bounded(
        "3-cycle",
        vec![
            attached("A", "MAIN"),
            attached("B", "A"),
            attached("C", "B"),
            attached("A", "C"),
            attached("MAIN", "C"),
        ],
    );
    assert_eq!(
        parent_of(&s, "A").as_deref(),
        Some("MAIN"),
        "re-parenting refused"
    );
    assert_eq!(
        parent_of(&s, "MAIN"),
        None,
        "the main frame keeps no parent"
    );
    assert_eq!(s.frame_tree.children.len(), 3);
    assert_acyclic(&s);
}

#[test]
fn cycles_through_frame_navigated_and_attached_to_target_are_rejected() {
    let s = run_bounded(
        "frameNavigated cycle",
        vec![
            attached("A", "MAIN"),
            attached("B", "A"),
            attached("C", "B"),
            navigated("A", "C"),
            navigated("B", "B"),
            detached("A"),
        ],
    );
    assert!(
        s.frames.keys().all(|k| k == "MAIN"),
        "{:?}",
        s.frames.keys()
    );
    assert_acyclic(&s);
    let s = run_bounded(
        "attachedToTarget cycle",
        vec![
            attached("A", "MAIN"),
            attached("B", "A"),
            oopif("CHILD", "A", "B"),
            oopif("CHILD2", "Z", "Z"),
            ev(
                "CHILD",
                "Page.frameAttached",
                json!({"frameId": "N", "parentFrameId": "A"}),
            ),
            detached("A"),
        ],
    );
    assert!(
        !s.frames.contains_key("Z"),
        "a self-parented OOPIF is not inserted"
    );
    assert!(!s.frames.contains_key("A") && !s.frames.contains_key("B"));
    assert_acyclic(&s);
}

#[test]
fn same_document_navigations_update_urls_in_the_state_machine() {
    let s = run_bounded(
        "navigatedWithinDocument",
        vec![
            attached("A", "MAIN"),
            navigated("A", "MAIN"),
            ev(
                "S1",
                "Page.navigatedWithinDocument",
                json!({"frameId": "MAIN", "url": "http://a.test/#top", "navigationType": "fragment"}),
            ),
            ev(
                "S1",
                "Page.navigatedWithinDocument",
                json!({"frameId": "A", "url": "http://b.test/pushed", "navigationType": "historyApi"}),
            ),
            // A session that does not own the frame cannot rewrite it.
            ev(
                "OTHER",
                "Page.navigatedWithinDocument",
                json!({"frameId": "A", "url": "http://evil.test/"}),
            ),
        ],
    );
    assert_eq!(s.frame_tree.top.as_ref().unwrap().url, "http://a.test/#top");
    assert_eq!(s.frames["A"].url, "http://b.test/pushed");
    assert_eq!(s.frames["A"].origin, "http://b.test");
}

// ------------------------------------------------------------------ the fake browser

fn setup() -> (FakeBrowser, SupervisorRegistry, Arc<Supervisor>) {
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = SupervisorRegistry::new(Config::default());
    let options = StartOptions::default().with_dialog_bridge(BridgeMode::Off);
    let sup = reg
        .get_or_start_with("task", &fake.ws_url(), options)
        .expect("attach to the fake browser");
    (fake, reg, sup)
}

fn child<'a>(s: &'a Snapshot, frame: &str) -> Option<&'a FrameEntry> {
    s.frame_tree.children.iter().find(|e| e.frame_id == frame)
}

/// The OOPIF `FRAME-X` on session `CHILD-1`, under the page's main frame.
fn with_oopif(fake: &FakeBrowser, sup: &Supervisor) -> String {
    let page = page_session(sup);
    fake.emit(
        Some(&page),
        "Target.attachedToTarget",
        json!({"sessionId": "CHILD-1", "waitingForDebugger": false,
               "targetInfo": {"targetId": "FRAME-X", "type": "iframe", "url": "http://other.test/",
                              "title": "", "attached": true, "parentFrameId": PAGE}}),
    );
    wait_snapshot(sup, "FRAME-X in frame_tree", |s| {
        child(s, "FRAME-X").is_some()
    });
    page
}

/// Waits for the fake to receive `method` and returns its id.
fn received_id(fake: &FakeBrowser, method: &str) -> Value {
    fake.wait_for_command(|c| c["method"] == method, WAIT)
        .unwrap_or_else(|| panic!("{method} never reached the fake"))["id"]
        .clone()
}

fn deep_array(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn reply_nested_deeper_than_the_decoder_limit_is_an_error_not_null() {
    let (fake, _reg, sup) = setup();
    fake.set_rule("Runtime.evaluate", Rule::Ignore);
    for (depth, decodable) in [(100usize, true), (130, false)] {
        let expression = format!("deep({depth})");
        let sup2 = Arc::clone(&sup);
        let expr = expression.clone();
        let call = thread::spawn(move || {
            sup2.call(
                "Runtime.evaluate",
                json!({"expression": expr, "returnByValue": true}),
                Route::Page,
                WAIT,
            )
        });
        let id = fake
            .wait_for_command(|c| c["params"]["expression"] == expression.as_str(), WAIT)
            .expect("the evaluate reached the fake")["id"]
            .clone();
        // serde_json cannot build a 130-deep Value, so the reply is written as raw text.
        let text = format!(
            r#"{{"id":{id},"sessionId":"{}","result":{{"result":{{"type":"object","value":{}}}}}}}"#,
            page_session(&sup),
            deep_array(depth)
        );
        fake.send_raw_text(text);
        let got = call.join().expect("the call thread");
        if decodable {
            let v = got.expect("a 100-deep value decodes");
            let mut cur = &v["result"]["value"];
            let mut n = 1;
            while let Some(inner) = cur.as_array().and_then(|a| a.first()) {
                cur = inner;
                n += 1;
            }
            assert_eq!(n, depth, "the value arrives whole");
        } else {
            match got {
                Err(Error::UndecodableReply { method, reason }) => {
                    assert_eq!(method, "Runtime.evaluate");
                    assert!(reason.contains("recursion"), "{reason}");
                }
                other => panic!("a 130-deep reply must be a clear decode error, got {other:?}"),
            }
        }
    }
    assert!(sup.is_active());
}

#[test]
fn crashed_oopif_is_marked_and_calls_into_it_fail_at_once_until_it_navigates() {
    let (fake, _reg, sup) = setup();
    with_oopif(&fake, &sup);
    fake.set_rule("Runtime.evaluate", Rule::Ignore);
    // A call in flight when the renderer crashes fails at once.
    let sup2 = Arc::clone(&sup);
    let in_flight = thread::spawn(move || {
        let t0 = Instant::now();
        let r = sup2.call(
            "Runtime.evaluate",
            json!({"expression": "1"}),
            Route::Frame("FRAME-X"),
            Duration::from_secs(10),
        );
        (r, t0.elapsed())
    });
    fake.wait_for_command(
        |c| c["method"] == "Runtime.evaluate" && c["sessionId"] == "CHILD-1",
        WAIT,
    )
    .expect("the evaluate reached the OOPIF session");
    fake.emit(Some("CHILD-1"), "Inspector.targetCrashed", json!({}));
    let (r, took) = in_flight.join().unwrap();
    assert!(
        matches!(&r, Err(Error::TargetCrashed { method, .. }) if method == "Runtime.evaluate"),
        "{r:?}"
    );
    assert!(
        took < Duration::from_secs(2),
        "failed at once, not at the deadline: {took:?}"
    );

    let s = wait_snapshot(&sup, "FRAME-X crashed", |s| {
        child(s, "FRAME-X").is_some_and(|x| x.crashed)
    });
    assert_eq!(s.to_json()["frame_tree"]["children"][0]["crashed"], true);
    assert!(!s.crashed, "the page itself did not crash");
    assert!(s.to_json().get("crashed").is_none());
    // New calls fail before anything is sent, by frame and by target.
    for route in [Route::Frame("FRAME-X"), Route::Target("FRAME-X")] {
        let t0 = Instant::now();
        let err = sup
            .call(
                "Runtime.evaluate",
                json!({"expression": "1"}),
                route,
                Duration::from_secs(10),
            )
            .expect_err("a crashed frame refuses calls");
        assert!(matches!(err, Error::TargetCrashed { .. }), "{err}");
        assert!(err.to_string().contains("FRAME-X"), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(1));
    }
    // The page still works.
    fake.clear_rule("Runtime.evaluate");
    sup.call(
        "Runtime.evaluate",
        json!({"expression": "1"}),
        Route::Page,
        WAIT,
    )
    .expect("the page is fine");
    // A new document in the frame: recovered.
    frame_navigated(&fake, "CHILD-1", "FRAME-X", None, "http://other.test/again");
    let s = wait_snapshot(&sup, "FRAME-X recovered", |s| {
        child(s, "FRAME-X").is_some_and(|x| !x.crashed)
    });
    assert!(
        s.to_json()["frame_tree"]["children"][0]
            .get("crashed")
            .is_none()
    );
    // And `Target.targetCrashed` (browser level, by target id) is understood too.
    fake.emit(
        None,
        "Target.targetCrashed",
        json!({"targetId": "FRAME-X", "status": "crashed", "errorCode": 139}),
    );
    wait_snapshot(&sup, "FRAME-X crashed again", |s| {
        child(s, "FRAME-X").is_some_and(|x| x.crashed)
    });
}

#[test]
fn crashed_page_is_marked_refuses_calls_but_lets_a_reload_through_then_recovers() {
    let (fake, _reg, sup) = setup();
    let page = page_session(&sup);
    fake.emit(Some(&page), "Inspector.targetCrashed", json!({}));
    let s = wait_snapshot(&sup, "the page crashed", |s| s.crashed);
    let j = s.to_json();
    assert_eq!(j["crashed"], true);
    assert_eq!(j["frame_tree"]["top"]["crashed"], true);
    for route in [Route::Page, Route::Target(PAGE), Route::Frame(PAGE)] {
        let t0 = Instant::now();
        let err = sup
            .call(
                "Runtime.evaluate",
                json!({"expression": "1"}),
                route,
                Duration::from_secs(10),
            )
            .expect_err("a crashed page refuses calls");
        assert!(matches!(err, Error::TargetCrashed { .. }), "{err}");
        assert!(err.to_string().contains("the page"), "{err}");
        assert!(t0.elapsed() < Duration::from_secs(1));
    }
    let tool = cdp_supervisor::tools::browser_cdp(
        &_reg,
        "task",
        &json!({"method": "Runtime.evaluate", "params": {"expression": "1"}}),
    );
    assert_eq!(tool["success"], false);
    assert!(
        tool["error"].as_str().unwrap().contains("crashed"),
        "{tool}"
    );
    // Browser-level calls are unaffected; a reload goes through.
    barrier(&sup);
    sup.call("Page.reload", json!({}), Route::Page, WAIT)
        .expect("Page.reload reaches a crashed page");
    fake.emit(Some(&page), "Inspector.targetReloadedAfterCrash", json!({}));
    let s = wait_snapshot(&sup, "the page recovered", |s| !s.crashed);
    assert!(s.to_json().get("crashed").is_none());
    assert!(s.to_json()["frame_tree"]["top"].get("crashed").is_none());
    sup.call(
        "Runtime.evaluate",
        json!({"expression": "1"}),
        Route::Page,
        WAIT,
    )
    .expect("calls work again");
}

#[test]
fn closing_the_page_fails_only_calls_on_dead_sessions_and_the_close_reply_arrives() {
    let (fake, _reg, sup) = setup();
    with_oopif(&fake, &sup);
    let page = page_session(&sup);
    fake.set_rule("Target.closeTarget", Rule::Ignore);
    fake.set_rule("Runtime.evaluate", Rule::Ignore);
    let sup2 = Arc::clone(&sup);
    let close = thread::spawn(move || {
        sup2.call(
            "Target.closeTarget",
            json!({"targetId": PAGE}),
            Route::Browser,
            WAIT,
        )
    });
    let close_id = received_id(&fake, "Target.closeTarget");
    let mut on_dead = Vec::new();
    for route in [Route::Page, Route::Frame("FRAME-X")] {
        let sup2 = Arc::clone(&sup);
        on_dead.push(thread::spawn(move || {
            let t0 = Instant::now();
            let r = sup2.call("Runtime.evaluate", json!({"expression": "1"}), route, WAIT);
            (r, t0.elapsed())
        }));
    }
    for sid in [page.as_str(), "CHILD-1"] {
        fake.wait_for_command(
            |c| c["method"] == "Runtime.evaluate" && c["sessionId"] == sid,
            WAIT,
        )
        .expect("the evaluate reached the fake");
    }
    // Chromium's order (SPEC §11): the page's detach, then the reply to the close. The fake
    // answers nothing else meanwhile, as Chromium has nothing else to say.
    fake.set_rule("Browser.getVersion", Rule::Ignore);
    fake.emit(
        Some(&page),
        "Inspector.detached",
        json!({"reason": "Render process gone."}),
    );
    fake.emit(
        None,
        "Target.detachedFromTarget",
        json!({"sessionId": page, "targetId": PAGE}),
    );
    for t in on_dead {
        let (r, took) = t.join().unwrap();
        assert!(matches!(r, Err(Error::ConnectionLost(_))), "{r:?}");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }
    fake.send_raw_text(json!({"id": close_id, "result": {"success": true}}).to_string());
    let r = close.join().unwrap();
    assert_eq!(
        r.expect("the close succeeded and says so"),
        json!({"success": true})
    );
    // Then the supervisor ends, saying why.
    let s = wait_snapshot(&sup, "the supervisor ends", |s| !s.is_active());
    assert!(
        s.disconnect_reason
            .as_deref()
            .is_some_and(|r| r.contains("page target was closed")),
        "{:?}",
        s.disconnect_reason
    );
}

#[test]
fn page_loss_with_no_browser_call_waiting_ends_the_supervisor_at_once() {
    let (fake, _reg, sup) = setup();
    let page = page_session(&sup);
    fake.emit(
        None,
        "Target.detachedFromTarget",
        json!({"sessionId": page, "targetId": PAGE}),
    );
    let s = wait_snapshot(&sup, "the supervisor ends", |s| !s.is_active());
    assert!(
        s.disconnect_reason
            .as_deref()
            .unwrap_or("")
            .contains("page target")
    );
}

#[test]
fn same_document_navigations_keep_frame_tree_urls_current() {
    let (fake, _reg, sup) = setup();
    let page = with_oopif(&fake, &sup);
    // A same-process frame nested in the OOPIF.
    fake.emit(
        Some("CHILD-1"),
        "Page.frameAttached",
        json!({"frameId": "NESTED", "parentFrameId": "FRAME-X"}),
    );
    frame_navigated(
        &fake,
        "CHILD-1",
        "NESTED",
        Some("FRAME-X"),
        "http://other.test/nested",
    );
    wait_snapshot(&sup, "NESTED", |s| child(s, "NESTED").is_some());
    let within = |session: &str, frame: &str, url: &str, kind: &str| {
        fake.emit(
            Some(session),
            "Page.navigatedWithinDocument",
            json!({"frameId": frame, "url": url, "navigationType": kind}),
        );
    };
    within(&page, PAGE, "http://fake.test/#section", "fragment");
    within(
        "CHILD-1",
        "FRAME-X",
        "http://other.test/pushed?x=1",
        "historyApi",
    );
    within(
        "CHILD-1",
        "NESTED",
        "http://other.test/nested#h",
        "fragment",
    );
    let s = wait_snapshot(&sup, "URLs follow", |s| {
        s.frame_tree
            .top
            .as_ref()
            .is_some_and(|t| t.url == "http://fake.test/#section")
            && child(s, "FRAME-X").is_some_and(|x| x.url == "http://other.test/pushed?x=1")
            && child(s, "NESTED").is_some_and(|x| x.url == "http://other.test/nested#h")
    });
    assert_eq!(child(&s, "FRAME-X").unwrap().origin, "http://other.test");
    // The page session cannot rewrite the OOPIF's URL (it does not own its document).
    within(&page, "FRAME-X", "http://elsewhere.test/", "historyApi");
    barrier(&sup);
    assert_eq!(
        child(&sup.snapshot(), "FRAME-X").unwrap().url,
        "http://other.test/pushed?x=1"
    );
}
