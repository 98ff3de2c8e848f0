//! Connection loss: what a drop does to pending dialogs, and re-attaching after a reconnect.

use super::*;

// --- connection loss

#[test]
fn a_dialog_pending_at_a_drop_is_recorded_as_connection_lost() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "confirm", "Leave?");
    sim.step();
    let (_, waiting) = sim.send(Command {
        method: "Runtime.evaluate".into(),
        params: json!({"expression": "1"}),
        session_id: None,
        kind: CallKind::Plain,
    });
    sim.advance(40);
    sim.core
        .on_disconnect("the browser closed the connection", sim.now);
    sim.deliver();
    assert!(matches!(err(&waiting), Error::ConnectionLost(_)));
    sim.core.reconnecting(1, 5);
    let snap = sim.snap();
    assert!(snap.pending_dialogs.is_empty());
    let c = snap.closed_dialog("d-1").expect("recorded");
    assert_eq!(c.closed_by, ClosedBy::ConnectionLost);
    assert_eq!(c.closed_at, sim.now.epoch);
    assert_eq!(c.to_json()["closed_by"], "connection_lost");
    assert!(!snap.is_active());
    assert_eq!(
        snap.state,
        SupervisorState::Reconnecting { attempt: 1, of: 5 }
    );
    assert_eq!(sim.step().cancelled, vec!["d-1".to_string()]);
}

/// The Closed event came for our answer, then the connection dropped before its ack: the
/// answerer closed it.
#[test]
fn a_dialog_whose_close_came_while_our_answer_was_in_flight_stays_the_answerers() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "confirm", "Transfer?");
    let (_, rx) = sim.answer("d-1", true, None, ClosedBy::Agent);
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.core.on_disconnect("gone", sim.now);
    sim.deliver();
    assert!(matches!(err(&rx), Error::ConnectionLost(_)));
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Agent, Some(true)));
}

#[test]
fn re_attaching_after_a_reconnect_makes_the_state_active_again() {
    let mut sim = Sim::must_respond();
    sim.core.on_disconnect("gone", sim.now);
    sim.core.reconnecting(2, 3);
    assert_eq!(sim.core.reset_for_reconnect().as_deref(), Some(PAGE));
    let snap = sim.snap();
    assert!(!snap.is_active());
    assert!(snap.frames.is_empty(), "the frame map starts over");
    let attach = sim.register(
        "Target.attachToTarget",
        None,
        CallKind::AttachPage {
            target_id: PAGE.into(),
        },
    );
    sim.reply(attach, json!({"sessionId": "S2"}));
    let snap = sim.snap();
    assert!(snap.is_active());
    assert_eq!(snap.state, SupervisorState::Active);
    assert_eq!(snap.disconnect_reason, None);
    assert_eq!(snap.page_session_id.as_deref(), Some("S2"));
    assert_eq!(snap.to_json()["state"], "active");
}
