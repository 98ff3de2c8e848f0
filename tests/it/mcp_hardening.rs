//! The MCP server (`cdp-supervisor mcp`, a subprocess driven over stdio with the harness of
//! [`crate::mcp_stdio`]) against hostile input and cancellation (SPEC §14, §15; issue 20 items
//! 4, 5 and 12). The browser is the fake, in this process, reached over loopback.
//!
//! * a hostile argument cannot disable the server: over 25,000 generated hostile values (every
//!   argument of every tool, unknown keys, non-object arguments) are each answered, none by a
//!   panic, and afterwards a connect, a call and a dialog answer work; task ids with a NUL
//!   (which used to panic a worker and leak its slot) never use up the workers;
//! * ids are echoed byte for byte, on every path (inline, the snapshot fast path, a worker,
//!   refusals, errors), and cancellation and duplicates compare ids as JSON-RPC does;
//! * a cancelled `browser_connect` stops its start at once and leaves nothing behind, and a
//!   cancelled launch closes the browser it was starting.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use cdp_supervisor::fake::{FakeBrowser, Rule};
use serde_json::{Value, json};

use crate::common;
use crate::common::procs::{browsers_of, profiles_of};
use crate::mcp_stdio::{Mcp, STOP, T, initialize, tool_json};

/// Values per argument (and per tool for unknown keys).
const PER_ARGUMENT: usize = 1_000;
/// Requests in flight at once while the generated cases run (below the server's 16, so no call
/// is refused for being one too many).
const WINDOW: usize = 8;

/// Waits until the fake has received `n` commands that `pred` accepts (the earlier ones count).
fn wait_nth(fake: &FakeBrowser, n: usize, pred: impl Fn(&Value) -> bool) -> bool {
    let seen = std::cell::Cell::new(0);
    fake.wait_for_command(
        |c| {
            if pred(c) {
                seen.set(seen.get() + 1);
            }
            seen.get() >= n
        },
        Duration::from_secs(5),
    )
    .is_some()
}

/// A server that cannot launch a browser (a connect without `cdp_url` fails at once).
fn server() -> Mcp {
    let mut mcp = Mcp::start(&[("CHROME", std::ffi::OsStr::new("/nonexistent/chromium"))]);
    initialize(&mut mcp);
    mcp
}

// ---------------------------------------------------------------------------
// Generated hostile values
// ---------------------------------------------------------------------------

/// A small deterministic generator (xorshift64*): the same cases on every run.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// Pieces of JSON string content (already escaped as JSON text).
const CONTROLS: &[&str] = &[
    "\\u0000",
    "\\u0001",
    "\\u0007",
    "\\b",
    "\\t",
    "\\n",
    "\\r",
    "\\u000b",
    "\\f",
    "\\u001b[31m",
    "\\u001f",
    "\\u007f",
    "\\u0085",
    "\\u009b",
    "\\u009f",
    "\u{80}",
    "\u{9c}",
];
const INVISIBLE: &[&str] = &[
    "\u{202E}",
    "\u{202A}",
    "\u{2066}",
    "\u{2069}",
    "\u{200E}",
    "\u{200F}",
    "\u{061C}",
    "\u{200B}",
    "\u{200D}",
    "\u{FEFF}",
    "\u{2028}",
    "\u{2029}",
    "\u{E0041}",
    "\u{00A0}",
    "\u{3000}",
    "\\u202e",
    "\\ufeff",
    "\\u2028",
];
const SURROGATES: &[&str] = &[
    "\\ud800",
    "\\udfff",
    "\\udbff",
    "\\udc00",
    "\\ud83d",
    "\\ude00x",
    "\\ud800\\ud800",
    "\\ud83d\\ude00",
];
const PRINTABLE: &[&str] = &[
    "a", "Z", "0", "-", "_", ".", " ", "/", ":", "é", "任", "务", "з", "🙂", "\\\"", "\\\\", "\\/",
    "%00", "%2e", "${x}", "<b>", "'", "`",
];
const NUMBERS: &[&str] = &[
    "1e400",
    "-1e400",
    "18446744073709551616",
    "-18446744073709551617",
    "-0",
    "0",
    "0.0",
    "1e-400",
    "4.9e-324",
    "1.7976931348623157e308",
    "9007199254740993",
    "-1",
    "0.5",
    "1",
    "300",
    "301",
    "86400",
    "86400.000001",
    "1e9",
    "123456789012345678901234567890123456789012345678901234567890",
];
const NAN_LIKE: &[&str] = &[
    "\"NaN\"",
    "\"Infinity\"",
    "\"-Infinity\"",
    "\"nan\"",
    "\"1e309\"",
    "\"0x10\"",
    "\" 5 \"",
    "\"\"",
    "\" \"",
    "\"5\"",
];
const WRONG_TYPES: &[&str] = &[
    "true",
    "false",
    "null",
    "[]",
    "{}",
    "[null]",
    "[\"accept\"]",
];
/// Values a real caller might send: they take the calls deeper (a real connect, a real call).
const PLAUSIBLE: &[&str] = &[
    "\"accept\"",
    "\"dismiss\"",
    "\"Runtime.evaluate\"",
    "\"Page.navigate\"",
    "\"Target.getTargets\"",
    "\"d-1\"",
    "\"must_respond\"",
    "\"auto_accept\"",
    "\"auto_dismiss\"",
    "\"on\"",
    "\"off\"",
    "\"auto\"",
    "\"default\"",
    "\"PAGE-1\"",
    "5",
    "0.25",
    "{\"expression\":\"1\"}",
    "{\"url\":\"file:///etc/passwd\"}",
];
/// URL-like strings; none of them reaches anything but loopback port 1 (refused at once).
const URLISH: &[&str] = &[
    "\"file:///etc/passwd\"",
    "\"view-source:file:///etc/passwd\"",
    "\"javascript:alert(1)\"",
    "\"ws://[::1\"",
    "\"http://user:pass@127.0.0.1:1/?token=secret\"",
    "\"ws://127.0.0.1:1/\"",
    "\"wss://127.0.0.1:1/devtools/browser/x\"",
    "\"http://127.0.0.1:1/json/version\"",
    "\"ws://127.0.0.1:99999/\"",
    "\"ws://\"",
    "\"ftp://127.0.0.1:1/\"",
    "\"about:blank\"",
    "\"ws://127.0.0.1:1/\\u0000\"",
];

/// A JSON string of 1 to `max` pieces from `sets` (mixed with printable ones).
fn string_of(g: &mut Gen, sets: &[&[&str]], max: usize) -> String {
    let n = 1 + g.below(max);
    let mut s = String::from("\"");
    for _ in 0..n {
        let set = if g.below(3) == 0 {
            PRINTABLE
        } else {
            sets[g.below(sets.len())]
        };
        s.push_str(g.pick(set));
    }
    s.push('"');
    s
}

/// JSON text of one hostile value; `i` picks the category, so every category comes up equally.
fn hostile(g: &mut Gen, i: usize) -> String {
    match i % 14 {
        0 => string_of(g, &[CONTROLS], 40),
        1 => string_of(g, &[INVISIBLE], 40),
        2 => string_of(g, &[SURROGATES], 20),
        3 => {
            // Long strings; 1 MiB now and then.
            let len = if i % 500 == 3 {
                1 << 20
            } else {
                1_000 + g.below(16_000)
            };
            let unit = g.pick(&["a", "\\u0000", "é", "\u{202E}", "\\ud800", " "]);
            format!("\"{}\"", unit.repeat(len / unit.len().max(1)))
        }
        4 => g.pick(NUMBERS).to_string(),
        5 => g.pick(NAN_LIKE).to_string(),
        6 => g.pick(WRONG_TYPES).to_string(),
        7 => {
            // Nested objects with hostile keys, within the decoder's 128 levels.
            let depth = 1 + g.below(100);
            let key = string_of(g, &[CONTROLS, INVISIBLE, SURROGATES], 4);
            format!(
                "{}1{}",
                format!("{{{key}:").repeat(depth),
                "}".repeat(depth)
            )
        }
        8 => {
            // Long arrays; 100,000 elements now and then.
            let n = if i % 500 == 8 {
                100_000
            } else {
                1_000 + g.below(10_000)
            };
            format!("[{}0]", "0,".repeat(n - 1))
        }
        9 => {
            // Deeper than the decoder's 128 levels.
            let depth = 129 + g.below(10_000);
            format!("{}{}", "[".repeat(depth), "]".repeat(depth))
        }
        10 => g.pick(PLAUSIBLE).to_string(),
        11 => string_of(g, &[PRINTABLE], 60),
        12 => g.pick(URLISH).to_string(),
        _ => {
            let k1 = string_of(g, &[CONTROLS, INVISIBLE, SURROGATES], 6);
            format!(r#"{{{k1}:1,"__proto__":{{}},"task_id\u202e":2,"":[]}}"#)
        }
    }
}

/// JSON text of `base` with `key` set to the JSON text `value`.
fn with_arg(base: &Value, key: &str, value: &str) -> String {
    let mut obj = base.as_object().cloned().unwrap_or_default();
    obj.remove(key);
    let text = Value::Object(obj.clone()).to_string();
    let key = Value::from(key).to_string();
    if obj.is_empty() {
        format!("{{{key}:{value}}}")
    } else {
        format!("{},{key}:{value}}}", &text[..text.len() - 1])
    }
}

/// What the generated requests got back.
#[derive(Debug, Default)]
struct Tally {
    sent: usize,
    tool_errors: usize,
    tool_successes: usize,
    /// Tool errors for arguments the JSON decoder refuses (nested deeper than 128 levels, a
    /// number out of range).
    unreadable: usize,
    slowest: Duration,
    bytes: usize,
}

/// Sends every line of `cases` (id = index + `first_id`), at most [`WINDOW`] at once, and checks
/// that each gets exactly one answer with its id: a tool result (never a protocol error, never
/// an internal error).
fn run_cases(mcp: &mut Mcp, cases: &[(String, String)], first_id: usize, tally: &mut Tally) {
    let mut sent_at: HashMap<usize, (Instant, usize)> = HashMap::new();
    let mut next = 0;
    while next < cases.len() || !sent_at.is_empty() {
        while next < cases.len() && sent_at.len() < WINDOW {
            let id = first_id + next;
            let (tool, args) = &cases[next];
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#
            );
            tally.bytes += line.len();
            mcp.send_raw(line.as_bytes());
            sent_at.insert(id, (Instant::now(), next));
            tally.sent += 1;
            next += 1;
        }
        let line = mcp.out.rx.recv_timeout(T).unwrap_or_else(|_| {
            let pending: Vec<_> = sent_at.values().map(|(_, i)| &cases[*i].0).collect();
            panic!(
                "no answer within {T:?} to {} requests (tools {pending:?}); server alive: {}\n--- stderr ---\n{}",
                sent_at.len(),
                mcp.child.try_wait().ok().flatten().is_none(),
                mcp.err.all().join("\n")
            )
        });
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:.300}"));
        if v.get("method").is_some() {
            continue; // a notification
        }
        let id = v["id"]
            .as_u64()
            .unwrap_or_else(|| panic!("an answer without our id: {line:.300}"))
            as usize;
        let (at, index) = sent_at
            .remove(&id)
            .unwrap_or_else(|| panic!("an answer to {id}, which is not in flight: {line:.300}"));
        tally.slowest = tally.slowest.max(at.elapsed());
        let (tool, args) = &cases[index];
        assert!(
            v.get("error").is_none(),
            "{tool} {args:.200}: an argument error is a tool error: {line:.300}"
        );
        let (is_error, out) = tool_json(&v, tool);
        assert!(
            out.get("internal_error").is_none(),
            "{tool} {args:.200}: a handler failed inside the server: {out}"
        );
        let error = out["error"].as_str().unwrap_or_default();
        assert!(
            !error.contains("too many tool calls in flight"),
            "{tool} {args:.200}: {error}"
        );
        if error.starts_with("the arguments cannot be read") {
            tally.unreadable += 1;
        }
        if is_error {
            tally.tool_errors += 1;
        } else {
            tally.tool_successes += 1;
        }
    }
}

#[test]
fn a_thousand_hostile_values_per_argument_are_each_answered_and_the_server_still_works() {
    let fake = FakeBrowser::start().expect("fake browser");
    let ws = fake.ws_url();
    let mut mcp = server();
    let tools: [(&str, Value, &[&str]); 5] = [
        (
            "browser_connect",
            json!({"cdp_url": ws}),
            &[
                "cdp_url",
                "task_id",
                "target_id",
                "dialog_policy",
                "dialog_timeout_s",
                "dialog_bridge",
            ],
        ),
        ("browser_snapshot", json!({}), &["task_id", "target_id"]),
        (
            "browser_dialog",
            json!({"action": "accept"}),
            &["action", "prompt_text", "dialog_id", "task_id"],
        ),
        (
            "browser_cdp",
            json!({"method": "Runtime.evaluate", "params": {"expression": "1"}}),
            &[
                "method",
                "params",
                "frame_id",
                "target_id",
                "timeout_s",
                "task_id",
            ],
        ),
        ("browser_disconnect", json!({}), &["task_id"]),
    ];
    // Calls get past the "no supervisor" check into the call path.
    mcp.ok_tool("browser_connect", json!({"cdp_url": ws}), T);

    let mut g = Gen(0x5EED_CAFE_F00D_D00D);
    let mut tally = Tally::default();
    let started = Instant::now();
    let mut first_id = 1_000;
    let mut per_argument = Vec::new();
    for (tool, base, args) in &tools {
        for arg in *args {
            let cases: Vec<(String, String)> = (0..PER_ARGUMENT)
                .map(|i| (tool.to_string(), with_arg(base, arg, &hostile(&mut g, i))))
                .collect();
            run_cases(&mut mcp, &cases, first_id, &mut tally);
            first_id += cases.len();
            per_argument.push(format!("{tool}.{arg}"));
        }
        // Unknown keys (hostile names, hostile values) beside valid arguments.
        let cases: Vec<(String, String)> = (0..PER_ARGUMENT)
            .map(|i| {
                let key = serde_json::from_str::<String>(&string_of(
                    &mut g,
                    &[CONTROLS, INVISIBLE, PRINTABLE],
                    30,
                ))
                .unwrap_or_default();
                (tool.to_string(), with_arg(base, &key, &hostile(&mut g, i)))
            })
            .collect();
        run_cases(&mut mcp, &cases, first_id, &mut tally);
        first_id += cases.len();
        // `arguments` itself hostile (a string, a number, an array, nesting, ...).
        let cases: Vec<(String, String)> = (0..PER_ARGUMENT / 5)
            .map(|i| (tool.to_string(), hostile(&mut g, i)))
            .collect();
        run_cases(&mut mcp, &cases, first_id, &mut tally);
        first_id += cases.len();
    }
    let took = started.elapsed();
    eprintln!(
        "{} hostile tool calls ({} MiB) over {} arguments in {took:?}: {} tool errors ({} of \
         them undecodable arguments), {} successes; slowest answer {:?}",
        tally.sent,
        tally.bytes >> 20,
        per_argument.len(),
        tally.tool_errors,
        tally.unreadable,
        tally.tool_successes,
        tally.slowest
    );
    assert!(tally.sent >= 19 * PER_ARGUMENT, "{tally:?}");
    assert!(
        mcp.child.try_wait().expect("try_wait").is_none(),
        "the server is alive"
    );

    // Afterwards: a normal connect, a call and a dialog answer.
    mcp.call_tool("browser_disconnect", json!({}), T);
    let c = mcp.ok_tool(
        "browser_connect",
        json!({"cdp_url": ws, "task_id": "after"}),
        T,
    );
    assert_ne!(c["page_target_id"], "PAGE-1", "a page of its own: {c}");
    let r = mcp.ok_tool(
        "browser_cdp",
        json!({"task_id": "after", "method": "Runtime.evaluate", "params": {"expression": "1+1"}}),
        T,
    );
    assert_eq!(r["result"]["result"]["value"], "fake", "{r}");
    fake.open_dialog("confirm", "still there?", "");
    let pending = common::wait_until(T, || {
        let s = mcp.ok_tool("browser_snapshot", json!({"task_id": "after"}), T);
        s["pending_dialogs"][0]["id"].as_str().map(str::to_string)
    })
    .expect("the dialog is seen");
    let a = mcp.ok_tool(
        "browser_dialog",
        json!({"task_id": "after", "action": "accept", "dialog_id": pending}),
        T,
    );
    assert_eq!(a["dialog"]["message"], "still there?", "{a}");
    assert!(!fake.dialog_open(), "the fake got the answer");
    let stderr = mcp.err.all().join("\n");
    assert!(!stderr.contains("panicked"), "a panic: {stderr:.2000}");
    let status = mcp.close_and_wait(STOP);
    assert_eq!(status.code(), Some(0), "{status}");
}

#[test]
fn task_ids_with_a_nul_are_tool_errors_and_never_use_up_the_workers() {
    let fake = FakeBrowser::start().expect("fake browser");
    let mut mcp = server();
    // Three times the number of workers: each used to panic a worker and keep its slot.
    for round in 0..48 {
        let id = mcp.start_tool(
            "browser_connect",
            json!({"cdp_url": fake.ws_url(), "task_id": "t\u{0}"}),
        );
        let (is_error, v) = mcp.tool_answer(&id, T, "browser_connect with a NUL task id");
        assert!(is_error, "round {round}: {v}");
        let e = v["error"].as_str().unwrap_or_default();
        assert!(
            e.contains("invalid task_id") && e.contains("U+0000"),
            "round {round}: {e}"
        );
    }
    for bad in ["a\u{202E}b", "\u{1b}[2J", "", " x", &"x".repeat(129)] {
        for tool in [
            "browser_connect",
            "browser_cdp",
            "browser_dialog",
            "browser_snapshot",
        ] {
            let (is_error, v) = mcp.call_tool(
                tool,
                json!({"cdp_url": fake.ws_url(), "task_id": bad, "method": "X.y", "action": "accept"})
                    .as_object()
                    .map(|o| {
                        let keep: &[&str] = match tool {
                            "browser_connect" => &["cdp_url", "task_id"],
                            "browser_cdp" => &["method", "task_id"],
                            "browser_dialog" => &["action", "task_id"],
                            _ => &["task_id"],
                        };
                        Value::Object(
                            o.iter()
                                .filter(|(k, _)| keep.contains(&k.as_str()))
                                .map(|(k, v)| (k.clone(), v.clone()))
                                .collect(),
                        )
                    })
                    .unwrap(),
                T,
            );
            assert!(is_error, "{tool} {bad:?}: {v}");
            assert!(
                v["error"].as_str().is_some_and(|e| e.contains("task_id")),
                "{tool} {bad:?}: {v}"
            );
        }
    }
    assert_eq!(fake.accepted_count(), 0, "no connect was even tried");
    // All 16 places are free: 16 calls at once are all accepted.
    mcp.ok_tool("browser_connect", json!({"cdp_url": fake.ws_url()}), T);
    fake.set_rule(
        "Runtime.evaluate",
        Rule::Delay(Duration::from_millis(300), Box::new(Rule::Default)),
    );
    let ids: Vec<Value> = (0..16)
        .map(|_| {
            mcp.start_tool(
                "browser_cdp",
                json!({"method": "Runtime.evaluate", "params": {"expression": "1"}}),
            )
        })
        .collect();
    for id in &ids {
        let (is_error, v) = mcp.tool_answer(id, T, "one of 16 calls");
        assert!(!is_error, "{v}");
    }
    assert!(!mcp.err.all().join("\n").contains("panicked"));
    mcp.close_and_wait(STOP);
}

// ---------------------------------------------------------------------------
// Huge values in messages (issue 35)
// ---------------------------------------------------------------------------

/// Issue 35: a message that quotes a caller's value shows at most 64 characters of it, so a
/// value of 1,000,000 bytes (a tool name, a method, a level, an action, ids, 10,000 unknown
/// argument names, a value nested 100 deep) gets an answer under 1 KiB (the unknown tool name
/// was answered with 1,000,193 bytes).
#[test]
fn a_huge_caller_value_gets_an_answer_under_one_kib() {
    let fake = FakeBrowser::start().expect("fake browser");
    let mut mcp = server();
    mcp.ok_tool("browser_connect", json!({"cdp_url": fake.ws_url()}), T);
    let huge = "\u{202E}x".repeat(500_000);
    let mut deep = json!(1);
    for _ in 0..100 {
        deep = json!([deep]);
    }
    let many: serde_json::Map<String, Value> = (0..10_000)
        .map(|i| (format!("{i:0>100}"), json!(1)))
        .collect();
    let tool = |name: &str, arguments: Value| json!({"name": name, "arguments": arguments});
    let cases: Vec<(&str, &str, Value)> = vec![
        ("unknown tool", "tools/call", tool(&huge, json!({}))),
        ("unknown method", &huge, json!({})),
        ("unknown level", "logging/setLevel", json!({"level": huge})),
        (
            "unknown arguments",
            "tools/call",
            tool("browser_snapshot", Value::Object(many)),
        ),
        (
            "task_id",
            "tools/call",
            tool("browser_snapshot", json!({"task_id": huge})),
        ),
        (
            "action",
            "tools/call",
            tool("browser_dialog", json!({"action": huge})),
        ),
        (
            "action nested",
            "tools/call",
            tool("browser_dialog", json!({"action": deep})),
        ),
        (
            "dialog_timeout_s nested",
            "tools/call",
            tool(
                "browser_connect",
                json!({"task_id": "t2", "dialog_timeout_s": deep}),
            ),
        ),
        (
            "dialog_policy",
            "tools/call",
            tool(
                "browser_connect",
                json!({"task_id": "t2", "dialog_policy": huge}),
            ),
        ),
        (
            "dialog_id",
            "tools/call",
            tool(
                "browser_dialog",
                json!({"action": "accept", "dialog_id": huge}),
            ),
        ),
        (
            "target_id",
            "tools/call",
            tool("browser_snapshot", json!({"target_id": huge})),
        ),
        (
            "cdp target_id",
            "tools/call",
            tool(
                "browser_cdp",
                json!({"method": "Runtime.evaluate", "target_id": huge}),
            ),
        ),
        (
            "cdp frame_id",
            "tools/call",
            tool(
                "browser_cdp",
                json!({"method": "Runtime.evaluate", "frame_id": huge}),
            ),
        ),
        (
            "protocol version",
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": huge}}),
        ),
    ];
    for (i, (what, method, params)) in cases.into_iter().enumerate() {
        let raw = format!("{}", 50_000 + i);
        let request =
            json!({"jsonrpc": "2.0", "id": 50_000 + i, "method": method, "params": params});
        let request = request.to_string();
        assert!(
            request.len() > 100_000 || what.ends_with("nested"),
            "{what}: the request carries a huge value"
        );
        mcp.send_raw(request.as_bytes());
        let answer = raw_answer(&mut mcp, &raw);
        assert!(
            answer.len() < 1024,
            "{what}: {} bytes: {answer:.2000}",
            answer.len()
        );
        assert!(!answer.contains('\u{202E}'), "{what}: {answer}");
        let a: Value = serde_json::from_str(&answer).expect("one JSON message");
        let error = a["error"]["message"]
            .as_str()
            .or(a["result"]["structuredContent"]["error"].as_str())
            .unwrap_or_else(|| panic!("{what}: no error: {answer}"));
        assert!(
            error.contains("bytes)") || error.contains("… (a longer") || error.contains("more"),
            "{what}: the message says the value was clipped: {error}"
        );
    }
    assert!(!mcp.err.all().join("\n").contains("panicked"));
    mcp.close_and_wait(STOP);
}

// ---------------------------------------------------------------------------
// Request ids
// ---------------------------------------------------------------------------

/// The raw answer line whose id is the JSON text `raw_id` (notifications and other answers are
/// skipped), within `T`.
fn raw_answer(mcp: &mut Mcp, raw_id: &str) -> String {
    let needle = format!(r#""id":{raw_id},"#);
    mcp.out
        .find(T, |l| l.contains(&needle).then(|| l.to_string()))
        .unwrap_or_else(|| {
            panic!(
                "no answer with id {raw_id} exactly\n--- stdout ---\n{}\n--- stderr ---\n{}",
                mcp.out.all().join("\n"),
                mcp.err.all().join("\n")
            )
        })
}

const ODD_IDS: &[&str] = &[
    "18446744073709551616",
    "-18446744073709551617",
    "-0",
    "1.0",
    "1e0",
    "1E+2",
    "-12.500e-3",
    "123456789012345678901234567890.000000000000000000001",
    "1e400",
    r#""a\u0062c""#,
    r#""\ud800""#,
    r#""x\udc00y""#,
    r#""\ud83d\ude00 é \"q\" \\ \/""#,
];

#[test]
fn ids_are_echoed_byte_for_byte_on_every_path() {
    let fake = FakeBrowser::start().expect("fake browser");
    let mut mcp = server();
    mcp.ok_tool("browser_connect", json!({"cdp_url": fake.ws_url()}), T);
    for raw in ODD_IDS {
        let line = |method: &str, params: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":{raw},"method":"{method}","params":{params}}}"#)
        };
        let paths = [
            ("ping (inline)", line("ping", "{}")),
            (
                "browser_snapshot (fast path)",
                line(
                    "tools/call",
                    r#"{"name":"browser_snapshot","arguments":{}}"#,
                ),
            ),
            (
                "browser_snapshot (general path)",
                line(
                    "tools/call",
                    r#"{"name":"browser_snapshot","arguments":{"task_id":"nobody"}}"#,
                ),
            ),
            (
                "browser_cdp (worker)",
                line(
                    "tools/call",
                    r#"{"name":"browser_cdp","arguments":{"method":"Runtime.evaluate","params":{"expression":"1"}}}"#,
                ),
            ),
            ("unknown method", line("no/such", "{}")),
            ("unknown tool", line("tools/call", r#"{"name":"nope"}"#)),
            ("params unreadable", line("ping", r#"{"a":1e999}"#)),
            (
                "arguments unreadable",
                line(
                    "tools/call",
                    r#"{"name":"browser_cdp","arguments":{"timeout_s":1e999}}"#,
                ),
            ),
            (
                "jsonrpc missing",
                format!(r#"{{"id":{raw},"method":"ping"}}"#),
            ),
        ];
        for (path, request) in paths {
            mcp.send_raw(request.as_bytes());
            let answer = raw_answer(&mut mcp, raw);
            assert!(
                answer.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{raw},"#)),
                "{path}: {answer:.300}"
            );
        }
    }
    // Ids that are neither strings nor numbers: -32600 with id null.
    for raw in ["null", "{}", "[1]", "true", "false", r#"{"id":1}"#] {
        mcp.send_raw(format!(r#"{{"jsonrpc":"2.0","id":{raw},"method":"ping"}}"#).as_bytes());
        let a = mcp.next(T, raw);
        assert_eq!(
            (a["error"]["code"].clone(), a["id"].clone()),
            (json!(-32600), Value::Null),
            "{raw}: {a}"
        );
    }
    let status = mcp.close_and_wait(STOP);
    assert_eq!(status.code(), Some(0));
    // Every line is one message (some ids, such as 1e400, are beyond what serde_json reads).
    for line in mcp.out.all() {
        assert!(line.starts_with(r#"{"jsonrpc":"2.0","#), "{line:.300}");
    }
}

/// Starts a `browser_cdp` that the fake never answers, with the raw id `raw`.
fn start_stuck_call(mcp: &mut Mcp, raw: &str) {
    mcp.send_raw(
        format!(
            r#"{{"jsonrpc":"2.0","id":{raw},"method":"tools/call","params":{{"name":"browser_cdp","arguments":{{"method":"Runtime.evaluate","params":{{"expression":"stuck"}},"timeout_s":60}}}}}}"#
        )
        .as_bytes(),
    );
}

/// Whether the request `raw` (a worker call) is in flight: a `browser_dialog` with that id is
/// refused as a duplicate (an answered request has freed its id).
fn in_flight(mcp: &mut Mcp, raw: &str) -> bool {
    mcp.send_raw(
        format!(
            r#"{{"jsonrpc":"2.0","id":{raw},"method":"tools/call","params":{{"name":"browser_dialog","arguments":{{"action":"accept"}}}}}}"#
        )
        .as_bytes(),
    );
    let answer = raw_answer(mcp, raw);
    // Read with the id left out: a lone surrogate is no Rust string.
    let readable = answer.replacen(&format!(r#""id":{raw},"#), r#""id":0,"#, 1);
    let v: Value = serde_json::from_str(&readable).expect("JSON");
    if v["error"]["code"] == -32600 {
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("still in flight")),
            "{answer}"
        );
        true
    } else {
        assert_eq!(v["result"]["isError"], true, "no dialog is open: {answer}");
        false
    }
}

fn cancel(mcp: &mut Mcp, raw_request_id: &str) {
    mcp.send_raw(
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{raw_request_id},"reason":"test"}}}}"#
        )
        .as_bytes(),
    );
}

#[test]
fn cancellation_and_duplicates_compare_ids_as_json_rpc_does() {
    let fake = FakeBrowser::start().expect("fake browser");
    let mut mcp = server();
    mcp.ok_tool("browser_connect", json!({"cdp_url": fake.ws_url()}), T);
    fake.set_rule("Runtime.evaluate", Rule::Ignore);
    // (the id a call is sent with, spellings of another id that must not cancel it, spellings
    // of the same id that must)
    let cases: &[(&str, &[&str], &str)] = &[
        ("7", &[r#""7""#, "7.5", "70e-1e0x"], "0.7e1"),
        (
            "18446744073709551616",
            &[
                "18446744073709551617",
                "18446744073709551615",
                r#""18446744073709551616""#,
            ],
            "1.8446744073709551616e19",
        ),
        ("-0", &["1", r#""-0""#, r#""0""#], "0.0"),
        ("1e0", &["10", "-1"], "1"),
        (
            r#""a\u0062""#,
            &[r#""A\u0062""#, r#""ab ""#, "0"],
            r#""ab""#,
        ),
        (r#""\ud800""#, &[r#""\ud801""#], r#""\ud800""#),
    ];
    for (n, (id, others, same)) in cases.iter().enumerate() {
        start_stuck_call(&mut mcp, id);
        assert!(
            wait_nth(&fake, n + 1, |c| c["params"]["expression"] == "stuck"),
            "the call {id} reached the browser"
        );
        // Duplicates are compared the same way: the same id in another spelling is refused.
        assert!(
            in_flight(&mut mcp, same),
            "{id} is in flight, {same} is the same id"
        );
        for other in *others {
            if other.ends_with('x') {
                // Not even JSON: ignored as a parse error, nothing cancelled.
                mcp.send_raw(
                    format!(r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{other}}}}}"#).as_bytes(),
                );
                let a = mcp.next(T, "a malformed notification");
                assert_eq!(a["error"]["code"], -32700, "{a}");
                continue;
            }
            // Duplicate detection answers at once: another id is no duplicate.
            assert!(!in_flight(&mut mcp, other), "{other} is not {id}");
            cancel(&mut mcp, other);
            if !in_flight(&mut mcp, id) {
                let lines = mcp.out.all();
                let tail = &lines[lines.len().saturating_sub(8)..];
                panic!("{other} must not cancel {id}; the server's last lines: {tail:#?}");
            }
        }
        cancel(&mut mcp, same);
        // The cancelled call frees its id at once and never gets a response.
        let freed = common::wait_until(T, || (!in_flight(&mut mcp, id)).then_some(()));
        assert!(freed.is_some(), "{same} cancelled {id}");
    }
    // No answer ever came for a cancelled call: every line with a `result` belongs to a
    // browser_dialog (isError, "no dialog") or the connect.
    let ping = mcp.request("ping", json!({}), T);
    assert_eq!(ping["result"], json!({}));
    for line in mcp.out.all() {
        assert!(
            !line.contains("was cancelled"),
            "a cancelled call was answered: {line:.300}"
        );
    }
    mcp.close_and_wait(STOP);
}

// ---------------------------------------------------------------------------
// A cancelled browser_connect
// ---------------------------------------------------------------------------

#[test]
fn a_cancelled_connect_stops_its_start_at_once_and_leaves_nothing() {
    let fake = FakeBrowser::start().expect("fake browser");
    fake.set_rule("Target.attachToTarget", Rule::Ignore);
    let mut mcp = server();
    let mut took = Vec::new();
    for round in 0..5 {
        let id = mcp.start_tool(
            "browser_connect",
            json!({"cdp_url": fake.ws_url(), "task_id": "slow"}),
        );
        assert!(
            wait_nth(&fake, round + 1, |c| c["method"] == "Target.attachToTarget"),
            "round {round}: the start is attaching"
        );
        let t = Instant::now();
        mcp.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": id, "reason": "user"}}),
        );
        // The start's connection is closed: its threads have stopped.
        assert!(
            fake.wait_for_connections(0, Duration::from_secs(2)),
            "round {round}: the cancelled start still has its connection"
        );
        took.push(t.elapsed());
        let (is_error, s) = mcp.call_tool("browser_snapshot", json!({"task_id": "slow"}), T);
        assert!(
            is_error
                && s["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("no browser supervisor")),
            "round {round}: nothing registered: {s}"
        );
        mcp.assert_no_response(&id, Duration::from_millis(300));
    }
    eprintln!("cancel -> the start's connection closed: {took:?}");
    for t in &took {
        assert!(
            *t < Duration::from_secs(1),
            "a cancelled start took {t:?} to stop (its start_timeout is 15 s)"
        );
    }
    // The task connects normally afterwards.
    fake.clear_rule("Target.attachToTarget");
    let c = mcp.ok_tool(
        "browser_connect",
        json!({"cdp_url": fake.ws_url(), "task_id": "slow"}),
        T,
    );
    assert_ne!(c["page_target_id"], "PAGE-1", "a page of its own: {c}");
    mcp.close_and_wait(STOP);
}

#[test]
fn a_cancelled_launch_closes_the_browser_it_was_starting() {
    let Some(chrome) = common::chromium_path() else {
        assert!(
            !common::e2e_required(),
            "CDP_SUPERVISOR_E2E=require but no Chromium"
        );
        eprintln!("SKIPPED: no Chromium");
        return;
    };
    let mut mcp = Mcp::start(&[("CHROME", chrome.as_os_str())]);
    initialize(&mut mcp);
    let id = mcp.start_tool("browser_connect", json!({}));
    // Cancel once the launch has begun (its profile directory exists).
    let begun = common::wait_until(T, || (!profiles_of(mcp.pid()).is_empty()).then_some(()));
    assert!(begun.is_some(), "the launch never began");
    let t = Instant::now();
    mcp.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": id}}),
    );
    let gone = common::wait_until(T, || {
        (browsers_of(mcp.pid()).is_empty() && profiles_of(mcp.pid()).is_empty()).then_some(())
    });
    let took = t.elapsed();
    eprintln!("cancel during the launch -> browser and profile gone after {took:?}");
    assert!(
        gone.is_some(),
        "the launch went on: browsers {:?}, profiles {:?}",
        browsers_of(mcp.pid()),
        profiles_of(mcp.pid())
    );
    mcp.assert_no_response(&id, Duration::from_millis(300));
    // The next connect launches again.
    let c = mcp.ok_tool("browser_connect", json!({}), Duration::from_secs(40));
    assert_eq!(c["launched_browser"], true, "{c}");
    mcp.close_and_wait(STOP);
}
