//! Invisible supervision (SPEC §19, issue 32), driven by the scripted fake CDP browser: what the
//! supervisor sends to every kind of session by default (only commands measured invisible to a
//! page on Chromium: `tests/it/measure_stealth.rs`), what the opt-ins add, and how a call routed
//! into a same-process frame finds the frame's main world through the DOM
//! (`src/supervisor/main_world.rs`). The same on real Chromium, with the detection page:
//! `tests/it/e2e_stealth.rs`.

use std::sync::Arc;
use std::time::Instant;

use crate::common::fakes::{WAIT, barrier, frame_navigated, methods, page_session};
use cdp_supervisor::fake::{FakeBrowser, Rule};
use cdp_supervisor::unversioned::{self, registry_without_popup_watcher};
use cdp_supervisor::{BridgeMode, Config, Route, StartOptions, Supervisor, SupervisorRegistry};
use serde_json::{Value, json};

/// The fake's default page: target id and main frame id.
const PAGE: &str = "PAGE-1";

/// What the supervisor may send on a page, frame, popup or worker session by default: each
/// measured on Chromium to change none of the detection page's checks (`measure_stealth`,
/// `raw_domains`).
const INVISIBLE: &[&str] = &[
    "Page.enable",
    "Page.getFrameTree",
    "Target.setAutoAttach",
    "Runtime.getIsolateId",
    "Runtime.runIfWaitingForDebugger",
    "Page.setInterceptFileChooserDialog",
];

fn start(config: Config, bridge: BridgeMode) -> (FakeBrowser, SupervisorRegistry, Arc<Supervisor>) {
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = registry_without_popup_watcher(config);
    let options = StartOptions::default().with_dialog_bridge(bridge);
    let sup = reg
        .get_or_start_with("task", &fake.ws_url(), options)
        .expect("attach to the fake browser");
    (fake, reg, sup)
}

/// Hands the supervisor one session of every kind it sets up: an OOPIF and a worker under the
/// page, and a popup the page opened (browser-level auto-attach).
fn attach_one_of_each(fake: &FakeBrowser, page: &str) {
    let info = |target: &str, kind: &str, url: &str| {
        json!({"targetId": target, "type": kind, "url": url, "title": "", "attached": true,
               "canAccessOpener": false, "browserContextId": "CTX-1"})
    };
    let mut oopif = info("FRAME-X", "iframe", "http://other.test/");
    oopif["parentFrameId"] = json!(PAGE);
    for (session, target) in [
        ("CHILD-1", oopif),
        (
            "WORKER-S",
            info("WORKER-1", "worker", "http://fake.test/w.js"),
        ),
    ] {
        fake.emit(
            Some(page),
            "Target.attachedToTarget",
            json!({"sessionId": session, "targetInfo": target, "waitingForDebugger": true}),
        );
    }
    let mut popup = info("POP-1", "page", "about:blank");
    popup["openerId"] = json!(PAGE);
    popup["openerFrameId"] = json!(PAGE);
    fake.emit(
        None,
        "Target.attachedToTarget",
        json!({"sessionId": "SID-POP", "targetInfo": popup, "waitingForDebugger": true}),
    );
}

/// Every command the supervisor sent on a session, as `(session, method)`.
fn on_sessions(fake: &FakeBrowser) -> Vec<(String, String)> {
    fake.received()
        .into_iter()
        .filter_map(|c| {
            Some((
                c["sessionId"].as_str()?.to_string(),
                c["method"].as_str()?.to_string(),
            ))
        })
        .collect()
}

#[test]
fn the_default_set_up_of_every_session_sends_only_what_a_page_cannot_see() {
    let (fake, _reg, sup) = start(Config::default(), BridgeMode::Auto);
    let page = page_session(&sup);
    attach_one_of_each(&fake, &page);
    barrier(&sup);
    let sent = on_sessions(&fake);
    let visible: Vec<_> = sent
        .iter()
        .filter(|(_, m)| !INVISIBLE.contains(&m.as_str()))
        .collect();
    assert!(
        visible.is_empty(),
        "sent what a page can observe: {visible:?}"
    );
    // The set-up really happened on each of them (the list above is not empty by accident).
    for (session, method) in [
        (page.as_str(), "Page.enable"),
        ("CHILD-1", "Page.enable"),
        ("CHILD-1", "Runtime.runIfWaitingForDebugger"),
        ("WORKER-S", "Runtime.runIfWaitingForDebugger"),
        ("SID-POP", "Page.enable"),
        ("SID-POP", "Runtime.runIfWaitingForDebugger"),
    ] {
        assert!(
            sent.iter().any(|(s, m)| s == session && m == method),
            "{method} not sent on {session}: {sent:?}"
        );
    }
}

/// After a dropped connection the supervisor attaches again (`src/attach.rs`): that set-up too
/// sends nothing a page can observe, on the page and on the sessions handed over again.
#[test]
fn the_set_up_after_a_reconnect_sends_only_what_a_page_cannot_see() {
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = registry_without_popup_watcher(
        Config::default().with_reconnect_backoff(std::time::Duration::from_millis(50)),
    );
    let sup = reg
        .get_or_start("task", &fake.ws_url())
        .expect("attach to the fake browser");
    let old = page_session(&sup);
    let accepted = fake.accepted_count();
    let before = fake.received().len();
    fake.drop_connections();
    // A session does not outlive its connection: the page attached again has a new one (the
    // old snapshot may still say "active" for a moment after the new connection is accepted).
    let up = sup
        .wait_for(WAIT, |s| {
            fake.accepted_count() > accepted
                && s.to_json()["state"] == "active"
                && s.page_session_id.as_deref().is_some_and(|p| p != old)
        })
        .expect("attached again");
    let page = up.page_session_id.clone().expect("the new page session");
    attach_one_of_each(&fake, &page);
    barrier(&sup);
    let again: Vec<(String, String)> = fake.received()[before..]
        .iter()
        .filter_map(|c| {
            Some((
                c["sessionId"].as_str()?.to_string(),
                c["method"].as_str()?.to_string(),
            ))
        })
        .collect();
    assert!(
        again.iter().any(|(s, m)| *s == page && m == "Page.enable"),
        "the page was set up again: {again:?}"
    );
    let visible: Vec<_> = again
        .iter()
        .filter(|(_, m)| !INVISIBLE.contains(&m.as_str()))
        .collect();
    assert!(
        visible.is_empty(),
        "sent what a page can observe after the reconnect: {visible:?}"
    );
}

#[test]
fn console_capture_enables_the_runtime_domain_on_every_session() {
    let (fake, _reg, sup) = start(
        Config::default().with_capture_console(true),
        BridgeMode::Off,
    );
    let page = page_session(&sup);
    attach_one_of_each(&fake, &page);
    barrier(&sup);
    let sent = on_sessions(&fake);
    for session in [page.as_str(), "CHILD-1", "WORKER-S", "SID-POP"] {
        let on: Vec<String> = sent
            .iter()
            .filter(|(s, _)| s == session)
            .map(|(_, m)| m.clone())
            .collect();
        assert_eq!(
            on.iter().filter(|m| *m == "Runtime.enable").count(),
            1,
            "Runtime.enable once on {session}: {on:?}"
        );
    }
    // Console messages then reach the ring, as before.
    fake.emit(
        Some(&page),
        "Runtime.consoleAPICalled",
        json!({"type": "error", "args": [{"type": "string", "value": "boom"}],
               "executionContextId": 1, "timestamp": 1.0}),
    );
    let s = sup
        .wait_for(WAIT, |s| !s.console_errors.is_empty())
        .expect("the console error is captured");
    assert!(
        s.console_errors[0].text.contains("boom"),
        "{:?}",
        s.console_errors
    );
}

#[test]
fn the_bridge_script_leaves_no_global_and_its_functions_are_methods() {
    let (fake, _reg, sup) = start(Config::default(), BridgeMode::On);
    let page = page_session(&sup);
    barrier(&sup);
    let script = fake
        .received()
        .into_iter()
        .find(|c| {
            c["sessionId"] == page.as_str()
                && c["method"] == "Page.addScriptToEvaluateOnNewDocument"
        })
        .expect("the bridge script is installed on the page");
    let source = script["params"]["source"].as_str().unwrap_or_default();
    assert_eq!(source, unversioned::bridge::SCRIPT);
    assert!(
        !source.contains("window.__") && !source.contains("defineProperty(window"),
        "the script marks nothing on window"
    );
    assert!(
        !source.contains("= function"),
        "replacements are methods (no prototype, not constructors), not function expressions"
    );
}

/// The DOM route into a same-process frame's main world, as Chromium answers it (measured:
/// `measure_stealth::main_world_ways`): the frame's owner element, its content document, that
/// document resolved to an object whose id names its context, and an empty call that proves
/// the object belongs to that context. Then the call itself, with that context; the next call
/// reuses it, until the frame shows a new document.
#[test]
fn a_same_process_frame_is_reached_through_the_dom_once_per_document() {
    let (fake, _reg, sup) = start(Config::default(), BridgeMode::Off);
    let page = page_session(&sup);
    fake.emit(
        Some(&page),
        "Page.frameAttached",
        json!({"frameId": "SAME-1", "parentFrameId": PAGE}),
    );
    frame_navigated(&fake, &page, "SAME-1", Some(PAGE), "http://fake.test/inner");
    fake.set_rule(
        "DOM.getFrameOwner",
        Rule::Reply(json!({"backendNodeId": 5})),
    );
    fake.set_rule(
        "DOM.describeNode",
        Rule::Reply(json!({"node": {"backendNodeId": 5, "nodeName": "IFRAME",
                                    "contentDocument": {"backendNodeId": 6, "nodeName": "#document"}}})),
    );
    fake.set_rule(
        "DOM.resolveNode",
        Rule::Reply(json!({"object": {"type": "object", "subtype": "node",
                                      "className": "HTMLDocument", "objectId": "4242.31.1"}})),
    );
    fake.set_rule(
        "Runtime.callFunctionOn",
        Rule::Reply(json!({"result": {"type": "undefined"}})),
    );
    barrier(&sup);
    let mark = fake.received().len();
    let (_, routed) = sup
        .call_routed(
            "Runtime.evaluate",
            json!({"expression": "document.title"}),
            Route::Frame("SAME-1"),
            WAIT,
        )
        .expect("evaluate in the same-process frame");
    assert_eq!(routed.as_deref(), Some(page.as_str()));
    fake.wait_for_command(|c| c["method"] == "Runtime.releaseObjectGroup", WAIT)
        .expect("the lookup's object group is released");
    let sent: Vec<Value> = fake.received()[mark..]
        .iter()
        .filter(|c| c["sessionId"] == page.as_str())
        .cloned()
        .collect();
    assert_eq!(
        methods(&sent),
        [
            "DOM.getFrameOwner",
            "DOM.describeNode",
            "DOM.resolveNode",
            "Runtime.callFunctionOn",
            "Runtime.releaseObjectGroup",
            "Runtime.evaluate",
        ],
        "{sent:?}"
    );
    let by = |m: &str| {
        sent.iter()
            .find(|c| c["method"] == m)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(
        by("DOM.getFrameOwner")["params"],
        json!({"frameId": "SAME-1"})
    );
    assert_eq!(
        by("DOM.describeNode")["params"],
        json!({"backendNodeId": 5})
    );
    assert_eq!(by("DOM.resolveNode")["params"]["backendNodeId"], 6);
    let group = by("DOM.resolveNode")["params"]["objectGroup"].clone();
    assert!(group.is_string(), "resolved in a group of its own");
    assert_eq!(
        by("Runtime.releaseObjectGroup")["params"]["objectGroup"],
        group
    );
    let check = by("Runtime.callFunctionOn")["params"].clone();
    assert_eq!(check["executionContextId"], 31);
    assert_eq!(check["arguments"], json!([{"objectId": "4242.31.1"}]));
    assert_eq!(check["functionDeclaration"], "function() {}");
    assert_eq!(
        by("Runtime.evaluate")["params"],
        json!({"expression": "document.title", "contextId": 31})
    );
    assert_eq!(
        sup.snapshot()
            .frames
            .get("SAME-1")
            .and_then(unversioned::default_context),
        Some(31),
        "the context is kept in the frame map"
    );

    // The next call goes straight there; so does a callFunctionOn (its own key).
    let mark = fake.received().len();
    sup.call(
        "Runtime.callFunctionOn",
        json!({"functionDeclaration": "() => 2"}),
        Route::Frame("SAME-1"),
        WAIT,
    )
    .expect("callFunctionOn with the known context");
    barrier(&sup);
    let again: Vec<Value> = fake.received()[mark..]
        .iter()
        .filter(|c| c["sessionId"] == page.as_str())
        .cloned()
        .collect();
    assert_eq!(methods(&again), ["Runtime.callFunctionOn"]);
    assert_eq!(
        again[0]["params"],
        json!({"functionDeclaration": "() => 2", "executionContextId": 31})
    );

    // A new document: found again.
    frame_navigated(&fake, &page, "SAME-1", Some(PAGE), "http://fake.test/next");
    fake.set_rule(
        "DOM.resolveNode",
        Rule::Reply(json!({"object": {"type": "object", "objectId": "4242.32.1"}})),
    );
    barrier(&sup);
    assert_eq!(
        sup.snapshot()
            .frames
            .get("SAME-1")
            .and_then(unversioned::default_context),
        None,
        "a new document has no context yet"
    );
    sup.call(
        "Runtime.evaluate",
        json!({"expression": "1"}),
        Route::Frame("SAME-1"),
        WAIT,
    )
    .expect("evaluate after the navigation");
    let last = fake
        .received()
        .into_iter()
        .rfind(|c| c["method"] == "Runtime.evaluate")
        .expect("sent");
    assert_eq!(last["params"]["contextId"], 32);
}

/// What the browser refuses on the way (no owner element, no document, an object id of
/// another shape, a check Chromium rejects) is a clear error naming the frame, and the call
/// itself is never sent; nothing waits for its deadline.
#[test]
fn a_frame_whose_main_world_cannot_be_found_fails_clearly_at_once() {
    let (fake, _reg, sup) = start(Config::default(), BridgeMode::Off);
    let page = page_session(&sup);
    fake.emit(
        Some(&page),
        "Page.frameAttached",
        json!({"frameId": "SAME-2", "parentFrameId": PAGE}),
    );
    frame_navigated(&fake, &page, "SAME-2", Some(PAGE), "http://fake.test/inner");
    barrier(&sup);
    let evaluates = |fake: &FakeBrowser| {
        fake.received()
            .iter()
            .filter(|c| c["method"] == "Runtime.evaluate")
            .count()
    };
    let attempt = |why: &str| {
        let t = Instant::now();
        let err = sup
            .call(
                "Runtime.evaluate",
                json!({"expression": "1"}),
                Route::Frame("SAME-2"),
                WAIT,
            )
            .expect_err(why);
        assert!(
            t.elapsed() < WAIT / 2,
            "{why}: failed only after {:?}",
            t.elapsed()
        );
        let msg = err.to_string();
        assert!(
            msg.contains("SAME-2") && msg.contains("context"),
            "{why}: {msg}"
        );
        msg
    };
    // The fake knows no DOM methods at all.
    let msg = attempt("no DOM.getFrameOwner");
    assert!(msg.contains("DOM.getFrameOwner"), "{msg}");
    // No document in the frame yet.
    fake.set_rule(
        "DOM.getFrameOwner",
        Rule::Reply(json!({"backendNodeId": 5})),
    );
    fake.set_rule(
        "DOM.describeNode",
        Rule::Reply(json!({"node": {"backendNodeId": 5, "nodeName": "IFRAME"}})),
    );
    attempt("no content document");
    // An object id that names no context.
    fake.set_rule(
        "DOM.describeNode",
        Rule::Reply(json!({"node": {"backendNodeId": 5, "contentDocument": {"backendNodeId": 6}}})),
    );
    fake.set_rule(
        "DOM.resolveNode",
        Rule::Reply(json!({"object": {"type": "object", "objectId": "{\"injectedScriptId\":3}"}})),
    );
    let msg = attempt("an object id of another shape");
    assert!(msg.contains("capture_console"), "{msg}");
    // A context Chromium says the object does not belong to.
    fake.set_rule(
        "DOM.resolveNode",
        Rule::Reply(json!({"object": {"type": "object", "objectId": "1.9.1"}})),
    );
    fake.set_rule(
        "Runtime.callFunctionOn",
        Rule::Error {
            code: -32000,
            message: "Argument should belong to the same JavaScript world as target object".into(),
        },
    );
    attempt("a refused check");
    assert_eq!(evaluates(&fake), 0, "the call itself was never sent");
    assert_eq!(
        sup.snapshot()
            .frames
            .get("SAME-2")
            .and_then(unversioned::default_context),
        None
    );
}
