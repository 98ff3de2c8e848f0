//! Every dialog state transition, driven by the scripted fake CDP browser (SPEC §5).

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::fakes::{WAIT, wait_pending, wait_snapshot};
use cdp_supervisor::fake::{FakeBrowser, Rule};
use cdp_supervisor::{
    ClosedBy, Config, DialogAction, DialogPolicy, Error, Route, StartOptions, Supervisor,
    SupervisorRegistry, tools,
};
use serde_json::{Value, json};

fn setup(options: StartOptions) -> (FakeBrowser, SupervisorRegistry, Arc<Supervisor>) {
    setup_with(Config::default(), options)
}

fn no_reconnect() -> Config {
    Config::default().with_reconnect_attempts(0)
}

fn setup_with(
    config: Config,
    options: StartOptions,
) -> (FakeBrowser, SupervisorRegistry, Arc<Supervisor>) {
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = SupervisorRegistry::new(config);
    let sup = reg
        .get_or_start_with("task", &fake.ws_url(), options)
        .expect("attach to the fake browser");
    (fake, reg, sup)
}

fn wait_closed(sup: &Supervisor, id: &str) -> cdp_supervisor::ClosedDialog {
    let s = wait_snapshot(sup, &format!("{id} in recent_dialogs"), |s| {
        s.closed_dialog(id).is_some()
    });
    s.closed_dialog(id).cloned().expect("just checked")
}

fn answers_sent(fake: &FakeBrowser) -> Vec<Value> {
    fake.received()
        .into_iter()
        .filter(|c| c["method"] == "Page.handleJavaScriptDialog")
        .collect()
}

#[test]
fn attach_publishes_page_target_and_main_frame_from_first_snapshot() {
    let (fake, _reg, sup) = setup(StartOptions::default());
    let s = sup.snapshot();
    assert!(s.is_active());
    assert_eq!(
        s.page_target_id.as_deref(),
        Some(fake.page_target_id().as_str())
    );
    let top = s
        .frame_tree
        .top
        .as_ref()
        .expect("top frame seeded by Page.getFrameTree");
    assert_eq!(top.frame_id, fake.page_target_id());
    assert_eq!(top.origin, "http://fake.test");
    let j = s.to_json();
    assert_eq!(j["pending_dialogs"], json!([]));
    assert!(j.get("recent_dialogs").is_none());
    assert_eq!(j["page_target_id"], json!(fake.page_target_id()));
    // The attach sequence really happened, in SPEC order, on the page session. The last command
    // is pipelined after the one `get_or_start` waits for: let the fake read it first.
    fake.wait_for_command(|c| c["method"] == "Target.setAutoAttach", WAIT)
        .expect("the fake read Target.setAutoAttach");
    let methods: Vec<String> = fake
        .received()
        .iter()
        .map(|c| c["method"].as_str().unwrap_or("").to_string())
        .collect();
    for m in [
        "Target.getTargets",
        "Target.attachToTarget",
        "Page.enable",
        "Page.getFrameTree",
        "Target.setAutoAttach",
    ] {
        assert!(methods.iter().any(|x| x == m), "{m} not sent: {methods:?}");
    }
    // Nothing a page can see (SPEC §19): no Runtime.enable, no script, no binding.
    for m in [
        "Runtime.enable",
        "Page.addScriptToEvaluateOnNewDocument",
        "Runtime.addBinding",
    ] {
        assert!(!methods.iter().any(|x| x == m), "{m} sent: {methods:?}");
    }
    let auto = fake
        .received()
        .into_iter()
        .find(|c| c["method"] == "Target.setAutoAttach")
        .unwrap();
    assert_eq!(
        auto["params"],
        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true})
    );
}

#[test]
fn dialog_opens_pending_then_agent_answer_closes_it_as_agent() {
    let (fake, _reg, sup) = setup(StartOptions::default());
    fake.open_dialog("prompt", "Your name?", "bob");
    let s = wait_pending(&sup, 1);
    let d = &s.pending_dialogs[0];
    assert_eq!(
        (d.id.as_str(), d.kind.as_str(), d.message.as_str()),
        ("d-1", "prompt", "Your name?")
    );
    assert_eq!(d.default_prompt, "bob");
    assert_eq!(d.frame_id.as_deref(), Some(fake.page_target_id().as_str()));
    assert!(d.opened_at > 1.6e9);
    let answered = sup
        .respond_to_dialog(DialogAction::Accept, Some("Zoë ✓"), None)
        .expect("answer");
    assert_eq!(answered.id, "d-1");
    // The reply is delivered only after the snapshot shows its effect.
    let s = sup.snapshot();
    assert!(s.pending_dialogs.is_empty());
    let c = s.closed_dialog("d-1").expect("recorded");
    assert_eq!(c.closed_by, ClosedBy::Agent);
    assert_eq!(c.user_input.as_deref(), Some("Zoë ✓"));
    assert!(c.closed_at >= c.dialog.opened_at);
    let sent = answers_sent(&fake);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0]["params"],
        json!({"accept": true, "promptText": "Zoë ✓"})
    );
    assert_eq!(
        sent[0]["sessionId"],
        json!(s.page_session_id.clone().unwrap())
    );
    assert_eq!(s.to_json()["recent_dialogs"][0]["closed_by"], "agent");
}

#[test]
fn accepting_a_prompt_without_text_sends_its_default() {
    let (fake, _reg, sup) = setup(StartOptions::default());
    fake.open_dialog("prompt", "Q", "the default");
    wait_pending(&sup, 1);
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap();
    assert_eq!(
        answers_sent(&fake)[0]["params"],
        json!({"accept": true, "promptText": "the default"})
    );
}

#[test]
fn dismiss_sends_no_prompt_text() {
    let (fake, _reg, sup) = setup(StartOptions::default());
    fake.open_dialog("confirm", "Sure?", "");
    wait_pending(&sup, 1);
    sup.respond_to_dialog(DialogAction::Dismiss, Some("ignored"), None)
        .unwrap();
    assert_eq!(answers_sent(&fake)[0]["params"], json!({"accept": false}));
    assert_eq!(wait_closed(&sup, "d-1").closed_by, ClosedBy::Agent);
}

#[test]
fn auto_dismiss_policy_answers_at_once_as_auto_policy() {
    let (fake, _reg, sup) =
        setup(StartOptions::default().with_dialog_policy(DialogPolicy::AutoDismiss));
    fake.open_dialog("confirm", "Leave?", "");
    let c = wait_closed(&sup, "d-1");
    assert_eq!(c.closed_by, ClosedBy::AutoPolicy);
    assert_eq!(c.accepted, Some(false));
    assert_eq!(answers_sent(&fake)[0]["params"], json!({"accept": false}));
    assert!(sup.snapshot().pending_dialogs.is_empty());
}

#[test]
fn auto_accept_policy_gives_a_prompt_its_default_text() {
    let (fake, _reg, sup) =
        setup(StartOptions::default().with_dialog_policy(DialogPolicy::AutoAccept));
    fake.open_dialog("prompt", "Name?", "anon");
    let c = wait_closed(&sup, "d-1");
    assert_eq!(c.closed_by, ClosedBy::AutoPolicy);
    assert_eq!(c.user_input.as_deref(), Some("anon"));
    assert_eq!(
        answers_sent(&fake)[0]["params"],
        json!({"accept": true, "promptText": "anon"})
    );
    fake.open_dialog("alert", "hi", "");
    let c = wait_closed(&sup, "d-2");
    assert_eq!(c.closed_by, ClosedBy::AutoPolicy);
    assert_eq!(answers_sent(&fake)[1]["params"], json!({"accept": true}));
}

#[test]
fn watchdog_dismisses_an_unanswered_dialog_and_records_watchdog() {
    let (fake, _reg, sup) =
        setup(StartOptions::default().with_dialog_timeout(Duration::from_millis(200)));
    let opened = Instant::now();
    fake.open_dialog("alert", "nobody answers", "");
    wait_pending(&sup, 1);
    let c = wait_closed(&sup, "d-1");
    let took = opened.elapsed();
    assert_eq!(c.closed_by, ClosedBy::Watchdog);
    assert!(took >= Duration::from_millis(190), "fired early: {took:?}");
    let sent = answers_sent(&fake);
    assert_eq!(sent.len(), 1, "exactly one dismissal: {sent:?}");
    assert_eq!(sent[0]["params"], json!({"accept": false}));
    assert!(
        !fake.dialog_open(),
        "the dismissal really reached the browser"
    );
}

#[test]
fn watchdog_does_not_fire_for_an_answered_dialog() {
    let (fake, _reg, sup) =
        setup(StartOptions::default().with_dialog_timeout(Duration::from_millis(150)));
    fake.open_dialog("alert", "answered in time", "");
    wait_pending(&sup, 1);
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap();
    // Open a second dialog after the first one's deadline would have passed: if the watchdog had
    // wrongly fired for d-1, it would show up as a second handleJavaScriptDialog.
    fake.open_dialog("alert", "second", "");
    wait_pending(&sup, 1);
    let c = wait_closed(&sup, "d-2");
    assert_eq!(c.closed_by, ClosedBy::Watchdog);
    assert_eq!(wait_closed(&sup, "d-1").closed_by, ClosedBy::Agent);
    assert_eq!(answers_sent(&fake).len(), 2);
}

#[test]
fn dialog_closed_with_no_answer_in_flight_is_remote() {
    let (fake, _reg, sup) = setup(StartOptions::default());
    fake.open_dialog("alert", "x", "");
    wait_pending(&sup, 1);
    fake.close_dialog_remotely();
    assert_eq!(wait_closed(&sup, "d-1").closed_by, ClosedBy::Remote);
    let err = sup
        .respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap_err();
    assert!(matches!(err, Error::NoDialog), "{err}");
    let err = sup
        .respond_to_dialog(DialogAction::Accept, None, Some("d-1"))
        .unwrap_err();
    assert!(matches!(err, Error::DialogAlreadyClosed { .. }), "{err}");
    assert!(err.to_string().contains("remote"), "{err}");
}

/// From now on the fake refuses every answer as Chromium does for a dialog it no longer shows.
fn refuse_answers(fake: &FakeBrowser) {
    fake.set_rule(
        "Page.handleJavaScriptDialog",
        Rule::Error {
            code: -32602,
            message: "No dialog is showing".into(),
        },
    );
}

/// SPEC §5, §11: a refusal ("No dialog is showing") without a Closed event means the dialog may
/// still block its frame, unanswerable over CDP: it leaves `pending_dialogs` for `blocked`, and
/// is recorded `remote` only once a Closed event (or a new document) shows it gone.
#[test]
fn refused_answer_without_a_closed_event_is_unanswerable_until_the_close_comes() {
    let (fake, _reg, sup) = setup(StartOptions::default());
    fake.open_dialog("confirm", "x", "");
    wait_pending(&sup, 1);
    refuse_answers(&fake);
    let err = sup
        .respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap_err();
    match &err {
        Error::DialogUnanswerable { id, frame_id } => {
            assert_eq!(id, "d-1");
            assert_eq!(frame_id.as_deref(), Some("PAGE-1"));
        }
        other => panic!("wrong error: {other}"),
    }
    assert!(err.to_string().contains("reload"), "{err}");
    let s = sup.snapshot();
    assert!(s.pending_dialogs.is_empty());
    assert!(
        s.closed_dialog("d-1").is_none(),
        "not closed: it still blocks"
    );
    let b = s.blocked.as_ref().expect("blocked names the frame");
    assert_eq!(b.reason, "unanswerable_dialog");
    assert_eq!(b.frame_id.as_deref(), Some("PAGE-1"));
    // A call that would hang behind it fails at once; a reload (which clears it) goes through.
    let call = sup.call(
        "Runtime.evaluate",
        serde_json::json!({"expression": "1"}),
        cdp_supervisor::Route::Page,
        Duration::from_secs(20),
    );
    assert!(
        matches!(&call, Err(Error::DialogUnanswerable { .. })),
        "{call:?}"
    );
    // Answering again says the same, without a CDP round trip.
    let again = sup.respond_to_dialog(DialogAction::Dismiss, None, None);
    assert!(
        matches!(&again, Err(Error::DialogUnanswerable { .. })),
        "{again:?}"
    );
    // The browser's Closed event comes after all: now it is remote, and nothing is blocked.
    fake.close_dialog_remotely();
    let s = wait_snapshot(&sup, "d-1 recorded", |s| s.closed_dialog("d-1").is_some());
    assert_eq!(s.closed_dialog("d-1").unwrap().closed_by, ClosedBy::Remote);
    assert!(s.blocked.is_none(), "{:?}", s.blocked);
}

#[test]
fn an_unanswerable_dialog_ends_with_a_new_document_of_the_page() {
    let (fake, _reg, sup) = setup(StartOptions::default());
    fake.open_dialog("alert", "stuck", "");
    wait_pending(&sup, 1);
    refuse_answers(&fake);
    let err = sup.respond_to_dialog(DialogAction::Accept, None, None);
    assert!(
        matches!(&err, Err(Error::DialogUnanswerable { .. })),
        "{err:?}"
    );
    // A reload: the main frame gets a new document.
    let page = sup
        .snapshot()
        .page_session_id
        .clone()
        .expect("page session");
    common::fakes::frame_navigated(&fake, &page, "PAGE-1", None, "http://fake.test/again");
    let s = wait_snapshot(&sup, "d-1 recorded", |s| s.closed_dialog("d-1").is_some());
    assert_eq!(s.closed_dialog("d-1").unwrap().closed_by, ClosedBy::Remote);
    assert!(s.blocked.is_none(), "{:?}", s.blocked);
}

#[test]
fn closed_event_during_a_refused_answer_is_remote_not_agent() {
    let (fake, _reg, sup) = setup(StartOptions::default());
    fake.open_dialog("alert", "x", "");
    wait_pending(&sup, 1);
    // The proxy closes the dialog while our answer is on the wire; the browser then refuses it.
    fake.set_rule(
        "Page.handleJavaScriptDialog",
        Rule::Delay(
            Duration::from_millis(150),
            Box::new(Rule::Error {
                code: -32602,
                message: "No dialog is showing".into(),
            }),
        ),
    );
    let answering = {
        let sup = Arc::clone(&sup);
        std::thread::spawn(move || sup.respond_to_dialog(DialogAction::Accept, None, None))
    };
    fake.wait_for_command(|c| c["method"] == "Page.handleJavaScriptDialog", WAIT)
        .expect("answer sent");
    fake.close_dialog_remotely();
    let err = answering.join().unwrap().unwrap_err();
    assert!(matches!(err, Error::DialogAlreadyClosed { .. }), "{err}");
    assert_eq!(wait_closed(&sup, "d-1").closed_by, ClosedBy::Remote);
}

#[test]
fn two_pending_dialogs_without_dialog_id_is_an_error_listing_both() {
    let (fake, _reg, sup) = setup(StartOptions::default());
    fake.open_dialog("alert", "first", "");
    // A second dialog on another session (an OOPIF's or a second page's).
    fake.emit(
        Some("OTHER-SESSION"),
        "Page.javascriptDialogOpening",
        json!({"url": "http://x/", "frameId": "F2", "message": "second", "type": "confirm", "hasBrowserHandler": false, "defaultPrompt": ""}),
    );
    wait_pending(&sup, 2);
    let err = sup
        .respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, Error::AmbiguousDialog { count: 2, .. }),
        "{text}"
    );
    assert!(text.contains("d-1") && text.contains("d-2"), "{text}");
    let err = sup
        .respond_to_dialog(DialogAction::Accept, None, Some("d-9"))
        .unwrap_err();
    assert!(err.to_string().contains("d-1, d-2"), "{err}");
    // Naming one works and goes to the session the dialog came from.
    sup.respond_to_dialog(DialogAction::Accept, None, Some("d-1"))
        .unwrap();
    assert_eq!(wait_closed(&sup, "d-1").closed_by, ClosedBy::Agent);
    assert_eq!(sup.snapshot().pending_dialogs[0].id, "d-2");
}

#[test]
fn tool_handler_reports_every_error_case() {
    let (fake, reg, sup) = setup(StartOptions::default());
    let call = |args: Value| tools::browser_dialog(&reg, "task", &args);
    let r = tools::browser_dialog(&reg, "nobody", &json!({"action": "accept"}));
    assert_eq!(r["success"], false);
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("no browser supervisor"),
        "{r}"
    );
    let r = call(json!({"action": "maybe"}));
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("\"accept\" or \"dismiss\""),
        "{r}"
    );
    let r = call(json!({}));
    assert_eq!(r["success"], false);
    let r = call(json!({"action": "accept", "prompt_text": 5}));
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("prompt_text must be a string"),
        "{r}"
    );
    let r = call(json!("not an object"));
    assert_eq!(r["success"], false);
    let r = call(json!({"action": "accept"}));
    assert!(r["error"].as_str().unwrap().contains("no dialog"), "{r}");
    fake.open_dialog("prompt", "Name?", "d");
    wait_pending(&sup, 1);
    let r = call(json!({"action": "accept", "dialog_id": "d-7"}));
    assert!(r["error"].as_str().unwrap().contains("d-1"), "{r}");
    let r = call(json!({"action": "accept", "prompt_text": "via tool"}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["action"], "accept");
    assert_eq!(r["dialog"]["id"], "d-1");
    assert_eq!(r["dialog"]["type"], "prompt");
    let snap = tools::browser_snapshot(&reg, "task", &json!({}));
    assert_eq!(snap["recent_dialogs"][0]["closed_by"], "agent");
    assert_eq!(
        tools::browser_snapshot(&reg, "nobody", &json!({})),
        json!({})
    );
    reg.stop("task");
    let r = call(json!({"action": "accept"}));
    assert_eq!(r["success"], false);
}

#[test]
fn rebind_to_another_endpoint_starts_fresh_state_and_stops_the_old() {
    let (fake_a, reg, sup_a) = setup(StartOptions::default());
    fake_a.open_dialog("alert", "on A", "");
    wait_pending(&sup_a, 1);
    sup_a
        .respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap();
    assert!(!sup_a.snapshot().recent_dialogs.is_empty());
    // Same URL: the same supervisor.
    let again = reg.get_or_start("task", &fake_a.ws_url()).unwrap();
    assert!(Arc::ptr_eq(&again, &sup_a));
    let fake_b = FakeBrowser::start().unwrap();
    let sup_b = reg.get_or_start("task", &fake_b.ws_url()).unwrap();
    assert!(!Arc::ptr_eq(&sup_a, &sup_b));
    assert!(!sup_a.is_alive());
    assert!(
        fake_a.wait_for_connections(0, WAIT),
        "old connection closed"
    );
    let s = sup_b.snapshot();
    assert!(s.recent_dialogs.is_empty() && s.pending_dialogs.is_empty());
    assert!(Arc::ptr_eq(&reg.get("task").unwrap(), &sup_b));
    fake_b.open_dialog("alert", "on B", "");
    assert_eq!(
        wait_pending(&sup_b, 1).pending_dialogs[0].id,
        "d-1",
        "ids restart"
    );
}

#[test]
fn dead_supervisor_is_replaced_by_get_or_start() {
    let (fake, reg, sup) = setup_with(no_reconnect(), StartOptions::default());
    fake.drop_connections();
    wait_snapshot(&sup, "inactive after the drop", |s| !s.is_active());
    assert!(!sup.is_alive());
    let fresh = reg.get_or_start("task", &fake.ws_url()).unwrap();
    assert!(!Arc::ptr_eq(&fresh, &sup));
    assert!(fresh.is_alive());
}

#[test]
fn stop_returns_within_a_second_when_the_peer_stopped_answering() {
    for mode in ["silent", "not reading"] {
        let (fake, reg, sup) = setup(StartOptions::default());
        fake.open_dialog("alert", "pending at stop", "");
        wait_pending(&sup, 1);
        match mode {
            "silent" => fake.set_silent(true),
            _ => fake.set_stop_reading(true),
        }
        let t = Instant::now();
        assert!(reg.stop("task"));
        let took = t.elapsed();
        eprintln!("stop with a {mode} peer took {took:?}");
        assert!(
            took < Duration::from_millis(1500),
            "{mode}: stop took {took:?}"
        );
        assert!(!sup.is_alive());
        assert!(reg.get("task").is_none());
        fake.set_stop_reading(false);
    }
}

#[test]
fn stop_dismisses_pending_dialogs_before_closing() {
    let (fake, reg, sup) = setup(StartOptions::default());
    fake.open_dialog("confirm", "still open at stop", "");
    wait_pending(&sup, 1);
    assert!(reg.stop("task"));
    assert!(!fake.dialog_open(), "stop must not leave the page wedged");
    assert_eq!(answers_sent(&fake)[0]["params"], json!({"accept": false}));
}

#[test]
fn pending_calls_fail_at_once_when_the_connection_drops() {
    let (fake, _reg, sup) = setup_with(no_reconnect(), StartOptions::default());
    fake.set_rule("Runtime.evaluate", Rule::Ignore);
    let page = sup.snapshot().page_target_id.clone().unwrap();
    let calling = {
        let sup = Arc::clone(&sup);
        std::thread::spawn(move || {
            let t = Instant::now();
            let r = sup.call(
                "Runtime.evaluate",
                json!({"expression": "1"}),
                Route::Target(&page),
                Duration::from_secs(30),
            );
            (r, t.elapsed())
        })
    };
    fake.wait_for_command(|c| c["method"] == "Runtime.evaluate", WAIT)
        .unwrap();
    fake.drop_connections();
    let (r, took) = calling.join().unwrap();
    assert!(matches!(r, Err(Error::ConnectionLost(_))), "{r:?}");
    assert!(took < Duration::from_secs(2), "waited {took:?}");
    let s = wait_snapshot(&sup, "inactive", |s| !s.is_active());
    assert!(s.disconnect_reason.is_some());
}

#[test]
fn late_reply_after_a_timeout_is_dropped_and_the_supervisor_keeps_serving() {
    let (fake, _reg, sup) = setup(StartOptions::default());
    fake.set_rule(
        "Browser.getVersion",
        Rule::Delay(
            Duration::from_millis(300),
            Box::new(Rule::Reply(json!({"which": "late"}))),
        ),
    );
    let r = sup.call(
        "Browser.getVersion",
        json!({}),
        Route::Browser,
        Duration::from_millis(50),
    );
    assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    // The late reply arrives while the next call is waiting; it must not be taken for its reply.
    fake.set_rule(
        "Browser.getVersion",
        Rule::Delay(
            Duration::from_millis(500),
            Box::new(Rule::Reply(json!({"which": "fresh"}))),
        ),
    );
    let v = sup
        .call("Browser.getVersion", json!({}), Route::Browser, WAIT)
        .unwrap();
    assert_eq!(v["which"], "fresh");
    let r = sup.call(
        "Runtime.evaluate",
        json!({"expression": "1"}),
        Route::Target("NOPE"),
        WAIT,
    );
    assert!(matches!(r, Err(Error::UnknownTarget(_))), "{r:?}");
    let r = sup.call("Runtime.evaluate", json!({}), Route::Frame("NOPE"), WAIT);
    assert!(r.unwrap_err().to_string().contains("frame_tree"));
    let r = sup.call("No.suchMethod", json!({}), Route::Browser, WAIT);
    assert!(matches!(r, Err(Error::Cdp { code: -32601, .. })), "{r:?}");
}

#[test]
fn publishing_shares_unchanged_ring_entries_instead_of_copying_them() {
    let (fake, reg, sup) = setup(StartOptions::default());
    for i in 0..3 {
        fake.emit_on_page(
            "Runtime.consoleAPICalled",
            json!({"type": "error", "args": [{"type": "string", "value": format!("e{i}")}]}),
        );
    }
    let s1 = wait_snapshot(&sup, "3 console errors", |s| s.console_errors.len() == 3);
    fake.open_dialog("alert", "first", "");
    wait_pending(&sup, 1);
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap();
    let s2 = wait_snapshot(&sup, "one closed", |s| s.recent_dialogs.len() == 1);
    fake.emit_on_page(
        "Runtime.consoleAPICalled",
        json!({"type": "error", "args": [{"type": "string", "value": "e3"}]}),
    );
    fake.open_dialog("alert", "second", "");
    wait_pending(&sup, 1);
    sup.respond_to_dialog(DialogAction::Dismiss, None, None)
        .unwrap();
    let s3 = wait_snapshot(&sup, "two closed, four errors", |s| {
        s.recent_dialogs.len() == 2 && s.console_errors.len() == 4
    });
    // The rings changed between s1/s2 and s3, yet their older entries are the same allocations.
    for i in 0..3 {
        assert!(Arc::ptr_eq(&s1.console_errors[i], &s3.console_errors[i]));
    }
    assert!(Arc::ptr_eq(&s2.recent_dialogs[0], &s3.recent_dialogs[0]));
    assert_eq!(s3.recent_dialogs[0].dialog.message, "first");
    assert_eq!(s3.recent_dialogs[1].closed_by, ClosedBy::Agent);
    assert_eq!(s3.console_errors[3].text, "e3");
    reg.stop_all();
}

/// Waiting without a bound (`Duration::MAX`) is a deadline like any other: no overflow, no
/// panic, and the wait still ends as soon as the state it waits for is published (issue 21).
#[test]
fn waits_with_duration_max_end_when_the_state_arrives() {
    let (fake, _reg, sup) = setup(StartOptions::default());
    let now = sup.wait_for(Duration::MAX, |s| s.is_active());
    assert!(now.is_some(), "already active: returns at once");
    let waiter = {
        let sup = Arc::clone(&sup);
        std::thread::spawn(move || sup.wait_for_dialog(Duration::MAX))
    };
    fake.open_dialog("alert", "unbounded", "");
    let dialog = waiter.join().expect("the waiter did not panic");
    assert_eq!(
        dialog.map(|d| d.message),
        Some("unbounded".to_string()),
        "the unbounded wait returned the dialog once it was published"
    );
    let after = sup.wait_for(Duration::MAX, |s| s.pending_dialogs.len() == 1);
    assert_eq!(after.map(|s| s.pending_dialogs.len()), Some(1));
}
