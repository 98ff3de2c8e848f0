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

mod common;

use std::io::Write;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::procs::{
    Lines, alive, browsers_of, clean_config_env, kill_browsers_of, launched_pid, profiles_of,
};
use common::{HttpServer, Response, wait_until};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_cdp-supervisor");

/// Deadline of one request/answer round trip (browser_connect launches Chromium: longer).
const T: Duration = Duration::from_secs(10);
/// Deadline for the server (and its browser) to go away after stdin closes.
const STOP: Duration = Duration::from_secs(5);

const PROTOCOL: &str = "2025-06-18";

const TOOLS: [&str; 5] = [
    "browser_connect",
    "browser_snapshot",
    "browser_dialog",
    "browser_cdp",
    "browser_disconnect",
];

// ---------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------

/// `cdp-supervisor mcp`, SIGKILLed and reaped on drop together with any Chromium it launched.
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Lines,
    err: Lines,
    next_id: i64,
    status: Option<ExitStatus>,
}

impl Mcp {
    fn start(envs: &[(&str, &std::ffi::OsStr)]) -> Mcp {
        let mut cmd = Command::new(BIN);
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
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes raw bytes followed by a newline.
    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("write to the server");
        stdin.write_all(b"\n").expect("write to the server");
        stdin.flush().expect("flush to the server");
    }

    fn send(&mut self, msg: &Value) {
        self.send_raw(msg.to_string().as_bytes());
    }

    /// The next stdout line, parsed (panics on non-JSON, or at the deadline).
    fn next(&self, timeout: Duration, waiting_for: &str) -> Value {
        match self.out.rx.recv_timeout(timeout) {
            Ok(line) => serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}")),
            Err(_) => panic!(
                "no answer to {waiting_for} within {timeout:?}\n--- stderr ---\n{}",
                self.err.all().join("\n")
            ),
        }
    }

    /// Sends a request and returns its answer (the next line: the server answers in order).
    fn request(&mut self, method: &str, params: Value, timeout: Duration) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = self.next(timeout, method);
        assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
        assert_eq!(answer["id"], json!(id), "answers come in order: {answer}");
        answer
    }

    /// `tools/call name args`: returns (isError, the tool's JSON from the text content).
    fn call_tool(&mut self, name: &str, args: Value, timeout: Duration) -> (bool, Value) {
        let a = self.request(
            "tools/call",
            json!({"name": name, "arguments": args}),
            timeout,
        );
        let r = a
            .get("result")
            .unwrap_or_else(|| panic!("tools/call {name} gave no result: {a}"));
        let text = r["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("tools/call {name}: no text content: {a}"));
        assert_eq!(r["content"][0]["type"], "text", "{a}");
        let v: Value = serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("tools/call {name}: text content is not JSON ({e}): {a}"));
        let is_error = r["isError"].as_bool().unwrap_or(false);
        (is_error, v)
    }

    /// A tool call that must succeed; returns its JSON.
    fn ok_tool(&mut self, name: &str, args: Value, timeout: Duration) -> Value {
        let (is_error, v) = self.call_tool(name, args.clone(), timeout);
        assert!(
            !is_error && v["success"] != false,
            "{name} {args} failed: {v}"
        );
        v
    }

    /// Closes stdin (end of input) and waits for the exit.
    fn close_and_wait(&mut self, timeout: Duration) -> ExitStatus {
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

/// Every stdout line is one JSON-RPC 2.0 message.
fn assert_stdout_is_json_rpc(lines: &[String]) {
    for l in lines {
        let v: Value = serde_json::from_str(l)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l:?}"));
        assert_eq!(v["jsonrpc"], "2.0", "not a JSON-RPC 2.0 message: {l}");
        assert!(
            v.get("result").is_some() != v.get("error").is_some(),
            "exactly one of result/error: {l}"
        );
    }
}

fn initialize(mcp: &mut Mcp) -> Value {
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
            Expect::Error(-32602, json!(8)),
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
