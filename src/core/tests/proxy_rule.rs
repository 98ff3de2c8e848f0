//! The dialog bridge's proxy rule: when a remote close turns the bridge on, and answering through it.

use super::*;

// --- the bridge's proxy rule

/// `auto` bridge mode: a native dialog closed remotely within 100 ms of opening turns the bridge
/// on (SPEC §6); at 100 ms or later it does not. On the simulated clock, both sides of the edge.
#[test]
fn the_proxy_signature_is_a_remote_close_within_100_ms() {
    for (after_ms, turns_on) in [
        (0, true),
        (10, true),
        (99, true),
        (100, false),
        (250, false),
    ] {
        let mut sim = Sim::attached(settings(DialogPolicy::MustRespond, BridgeMode::Auto));
        sim.open_dialog(S1, PAGE, "alert", "Hi");
        sim.step();
        sim.advance(after_ms);
        sim.close_dialog(S1, Some(PAGE), true, "");
        let out = sim.step();
        let expect: Vec<(&str, Option<&str>)> = if turns_on {
            vec![
                ("Page.addScriptToEvaluateOnNewDocument", Some(S1)),
                ("Fetch.enable", Some(S1)),
            ]
        } else {
            vec![]
        };
        assert_eq!(out.methods(), expect, "closed {after_ms} ms after opening");
        assert_eq!(sim.closed("d-1").closed_by, ClosedBy::Remote);
        // Once on, it stays on: an OOPIF attached later gets it as part of its set-up.
        let out = sim.oopif(S1, "C1", "F1", PAGE);
        assert_eq!(
            out.commands_only(),
            [
                session_setup("C1", SessionKind::Iframe, bridge_only(turns_on)),
                vec![session::resume("C1")]
            ]
            .concat()
        );
    }
}

/// The bridge goes on every session that shows documents, once.
#[test]
fn the_proxy_signature_turns_the_bridge_on_for_every_document_session() {
    let mut sim = Sim::attached(settings(DialogPolicy::MustRespond, BridgeMode::Auto));
    sim.oopif(S1, "C1", "F1", PAGE);
    sim.event(
        Some(S1),
        "Target.attachedToTarget",
        json!({"sessionId": "W1", "waitingForDebugger": true,
               "targetInfo": {"targetId": "W", "type": "worker", "url": "http://a.test/w.js"}}),
    );
    sim.step();
    sim.open_dialog(S1, PAGE, "alert", "Hi");
    sim.close_dialog(S1, Some(PAGE), true, "");
    let out = sim.step();
    let mut got = out.methods();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("Fetch.enable", Some("C1")),
            ("Fetch.enable", Some(S1)),
            ("Page.addScriptToEvaluateOnNewDocument", Some("C1")),
            ("Page.addScriptToEvaluateOnNewDocument", Some(S1)),
        ]
    );
    // A second fast close changes nothing.
    sim.open_dialog(S1, PAGE, "alert", "Again");
    sim.close_dialog(S1, Some(PAGE), true, "");
    assert!(sim.step().commands.is_empty());
}

/// Not the signature: a close without `frameId` (a guess about which dialog closed), a close
/// our own answer made, or bridge mode `off`.
#[test]
fn what_is_not_the_proxy_signature() {
    let mut sim = Sim::attached(settings(DialogPolicy::MustRespond, BridgeMode::Auto));
    sim.open_dialog(S1, PAGE, "alert", "Hi");
    sim.close_dialog(S1, None, true, "");
    assert!(sim.step().commands.is_empty(), "no frameId");

    sim.open_dialog(S1, PAGE, "alert", "Hi");
    let (id, _) = sim.answer("d-2", true, None, ClosedBy::Agent);
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.reply(id, json!({}));
    assert!(sim.step().commands.is_empty(), "our own answer");
    assert_eq!(sim.closed("d-2").closed_by, ClosedBy::Agent);

    let mut sim = Sim::attached(settings(DialogPolicy::MustRespond, BridgeMode::Off));
    sim.open_dialog(S1, PAGE, "alert", "Hi");
    sim.close_dialog(S1, Some(PAGE), true, "");
    assert!(sim.step().commands.is_empty(), "bridge off");
}

/// With the bridge on, a paused bridge request is a dialog answered by `Fetch.fulfillRequest`
/// and any other paused request is let through.
#[test]
fn a_bridge_dialog_is_answered_by_fulfilling_its_request() {
    let mut sim = Sim::attached(settings(DialogPolicy::MustRespond, BridgeMode::On));
    sim.event(
        Some(S1),
        "Fetch.requestPaused",
        json!({"requestId": "X", "request": {"url": "http://a.test/api"}}),
    );
    let out = sim.step();
    assert_eq!(
        out.only("Fetch.continueRequest").1.params,
        json!({"requestId": "X"})
    );
    let opened = sim.now;
    sim.bridge_dialog(S1, PAGE, "R1", "Sure%3F");
    let out = sim.step();
    assert_eq!(
        out.armed,
        vec![("d-1".into(), opened.after(Duration::from_secs(300)).instant)]
    );
    assert_eq!(sim.pending("d-1").message, "Sure?");
    let (id, rx) = sim.answer("d-1", true, None, ClosedBy::Agent);
    sim.reply(id, json!({}));
    ok(&rx);
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Agent, Some(true)));
}
