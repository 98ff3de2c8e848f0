//! Taking a task over (SPEC §20): no policy answer and no watchdog while a person holds the
//! task, the policy again once it is taken back (`core/handover.rs`).

use super::*;

impl Sim {
    /// A hand-over (`hold`) or take-back as `Supervisor::hand_over`/`take_back` sends it,
    /// answered by the browser; what the core queued then.
    fn hold(&mut self, hold: bool) -> Out {
        let (ack, _rx) = bounded(1);
        let ack = hold.then(|| crate::watchdog::Ack(ack));
        let id = self.register("Browser.getVersion", None, CallKind::Handover { hold, ack });
        self.reply(id, json!({"product": "Chrome"}));
        self.step()
    }
}

/// `must_respond`: the hand-over cancels the armed watchdog; a dialog that opens while held is
/// never armed; the person answers as `human`; taking back arms each pending dialog with a
/// fresh `dialog_timeout_s`, and the held time is counted.
#[test]
fn while_a_person_holds_the_task_no_watchdog_runs_and_taking_back_rearms_it() {
    let mut sim = Sim::attached(CoreSettings {
        dialog_timeout: Duration::from_secs(2),
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.open_dialog(S1, PAGE, "confirm", "Sure?");
    assert_eq!(sim.step().armed.len(), 1);
    let handed = sim.now;
    let out = sim.hold(true);
    assert_eq!(out.cancelled, ["d-1"], "the hand-over disarms the watchdog");
    assert_eq!((out.acks, out.commands.len()), (1, 0));
    let snap = sim.snap();
    assert_eq!(snap.handover.held_since, Some(handed.epoch));
    assert_eq!(snap.handover.holds, 1);
    assert_eq!(snap.to_json()["handover"]["held"], true);
    // Handing over again changes nothing (the hold keeps its start).
    sim.advance(500);
    let again = sim.hold(true);
    assert!(again.cancelled.is_empty() && again.armed.is_empty());
    assert_eq!(sim.snap().handover.held_since, Some(handed.epoch));

    // The person answers: recorded as human.
    let (id, _rx) = sim.answer("d-1", true, None, ClosedBy::Human);
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.reply(id, json!({}));
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Human, Some(true)));
    assert_eq!(c.to_json()["closed_by"], "human");

    // A dialog that opens while held waits: no watchdog, no answer.
    sim.open_dialog(S1, PAGE, "alert", "Hi");
    let out = sim.step();
    assert!(out.armed.is_empty() && out.commands.is_empty(), "{out:?}");
    sim.advance(4500);
    let back = sim.now;
    let out = sim.hold(false);
    assert_eq!(out.acks, 0);
    assert_eq!(out.armed.len(), 1, "taking back arms the pending dialog");
    let (id, deadline) = &out.armed[0];
    assert_eq!(
        (id.as_str(), *deadline),
        ("d-2", back.instant + Duration::from_secs(2))
    );
    let h = sim.snap().handover;
    assert_eq!((h.held_since, h.holds), (None, 1));
    assert!((h.ended_holds_s - 5.0).abs() < 1e-6, "{h:?}");
    assert!((h.held_total_s(back.epoch + 10.0) - 5.0).abs() < 1e-6);
    let json = sim.snap().to_json()["handover"].clone();
    assert_eq!(json["held"], false);
    assert!(json.get("held_since").is_none(), "{json}");
    // Taking back again changes nothing.
    let again = sim.hold(false);
    assert!(again.armed.is_empty());
    assert_eq!(sim.snap().handover, h);
}

/// `auto_dismiss`: a dialog that opens while held is not answered (and blocks calls into its
/// renderer as under `must_respond`); taking back answers it by the policy at once.
#[test]
fn a_policy_answers_nothing_while_held_and_answers_the_waiting_dialog_on_take_back() {
    let mut sim = Sim::attached(settings(DialogPolicy::AutoDismiss, BridgeMode::Off));
    sim.hold(true);
    let (_, rx) = sim.send(
        Command::new("Runtime.evaluate", json!({"expression": "1"}))
            .on(S1)
            .kind(CallKind::Agent {
                known_dialogs: Vec::new(),
                main_world: None,
            }),
    );
    sim.open_dialog(S1, PAGE, "confirm", "Sure?");
    let out = sim.step();
    assert!(
        out.commands.is_empty(),
        "no policy answer while held: {out:?}"
    );
    assert!(out.armed.is_empty());
    match err(&rx) {
        Error::BlockedByDialog { dialog, .. } => assert_eq!(dialog.id, "d-1"),
        other => panic!("the in-flight call is failed by the held dialog: {other:?}"),
    }
    assert_eq!(sim.snap().pending_dialogs.len(), 1);
    let out = sim.hold(false);
    let (id, c) = out.only("Page.handleJavaScriptDialog");
    assert_eq!(c.params, json!({"accept": false}));
    sim.close_dialog(S1, Some(PAGE), false, "");
    sim.reply(id, json!({}));
    assert_eq!(sim.closed("d-1").closed_by, ClosedBy::AutoPolicy);
}
