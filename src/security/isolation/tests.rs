//! Unit tests of the isolation rule, on a task that owns page `MINE` (with frame `MINE-F`) and
//! context `CTX`.

use super::*;
use serde_json::json;

struct Task;

impl Reach for Task {
    fn owns_target(&self, target_id: &str) -> bool {
        matches!(target_id, "MINE" | "MINE-F")
    }
    fn owns_frame(&self, frame_id: &str) -> bool {
        matches!(frame_id, "MINE" | "MINE-F")
    }
    fn owns_context(&self, context_id: &str) -> bool {
        context_id == "CTX"
    }
}

fn refused(method: &str, params: Value) -> Option<String> {
    check(&Task, method, &params).err().map(|(option, why)| {
        assert_eq!(option, OPTION);
        assert!(
            why.ends_with(
                "set security.isolate_tasks = false to let tasks reach each other's pages"
            ),
            "{why}"
        );
        why
    })
}

/// Every method of the Target domain that names a target (Chromium 156's `/json/protocol`),
/// and the two other domains' ones, refuse another task's target and pass the task's own.
#[test]
fn every_method_naming_a_target_reaches_the_tasks_own_only() {
    for method in [
        "Target.activateTarget",
        "Target.attachToTarget",
        "Target.closeTarget",
        "Target.exposeDevToolsProtocol",
        "Target.detachFromTarget",
        "Target.getTargetInfo",
        "Target.sendMessageToTarget",
        "Target.autoAttachRelated",
        "Target.getDevToolsTarget",
        "Target.openDevTools",
        "Browser.getWindowForTarget",
        "Extensions.triggerAction",
    ] {
        let why = refused(method, json!({"targetId": "THEIRS"})).expect(method);
        assert!(
            why.contains("targetId \"THEIRS\" is not a target of this task"),
            "{why}"
        );
        assert_eq!(
            refused(method, json!({"targetId": "MINE"})),
            None,
            "{method}"
        );
        assert_eq!(
            refused(method, json!({"targetId": "MINE-F"})),
            None,
            "{method}"
        );
        assert!(
            refused(method, json!({"targetId": 7})).is_some(),
            "{method}"
        );
    }
    // Without a targetId they act on the session's own target (or the browser's).
    assert_eq!(refused("Target.getTargetInfo", json!({})), None);
    assert_eq!(
        refused("Target.detachFromTarget", json!({"sessionId": "S"})),
        None
    );
}

#[test]
fn browser_contexts_are_the_tasks_own_only() {
    for method in [
        "Target.createTarget",
        "Target.disposeBrowserContext",
        "Browser.setDownloadBehavior",
        "Storage.getCookies",
    ] {
        assert!(
            refused(method, json!({"browserContextId": "OTHER"}))
                .expect(method)
                .contains("browserContextId \"OTHER\" is not a browser context this task created")
        );
        assert_eq!(
            refused(method, json!({"browserContextId": "CTX"})),
            None,
            "{method}"
        );
    }
    assert_eq!(
        refused("Target.createTarget", json!({"url": "about:blank"})),
        None
    );
    assert_eq!(refused("Target.createBrowserContext", json!({})), None);
}

#[test]
fn a_session_on_the_browser_target_is_refused_and_event_switches_pass() {
    assert!(
        refused("Target.attachToBrowserTarget", json!({}))
            .expect("refused")
            .contains("reaches every target")
    );
    for method in [
        "Target.setAutoAttach",
        "Target.setDiscoverTargets",
        "Target.setRemoteLocations",
        "Target.getTargets",
        "Target.getBrowserContexts",
    ] {
        assert_eq!(refused(method, json!({})), None, "{method}");
    }
}

#[test]
fn a_nested_command_is_held_to_the_same_rule() {
    let send = |message: Value| {
        refused(
            "Target.sendMessageToTarget",
            json!({"sessionId": "S", "message": message.to_string()}),
        )
    };
    let inner = |method: &str, params: Value| json!({"id": 1, "method": method, "params": params});
    assert_eq!(
        send(inner("Runtime.evaluate", json!({"expression": "1"}))),
        None
    );
    let why = send(inner("Target.closeTarget", json!({"targetId": "THEIRS"}))).expect("refused");
    assert!(
        why.starts_with("its nested Target.closeTarget: targetId"),
        "{why}"
    );
    assert!(send(inner("Target.getTargets", json!({}))).is_some());
    assert!(send(inner("Target.getBrowserContexts", json!({}))).is_some());
    // Nested twice, and unreadable.
    let twice = json!({"id": 2, "method": "Target.sendMessageToTarget",
        "params": {"sessionId": "S", "message": inner("Target.attachToTarget", json!({"targetId": "THEIRS"})).to_string()}});
    assert!(send(twice).is_some());
    assert!(
        refused(
            "Target.sendMessageToTarget",
            json!({"sessionId": "S", "message": "{\"method\": \"Target.closeTarget\", \"method\": \"Runtime.evaluate\"}"})
        )
        .is_some()
    );
}

#[test]
fn replies_list_the_tasks_targets_and_contexts_only() {
    let mut targets = json!({"targetInfos": [
        {"targetId": "THEIRS", "type": "page", "url": "https://secret.example/"},
        {"targetId": "MINE", "type": "page"},
        {"targetId": "OOPIF", "type": "iframe", "parentFrameId": "MINE-F"},
        {"targetId": "THEIR-OOPIF", "type": "iframe", "parentFrameId": "THEIRS"},
        {"targetId": "SW", "type": "service_worker"},
        {"type": "page"},
        "not an object",
    ]});
    filter_reply(&Task, "Target.getTargets", &mut targets);
    let ids: Vec<&str> = targets["targetInfos"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|t| t["targetId"].as_str())
        .collect();
    assert_eq!(ids, ["MINE", "OOPIF"]);
    let mut contexts =
        json!({"browserContextIds": ["OTHER", "CTX", 3], "defaultBrowserContextId": "D"});
    filter_reply(&Task, "Target.getBrowserContexts", &mut contexts);
    assert_eq!(
        contexts,
        json!({"browserContextIds": ["CTX"], "defaultBrowserContextId": "D"})
    );
    // Other replies, and replies of an unexpected shape, are left alone.
    let mut other = json!({"targetInfos": "x"});
    filter_reply(&Task, "Target.getTargets", &mut other);
    assert_eq!(other, json!({"targetInfos": "x"}));
    let mut info = json!({"targetInfo": {"targetId": "MINE"}});
    filter_reply(&Task, "Target.getTargetInfo", &mut info);
    assert_eq!(info, json!({"targetInfo": {"targetId": "MINE"}}));
}

#[test]
fn a_snapshot_reaches_its_page_popups_frames_created_pages_and_contexts() {
    use crate::snapshot::{Blocked, BlockedReason, FrameRecord, PageInfo};
    use std::collections::HashMap;
    use std::sync::Arc;
    let mut snap = Snapshot::empty("t", "ws://x");
    assert!(!snap.owns_target("PAGE"));
    snap.page_target_id = Some("PAGE".into());
    snap.pages = Arc::from(vec![PageInfo {
        target_id: "POPUP".into(),
        ..PageInfo::default()
    }]);
    snap.watched_pages = Arc::from(vec![PageInfo {
        target_id: "WATCHED".into(),
        ..PageInfo::default()
    }]);
    let mut frames = HashMap::new();
    frames.insert("OOPIF".to_string(), FrameRecord::default());
    snap.frames = Arc::new(frames);
    snap.created_targets = Arc::from(vec!["CREATED".to_string()]);
    snap.created_contexts = Arc::from(vec!["CTX".to_string()]);
    snap.blocked = Some(Blocked {
        reason: BlockedReason::Unresponsive,
        hint: String::new(),
        frame_id: None,
        target_ids: vec!["FROZEN".into()],
    });
    for t in ["PAGE", "POPUP", "WATCHED", "OOPIF", "CREATED", "FROZEN"] {
        assert!(snap.owns_target(t), "{t}");
    }
    assert!(!snap.owns_target("OTHER"));
    assert!(snap.owns_frame("OOPIF") && snap.owns_frame("PAGE") && !snap.owns_frame("X"));
    assert!(snap.owns_context("CTX") && !snap.owns_context("OTHER"));
    assert_eq!(
        pages_of(&snap).collect::<Vec<_>>(),
        ["PAGE", "POPUP", "WATCHED", "CREATED"]
    );
}
