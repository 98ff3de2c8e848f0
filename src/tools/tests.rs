//! Unit tests of the tool table: every tool's definition is consistent and a caller's task rule
//! is the one applied. That every door (library functions, the binding's entry, MCP on stdio and
//! over HTTP) answers the same text, and what the public doors answer without a supervisor, is
//! `tests/it/tools_everywhere.rs`.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::args::failure;
use super::table::{Tasks, Tool, dispatch};
use super::*;
use crate::config::Config;

/// Asserts that `out` is a failure whose error says `says`.
fn fails_saying(out: &Value, says: &str) {
    assert_eq!(out["success"], false, "{out}");
    let error = out["error"].as_str().unwrap_or_default();
    assert!(error.contains(says), "{out}");
}

#[test]
fn every_tool_takes_exactly_the_arguments_its_input_schema_lists() {
    for tool in Tool::ALL {
        let entry = tool.list_entry();
        let input = &entry["inputSchema"];
        let listed: BTreeSet<&str> = input["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .map(String::as_str)
            .collect();
        let taken: BTreeSet<&str> = tool.args().iter().copied().collect();
        assert_eq!(listed, taken, "{}", tool.name());
        assert_eq!(
            taken.len(),
            tool.args().len(),
            "{}: no name twice",
            tool.name()
        );
        for r in input["required"].as_array().into_iter().flatten() {
            assert!(
                taken.contains(r.as_str().unwrap_or("")),
                "{}: {r}",
                tool.name()
            );
        }
        assert_eq!(input["additionalProperties"], false, "{}", tool.name());
        assert_eq!(
            entry["annotations"]["title"],
            entry["title"],
            "{}",
            tool.name()
        );
        assert_eq!(
            entry["outputSchema"]["required"],
            json!(["success"]),
            "{}",
            tool.name()
        );
    }
    assert_eq!(Tool::Snapshot.args(), SNAPSHOT_ARGS);
    assert_eq!(Tool::Dialog.args(), DIALOG_ARGS);
    assert_eq!(Tool::Cdp.args(), CDP_ARGS);
}

#[test]
fn browser_navigate_is_listed_with_its_schema_and_the_tables_annotations() {
    let entry = Tool::Navigate.list_entry();
    assert_eq!(entry["inputSchema"]["required"], json!(["url"]));
    assert_eq!(
        entry["inputSchema"]["properties"]["wait_until"]["enum"],
        json!(["commit", "load"])
    );
    // It acts on the page (open world) and leaves the page it was on (destructive).
    let a = &entry["annotations"];
    assert_eq!(
        (
            &a["readOnlyHint"],
            &a["destructiveHint"],
            &a["openWorldHint"]
        ),
        (&json!(false), &json!(true), &json!(true))
    );
    for key in [
        "frame_id",
        "loader_id",
        "blocked_by_dialog",
        "navigation_error",
    ] {
        assert!(
            entry["outputSchema"]["properties"].get(key).is_some(),
            "{key}"
        );
    }
    // Argument errors are results, before any supervisor is needed.
    let reg = SupervisorRegistry::new(Config::default());
    let out = browser_navigate(
        &reg,
        "t",
        &json!({"url": "http://a/", "wait_until": "never"}),
    );
    assert_eq!(out["success"], false, "{out}");
    let out = browser_navigate(&reg, "t", &json!({}));
    fails_saying(&out, "missing url");
    let out = browser_navigate(&reg, "t", &json!({"url": "http://a/"}));
    fails_saying(&out, "browser_connect");
    let out = browser_dialog(
        &reg,
        "t",
        &json!({"action": "accept", "files": "/etc/passwd"}),
    );
    fails_saying(&out, "files must be a list");
}

#[test]
fn tools_are_found_by_name_and_listed_once_in_table_order() {
    let names: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "browser_connect",
            "browser_snapshot",
            "browser_dialog",
            "browser_cdp",
            "browser_navigate",
            "browser_disconnect",
            "browser_handover"
        ]
    );
    assert_eq!(Tool::names(), names.join(", "));
    for tool in Tool::ALL {
        assert_eq!(Tool::from_name(tool.name()), Some(tool));
    }
    assert_eq!(Tool::from_name("Browser_cdp"), None);
    assert_eq!(Tool::from_name(""), None);
    let list = crate::mcp::tool_list();
    let listed: Vec<&str> = list
        .as_array()
        .expect("an array")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(listed, names);
}

/// The rule of clients that share a server (MCP over HTTP, SPEC §15): `browser_connect`
/// without `task_id` gets a fresh task, every other tool needs one.
#[test]
fn a_caller_names_the_task_of_a_call_by_its_own_rule() {
    let reg = SupervisorRegistry::new(Config::default());
    let ctx = Context {
        tasks: Tasks::PerClient,
        ..Context::of(&reg)
    };
    let required = |tool: &str| {
        failure(format!(
            "task_id is required over HTTP: {tool} needs the task_id that browser_connect \
             returned (browser_connect without task_id creates a new task)"
        ))
    };
    let out = dispatch(&ctx, Tool::Snapshot, &json!({}));
    assert_eq!(out, required("browser_snapshot"));
    let out = dispatch(&ctx, Tool::Cdp, &json!({"method": "X.y"}));
    assert_eq!(out, required("browser_cdp"));
    let out = dispatch(&ctx, Tool::Snapshot, &json!({"task_id": "t9"}));
    assert_eq!(out, no_supervisor("t9"));
    let out = dispatch(&ctx, Tool::Disconnect, &json!({"task_id": "t9"}));
    assert_eq!(
        out,
        json!({"success": true, "task_id": "t9", "stopped": false})
    );
    // A new task, and no browser to start it on: this caller launches none.
    let out = dispatch(&ctx, Tool::Connect, &json!({}));
    fails_saying(&out, "pass the cdp_url");
    // Arguments that are no object fail before any rule.
    let out = dispatch(&ctx, Tool::Snapshot, &json!([1]));
    assert_eq!(
        out,
        failure("arguments must be a JSON object, got an array; see the tool's inputSchema")
    );
}
