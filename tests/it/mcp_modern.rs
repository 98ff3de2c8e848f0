//! MCP 2026-07-28 beside the handshake revisions on one `cdp-supervisor mcp` process (issue 23
//! points 1 and 3, SPEC §15), as raw JSON-RPC lines over stdio:
//!
//! * `server/discover`, the `_meta` envelope (-32602 malformed, -32022 naming every supported
//!   version), `resultType` and the serverInfo stamp on every 2026-07-28 result, the removed
//!   `ping` and `logging/setLevel`, and a legacy `initialize` client served as before on the
//!   same process, before and after 2026-07-28 requests;
//! * logging the 2026-07-28 way: `notifications/message` only for a request that opted in with
//!   `_meta["io.modelcontextprotocol/logLevel"]`, at or above that level, before its response;
//! * `subscriptions/listen` on a task's resource: the acknowledgement first, then
//!   `notifications/resources/updated` for a dialog opening, the connection dropping and coming
//!   back, and the end of the task, each naming the stream; nothing of another task; nothing
//!   after `notifications/cancelled`.
//!
//! The browser is the fake CDP browser (`cdp_supervisor::fake`): a dropped connection and a
//! reconnect on demand are what a real Chromium cannot give. The whole flow against Chromium
//! with the official SDK is `mcp_python_sdk`.

use std::time::{Duration, Instant};

use cdp_supervisor::fake::{FakeBrowser, Rule};
use serde_json::{Value, json};

use crate::common::wait_until;
use crate::mcp_stdio::{Mcp, T, initialize, tool_json};

const MODERN: &str = "2026-07-28";
const SUPPORTED: [&str; 4] = ["2026-07-28", "2025-11-25", "2025-06-18", "2024-11-05"];
const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
const SUB_ID: &str = "io.modelcontextprotocol/subscriptionId";
const EVENT: &str = "io.github.cdp-supervisor/event";

/// `params` with the 2026-07-28 envelope (plus `extra` members of `_meta`).
fn modern(mut params: Value, extra: Value) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if let Some(extra) = extra.as_object() {
        for (k, v) in extra {
            meta[k] = v.clone();
        }
    }
    params["_meta"] = meta;
    params
}

/// A 2026-07-28 result: `resultType: "complete"` and the serverInfo stamp; returns the result.
fn complete(answer: &Value) -> &Value {
    let r = answer
        .get("result")
        .unwrap_or_else(|| panic!("no result: {answer}"));
    assert_eq!(r["resultType"], "complete", "{answer}");
    assert_eq!(
        r["_meta"][SERVER_INFO]["name"], "cdp-supervisor",
        "{answer}"
    );
    r
}

fn error_code(answer: &Value) -> i64 {
    answer["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {answer}"))
}

#[test]
fn both_protocol_generations_are_served_on_one_stdio_process() {
    let mut mcp = Mcp::start(&[]);

    // 2026-07-28 without any handshake.
    let a = mcp.request("server/discover", modern(json!({}), json!({})), T);
    let r = complete(&a);
    assert_eq!(r["supportedVersions"], json!(SUPPORTED), "{a}");
    assert!(r["capabilities"]["tools"].is_object(), "{a}");
    assert_eq!(r["capabilities"]["resources"]["subscribe"], true, "{a}");
    assert!(
        r["instructions"]
            .as_str()
            .is_some_and(|s| s.contains("browser_connect")),
        "{a}"
    );
    assert!(r["ttlMs"].as_u64().is_some_and(|t| t > 0), "{a}");
    assert_eq!(r["cacheScope"], "public", "{a}");

    let a = mcp.request("tools/list", modern(json!({}), json!({})), T);
    let r = complete(&a);
    let names: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names.len(), 7, "{a}");
    assert!(r["ttlMs"].as_u64().is_some_and(|t| t > 0), "{a}");
    assert_eq!(r["cacheScope"], "public", "{a}");
    // The list is the same on every call (cacheable).
    let again = mcp.request("tools/list", modern(json!({}), json!({})), T);
    assert_eq!(again["result"]["tools"], r["tools"]);

    // A tool error is a complete result too.
    let a = mcp.request(
        "tools/call",
        modern(
            json!({"name": "browser_snapshot", "arguments": {}}),
            json!({}),
        ),
        T,
    );
    complete(&a);
    let (is_error, v) = tool_json(&a, "browser_snapshot");
    assert!(is_error, "{a}");
    assert!(
        v["error"]
            .as_str()
            .unwrap_or("")
            .contains("browser_connect"),
        "{a}"
    );

    // The envelope's errors.
    let a = mcp.request(
        "tools/list",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "1900-01-01",
                         "io.modelcontextprotocol/clientCapabilities": {}}}),
        T,
    );
    assert_eq!(error_code(&a), -32022, "{a}");
    assert_eq!(
        a["error"]["data"],
        json!({"supported": SUPPORTED, "requested": "1900-01-01"}),
        "{a}"
    );
    for bad in [
        json!({"io.modelcontextprotocol/protocolVersion": MODERN}),
        json!({"io.modelcontextprotocol/protocolVersion": 2026,
               "io.modelcontextprotocol/clientCapabilities": {}}),
        json!({"io.modelcontextprotocol/protocolVersion": MODERN,
               "io.modelcontextprotocol/clientCapabilities": []}),
        json!({"io.modelcontextprotocol/protocolVersion": MODERN,
               "io.modelcontextprotocol/clientCapabilities": {},
               "io.modelcontextprotocol/logLevel": "loud"}),
    ] {
        let a = mcp.request("tools/list", json!({"_meta": bad}), T);
        assert_eq!(error_code(&a), -32602, "{bad}: {a}");
    }
    let a = mcp.request("server/discover", json!({}), T);
    assert_eq!(error_code(&a), -32602, "discover without the envelope: {a}");
    for gone in ["ping", "logging/setLevel"] {
        let a = mcp.request(gone, modern(json!({"level": "info"}), json!({})), T);
        assert_eq!(error_code(&a), -32601, "{gone} in 2026-07-28: {a}");
    }

    // A legacy client on the same process: the handshake as before, no 2026-07-28 fields.
    let a = initialize(&mut mcp);
    let r = &a["result"];
    assert_eq!(r["protocolVersion"], "2025-06-18", "{a}");
    assert_eq!(r["serverInfo"]["name"], "cdp-supervisor", "{a}");
    assert!(r.get("resultType").is_none(), "{a}");
    let a = mcp.request("ping", json!({}), T);
    assert_eq!(a["result"], json!({}), "{a}");
    let a = mcp.request("tools/list", json!({}), T);
    assert!(a["result"].get("resultType").is_none(), "{a}");
    assert!(a["result"].get("ttlMs").is_none(), "{a}");
    assert_eq!(a["result"]["tools"].as_array().map(Vec::len), Some(7));
    let a = mcp.request("logging/setLevel", json!({"level": "debug"}), T);
    assert_eq!(a["result"], json!({}), "{a}");

    // ... and 2026-07-28 still works after it.
    let a = mcp.request("server/discover", modern(json!({}), json!({})), T);
    complete(&a);
    let a = mcp.request("ping", modern(json!({}), json!({})), T);
    assert_eq!(error_code(&a), -32601, "{a}");

    assert!(mcp.close_and_wait(T).success());
}

/// Starts `browser_cdp Runtime.evaluate` (the fake never answers it) on `task` with `meta`
/// extras, opens a dialog once the call reached the browser, and returns every line up to and
/// including the call's response.
fn call_blocked_by_a_dialog(
    mcp: &mut Mcp,
    fake: &FakeBrowser,
    task: &str,
    meta: Value,
) -> Vec<Value> {
    fake.set_rule("Runtime.evaluate", Rule::Ignore);
    let seen = fake.received().len();
    let id = mcp.send_request(
        "tools/call",
        modern(
            json!({"name": "browser_cdp", "arguments": {
                "task_id": task, "method": "Runtime.evaluate",
                "params": {"expression": "ask()"}, "timeout_s": 20}}),
            meta,
        ),
    );
    let reached = wait_until(T, || {
        fake.received()[seen..]
            .iter()
            .any(|c| c["method"] == "Runtime.evaluate")
            .then_some(())
    });
    if reached.is_none() {
        mcp.assert_no_response(&id, Duration::from_millis(100));
        panic!("the call never reached the browser");
    }
    fake.open_dialog("prompt", "Your name?", "");
    let deadline = Instant::now()
        .checked_add(T)
        .expect("a deadline within range");
    let mut lines = Vec::new();
    loop {
        let line = mcp.next(
            deadline.saturating_duration_since(Instant::now()),
            "the call",
        );
        let done = line.get("id") == Some(&id);
        lines.push(line);
        if done {
            return lines;
        }
    }
}

fn connect(mcp: &mut Mcp, fake: &FakeBrowser, task: &str) {
    let a = mcp.request(
        "tools/call",
        modern(
            json!({"name": "browser_connect", "arguments": {"task_id": task, "cdp_url": fake.ws_url()}}),
            json!({}),
        ),
        T,
    );
    complete(&a);
    let (is_error, v) = tool_json(&a, "browser_connect");
    assert!(!is_error, "{a}");
    assert_eq!(v["task_id"], task, "{a}");
}

#[test]
fn logs_reach_only_2026_requests_that_opt_in_at_their_level_before_the_response() {
    let mut mcp = Mcp::start(&[]);
    let fake = FakeBrowser::start().unwrap();
    connect(&mut mcp, &fake, "logs");

    // Opted in at warning: the dialog that blocked the call, before the call's response.
    let lines = call_blocked_by_a_dialog(
        &mut mcp,
        &fake,
        "logs",
        json!({"io.modelcontextprotocol/logLevel": "warning"}),
    );
    let (resp, notes) = lines.split_last().unwrap();
    let (is_error, v) = tool_json(resp, "browser_cdp");
    assert!(
        is_error && v["blocked_by_dialog"]["type"] == "prompt",
        "{resp}"
    );
    complete(resp);
    assert_eq!(
        notes.len(),
        1,
        "one log line before the response: {lines:?}"
    );
    let n = &notes[0];
    assert_eq!(n["method"], "notifications/message", "{n}");
    assert_eq!(n["params"]["level"], "warning", "{n}");
    assert_eq!(n["params"]["data"]["event"], "dialog_opened", "{n}");
    assert_eq!(
        n["params"]["data"]["dialog"]["message"], "Your name?",
        "{n}"
    );
    assert_eq!(n["params"]["data"]["task_id"], "logs", "{n}");

    // No opt-in, or a level above the event's: nothing but the response.
    for meta in [
        json!({}),
        json!({"io.modelcontextprotocol/logLevel": "error"}),
    ] {
        fake.close_dialog_remotely();
        let closed = wait_until(T, || {
            let a = mcp.request(
                "tools/call",
                modern(
                    json!({"name": "browser_snapshot", "arguments": {"task_id": "logs"}}),
                    json!({}),
                ),
                T,
            );
            let (_, snap) = tool_json(&a, "browser_snapshot");
            snap["pending_dialogs"]
                .as_array()
                .is_some_and(Vec::is_empty)
                .then_some(())
        });
        assert!(closed.is_some(), "the dialog closed remotely stays pending");
        let lines = call_blocked_by_a_dialog(&mut mcp, &fake, "logs", meta.clone());
        assert_eq!(lines.len(), 1, "{meta}: only the response: {lines:?}");
        let (_, v) = tool_json(&lines[0], "browser_cdp");
        assert!(v.get("blocked_by_dialog").is_some(), "{meta}: {v}");
    }
    assert!(mcp.close_and_wait(T).success());
}

/// The next `notifications/resources/updated` of stream `sub` (one a request kept while it
/// waited for its response first), skipping nothing else: any other notification fails the test.
fn next_update(mcp: &mut Mcp, sub: &Value, within: Duration) -> Value {
    let n = if mcp.notes.is_empty() {
        mcp.next(within, "notifications/resources/updated")
    } else {
        mcp.notes.remove(0)
    };
    assert_eq!(n["method"], "notifications/resources/updated", "{n}");
    assert_eq!(n["params"]["_meta"][SUB_ID], *sub, "names its stream: {n}");
    n
}

#[test]
fn listen_streams_dialog_reconnect_and_end_events_of_the_named_task_only() {
    let mut mcp = Mcp::start(&[]);
    let fake = FakeBrowser::start().unwrap();
    let other = FakeBrowser::start().unwrap();
    connect(&mut mcp, &fake, "watched");
    connect(&mut mcp, &other, "other");

    let uri = "cdp-supervisor://tasks/watched";
    let sub = mcp.send_request(
        "subscriptions/listen",
        modern(
            json!({"notifications": {"resourceSubscriptions": [uri, "https://example.com/x"],
                                      "toolsListChanged": true}}),
            json!({}),
        ),
    );
    let ack = mcp.next(T, "the acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(ack["params"]["_meta"][SUB_ID], sub, "{ack}");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourceSubscriptions": [uri]}),
        "only what is honored: {ack}"
    );

    // Another task's dialog is not this stream's business; this task's is.
    other.open_dialog("alert", "elsewhere", "");
    fake.open_dialog("confirm", "Leave?", "");
    let n = next_update(&mut mcp, &sub, T);
    assert_eq!(n["params"]["uri"], uri, "{n}");
    let e = &n["params"]["_meta"][EVENT];
    assert_eq!(e["event"], "dialog_opened", "{n}");
    assert_eq!(e["task_id"], "watched", "{n}");
    assert_eq!(e["dialog"]["message"], "Leave?", "{n}");
    let read = mcp.request("resources/read", modern(json!({"uri": uri}), json!({})), T);
    let text = complete(&read)["contents"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    let view: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(view["pending_dialogs"][0]["message"], "Leave?", "{view}");

    // The connection drops (the open dialog is recorded as closed by it), then comes back.
    fake.drop_connections();
    let mut events = Vec::new();
    while !events.iter().any(|e: &Value| e["event"] == "reconnected") {
        let n = next_update(&mut mcp, &sub, T);
        events.push(n["params"]["_meta"][EVENT].clone());
    }
    let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert!(
        names.contains(&"connection_lost"),
        "connection_lost before reconnected: {events:?}"
    );
    let lost = names.iter().position(|n| *n == "connection_lost").unwrap();
    assert_eq!(names.last(), Some(&"reconnected"), "{events:?}");
    assert!(lost < names.len() - 1, "{events:?}");

    // The end of the task.
    let a = mcp.request(
        "tools/call",
        modern(
            json!({"name": "browser_disconnect", "arguments": {"task_id": "watched"}}),
            json!({}),
        ),
        T,
    );
    complete(&a);
    let mut last = Value::Null;
    while last["event"] != "supervisor_stopped" {
        last = next_update(&mut mcp, &sub, T)["params"]["_meta"][EVENT].clone();
    }

    // The client ends the stream: nothing more on it, not even a response; a new connect of
    // the same task stays silent.
    mcp.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": sub, "reason": "done"}}),
    );
    connect(&mut mcp, &fake, "watched");
    fake.open_dialog("alert", "after the stream", "");
    let a = mcp.request(
        "tools/call",
        modern(
            json!({"name": "browser_snapshot", "arguments": {"task_id": "watched"}}),
            json!({}),
        ),
        T,
    );
    complete(&a);
    mcp.assert_no_response(&sub, Duration::from_millis(300));
    assert!(
        mcp.notes.is_empty(),
        "nothing after the cancel, nothing of the other task: {:?}",
        mcp.notes
    );
    assert!(mcp.close_and_wait(T).success());
}

#[test]
fn listen_streams_end_with_a_complete_response_at_the_end_of_input() {
    let mut mcp = Mcp::start(&[]);
    let sub = mcp.send_request(
        "subscriptions/listen",
        modern(
            json!({"notifications": {"resourceSubscriptions": ["cdp-supervisor://tasks/default"]}}),
            json!({}),
        ),
    );
    let ack = mcp.next(T, "the acknowledgement");
    assert_eq!(ack["params"]["_meta"][SUB_ID], sub, "{ack}");
    // A legacy request cannot listen (the method is 2026-07-28's), nor a second stream reuse
    // the id of an open one.
    let a = mcp.request("subscriptions/listen", json!({"notifications": {}}), T);
    assert_eq!(error_code(&a), -32601, "{a}");
    mcp.send(
        &json!({"jsonrpc": "2.0", "id": sub, "method": "subscriptions/listen",
                     "params": modern(json!({"notifications": {}}), json!({}))}),
    );
    let dup = mcp.next(T, "the duplicate");
    assert_eq!(dup["id"], sub, "{dup}");
    assert_eq!(error_code(&dup), -32600, "{dup}");

    drop(mcp.stdin.take());
    let end = mcp.next(T, "the stream's response");
    assert_eq!(end["id"], sub, "{end}");
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
    assert_eq!(end["result"]["_meta"][SUB_ID], sub, "{end}");
    assert!(mcp.close_and_wait(T).success());
}
