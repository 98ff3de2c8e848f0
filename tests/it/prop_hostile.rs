//! Generated hostile input, 225,000 cases in all: the state machine fed arbitrary CDP-shaped
//! messages (known events with wrong types, unknown events, replies to unknown ids, garbage);
//! frame-event sequences over a small id alphabet on an attached page, so that self-parents,
//! 2- and 3-cycles and re-parenting through `frameAttached`, `frameNavigated` and
//! `attachedToTarget` come up all the time, mixed with detaches, crashes and same-document
//! navigations; dialog interleavings (Opening/Closed orders across the page and an OOPIF
//! session, answers in flight, bridge floods through `Fetch.requestPaused`); and the JSON tool
//! handlers fed arbitrary arguments. Zero panics, zero hangs (each frame case runs under a step
//! budget that a looping walk would blow), every cap holds, the frame map stays a forest.

use std::time::Duration;

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::unversioned::{CallKind, Core, CoreSettings, Deadline, Now, PendingCall};
use cdp_supervisor::{BridgeMode, DialogPolicy, Limits};
use cdp_supervisor::{ClosedBy, Config, SupervisorRegistry, tools};
use proptest::prelude::*;
use serde_json::{Value, json};

const EVENTS: &[&str] = &[
    "Page.javascriptDialogOpening",
    "Page.javascriptDialogClosed",
    "Page.frameAttached",
    "Page.frameNavigated",
    "Page.frameDetached",
    "Runtime.executionContextCreated",
    "Runtime.executionContextDestroyed",
    "Runtime.executionContextsCleared",
    "Runtime.consoleAPICalled",
    "Runtime.exceptionThrown",
    "Target.attachedToTarget",
    "Target.detachedFromTarget",
    "Target.targetCrashed",
    "Inspector.targetCrashed",
    "Inspector.targetReloadedAfterCrash",
    "Page.navigatedWithinDocument",
    "Fetch.requestPaused",
    "Some.unknownEvent",
];

/// Arbitrary JSON, a few levels deep, biased toward the shapes CDP uses.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null)),
        "[a-zA-Z0-9 _.:/-]{0,12}".prop_map(Value::from),
        prop_oneof![
            Just("S1"),
            Just("F1"),
            Just("F2"),
            Just("T1"),
            Just("d-1"),
            Just("iframe"),
            Just("swap"),
            Just("error"),
            Just("prompt")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("frameId"),
                        Just("parentFrameId"),
                        Just("sessionId"),
                        Just("message"),
                        Just("type"),
                        Just("frame"),
                        Just("id"),
                        Just("parentId"),
                        Just("url"),
                        Just("targetInfo"),
                        Just("targetId"),
                        Just("context"),
                        Just("auxData"),
                        Just("isDefault"),
                        Just("args"),
                        Just("value"),
                        Just("reason"),
                        Just("defaultPrompt"),
                        Just("result"),
                        Just("exceptionDetails"),
                        Just("waitingForDebugger"),
                        Just("securityOrigin"),
                        Just("childFrames"),
                        Just("frameTree"),
                        Just("executionContextId"),
                        Just("requestId")
                    ]
                    .prop_map(str::to_string),
                    inner
                ),
                0..5
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// One incoming message: an event, a reply, or garbage text.
fn message() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (prop::sample::select(EVENTS), json_value(), prop::option::of(prop_oneof![Just("S1"), Just("S2"), Just("CHILD")]))
            .prop_map(|(m, p, s)| {
                let mut v = json!({"method": m, "params": p});
                if let Some(s) = s { v["sessionId"] = json!(s); }
                v.to_string()
            }),
        2 => (0u64..20, json_value(), any::<bool>()).prop_map(|(id, r, err)| {
            if err { json!({"id": id, "error": {"code": -32602, "message": "No dialog is showing"}}).to_string() }
            else { json!({"id": id, "result": r}).to_string() }
        }),
        1 => ".{0,40}",
        1 => json_value().prop_map(|v| v.to_string()),
    ]
}

fn settings(policy: DialogPolicy) -> CoreSettings {
    CoreSettings {
        policy,
        dialog_timeout: Duration::from_secs(300),
        bridge: BridgeMode::Auto,
        follow_popups: true,
        browser_auto_attach: true,
        capture_console: false,
        limits: Limits::default()
            .with_frame_tree_max_entries(5)
            .with_recent_dialogs_max(3)
            .with_console_errors_max(4)
            .with_frames_max(50),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 60_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn core_survives_any_message_sequence(
        policy in prop::sample::select(vec![DialogPolicy::MustRespond, DialogPolicy::AutoDismiss, DialogPolicy::AutoAccept]),
        msgs in prop::collection::vec(message(), 1..24),
        answers in prop::collection::vec((0u64..20, 1u64..4), 0..4),
    ) {
        let mut core = Core::new("t", "ws://x/", settings(policy));
        // A simulated clock, 30 ms per message: dialogs close both within and after the
        // bridge's 100 ms proxy signature.
        let mut now = Now::read();
        for (id, d) in answers {
            core.register(id, PendingCall {
                method: "Page.handleJavaScriptDialog".into(),
                session_id: Some("S1".into()),
                kind: CallKind::DialogAnswer { dialog_id: format!("d-{d}"), by: ClosedBy::Agent, accept: true, prompt_text: None },
                reply: None,
                expires: Deadline::NEVER,
            }, now);
        }
        for m in &msgs {
            now = now.after(Duration::from_millis(30));
            core.on_text(m, now);
            let _ = core.take_outgoing();
            if let Some(s) = core.take_published() {
                prop_assert!(s.recent_dialogs.len() <= 3);
                prop_assert!(s.console_errors.len() <= 4);
                prop_assert!(s.frame_tree.children.len() <= 5);
                prop_assert!(s.frames.len() <= 50);
                let mut ids: Vec<_> = s.pending_dialogs.iter().map(|d| d.id.clone()).collect();
                ids.sort();
                ids.dedup();
                prop_assert_eq!(ids.len(), s.pending_dialogs.len());
                let _ = s.to_json();
            }
            let _ = core.take_deliveries();
        }
        core.on_disconnect("end", now);
        // The reader says what comes next (reconnecting, or the end) before it publishes.
        core.reconnecting(1, 5);
        prop_assert!(!core.snapshot().is_active());
        prop_assert!(core.snapshot().pending_dialogs.is_empty());
    }
}

/// A core attached to page `MAIN` on session `S1`, with its main frame known.
fn attached_core(policy: DialogPolicy) -> Core {
    let mut core = Core::new("t", "ws://x/", settings(policy));
    let now = Now::read();
    core.register(
        1,
        PendingCall {
            method: "Target.attachToTarget".into(),
            session_id: None,
            kind: CallKind::AttachPage {
                target_id: "MAIN".into(),
            },
            reply: None,
            expires: Deadline::NEVER,
        },
        now,
    );
    core.on_text(r#"{"id":1,"result":{"sessionId":"S1"}}"#, now);
    core.on_text(
        r#"{"method":"Page.frameNavigated","sessionId":"S1","params":{"frame":{"id":"MAIN","url":"http://a.test/"}}}"#,
        now,
    );
    core
}

const FRAME_IDS: &[&str] = &["MAIN", "F1", "F2", "F3", "F4", "F5"];
const SESSIONS: &[&str] = &["S1", "C1", "C2"];

fn frame_id() -> impl Strategy<Value = &'static str> {
    prop::sample::select(FRAME_IDS)
}

fn session() -> impl Strategy<Value = &'static str> {
    prop::sample::select(SESSIONS)
}

/// One frame event: every way the wire can name a parent, over a tiny id alphabet, so that
/// self-parents and cycles are frequent.
fn frame_message() -> impl Strategy<Value = String> {
    let ev =
        |s: &str, m: &str, p: Value| json!({"method": m, "sessionId": s, "params": p}).to_string();
    prop_oneof![
        4 => (session(), frame_id(), frame_id()).prop_map(move |(s, f, p)| ev(s, "Page.frameAttached",
            json!({"frameId": f, "parentFrameId": p}))),
        3 => (session(), frame_id(), prop::option::of(frame_id())).prop_map(move |(s, f, p)| {
            let mut frame = json!({"id": f, "url": format!("http://{}.test/", f.to_lowercase())});
            if let Some(p) = p { frame["parentId"] = json!(p); }
            ev(s, "Page.frameNavigated", json!({"frame": frame}))
        }),
        3 => (session(), frame_id(), prop::bool::ANY).prop_map(move |(s, f, swap)| ev(s, "Page.frameDetached",
            json!({"frameId": f, "reason": if swap { "swap" } else { "remove" }}))),
        3 => (session(), prop::sample::select(&["C1", "C2"][..]), frame_id(), prop::option::of(frame_id()))
            .prop_map(move |(parent, child, f, p)| {
                let mut info = json!({"targetId": f, "type": "iframe", "url": "http://o.test/"});
                if let Some(p) = p { info["parentFrameId"] = json!(p); }
                ev(parent, "Target.attachedToTarget",
                   json!({"sessionId": child, "targetInfo": info, "waitingForDebugger": true}))
            }),
        // A page handed over by browser-level auto-attach (a popup when its opener is followed),
        // on a session id that the other arms also use for iframes.
        2 => (prop::sample::select(&["C1", "C2"][..]), frame_id(), prop::option::of(frame_id()), prop::bool::ANY)
            .prop_map(|(child, f, opener, by_frame)| {
                let mut info = json!({"targetId": f, "type": "page", "url": "about:blank"});
                if let Some(o) = opener {
                    info[if by_frame { "openerFrameId" } else { "openerId" }] = json!(o);
                }
                json!({"method": "Target.attachedToTarget", "params": {"sessionId": child,
                       "targetInfo": info, "waitingForDebugger": true}}).to_string()
            }),
        1 => (session(), frame_id()).prop_map(|(s, f)| json!({"method": "Target.detachedFromTarget",
            "params": {"sessionId": if s == "S1" { "C1" } else { s }, "targetId": f}}).to_string()),
        1 => (session(), frame_id()).prop_map(move |(s, f)| ev(s, "Page.navigatedWithinDocument",
            json!({"frameId": f, "url": format!("http://{}.test/#h", f.to_lowercase())}))),
        1 => (session(), prop::bool::ANY).prop_map(move |(s, back)| ev(s,
            if back { "Inspector.targetReloadedAfterCrash" } else { "Inspector.targetCrashed" }, json!({}))),
        1 => (session(), frame_id(), 1i64..4).prop_map(move |(s, f, id)| ev(s, "Runtime.executionContextCreated",
            json!({"context": {"id": id, "auxData": {"isDefault": true, "frameId": f}}}))),
    ]
}

/// Checks the frame invariants of a snapshot: caps, and no frame is its own ancestor.
fn frame_invariants(s: &cdp_supervisor::Snapshot) -> Result<(), TestCaseError> {
    prop_assert!(s.frames.len() <= 50);
    prop_assert!(s.frame_tree.children.len() <= 5);
    // Followed pages: the task's page first, then at most pages_max popups, each listed once.
    prop_assert!(s.pages.len() <= 1 + Limits::default().pages_max);
    prop_assert!(
        s.pages
            .first()
            .is_none_or(|p| p.target_id == "MAIN" && p.opener_target_id.is_none())
    );
    for (i, p) in s.pages.iter().enumerate() {
        prop_assert!(
            s.pages
                .iter()
                .skip(i + 1)
                .all(|q| q.target_id != p.target_id),
            "{} twice",
            p.target_id
        );
    }
    for id in s.frames.keys() {
        let mut cur = s.frames[id].parent_frame_id.as_deref();
        let mut steps = 0;
        while let Some(p) = cur {
            prop_assert!(p != id, "{} is its own ancestor", id);
            steps += 1;
            prop_assert!(
                steps <= s.frames.len(),
                "the parent chain of {} does not end",
                id
            );
            cur = s.frames.get(p).and_then(|r| r.parent_frame_id.as_deref());
        }
    }
    let mut seen = std::collections::HashSet::new();
    for c in &s.frame_tree.children {
        prop_assert!(
            seen.insert(c.frame_id.clone()),
            "{} twice in frame_tree",
            c.frame_id
        );
    }
    Ok(())
}

/// One dialog-side message: Openings and Closeds on the page and an OOPIF session, with and
/// without frame ids, replies to answers in flight, and bridge requests (floods included).
fn dialog_message() -> impl Strategy<Value = String> {
    let ev =
        |s: &str, m: &str, p: Value| json!({"method": m, "sessionId": s, "params": p}).to_string();
    prop_oneof![
        4 => (session(), prop::option::of(frame_id()), prop::sample::select(&["alert", "confirm", "prompt", "beforeunload"][..]))
            .prop_map(move |(s, f, k)| {
                let mut p = json!({"type": k, "message": "m", "url": "http://a.test/", "defaultPrompt": ""});
                if let Some(f) = f { p["frameId"] = json!(f); }
                ev(s, "Page.javascriptDialogOpening", p)
            }),
        4 => (session(), prop::option::of(frame_id()), prop::bool::ANY).prop_map(move |(s, f, r)| {
            let mut p = json!({"result": r, "userInput": ""});
            if let Some(f) = f { p["frameId"] = json!(f); }
            ev(s, "Page.javascriptDialogClosed", p)
        }),
        2 => (10u64..16, prop::bool::ANY).prop_map(|(id, ok)| if ok {
            json!({"id": id, "result": {}}).to_string()
        } else {
            json!({"id": id, "error": {"code": -32602, "message": "No dialog is showing"}}).to_string()
        }),
        2 => (session(), 0u32..40, prop::option::of(frame_id())).prop_map(move |(s, n, f)| {
            let mut p = json!({"requestId": format!("R{n}"),
                "request": {"url": format!("http://cdp-dialog-bridge.invalid/?kind=confirm&message=m{n}&default_prompt=")}});
            if let Some(f) = f { p["frameId"] = json!(f); }
            ev(s, "Fetch.requestPaused", p)
        }),
        1 => frame_message(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 80_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn frame_map_stays_a_forest_under_any_frame_event_sequence(
        msgs in prop::collection::vec(frame_message(), 1..16),
    ) {
        let mut core = attached_core(DialogPolicy::MustRespond);
        let now = Now::read();
        // A second child session, so OOPIF sessions can report their own frames.
        core.on_text(&json!({"method": "Target.attachedToTarget", "sessionId": "S1", "params": {
            "sessionId": "C1", "waitingForDebugger": false,
            "targetInfo": {"targetId": "F1", "type": "iframe", "url": "http://o.test/"}}}).to_string(), now);
        let started = std::time::Instant::now();
        for m in &msgs {
            core.on_text(m, now);
            let _ = core.take_outgoing();
            if let Some(s) = core.take_published() {
                frame_invariants(&s)?;
                let _ = s.to_json();
            }
            let _ = core.take_deliveries();
        }
        // A looping walk would take seconds (or forever); 16 events take microseconds.
        prop_assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn dialog_interleavings_and_bridge_floods_keep_the_books(
        policy in prop::sample::select(vec![DialogPolicy::MustRespond, DialogPolicy::AutoDismiss, DialogPolicy::AutoAccept]),
        msgs in prop::collection::vec(dialog_message(), 1..24),
        answers in prop::collection::vec((10u64..16, 1u64..6), 0..4),
    ) {
        let mut core = attached_core(policy);
        let mut now = Now::read();
        core.on_text(&json!({"method": "Target.attachedToTarget", "sessionId": "S1", "params": {
            "sessionId": "C1", "waitingForDebugger": false,
            "targetInfo": {"targetId": "F1", "type": "iframe", "url": "http://o.test/"}}}).to_string(), now);
        let limits = settings(policy).limits;
        for m in &msgs {
            now = now.after(Duration::from_millis(30));
            core.on_text(m, now);
            let _ = core.take_outgoing();
            for (id, d) in &answers {
                core.register(*id, PendingCall {
                    method: "Page.handleJavaScriptDialog".into(),
                    session_id: Some("S1".into()),
                    kind: CallKind::DialogAnswer { dialog_id: format!("d-{d}"), by: ClosedBy::Agent, accept: true, prompt_text: None },
                    reply: None,
                    expires: Deadline::NEVER,
                }, now);
            }
            if let Some(s) = core.take_published() {
                prop_assert!(s.recent_dialogs.len() <= limits.recent_dialogs_max);
                prop_assert!(s.pending_dialogs.len() <= limits.pending_dialogs_max);
                let mut ids: Vec<_> = s.pending_dialogs.iter().map(|d| d.id.clone()).collect();
                ids.sort();
                ids.dedup();
                prop_assert_eq!(ids.len(), s.pending_dialogs.len());
                // A dialog is either pending or recorded closed, never both.
                for d in s.pending_dialogs.iter() {
                    prop_assert!(s.closed_dialog(&d.id).is_none(), "{} pending and closed", d.id);
                }
                frame_invariants(&s)?;
                let _ = s.to_json();
            }
            let _ = core.take_deliveries();
        }
        core.on_disconnect("end", now);
        // The reader says what comes next (reconnecting, or the end) before it publishes.
        core.reconnecting(1, 5);
        prop_assert!(!core.snapshot().is_active());
        prop_assert!(core.snapshot().pending_dialogs.is_empty());
    }
}

#[test]
fn tool_handlers_survive_arbitrary_arguments() {
    let fake = FakeBrowser::start().unwrap();
    let reg = SupervisorRegistry::new(Config::default());
    reg.get_or_start("t", &fake.ws_url()).unwrap();
    let args = prop_oneof![
        json_value(),
        (
            prop::option::of(prop_oneof![
                Just(json!("accept")),
                Just(json!("dismiss")),
                json_value()
            ]),
            prop::option::of(json_value()),
            prop::option::of(json_value()),
            prop::option::of(prop_oneof![
                Just(json!("Browser.getVersion")),
                Just(json!("Runtime.evaluate")),
                json_value()
            ]),
            prop::option::of(json_value()),
            prop::option::of(prop_oneof![
                Just(json!(1)),
                Just(json!(-5)),
                Just(json!(1e308)),
                json_value()
            ]),
        )
            .prop_map(|(action, prompt, id, method, params, timeout)| {
                let mut o = serde_json::Map::new();
                for (k, v) in [
                    ("action", action),
                    ("prompt_text", prompt),
                    ("dialog_id", id),
                    ("method", method),
                    ("params", params),
                    ("timeout_s", timeout),
                ] {
                    if let Some(v) = v {
                        o.insert(k.into(), v);
                    }
                }
                Value::Object(o)
            }),
    ];
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 45_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&args, |a| {
            for r in [
                tools::browser_dialog(&reg, "t", &a),
                tools::browser_snapshot(&reg, "t", &a),
                tools::browser_dialog(&reg, "nobody", &a),
            ] {
                prop_assert!(r.is_object());
                if let Some(ok) = r.get("success") {
                    prop_assert!(ok.is_boolean());
                    if ok == false {
                        prop_assert!(r["error"].is_string());
                    }
                }
            }
            // browser_cdp sends real commands to the fake: keep it to the cheap, local cases.
            if a.get("method").and_then(Value::as_str) != Some("Runtime.evaluate") {
                let r = tools::browser_cdp(&reg, "t", &a);
                prop_assert!(r["success"].is_boolean(), "{}", r);
            }
            Ok(())
        })
        .unwrap();
    assert!(
        reg.get("t").unwrap().is_active(),
        "the supervisor kept serving"
    );
}
