//! Session set-up: what each kind of session is sent, followed popups, pages of someone else, workers.

use super::*;

// --- session set-up

/// What each kind of session is sent. By default nothing a page can observe (SPEC §19): no
/// `Runtime.enable` anywhere; console capture adds it right after `Page.enable` (alone on a
/// worker), the bridge its two commands last.
#[test]
fn session_setup_lists_per_kind() {
    let methods = |kind: SessionKind, bridge: bool, console: bool| -> Vec<String> {
        session_setup("S", kind, Extras { bridge, console })
            .iter()
            .map(|c| c.method.to_string())
            .collect()
    };
    let page = [
        "Page.enable",
        "Page.getFrameTree",
        "Target.setAutoAttach",
        "Runtime.getIsolateId",
        "Page.setInterceptFileChooserDialog",
    ];
    let bridge = ["Page.addScriptToEvaluateOnNewDocument", "Fetch.enable"];
    let with_console = |list: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = list.iter().map(|m| m.to_string()).collect();
        v.insert(1, "Runtime.enable".into());
        v
    };
    assert_eq!(methods(SessionKind::Page, false, false), page);
    assert_eq!(methods(SessionKind::Popup, false, false), page);
    assert_eq!(
        methods(SessionKind::Popup, true, false),
        [&page[..], &bridge[..]].concat()
    );
    assert_eq!(methods(SessionKind::Page, false, true), with_console(&page));
    assert_eq!(
        methods(SessionKind::Popup, true, true),
        [with_console(&page), bridge.map(String::from).to_vec()].concat()
    );
    let iframe = [
        "Page.enable",
        "Target.setAutoAttach",
        "Page.getFrameTree",
        "Runtime.getIsolateId",
        "Page.setInterceptFileChooserDialog",
    ];
    assert_eq!(methods(SessionKind::Iframe, false, false), iframe);
    assert_eq!(
        methods(SessionKind::Iframe, true, false),
        [&iframe[..], &bridge[..]].concat()
    );
    assert_eq!(
        methods(SessionKind::Iframe, false, true),
        with_console(&iframe)
    );
    assert!(
        methods(SessionKind::Worker, true, false).is_empty(),
        "a worker is only tracked and resumed"
    );
    assert_eq!(methods(SessionKind::Worker, true, true), ["Runtime.enable"]);
    for console in [false, true] {
        assert_eq!(
            methods(SessionKind::Watched, true, console),
            ["Page.enable", "Runtime.getIsolateId"],
            "a watched page: its dialogs and its renderer, nothing else"
        );
    }
    for kind in [
        SessionKind::Page,
        SessionKind::Popup,
        SessionKind::Iframe,
        SessionKind::Worker,
        SessionKind::Watched,
    ] {
        let sent = methods(kind, false, false);
        assert!(
            !sent.iter().any(|m| m == "Runtime.enable"
                || m == "Page.addScriptToEvaluateOnNewDocument"
                || m == "Runtime.addBinding"),
            "{kind:?}: the default set-up sends nothing a page can see: {sent:?}"
        );
    }

    // What the attach sequence waits on for the page: exactly the first three.
    let kinds: Vec<CallKind> = session_setup("S", SessionKind::Page, Extras::default())
        .into_iter()
        .map(|c| c.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            CallKind::Responds {
                session_id: "S".into()
            },
            CallKind::SeedFrameTree {
                session_id: "S".into()
            },
            CallKind::Plain,
            CallKind::IsolateId {
                session_id: "S".into(),
                generation: 0
            },
            CallKind::Automatic,
        ]
    );
    for c in session_setup(
        "S",
        SessionKind::Iframe,
        Extras {
            bridge: true,
            console: true,
        },
    ) {
        assert_eq!(c.session_id.as_deref(), Some("S"));
        assert!(
            !matches!(c.kind, CallKind::Plain),
            "nobody waits on a child's set-up"
        );
    }
    let auto = &session_setup("S", SessionKind::Popup, Extras::default())[2];
    assert_eq!(auto.method, "Target.setAutoAttach");
    assert_eq!(
        auto.params,
        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true})
    );
}

/// A followed popup (issue 14) gets the page's set-up, then is resumed.
#[test]
fn a_followed_popup_is_set_up_as_a_page_then_resumed() {
    let mut sim = Sim::attached(CoreSettings {
        follow_popups: true,
        ..settings(DialogPolicy::MustRespond, BridgeMode::On)
    });
    sim.event(
        None,
        "Target.attachedToTarget",
        json!({"sessionId": "P2", "waitingForDebugger": true,
               "targetInfo": {"targetId": "POP", "type": "page", "url": "about:blank",
                              "openerId": PAGE}}),
    );
    let out = sim.step();
    assert_eq!(
        out.commands_only(),
        [
            session_setup("P2", SessionKind::Popup, bridge_only(true)),
            vec![session::resume("P2")],
            // Its title (`core/titles.rs`), browser-level.
            vec![Command {
                method: "Target.getTargetInfo".into(),
                params: json!({"targetId": "POP"}),
                session_id: None,
                kind: CallKind::PageTitle {
                    target_id: "POP".into()
                },
            }],
        ]
        .concat()
    );
    let snap = sim.snap();
    assert_eq!(snap.pages.len(), 2);
    assert_eq!(snap.pages[1].target_id, "POP");
    // A dialog there belongs to the popup.
    sim.open_dialog("P2", "POP", "alert", "Pop");
    assert_eq!(sim.pending("d-1").target_id, "POP");
    // It goes away: the dialog is `remote`, the page leaves the list.
    sim.event(
        None,
        "Target.detachedFromTarget",
        json!({"sessionId": "P2"}),
    );
    assert_eq!(sim.closed("d-1").closed_by, ClosedBy::Remote);
    assert_eq!(sim.snap().pages.len(), 1);
}

/// A page that is not the task's to follow is resumed and let go.
#[test]
fn a_page_of_someone_else_is_resumed_and_detached() {
    let mut sim = Sim::attached(CoreSettings {
        follow_popups: true,
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    sim.event(
        None,
        "Target.attachedToTarget",
        json!({"sessionId": "X", "waitingForDebugger": true,
               "targetInfo": {"targetId": "OTHER", "type": "page", "url": "about:blank"}}),
    );
    assert_eq!(
        sim.step().methods(),
        [
            ("Runtime.runIfWaitingForDebugger", Some("X")),
            ("Target.detachFromTarget", None)
        ]
    );
}

/// A worker is tracked with `Runtime.enable` only; a target of a type we do not track is only
/// resumed; an OOPIF past `limits.frames_max` sessions too.
#[test]
fn workers_and_untracked_targets_are_resumed() {
    let mut sim = Sim::attached(CoreSettings {
        limits: Limits {
            frames_max: 3,
            ..Limits::default()
        },
        ..settings(DialogPolicy::MustRespond, BridgeMode::On)
    });
    let attach = |sim: &mut Sim, sid: &str, kind: &str, waiting: bool| -> Vec<(String, String)> {
        sim.event(
            Some(S1),
            "Target.attachedToTarget",
            json!({"sessionId": sid, "waitingForDebugger": waiting,
                   "targetInfo": {"targetId": format!("T-{sid}"), "type": kind, "url": ""}}),
        );
        let out = sim.step();
        out.methods()
            .into_iter()
            .map(|(m, s)| (m.to_string(), s.unwrap_or_default().to_string()))
            .collect()
    };
    let pair = |m: &str, s: &str| (m.to_string(), s.to_string());
    let resume = |s| pair("Runtime.runIfWaitingForDebugger", s);
    // Without console capture, a worker is only tracked and resumed.
    assert_eq!(
        attach(&mut sim, "W1", "service_worker", true),
        [resume("W1")]
    );
    assert!(attach(&mut sim, "W2", "worker", false).is_empty());
    let mut capturing = Sim::attached(CoreSettings {
        capture_console: true,
        ..settings(DialogPolicy::MustRespond, BridgeMode::Off)
    });
    assert_eq!(
        attach(&mut capturing, "W3", "service_worker", true),
        [pair("Runtime.enable", "W3"), resume("W3")]
    );
    assert_eq!(
        attach(&mut capturing, "W4", "worker", false),
        [pair("Runtime.enable", "W4")]
    );
    assert_eq!(attach(&mut sim, "U1", "other", true), [resume("U1")]);
    assert!(attach(&mut sim, "U2", "other", false).is_empty());
    // Three sessions tracked (page, two workers): no room for the OOPIF, resumed all the same.
    assert_eq!(attach(&mut sim, "C9", "iframe", false), [resume("C9")]);
    assert!(!sim.snap().frames.contains_key("T-C9"));
}
