//! Issue 12, findings 3, 5, 7 and 14, on the scripted fake CDP browser: scripted interleavings
//! of dialog events and answers (an answer that lands on another dialog than it named), the
//! Closed-to-dialog fallback, the pending-dialog cap under a bridge flood, the origin of every
//! dialog, the busy-page probe, and what the `auto` bridge says when it switches on.
//!
//! Synchronisation as in `fake_bridge.rs`: [`barrier`] makes two browser-level calls, so every
//! event emitted before it has been applied and every automatic command it triggered has been
//! recorded by the fake. Nothing sleeps.

use cdp_supervisor::StartRequest;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::fakes::{WAIT, barrier, page_session, wait_pending, wait_sent, wait_snapshot};
use cdp_supervisor::fake::{FakeBrowser, Rule};
use cdp_supervisor::unversioned;
use cdp_supervisor::{
    BridgeMode, ClosedBy, ClosedDialog, Config, DialogAction, Error, Limits, StartOptions,
    Supervisor, SupervisorRegistry, tools,
};
use serde_json::{Value, json};

/// The fake's page target, also its main frame.
const PAGE: &str = "PAGE-1";

// ------------------------------------------------------------------------------------ helpers

/// The task of the test that reads the log; the crate's lines about a task start `task <id>:`.
const LOGGED_TASK: &str = "hardening-dialogs-log";

/// The captured lines of [`LOGGED_TASK`]. The logger is the whole test binary's (the only one
/// installed in `tests/it`) and sees every test's records; it keeps only that task's.
static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        let text = format!("{}: {}", record.level(), record.args());
        if text.contains(&format!("task {LOGGED_TASK}:")) {
            LINES.lock().unwrap_or_else(|e| e.into_inner()).push(text);
        }
    }

    fn flush(&self) {}
}

fn install_logger() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        log::set_boxed_logger(Box::new(Capture)).expect("no other logger in tests/it");
        log::set_max_level(log::LevelFilter::Info);
    });
}

fn setup_with(
    config: Config,
    options: StartOptions,
) -> (FakeBrowser, SupervisorRegistry, Arc<Supervisor>) {
    install_logger();
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = SupervisorRegistry::new(config);
    let sup = reg
        .start(StartRequest::new("task", &fake.ws_url()).with_options(options))
        .expect("attach to the fake browser");
    (fake, reg, sup)
}

fn setup() -> (FakeBrowser, SupervisorRegistry, Arc<Supervisor>) {
    setup_with(Config::default(), StartOptions::default())
}

fn wait_closed(sup: &Supervisor, id: &str) -> ClosedDialog {
    let s = wait_snapshot(sup, &format!("{id} in recent_dialogs"), |s| {
        s.closed_dialog(id).is_some() && s.pending_dialogs.iter().all(|d| d.id != id)
    });
    s.closed_dialog(id).cloned().expect("just checked")
}

fn opening(fake: &FakeBrowser, session: &str, frame: &str, kind: &str, message: &str) {
    fake.emit(
        Some(session),
        "Page.javascriptDialogOpening",
        json!({"url": "http://fake.test/", "frameId": frame, "message": message, "type": kind,
               "hasBrowserHandler": true, "defaultPrompt": ""}),
    );
}

fn closed(fake: &FakeBrowser, session: &str, frame: Option<&str>, result: bool) {
    let mut params = json!({"result": result, "userInput": ""});
    if let Some(f) = frame {
        params["frameId"] = json!(f);
    }
    fake.emit(Some(session), "Page.javascriptDialogClosed", params);
}

fn sent(fake: &FakeBrowser, method: &str) -> Vec<Value> {
    fake.received()
        .into_iter()
        .filter(|c| c["method"] == method)
        .collect()
}

/// Starts the agent's answer to `dialog_id` on a thread, with the fake holding the reply back;
/// returns the thread and the command the fake received.
fn answer_held_back(
    fake: &FakeBrowser,
    sup: &Arc<Supervisor>,
    action: DialogAction,
    dialog_id: &str,
) -> (
    std::thread::JoinHandle<Result<cdp_supervisor::PendingDialog, Error>>,
    Value,
) {
    fake.set_rule("Page.handleJavaScriptDialog", Rule::Ignore);
    let answering = {
        let sup = Arc::clone(sup);
        let id = dialog_id.to_string();
        std::thread::spawn(move || sup.respond_to_dialog(action, None, Some(&id)))
    };
    let cmd = fake
        .wait_for_command(|c| c["method"] == "Page.handleJavaScriptDialog", WAIT)
        .expect("the answer was written");
    (answering, cmd)
}

// ------------------------------------------------------- finding 3: which dialog an answer hit

#[test]
fn answer_applied_to_the_next_dialog_is_recorded_on_it_and_the_caller_is_told() {
    let (fake, _reg, sup) = setup();
    let page = page_session(&sup);
    opening(&fake, &page, PAGE, "confirm", "Close this popup?");
    wait_pending(&sup, 1);
    let (answering, cmd) = answer_held_back(&fake, &sup, DialogAction::Accept, "d-1");
    // Another client dismisses d-1 while our accept is on the wire; the page opens the next
    // confirm, and our accept (sent for d-1) is what closes it.
    closed(&fake, &page, Some(PAGE), false);
    opening(&fake, &page, PAGE, "confirm", "Transfer $5000?");
    closed(&fake, &page, Some(PAGE), true);
    fake.send_reply(&cmd["id"], &page, json!({}));

    let err = answering.join().unwrap().unwrap_err();
    match &err {
        Error::AnswerAppliedToOtherDialog { named, received } => {
            assert_eq!(named, "d-1");
            assert_eq!(received.id, "d-2");
            assert_eq!(received.message, "Transfer $5000?");
        }
        other => panic!("wrong error: {other}"),
    }
    assert!(err.to_string().contains("d-2"), "{err}");
    let d1 = wait_closed(&sup, "d-1");
    let d2 = wait_closed(&sup, "d-2");
    assert_eq!((d1.closed_by, d1.accepted), (ClosedBy::Remote, Some(false)));
    assert_eq!((d2.closed_by, d2.accepted), (ClosedBy::Agent, Some(true)));
    assert!(sup.snapshot().pending_dialogs.is_empty());
}

#[test]
fn answer_applied_to_the_next_dialog_when_the_first_close_was_missed() {
    let (fake, _reg, sup) = setup();
    let page = page_session(&sup);
    opening(&fake, &page, PAGE, "confirm", "first");
    wait_pending(&sup, 1);
    let (answering, cmd) = answer_held_back(&fake, &sup, DialogAction::Dismiss, "d-1");
    // No Closed for d-1 at all: the next Opening alone shows our answer did not close it.
    opening(&fake, &page, PAGE, "prompt", "second");
    fake.send_reply(&cmd["id"], &page, json!({}));
    closed(&fake, &page, Some(PAGE), false);
    let err = answering.join().unwrap().unwrap_err();
    assert!(
        matches!(&err, Error::AnswerAppliedToOtherDialog { received, .. } if received.id == "d-2"),
        "{err}"
    );
    assert_eq!(wait_closed(&sup, "d-1").closed_by, ClosedBy::Remote);
    assert_eq!(wait_closed(&sup, "d-2").closed_by, ClosedBy::Agent);
}

#[test]
fn answer_refused_after_both_dialogs_closed_remotely_records_both_remote() {
    let (fake, _reg, sup) = setup();
    let page = page_session(&sup);
    opening(&fake, &page, PAGE, "confirm", "one");
    wait_pending(&sup, 1);
    let (answering, cmd) = answer_held_back(&fake, &sup, DialogAction::Accept, "d-1");
    closed(&fake, &page, Some(PAGE), false);
    opening(&fake, &page, PAGE, "confirm", "two");
    closed(&fake, &page, Some(PAGE), false);
    fake.send_raw_text(
        json!({"id": cmd["id"], "sessionId": page,
               "error": {"code": -32602, "message": "No dialog is showing"}})
        .to_string(),
    );
    let err = answering.join().unwrap().unwrap_err();
    assert!(
        matches!(&err, Error::DialogAlreadyClosed { id, closed_by, .. } if id == "d-1" && *closed_by == ClosedBy::Remote),
        "{err}"
    );
    assert_eq!(wait_closed(&sup, "d-1").closed_by, ClosedBy::Remote);
    assert_eq!(wait_closed(&sup, "d-2").closed_by, ClosedBy::Remote);
}

#[test]
fn browser_dialog_tool_names_the_dialog_that_received_the_answer() {
    let (fake, reg, sup) = setup();
    let page = page_session(&sup);
    opening(&fake, &page, PAGE, "confirm", "Close this popup?");
    wait_pending(&sup, 1);
    fake.set_rule("Page.handleJavaScriptDialog", Rule::Ignore);
    let answering = std::thread::spawn(move || {
        tools::browser_dialog(
            &reg,
            "task",
            &json!({"action": "accept", "dialog_id": "d-1"}),
        )
    });
    let cmd = fake
        .wait_for_command(|c| c["method"] == "Page.handleJavaScriptDialog", WAIT)
        .expect("answer written");
    closed(&fake, &page, Some(PAGE), false);
    opening(&fake, &page, PAGE, "confirm", "Transfer $5000?");
    closed(&fake, &page, Some(PAGE), true);
    fake.send_reply(&cmd["id"], &page, json!({}));
    let r = answering.join().unwrap();
    assert_eq!(r["success"], false, "{r}");
    assert_eq!(r["answered_dialog"]["id"], "d-2", "{r}");
    assert!(r["error"].as_str().unwrap().contains("d-2"), "{r}");
}

// ------------------------------------------------- finding 5: fallback, cap, origin, bridge

#[test]
fn closed_event_naming_the_main_frame_never_closes_the_iframe_dialog() {
    // SPEC §11: an iframe's confirm raised while a main-frame alert is open.
    let (fake, _reg, sup) = setup();
    let page = page_session(&sup);
    opening(&fake, &page, PAGE, "alert", "main");
    opening(
        &fake,
        &page,
        "FRAME-AD",
        "confirm",
        "re-enter your password",
    );
    closed(&fake, &page, Some(PAGE), false);
    barrier(&sup);
    let s = sup.snapshot();
    assert_eq!(
        s.pending_dialogs
            .iter()
            .map(|d| d.id.as_str())
            .collect::<Vec<_>>(),
        ["d-2"],
        "the iframe's dialog is still open: {}",
        s.to_json()
    );
    assert_eq!(s.closed_dialog("d-1").unwrap().closed_by, ClosedBy::Remote);
    assert!(s.closed_dialog("d-2").is_none());
    // Nothing here is the proxy signature: the bridge stays off in `auto`.
    assert!(sent(&fake, "Fetch.enable").is_empty());
}

#[test]
fn closed_event_without_frame_id_closes_by_fallback_but_never_turns_the_bridge_on() {
    let (fake, _reg, sup) = setup();
    let page = page_session(&sup);
    opening(&fake, &page, PAGE, "alert", "x");
    wait_pending(&sup, 1);
    closed(&fake, &page, None, false);
    let c = wait_closed(&sup, "d-1");
    assert_eq!(c.closed_by, ClosedBy::Remote);
    assert!(
        c.closed_at - c.dialog.opened_at < 0.1,
        "needs a fast close: {c:?}"
    );
    barrier(&sup);
    assert!(
        sent(&fake, "Fetch.enable").is_empty(),
        "a fallback-matched close switched the bridge on"
    );
    assert!(!sup.snapshot().to_json().to_string().contains("bridge"));
}

#[test]
fn every_dialog_shows_the_origin_of_the_frame_that_opened_it() {
    let (fake, _reg, sup) = setup_with(
        Config::default(),
        StartOptions::default().with_dialog_bridge(BridgeMode::On),
    );
    let page = page_session(&sup);
    fake.emit(
        Some(&page),
        "Target.attachedToTarget",
        json!({"sessionId": "AD-1", "waitingForDebugger": true, "targetInfo": {
            "targetId": "FRAME-AD", "type": "iframe", "url": "https://ads.example.net/slot",
            "title": "", "attached": true, "canAccessOpener": false,
            "browserContextId": "CTX-1", "parentFrameId": PAGE}}),
    );
    wait_sent(&fake, "AD-1", "Runtime.runIfWaitingForDebugger");
    barrier(&sup);
    // The fake knows no session AD-1; answer its fulfilment like Chromium would.
    fake.set_rule("Fetch.fulfillRequest", Rule::Reply(json!({})));
    opening(&fake, &page, PAGE, "alert", "the page's own");
    fake.emit(
        Some("AD-1"),
        "Fetch.requestPaused",
        json!({"requestId": "R-1", "frameId": "FRAME-AD", "resourceType": "XHR",
               "request": {"url": "http://cdp-dialog-bridge.invalid/?kind=prompt&message=Re-enter%20your%20password&default_prompt=",
                           "method": "GET", "headers": {}}}),
    );
    let s = wait_pending(&sup, 2);
    let j = s.to_json();
    assert_eq!(j["pending_dialogs"][0]["origin"], "http://fake.test", "{j}");
    assert_eq!(
        j["pending_dialogs"][1]["origin"], "https://ads.example.net",
        "{j}"
    );
    assert_eq!(j["pending_dialogs"][1]["frame_id"], "FRAME-AD", "{j}");
    sup.respond_to_dialog(DialogAction::Dismiss, None, Some("d-2"))
        .expect("answer the ad's prompt");
    let j = sup.snapshot().to_json();
    assert_eq!(
        j["recent_dialogs"][0]["origin"], "https://ads.example.net",
        "{j}"
    );
}

#[test]
fn bridge_flood_of_3000_requests_keeps_at_most_16_pending_and_fails_the_rest() {
    let (fake, _reg, sup) = setup_with(
        Config::default(),
        StartOptions::default().with_dialog_bridge(BridgeMode::On),
    );
    assert_eq!(sup.config().limits().pending_dialogs_max, 16);
    let page = page_session(&sup);
    let message = "Re-enter your password ".repeat(40);
    let url = format!(
        "http://cdp-dialog-bridge.invalid/?kind=prompt&message={}&default_prompt=",
        message.replace(' ', "%20")
    );
    let started = Instant::now();
    for i in 0..3000 {
        fake.emit(
            Some(&page),
            "Fetch.requestPaused",
            json!({"requestId": format!("R-{i}"), "frameId": PAGE, "resourceType": "Fetch",
                   "request": {"url": url, "method": "GET", "headers": {}}}),
        );
    }
    barrier(&sup);
    let failed = fake
        .wait_for_command(
            |c| c["method"] == "Fetch.failRequest" && c["params"]["requestId"] == "R-2999",
            WAIT,
        )
        .expect("the last request past the cap was failed");
    assert_eq!(failed["params"]["errorReason"], "BlockedByClient");
    let s = sup.snapshot();
    assert_eq!(s.pending_dialogs.len(), 16);
    assert_eq!(sent(&fake, "Fetch.failRequest").len(), 3000 - 16);
    let size = s.to_json().to_string().len();
    eprintln!(
        "3,000 bridge requests handled in {:?}; snapshot {size} bytes",
        started.elapsed()
    );
    assert!(size < 64 * 1024, "snapshot grew to {size} bytes");
    // Answering one frees a slot for the next request.
    sup.respond_to_dialog(DialogAction::Dismiss, None, Some("d-1"))
        .expect("answer");
    fake.emit(
        Some(&page),
        "Fetch.requestPaused",
        json!({"requestId": "R-NEXT", "frameId": PAGE, "resourceType": "XHR",
               "request": {"url": url, "method": "GET", "headers": {}}}),
    );
    let s = wait_snapshot(&sup, "the next request pending", |s| {
        s.pending_dialogs
            .iter()
            .any(|d| unversioned::bridge_request(d) == Some("R-NEXT"))
    });
    assert_eq!(s.pending_dialogs.len(), 16);
}

#[test]
fn native_dialogs_past_the_cap_are_dismissed_and_recorded() {
    let limits = Limits::default().with_pending_dialogs_max(2);
    let config = Config::default().with_limits(limits).unwrap();
    let (fake, _reg, sup) = setup_with(config, StartOptions::default());
    fake.set_rule("Page.handleJavaScriptDialog", Rule::Reply(json!({})));
    // Native dialogs on three sessions (one per OOPIF process, say).
    for s in ["S-1", "S-2", "S-3"] {
        opening(&fake, s, &format!("F-{s}"), "confirm", s);
    }
    let c = wait_closed(&sup, "d-3");
    assert_eq!(c.closed_by, ClosedBy::AutoPolicy);
    let s = sup.snapshot();
    assert_eq!(
        s.pending_dialogs
            .iter()
            .map(|d| d.id.as_str())
            .collect::<Vec<_>>(),
        ["d-1", "d-2"]
    );
    let answers = sent(&fake, "Page.handleJavaScriptDialog");
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["sessionId"], "S-3");
    assert_eq!(answers[0]["params"], json!({"accept": false}));
}

// ------------------------------------------------------------- finding 7: busy vs orphaned

fn start_on_a_page_that_does_not_answer(
    input_probe: Rule,
) -> (FakeBrowser, SupervisorRegistry, Arc<Supervisor>) {
    install_logger();
    let fake = FakeBrowser::start().expect("fake browser");
    fake.set_rule("Page.enable", Rule::Ignore);
    fake.set_rule("Input.dispatchMouseEvent", input_probe);
    let reg = SupervisorRegistry::new(
        Config::default()
            .with_start_timeout(Duration::from_secs(6))
            .unwrap(),
    );
    let started = Instant::now();
    let sup = reg
        .get_or_start("task", &fake.ws_url())
        .expect("start returns instead of hanging");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    (fake, reg, sup)
}

#[test]
fn page_that_drops_the_input_probe_at_once_is_an_orphaned_dialog() {
    let (fake, _reg, sup) = start_on_a_page_that_does_not_answer(Rule::Reply(json!({})));
    let b = sup.snapshot().blocked.clone().expect("blocked");
    assert_eq!(b.reason, "orphaned_dialog");
    assert!(b.frame_id.is_none());
    let probe = sent(&fake, "Input.dispatchMouseEvent");
    assert_eq!(
        probe[0]["params"],
        json!({"type": "mouseMoved", "x": -1, "y": -1})
    );
    let err = sup
        .respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap_err();
    assert!(matches!(err, Error::OrphanedDialog), "{err}");
}

#[test]
fn busy_page_that_never_acknowledges_input_is_unresponsive_not_an_orphaned_dialog() {
    let (_fake, _reg, sup) = start_on_a_page_that_does_not_answer(Rule::Ignore);
    let b = sup.snapshot().blocked.clone().expect("blocked");
    assert_eq!(b.reason, "unresponsive", "{b:?}");
    assert!(
        b.hint.contains("Wait") && b.hint.contains("Page.reload") && b.hint.contains("busy"),
        "{}",
        b.hint
    );
    let err = sup
        .respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap_err();
    assert!(matches!(err, Error::PageUnresponsive), "{err}");
    assert!(!err.to_string().contains("disconnected;"), "{err}");
}

// ------------------------------------------------------------- finding 14: the log line

#[test]
fn auto_bridge_log_line_says_the_current_document_is_bridged_and_how_to_opt_out() {
    install_logger();
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = SupervisorRegistry::new(Config::default());
    let sup = reg
        .get_or_start(LOGGED_TASK, &fake.ws_url())
        .expect("attach to the fake browser");
    let page = page_session(&sup);
    fake.open_dialog("alert", "closed by the proxy", "");
    wait_pending(&sup, 1);
    closed(&fake, &page, Some(PAGE), false);
    wait_closed(&sup, "d-1");
    wait_sent(&fake, &page, "Fetch.enable");
    let lines = LINES.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let line = lines
        .iter()
        .find(|l| l.contains("turning the dialog bridge on"))
        .unwrap_or_else(|| panic!("no switch line in {lines:#?}"));
    assert!(!line.contains("next document"), "{line}");
    assert!(
        line.contains("the next one on the current document"),
        "{line}"
    );
    assert!(line.contains("dialog_bridge = \"off\""), "{line}");
    assert!(line.contains("another automation client"), "{line}");
}
