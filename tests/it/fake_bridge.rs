//! The dialog bridge (SPEC §6), driven by the scripted fake CDP browser: what the supervisor sends
//! to install it, how a paused bridge request becomes a pending dialog and how every kind of
//! answer (agent, policy, watchdog, refusal, navigation) goes back as `Fetch.fulfillRequest`, and
//! when `auto` mode switches the bridge on.
//!
//! The fake does not run pages: a bridge dialog is scripted as the `Fetch.requestPaused` event
//! Chromium sends for the injected script's synchronous XHR, and what the supervisor *sent* is
//! read back with `fake.received()`.
//!
//! Synchronisation: [`barrier`] makes two browser-level calls. The fake writes an emitted event
//! before `emit` returns, so the first reply arrives after every event emitted before it, and the
//! supervisor applies (and publishes) a batch before handing out the replies in it. The second
//! call is written after any automatic commands those events triggered, so once it is answered
//! the fake has recorded them too. That lets a test assert that something did *not* happen
//! without sleeping.

use cdp_supervisor::StartRequest;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::fakes::{
    WAIT, barrier, frame_navigated, methods, page_session, sent_on, wait_pending, wait_sent,
    wait_snapshot,
};
use base64::Engine;
use cdp_supervisor::fake::{FakeBrowser, Rule};
use cdp_supervisor::{
    BridgeMode, ClosedBy, ClosedDialog, Config, DialogAction, DialogPolicy, Error, PendingDialog,
    StartOptions, Supervisor, SupervisorRegistry, tools,
    unversioned::{self, bridge},
};
use serde_json::{Value, json};

/// The fake's default page: target id and main frame id.
const PAGE: &str = "PAGE-1";
/// The pattern SPEC §6 fixes for `Fetch.enable`.
const BRIDGE_PATTERN: &str = "http://cdp-dialog-bridge.invalid/*";

// ------------------------------------------------------------------------------------ helpers

fn setup(options: StartOptions) -> (FakeBrowser, SupervisorRegistry, Arc<Supervisor>) {
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = SupervisorRegistry::new(Config::default());
    let sup = reg
        .start(StartRequest::new("task", &fake.ws_url()).with_options(options))
        .expect("attach to the fake browser");
    assert_eq!(fake.page_target_id(), PAGE);
    (fake, reg, sup)
}

fn bridge_on() -> StartOptions {
    StartOptions::default().with_dialog_bridge(BridgeMode::On)
}

fn wait_closed(sup: &Supervisor, id: &str) -> ClosedDialog {
    let s = wait_snapshot(sup, &format!("{id} in recent_dialogs"), |s| {
        s.closed_dialog(id).is_some() && s.pending_dialogs.iter().all(|d| d.id != id)
    });
    s.closed_dialog(id).cloned().expect("just checked")
}

/// `encodeURIComponent`, as the injected script encodes the query values.
fn encode_uri_component(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z'
            | b'a'..=b'z'
            | b'0'..=b'9'
            | b'-'
            | b'_'
            | b'.'
            | b'!'
            | b'~'
            | b'*'
            | b'\''
            | b'('
            | b')' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The URL the injected script requests for `kind(message, default_prompt)`.
fn bridge_url(kind: &str, message: &str, default_prompt: &str) -> String {
    format!(
        "http://{}/?kind={kind}&message={}&default_prompt={}",
        bridge::BRIDGE_HOST,
        encode_uri_component(message),
        encode_uri_component(default_prompt)
    )
}

/// Emits `Fetch.requestPaused` on `session`, shaped like Chromium's for an XHR.
fn paused(fake: &FakeBrowser, session: &str, request_id: &str, url: &str, frame_id: &str) {
    fake.emit(
        Some(session),
        "Fetch.requestPaused",
        json!({
            "requestId": request_id,
            "request": {
                "url": url,
                "method": "GET",
                "headers": {"Accept": "*/*"},
                "initialPriority": "VeryHigh",
                "referrerPolicy": "strict-origin-when-cross-origin",
            },
            "frameId": frame_id,
            "resourceType": "XHR",
        }),
    );
}

/// A bridge dialog request on the page session, for the main frame.
fn bridge_dialog(fake: &FakeBrowser, sup: &Supervisor, request_id: &str, url: &str) {
    paused(fake, &page_session(sup), request_id, url, PAGE);
}

/// Commands the fake received with `method`, in order.
fn sent(fake: &FakeBrowser, method: &str) -> Vec<Value> {
    fake.received()
        .into_iter()
        .filter(|c| c["method"] == method)
        .collect()
}

/// The `Fetch.fulfillRequest` for `request_id` (waits for it).
fn wait_fulfilment(fake: &FakeBrowser, request_id: &str) -> Value {
    fake.wait_for_command(
        |c| c["method"] == "Fetch.fulfillRequest" && c["params"]["requestId"] == request_id,
        WAIT,
    )
    .unwrap_or_else(|| {
        panic!(
            "no Fetch.fulfillRequest for {request_id}; Fetch commands sent: {:?}",
            fake.received()
                .into_iter()
                .filter(|c| c["method"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("Fetch.")))
                .collect::<Vec<_>>()
        )
    })
}

/// The decoded JSON body of a `Fetch.fulfillRequest`.
fn body_of(fulfil: &Value) -> Value {
    let b64 = fulfil["params"]["body"]
        .as_str()
        .unwrap_or_else(|| panic!("fulfilment without a base64 body: {fulfil}"));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap_or_else(|e| panic!("body {b64:?} is not base64: {e}"));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "body {:?} is not JSON: {e}",
            String::from_utf8_lossy(&bytes)
        )
    })
}

/// The value of response header `name` (case-insensitive) of a `Fetch.fulfillRequest`.
fn header(fulfil: &Value, name: &str) -> Option<String> {
    fulfil["params"]["responseHeaders"]
        .as_array()?
        .iter()
        .find(|h| {
            h["name"]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case(name))
        })
        .and_then(|h| h["value"].as_str().map(str::to_string))
}

/// Checks the envelope SPEC §6 fixes and returns the decoded body.
fn check_fulfilment(fulfil: &Value, request_id: &str, session: &str) -> Value {
    assert_eq!(fulfil["sessionId"], session, "{fulfil}");
    assert_eq!(fulfil["params"]["requestId"], request_id, "{fulfil}");
    assert_eq!(fulfil["params"]["responseCode"], 200, "{fulfil}");
    assert_eq!(
        header(fulfil, "Access-Control-Allow-Origin").as_deref(),
        Some("*"),
        "the bridge host is cross-origin to every page: {fulfil}"
    );
    assert!(
        header(fulfil, "Content-Type").is_some_and(|v| v.starts_with("application/json")),
        "{fulfil}"
    );
    body_of(fulfil)
}

/// A `Target.attachedToTarget` for an OOPIF paused on start, on `parent_session`.
fn attach_iframe(fake: &FakeBrowser, parent_session: &str, session: &str, frame: &str) {
    fake.emit(
        Some(parent_session),
        "Target.attachedToTarget",
        json!({
            "sessionId": session,
            "targetInfo": {
                "targetId": frame,
                "type": "iframe",
                "url": format!("http://{}.other.test/", frame.to_lowercase()),
                "title": "",
                "attached": true,
                "canAccessOpener": false,
                "browserContextId": "CTX-1",
                "parentFrameId": PAGE,
            },
            "waitingForDebugger": true,
        }),
    );
}

/// Someone else closes the main frame's native dialog: `javascriptDialogClosed` naming its
/// frame, as Chromium 156 sends it (only an event that names the frame can turn the bridge on).
fn close_main_frame_dialog_remotely(fake: &FakeBrowser) {
    fake.emit_on_page(
        "Page.javascriptDialogClosed",
        json!({"result": false, "userInput": "", "frameId": PAGE}),
    );
}

/// The install commands (`addScript` and `Fetch.enable`) sent on `session`.
fn install_commands(fake: &FakeBrowser, session: &str) -> Vec<Value> {
    sent_on(fake, session)
        .into_iter()
        .filter(|c| {
            c["method"] == "Page.addScriptToEvaluateOnNewDocument" || c["method"] == "Fetch.enable"
        })
        .collect()
}

fn check_add_script(cmd: &Value) {
    assert_eq!(cmd["method"], "Page.addScriptToEvaluateOnNewDocument");
    assert_eq!(cmd["params"]["runImmediately"], true, "{cmd}");
    assert_eq!(
        cmd["params"]["source"].as_str(),
        Some(bridge::SCRIPT),
        "the installed source is the bridge script"
    );
}

fn check_fetch_enable(cmd: &Value) {
    assert_eq!(cmd["method"], "Fetch.enable");
    let patterns = cmd["params"]["patterns"]
        .as_array()
        .unwrap_or_else(|| panic!("Fetch.enable without patterns: {cmd}"));
    assert!(
        patterns
            .iter()
            .any(|p| p["urlPattern"] == BRIDGE_PATTERN && p["requestStage"] == "Request"),
        "the bridge pattern is enabled: {cmd}"
    );
    for p in patterns {
        let url = p["urlPattern"].as_str().unwrap_or_default();
        assert!(
            url.contains(bridge::BRIDGE_HOST),
            "Fetch.enable pauses only bridge requests, not {url:?}: {cmd}"
        );
    }
}

// ------------------------------------------------------------------------------ installation

#[test]
fn bridge_on_installs_script_and_fetch_interception_on_the_page_session() {
    let (fake, _reg, sup) = setup(bridge_on());
    let page = page_session(&sup);
    let script = wait_sent(&fake, &page, "Page.addScriptToEvaluateOnNewDocument");
    check_add_script(&script);
    let fetch = wait_sent(&fake, &page, "Fetch.enable");
    check_fetch_enable(&fetch);
    barrier(&sup);
    assert_eq!(
        methods(&install_commands(&fake, &page)),
        ["Page.addScriptToEvaluateOnNewDocument", "Fetch.enable"],
        "installed once, script first"
    );
    // Nothing of it goes browser-level.
    assert!(
        sent(&fake, "Fetch.enable")
            .iter()
            .all(|c| c["sessionId"] == page),
        "Fetch.enable only on the page session"
    );
}

#[test]
fn bridge_on_sets_up_an_iframe_session_before_resuming_it() {
    let (fake, _reg, sup) = setup(bridge_on());
    let page = page_session(&sup);
    attach_iframe(&fake, &page, "CHILD-1", "FRAME-X");
    wait_sent(&fake, "CHILD-1", "Runtime.runIfWaitingForDebugger");
    barrier(&sup);
    let on_child = sent_on(&fake, "CHILD-1");
    let order = methods(&on_child);
    let pos = |m: &str| {
        order
            .iter()
            .position(|x| x == m)
            .unwrap_or_else(|| panic!("{m} not sent on the child session: {order:?}"))
    };
    let (script, fetch, resume) = (
        pos("Page.addScriptToEvaluateOnNewDocument"),
        pos("Fetch.enable"),
        pos("Runtime.runIfWaitingForDebugger"),
    );
    assert!(
        script < resume && fetch < resume,
        "the bridge goes in before the frame resumes: {order:?}"
    );
    check_add_script(&on_child[script]);
    check_fetch_enable(&on_child[fetch]);
    assert_eq!(
        order.iter().filter(|m| *m == "Fetch.enable").count(),
        1,
        "{order:?}"
    );
}

#[test]
fn bridge_off_and_auto_install_nothing_until_needed() {
    for mode in [BridgeMode::Off, BridgeMode::Auto] {
        let (fake, _reg, sup) = setup(StartOptions::default().with_dialog_bridge(mode));
        let page = page_session(&sup);
        attach_iframe(&fake, &page, "CHILD-1", "FRAME-X");
        wait_sent(&fake, "CHILD-1", "Runtime.runIfWaitingForDebugger");
        barrier(&sup);
        for s in [page.as_str(), "CHILD-1"] {
            assert!(
                install_commands(&fake, s).is_empty(),
                "{mode:?}: no bridge on {s}: {:?}",
                methods(&sent_on(&fake, s))
            );
        }
    }
}

// ---------------------------------------------------------------------- dialogs and answers

#[test]
fn paused_bridge_prompt_is_pending_and_the_agent_answer_fulfils_it() {
    let (fake, reg, sup) = setup(bridge_on());
    let page = page_session(&sup);
    let text = "Zoë 日本語 ✓ \"quotes\" & ?=";
    bridge_dialog(
        &fake,
        &sup,
        "R-1",
        &bridge_url("prompt", "Your name? ✓ & more", "bob & co"),
    );
    let s = wait_pending(&sup, 1);
    let d: &PendingDialog = &s.pending_dialogs[0];
    assert_eq!(d.id, "d-1");
    assert_eq!(d.kind, "prompt");
    assert_eq!(d.message, "Your name? ✓ & more");
    assert_eq!(d.default_prompt, "bob & co");
    assert_eq!(d.frame_id.as_deref(), Some(PAGE));
    assert_eq!(unversioned::bridge_request(d), Some("R-1"));
    assert_eq!(unversioned::dialog_session(d), page);
    assert!(d.opened_at > 1.6e9);
    // The §10 JSON shows it like any dialog.
    let j = tools::browser_snapshot(&reg, "task", &json!({}));
    assert_eq!(j["pending_dialogs"][0]["type"], "prompt", "{j}");
    assert_eq!(j["pending_dialogs"][0]["frame_id"], PAGE, "{j}");

    let answered = sup
        .respond_to_dialog(DialogAction::Accept, Some(text), None)
        .expect("answer the bridge prompt");
    assert_eq!(answered.id, "d-1");
    let fulfil = wait_fulfilment(&fake, "R-1");
    assert_eq!(
        check_fulfilment(&fulfil, "R-1", &page),
        json!({"accept": true, "prompt_text": text})
    );
    let c = wait_closed(&sup, "d-1");
    assert_eq!(c.closed_by, ClosedBy::Agent);
    assert_eq!(c.accepted, Some(true));
    assert!(
        sent(&fake, "Page.handleJavaScriptDialog").is_empty(),
        "a bridge dialog is never answered natively"
    );
    assert_eq!(sent(&fake, "Fetch.fulfillRequest").len(), 1);
    assert_eq!(
        sup.snapshot().to_json()["recent_dialogs"][0]["closed_by"],
        "agent"
    );
}

#[test]
fn bridge_alert_confirm_and_prompt_bodies_match_what_native_dialogs_return() {
    let (fake, _reg, sup) = setup(bridge_on());
    let page = page_session(&sup);
    // (kind, default, action, text, expected body)
    let cases: [(&str, &str, DialogAction, Option<&str>, Value); 5] = [
        (
            "alert",
            "",
            DialogAction::Accept,
            None,
            json!({"accept": true, "prompt_text": null}),
        ),
        (
            "confirm",
            "",
            DialogAction::Accept,
            None,
            json!({"accept": true, "prompt_text": null}),
        ),
        (
            "confirm",
            "",
            DialogAction::Dismiss,
            None,
            json!({"accept": false, "prompt_text": null}),
        ),
        (
            "prompt",
            "the default",
            DialogAction::Accept,
            None,
            json!({"accept": true, "prompt_text": "the default"}),
        ),
        (
            "prompt",
            "the default",
            DialogAction::Dismiss,
            Some("ignored"),
            json!({"accept": false, "prompt_text": null}),
        ),
    ];
    for (i, (kind, default, action, text, want)) in cases.into_iter().enumerate() {
        let rid = format!("R-{i}");
        bridge_dialog(&fake, &sup, &rid, &bridge_url(kind, "msg", default));
        let d = sup
            .wait_for_dialog(WAIT)
            .unwrap_or_else(|| panic!("case {i}: no pending {kind}"));
        assert_eq!(d.kind, kind);
        assert_eq!(unversioned::bridge_request(&d), Some(rid.as_str()));
        sup.respond_to_dialog(action, text, Some(&d.id))
            .unwrap_or_else(|e| panic!("case {i}: answer failed: {e}"));
        let body = check_fulfilment(&wait_fulfilment(&fake, &rid), &rid, &page);
        assert_eq!(body, want, "case {i}: {kind} {action:?}");
        assert_eq!(wait_closed(&sup, &d.id).closed_by, ClosedBy::Agent);
    }
    assert!(sent(&fake, "Page.handleJavaScriptDialog").is_empty());
}

#[test]
fn a_non_bridge_paused_request_is_continued_at_once() {
    let (fake, _reg, sup) = setup(bridge_on());
    let page = page_session(&sup);
    paused(&fake, &page, "R-APP", "http://fake.test/app.js", PAGE);
    let cont = fake
        .wait_for_command(
            |c| c["method"] == "Fetch.continueRequest" && c["params"]["requestId"] == "R-APP",
            WAIT,
        )
        .expect("the ordinary request is continued");
    assert_eq!(cont["sessionId"], page, "continued on its own session");
    // A request to the bridge host that is not a dialog is not left paused either.
    paused(
        &fake,
        &page,
        "R-ODD",
        &format!("http://{}/favicon.ico", bridge::BRIDGE_HOST),
        PAGE,
    );
    fake.wait_for_command(
        |c| {
            c["params"]["requestId"] == "R-ODD"
                && c["method"].as_str().is_some_and(|m| {
                    matches!(
                        m,
                        "Fetch.continueRequest" | "Fetch.failRequest" | "Fetch.fulfillRequest"
                    )
                })
        },
        WAIT,
    )
    .expect("a bridge-host request that is no dialog is not left paused");
    barrier(&sup);
    let s = sup.snapshot();
    assert!(s.pending_dialogs.is_empty(), "{}", s.to_json());
    assert!(s.recent_dialogs.is_empty(), "{}", s.to_json());
    assert_eq!(
        sent(&fake, "Fetch.continueRequest")
            .iter()
            .filter(|c| c["params"]["requestId"] == "R-APP")
            .count(),
        1
    );
    // The supervisor still serves dialogs afterwards.
    bridge_dialog(&fake, &sup, "R-D", &bridge_url("alert", "after", ""));
    let d = sup.wait_for_dialog(WAIT).expect("a bridge dialog after");
    assert_eq!(unversioned::bridge_request(&d), Some("R-D"));
}

#[test]
fn bridge_dialog_in_an_oopif_is_fulfilled_on_the_oopif_session() {
    let (fake, _reg, sup) = setup(bridge_on());
    let page = page_session(&sup);
    attach_iframe(&fake, &page, "CHILD-1", "FRAME-X");
    wait_sent(&fake, "CHILD-1", "Runtime.runIfWaitingForDebugger");
    // The fake only knows the page's session; let it accept fulfilments anywhere.
    fake.set_rule("Fetch.fulfillRequest", Rule::Reply(json!({})));
    paused(
        &fake,
        "CHILD-1",
        "R-X",
        &bridge_url("confirm", "from the frame", ""),
        "FRAME-X",
    );
    // And one on the page at the same time.
    bridge_dialog(
        &fake,
        &sup,
        "R-P",
        &bridge_url("alert", "from the page", ""),
    );
    let s = wait_pending(&sup, 2);
    let child = s
        .pending_dialogs
        .iter()
        .find(|d| unversioned::bridge_request(d) == Some("R-X"))
        .expect("the OOPIF's dialog");
    assert_eq!(child.frame_id.as_deref(), Some("FRAME-X"));
    assert_eq!(unversioned::dialog_session(child), "CHILD-1");
    let err = sup
        .respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap_err();
    assert!(matches!(err, Error::AmbiguousDialog { .. }), "{err}");
    sup.respond_to_dialog(DialogAction::Accept, None, Some(&child.id))
        .expect("answer the OOPIF's dialog");
    let body = check_fulfilment(&wait_fulfilment(&fake, "R-X"), "R-X", "CHILD-1");
    assert_eq!(body, json!({"accept": true, "prompt_text": null}));
    assert_eq!(wait_closed(&sup, &child.id).closed_by, ClosedBy::Agent);
    let left = wait_pending(&sup, 1);
    assert_eq!(
        unversioned::bridge_request(&left.pending_dialogs[0]),
        Some("R-P")
    );
}

// ----------------------------------------------------------------- policies and the watchdog

#[test]
fn auto_dismiss_policy_fulfils_a_bridge_dialog_with_accept_false() {
    let (fake, _reg, sup) = setup(bridge_on().with_dialog_policy(DialogPolicy::AutoDismiss));
    let page = page_session(&sup);
    bridge_dialog(&fake, &sup, "R-1", &bridge_url("confirm", "Leave?", ""));
    let c = wait_closed(&sup, "d-1");
    assert_eq!(c.closed_by, ClosedBy::AutoPolicy);
    assert_eq!(unversioned::bridge_request(&c.dialog), Some("R-1"));
    let body = check_fulfilment(&wait_fulfilment(&fake, "R-1"), "R-1", &page);
    assert_eq!(body, json!({"accept": false, "prompt_text": null}));
    assert!(sup.snapshot().pending_dialogs.is_empty());
    assert!(sent(&fake, "Page.handleJavaScriptDialog").is_empty());
}

#[test]
fn auto_accept_policy_fulfils_a_bridge_prompt_with_its_default() {
    let (fake, _reg, sup) = setup(bridge_on().with_dialog_policy(DialogPolicy::AutoAccept));
    let page = page_session(&sup);
    bridge_dialog(&fake, &sup, "R-1", &bridge_url("prompt", "Name?", "anon ✓"));
    let c = wait_closed(&sup, "d-1");
    assert_eq!(c.closed_by, ClosedBy::AutoPolicy);
    let body = check_fulfilment(&wait_fulfilment(&fake, "R-1"), "R-1", &page);
    assert_eq!(body, json!({"accept": true, "prompt_text": "anon ✓"}));
    bridge_dialog(&fake, &sup, "R-2", &bridge_url("confirm", "Sure?", ""));
    assert_eq!(wait_closed(&sup, "d-2").closed_by, ClosedBy::AutoPolicy);
    let body = check_fulfilment(&wait_fulfilment(&fake, "R-2"), "R-2", &page);
    assert_eq!(body, json!({"accept": true, "prompt_text": null}));
}

#[test]
fn watchdog_fulfils_an_unanswered_bridge_dialog_with_accept_false() {
    let (fake, _reg, sup) = setup(bridge_on().with_dialog_timeout(Duration::from_millis(200)));
    let page = page_session(&sup);
    let opened = Instant::now();
    bridge_dialog(
        &fake,
        &sup,
        "R-1",
        &bridge_url("prompt", "nobody answers", "x"),
    );
    wait_pending(&sup, 1);
    let c = wait_closed(&sup, "d-1");
    let took = opened.elapsed();
    assert_eq!(c.closed_by, ClosedBy::Watchdog);
    assert!(took >= Duration::from_millis(190), "fired early: {took:?}");
    let body = check_fulfilment(&wait_fulfilment(&fake, "R-1"), "R-1", &page);
    assert_eq!(body, json!({"accept": false, "prompt_text": null}));
    barrier(&sup);
    assert_eq!(
        sent(&fake, "Fetch.fulfillRequest").len(),
        1,
        "exactly one fulfilment"
    );
    assert!(sent(&fake, "Page.handleJavaScriptDialog").is_empty());
}

#[test]
fn watchdog_does_not_fire_for_an_answered_bridge_dialog() {
    let (fake, _reg, sup) = setup(bridge_on().with_dialog_timeout(Duration::from_millis(150)));
    bridge_dialog(
        &fake,
        &sup,
        "R-1",
        &bridge_url("alert", "answered in time", ""),
    );
    wait_pending(&sup, 1);
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap();
    // A second dialog outlives the first one's deadline: a wrong watchdog firing for d-1 would
    // show up as a second fulfilment of R-1.
    bridge_dialog(&fake, &sup, "R-2", &bridge_url("alert", "second", ""));
    assert_eq!(wait_closed(&sup, "d-2").closed_by, ClosedBy::Watchdog);
    assert_eq!(wait_closed(&sup, "d-1").closed_by, ClosedBy::Agent);
    barrier(&sup);
    let r1: Vec<Value> = sent(&fake, "Fetch.fulfillRequest")
        .into_iter()
        .filter(|c| c["params"]["requestId"] == "R-1")
        .collect();
    assert_eq!(r1.len(), 1, "{r1:?}");
}

// ---------------------------------------------------------------------- remote closes

#[test]
fn refused_fulfilment_is_recorded_remote_and_the_caller_gets_an_error() {
    let (fake, reg, sup) = setup(bridge_on());
    bridge_dialog(&fake, &sup, "R-1", &bridge_url("confirm", "x", ""));
    wait_pending(&sup, 1);
    fake.set_rule(
        "Fetch.fulfillRequest",
        Rule::Error {
            code: -32602,
            message: "Invalid InterceptionId.".into(),
        },
    );
    let err = sup
        .respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap_err();
    match &err {
        Error::DialogAlreadyClosed { id, closed_by, .. } => {
            assert_eq!((id.as_str(), closed_by.as_str()), ("d-1", "remote"));
        }
        other => panic!("wrong error: {other}"),
    }
    let s = sup.snapshot();
    assert!(s.pending_dialogs.is_empty());
    assert_eq!(s.closed_dialog("d-1").unwrap().closed_by, ClosedBy::Remote);
    // Through the tool handler: success false, and a second answer says it is gone.
    bridge_dialog(&fake, &sup, "R-2", &bridge_url("alert", "y", ""));
    wait_pending(&sup, 1);
    let r = tools::browser_dialog(&reg, "task", &json!({"action": "accept"}));
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].as_str().is_some_and(|e| !e.is_empty()), "{r}");
    assert_eq!(wait_closed(&sup, "d-2").closed_by, ClosedBy::Remote);
    let err = sup
        .respond_to_dialog(DialogAction::Accept, None, Some("d-2"))
        .unwrap_err();
    assert!(matches!(err, Error::DialogAlreadyClosed { .. }), "{err}");
}

#[test]
fn navigation_of_the_dialog_frame_closes_its_bridge_dialog_as_remote() {
    let (fake, _reg, sup) = setup(bridge_on());
    let page = page_session(&sup);
    bridge_dialog(&fake, &sup, "R-1", &bridge_url("prompt", "x", ""));
    wait_pending(&sup, 1);
    // Another frame navigating leaves it alone.
    fake.emit(
        Some(&page),
        "Page.frameAttached",
        json!({"frameId": "F-SUB", "parentFrameId": PAGE}),
    );
    frame_navigated(&fake, &page, "F-SUB", Some(PAGE), "http://fake.test/sub");
    barrier(&sup);
    assert_eq!(
        sup.snapshot().pending_dialogs.len(),
        1,
        "another frame's navigation does not close it"
    );
    // Its own frame navigating kills the paused request: nobody can answer it any more.
    frame_navigated(&fake, &page, PAGE, None, "http://fake.test/next");
    let c = wait_closed(&sup, "d-1");
    assert_eq!(c.closed_by, ClosedBy::Remote);
    let err = sup
        .respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap_err();
    assert!(matches!(err, Error::NoDialog), "{err}");
    barrier(&sup);
    assert!(
        sent(&fake, "Fetch.fulfillRequest").is_empty(),
        "nothing is sent for a request that died with its document"
    );
}

#[test]
fn a_native_dialog_closing_does_not_close_a_pending_bridge_dialog() {
    let (fake, _reg, sup) = setup(bridge_on());
    bridge_dialog(&fake, &sup, "R-1", &bridge_url("confirm", "bridge", ""));
    wait_pending(&sup, 1);
    // A native dialog arrives on the same (page) session from an OOPIF (SPEC §11: OOPIF dialogs
    // arrive on the page session), e.g. a `beforeunload`, which stays native, or a frame whose
    // bridge XHR fell back; someone else closes it. The Closed event names no frame (older
    // Chromium, proxies), so only "which dialog is native" can tell them apart.
    fake.emit_on_page(
        "Page.javascriptDialogOpening",
        json!({"url": "http://frame-x.other.test/", "frameId": "FRAME-X", "message": "leave?",
               "type": "beforeunload", "hasBrowserHandler": false, "defaultPrompt": ""}),
    );
    let s = wait_pending(&sup, 2);
    let native = s
        .pending_dialogs
        .iter()
        .find(|d| unversioned::bridge_request(d).is_none())
        .expect("the native dialog")
        .id
        .clone();
    fake.close_dialog_remotely();
    let s = wait_snapshot(&sup, "one dialog recorded closed", |s| {
        !s.recent_dialogs.is_empty()
    });
    assert_eq!(
        s.recent_dialogs
            .iter()
            .map(|c| c.dialog.id.as_str())
            .collect::<Vec<_>>(),
        [native.as_str()],
        "javascriptDialogClosed closes the native dialog, not the bridge one: {}",
        s.to_json()
    );
    let pending = &s.pending_dialogs;
    assert_eq!(pending.len(), 1, "{}", s.to_json());
    assert_eq!(unversioned::bridge_request(&pending[0]), Some("R-1"));
    sup.respond_to_dialog(DialogAction::Accept, None, Some("d-1"))
        .expect("the bridge dialog is still answerable");
    assert_eq!(wait_closed(&sup, "d-1").closed_by, ClosedBy::Agent);
}

#[test]
fn stop_dismisses_a_pending_bridge_dialog_before_closing() {
    let (fake, reg, sup) = setup(bridge_on());
    let page = page_session(&sup);
    bridge_dialog(&fake, &sup, "R-1", &bridge_url("prompt", "left open", "d"));
    wait_pending(&sup, 1);
    drop(sup);
    let started = Instant::now();
    assert!(reg.stop("task"));
    assert!(started.elapsed() < Duration::from_secs(1));
    let body = check_fulfilment(&wait_fulfilment(&fake, "R-1"), "R-1", &page);
    assert_eq!(body, json!({"accept": false, "prompt_text": null}));
}

// ------------------------------------------------------------------------------- auto mode

#[test]
fn auto_mode_turns_the_bridge_on_after_a_native_dialog_closed_remotely_within_100ms() {
    let (fake, _reg, sup) = setup(StartOptions::default());
    assert_eq!(sup.config().dialog_bridge(), BridgeMode::Auto);
    let page = page_session(&sup);
    // An OOPIF attached before the switch gets the bridge too, when it switches.
    attach_iframe(&fake, &page, "CHILD-1", "FRAME-X");
    wait_sent(&fake, "CHILD-1", "Runtime.runIfWaitingForDebugger");
    barrier(&sup);
    assert!(install_commands(&fake, &page).is_empty());
    assert!(install_commands(&fake, "CHILD-1").is_empty());

    // The proxy signature: a native dialog closed by someone else right after it opened.
    fake.open_dialog("alert", "closed by the proxy", "");
    wait_pending(&sup, 1);
    close_main_frame_dialog_remotely(&fake);
    let c = wait_closed(&sup, "d-1");
    assert_eq!(c.closed_by, ClosedBy::Remote);
    assert!(unversioned::bridge_request(&c.dialog).is_none());
    assert!(
        c.closed_at - c.dialog.opened_at < 0.1,
        "the scenario needs a fast close: {c:?}"
    );
    check_add_script(&wait_sent(
        &fake,
        &page,
        "Page.addScriptToEvaluateOnNewDocument",
    ));
    check_fetch_enable(&wait_sent(&fake, &page, "Fetch.enable"));
    check_add_script(&wait_sent(
        &fake,
        "CHILD-1",
        "Page.addScriptToEvaluateOnNewDocument",
    ));
    check_fetch_enable(&wait_sent(&fake, "CHILD-1", "Fetch.enable"));

    // An OOPIF attached after the switch gets it before it resumes.
    attach_iframe(&fake, &page, "CHILD-2", "FRAME-Y");
    wait_sent(&fake, "CHILD-2", "Runtime.runIfWaitingForDebugger");
    barrier(&sup);
    let order = methods(&sent_on(&fake, "CHILD-2"));
    let resume = order
        .iter()
        .position(|m| m == "Runtime.runIfWaitingForDebugger")
        .expect("resumed");
    let fetch = order
        .iter()
        .position(|m| m == "Fetch.enable")
        .unwrap_or_else(|| panic!("no Fetch.enable on the later OOPIF: {order:?}"));
    assert!(fetch < resume, "{order:?}");

    // A second fast remote close does not install it again.
    fake.open_dialog("alert", "again", "");
    wait_pending(&sup, 1);
    close_main_frame_dialog_remotely(&fake);
    assert_eq!(wait_closed(&sup, "d-2").closed_by, ClosedBy::Remote);
    barrier(&sup);
    assert_eq!(
        methods(&install_commands(&fake, &page)),
        ["Page.addScriptToEvaluateOnNewDocument", "Fetch.enable"],
        "installed exactly once"
    );

    // From now on the page's dialogs come through the bridge.
    bridge_dialog(&fake, &sup, "R-1", &bridge_url("confirm", "via bridge", ""));
    let d = sup.wait_for_dialog(WAIT).expect("bridge dialog pending");
    assert_eq!(unversioned::bridge_request(&d), Some("R-1"));
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .expect("answer");
    let body = check_fulfilment(&wait_fulfilment(&fake, "R-1"), "R-1", &page);
    assert_eq!(body, json!({"accept": true, "prompt_text": null}));
    assert_eq!(wait_closed(&sup, &d.id).closed_by, ClosedBy::Agent);
}

#[test]
fn auto_mode_stays_native_when_a_dialog_is_closed_remotely_after_100ms() {
    let (fake, _reg, sup) = setup(StartOptions::default());
    let page = page_session(&sup);
    fake.open_dialog("confirm", "a human closes this slowly", "");
    wait_pending(&sup, 1);
    // The scenario itself: a dialog that stays open well past the 100 ms signature.
    std::thread::sleep(Duration::from_millis(250));
    close_main_frame_dialog_remotely(&fake);
    let c = wait_closed(&sup, "d-1");
    assert_eq!(c.closed_by, ClosedBy::Remote);
    assert!(c.closed_at - c.dialog.opened_at >= 0.15, "{c:?}");
    barrier(&sup);
    assert!(
        install_commands(&fake, &page).is_empty(),
        "a slow remote close is no proxy signature: {:?}",
        methods(&sent_on(&fake, &page))
    );
    assert!(sent(&fake, "Fetch.enable").is_empty());
    // Native dialogs keep working.
    fake.open_dialog("alert", "still native", "");
    let d = sup.wait_for_dialog(WAIT).expect("native dialog");
    assert!(unversioned::bridge_request(&d).is_none());
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .expect("answer natively");
    assert_eq!(sent(&fake, "Page.handleJavaScriptDialog").len(), 1);
}

/// The bridge's paused request travels through the browser by another path than the reply of
/// the call that scheduled the dialog, and can overtake it (seen on Chromium: an evaluate that
/// schedules `prompt()` with `setTimeout(0)` got its `Fetch.requestPaused` first). The call
/// still gets its own reply when it follows within the grace; without one it is blocked.
#[test]
fn a_reply_overtaken_by_the_bridge_request_of_its_own_dialog_still_reaches_the_call() {
    let (fake, _reg, sup) = setup(bridge_on());
    let page = page_session(&sup);
    fake.set_rule("Runtime.evaluate", Rule::Ignore);
    let call = {
        let sup = Arc::clone(&sup);
        std::thread::spawn(move || {
            sup.call(
                "Runtime.evaluate",
                json!({"expression": "setTimeout(() => prompt('later'), 0); 'scheduled'"}),
                cdp_supervisor::Route::Page,
                Duration::from_secs(20),
            )
        })
    };
    let cmd = fake
        .wait_for_command(|c| c["method"] == "Runtime.evaluate", WAIT)
        .expect("the evaluate was sent");
    paused(
        &fake,
        &page,
        "R-9",
        &bridge_url("prompt", "later", ""),
        PAGE,
    );
    sup.wait_for(WAIT, |s| !s.pending_dialogs.is_empty())
        .expect("the bridge dialog is pending");
    fake.send_reply(
        &cmd["id"],
        &page,
        json!({"result": {"type": "string", "value": "scheduled"}}),
    );
    let r = call.join().expect("caller");
    assert_eq!(
        r.expect("the call's own reply")["result"]["value"],
        "scheduled"
    );
    // A call that the bridge dialog really blocks is told so after the grace.
    let t = Instant::now();
    let r = sup.call(
        "Runtime.evaluate",
        json!({"expression": "1"}),
        cdp_supervisor::Route::Page,
        Duration::from_secs(20),
    );
    assert!(
        matches!(&r, Err(cdp_supervisor::Error::BlockedByDialog { .. })),
        "{r:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}
