//! SPEC §14: credentials in a CDP URL (`user:pass@`, `?token=`, `apiKey=`) never reach a log line,
//! an error, a snapshot, a tool result or a `Debug` rendering. Runs alone, in `tests/solo`: it installs a
//! global logger that captures every record at `Trace` from every crate (tungstenite and rustls
//! included), then drives the whole public surface with a credential-carrying URL once and checks
//! everything it saw. That includes `http://` discovery through redirects whose `Location`
//! echoes the token (followed on the same host; refused to another host; a sixth refused) and a
//! chunked answer on a kept-alive connection.
//!
//! The secrets all contain `S3CR3T`; the password starts with `pw-` and the user name is `user`,
//! so `S3CR3T`, `pw-` and `user:` must appear nowhere.

use cdp_supervisor::StartRequest;
use std::io::Write;
use std::net::TcpListener;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use cdp_supervisor::fake::{FakeBrowser, Rule};
use cdp_supervisor::mcp::McpServer;
use cdp_supervisor::unversioned::{ConnectOptions, Transport};
use cdp_supervisor::{Config, DialogAction, Route, StartOptions, SupervisorRegistry, tools};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);
const FORBIDDEN: &[&str] = &["S3CR3T", "pw-", "user:"];
const USERINFO: &str = "user:pw-S3CR3T";
const QUERY: &str = "token=T0KEN-S3CR3T&apiKey=K3Y-S3CR3T";

// ------------------------------------------------------------------------------ capture logger

/// One captured log record.
#[derive(Clone, Debug)]
struct Line {
    /// What the driver was doing when the record was emitted.
    phase: String,
    /// `log` target (crate/module path), e.g. `tungstenite::handshake::client`.
    target: String,
    /// `target: args`.
    text: String,
}

static LINES: Mutex<Vec<Line>> = Mutex::new(Vec::new());
static PHASE: Mutex<String> = Mutex::new(String::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        // Format before taking any lock: formatting must never re-enter the logger under it.
        let text = format!("{}: {}", record.target(), record.args());
        let phase = PHASE.lock().unwrap_or_else(|e| e.into_inner()).clone();
        LINES.lock().unwrap_or_else(|e| e.into_inner()).push(Line {
            phase,
            target: record.target().to_string(),
            text,
        });
    }

    fn flush(&self) {}
}

fn install_logger() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        log::set_boxed_logger(Box::new(Capture)).expect("no other logger in this binary");
        log::set_max_level(log::LevelFilter::Trace);
    });
}

fn phase(name: &str) {
    *PHASE.lock().unwrap_or_else(|e| e.into_inner()) = name.to_string();
}

// ------------------------------------------------------------------------------ the scenario

/// Everything one run of the scenario produced.
struct Report {
    /// (where it came from, the text): errors, Debug renderings, JSON results, URLs.
    artifacts: Vec<(String, String)>,
    /// Every log record captured while the scenario ran.
    lines: Vec<Line>,
    /// Facts that prove the scenario really did what it claims.
    facts: Vec<(String, bool)>,
}

struct Recorder {
    artifacts: Vec<(String, String)>,
    facts: Vec<(String, bool)>,
}

impl Recorder {
    fn add(&mut self, label: impl Into<String>, text: impl Into<String>) {
        self.artifacts.push((label.into(), text.into()));
    }

    fn fact(&mut self, label: impl Into<String>, ok: bool) {
        self.facts.push((label.into(), ok));
    }

    /// Records `Display` and `Debug` of a result's error, or `Debug` of its value.
    fn result<T: std::fmt::Debug, E: std::fmt::Display + std::fmt::Debug>(
        &mut self,
        label: &str,
        r: &Result<T, E>,
    ) {
        match r {
            Ok(v) => self.add(format!("{label} (Ok, Debug)"), format!("{v:?}")),
            Err(e) => {
                self.add(format!("{label} (Err, Display)"), e.to_string());
                self.add(format!("{label} (Err, Debug)"), format!("{e:?}"));
            }
        }
    }

    fn json(&mut self, label: &str, v: &Value) {
        self.add(format!("{label} (JSON)"), v.to_string());
    }
}

fn port_of(url: &str) -> u16 {
    url::Url::parse(url).unwrap().port().unwrap()
}

fn cred_ws(port: u16) -> String {
    format!("ws://{USERINFO}@127.0.0.1:{port}/devtools/browser/fake?{QUERY}")
}

/// A port nobody listens on.
fn dead_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A plain-TCP server that answers whatever arrives with an HTTP error and closes: a `wss://`
/// client sees a TLS failure.
fn plain_tcp_server() -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let _ = s.set_write_timeout(Some(WAIT));
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    });
    (port, h)
}

/// A loopback HTTP server answering each request with `answer(target, own port)` and keeping
/// the connection open until the client closes it. Returns its port; its threads end with
/// their clients, the accept thread with the process.
fn scripted_http(answer: impl Fn(&str, u16) -> String + Send + Sync + 'static) -> u16 {
    use std::io::Read;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut s) = conn else { return };
            let answer = Arc::clone(&answer);
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(WAIT));
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match s.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let text = String::from_utf8_lossy(&head).to_string();
                let target = text.split_whitespace().nth(1).unwrap_or("").to_string();
                if s.write_all(answer(&target, port).as_bytes()).is_err() {
                    return;
                }
                let mut sink = [0u8; 256];
                while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
            });
        }
    });
    port
}

fn mcp_call(server: &McpServer, id: u64, tool: &str, args: Value) -> Value {
    let line = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": tool, "arguments": args}});
    server
        .handle_line(&line.to_string())
        .expect("a request gets an answer")
}

fn small_config() -> Config {
    Config::default()
        .with_reconnect_attempts(3)
        .unwrap()
        .with_start_timeout(Duration::from_secs(5))
        .unwrap()
        .with_call_timeout(Duration::from_secs(5))
        .unwrap()
}

fn drive() -> Report {
    install_logger();
    LINES.lock().unwrap().clear();
    let mut rec = Recorder {
        artifacts: Vec::new(),
        facts: Vec::new(),
    };
    let fake = FakeBrowser::start().unwrap();
    let port = port_of(&fake.ws_url());
    let url = cred_ws(port);
    let reg = SupervisorRegistry::new(small_config());

    // ---- start
    phase("get_or_start");
    let sup = reg
        .get_or_start("task", &url)
        .expect("the fake accepts any path and query");
    let snap = sup.snapshot();
    rec.fact(
        "attached through the credential URL",
        snap.is_active() && snap.page_target_id.is_some(),
    );
    rec.add("Supervisor Debug", format!("{sup:?}"));
    rec.add("Supervisor::cdp_url_redacted", sup.cdp_url_redacted());
    rec.add("Snapshot.cdp_url", snap.cdp_url.clone());
    rec.add("Snapshot Debug", format!("{snap:?}"));
    rec.add("Config Debug", format!("{:?}", sup.config()));
    rec.json("Snapshot::to_json", &snap.to_json());
    rec.add("registry Debug (live)", format!("{reg:?}"));
    rec.add("registry.tasks()", format!("{:?}", reg.tasks()));
    // The same URL again is idempotent.
    let again = reg.get_or_start("task", &url);
    rec.fact(
        "get_or_start is idempotent for the credential URL",
        again.as_ref().is_ok_and(|a| Arc::ptr_eq(a, &sup)),
    );

    // ---- dialogs
    phase("dialogs");
    fake.open_dialog("prompt", "Name?", "dflt");
    let d = sup.wait_for_dialog(WAIT);
    rec.fact("prompt detected", d.is_some());
    rec.json(
        "browser_snapshot with a dialog",
        &tools::browser_snapshot(&reg, "task", &json!({})),
    );
    rec.add(
        "Snapshot Debug with a dialog",
        format!("{:?}", sup.snapshot()),
    );
    let fail = |rec: &mut Recorder, label: &str, task: &str, args: Value| {
        let r = tools::browser_dialog(&reg, task, &args);
        rec.fact(format!("{label} fails"), r["success"] == false);
        rec.json(label, &r);
    };
    fail(
        &mut rec,
        "browser_dialog: no supervisor",
        "nobody",
        json!({"action": "accept"}),
    );
    fail(
        &mut rec,
        "browser_dialog: invalid action",
        "task",
        json!({"action": "maybe"}),
    );
    fail(
        &mut rec,
        "browser_dialog: missing action",
        "task",
        json!({}),
    );
    fail(
        &mut rec,
        "browser_dialog: arguments not an object",
        "task",
        json!([1]),
    );
    fail(
        &mut rec,
        "browser_dialog: prompt_text not a string",
        "task",
        json!({"action": "accept", "prompt_text": 5}),
    );
    fail(
        &mut rec,
        "browser_dialog: unknown dialog_id",
        "task",
        json!({"action": "accept", "dialog_id": "d-99"}),
    );
    // A second dialog on another session makes "which one?" ambiguous.
    fake.emit(
        Some("OTHER-SESSION"),
        "Page.javascriptDialogOpening",
        json!({"url": "http://x/", "frameId": "F2", "message": "second", "type": "confirm",
               "hasBrowserHandler": false, "defaultPrompt": ""}),
    );
    rec.fact(
        "two dialogs pending",
        sup.wait_for(WAIT, |s| s.pending_dialogs.len() == 2)
            .is_some(),
    );
    fail(
        &mut rec,
        "browser_dialog: several pending, no dialog_id",
        "task",
        json!({"action": "accept"}),
    );
    let r = sup.respond_to_dialog(DialogAction::Accept, None, None);
    rec.result("respond_to_dialog ambiguous", &r);
    let ok = tools::browser_dialog(
        &reg,
        "task",
        &json!({"action": "accept", "prompt_text": "hi", "dialog_id": "d-1"}),
    );
    rec.fact("browser_dialog success", ok["success"] == true);
    rec.json("browser_dialog success", &ok);
    rec.fact(
        "d-1 closed",
        sup.wait_for(WAIT, |s| s.closed_dialog("d-1").is_some())
            .is_some(),
    );
    fail(
        &mut rec,
        "browser_dialog: already closed",
        "task",
        json!({"action": "accept", "dialog_id": "d-1"}),
    );
    // d-2 lives on a session the fake does not know: its answer is refused.
    let r = tools::browser_dialog(
        &reg,
        "task",
        &json!({"action": "dismiss", "dialog_id": "d-2"}),
    );
    rec.json("browser_dialog on a refused session", &r);
    fake.emit(
        Some("OTHER-SESSION"),
        "Page.javascriptDialogClosed",
        json!({"result": false, "userInput": ""}),
    );
    rec.fact(
        "no dialog pending any more",
        sup.wait_for(WAIT, |s| s.pending_dialogs.is_empty())
            .is_some(),
    );
    fail(
        &mut rec,
        "browser_dialog: no dialog open",
        "task",
        json!({"action": "accept"}),
    );
    // Closed remotely while our answer is refused.
    fake.open_dialog("alert", "remote", "");
    sup.wait_for_dialog(WAIT);
    fake.set_rule(
        "Page.handleJavaScriptDialog",
        Rule::Error {
            code: -32602,
            message: "No dialog is showing".into(),
        },
    );
    fail(
        &mut rec,
        "browser_dialog: closed remotely",
        "task",
        json!({"action": "accept"}),
    );
    fake.clear_rule("Page.handleJavaScriptDialog");
    rec.json(
        "browser_snapshot with history",
        &tools::browser_snapshot(&reg, "task", &json!({})),
    );

    // ---- browser_cdp
    phase("browser_cdp");
    let ok = tools::browser_cdp(&reg, "task", &json!({"method": "Browser.getVersion"}));
    rec.fact("browser_cdp success", ok["success"] == true);
    rec.json("browser_cdp success", &ok);
    let page = snap.page_target_id.clone().unwrap();
    let ok = tools::browser_cdp(
        &reg,
        "task",
        &json!({"method": "Runtime.evaluate", "params": {"expression": "1"}, "frame_id": page}),
    );
    rec.json("browser_cdp into the main frame", &ok);
    for (label, args) in [
        ("unknown method", json!({"method": "Nope.nothing"})),
        ("missing method", json!({})),
        (
            "unknown frame",
            json!({"method": "Runtime.evaluate", "frame_id": "NOPE"}),
        ),
        (
            "unknown target",
            json!({"method": "Runtime.evaluate", "target_id": "NOPE"}),
        ),
        (
            "bad params",
            json!({"method": "Runtime.evaluate", "params": 3}),
        ),
        (
            "both routes",
            json!({"method": "X.y", "frame_id": "a", "target_id": "b"}),
        ),
    ] {
        let r = tools::browser_cdp(&reg, "task", &args);
        rec.fact(format!("browser_cdp {label} fails"), r["success"] == false);
        rec.json(&format!("browser_cdp {label}"), &r);
    }
    let r = tools::browser_cdp(&reg, "nobody", &json!({"method": "Browser.getVersion"}));
    rec.json("browser_cdp no supervisor", &r);
    fake.set_rule("Browser.getVersion", Rule::Ignore);
    let r = sup.call(
        "Browser.getVersion",
        json!({}),
        Route::Browser,
        Duration::from_millis(50),
    );
    rec.fact(
        "call timeout provoked",
        matches!(r, Err(cdp_supervisor::Error::Timeout { .. })),
    );
    rec.result("Supervisor::call timeout", &r);
    fake.clear_rule("Browser.getVersion");

    // ---- connection drop and reconnect (the reader logs it)
    phase("drop and reconnect");
    fake.drop_connections();
    let down = sup.wait_for(WAIT, |s| !s.is_active());
    rec.fact("drop noticed", down.is_some());
    if let Some(down) = down {
        rec.add("Snapshot Debug while down", format!("{down:?}"));
        rec.add(
            "disconnect_reason",
            down.disconnect_reason.clone().unwrap_or_default(),
        );
    }
    let r = sup.call(
        "Browser.getVersion",
        json!({}),
        Route::Browser,
        Duration::from_secs(1),
    );
    rec.result("Supervisor::call while reconnecting", &r);
    rec.json(
        "browser_cdp while reconnecting",
        &tools::browser_cdp(&reg, "task", &json!({"method": "Browser.getVersion"})),
    );
    let up = sup.wait_for(WAIT, |s| s.is_active() && s.frame_tree.top.is_some());
    rec.fact("reconnected", up.is_some() && fake.accepted_count() >= 2);
    rec.add(
        "Snapshot Debug after reconnect",
        format!("{:?}", sup.snapshot()),
    );

    // ---- errors
    phase("errors: dead port");
    let dead = cred_ws(dead_port());
    let r = reg.get_or_start("dead", &dead);
    rec.fact(
        "dead port is a Connect error",
        matches!(r, Err(cdp_supervisor::Error::Connect { .. })),
    );
    rec.result("get_or_start dead port", &r);
    let r = Transport::connect(&dead, &ConnectOptions::default());
    rec.result("Transport::connect dead port", &r);
    rec.fact(
        "cdp_available(dead) is false",
        !cdp_supervisor::cdp_available(&dead),
    );

    phase("errors: ftp");
    let ftp = "ftp://user:pw-S3CR3T@x/?token=T0KEN-S3CR3T";
    let r = reg.get_or_start("ftp", ftp);
    rec.fact(
        "ftp is an InvalidUrl error",
        matches!(r, Err(cdp_supervisor::Error::InvalidUrl { .. })),
    );
    rec.result("get_or_start ftp", &r);
    rec.result(
        "endpoint::resolve ftp",
        &cdp_supervisor::unversioned::resolve(ftp),
    );
    rec.result(
        "Transport::connect ftp",
        &Transport::connect(ftp, &ConnectOptions::default()),
    );

    phase("errors: unparseable");
    for (label, bad) in [
        (
            "no colon after scheme",
            "ws//user:pw-S3CR3T@h/?token=T0KEN-S3CR3T",
        ),
        (
            "bad IPv6 host",
            "ws://user:pw-S3CR3T@[zz/devtools?token=T0KEN-S3CR3T",
        ),
        (
            "'?' inside the password",
            "ws://user:pw-S3CR3T?x@127.0.0.1:9/devtools",
        ),
        (
            "'#' inside the password",
            "ws://user:pw-S3CR3T#x@127.0.0.1:9/devtools",
        ),
        (
            "'/' inside the password",
            "ws://user:pw/S3CR3T@127.0.0.1:9/devtools",
        ),
    ] {
        let r = reg.get_or_start("bad", bad);
        rec.fact(format!("unparseable URL ({label}) fails"), r.is_err());
        rec.result(&format!("get_or_start unparseable URL ({label})"), &r);
        rec.add(
            format!("redact_url unparseable URL ({label})"),
            cdp_supervisor::redact_url(bad),
        );
    }

    phase("errors: http resolution");
    let http_dead = "http://user:pw-S3CR3T@127.0.0.1:1/?token=T0KEN-S3CR3T";
    let r = reg.get_or_start("http-dead", http_dead);
    rec.fact("http dead endpoint fails", r.is_err());
    rec.result("get_or_start http dead", &r);
    rec.result(
        "endpoint::resolve http dead",
        &cdp_supervisor::unversioned::resolve(http_dead),
    );
    // An http:// endpoint that answers: the credentials ride along to the resolved ws URL.
    let http_live = format!("http://{USERINFO}@127.0.0.1:{port}/?{QUERY}");
    let r = reg.get_or_start("http-live", &http_live);
    rec.fact("http live endpoint attaches", r.is_ok());
    if let Ok(s) = &r {
        rec.add("http-live Supervisor Debug", format!("{s:?}"));
        rec.add("http-live cdp_url_redacted", s.cdp_url_redacted());
        rec.add("http-live Snapshot Debug", format!("{:?}", s.snapshot()));
    }
    reg.stop("http-live");

    phase("http redirects and chunked answers");
    // A Browserless-like front: `/json/version` redirects on the same host with the token in
    // its `Location`, then answers chunked on a kept-alive connection; it names the fake.
    let ws = format!("ws://127.0.0.1:{port}/devtools/browser/fake");
    let front = scripted_http(move |target, own| {
        if target.starts_with("/json/version") {
            let q = target.split_once('?').map(|(_, q)| q).unwrap_or("");
            format!(
                "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{own}/v2/json/version?{q}\r\nContent-Length: 0\r\n\r\n"
            )
        } else if target.starts_with("/v2/json/version") {
            let body = format!(r#"{{"webSocketDebuggerUrl":"{ws}"}}"#);
            format!(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
                body.len()
            )
        } else if target.starts_with("/away/json/version") {
            // To another host, with the token echoed: refused.
            let q = target.split_once('?').map(|(_, q)| q).unwrap_or("");
            format!(
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://localhost:1/json/version?{q}\r\nContent-Length: 0\r\n\r\n"
            )
        } else {
            // `/loop...`: redirects forever, with the token.
            let q = target.split_once('?').map(|(_, q)| q).unwrap_or("");
            format!(
                "HTTP/1.1 301 Moved\r\nLocation: /loop{}/json/version?{q}\r\nContent-Length: 0\r\n\r\n",
                target.len()
            )
        }
    });
    let redirected = format!("http://{USERINFO}@127.0.0.1:{front}/?{QUERY}");
    let r = reg.get_or_start("http-redirected", &redirected);
    rec.fact("http redirect + chunked endpoint attaches", r.is_ok());
    rec.result("get_or_start http redirect + chunked", &r);
    reg.stop("http-redirected");
    rec.fact(
        "cdp_available(http redirect + chunked)",
        cdp_supervisor::cdp_available(&redirected),
    );
    let away = format!("http://{USERINFO}@127.0.0.1:{front}/away/?{QUERY}");
    let r = cdp_supervisor::unversioned::resolve(&away);
    rec.fact(
        "a redirect to another host with the token is refused",
        r.as_ref()
            .is_err_and(|e| e.to_string().contains("another host")),
    );
    rec.result("resolve: redirect to another host", &r);
    let looping = format!("http://{USERINFO}@127.0.0.1:{front}/loop/?{QUERY}");
    let r = cdp_supervisor::unversioned::resolve(&looping);
    rec.fact(
        "a sixth redirect is refused",
        r.as_ref()
            .is_err_and(|e| e.to_string().contains("more than 5")),
    );
    rec.result("resolve: too many redirects", &r);

    phase("errors: wss to a plain port");
    let (plain, server) = plain_tcp_server();
    let wss = format!("wss://{USERINFO}@127.0.0.1:{plain}/devtools/browser/fake?{QUERY}");
    let r = reg.get_or_start("wss", &wss);
    rec.fact(
        "wss to a plain port is a Connect error",
        matches!(r, Err(cdp_supervisor::Error::Connect { .. })),
    );
    rec.result("get_or_start wss to a plain port", &r);
    let _ = server.join();

    // ---- registry Debug while a start is in flight (the slot holds the URL being started)
    phase("registry Debug during a start");
    let slow = FakeBrowser::start().unwrap();
    slow.set_rule(
        "Target.getTargets",
        Rule::Delay(Duration::from_millis(400), Box::new(Rule::Default)),
    );
    let slow_url = cred_ws(port_of(&slow.ws_url()));
    let reg = Arc::new(reg);
    let starter = {
        let reg = Arc::clone(&reg);
        let slow_url = slow_url.clone();
        std::thread::spawn(move || reg.get_or_start("slow", &slow_url).map(|_| ()))
    };
    let seen = slow.wait_for_command(|c| c["method"] == "Target.getTargets", WAIT);
    rec.fact("slow start in flight", seen.is_some());
    rec.add("registry Debug during a start", format!("{reg:?}"));
    let r = starter.join().unwrap();
    rec.fact("slow start finished", r.is_ok());
    reg.stop("slow");

    // ---- a configured browser.cdp_url with credentials
    phase("config cdp_url");
    let configured = small_config().with_cdp_url(url.clone()).unwrap();
    rec.add(
        "Config Debug (browser.cdp_url with credentials)",
        format!("{configured:?}"),
    );
    let reg2 = SupervisorRegistry::new(configured.clone());
    rec.add(
        "registry Debug (config with credentials)",
        format!("{reg2:?}"),
    );
    drop(reg2);

    // ---- MCP server in-process
    phase("mcp");
    let server = McpServer::new(Config::default());
    let init = server
        .handle_line(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#)
        .unwrap();
    rec.json("mcp initialize", &init);
    let r = mcp_call(
        &server,
        1,
        "browser_connect",
        json!({"cdp_url": url, "task_id": "m"}),
    );
    rec.fact(
        "mcp browser_connect succeeds",
        r["result"]["isError"] == false,
    );
    rec.json("mcp browser_connect", &r);
    rec.json(
        "mcp browser_snapshot",
        &mcp_call(&server, 2, "browser_snapshot", json!({"task_id": "m"})),
    );
    rec.json(
        "mcp browser_dialog (none open)",
        &mcp_call(
            &server,
            3,
            "browser_dialog",
            json!({"task_id": "m", "action": "accept"}),
        ),
    );
    rec.json(
        "mcp browser_cdp",
        &mcp_call(
            &server,
            4,
            "browser_cdp",
            json!({"task_id": "m", "method": "Browser.getVersion"}),
        ),
    );
    rec.add("McpServer Debug", format!("{server:?}"));
    let r = mcp_call(
        &server,
        5,
        "browser_connect",
        json!({"cdp_url": dead, "task_id": "m2"}),
    );
    rec.fact(
        "mcp browser_connect (dead) fails",
        r["result"]["isError"] == true,
    );
    rec.json("mcp browser_connect dead port", &r);
    rec.json(
        "mcp browser_connect ftp",
        &mcp_call(
            &server,
            6,
            "browser_connect",
            json!({"cdp_url": ftp, "task_id": "m3"}),
        ),
    );
    rec.json(
        "mcp browser_connect unparseable",
        &mcp_call(
            &server,
            7,
            "browser_connect",
            json!({"cdp_url": "ws://user:pw-S3CR3T?x@127.0.0.1:9/", "task_id": "m4"}),
        ),
    );
    rec.json(
        "mcp browser_disconnect",
        &mcp_call(&server, 8, "browser_disconnect", json!({"task_id": "m"})),
    );
    drop(server);
    // browser_connect without cdp_url uses browser.cdp_url from the configuration.
    let server = McpServer::new(configured);
    let r = mcp_call(&server, 1, "browser_connect", json!({}));
    rec.fact(
        "mcp browser_connect from config succeeds",
        r["result"]["isError"] == false,
    );
    rec.json("mcp browser_connect from config", &r);
    drop(server);

    // ---- cdp_available
    phase("cdp_available");
    rec.fact(
        "cdp_available(credential URL)",
        cdp_supervisor::cdp_available(&url),
    );

    // ---- stop, and what callers see afterwards
    phase("stop");
    let opts = StartOptions::default();
    let held = reg
        .start(StartRequest::new("task", &url).with_options(opts))
        .unwrap();
    rec.fact("still the same supervisor", Arc::ptr_eq(&held, &sup));
    rec.fact("stop reports a supervisor", reg.stop("task"));
    let r = sup.respond_to_dialog(DialogAction::Accept, None, None);
    rec.fact(
        "respond after stop is NotActive",
        matches!(r, Err(cdp_supervisor::Error::NotActive(_))),
    );
    rec.result("respond_to_dialog after stop", &r);
    let r = sup.call(
        "Browser.getVersion",
        json!({}),
        Route::Browser,
        Duration::from_secs(1),
    );
    rec.result("Supervisor::call after stop", &r);
    rec.add("Supervisor Debug after stop", format!("{sup:?}"));
    rec.add("Snapshot Debug after stop", format!("{:?}", sup.snapshot()));
    rec.json(
        "browser_dialog after stop",
        &tools::browser_dialog(&reg, "task", &json!({"action": "accept"})),
    );
    rec.add("registry Debug after stop", format!("{reg:?}"));
    reg.stop_all();
    drop(held);
    drop(sup);
    drop(reg);
    drop(fake);
    drop(slow);
    phase("done");
    let lines = LINES.lock().unwrap().clone();
    Report {
        artifacts: rec.artifacts,
        lines,
        facts: rec.facts,
    }
}

fn report() -> &'static Report {
    static REPORT: OnceLock<Report> = OnceLock::new();
    REPORT.get_or_init(drive)
}

fn leaks<'a>(items: impl Iterator<Item = (String, &'a str)>) -> Vec<String> {
    items
        .filter(|(_, text)| FORBIDDEN.iter().any(|f| text.contains(f)))
        .map(|(label, text)| format!("[{label}] {text}"))
        .collect()
}

fn is_ours(line: &Line) -> bool {
    line.target.starts_with("cdp_supervisor")
}

// ------------------------------------------------------------------------------ the checks

pub(crate) fn the_scenario_really_ran() {
    let r = report();
    let failed: Vec<_> = r.facts.iter().filter(|(_, ok)| !ok).collect();
    assert!(
        failed.is_empty(),
        "scenario steps that did not happen: {failed:#?}"
    );
    // The logger really saw every crate, down to trace.
    let has = |prefix: &str| r.lines.iter().any(|l| l.target.starts_with(prefix));
    assert!(has("cdp_supervisor"), "no records from the crate itself");
    assert!(has("tungstenite"), "no records from tungstenite");
    assert!(has("rustls"), "no records from rustls (the wss:// attempt)");
    for (label, text) in &r.artifacts {
        let short: String = text.chars().take(240).collect();
        eprintln!("[{label}] {short}");
    }
    eprintln!(
        "{} log records captured ({} from cdp_supervisor), {} artifacts checked, {} facts",
        r.lines.len(),
        r.lines.iter().filter(|l| is_ours(l)).count(),
        r.artifacts.len(),
        r.facts.len()
    );
}

pub(crate) fn no_credentials_in_errors_debug_output_snapshots_or_tool_results() {
    let r = report();
    let found = leaks(r.artifacts.iter().map(|(l, t)| (l.clone(), t.as_str())));
    assert!(
        found.is_empty(),
        "{} artifacts carry credentials:\n{}",
        found.len(),
        found.join("\n")
    );
}

pub(crate) fn no_credentials_in_the_crates_own_log_lines() {
    let r = report();
    let found = leaks(
        r.lines
            .iter()
            .filter(|l| is_ours(l))
            .map(|l| (l.phase.clone(), l.text.as_str())),
    );
    assert!(
        found.is_empty(),
        "{} cdp_supervisor log lines carry credentials:\n{}",
        found.len(),
        found.join("\n")
    );
}

pub(crate) fn no_credentials_in_dependency_log_lines() {
    let r = report();
    let found = leaks(
        r.lines
            .iter()
            .filter(|l| !is_ours(l))
            .map(|l| (l.phase.clone(), l.text.as_str())),
    );
    let mut sources: Vec<&str> = r
        .lines
        .iter()
        .filter(|l| !is_ours(l) && FORBIDDEN.iter().any(|f| l.text.contains(f)))
        .map(|l| l.target.as_str())
        .collect();
    sources.sort();
    sources.dedup();
    assert!(
        found.is_empty(),
        "{} dependency log lines (targets {sources:?}) carry credentials; first ones:\n{}",
        found.len(),
        found.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
}
