//! The call rules (`core/policy.rs`): which calls a dialog or a crash blocks, and why.

use super::*;

// --- the call rules (core/policy.rs)

/// Whether a call of `method` on `sid`, in flight when dialog `d-N` opens, fails at once.
fn fails_in_flight(sim: &mut Sim, sid: &str, method: &str, open: impl FnOnce(&mut Sim)) -> bool {
    let rx = sim.agent(method, sid, &[]);
    open(sim);
    match rx.try_recv() {
        Ok(Err(Error::BlockedByDialog { .. })) => true,
        Err(TryRecvError::Empty) => false,
        other => panic!("{method} on {sid}: {other:?}"),
    }
}

/// The call path (`policy::admit` on the published snapshot, for a call made while the dialog
/// is pending) and the state machine (for a call in flight when it opens) apply one rule: the
/// sessions a dialog blocks are the same for both, and which methods it holds up is the measured
/// table read two ways (refused unsent / failed in flight, sent, sent with a grace).
#[test]
fn the_call_path_and_the_core_agree_on_which_calls_a_dialog_blocks() {
    let methods = [
        ("Runtime.evaluate", WithDialog::Refuse, true),
        ("Page.navigate", WithDialog::Send, false),
        ("Input.dispatchMouseEvent", WithDialog::Refuse, true),
        ("Page.notMeasured", WithDialog::Grace, true),
    ];
    // S1 and the same-site popup share a renderer; the cross-site popup does not.
    for (sid, blocked) in [(S1, true), ("P2", true), ("P3", false)] {
        for (method, with_dialog, in_flight) in methods {
            let mut sim = Sim::with_popups();
            sim.isolate(S1, "I-A");
            sim.popup("P2", "SAME", PAGE, true, "http://sub.a.test/");
            sim.popup("P3", "CROSS", PAGE, true, "http://b.test/");
            sim.isolate("P2", "I-A");
            sim.isolate("P3", "I-B");
            assert_eq!(policy::with_dialog_pending(method), with_dialog, "{method}");
            let failed = fails_in_flight(&mut sim, sid, method, |sim| {
                sim.open_dialog(S1, PAGE, "confirm", "sure?");
            });
            assert_eq!(failed, blocked && in_flight, "in flight: {method} on {sid}");
            let snap = sim.snap();
            let admitted = policy::admit(&snap, true, sid, method);
            match (blocked, with_dialog) {
                (false, _) | (true, WithDialog::Send) => {
                    let a = admitted.unwrap_or_else(|e| panic!("{method} on {sid}: {e}"));
                    assert!(a.grace.is_none());
                    assert_eq!(a.known.len(), usize::from(blocked), "{method} on {sid}");
                }
                (true, WithDialog::Refuse) => assert!(
                    matches!(admitted, Err(Error::BlockedByDialog { ref dialog, .. }) if dialog.id == "d-1"),
                    "{method} on {sid}: {admitted:?}"
                ),
                (true, WithDialog::Grace) => {
                    let a = admitted.unwrap_or_else(|e| panic!("{method} on {sid}: {e}"));
                    assert_eq!(a.grace.map(|d| d.id.as_str()), Some("d-1"));
                }
            }
            // A policy that answers dialogs itself holds nothing up.
            assert!(policy::admit(&snap, false, sid, method).is_ok());
        }
    }
}

/// A `beforeunload` dialog holds up the navigation that raised it (its reply waits for the
/// answer), although `Page.navigate` answers under any other dialog.
#[test]
fn a_beforeunload_dialog_holds_up_the_navigation_in_flight() {
    for (kind, held) in [("beforeunload", true), ("alert", false)] {
        let mut sim = Sim::must_respond();
        let failed = fails_in_flight(&mut sim, S1, "Page.navigate", |sim| {
            sim.open_dialog(S1, PAGE, kind, "");
        });
        assert_eq!(failed, held, "{kind}");
    }
}

/// A method nobody measured is sent with a grace: if no reply came within `DIALOG_GRACE` while
/// the dialog is still pending, it fails naming the dialog; once the dialog is gone it waits on;
/// a dialog CDP can no longer answer fails it as unanswerable.
#[test]
fn a_call_sent_with_a_grace_fails_only_while_its_dialog_still_blocks() {
    let mut sim = Sim::must_respond();
    sim.open_dialog(S1, PAGE, "alert", "hi");
    let before = sim.snap();
    let admitted = policy::admit(&before, true, S1, "Page.notMeasured").unwrap();
    let dialog = admitted.grace.expect("sent with a grace").clone();
    sim.advance(policy::DIALOG_GRACE.as_millis() as u64);
    assert!(matches!(
        policy::after_grace(&sim.snap(), &dialog, "Page.notMeasured"),
        Some(Error::BlockedByDialog { .. })
    ));
    let (answer, rx) = sim.answer("d-1", true, None, ClosedBy::Agent);
    sim.error(answer, "No dialog is showing");
    assert!(matches!(err(&rx), Error::DialogUnanswerable { .. }));
    assert!(matches!(
        policy::after_grace(&sim.snap(), &dialog, "Page.notMeasured"),
        Some(Error::DialogUnanswerable { .. })
    ));
    sim.frame_navigated(S1, PAGE, None, "http://a.test/reloaded");
    assert!(policy::after_grace(&sim.snap(), &dialog, "Page.notMeasured").is_none());
}

/// The second look: a dialog published after the caller's first look and before its call was
/// registered is caught right after the write, unless the caller already knew it.
#[test]
fn a_dialog_published_after_the_first_look_is_caught_by_the_second() {
    let mut sim = Sim::must_respond();
    let first = sim.snap();
    let admitted = policy::admit(&first, true, S1, "Runtime.evaluate").unwrap();
    assert!(admitted.known.is_empty());
    sim.open_dialog(S1, PAGE, "alert", "raced");
    let second = sim.snap();
    assert!(matches!(
        policy::opened_since(&second, &admitted.known, S1, "Runtime.evaluate"),
        Some(Error::BlockedByDialog { ref dialog, .. }) if dialog.id == "d-1"
    ));
    let known: Vec<&PendingDialog> = second.pending_dialogs.iter().collect();
    assert!(policy::opened_since(&second, &known, S1, "Runtime.evaluate").is_none());
    assert!(policy::opened_since(&second, &[], S1, "Page.reload").is_none());
}

/// SPEC §10: a crashed renderer fails the calls waiting on it and refuses new ones at once,
/// except `Page.navigate` and `Page.reload`, which bring a new renderer; the snapshot says
/// `crashed` until a new document comes.
#[test]
fn a_crashed_renderer_refuses_every_call_but_the_two_that_recover_it() {
    let mut sim = Sim::must_respond();
    let waiting = sim.agent("Runtime.evaluate", S1, &[]);
    let navigating = sim.agent("Page.navigate", S1, &[]);
    sim.event(Some(S1), "Inspector.targetCrashed", json!({}));
    let crashed =
        |e: Error| matches!(e, Error::TargetCrashed { ref what, .. } if what == "the page");
    assert!(crashed(err(&waiting)));
    nothing_yet(&navigating);
    assert!(crashed(err(&sim.agent("DOM.getDocument", S1, &[]))));
    nothing_yet(&sim.agent("Page.reload", S1, &[]));
    assert!(sim.snap().crashed);
    for method in [
        "Runtime.evaluate",
        "Page.navigate",
        "Page.reload",
        "Input.insertText",
    ] {
        assert_eq!(
            policy::crash_refusal("the page", method).is_none(),
            policy::answered_when_crashed(method),
            "{method}"
        );
    }
    sim.frame_navigated(S1, PAGE, None, "http://a.test/again");
    assert!(!sim.snap().crashed);
    nothing_yet(&sim.agent("Runtime.evaluate", S1, &[]));
}

/// What `blocked` costs a caller: a dialog a probe proved orphaned refuses the calls on its
/// session that would hang (not `Page.reload`, which clears it, nor calls elsewhere); a page
/// that merely does not answer refuses nothing (it may answer again); `respond_to_dialog` gets
/// the error that names the cause.
#[test]
fn blocked_refuses_what_it_proves_and_names_its_cause() {
    for (reason, refuses) in [
        (BlockedReason::OrphanedDialog, true),
        (BlockedReason::Unresponsive, false),
    ] {
        let mut sim = Sim::must_respond();
        sim.oopif(S1, "C1", "FB", PAGE);
        sim.register(
            "Page.enable",
            Some(S1),
            CallKind::Responds {
                session_id: S1.into(),
            },
        );
        let hint = match reason {
            BlockedReason::OrphanedDialog => policy::ORPHAN_HINT,
            _ => policy::UNRESPONSIVE_HINT,
        };
        let blocked = Blocked {
            reason,
            hint: hint.into(),
            frame_id: None,
            target_ids: Vec::new(),
        };
        let probe = sim.register(
            "Browser.getVersion",
            None,
            CallKind::ProbeBlocked {
                session_id: S1.into(),
                blocked: blocked.clone(),
            },
        );
        sim.reply(probe, json!({}));
        let snap = sim.snap();
        assert_eq!(snap.blocked.as_ref(), Some(&blocked));
        let refused = policy::admit(&snap, true, S1, "Runtime.evaluate");
        assert_eq!(
            matches!(refused, Err(Error::OrphanedDialog)),
            refuses,
            "{reason}"
        );
        assert!(policy::admit(&snap, true, S1, "Page.reload").is_ok());
        assert!(policy::admit(&snap, true, "C1", "Runtime.evaluate").is_ok());
    }
    let error = |reason| {
        policy::blocked_error(&Blocked {
            reason,
            hint: String::new(),
            frame_id: Some("F".into()),
            target_ids: Vec::new(),
        })
    };
    assert!(matches!(
        error(BlockedReason::OrphanedDialog),
        Error::OrphanedDialog
    ));
    assert!(matches!(
        error(BlockedReason::Unresponsive),
        Error::PageUnresponsive
    ));
    assert!(matches!(
        error(BlockedReason::UnanswerableDialog),
        Error::DialogUnanswerable { ref id, frame_id: Some(ref f) } if id.is_empty() && f == "F"
    ));
}

/// A session's renderer is judged by the site of its own document until its isolate id is
/// known: the page session's site appears with the first frame tree (the attach's
/// `Page.getFrameTree`), and an iframe session's goes when its frame does.
#[test]
fn a_sessions_site_follows_its_own_documents_origin() {
    let mut sim = Sim::new(settings(DialogPolicy::MustRespond, BridgeMode::Off));
    let attach = sim.register(
        "Target.attachToTarget",
        None,
        CallKind::AttachPage {
            target_id: PAGE.into(),
        },
    );
    sim.reply(attach, json!({"sessionId": S1}));
    assert_eq!(sim.snap().renderers[S1].site, None, "no document yet");
    let seed = sim.register(
        "Page.getFrameTree",
        Some(S1),
        CallKind::SeedFrameTree {
            session_id: S1.into(),
        },
    );
    sim.reply(
        seed,
        json!({"frameTree": {"frame": {"id": PAGE, "url": "http://www.a.test/"}}}),
    );
    assert_eq!(sim.snap().renderers[S1].site.as_deref(), Some("a.test"));
    sim.oopif(S1, "C1", "FB", PAGE);
    assert_eq!(sim.snap().renderers["C1"].site.as_deref(), Some("fb.test"));
    // Its parent removes the frame before the browser detaches its session.
    sim.event(Some(S1), "Page.frameDetached", json!({"frameId": "FB"}));
    assert_eq!(sim.snap().renderers["C1"].site, None);
}
