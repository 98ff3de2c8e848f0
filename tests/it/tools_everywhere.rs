//! One tool table, every door (issue 29 point 3): the same calls, `tests/tool_calls/calls.json`
//! (which the Python suite's `test_tools_mcp.py` runs through `cdp_supervisor.tools` and the
//! binary too), go through the library functions (`tools::browser_*`), the table's entry the
//! Python binding calls (`unversioned::tools::call`), MCP on stdio (`McpServer::handle_line_text`,
//! the stdio transport's line API) and MCP over Streamable HTTP (2026-07-28 POSTs on a real
//! socket), all on one registry attached to a fake browser's page; the text of every answer is
//! the same, before and while a dialog is pending. The one difference is SPEC §10's: the library's
//! `browser_snapshot` has no `success: true`, and is `{}` without a live supervisor. Then what
//! the public doors answer without a supervisor, and the one wording of argument errors.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::mcp::McpServer;
use cdp_supervisor::mcp::http::{HttpOptions, HttpServer};
use cdp_supervisor::tools::{browser_dialog, browser_snapshot, no_supervisor};
use cdp_supervisor::unversioned::tools::call;
use cdp_supervisor::{Config, DialogAction, Error, SupervisorRegistry, tools};
use serde_json::{Value, json};

const CALLS: &str = include_str!("../tool_calls/calls.json");

/// The calls of `calls.json`: tool name and arguments.
fn calls() -> Vec<(String, Value)> {
    let list: Vec<(String, Value)> = serde_json::from_str(CALLS).expect("calls.json");
    assert!(list.len() >= 20, "calls.json lost its calls");
    list
}

/// The text of a `tools/call` result (its first content block), from a JSON-RPC response.
fn result_text(response: &str) -> String {
    let v: Value = serde_json::from_str(response).unwrap_or_else(|e| panic!("{e}: {response}"));
    match v["result"]["content"][0]["text"].as_str() {
        Some(t) => t.to_string(),
        None => panic!("no tool result: {response}"),
    }
}

/// MCP on stdio: the transport's line API.
fn stdio(server: &McpServer, name: &str, args: &Value) -> String {
    let line = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": name, "arguments": args}});
    let answer = server
        .handle_line_text(&line.to_string())
        .expect("an answer");
    result_text(&answer)
}

/// MCP over HTTP: one 2026-07-28 `tools/call` POST on a connection of its own.
fn http(addr: SocketAddr, name: &str, args: &Value) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": name, "arguments": args,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: {name}\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    tcp.write_all(request.as_bytes()).expect("send");
    let mut raw = String::new();
    tcp.read_to_string(&mut raw).expect("the answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head");
    assert!(head.starts_with("HTTP/1.1 200"), "{name} {args}: {raw}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{raw}"
    );
    result_text(body)
}

/// What the library function answers for a call of the table's snapshot/dialog/cdp/navigate
/// tools, and
/// what the table's answer `text` becomes for it (SPEC §10's snapshot exception). A snapshot is
/// compared as JSON values read from the two texts: taking `success` out means reading the text,
/// and serde_json's reading of a float (`opened_at`) is not exact, so both sides are read alike.
fn library(
    reg: &cdp_supervisor::SupervisorRegistry,
    name: &str,
    args: &Value,
    text: &str,
) -> Option<(Value, Value)> {
    let task = args["task_id"].as_str()?;
    let read = |t: &str| serde_json::from_str::<Value>(t).expect("JSON");
    Some(match name {
        "browser_snapshot" => {
            let mut view = read(text);
            if view == tools::no_supervisor(task) {
                view = json!({});
            } else if view["success"] == true {
                view.as_object_mut().map(|o| o.remove("success"));
            }
            let library = tools::browser_snapshot(reg, task, args).to_string();
            (read(&library), view)
        }
        "browser_dialog" => (
            json!(tools::browser_dialog(reg, task, args).to_string()),
            json!(text),
        ),
        "browser_cdp" => (
            json!(tools::browser_cdp(reg, task, args).to_string()),
            json!(text),
        ),
        "browser_navigate" => (
            json!(tools::browser_navigate(reg, task, args).to_string()),
            json!(text),
        ),
        "browser_handover" => (
            json!(tools::browser_handover(reg, task, args).to_string()),
            json!(text),
        ),
        _ => return None,
    })
}

#[test]
fn every_door_of_the_tool_table_answers_the_same_text() {
    let fake = FakeBrowser::start().expect("fake browser");
    let server = HttpServer::start(
        Config::default(),
        HttpOptions::default().with_addr("127.0.0.1:0"),
    )
    .expect("the server starts");
    let mcp = server.mcp();
    let reg = mcp.registry();
    reg.get_or_start("t", &fake.ws_url()).expect("attach");
    let compare_all = |when: &str| {
        let mut compared = 0;
        for (name, args) in calls() {
            let table = call(reg, &name, &args, None).to_string();
            assert_eq!(
                stdio(mcp, &name, &args),
                table,
                "stdio, {when}: {name} {args}"
            );
            assert_eq!(
                http(server.local_addr(), &name, &args),
                table,
                "HTTP, {when}: {name} {args}"
            );
            if let Some((lib, expected)) = library(reg, &name, &args, &table) {
                assert_eq!(lib, expected, "library, {when}: {name} {args}");
                compared += 1;
            }
        }
        assert!(compared >= 25, "the library functions ran {compared} calls");
    };
    compare_all("no dialog");
    fake.open_dialog("confirm", "sure?", "");
    let sup = reg.get("t").expect("live");
    sup.wait_for(Duration::from_secs(5), |s| !s.pending_dialogs.is_empty())
        .expect("the dialog is published");
    compare_all("a dialog pending");
    let pending = call(
        reg,
        "browser_cdp",
        &json!({"task_id": "t", "method": "X.y"}),
        None,
    );
    assert!(pending["pending_dialogs"].is_array(), "{pending}");
    let answered = call(
        reg,
        "browser_dialog",
        &json!({"task_id": "t", "action": "accept"}),
        None,
    );
    assert_eq!(answered["success"], true, "{answered}");
    assert_eq!(answered["action"], "accept", "{answered}");
    server.shutdown();
}

/// A tool's failure saying `error`.
fn failure(error: impl std::fmt::Display) -> Value {
    json!({"success": false, "error": error.to_string()})
}

/// Asserts that `out` is a failure whose error says `says`.
fn fails_saying(out: &Value, says: &str) {
    assert_eq!(out["success"], false, "{out}");
    let error = out["error"].as_str().unwrap_or_default();
    assert!(error.contains(says), "{out}");
}

#[test]
fn no_supervisor_is_explicit_everywhere_but_the_library_snapshot() {
    let reg = SupervisorRegistry::new(Config::default());
    // SPEC §10: the library's snapshot of a task without a supervisor has nothing to merge.
    assert_eq!(browser_snapshot(&reg, "nobody", &json!({})), json!({}));
    assert_eq!(browser_snapshot(&reg, "nobody", &Value::Null), json!({}));
    // Through the table (the MCP server, the Python binding) it says so.
    let out = call(
        &reg,
        "browser_snapshot",
        &json!({"task_id": "nobody"}),
        None,
    );
    assert_eq!(out, no_supervisor("nobody"));
    let out = call(&reg, "browser_snapshot", &json!({}), None);
    assert_eq!(out, no_supervisor("default"));
    for (name, args) in [
        ("browser_dialog", json!({"action": "accept"})),
        ("browser_cdp", json!({"method": "Browser.getVersion"})),
    ] {
        assert_eq!(
            call(&reg, name, &args, None),
            no_supervisor("default"),
            "{name}"
        );
    }
    // Argument errors come first, as a failure.
    let out = call(&reg, "browser_snapshot", &json!({"task": "x"}), None);
    assert_eq!(out["success"], false);
    let out = browser_snapshot(&reg, "nobody", &json!({"target_id": 5}));
    assert_eq!(out, failure("target_id must be a string, got a number"));
}

#[test]
fn the_binding_entry_keeps_the_task_rule_and_runs_every_tool_of_the_table() {
    let reg = SupervisorRegistry::new(Config::default());
    let out = call(&reg, "browser_connect", &json!({"task_id": "t"}), None);
    assert_eq!(
        out,
        failure(
            "no cdp_url given and none configured (browser.cdp_url), and this caller launches \
             no browser: pass the cdp_url of a running browser"
        )
    );
    let out = call(
        &reg,
        "browser_connect",
        &json!({"task_id": "t", "cdp": "x"}),
        None,
    );
    fails_saying(&out, "unknown argument \"cdp\"");
    let out = call(&reg, "browser_disconnect", &json!({}), None);
    assert_eq!(
        out,
        json!({"success": true, "task_id": "default", "stopped": false})
    );
    let out = call(&reg, "browser_nope", &json!({}), None);
    assert_eq!(out, failure("unknown tool \"browser_nope\""));
    for name in ["browser_snapshot", "browser_nope", "browser_disconnect"] {
        let out = call(&reg, name, &json!({"task_id": 7}), None);
        assert_eq!(
            out,
            failure("task_id must be a string, got a number; omit it for the task \"default\""),
            "{name}"
        );
        let out = call(&reg, name, &json!({"task_id": ""}), None);
        assert!(
            out["error"].as_str().is_some_and(|e| e.contains("task_id")),
            "{name}: {out}"
        );
    }
}

#[test]
fn dialog_actions_are_read_by_one_rule_with_one_wording() {
    assert_eq!(
        DialogAction::parse("accept").ok(),
        Some(DialogAction::Accept)
    );
    assert_eq!(
        DialogAction::parse("dismiss").ok(),
        Some(DialogAction::Dismiss)
    );
    for (given, shown) in [
        ("Accept", "\"Accept\""),
        (" accept", "\" accept\""),
        ("", "\"\""),
    ] {
        match DialogAction::parse(given) {
            Err(Error::InvalidArgument(e)) => assert_eq!(
                e,
                format!("invalid action {shown}: use \"accept\" or \"dismiss\"")
            ),
            other => panic!("{given:?}: {other:?}"),
        }
    }
    let reg = SupervisorRegistry::new(Config::default());
    // The tool reads it with the same rule, whatever the value's kind; at most 64 characters
    // of it are shown (`quote`).
    let long = "x".repeat(200);
    for (action, shown) in [
        (json!("eat"), "\"eat\"".to_string()),
        (json!(5), "5".to_string()),
        (json!(long), format!("\"{}\"… (200 bytes)", "x".repeat(64))),
        (
            json!([[long]]),
            format!("[[\"{}… (a longer list)", "x".repeat(61)),
        ),
    ] {
        let out = browser_dialog(&reg, "t", &json!({ "action": action }));
        assert_eq!(
            out,
            failure(format!(
                "invalid action {shown}: use \"accept\" or \"dismiss\""
            ))
        );
    }
    let out = browser_dialog(&reg, "t", &json!({}));
    assert_eq!(
        out,
        failure("missing action: use \"accept\" or \"dismiss\"")
    );
}
