//! The dialog lifecycle and who closed each dialog (`closed_by` races, the watchdog, auto policies).

use super::*;

// --- the dialog lifecycle

/// Opening -> pending -> the agent's answer -> Closed -> the acknowledgement -> recent, for
/// each kind of dialog, with the watchdog armed at opened + dialog_timeout and cancelled.
#[test]
fn dialog_lifecycle_for_every_kind() {
    let cases = [
        ("alert", true, None, ""),
        ("confirm", true, None, ""),
        ("prompt", true, Some("typed"), "typed"),
        ("beforeunload", false, None, ""),
    ];
    for (n, (kind, accept, text, input)) in cases.into_iter().enumerate() {
        let mut sim = Sim::must_respond();
        let opened = sim.now;
        sim.open_dialog(S1, PAGE, kind, "Sure?");
        let out = sim.step();
        assert!(
            out.commands.is_empty(),
            "{kind}: must_respond sends nothing"
        );
        let deadline = opened.after(Duration::from_secs(300)).instant;
        assert_eq!(out.armed, vec![("d-1".to_string(), deadline)], "{kind}");

        let d = sim.pending("d-1");
        assert_eq!(d.kind, kind);
        assert_eq!(d.message, "Sure?");
        assert_eq!(d.default_prompt, if kind == "prompt" { "bob" } else { "" });
        assert_eq!(d.opened_at, opened.epoch);
        assert_eq!(d.frame_id.as_deref(), Some(PAGE));
        assert_eq!(d.origin, "http://a.test");
        assert_eq!(d.target_id, PAGE);
        assert_eq!(d.session_id, S1);

        sim.advance(1500);
        let (id, rx) = sim.answer("d-1", accept, text, ClosedBy::Agent);
        let mut expect = json!({"accept": accept});
        if let Some(t) = text {
            expect["promptText"] = json!(t);
        }
        nothing_yet(&rx);

        // Chromium sends the Closed event first, then the reply.
        sim.advance(2);
        sim.close_dialog(S1, Some(PAGE), accept, input);
        let out = sim.step();
        assert_eq!(out.cancelled, vec!["d-1".to_string()], "{kind}");
        let snap = sim.snap();
        assert!(
            snap.pending_dialogs.is_empty(),
            "{kind}: closed, not pending"
        );
        assert!(snap.recent_dialogs.is_empty(), "{kind}: the ack decides");

        sim.advance(1);
        sim.reply(id, json!({}));
        assert_eq!(ok(&rx), json!({}));
        let c = sim.closed("d-1");
        assert_eq!(c.closed_by, ClosedBy::Agent, "{kind}");
        assert_eq!(c.accepted, Some(accept));
        assert_eq!(c.user_input.as_deref(), Some(input));
        assert_eq!(c.closed_at, sim.now.epoch);
        assert_eq!(c.dialog.id, "d-1");
        assert_eq!(c.to_json()["closed_by"], "agent");
        assert!(sim.snap().pending_dialogs.is_empty(), "case {n}");
        // The command the agent's answer was.
        let sent = answer_command(&d, accept, text, ClosedBy::Agent);
        assert_eq!(sent.method, "Page.handleJavaScriptDialog");
        assert_eq!(sent.params, expect);
        assert_eq!(sent.session_id.as_deref(), Some(S1));
    }
}

/// An acknowledgement that comes before the Closed event (it does not on Chromium, but the order
/// must not matter): what we sent is recorded, and the late event changes nothing.
#[test]
fn an_ack_before_the_closed_event_records_what_was_sent() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "prompt", "Name?");
    let (id, rx) = sim.answer("d-1", true, Some("ann"), ClosedBy::Agent);
    sim.reply(id, json!({}));
    assert_eq!(ok(&rx), json!({}));
    let c = sim.closed("d-1");
    assert_eq!(
        (c.closed_by, c.accepted, c.user_input.as_deref()),
        (ClosedBy::Agent, Some(true), Some("ann"))
    );
    sim.close_dialog(S1, Some(PAGE), true, "ann");
    assert_eq!(sim.snap().recent_dialogs.len(), 1);
}

/// The browser's own account (the Closed event) wins over what the answer said.
#[test]
fn the_closed_event_is_the_record_of_what_the_page_got() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "prompt", "Name?");
    let (id, rx) = sim.answer("d-1", true, Some("ann"), ClosedBy::Agent);
    sim.close_dialog(S1, Some(PAGE), true, "ANN");
    sim.reply(id, json!({}));
    ok(&rx);
    assert_eq!(sim.closed("d-1").user_input.as_deref(), Some("ANN"));
}

// --- closed_by races

#[test]
fn a_dialog_closed_by_something_else_is_remote() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "confirm", "Sure?");
    sim.step();
    sim.advance(500);
    sim.close_dialog(S1, Some(PAGE), false, "");
    let out = sim.step();
    assert_eq!(out.cancelled, vec!["d-1".to_string()]);
    let c = sim.closed("d-1");
    assert_eq!(
        (c.closed_by, c.accepted, c.closed_at),
        (ClosedBy::Remote, Some(false), sim.now.epoch)
    );
    assert!(sim.snap().pending_dialogs.is_empty());
}

/// Answer in flight when another client closes the dialog and the page opens the next one: the
/// first is `remote`, the answer lands on the second (module doc of `dialogs.rs`), and the
/// caller is told which dialog it answered.
#[test]
fn an_answer_overtaken_by_a_remote_close_lands_on_the_next_dialog() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "confirm", "First?");
    let (id, rx) = sim.answer("d-1", true, None, ClosedBy::Agent);
    // Another client dismissed d-1; the page went on and opened d-2.
    sim.close_dialog(S1, Some(PAGE), false, "");
    assert!(
        sim.snap().recent_dialogs.is_empty(),
        "our answer may yet be it"
    );
    sim.open_dialog(S1, PAGE, "confirm", "Second?");
    let out = sim.step();
    assert!(out.cancelled.contains(&"d-1".to_string()));
    let c1 = sim.closed("d-1");
    assert_eq!((c1.closed_by, c1.accepted), (ClosedBy::Remote, Some(false)));
    assert_eq!(sim.pending("d-2").message, "Second?");
    // The browser applies our answer to d-2.
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.reply(id, json!({}));
    match err(&rx) {
        Error::AnswerAppliedToOtherDialog { named, received } => {
            assert_eq!((named.as_str(), received.id.as_str()), ("d-1", "d-2"));
        }
        e => panic!("{e:?}"),
    }
    let c2 = sim.closed("d-2");
    assert_eq!((c2.closed_by, c2.accepted), (ClosedBy::Agent, Some(true)));
    assert!(sim.snap().pending_dialogs.is_empty());
}

/// An answer registered after its dialog already closed: refused by the browser, the caller
/// learns who closed it.
#[test]
fn an_answer_to_a_dialog_already_closed_remotely_says_so() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "alert", "Hi");
    let d = sim.pending("d-1");
    sim.close_dialog(S1, Some(PAGE), true, "");
    let (id, rx) = sim.send(answer_command(&d, true, None, ClosedBy::Agent));
    sim.error(id, "No dialog is showing");
    match err(&rx) {
        Error::DialogAlreadyClosed { id, closed_by, .. } => {
            assert_eq!(
                (id.as_str(), closed_by.to_string()),
                ("d-1", "remote".into())
            );
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(sim.snap().recent_dialogs.len(), 1);
}

/// Same, with another dialog showing on the session by the time the answer is written: the
/// browser applies it to that one.
#[test]
fn a_late_answer_is_attached_to_the_dialog_its_session_shows() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "confirm", "First?");
    let first = sim.pending("d-1");
    sim.close_dialog(S1, Some(PAGE), false, "");
    sim.open_dialog(S1, PAGE, "confirm", "Second?");
    let (id, rx) = sim.send(answer_command(&first, true, None, ClosedBy::Agent));
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.reply(id, json!({}));
    assert!(matches!(err(&rx), Error::AnswerAppliedToOtherDialog { .. }));
    assert_eq!(sim.closed("d-1").closed_by, ClosedBy::Remote);
    assert_eq!(sim.closed("d-2").closed_by, ClosedBy::Agent);
}

/// The watchdog's dismissal (the supervisor registers it as a `DialogAnswer` by the watchdog
/// when the deadline the core asked for passes).
#[test]
fn the_watchdog_dismisses_at_opened_plus_dialog_timeout() {
    let mut sim = Sim::attached(CoreSettings {
        dialog_timeout: Duration::from_secs(7),
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.advance(3000);
    let opened = sim.now;
    sim.open_dialog(S1, PAGE, "confirm", "Sure?");
    let out = sim.step();
    let (_, deadline) = &out.armed[0];
    assert_eq!(*deadline, opened.instant + Duration::from_secs(7));
    assert_eq!(
        deadline.duration_since(opened.instant),
        Duration::from_secs(7)
    );

    sim.advance(7000);
    assert_eq!(sim.now.instant, *deadline);
    let (id, _) = sim.answer("d-1", false, None, ClosedBy::Watchdog);
    sim.close_dialog(S1, Some(PAGE), false, "");
    sim.reply(id, json!({}));
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Watchdog, Some(false)));
    assert!((c.closed_at - c.dialog.opened_at - 7.0).abs() < 1e-3);
    assert_eq!(c.to_json()["closed_by"], "watchdog");
}

/// The agent's answer and the watchdog's both in flight: the first acknowledgement closes it,
/// the second is refused and learns who did.
#[test]
fn agent_answer_and_watchdog_race_the_first_ack_wins() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "confirm", "Sure?");
    let (agent, agent_rx) = sim.answer("d-1", true, None, ClosedBy::Agent);
    let (dog, dog_rx) = sim.answer("d-1", false, None, ClosedBy::Watchdog);
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.reply(agent, json!({}));
    ok(&agent_rx);
    sim.error(dog, "No dialog is showing");
    match err(&dog_rx) {
        Error::DialogAlreadyClosed { closed_by, .. } => {
            assert_eq!(closed_by.to_string(), "agent");
        }
        e => panic!("{e:?}"),
    }
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Agent, Some(true)));
}

/// The watchdog's dismissal is refused because something else closed the dialog meanwhile:
/// `remote`, never `watchdog`.
#[test]
fn a_refused_watchdog_dismissal_leaves_the_dialog_remote() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "confirm", "Sure?");
    sim.advance(300_000);
    let (dog, dog_rx) = sim.answer("d-1", false, None, ClosedBy::Watchdog);
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.error(dog, "No dialog is showing");
    assert!(matches!(err(&dog_rx), Error::DialogAlreadyClosed { .. }));
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Remote, Some(true)));
}

/// A navigation closes the dialog while the agent's answer is on its way (Closed, then the new
/// document, then the refusal): `remote`, and the caller learns it.
#[test]
fn a_navigation_that_closes_the_dialog_before_the_answer_is_remote() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "beforeunload", "Leave?");
    let (id, rx) = sim.answer("d-1", false, None, ClosedBy::Agent);
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.frame_navigated(S1, PAGE, None, "http://b.test/");
    sim.error(id, "No dialog is showing");
    match err(&rx) {
        Error::DialogAlreadyClosed { closed_by, .. } => {
            assert_eq!(closed_by.to_string(), "remote");
        }
        e => panic!("{e:?}"),
    }
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Remote, Some(true)));
}

/// A bridge dialog dies with its document: a new document in its frame (or the frame's detach)
/// closes it `remote`; a `swap` detach (the frame moving process) does not.
#[test]
fn a_new_document_closes_the_bridge_dialogs_of_its_frame() {
    let mut sim = Sim::attached(settings(DialogPolicy::MustRespond, BridgeMode::On));
    sim.frame_attached(S1, "F1", PAGE);
    sim.frame_navigated(S1, "F1", Some(PAGE), "http://a.test/f1");
    sim.bridge_dialog(S1, PAGE, "R1", "Main?");
    sim.bridge_dialog(S1, "F1", "R2", "Frame?");
    assert_eq!(sim.snap().pending_dialogs.len(), 2);
    assert_eq!(sim.pending("d-1").bridge_request_id.as_deref(), Some("R1"));

    sim.event(
        Some(S1),
        "Page.frameDetached",
        json!({"frameId": "F1", "reason": "swap"}),
    );
    assert_eq!(
        sim.snap().pending_dialogs.len(),
        2,
        "a swap keeps the document"
    );

    sim.frame_navigated(S1, "F1", Some(PAGE), "http://a.test/f1-reloaded");
    assert_eq!(sim.closed("d-2").closed_by, ClosedBy::Remote);
    assert_eq!(sim.pending("d-1").message, "Main?");

    sim.frame_navigated(S1, PAGE, None, "http://a.test/next");
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Remote, None));
    assert!(sim.snap().pending_dialogs.is_empty());
}

/// A native answer refused with "No dialog is showing" and no Closed event: the dialog still
/// blocks its frame but cannot be answered (SPEC §11) until a reload ends it.
#[test]
fn an_unanswerable_dialog_blocks_until_a_reload_ends_it() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "alert", "Stuck");
    let (id, rx) = sim.answer("d-1", true, None, ClosedBy::Agent);
    sim.error(id, "No dialog is showing");
    assert!(matches!(err(&rx), Error::DialogUnanswerable { .. }));
    let out = sim.step();
    assert_eq!(out.cancelled, vec!["d-1".to_string()]);
    let snap = sim.snap();
    assert!(snap.pending_dialogs.is_empty());
    assert!(snap.recent_dialogs.is_empty());
    let b = snap.blocked.clone().expect("blocked");
    assert_eq!(b.reason, BlockedReason::UnanswerableDialog);
    assert_eq!(b.frame_id.as_deref(), Some(PAGE));

    sim.frame_navigated(S1, PAGE, None, "http://a.test/");
    let snap = sim.snap();
    assert_eq!(snap.blocked, None);
    assert_eq!(sim.closed("d-1").closed_by, ClosedBy::Remote);
}

#[test]
fn auto_dismiss_answers_at_once_and_records_auto_policy() {
    let mut sim = Sim::attached(settings(DialogPolicy::AutoDismiss, BridgeMode::Off));
    sim.open_dialog(S1, PAGE, "confirm", "Sure?");
    let out = sim.step();
    assert!(out.armed.is_empty(), "no watchdog for an auto policy");
    let (id, c) = out.only("Page.handleJavaScriptDialog");
    assert_eq!(c.params, json!({"accept": false}));
    assert_eq!(c.session_id.as_deref(), Some(S1));
    assert!(matches!(
        c.kind,
        CallKind::DialogAnswer {
            by: ClosedBy::AutoPolicy,
            ..
        }
    ));
    sim.close_dialog(S1, Some(PAGE), false, "");
    sim.reply(id, json!({}));
    let c = sim.closed("d-1");
    assert_eq!(
        (c.closed_by, c.accepted),
        (ClosedBy::AutoPolicy, Some(false))
    );
    assert_eq!(c.to_json()["closed_by"], "auto_policy");
}

#[test]
fn auto_accept_gives_a_prompt_its_default_text() {
    let mut sim = Sim::attached(settings(DialogPolicy::AutoAccept, BridgeMode::Off));
    sim.open_dialog(S1, PAGE, "prompt", "Name?");
    let out = sim.step();
    let (id, c) = out.only("Page.handleJavaScriptDialog");
    assert_eq!(c.params, json!({"accept": true, "promptText": "bob"}));
    sim.close_dialog(S1, Some(PAGE), true, "bob");
    sim.reply(id, json!({}));
    let c = sim.closed("d-1");
    assert_eq!(
        (c.closed_by, c.accepted, c.user_input.as_deref()),
        (ClosedBy::AutoPolicy, Some(true), Some("bob"))
    );

    sim.open_dialog(S1, PAGE, "confirm", "Sure?");
    let out = sim.step();
    assert_eq!(
        out.only("Page.handleJavaScriptDialog").1.params,
        json!({"accept": true})
    );
}

/// An auto-policy answer overtaken by another client's close: `remote`.
#[test]
fn an_auto_answer_refused_after_a_remote_close_is_remote() {
    let mut sim = Sim::attached(settings(DialogPolicy::AutoDismiss, BridgeMode::Off));
    sim.open_dialog(S1, PAGE, "alert", "Hi");
    let out = sim.step();
    let (id, _) = out.only("Page.handleJavaScriptDialog");
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.error(id, "No dialog is showing");
    let c = sim.closed("d-1");
    assert_eq!((c.closed_by, c.accepted), (ClosedBy::Remote, Some(true)));
}

/// A native dialog past `limits.pending_dialogs_max` is dismissed at once, never pending.
#[test]
fn a_native_dialog_past_the_cap_is_dismissed_unseen() {
    let mut sim = Sim::attached(CoreSettings {
        limits: Limits {
            pending_dialogs_max: 1,
            ..Limits::default()
        },
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.open_dialog(S1, PAGE, "alert", "One");
    sim.step();
    sim.open_dialog("S2", "OTHER", "alert", "Two");
    let out = sim.step();
    let (id, c) = out.only("Page.handleJavaScriptDialog");
    assert_eq!(c.params, json!({"accept": false}));
    let snap = sim.snap();
    assert_eq!(snap.pending_dialogs.len(), 1);
    assert_eq!(snap.pending_dialogs[0].id, "d-1");
    sim.close_dialog("S2", Some("OTHER"), false, "");
    sim.reply(id, json!({}));
    assert_eq!(sim.closed("d-2").closed_by, ClosedBy::AutoPolicy);
}
