//! Invisible supervision (issue 32): what set-up sends, main worlds found through the DOM, own contexts.

use super::*;

// --- invisible supervision

/// SPEC §19: by default no session is sent `Runtime.enable` (the page's, an OOPIF's, a
/// popup's, a worker's); with `capture_console` every one of them is, the page's once per
/// session the moment it is learnt.
#[test]
fn runtime_is_enabled_only_when_the_console_is_captured() {
    for capture in [false, true] {
        let mut sim = Sim::new(CoreSettings {
            capture_console: capture,
            follow_popups: true,
            ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
        });
        let attach = sim.register(
            "Target.attachToTarget",
            None,
            CallKind::AttachPage {
                target_id: PAGE.into(),
            },
        );
        sim.reply(attach, json!({"sessionId": S1}));
        let mut sent = sim.step().methods_owned();
        sent.extend(sim.oopif(S1, "C1", "F1", PAGE).methods_owned());
        sim.event(
            Some(S1),
            "Target.attachedToTarget",
            json!({"sessionId": "W1", "waitingForDebugger": true,
                   "targetInfo": {"targetId": "T-W1", "type": "worker", "url": ""}}),
        );
        sent.extend(sim.step().methods_owned());
        sim.event(
            None,
            "Target.attachedToTarget",
            json!({"sessionId": "P2", "waitingForDebugger": true,
                   "targetInfo": {"targetId": "POPUP", "type": "page", "url": "about:blank",
                                  "openerId": PAGE, "canAccessOpener": true}}),
        );
        sent.extend(sim.step().methods_owned());
        let enabled: Vec<&str> = sent
            .iter()
            .filter(|(m, _)| m == "Runtime.enable")
            .map(|(_, s)| s.as_str())
            .collect();
        if capture {
            assert_eq!(enabled, [S1, "C1", "W1", "P2"], "{sent:?}");
        } else {
            assert!(enabled.is_empty(), "{sent:?}");
        }
        assert!(
            sent.iter()
                .any(|(m, s)| m == "Runtime.runIfWaitingForDebugger" && s == "W1"),
            "the worker is resumed either way: {sent:?}"
        );
    }
}

/// A same-process frame's main world found through the DOM (`supervisor/main_world.rs`): the
/// checked call's success records it for the document the frame showed then; a new document
/// forgets it, and an answer about an older document, or a failed check, is not recorded.
#[test]
fn a_main_world_found_through_the_dom_is_kept_for_its_document() {
    let mut sim = Sim::must_respond();
    sim.frame_attached(S1, "SAME", PAGE);
    sim.frame_navigated(S1, "SAME", Some(PAGE), "http://a.test/inner");
    let record = |sim: &mut Sim| sim.snap().frames.get("SAME").cloned().expect("SAME known");
    let first = record(&mut sim);
    assert_eq!(first.default_context, None);
    let check = |sim: &mut Sim, document: u64, context: i64| {
        sim.send(
            Command::new("Runtime.callFunctionOn", json!({}))
                .on(S1)
                .kind(CallKind::Agent {
                    known_dialogs: vec![],
                    main_world: Some(MainWorld {
                        frame_id: "SAME".into(),
                        document,
                        context,
                    }),
                }),
        )
    };
    // A failed check records nothing.
    let (id, rx) = check(&mut sim, first.document, 7);
    sim.error(
        id,
        "Argument should belong to the same JavaScript world as target object",
    );
    assert!(rx.try_recv().expect("answered").is_err());
    assert_eq!(record(&mut sim).default_context, None);
    // A successful one does, and the caller gets its reply.
    let (id, rx) = check(&mut sim, first.document, 7);
    sim.reply(id, json!({"result": {"type": "undefined"}}));
    assert!(rx.try_recv().expect("answered").is_ok());
    assert_eq!(record(&mut sim).default_context, Some(7));
    // The frame navigates: a new document, no context; a late answer about the old one is
    // not taken for it.
    let (late, _rx) = check(&mut sim, first.document, 7);
    sim.frame_navigated(S1, "SAME", Some(PAGE), "http://a.test/next");
    let second = record(&mut sim);
    assert_ne!(second.document, first.document);
    assert_eq!(second.default_context, None);
    sim.reply(late, json!({"result": {"type": "undefined"}}));
    assert_eq!(record(&mut sim).default_context, None);
    // The same check from another session (not the frame's owner) is not taken either.
    let (id, _rx) = sim.send(
        Command::new("Runtime.callFunctionOn", json!({}))
            .on("OTHER")
            .kind(CallKind::Agent {
                known_dialogs: vec![],
                main_world: Some(MainWorld {
                    frame_id: "SAME".into(),
                    document: second.document,
                    context: 8,
                }),
            }),
    );
    sim.reply(id, json!({}));
    assert_eq!(record(&mut sim).default_context, None);
    let (id, _rx) = check(&mut sim, second.document, 9);
    sim.reply(id, json!({}));
    assert_eq!(record(&mut sim).default_context, Some(9));
    // A crash forgets it too.
    sim.event(Some(S1), "Inspector.targetCrashed", json!({}));
    assert_eq!(record(&mut sim).default_context, None);
}

/// With the Runtime domain on (`capture_console`), its events keep contexts: a navigation does
/// not forget one its events announced before the navigation event came (Chromium announces a
/// new document's context before `Page.frameNavigated`).
#[test]
fn with_the_runtime_domain_on_its_events_keep_contexts() {
    let mut sim = Sim::attached(CoreSettings {
        capture_console: true,
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.frame_attached(S1, "SAME", PAGE);
    sim.event(
        Some(S1),
        "Runtime.executionContextCreated",
        json!({"context": {"id": 5, "auxData": {"isDefault": true, "frameId": "SAME"}}}),
    );
    sim.frame_navigated(S1, "SAME", Some(PAGE), "http://a.test/inner");
    assert_eq!(sim.snap().frames["SAME"].default_context, Some(5));
    sim.event(
        Some(S1),
        "Runtime.executionContextDestroyed",
        json!({"executionContextId": 5}),
    );
    assert_eq!(sim.snap().frames["SAME"].default_context, None);
}

/// Issue 28: what a task creates through raw calls is its own (`security.isolate_tasks`): the
/// page and browser-context ids the browser answered are in the snapshot by the time the reply
/// is handed over (the reader publishes before it delivers). Failed calls and other methods
/// record nothing, and the record keeps the newest `CREATED_MAX` of each kind.
#[test]
fn pages_and_contexts_the_task_creates_are_its_own_when_their_reply_arrives() {
    let mut sim = Sim::must_respond();
    let (id, page) = sim.send(Command::new(
        "Target.createTarget",
        json!({"url": "about:blank"}),
    ));
    sim.reply(id, json!({"targetId": "NEW"}));
    assert_eq!(ok(&page)["targetId"], "NEW");
    let (id, context) = sim.send(Command::new("Target.createBrowserContext", json!({})));
    sim.reply(id, json!({"browserContextId": "CTX"}));
    ok(&context);
    let (id, failed) = sim.send(Command::new("Target.createTarget", json!({})));
    sim.error(id, "Failed to open a new tab");
    err(&failed);
    let (id, other) = sim.send(Command::new("Target.getTargetInfo", json!({})));
    sim.reply(id, json!({"targetId": "NOT-CREATED"}));
    ok(&other);
    let snap = sim.snap();
    assert_eq!(&*snap.created_targets, ["NEW".to_string()]);
    assert_eq!(&*snap.created_contexts, ["CTX".to_string()]);
    for i in 0..super::created::CREATED_MAX {
        let (id, _) = sim.send(Command::new("Target.createTarget", json!({})));
        sim.reply(id, json!({"targetId": format!("T{i}")}));
    }
    let snap = sim.snap();
    assert_eq!(snap.created_targets.len(), super::created::CREATED_MAX);
    assert_eq!(snap.created_targets[0], "T0", "the oldest went");
    assert_eq!(&*snap.created_contexts, ["CTX".to_string()]);
}

/// Issue 28 item 9 (SPEC §8 "No silent wedge"): past both caps a popup is let go, the
/// snapshot says so (calls into the task's renderer then probe it when they stall), and each
/// popup let go tells the watchdog to probe it (no popup followed or watched does). Once the
/// probe has proved a dialog there (its `Performance.getMetrics` unanswered, its verdict a
/// `ProbeBlocked`), `blocked` says `dialog_in_unfollowed_page` with the page to close; calls in
/// flight into that renderer fail at once (not those Chromium answers with a dialog open, nor
/// those into another renderer), later ones are refused before they are sent, and the task may
/// close that page. The renderer answering again clears it all.
#[test]
fn a_dialog_in_a_popup_let_go_past_both_caps_is_reported_and_fails_calls_into_its_renderer() {
    use crate::security::isolation::Reach as _;
    let mut sim = Sim::attached(CoreSettings {
        follow_popups: true,
        limits: Limits {
            pages_max: 1,
            watched_pages_max: 1,
            ..Limits::default()
        },
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.isolate(S1, "I-A");
    let followed = sim.popup("P2", "FOLLOWED", PAGE, true, "http://a.test/1");
    sim.isolate("P2", "I-A");
    let watched = sim.popup("P3", "WATCHED", PAGE, false, "http://b.other/2");
    sim.isolate("P3", "I-B");
    assert!(!sim.snap().popups_let_go);
    assert_eq!(
        (followed.watch_renderer, watched.watch_renderer),
        (0, 0),
        "no renderer probe while every popup is followed or watched"
    );
    let out = sim.popup("P4", "LET-GO", PAGE, true, "about:blank");
    assert_eq!(
        out.watch_renderer, 1,
        "letting a popup go starts the watchdog's renderer probe"
    );
    let again = sim.popup("P5", "LET-GO-2", PAGE, true, "about:blank");
    assert_eq!(
        again.watch_renderer, 1,
        "so does every later one (the probe stops when none is left)"
    );
    assert_eq!(
        out.methods(),
        [
            ("Runtime.runIfWaitingForDebugger", Some("P4")),
            ("Target.detachFromTarget", None)
        ]
    );
    assert!(sim.snap().popups_let_go);
    let eval = sim.agent("Runtime.evaluate", S1, &[]);
    let in_popup = sim.agent("DOM.getDocument", "P2", &[]);
    let navigate = sim.agent("Page.navigate", S1, &[]);
    let elsewhere = sim.agent("Runtime.evaluate", "P3", &[]);
    // The probe: its renderer call stays unanswered, then its verdict.
    let alive = sim.register(
        "Performance.getMetrics",
        Some(S1),
        CallKind::Responds {
            session_id: S1.into(),
        },
    );
    let blocked = Blocked {
        reason: BlockedReason::DialogInUnfollowedPage,
        hint: policy::UNFOLLOWED_HINT.into(),
        frame_id: None,
        target_ids: vec!["LET-GO".into()],
    };
    let verdict = sim.register(
        "Browser.getVersion",
        None,
        CallKind::ProbeBlocked {
            session_id: S1.into(),
            blocked: blocked.clone(),
        },
    );
    sim.reply(verdict, json!({}));
    let snap = sim.snap();
    assert_eq!(snap.blocked.as_ref(), Some(&blocked));
    let shown = &snap.to_json()["blocked"];
    assert_eq!(shown["reason"], "dialog_in_unfollowed_page");
    assert_eq!(shown["target_id"], "LET-GO");
    assert_eq!(shown["target_ids"], json!(["LET-GO"]));
    let frozen = |e: Error| matches!(e, Error::DialogInUnfollowedPage { ref target_ids } if target_ids == &["LET-GO"]);
    assert!(frozen(err(&eval)), "the call in flight fails at once");
    assert!(
        frozen(err(&in_popup)),
        "so does one into the popup of that renderer"
    );
    nothing_yet(&navigate);
    nothing_yet(&elsewhere);
    for (sid, method) in [(S1, "Runtime.evaluate"), ("P2", "Input.dispatchMouseEvent")] {
        let refused = policy::admit(&snap, true, sid, method).map(|_| ());
        assert!(frozen(refused.expect_err(method)), "{sid} {method}");
    }
    assert!(policy::admit(&snap, true, S1, "Page.navigate").is_ok());
    assert!(policy::admit(&snap, true, "P3", "Runtime.evaluate").is_ok());
    assert!(snap.owns_target("LET-GO"), "the task may close it");
    // The page was closed: the renderer answers again.
    sim.reply(alive, json!({"id": "I-A"}));
    let snap = sim.snap();
    assert_eq!(snap.blocked, None);
    assert!(policy::admit(&snap, true, S1, "Runtime.evaluate").is_ok());
}
