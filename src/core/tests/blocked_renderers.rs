//! Dialogs block their renderer: which calls in flight fail, on which sessions, and popups past the caps.

use super::*;

// --- dialogs block their renderer

fn blocked_by(rx: &Receiver<CallResult>) -> String {
    match err(rx) {
        Error::BlockedByDialog { dialog, .. } => dialog.id,
        other => panic!("expected BlockedByDialog, got {other:?}"),
    }
}

/// Issue 24: a task whose popups a watcher hands over sends no browser-level auto-attach, and a
/// popup its own connection attached to (not paused on it: the watcher holds the pause) is
/// followed like one its own auto-attach handed it.
#[test]
fn a_popup_handed_over_by_the_watcher_is_followed_without_browser_level_auto_attach() {
    let mut sim = Sim::new(CoreSettings {
        follow_popups: true,
        browser_auto_attach: false,
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
    let out = sim.step();
    assert!(
        !out.methods().contains(&("Target.setAutoAttach", None)),
        "{:?}",
        out.methods()
    );
    sim.event(
        None,
        "Target.attachedToTarget",
        json!({"sessionId": "P2", "waitingForDebugger": false,
               "targetInfo": {"targetId": "POPUP", "type": "page", "url": "about:blank",
                              "openerId": PAGE, "canAccessOpener": true}}),
    );
    let out = sim.step();
    let methods = out.methods();
    for m in [
        "Page.enable",
        "Page.getFrameTree",
        "Runtime.runIfWaitingForDebugger",
    ] {
        assert!(methods.contains(&(m, Some("P2"))), "{m}: {methods:?}");
    }
    assert!(
        !methods.contains(&("Runtime.enable", Some("P2"))),
        "{methods:?}"
    );
    assert!(
        !methods.contains(&("Target.detachFromTarget", None)),
        "{methods:?}"
    );
    let snap = sim.snap();
    let pages: Vec<&str> = snap.pages.iter().map(|p| p.target_id.as_str()).collect();
    assert_eq!(pages, [PAGE, "POPUP"]);
}

/// A popup followed already that is handed over again on another session (re-attached after a
/// reconnect while the task's auto-attach hands it over too) keeps its one session: the second
/// is resumed if paused and let go.
#[test]
fn a_followed_popup_attached_again_keeps_one_session() {
    let mut sim = Sim::attached(CoreSettings {
        follow_popups: true,
        browser_auto_attach: false,
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    for (sid, waiting) in [("P2", false), ("P3", true)] {
        sim.event(
            None,
            "Target.attachedToTarget",
            json!({"sessionId": sid, "waitingForDebugger": waiting,
                   "targetInfo": {"targetId": "POPUP", "type": "page", "url": "about:blank",
                                  "openerId": PAGE, "canAccessOpener": true}}),
        );
    }
    let out = sim.step();
    let methods = out.methods();
    assert!(
        methods.contains(&("Page.enable", Some("P2"))),
        "{methods:?}"
    );
    assert!(
        !methods.contains(&("Page.enable", Some("P3"))),
        "{methods:?}"
    );
    assert!(
        methods.contains(&("Runtime.runIfWaitingForDebugger", Some("P3"))),
        "the second is resumed: {methods:?}"
    );
    assert!(
        methods.contains(&("Target.detachFromTarget", None)),
        "and let go: {methods:?}"
    );
    let snap = sim.snap();
    let pages: Vec<&str> = snap.pages.iter().map(|p| p.target_id.as_str()).collect();
    assert_eq!(pages, [PAGE, "POPUP"]);
    // The page followed (and it alone) is to be checked for an answer to its set-up.
    assert_eq!(out.checks, [("P2".to_string(), "POPUP".to_string())]);
}

/// A page the task follows is checked for an answer to its set-up (`supervisor/stall.rs`): the
/// check's verdict while its `Page.enable` hangs publishes `blocked` naming it, on its session,
/// and that answer clears it.
#[test]
fn a_followed_page_whose_page_enable_hangs_is_blocked_until_it_answers() {
    let mut sim = Sim::attached(CoreSettings {
        follow_popups: true,
        browser_auto_attach: false,
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    let out = sim.popup("P2", "POPUP", PAGE, true, "http://a.test/popup");
    assert_eq!(out.checks, [("P2".to_string(), "POPUP".to_string())]);
    // The check's verdict while its Page.enable hangs: blocked names it; the answer clears it.
    let blocked = Blocked {
        reason: BlockedReason::Unresponsive,
        hint: policy::UNANSWERED_PAGE_HINT.into(),
        frame_id: None,
        target_ids: vec!["POPUP".into()],
    };
    let probe = sim.register(
        "Browser.getVersion",
        None,
        CallKind::ProbeBlocked {
            session_id: "P2".into(),
            blocked: blocked.clone(),
        },
    );
    sim.reply(probe, json!({}));
    assert_eq!(sim.snap().blocked.as_ref(), Some(&blocked));
    assert_eq!(sim.snap().blocked_session.as_deref(), Some("P2"));
    let enable = out
        .commands
        .iter()
        .find(|(_, c)| c.method == "Page.enable" && c.session_id.as_deref() == Some("P2"))
        .map(|(id, _)| *id)
        .expect("the popup's Page.enable");
    sim.reply(enable, json!({}));
    assert_eq!(sim.snap().blocked, None, "its answer clears it");
}

/// A task whose popup watcher has gone follows its popups itself: each re-attach of its page
/// turns browser-level auto-attach on, in the step that makes it active again (the reader
/// writes a step's commands before it publishes), so no popup opened after the task is seen
/// active again can slip past.
#[test]
fn a_task_whose_watcher_has_gone_turns_auto_attach_on_when_it_re_attaches() {
    let mut sim = Sim::new(CoreSettings {
        follow_popups: true,
        browser_auto_attach: false,
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    let attach_page = |sim: &mut Sim, sid: &str| {
        let attach = sim.register(
            "Target.attachToTarget",
            None,
            CallKind::AttachPage {
                target_id: PAGE.into(),
            },
        );
        sim.reply(attach, json!({ "sessionId": sid }));
        sim.step()
    };
    let out = attach_page(&mut sim, S1);
    assert!(!out.methods().contains(&("Target.setAutoAttach", None)));
    sim.core.follow_popups_itself_from_now();
    sim.core.on_disconnect("gone", sim.now);
    sim.core.reconnecting(1, 3);
    sim.core.reset_for_reconnect();
    assert!(!sim.snap().is_active());
    let out = attach_page(&mut sim, "S2");
    assert!(
        out.methods().contains(&("Target.setAutoAttach", None)),
        "{:?}",
        out.methods()
    );
    assert_eq!(sim.snap().state, SupervisorState::Active);
}

/// What the call path decides from the published snapshot, for a call made now: the pending
/// dialogs that block a call of `method` on `sid` (`crate::core::policy`).
fn blocking_in_snapshot(snap: &Snapshot, sid: &str, method: &str) -> Vec<String> {
    snap.pending_dialogs
        .iter()
        .filter(|d| policy::within_dialogs_reach(snap, d, sid, method))
        .map(|d| d.id.clone())
        .collect()
}

/// Measured on Chromium 156: a same-site popup runs in its opener's renderer (same isolate), a
/// cross-site one and a `noopener` one in their own. A dialog fails the calls in flight on every
/// session of its renderer, at once, and no other.
#[test]
fn a_dialog_fails_the_calls_in_flight_on_every_session_of_its_renderer_and_no_other() {
    let mut sim = Sim::with_popups();
    sim.isolate(S1, "I-A");
    sim.popup("P2", "SAME", PAGE, true, "http://sub.a.test/");
    sim.popup("P3", "CROSS", PAGE, true, "http://b.test/");
    sim.popup("P4", "NOOPENER", PAGE, false, "http://a.test/");
    sim.isolate("P2", "I-A");
    sim.isolate("P3", "I-B");
    sim.isolate("P4", "I-N");
    let on_page = sim.agent("Runtime.evaluate", S1, &[]);
    let on_cross = sim.agent("Runtime.evaluate", "P3", &[]);
    let on_noopener = sim.agent("DOM.getDocument", "P4", &[]);
    let browser = sim.send(Command::new("Browser.getVersion", json!({}))).1;
    sim.open_dialog("P2", "SAME", "alert", "in the same-site popup");
    assert_eq!(
        blocked_by(&on_page),
        "d-1",
        "the opener shares the popup's renderer"
    );
    nothing_yet(&on_cross);
    nothing_yet(&on_noopener);
    nothing_yet(&browser);
    // Made now, with the dialog pending and unseen by the caller: refused at registration.
    let late = sim.agent("Runtime.evaluate", S1, &[]);
    assert_eq!(blocked_by(&late), "d-1");
    // The call path's view of the published snapshot says the same.
    let snap = sim.snap();
    assert_eq!(blocking_in_snapshot(&snap, S1, "Runtime.evaluate"), ["d-1"]);
    assert_eq!(
        blocking_in_snapshot(&snap, "P2", "Runtime.evaluate"),
        ["d-1"]
    );
    assert!(blocking_in_snapshot(&snap, "P3", "Runtime.evaluate").is_empty());
    assert!(blocking_in_snapshot(&snap, "P4", "Input.dispatchKeyEvent").is_empty());
    // The other way round: the opener's dialog blocks the same-site popup only.
    let on_popup = sim.agent("Runtime.evaluate", "P2", &[]);
    let on_cross = sim.agent("Runtime.evaluate", "P3", &["d-1"]);
    sim.open_dialog(S1, PAGE, "confirm", "in the opener");
    assert_eq!(blocked_by(&on_popup), "d-1", "d-1 comes first");
    nothing_yet(&on_cross);
}

/// A-B-A: an A frame inside a B iframe inside an A page is its own OOPIF session, in A's
/// renderer (measured). A dialog in the page blocks the grandchild, not the B iframe, and a
/// dialog in the grandchild (delivered on the page session with its frame id) blocks the page.
#[test]
fn an_a_frame_inside_a_b_iframe_shares_the_a_pages_renderer() {
    let mut sim = Sim::must_respond();
    sim.isolate(S1, "I-A");
    sim.oopif(S1, "C1", "FB", PAGE);
    sim.frame_navigated("C1", "FB", Some(PAGE), "http://b.test/");
    sim.oopif("C1", "C2", "FA", "FB");
    sim.frame_navigated("C2", "FA", Some("FB"), "http://a.test/grand");
    sim.step();
    sim.isolate("C1", "I-B");
    sim.isolate("C2", "I-A");
    let in_b = sim.agent("Runtime.evaluate", "C1", &[]);
    let in_grandchild = sim.agent("Runtime.evaluate", "C2", &[]);
    sim.open_dialog(S1, PAGE, "alert", "top");
    assert_eq!(blocked_by(&in_grandchild), "d-1");
    nothing_yet(&in_b);
    sim.close_dialog(S1, Some(PAGE), true, "");
    let on_page = sim.agent("Runtime.evaluate", S1, &[]);
    sim.open_dialog(S1, "FA", "confirm", "grandchild");
    assert_eq!(blocked_by(&on_page), "d-2");
    nothing_yet(&in_b);
    let snap = sim.snap();
    assert_eq!(blocking_in_snapshot(&snap, S1, "Runtime.evaluate"), ["d-2"]);
    assert!(blocking_in_snapshot(&snap, "C1", "Runtime.evaluate").is_empty());
}

/// Until a session's renderer is known (its isolate probe unanswered, e.g. after a new
/// document), the coarse rule stands in: same browsing-context group and same site. A reply
/// about an older document is ignored.
#[test]
fn without_isolate_ids_same_group_and_site_decide_and_stale_replies_are_ignored() {
    let mut sim = Sim::with_popups();
    sim.popup("P2", "SAME", PAGE, true, "http://sub.a.test/");
    sim.popup("P3", "CROSS", PAGE, true, "http://b.test/");
    sim.popup("P4", "NOOPENER", PAGE, false, "http://a.test/");
    let on_page = sim.agent("Runtime.evaluate", S1, &[]);
    let on_cross = sim.agent("Runtime.evaluate", "P3", &[]);
    let on_noopener = sim.agent("Runtime.evaluate", "P4", &[]);
    sim.open_dialog("P2", "SAME", "alert", "same site, same group");
    assert_eq!(blocked_by(&on_page), "d-1");
    nothing_yet(&on_cross);
    nothing_yet(&on_noopener);
    // The cross-site popup's probe is answered: another renderer, so still not blocked.
    sim.isolate("P3", "I-B");
    nothing_yet(&on_cross);
    sim.close_dialog("P2", Some("SAME"), true, "");
    // P3 navigates to A's site: its old isolate is forgotten, the coarse rule says A's renderer.
    sim.isolate(S1, "I-A");
    sim.frame_navigated("P3", "CROSS", None, "http://a.test/now");
    sim.step();
    // The probe sent when P3 was set up (for its initial document) answers only now: it is
    // about an older document and not taken for the new one.
    let stale = sim
        .core
        .calls
        .iter()
        .filter_map(|(id, c)| match &c.kind {
            CallKind::IsolateId {
                session_id,
                generation,
            } if session_id == "P3" => Some((*generation, *id)),
            _ => None,
        })
        .min()
        .expect("P3's first probe is still unanswered");
    assert_eq!(stale.0, 0);
    sim.reply(stale.1, json!({"id": "I-B"}));
    let snap = sim.snap();
    assert_eq!(snap.renderers["P3"].isolate, None);
    assert_eq!(snap.renderers["P3"].site.as_deref(), Some("a.test"));
    assert_eq!(snap.renderers[S1].group, PAGE);
    assert_eq!(snap.renderers["P4"].group, "NOOPENER");
    let on_p3 = sim.agent("Runtime.evaluate", "P3", &[]);
    sim.open_dialog(S1, PAGE, "alert", "opener");
    assert_eq!(blocked_by(&on_p3), "d-2");
    // Its current probe answers once the dialog is gone.
    sim.close_dialog(S1, Some(PAGE), true, "");
    sim.isolate("P3", "I-A");
    assert_eq!(sim.snap().renderers["P3"].isolate.as_deref(), Some("I-A"));
}

/// When a session's renderer becomes known while a dialog is open, calls in flight on it are
/// checked again (Chromium answers the probe and the dialog event in either order).
#[test]
fn a_renderer_learnt_while_a_dialog_is_open_fails_the_calls_it_blocks() {
    let mut sim = Sim::with_popups();
    sim.isolate(S1, "I-A");
    // A cross-site popup by its URL, so the coarse rule says "not the opener's renderer" ...
    sim.popup("P2", "POP", PAGE, true, "http://b.test/");
    let on_page = sim.agent("Runtime.evaluate", S1, &[]);
    sim.open_dialog("P2", "POP", "alert", "x");
    nothing_yet(&on_page);
    // ... but its probe says it is (a process reused for it: the isolate id decides).
    sim.isolate("P2", "I-A");
    assert_eq!(blocked_by(&on_page), "d-1");
}

/// A dialog that CDP can no longer answer (SPEC §11) still blocks its renderer: a call made
/// while it was pending (a method not measured, waiting out its grace) fails the moment it
/// becomes unanswerable, new calls into that renderer are refused, and `Page.reload` goes
/// through. Calls on other renderers carry on.
#[test]
fn calls_into_the_renderer_of_an_unanswerable_dialog_are_refused_up_front() {
    let mut sim = Sim::must_respond();
    sim.isolate(S1, "I-A");
    sim.oopif(S1, "C1", "FB", PAGE);
    sim.frame_navigated("C1", "FB", Some(PAGE), "http://b.test/");
    sim.oopif(S1, "C2", "FB2", PAGE);
    sim.frame_navigated("C2", "FB2", Some(PAGE), "http://sub.b.test/");
    sim.step();
    sim.isolate("C1", "I-B");
    sim.isolate("C2", "I-B");
    // Chromium: Opening(main), Opening(iframe), Closed(main); the iframe's confirm is left
    // unanswerable.
    sim.open_dialog(S1, PAGE, "alert", "main");
    sim.open_dialog(S1, "FB", "confirm", "iframe");
    sim.close_dialog(S1, Some(PAGE), true, "");
    let grace = sim.agent("Page.notMeasured", "C2", &["d-2"]);
    let reload = sim.agent("Page.reload", "C1", &["d-2"]);
    let elsewhere = sim.agent("Runtime.evaluate", S1, &[]);
    let (answer, rx) = sim.answer("d-2", true, None, ClosedBy::Agent);
    sim.error(answer, "No dialog is showing");
    assert!(matches!(err(&rx), Error::DialogUnanswerable { .. }));
    match err(&grace) {
        Error::DialogUnanswerable { id, frame_id } => {
            assert_eq!((id.as_str(), frame_id.as_deref()), ("d-2", Some("FB")));
        }
        other => panic!("expected DialogUnanswerable, got {other:?}"),
    }
    nothing_yet(&reload);
    nothing_yet(&elsewhere);
    let refused = sim.agent("DOM.getDocument", "C1", &[]);
    assert!(matches!(err(&refused), Error::DialogUnanswerable { .. }));
    let snap = sim.snap();
    assert!(snap.pending_dialogs.is_empty());
    assert_eq!(snap.unanswerable.len(), 1);
    let d = &snap.unanswerable[0];
    assert!(policy::within_dialogs_reach(
        &snap,
        d,
        "C2",
        "Runtime.evaluate"
    ));
    assert!(!policy::within_dialogs_reach(
        &snap,
        d,
        S1,
        "Runtime.evaluate"
    ));
}

/// SPEC §8 "No silent wedge": a popup past `limits.pages_max` is watched for its dialogs only,
/// up to `limits.watched_pages_max`; its dialog is pending with its target id, answerable on
/// its session, and fails the calls into the renderer it shares with the task's page.
#[test]
fn a_popup_past_pages_max_is_watched_for_dialogs_and_its_dialog_blocks_its_renderer() {
    let mut sim = Sim::attached(CoreSettings {
        follow_popups: true,
        limits: Limits {
            pages_max: 1,
            watched_pages_max: 2,
            ..Limits::default()
        },
        ..settings(DialogPolicy::MustRespond, BridgeMode::On)
    });
    sim.isolate(S1, "I-A");
    sim.popup("P2", "FOLLOWED", PAGE, true, "http://a.test/1");
    let out = sim.popup("P3", "WATCHED", PAGE, true, "http://a.test/2");
    assert_eq!(
        out.methods(),
        [
            ("Page.enable", Some("P3")),
            ("Runtime.getIsolateId", Some("P3")),
            ("Runtime.runIfWaitingForDebugger", Some("P3")),
            // Its first document: its renderer is asked again.
            ("Runtime.getIsolateId", Some("P3")),
        ],
        "a dialog-only watch: no frames, console, iframes or bridge"
    );
    // A popup of the watched page is the task's too, and watched.
    sim.popup("P4", "WATCHED2", "WATCHED", true, "http://a.test/3");
    let out = sim.popup("P5", "LET-GO", PAGE, true, "http://a.test/4");
    assert_eq!(
        out.methods(),
        [
            ("Runtime.runIfWaitingForDebugger", Some("P5")),
            ("Target.detachFromTarget", None)
        ]
    );
    let snap = sim.snap();
    assert_eq!(snap.pages.len(), 2);
    assert!(snap.pages_truncated);
    let watched: Vec<&str> = snap
        .watched_pages
        .iter()
        .map(|p| p.target_id.as_str())
        .collect();
    assert_eq!(watched, ["WATCHED", "WATCHED2"]);
    assert!(
        snap.frames.get("WATCHED").is_none(),
        "its frames are not tracked"
    );
    sim.isolate("P3", "I-A");
    let on_page = sim.agent("Input.dispatchMouseEvent", S1, &[]);
    sim.open_dialog("P3", "WATCHED", "alert", "on load");
    assert_eq!(
        blocked_by(&on_page),
        "d-1",
        "the task's page shares its renderer"
    );
    let d = sim.pending("d-1");
    assert_eq!(d.target_id, "WATCHED");
    let (id, rx) = sim.answer("d-1", true, None, ClosedBy::Agent);
    sim.close_dialog("P3", Some("WATCHED"), true, "");
    sim.reply(id, json!({}));
    ok(&rx);
    assert_eq!(sim.closed("d-1").closed_by, ClosedBy::Agent);
    // It closes with a dialog pending: remote, and it leaves the watch list.
    sim.open_dialog("P3", "WATCHED", "confirm", "again");
    sim.event(
        None,
        "Target.detachedFromTarget",
        json!({"sessionId": "P3"}),
    );
    assert_eq!(sim.closed("d-2").closed_by, ClosedBy::Remote);
    assert_eq!(sim.snap().watched_pages.len(), 1);
}

/// A watched popup whose renderer is not known yet (its probe waits behind its own on-load
/// dialog) is judged by its document's site: a cross-site one does not block the task's page,
/// a same-site one does.
#[test]
fn a_watched_popup_without_an_isolate_id_is_judged_by_its_site() {
    let mut sim = Sim::attached(CoreSettings {
        follow_popups: true,
        limits: Limits {
            pages_max: 0,
            ..Limits::default()
        },
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.isolate(S1, "I-A");
    sim.popup("P2", "CROSS", PAGE, true, "http://b.test/alert");
    sim.popup("P3", "SAME", PAGE, true, "http://sub.a.test/alert");
    let on_page = sim.agent("Runtime.evaluate", S1, &[]);
    sim.open_dialog("P2", "CROSS", "alert", "cross-site, on load");
    nothing_yet(&on_page);
    sim.open_dialog("P3", "SAME", "alert", "same-site, on load");
    assert_eq!(blocked_by(&on_page), "d-2");
    let snap = sim.snap();
    assert_eq!(snap.renderers["P2"].site.as_deref(), Some("b.test"));
    assert_eq!(snap.watched_pages.len(), 2);
}

/// What a watched popup shows (`watched_pages`) follows its document: its URL, and the site its
/// renderer is judged by.
#[test]
fn a_watched_popup_shows_its_new_document() {
    let mut sim = Sim::attached(CoreSettings {
        follow_popups: true,
        limits: Limits {
            pages_max: 0,
            ..Limits::default()
        },
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.popup("P2", "W", PAGE, true, "http://b.test/first");
    let before = sim.snap();
    assert_eq!(before.watched_pages[0].url, "http://b.test/first");
    assert_eq!(before.renderers["P2"].site.as_deref(), Some("b.test"));
    sim.frame_navigated("P2", "W", None, "http://a.test/second");
    let after = sim.snap();
    assert_eq!(after.watched_pages[0].url, "http://a.test/second");
    assert_eq!(after.renderers["P2"].site.as_deref(), Some("a.test"));
}

/// Publishing costs nothing when nothing visible changed: no new snapshot for a call
/// registered, an event nobody tracks, or a bridge turned on; one for each visible change.
#[test]
fn only_a_visible_change_publishes() {
    let mut sim = Sim::must_respond();
    sim.snap();
    assert!(sim.core.take_published().is_none(), "nothing since");
    sim.register("Runtime.evaluate", Some(S1), CallKind::Plain);
    sim.event(Some(S1), "Network.requestWillBeSent", json!({}));
    sim.event(
        Some("STRAY"),
        "Page.frameNavigated",
        json!({"frame": {"id": "X"}}),
    );
    sim.core.activate_bridge();
    sim.step();
    assert!(
        sim.core.take_published().is_none(),
        "nothing visible changed"
    );
    sim.event(
        Some(S1),
        "Runtime.consoleAPICalled",
        json!({"type": "error", "args": [{"type": "string", "value": "boom"}]}),
    );
    let s = sim
        .core
        .take_published()
        .expect("a console error is visible");
    assert_eq!(s.console_errors.len(), 1);
    assert!(sim.core.take_published().is_none(), "published once");
    sim.core.reconnecting(1, 3);
    assert!(sim.core.take_published().is_some(), "the state is visible");
    sim.core.reconnecting(1, 3);
    assert!(sim.core.take_published().is_none(), "the same state again");
}
