//! Generated hostile input, 100,000+ cases in all: the state machine fed arbitrary CDP-shaped
//! messages (known events with wrong types, unknown events, replies to unknown ids, garbage), and
//! the JSON tool handlers fed arbitrary arguments. Zero panics, every cap holds.

use std::time::Duration;

use cdp_supervisor::config::{BridgeMode, DialogPolicy, Limits};
use cdp_supervisor::core::{CallKind, Core, CoreSettings, PendingCall};
use cdp_supervisor::fake::FakeBrowser;
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
        limits: Limits {
            frame_tree_max_entries: 5,
            recent_dialogs_max: 3,
            console_errors_max: 4,
            frames_max: 50,
            ..Limits::default()
        },
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
        for (id, d) in answers {
            core.register(id, PendingCall {
                method: "Page.handleJavaScriptDialog".into(),
                session_id: Some("S1".into()),
                kind: CallKind::DialogAnswer { dialog_id: format!("d-{d}"), by: ClosedBy::Agent, accept: true, prompt_text: None },
                reply: None,
                expires: None,
            });
        }
        for m in &msgs {
            core.on_text(m);
            let _ = core.take_outgoing();
            if core.take_dirty() {
                let s = core.snapshot();
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
        core.on_disconnect("end");
        prop_assert!(!core.snapshot().active);
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
