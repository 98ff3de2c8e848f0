//! The task's CDP endpoint (issue 30 point 3) on the scripted fake browser: the multiplexing
//! rules (ids rewritten both ways, events to the owner of their session, browser-level events
//! to the client that asked, a leaving client's sessions detached upstream) and a client that
//! stops reading, disconnected alone while the task and the other client go on.
//!
//! The fake answers `Target.attachToBrowserTarget` (each client's browser session) and sends
//! what a test emits on any session; the endpoint routes it as it would Chromium's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::unversioned::registry_without_popup_watcher;
use cdp_supervisor::{
    BridgeMode, Config, Route, StartOptions, StartRequest, Supervisor, SupervisorRegistry,
};
use serde_json::{Value, json};

use crate::common::RawCdp;
use crate::common::fakes::WAIT;

/// The fake's default page (the task's).
const PAGE: &str = "PAGE-1";

fn setup() -> (FakeBrowser, SupervisorRegistry, Arc<Supervisor>, String) {
    let fake = FakeBrowser::start().expect("fake browser");
    let reg = registry_without_popup_watcher(Config::default());
    let options = StartOptions::default().with_dialog_bridge(BridgeMode::Off);
    let sup = reg
        .start(StartRequest::new("task", &fake.ws_url()).with_options(options))
        .expect("attach to the fake browser");
    let ep = reg.cdp_endpoint("task").expect("the task's endpoint");
    (fake, reg, sup, ep.ws_url)
}

/// The clients' browser sessions upstream, in the order they attached to a target: a client's
/// `Target.attachToTarget` without a `sessionId` goes on its browser session.
fn browser_sessions(fake: &FakeBrowser) -> Vec<String> {
    let opened = fake
        .received()
        .iter()
        .filter(|c| c["method"] == "Target.attachToBrowserTarget")
        .count();
    let mut seen: Vec<String> = Vec::new();
    for c in fake.received() {
        if let Some(s) = c["sessionId"].as_str()
            && c["method"] == "Target.attachToTarget"
            && !seen.iter().any(|x| x == s)
        {
            seen.push(s.to_string());
        }
    }
    assert_eq!(seen.len(), opened, "a browser session per client: {seen:?}");
    seen
}

fn console(text: &str) -> Value {
    json!({"type": "log", "args": [{"type": "string", "value": text}], "executionContextId": 1,
           "timestamp": 0})
}

fn console_text(e: &Value) -> String {
    e["params"]["args"][0]["value"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn two_clients_get_their_own_replies_events_and_sessions_on_the_fake() {
    let (fake, _reg, sup, ws) = setup();
    let mut a = RawCdp::connect(&ws).expect("client A");
    let mut b = RawCdp::connect(&ws).expect("client B");
    let sa = a.attach(PAGE).expect("A attaches to the task's page");
    let sb = b.attach(PAGE).expect("B attaches to the task's page");
    assert_ne!(sa, sb, "a session each");
    let [ba, bb] = <[String; 2]>::try_from(browser_sessions(&fake)).expect("two browser sessions");
    a.clear_events();
    b.clear_events();

    // Colliding ids: both clients send the same id; each gets its own reply, on its session.
    let ia = a
        .send_command("Runtime.evaluate", json!({"expression": "1"}), Some(&sa))
        .unwrap();
    let ib = b
        .send_command("Runtime.evaluate", json!({"expression": "1"}), Some(&sb))
        .unwrap();
    assert_eq!(ia, ib, "the two clients' ids collide");
    for (name, c, s) in [("A", &mut a, &sa), ("B", &mut b, &sb)] {
        let reply = c
            .next_message(WAIT)
            .unwrap()
            .unwrap_or_else(|| panic!("{name} got no reply"));
        assert_eq!(reply["id"], ia, "{name}: {reply}");
        assert_eq!(reply["sessionId"], s.as_str(), "{name}: {reply}");
        assert_eq!(
            reply["result"]["result"]["value"], "fake",
            "{name}: {reply}"
        );
    }
    let upstream: Vec<u64> = fake
        .received()
        .iter()
        .filter(|c| c["method"] == "Runtime.evaluate")
        .filter_map(|c| c["id"].as_u64())
        .collect();
    assert_eq!(upstream.len(), 2);
    assert_ne!(
        upstream[0], upstream[1],
        "rewritten to distinct ids upstream"
    );

    // Events go to the owner of their session, on that session.
    fake.emit(Some(&sa), "Runtime.consoleAPICalled", console("for A"));
    fake.emit(Some(&sb), "Runtime.consoleAPICalled", console("for B"));
    let ea = a
        .wait_event("Runtime.consoleAPICalled", Some(&sa), WAIT)
        .expect("A's event");
    assert_eq!(console_text(&ea), "for A");
    let eb = b
        .wait_event("Runtime.consoleAPICalled", Some(&sb), WAIT)
        .expect("B's event");
    assert_eq!(console_text(&eb), "for B");

    // Browser-level events come on the browser session of the client that asked, and reach it
    // without a sessionId, as on a connection of its own.
    a.call(
        "Target.setDiscoverTargets",
        json!({"discover": true}),
        None,
        WAIT,
    )
    .unwrap();
    let asked = fake
        .received()
        .into_iter()
        .find(|c| c["method"] == "Target.setDiscoverTargets")
        .expect("sent upstream");
    assert_eq!(asked["sessionId"], ba.as_str(), "on A's browser session");
    let info = json!({"targetId": PAGE, "type": "page", "title": "", "url": "http://fake.test/",
                      "attached": true, "browserContextId": "CTX-1"});
    fake.emit(
        Some(&ba),
        "Target.targetInfoChanged",
        json!({"targetInfo": info}),
    );
    let changed = a
        .wait_event("Target.targetInfoChanged", None, WAIT)
        .expect("A hears of its task's target");
    assert_eq!(changed["params"]["targetInfo"]["targetId"], PAGE);
    // Each client's round trip orders it after everything emitted before: nothing misrouted.
    for c in [&mut a, &mut b] {
        c.call("Target.getTargets", json!({}), None, WAIT).unwrap();
    }
    let b_saw = serde_json::to_string(&b.clear_events()).unwrap();
    assert!(
        !b_saw.contains("for A") && !b_saw.contains("targetInfoChanged"),
        "B got A's events: {b_saw}"
    );
    let a_saw = serde_json::to_string(&a.clear_events()).unwrap();
    assert!(!a_saw.contains("for B"), "A got B's event: {a_saw}");

    // A leaves: its page session and its browser session are detached upstream; B goes on.
    drop(a);
    for s in [&sa, &ba] {
        fake.wait_for_command(
            |c| c["method"] == "Target.detachFromTarget" && c["params"]["sessionId"] == s.as_str(),
            WAIT,
        )
        .unwrap_or_else(|| panic!("{s} was not detached upstream"));
    }
    let sent_b = fake
        .received()
        .into_iter()
        .filter(|c| {
            c["method"] == "Target.detachFromTarget"
                && (c["params"]["sessionId"] == sb.as_str() || c["params"]["sessionId"] == bb)
        })
        .count();
    assert_eq!(sent_b, 0, "B's sessions stay");
    fake.emit(Some(&sa), "Runtime.consoleAPICalled", console("for gone A"));
    let v = b
        .call(
            "Runtime.evaluate",
            json!({"expression": "2"}),
            Some(&sb),
            WAIT,
        )
        .expect("B goes on");
    assert_eq!(v["result"]["value"], "fake");
    let b_saw = serde_json::to_string(&b.clear_events()).unwrap();
    assert!(!b_saw.contains("gone A"), "{b_saw}");
    sup.call("Browser.getVersion", json!({}), Route::Browser, WAIT)
        .expect("the task goes on");
}

#[test]
fn a_client_that_stops_reading_is_disconnected_while_the_others_go_on() {
    let (fake, _reg, sup, ws) = setup();
    let mut a = RawCdp::connect(&ws).expect("client A");
    let mut b = RawCdp::connect(&ws).expect("client B");
    let sa = a.attach(PAGE).unwrap();
    let sb = b.attach(PAGE).unwrap();

    // B stops reading; 2,000 events of 16 KiB (32 MiB) come for it: more than the kernel's
    // buffers hold, so more than 1 MiB waits in its outlet with nothing written.
    let filler = "z".repeat(16 << 10);
    let flood = 2_000;
    let b_left = || {
        fake.received().iter().any(|c| {
            c["method"] == "Target.detachFromTarget" && c["params"]["sessionId"] == sb.as_str()
        })
    };
    let started = Instant::now();
    let (slowest, calls, left) = std::thread::scope(|s| {
        let emitter = s.spawn(|| {
            for i in 0..flood {
                let text = format!("{i} {filler}");
                fake.emit(Some(&sb), "Runtime.consoleAPICalled", console(&text));
            }
        });
        // Meanwhile A's calls and the task's own go through, back to back. While the flood
        // crosses the one upstream connection they wait behind it there; once it has crossed
        // and only B's backlog waits (before B is cut), they go through at once: nothing waits
        // for B.
        let (mut slowest, mut calls) = (Duration::ZERO, 0);
        let mut left = None;
        let deadline = started + Duration::from_secs(20);
        while Instant::now() < deadline && !(left.is_some() && emitter.is_finished()) {
            let backlog_only = emitter.is_finished() && left.is_none();
            let t = Instant::now();
            a.call(
                "Runtime.evaluate",
                json!({"expression": "1"}),
                Some(&sa),
                WAIT,
            )
            .expect("A's call");
            sup.call("Browser.getVersion", json!({}), Route::Browser, WAIT)
                .expect("the task's own call");
            if backlog_only && !b_left() {
                slowest = slowest.max(t.elapsed());
                calls += 1;
            }
            // B's reader leaves once its socket is shut: its sessions are detached upstream.
            if left.is_none() && b_left() {
                left = Some(started.elapsed());
            }
        }
        (slowest, calls, left)
    });
    let left = left.expect("B was disconnected (its session detached upstream)");
    assert!(calls > 0, "no call while B's backlog waited");
    assert!(
        slowest < Duration::from_secs(1),
        "A and the task were slowed while B's backlog waited: {slowest:?}"
    );
    eprintln!(
        "B was disconnected {left:?} after the flood began; while its backlog waited, A's \
         slowest round trip (with the task's) of {calls} was {slowest:?}"
    );

    // B, reading again, gets what reached its socket, in order, then the end.
    let mut got = 0usize;
    let end = loop {
        match b.next_message(WAIT) {
            Ok(Some(e)) if e["method"] == "Runtime.consoleAPICalled" => {
                let text = console_text(&e);
                let n: usize = text
                    .split(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("a numbered event");
                assert_eq!(n, got, "in order");
                got += 1;
            }
            Ok(Some(_)) => {}
            Ok(None) => panic!("B's connection stayed open"),
            Err(e) => break e,
        }
    };
    assert!(got < flood, "B got all {got}: never cut");
    eprintln!("B got {got} of {flood} events before the end ({end})");

    // A goes on, events included.
    fake.emit(Some(&sa), "Runtime.consoleAPICalled", console("still A"));
    let e = a
        .wait_event("Runtime.consoleAPICalled", Some(&sa), WAIT)
        .expect("A's event after the flood");
    assert_eq!(console_text(&e), "still A");
}

/// A client's `Browser.close` is its own end, not the browser's (`mux/life.rs`): `{}`, the page
/// it created closed, then its connection closed; `Browser.crash` is refused; neither reaches
/// the browser, and another client goes on.
#[test]
fn a_clients_browser_close_closes_its_pages_and_it_while_the_browser_goes_on() {
    let (fake, _reg, sup, ws) = setup();
    let mut a = RawCdp::connect(&ws).expect("client A");
    let mut b = RawCdp::connect(&ws).expect("client B");
    let created = a.new_page("about:blank").expect("A creates a page");
    let crash = a.call("Browser.crash", json!({}), None, WAIT).unwrap_err();
    assert!(crash.contains("Browser.crash is refused"), "{crash}");
    // On a page's session too (Chromium would close the whole browser for that as well).
    let sa = a.attach(PAGE).expect("A attaches to the task's page");
    let crash = a
        .call("Browser.crash", json!({}), Some(&sa), WAIT)
        .unwrap_err();
    assert!(crash.contains("Browser.crash is refused"), "{crash}");
    let closed = a.call("Browser.close", json!({}), None, WAIT);
    assert_eq!(closed, Ok(json!({})));
    let after = a.call("Browser.getVersion", json!({}), None, WAIT);
    assert!(after.is_err(), "A's connection is closed: {after:?}");
    let closing = fake.wait_for_command(
        |m| m["method"] == "Target.closeTarget" && m["params"]["targetId"] == created,
        WAIT,
    );
    assert!(closing.is_some(), "the page A created is closed");
    assert!(
        !fake.received().iter().any(|c| matches!(
            c["method"].as_str(),
            Some("Browser.close" | "Browser.crash")
        )),
        "neither reached the browser"
    );
    let sb = b.attach(PAGE).expect("B goes on");
    assert!(!sb.is_empty());
    assert_eq!(
        sup.snapshot().state,
        cdp_supervisor::SupervisorState::Active
    );
}
