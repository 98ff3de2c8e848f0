//! The MCP server (`cdp-supervisor mcp`, SPEC §15/§16) as a subprocess: JSON-RPC 2.0 lines over
//! its stdin/stdout.
//!
//! * the handshake (`initialize`, `notifications/initialized`, `ping`, `tools/list`);
//! * a whole session against real Chromium that the server launches itself: connect, navigate,
//!   a prompt answered through `browser_dialog` (the page reports what `prompt()` returned),
//!   `browser_cdp`, disconnect, and a clean exit at the end of input that takes the browser along;
//! * robustness: malformed lines get the right JSON-RPC errors and never stop the server.
//!
//! stdout and stderr are drained by threads into channels, so every read has a deadline; the
//! child is SIGKILLed and reaped on drop (also when a test panics), and so is a Chromium it
//! launched. The Chromium test skips (`SKIPPED: no Chromium`) when none is installed, unless
//! `CDP_SUPERVISOR_E2E=require`.

use crate::common;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::common::procs::{
    Lines, alive, browsers_of, clean_config_env, kill_browsers_of, launched_pid, profiles_of,
};
use crate::common::{HttpServer, Response, wait_until};
use serde_json::{Value, json};

/// Deadline of one request/answer round trip (browser_connect launches Chromium: longer).
pub(crate) const T: Duration = Duration::from_secs(10);
/// Deadline for the server (and its browser) to go away after stdin closes.
pub(crate) const STOP: Duration = Duration::from_secs(5);

pub(crate) const PROTOCOL: &str = "2025-06-18";

const TOOLS: [&str; 7] = [
    "browser_connect",
    "browser_snapshot",
    "browser_dialog",
    "browser_cdp",
    "browser_navigate",
    "browser_disconnect",
    "browser_handover",
];

// ---------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------

/// `cdp-supervisor mcp`, SIGKILLed and reaped on drop together with any Chromium it launched.
pub(crate) struct Mcp {
    pub(crate) child: Child,
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) out: Lines,
    pub(crate) err: Lines,
    pub(crate) next_id: i64,
    pub(crate) status: Option<ExitStatus>,
    /// Responses read while waiting for another one, by the JSON text of their id.
    pub(crate) responses: HashMap<String, Value>,
    /// Notifications from the server, in order.
    pub(crate) notes: Vec<Value>,
}

impl Mcp {
    pub(crate) fn start(envs: &[(&str, &std::ffi::OsStr)]) -> Mcp {
        let mut cmd = Command::new(crate::common::bin::bin());
        cmd.arg("mcp");
        clean_config_env(&mut cmd);
        cmd.env("RUST_LOG", "info");
        for (k, v) in envs {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn cdp-supervisor mcp");
        let stdin = child.stdin.take();
        let out = Lines::drain(child.stdout.take().unwrap(), "stdout");
        let err = Lines::drain(child.stderr.take().unwrap(), "stderr");
        Mcp {
            child,
            stdin,
            out,
            err,
            next_id: 100,
            status: None,
            responses: HashMap::new(),
            notes: Vec::new(),
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes raw bytes followed by a newline.
    pub(crate) fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("write to the server");
        stdin.write_all(b"\n").expect("write to the server");
        stdin.flush().expect("flush to the server");
    }

    pub(crate) fn send(&mut self, msg: &Value) {
        self.send_raw(msg.to_string().as_bytes());
    }

    /// The next stdout line, parsed (panics on non-JSON, or at the deadline).
    pub(crate) fn next(&self, timeout: Duration, waiting_for: &str) -> Value {
        match self.out.rx.recv_timeout(timeout) {
            Ok(line) => serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}")),
            Err(_) => panic!(
                "no answer to {waiting_for} within {timeout:?}\n--- stderr ---\n{}",
                self.err.all().join("\n")
            ),
        }
    }

    /// Reads one stdout line (until `deadline`): a notification goes to `notes`, a response to
    /// `responses`. False at the deadline.
    pub(crate) fn pump(&mut self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = self.out.rx.recv_timeout(left) else {
            return false;
        };
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}"));
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        if v.get("method").is_some() {
            assert!(v.get("id").is_none(), "the server sends no requests: {v}");
            self.notes.push(v);
        } else {
            self.responses.insert(v["id"].to_string(), v);
        }
        true
    }

    /// Sends a request; returns its id (answer with [`Mcp::response`]).
    pub(crate) fn send_request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The response to request `id`, waiting at most `timeout`.
    pub(crate) fn response(&mut self, id: &Value, timeout: Duration, waiting_for: &str) -> Value {
        let deadline = Instant::now()
            .checked_add(timeout)
            .expect("a deadline within range");
        loop {
            if let Some(v) = self.responses.remove(&id.to_string()) {
                return v;
            }
            if !self.pump(deadline) {
                panic!(
                    "no answer to {waiting_for} (id {id}) within {timeout:?}\n--- stderr ---\n{}",
                    self.err.all().join("\n")
                );
            }
        }
    }

    /// Asserts that no response to `id` arrives within `within`.
    pub(crate) fn assert_no_response(&mut self, id: &Value, within: Duration) {
        let deadline = Instant::now()
            .checked_add(within)
            .expect("a deadline within range");
        while self.pump(deadline) {}
        assert!(
            !self.responses.contains_key(&id.to_string()),
            "request {id} was answered: {:?}",
            self.responses.get(&id.to_string())
        );
    }

    /// The first notification (seen so far, or within `timeout`) that `pred` accepts.
    pub(crate) fn note(
        &mut self,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        let deadline = Instant::now()
            .checked_add(timeout)
            .expect("a deadline within range");
        let mut seen = 0;
        loop {
            if let Some(n) = self.notes[seen..].iter().find(|n| pred(n)) {
                return Some(n.clone());
            }
            seen = self.notes.len();
            if !self.pump(deadline) {
                return None;
            }
        }
    }

    /// Sends a request and returns its answer.
    pub(crate) fn request(&mut self, method: &str, params: Value, timeout: Duration) -> Value {
        let id = self.send_request(method, params);
        let answer = self.response(&id, timeout, method);
        assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
        answer
    }

    /// Sends `tools/call name args` without waiting; returns the request id.
    pub(crate) fn start_tool(&mut self, name: &str, args: Value) -> Value {
        self.send_request("tools/call", json!({"name": name, "arguments": args}))
    }

    /// The (isError, tool JSON) of a tools/call answer.
    pub(crate) fn tool_answer(
        &mut self,
        id: &Value,
        timeout: Duration,
        what: &str,
    ) -> (bool, Value) {
        let a = self.response(id, timeout, what);
        tool_json(&a, what)
    }

    /// `tools/call name args`: returns (isError, the tool's JSON from the text content).
    pub(crate) fn call_tool(
        &mut self,
        name: &str,
        args: Value,
        timeout: Duration,
    ) -> (bool, Value) {
        let id = self.start_tool(name, args);
        self.tool_answer(&id, timeout, name)
    }

    /// A tool call that must succeed; returns its JSON.
    pub(crate) fn ok_tool(&mut self, name: &str, args: Value, timeout: Duration) -> Value {
        let (is_error, v) = self.call_tool(name, args.clone(), timeout);
        assert!(
            !is_error && v["success"] != false,
            "{name} {args} failed: {v}"
        );
        v
    }

    /// Closes stdin (end of input) and waits for the exit.
    pub(crate) fn close_and_wait(&mut self, timeout: Duration) -> ExitStatus {
        drop(self.stdin.take());
        let t = Instant::now();
        self.status = wait_until(timeout, || self.child.try_wait().ok().flatten());
        self.status.unwrap_or_else(|| {
            panic!(
                "the server still runs {:?} after its stdin closed\n--- stderr ---\n{}",
                t.elapsed(),
                self.err.all().join("\n")
            )
        })
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let pid = self.pid();
        drop(self.stdin.take());
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        kill_browsers_of(pid);
    }
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// (isError, the tool's JSON) of a tools/call answer; checks that the text content and
/// `structuredContent` agree.
pub(crate) fn tool_json(a: &Value, name: &str) -> (bool, Value) {
    let r = a
        .get("result")
        .unwrap_or_else(|| panic!("tools/call {name} gave no result: {a}"));
    let text = r["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("tools/call {name}: no text content: {a}"));
    assert_eq!(r["content"][0]["type"], "text", "{a}");
    let v: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("tools/call {name}: text content is not JSON ({e}): {a}"));
    assert_eq!(r["structuredContent"], v, "structuredContent = text: {a}");
    let is_error = r["isError"].as_bool().unwrap_or(false);
    assert_eq!(
        is_error,
        v["success"] == false,
        "isError iff success is false: {a}"
    );
    (is_error, v)
}

/// Every stdout line is one JSON-RPC 2.0 message: a response, or a notification.
pub(crate) fn assert_stdout_is_json_rpc(lines: &[String]) {
    for l in lines {
        let v: Value = serde_json::from_str(l)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l:?}"));
        assert_eq!(v["jsonrpc"], "2.0", "not a JSON-RPC 2.0 message: {l}");
        if v.get("method").is_some() {
            assert!(
                v.get("id").is_none() && v["params"].is_object(),
                "a notification: {l}"
            );
            continue;
        }
        assert!(
            v.get("result").is_some() != v.get("error").is_some(),
            "exactly one of result/error: {l}"
        );
    }
}

pub(crate) fn initialize(mcp: &mut Mcp) -> Value {
    let a = mcp.request(
        "initialize",
        json!({
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "mcp_stdio test", "version": "0"}
        }),
        T,
    );
    mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    a
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn handshake_ping_and_tools_list() {
    let mut mcp = Mcp::start(&[]);
    let init = mcp.request(
        "initialize",
        json!({
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "mcp_stdio test", "version": "0"}
        }),
        T,
    );
    let r = &init["result"];
    assert_eq!(r["protocolVersion"], PROTOCOL, "{init}");
    assert!(r["capabilities"]["tools"].is_object(), "{init}");
    assert!(r["capabilities"]["logging"].is_object(), "{init}");
    assert!(r["serverInfo"]["name"].is_string(), "{init}");
    assert!(r["serverInfo"]["version"].is_string(), "{init}");

    // A notification gets no answer: the next line is the ping's.
    mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let ping = mcp.request("ping", json!({}), T);
    assert_eq!(ping["result"], json!({}), "{ping}");

    let list = mcp.request("tools/list", json!({}), T);
    let tools = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools/list: {list}"));
    let mut names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    names.sort_unstable();
    let mut want = TOOLS.to_vec();
    want.sort_unstable();
    assert_eq!(names, want, "{list}");
    for t in tools {
        let schema = &t["inputSchema"];
        assert_eq!(schema["type"], "object", "{t}");
        assert!(
            schema["properties"]["task_id"].is_object(),
            "every tool takes an optional task_id: {t}"
        );
        assert!(
            !schema["required"]
                .as_array()
                .is_some_and(|r| r.contains(&json!("task_id"))),
            "task_id is optional: {t}"
        );
        assert!(t["description"].is_string(), "{t}");
        assert!(t["title"].is_string(), "a title: {t}");
        for (name, prop) in schema["properties"].as_object().unwrap() {
            assert!(
                prop["description"].as_str().is_some_and(|d| !d.is_empty()),
                "property {name} has a description: {t}"
            );
        }
        let ann = &t["annotations"];
        assert!(ann["readOnlyHint"].is_boolean(), "annotations: {t}");
        let out = &t["outputSchema"];
        assert_eq!(out["type"], "object", "{t}");
        assert_eq!(out["required"], json!(["success"]), "{t}");
        assert_eq!(out["properties"]["success"]["type"], "boolean", "{t}");
        assert!(
            out.get("additionalProperties").is_none(),
            "output may carry more fields: {t}"
        );
    }
    let by_name = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap().clone();
    assert_eq!(
        by_name("browser_snapshot")["annotations"]["readOnlyHint"],
        true
    );
    let cdp_ann = &by_name("browser_cdp")["annotations"];
    assert_eq!(cdp_ann["destructiveHint"], true, "{cdp_ann}");
    assert_eq!(cdp_ann["openWorldHint"], true, "{cdp_ann}");
    assert_eq!(
        by_name("browser_connect")["annotations"]["openWorldHint"],
        true
    );
    let cdp_doc = by_name("browser_cdp")["description"]
        .as_str()
        .unwrap()
        .to_string();
    for needle in [
        "frame_id",
        "target_id",
        "domain",
        "Browser",
        "blocked_by_dialog",
    ] {
        assert!(
            cdp_doc.contains(needle),
            "browser_cdp's description explains {needle}: {cdp_doc}"
        );
    }
    let dialog = tools
        .iter()
        .find(|t| t["name"] == "browser_dialog")
        .unwrap();
    assert!(
        dialog["inputSchema"]["required"]
            .as_array()
            .is_some_and(|r| r.contains(&json!("action"))),
        "browser_dialog requires action: {dialog}"
    );
    let cdp = tools.iter().find(|t| t["name"] == "browser_cdp").unwrap();
    assert!(
        cdp["inputSchema"]["required"]
            .as_array()
            .is_some_and(|r| r.contains(&json!("method"))),
        "browser_cdp requires method: {cdp}"
    );

    // Tools used before browser_connect fail as tool results, not protocol errors.
    let (is_error, v) = mcp.call_tool("browser_snapshot", json!({}), T);
    assert!(is_error && v["success"] == false, "{v}");

    let status = mcp.close_and_wait(STOP);
    assert_eq!(status.code(), Some(0), "exit at end of input: {status}");
    assert_stdout_is_json_rpc(&mcp.out.all());
}

const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>mcp page</title></head>
<body><p>mcp</p></body></html>"#;

#[test]
fn session_against_chromium_launched_by_the_server() {
    let chrome = match common::chromium_path() {
        Some(p) => p,
        None => {
            assert!(
                !common::e2e_required(),
                "CDP_SUPERVISOR_E2E=require but no Chromium found (set CHROME or install chromium)"
            );
            eprintln!("SKIPPED: no Chromium");
            return;
        }
    };
    let server = HttpServer::start(|req| match req.path.as_str() {
        "/" => Response::html(PAGE),
        _ => Response::not_found(),
    });
    let page_url = server.url("127.0.0.1", "/");

    let mut mcp = Mcp::start(&[("CHROME", chrome.as_os_str())]);
    let init = initialize(&mut mcp);
    assert_eq!(init["result"]["protocolVersion"], PROTOCOL, "{init}");

    // No cdp_url: the server launches Chromium itself.
    let conn = mcp.ok_tool("browser_connect", json!({}), Duration::from_secs(40));
    assert_eq!(conn["success"], true, "{conn}");
    assert_eq!(conn["task_id"], "default", "{conn}");
    let page = conn["page_target_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no page_target_id: {conn}"))
        .to_string();
    assert!(
        conn["cdp_url"]
            .as_str()
            .is_some_and(|u| u.starts_with("ws://")),
        "{conn}"
    );

    // The launched browser: from the log if the server logs it, else by its profile directory.
    let launched = browsers_of(mcp.pid());
    assert_eq!(
        launched.len(),
        1,
        "exactly one Chromium launched by the server: {launched:?}"
    );
    let chromium = launched[0];
    if let Some(logged) = mcp.err.all().iter().find_map(|l| launched_pid(l)) {
        assert_eq!(logged, chromium, "the logged pid is the launched browser");
    }
    let profiles = profiles_of(mcp.pid());
    assert_eq!(profiles.len(), 1, "one temporary profile: {profiles:?}");

    // Navigate through browser_cdp and wait for the snapshot to show the page.
    let nav = mcp.ok_tool(
        "browser_cdp",
        json!({"method": "Page.navigate", "params": {"url": page_url}, "target_id": page}),
        T,
    );
    assert!(nav["result"]["frameId"].is_string(), "{nav}");
    let mut last = Value::Null;
    let top = wait_until(T, || {
        let snap = mcp.ok_tool("browser_snapshot", json!({}), T);
        let hit = snap["frame_tree"]["top"]["url"] == page_url.as_str();
        last = snap;
        hit.then_some(())
    });
    assert!(
        top.is_some(),
        "the top frame never showed {page_url}: {last}"
    );
    assert_eq!(last["page_target_id"], page.as_str(), "{last}");
    assert_eq!(last["pending_dialogs"], json!([]), "{last}");

    // A prompt, scheduled so that the evaluation returns at once.
    let trigger = mcp.ok_tool(
        "browser_cdp",
        json!({
            "method": "Runtime.evaluate",
            "params": {"expression":
                "setTimeout(() => fetch('/report?' + encodeURIComponent(prompt('Name?', 'x'))), 0)"},
            "target_id": page
        }),
        T,
    );
    assert!(trigger["result"].is_object(), "{trigger}");
    let pending = wait_until(T, || {
        last = mcp.ok_tool("browser_snapshot", json!({}), T);
        last["pending_dialogs"].as_array()?.first().cloned()
    });
    let d = pending.unwrap_or_else(|| panic!("the prompt never showed as pending: {last}"));
    assert_eq!(d["type"], "prompt", "{d}");
    assert_eq!(d["message"], "Name?", "{d}");
    assert_eq!(d["default_prompt"], "x", "{d}");
    let dialog_id = d["id"].as_str().expect("dialog id").to_string();

    let answer = mcp.ok_tool(
        "browser_dialog",
        json!({"action": "accept", "prompt_text": "mcp ✓"}),
        T,
    );
    assert_eq!(answer["success"], true, "{answer}");
    assert_eq!(answer["action"], "accept", "{answer}");
    assert_eq!(answer["dialog"]["id"], dialog_id.as_str(), "{answer}");
    assert_eq!(
        server.wait_report(T).as_deref(),
        Some("mcp ✓"),
        "the page's prompt() returned exactly the text given"
    );
    let snap = mcp.ok_tool("browser_snapshot", json!({}), T);
    assert_eq!(snap["pending_dialogs"], json!([]), "{snap}");
    let closed = snap["recent_dialogs"]
        .as_array()
        .and_then(|r| r.iter().find(|c| c["id"] == dialog_id.as_str()))
        .unwrap_or_else(|| panic!("the prompt is not in recent_dialogs: {snap}"));
    assert_eq!(closed["closed_by"], "agent", "{snap}");

    // Answering again: no dialog open, a tool error.
    let (is_error, again) = mcp.call_tool("browser_dialog", json!({"action": "dismiss"}), T);
    assert!(is_error && again["success"] == false, "{again}");

    let eval = mcp.ok_tool(
        "browser_cdp",
        json!({"method": "Runtime.evaluate", "params": {"expression": "1+2"}, "target_id": page}),
        T,
    );
    assert_eq!(eval["method"], "Runtime.evaluate", "{eval}");
    assert_eq!(eval["result"]["result"]["value"], 3, "{eval}");

    // An unknown frame id: a tool error pointing at frame_tree.
    let (is_error, bad) = mcp.call_tool(
        "browser_cdp",
        json!({"method": "Runtime.evaluate", "params": {"expression": "1"}, "frame_id": "NO-SUCH-FRAME"}),
        T,
    );
    assert!(is_error && bad["success"] == false, "{bad}");
    assert!(
        bad["error"]
            .as_str()
            .is_some_and(|e| e.contains("frame_tree")),
        "{bad}"
    );

    let disc = mcp.ok_tool("browser_disconnect", json!({}), T);
    assert_eq!(disc["success"], true, "{disc}");
    let (is_error, gone) = mcp.call_tool("browser_snapshot", json!({}), T);
    assert!(
        is_error && gone["success"] == false,
        "no supervisor after disconnect: {gone}"
    );

    let status = mcp.close_and_wait(STOP);
    assert_eq!(
        status.code(),
        Some(0),
        "exit 0 at end of input: {status}\n--- stderr ---\n{}",
        mcp.err.all().join("\n")
    );
    assert!(
        wait_until(STOP, || (!alive(chromium)).then_some(())).is_some(),
        "the Chromium the server launched (pid {chromium}) outlived it"
    );
    assert!(
        wait_until(STOP, || (!profiles[0].exists()).then_some(())).is_some(),
        "the profile {} was not removed",
        profiles[0].display()
    );
    assert_stdout_is_json_rpc(&mcp.out.all());
}

/// What a malformed line must get back.
enum Expect {
    /// A JSON-RPC error with this code (and this id).
    Error(i64, Value),
    /// Either a JSON-RPC `-32602` error or a tool result with `isError: true` (for this id).
    InvalidParamsOrToolError(Value),
}

#[test]
fn malformed_input_gets_json_rpc_errors_and_the_server_survives() {
    let mut mcp = Mcp::start(&[]);
    initialize(&mut mcp);

    let garbage = "z".repeat(100 * 1024);
    let cases: Vec<(String, Expect)> = vec![
        ("{".into(), Expect::Error(-32700, Value::Null)),
        ("[]".into(), Expect::Error(-32600, Value::Null)),
        ("\"x\"".into(), Expect::Error(-32600, Value::Null)),
        ("42".into(), Expect::Error(-32600, Value::Null)),
        (
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#.into(),
            Expect::Error(-32600, Value::Null),
        ),
        (garbage, Expect::Error(-32700, Value::Null)),
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"browser_dialog","arguments":{"action":5}}}"#.into(),
            Expect::InvalidParamsOrToolError(json!(5)),
        ),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"no/such/method"}"#.into(),
            Expect::Error(-32601, json!(6)),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"seven","method":"tools/call","params":{"name":"browser_nope","arguments":{}}}"#.into(),
            Expect::Error(-32602, json!("seven")),
        ),
        (
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"browser_snapshot","arguments":[]}}"#.into(),
            Expect::InvalidParamsOrToolError(json!(8)),
        ),
        (
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"browser_snapshot","arguments":{"task_id":7}}}"#.into(),
            Expect::InvalidParamsOrToolError(json!(9)),
        ),
        (
            r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{}}"#.into(),
            Expect::Error(-32602, json!(10)),
        ),
        (
            r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"browser_cdp","arguments":{}}}"#.into(),
            Expect::InvalidParamsOrToolError(json!(11)),
        ),
    ];
    let mut problems = Vec::new();
    for (line, expect) in &cases {
        mcp.send_raw(line.as_bytes());
        let shown: String = line.chars().take(120).collect();
        let a = mcp.next(T, &shown);
        match expect {
            Expect::Error(code, id) => {
                if a["error"]["code"] != json!(code) || a["id"] != *id {
                    problems.push(format!("{shown}: want error {code} with id {id}, got {a}"));
                } else if !a["error"]["message"].is_string() {
                    problems.push(format!("{shown}: error without a message: {a}"));
                }
            }
            Expect::InvalidParamsOrToolError(id) => {
                let protocol = a["error"]["code"] == -32602;
                let tool = a["result"]["isError"] == true;
                if !(protocol || tool) || a["id"] != *id {
                    problems.push(format!(
                        "{shown}: want -32602 or a tool result with isError (id {id}), got {a}"
                    ));
                }
            }
        }
    }

    // Invalid UTF-8 is a parse error too.
    mcp.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"\xff\xfe\"}");
    let a = mcp.next(T, "invalid UTF-8");
    if a["error"]["code"] != -32700 && a["error"]["code"] != -32600 && a["error"]["code"] != -32601
    {
        problems.push(format!("invalid UTF-8: want a JSON-RPC error, got {a}"));
    }

    // No answers to notifications (known or not), blank lines, or responses without an id.
    mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}}));
    mcp.send_raw(b"");
    mcp.send_raw(b"   ");
    let ping = mcp.request("ping", json!({}), T);
    assert_eq!(ping["result"], json!({}), "ping still answers: {ping}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    let status = mcp.close_and_wait(STOP);
    assert_eq!(status.code(), Some(0), "exit at end of input: {status}");
    let lines = mcp.out.all();
    assert_stdout_is_json_rpc(&lines);
    // One answer per request that has one: initialize, the cases, invalid UTF-8, ping.
    assert_eq!(lines.len(), 1 + cases.len() + 1 + 1, "{lines:#?}");
}

// ---------------------------------------------------------------------------
// Strict JSON-RPC, argument errors
// ---------------------------------------------------------------------------

/// `VmHWM` (peak resident set, KiB) of process `pid`.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmHWM")
}

#[test]
fn strict_json_rpc_oversized_lines_in_bounded_memory_and_no_batches() {
    let mut mcp = Mcp::start(&[]);
    // A 2025-03-26 client (the one version with batches) is offered 2024-11-05.
    let init = mcp.request(
        "initialize",
        json!({"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        T,
    );
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05", "{init}");

    // "jsonrpc": "2.0" is required.
    mcp.send_raw(br#"{"id":1,"method":"ping"}"#);
    let a = mcp.next(T, "no jsonrpc");
    assert_eq!(
        (a["error"]["code"].clone(), a["id"].clone()),
        (json!(-32600), json!(1)),
        "{a}"
    );
    mcp.send_raw(br#"{"jsonrpc":"1.0","id":2,"method":"ping"}"#);
    let a = mcp.next(T, "jsonrpc 1.0");
    assert_eq!(a["error"]["code"], -32600, "{a}");

    // Responses from the client are not answered: the next line is the ping's.
    mcp.send_raw(br#"{"jsonrpc":"2.0","id":77,"result":{}}"#);
    mcp.send_raw(br#"{"jsonrpc":"2.0","id":78,"error":{"code":-1,"message":"no"}}"#);
    mcp.send_raw(br#"{"jsonrpc":"2.0","id":"p1","method":"ping"}"#);
    let a = mcp.next(T, "ping after client responses");
    assert_eq!(a["id"], "p1", "client responses got an answer: {a}");

    // Batches are refused.
    mcp.send_raw(br#"[{"jsonrpc":"2.0","id":3,"method":"ping"}]"#);
    let a = mcp.next(T, "batch");
    assert_eq!(
        (a["error"]["code"].clone(), a["id"].clone()),
        (json!(-32600), Value::Null),
        "{a}"
    );

    // A 48 MiB line (3x the 16 MiB limit) is skipped without being held whole.
    let before = peak_rss_kib(mcp.pid());
    let huge = vec![b'x'; 48 << 20];
    mcp.send_raw(&huge);
    drop(huge);
    let a = mcp.next(T, "oversized line");
    assert_eq!(
        (a["error"]["code"].clone(), a["id"].clone()),
        (json!(-32700), Value::Null),
        "{a}"
    );
    let grew_mib = peak_rss_kib(mcp.pid()).saturating_sub(before) / 1024;
    assert!(
        grew_mib < 24,
        "the server's peak memory grew by {grew_mib} MiB for a 48 MiB line"
    );
    let ping = mcp.request("ping", json!({}), T);
    assert_eq!(ping["result"], json!({}), "{ping}");

    // logging/setLevel.
    let ok = mcp.request("logging/setLevel", json!({"level": "warning"}), T);
    assert_eq!(ok["result"], json!({}), "{ok}");
    let bad = mcp.request("logging/setLevel", json!({"level": "loud"}), T);
    assert_eq!(bad["error"]["code"], -32602, "{bad}");

    let status = mcp.close_and_wait(STOP);
    assert_eq!(status.code(), Some(0), "{status}");
    assert_stdout_is_json_rpc(&mcp.out.all());
}

#[test]
fn typos_in_argument_names_and_bad_task_ids_are_tool_errors() {
    let mut mcp = Mcp::start(&[]);
    initialize(&mut mcp);
    let cases = [
        (
            "browser_cdp",
            json!({"method": "Page.navigate", "targetId": "T"}),
            vec!["targetId", "target_id", "frame_id"],
        ),
        (
            "browser_connect",
            json!({"cdpUrl": "ws://127.0.0.1:9/"}),
            vec!["cdpUrl", "cdp_url"],
        ),
        (
            "browser_dialog",
            json!({"action": "accept", "promptText": "x"}),
            vec!["promptText", "prompt_text"],
        ),
        ("browser_snapshot", json!({"task": "a"}), vec!["task_id"]),
        (
            "browser_disconnect",
            json!({"taskId": "a"}),
            vec!["task_id"],
        ),
        ("browser_snapshot", json!({"task_id": ""}), vec!["task_id"]),
        (
            "browser_cdp",
            json!({"task_id": 7, "method": "X.y"}),
            vec!["task_id"],
        ),
        (
            "browser_connect",
            json!({"task_id": ["a"]}),
            vec!["task_id"],
        ),
    ];
    for (tool, args, words) in cases {
        let id = mcp.start_tool(tool, args.clone());
        let a = mcp.response(&id, T, tool);
        assert!(
            a.get("error").is_none(),
            "{tool} {args}: a tool error, not a JSON-RPC error: {a}"
        );
        let (is_error, v) = tool_json(&a, tool);
        assert!(is_error, "{tool} {args}: {v}");
        let e = v["error"].as_str().unwrap_or_default();
        for w in words {
            assert!(e.contains(w), "{tool} {args}: the error names {w}: {e}");
        }
    }
    // Disconnecting a task that is not connected is harmless.
    let d = mcp.ok_tool("browser_disconnect", json!({"task_id": "nobody"}), T);
    assert_eq!(d["stopped"], false, "{d}");
    // The one wording for a task without a supervisor.
    let (_, s) = mcp.call_tool("browser_snapshot", json!({"task_id": "nobody"}), T);
    assert!(
        s["error"]
            .as_str()
            .is_some_and(|e| e.contains("no browser supervisor for task \"nobody\"")),
        "{s}"
    );
    mcp.close_and_wait(STOP);
}

// ---------------------------------------------------------------------------
// Concurrency, dialogs, cancellation (a tab of the shared Chromium per test)
// ---------------------------------------------------------------------------

/// A new blank tab in the shared Chromium: (its browser WebSocket URL, the tab's target id).
fn shared_tab() -> Option<(String, String)> {
    let b = common::shared_browser()?;
    let mut cdp = common::RawCdp::connect(&b.ws_url).expect("connect to the shared Chromium");
    let tab = cdp.new_page("about:blank").expect("a new tab");
    Some((b.ws_url.clone(), tab))
}

/// An MCP server connected (task `default`) to a new tab of the shared Chromium.
fn server_on_shared_tab() -> Option<(Mcp, String)> {
    let (ws, tab) = shared_tab()?;
    let mut mcp = Mcp::start(&[]);
    initialize(&mut mcp);
    let c = mcp.ok_tool(
        "browser_connect",
        json!({"cdp_url": ws, "target_id": tab}),
        T,
    );
    assert_eq!(c["page_target_id"], tab.as_str(), "{c}");
    Some((mcp, tab))
}

/// Issue 30: `browser_connect` names the task's CDP endpoint; its `/json/version` names the
/// same `ws://` URL, and a raw client that connects there sees the task's page.
#[test]
fn browser_connect_names_the_tasks_cdp_endpoint_and_its_json_version_answers_with_it() {
    let Some((ws, tab)) = shared_tab() else {
        return;
    };
    let mut mcp = Mcp::start(&[]);
    initialize(&mut mcp);
    let c = mcp.ok_tool(
        "browser_connect",
        json!({"cdp_url": ws, "target_id": tab}),
        T,
    );
    let ep = c["cdp_endpoint"]
        .as_str()
        .expect("cdp_endpoint")
        .to_string();
    let http = c["cdp_http_endpoint"]
        .as_str()
        .expect("cdp_http_endpoint")
        .to_string();
    assert!(ep.starts_with("ws://127.0.0.1:"), "{c}");
    assert!(ep.contains("/devtools/browser/"), "{c}");
    assert!(http.starts_with("http://127.0.0.1:"), "{c}");
    let token = http.rsplit('/').next().unwrap();
    assert!(token.len() >= 32, "a token of 128 bits: {http}");
    assert!(ep.contains(&format!("/{token}/devtools/browser/")), "{c}");
    for path in ["/json/version", "/json/version/"] {
        let (status, body) = crate::e2e_cdp_endpoint::get(&http, path, &[]);
        assert_eq!(status, 200, "{path}: {body}");
        let v: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(v["webSocketDebuggerUrl"], ep.as_str(), "{v}");
        assert!(v["Browser"].as_str().unwrap().contains("Chrome"), "{v}");
    }
    let (status, list) = crate::e2e_cdp_endpoint::get(&http, "/json/list", &[]);
    assert_eq!(status, 200, "{list}");
    assert!(list.contains(&tab), "{list}");
    let mut raw = common::RawCdp::connect(&ep).expect("a raw client through the endpoint");
    let targets = raw
        .call("Target.getTargets", json!({}), None, T)
        .expect("Target.getTargets");
    assert!(targets.to_string().contains(&tab), "{targets}");
    // The same task again: the same endpoint.
    let again = mcp.ok_tool(
        "browser_connect",
        json!({"cdp_url": ws, "target_id": tab}),
        T,
    );
    assert_eq!(again["cdp_endpoint"], ep.as_str(), "{again}");
    drop(raw);
    mcp.close_and_wait(STOP);
}

fn evaluate(expression: &str) -> Value {
    json!({"method": "Runtime.evaluate", "params": {"expression": expression, "awaitPromise": true, "returnByValue": true}})
}

const FAST: Duration = Duration::from_millis(100);

#[test]
fn ping_snapshot_and_dialog_are_answered_at_once_while_a_call_waits_on_the_page() {
    let Some((mut mcp, tab)) = server_on_shared_tab() else {
        return;
    };
    let started = Instant::now();
    let slow = mcp.start_tool(
        "browser_cdp",
        evaluate("new Promise(r => setTimeout(() => r(42), 3000))"),
    );
    let mut times = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let p = mcp.request("ping", json!({}), T);
        assert_eq!(p["result"], json!({}), "{p}");
        times.push(("ping", t.elapsed()));

        let t = Instant::now();
        let s = mcp.ok_tool("browser_snapshot", json!({}), T);
        assert_eq!(s["page_target_id"], tab.as_str(), "{s}");
        times.push(("browser_snapshot", t.elapsed()));

        let t = Instant::now();
        let (is_error, d) = mcp.call_tool("browser_dialog", json!({"action": "accept"}), T);
        assert!(is_error, "no dialog is open: {d}");
        times.push(("browser_dialog", t.elapsed()));
    }
    eprintln!("round trips while a 3 s call is in flight: {times:?}");
    for (what, t) in &times {
        assert!(*t < FAST, "{what} took {t:?} while a call was in flight");
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the checks ran while the call was in flight"
    );
    let (is_error, v) = mcp.tool_answer(&slow, T, "the 3 s evaluate");
    assert!(!is_error, "{v}");
    assert_eq!(v["result"]["result"]["value"], 42, "{v}");
    assert_eq!(v["routed_to"], "page", "{v}");
    assert!(started.elapsed() >= Duration::from_millis(2900), "{v}");
    mcp.close_and_wait(STOP);
}

#[test]
fn confirm_in_an_evaluate_fails_at_once_with_blocked_by_dialog_and_is_pushed_to_the_client() {
    let Some((mut mcp, _tab)) = server_on_shared_tab() else {
        return;
    };
    let t = Instant::now();
    let (is_error, v) = mcp.call_tool("browser_cdp", evaluate("window.r = confirm('sure?')"), T);
    let took = t.elapsed();
    eprintln!("blocked_by_dialog after {took:?}");
    assert!(is_error, "{v}");
    assert!(took < Duration::from_secs(1), "took {took:?}: {v}");
    let d = &v["blocked_by_dialog"];
    assert_eq!(d["type"], "confirm", "{v}");
    assert_eq!(d["message"], "sure?", "{v}");
    assert_eq!(v["pending_dialogs"][0]["id"], d["id"], "{v}");
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|e| e.contains("browser_dialog")),
        "{v}"
    );

    let note = mcp
        .note(T, |n| {
            n["method"] == "notifications/message"
                && n["params"]["data"]["event"] == "dialog_opened"
        })
        .unwrap_or_else(|| panic!("no dialog_opened message: {:?}", mcp.notes));
    assert_eq!(note["params"]["level"], "warning", "{note}");
    assert_eq!(note["params"]["logger"], "cdp-supervisor", "{note}");
    assert_eq!(note["params"]["data"]["task_id"], "default", "{note}");
    assert_eq!(note["params"]["data"]["dialog"]["id"], d["id"], "{note}");

    let a = mcp.ok_tool("browser_dialog", json!({"action": "accept"}), T);
    assert_eq!(a["dialog"]["id"], d["id"], "{a}");
    let r = mcp.ok_tool("browser_cdp", evaluate("window.r"), T);
    assert_eq!(r["result"]["result"]["value"], true, "{r}");
    assert!(r.get("pending_dialogs").is_none(), "{r}");
    mcp.close_and_wait(STOP);
}

#[test]
fn a_cancelled_call_gets_no_response_and_the_server_carries_on() {
    let Some((mut mcp, _tab)) = server_on_shared_tab() else {
        return;
    };
    let slow = mcp.start_tool(
        "browser_cdp",
        evaluate("new Promise(r => setTimeout(() => r(1), 1500))"),
    );
    mcp.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": slow, "reason": "test"}}),
    );
    // Unknown ids are ignored.
    mcp.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 987654}}),
    );
    let p = mcp.request("ping", json!({}), T);
    assert_eq!(p["result"], json!({}), "{p}");
    let r = mcp.ok_tool("browser_cdp", evaluate("1 + 1"), T);
    assert_eq!(r["result"]["result"]["value"], 2, "{r}");
    // Past the promise's 1.5 s: still no response for the cancelled request.
    mcp.assert_no_response(&slow, Duration::from_millis(2500));
    mcp.close_and_wait(STOP);
    assert_stdout_is_json_rpc(&mcp.out.all());
}

// ---------------------------------------------------------------------------
// The server's own browser: shutdown, per-task tabs, relaunch
// ---------------------------------------------------------------------------

/// Chromium's path, or `None` (the test skips) when there is none.
fn chromium_or_skip() -> Option<std::path::PathBuf> {
    let chrome = common::chromium_path();
    if chrome.is_none() {
        assert!(
            !common::e2e_required(),
            "CDP_SUPERVISOR_E2E=require but no Chromium found"
        );
        eprintln!("SKIPPED: no Chromium");
    }
    chrome
}

/// A fresh, empty directory to be the server's `$TMPDIR`.
fn fresh_tmpdir(name: &str) -> std::path::PathBuf {
    // Short: Chromium's singleton socket lives below it, and socket paths are limited to 107
    // bytes.
    let dir = std::env::temp_dir().join(format!("mcp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).expect("create a TMPDIR for the server");
    dir
}

fn entries(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// Live processes whose command line mentions `needle` (the browser and all its helpers
/// name the profile directory).
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.windows(needle.len()).any(|w| w == needle.as_bytes()))
                && alive(*p)
        })
        .collect()
}

/// Pids of the browsers the server logged as launched, in order.
fn launched_pids(mcp: &Mcp) -> Vec<u32> {
    mcp.err
        .all()
        .iter()
        .filter_map(|l| launched_pid(l))
        .collect()
}

enum Stop {
    EndOfInput,
    Sigterm,
}

fn stop_during_a_call(how: Stop, name: &str) {
    let Some(chrome) = chromium_or_skip() else {
        return;
    };
    let tmp = fresh_tmpdir(name);
    let mut mcp = Mcp::start(&[("CHROME", chrome.as_os_str()), ("TMPDIR", tmp.as_os_str())]);
    initialize(&mut mcp);
    mcp.ok_tool("browser_connect", json!({}), Duration::from_secs(40));
    let chromium = wait_until(T, || launched_pids(&mcp).first().copied())
        .unwrap_or_else(|| panic!("no launch logged: {}", mcp.err.all().join("\n")));
    assert!(alive(chromium));
    let profile = entries(&tmp);
    assert_eq!(profile.len(), 1, "only the profile in $TMPDIR: {profile:?}");
    let needle = tmp.to_string_lossy().into_owned();

    // A call in flight (ping answered after it: the server has dispatched it), and a dialog
    // pending in a second task, which the stop must dismiss.
    mcp.ok_tool("browser_connect", json!({"task_id": "b"}), T);
    mcp.ok_tool(
        "browser_cdp",
        json!({"task_id": "b", "method": "Runtime.evaluate",
               "params": {"expression": "setTimeout(() => alert('left open'), 0)"}}),
        T,
    );
    assert!(
        mcp.note(T, |n| n["params"]["data"]["event"] == "dialog_opened")
            .is_some()
    );
    let slow = mcp.start_tool(
        "browser_cdp",
        evaluate("new Promise(r => setTimeout(r, 30000))"),
    );
    mcp.request("ping", json!({}), T);

    let t = Instant::now();
    match how {
        Stop::EndOfInput => drop(mcp.stdin.take()),
        // SAFETY: kill(2) on our own child.
        Stop::Sigterm => unsafe {
            libc::kill(mcp.pid() as libc::pid_t, libc::SIGTERM);
        },
    }
    let status = mcp.close_and_wait(STOP);
    let took = t.elapsed();
    eprintln!("{name}: the server exited after {took:?}");
    assert!(took < Duration::from_secs(2), "{name}: took {took:?}");
    assert_eq!(status.code(), Some(0), "{name}: {status}");
    assert!(mcp.out.wait_end(T));
    while mcp.pump(Instant::now()) {}
    assert!(
        !mcp.responses.contains_key(&slow.to_string()),
        "{name}: the call in flight was answered: {:?}",
        mcp.responses
    );
    assert!(!alive(chromium), "{name}: the browser {chromium} is alive");
    let left = wait_until(Duration::from_secs(2), || {
        let l = processes_mentioning(&needle);
        l.is_empty().then_some(())
    });
    assert!(
        left.is_some(),
        "{name}: processes of the browser are left: {:?}",
        processes_mentioning(&needle)
    );
    assert_eq!(
        entries(&tmp),
        Vec::<String>::new(),
        "{name}: left in $TMPDIR"
    );
    let _ = std::fs::remove_dir(&tmp);
}

#[test]
fn end_of_input_during_a_call_ends_the_server_within_2_s_and_leaves_nothing() {
    stop_during_a_call(Stop::EndOfInput, "eof");
}

#[test]
fn sigterm_during_a_call_ends_the_server_within_2_s_and_leaves_nothing() {
    stop_during_a_call(Stop::Sigterm, "term");
}

#[test]
fn tasks_without_cdp_url_get_own_tabs_and_dialogs_and_browser_close_relaunches() {
    let Some(chrome) = chromium_or_skip() else {
        return;
    };
    let mut mcp = Mcp::start(&[("CHROME", chrome.as_os_str())]);
    initialize(&mut mcp);
    let a = mcp.ok_tool(
        "browser_connect",
        json!({"task_id": "a"}),
        Duration::from_secs(40),
    );
    let b = mcp.ok_tool("browser_connect", json!({"task_id": "b"}), T);
    assert_eq!(a["cdp_url"], b["cdp_url"], "one launched browser: {a} {b}");
    let (page_a, page_b) = (a["page_target_id"].clone(), b["page_target_id"].clone());
    assert!(page_a.is_string() && page_b.is_string(), "{a} {b}");
    assert_ne!(page_a, page_b, "each task has its own tab");

    // An alert in a is a's alone.
    mcp.ok_tool(
        "browser_cdp",
        json!({"task_id": "a", "method": "Runtime.evaluate",
               "params": {"expression": "setTimeout(() => alert('only a'), 0)"}}),
        T,
    );
    let note = mcp
        .note(T, |n| n["params"]["data"]["event"] == "dialog_opened")
        .expect("dialog_opened");
    assert_eq!(note["params"]["data"]["task_id"], "a", "{note}");
    let sa = mcp.ok_tool("browser_snapshot", json!({"task_id": "a"}), T);
    assert_eq!(sa["pending_dialogs"][0]["message"], "only a", "{sa}");
    let sb = mcp.ok_tool("browser_snapshot", json!({"task_id": "b"}), T);
    assert_eq!(sb["pending_dialogs"], json!([]), "{sb}");
    let eb = mcp.ok_tool(
        "browser_cdp",
        json!({"task_id": "b", "method": "Runtime.evaluate", "params": {"expression": "2 * 3"}}),
        T,
    );
    assert_eq!(eb["result"]["result"]["value"], 6, "{eb}");
    assert!(eb.get("pending_dialogs").is_none(), "{eb}");
    let (is_error, db) = mcp.call_tool(
        "browser_dialog",
        json!({"task_id": "b", "action": "accept"}),
        T,
    );
    assert!(is_error, "b has no dialog: {db}");

    // Disconnecting b closes b's tab.
    let d = mcp.ok_tool("browser_disconnect", json!({"task_id": "b"}), T);
    assert_eq!(d["stopped"], true, "{d}");
    // The close was sent before the disconnect answered; under load the browser may list the
    // closing tab a moment longer, so look again until it is gone (bounded). A task lists its
    // own targets only (security.isolate_tasks): the browser's list comes from a client of the
    // test's own.
    let targets = mcp.ok_tool(
        "browser_cdp",
        json!({"task_id": "a", "method": "Target.getTargets"}),
        T,
    );
    assert_eq!(targets["routed_to"], "browser", "{targets}");
    let listed: Vec<&Value> = targets["result"]["targetInfos"]
        .as_array()
        .expect("targetInfos")
        .iter()
        .map(|t| &t["targetId"])
        .collect();
    assert_eq!(listed, [&page_a], "a sees its own page only: {targets}");
    let mut raw = common::RawCdp::connect(a["cdp_url"].as_str().expect("the launched browser"))
        .expect("a raw client on the launched browser");
    let deadline = Instant::now()
        .checked_add(T)
        .expect("a deadline within range");
    loop {
        let targets = raw
            .call("Target.getTargets", json!({}), None, T)
            .expect("Target.getTargets");
        let ids: Vec<&Value> = targets["targetInfos"]
            .as_array()
            .expect("targetInfos")
            .iter()
            .map(|t| &t["targetId"])
            .collect();
        assert!(ids.contains(&&page_a), "{targets}");
        if !ids.contains(&&page_b) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "b's tab was not closed: {targets}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let da = mcp.ok_tool("browser_disconnect", json!({"task_id": "a"}), T);
    assert_eq!(da["dismissed_dialogs"][0]["message"], "only a", "{da}");

    // Browser.close goes to the browser; the next browser_connect launches a new one.
    let first = launched_pids(&mcp);
    assert_eq!(first.len(), 1, "{first:?}");
    mcp.ok_tool("browser_connect", json!({"task_id": "c"}), T);
    let (_, closed) = mcp.call_tool(
        "browser_cdp",
        json!({"task_id": "c", "method": "Browser.close"}),
        T,
    );
    eprintln!("Browser.close: {closed}");
    let c = mcp.ok_tool(
        "browser_connect",
        json!({"task_id": "c"}),
        Duration::from_secs(40),
    );
    assert_ne!(c["cdp_url"], a["cdp_url"], "a new browser: {c}");
    let r = mcp.ok_tool(
        "browser_cdp",
        json!({"task_id": "c", "method": "Runtime.evaluate", "params": {"expression": "1 + 1"}}),
        T,
    );
    assert_eq!(r["result"]["result"]["value"], 2, "{r}");
    let pids = launched_pids(&mcp);
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert!(!alive(pids[0]), "the closed browser is gone");

    mcp.close_and_wait(STOP);
    assert!(
        wait_until(STOP, || (!alive(pids[1])).then_some(())).is_some(),
        "the relaunched browser outlived the server"
    );
    assert_stdout_is_json_rpc(&mcp.out.all());
}

#[test]
fn calls_beyond_the_worker_limit_are_refused_at_once_not_queued() {
    let Some((mut mcp, _tab)) = server_on_shared_tab() else {
        return;
    };
    let slow: Vec<Value> = (0..16)
        .map(|_| {
            mcp.start_tool(
                "browser_cdp",
                evaluate("new Promise(r => setTimeout(() => r(7), 1500))"),
            )
        })
        .collect();
    let t = Instant::now();
    let (is_error, v) = mcp.call_tool("browser_cdp", evaluate("1"), T);
    assert!(
        t.elapsed() < FAST,
        "refused at once, took {:?}",
        t.elapsed()
    );
    assert!(is_error, "{v}");
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|e| e.contains("too many tool calls in flight")),
        "{v}"
    );
    // Quick methods are still answered inline.
    let s = mcp.ok_tool("browser_snapshot", json!({}), T);
    assert_eq!(s["success"], true, "{s}");
    for id in &slow {
        let (is_error, v) = mcp.tool_answer(id, T, "a slow evaluate");
        assert!(!is_error && v["result"]["result"]["value"] == 7, "{v}");
    }
    let r = mcp.ok_tool("browser_cdp", evaluate("1 + 2"), T);
    assert_eq!(r["result"]["result"]["value"], 3, "{r}");
    mcp.close_and_wait(STOP);
}

#[test]
fn a_dialog_closed_by_the_policy_is_pushed_as_a_notice() {
    let Some((ws, tab)) = shared_tab() else {
        return;
    };
    let mut mcp = Mcp::start(&[]);
    initialize(&mut mcp);
    mcp.ok_tool(
        "browser_connect",
        json!({"cdp_url": ws, "target_id": tab, "dialog_policy": "auto_dismiss"}),
        T,
    );
    let r = mcp.ok_tool("browser_cdp", evaluate("confirm('auto?')"), T);
    assert_eq!(r["result"]["result"]["value"], false, "dismissed: {r}");
    let note = mcp
        .note(T, |n| n["params"]["data"]["event"] == "dialog_closed")
        .unwrap_or_else(|| panic!("no dialog_closed message: {:?}", mcp.notes));
    assert_eq!(note["params"]["level"], "notice", "{note}");
    assert_eq!(
        note["params"]["data"]["dialog"]["closed_by"], "auto_policy",
        "{note}"
    );
    // Above the client's level: no more messages.
    let ok = mcp.request("logging/setLevel", json!({"level": "error"}), T);
    assert_eq!(ok["result"], json!({}), "{ok}");
    let before = mcp.notes.len();
    mcp.ok_tool("browser_cdp", evaluate("confirm('quiet?')"), T);
    mcp.request("ping", json!({}), T);
    mcp.close_and_wait(STOP);
    while mcp.pump(Instant::now()) {}
    assert_eq!(mcp.notes.len(), before, "{:?}", &mcp.notes[before..]);
}
