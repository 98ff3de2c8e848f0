//! Measurement (issue 20, item 6): which CDP sessions a native dialog blocks, and what CDP says
//! that predicts it.
//!
//! A native dialog blocks its whole renderer process, and Chromium puts several sessions in one
//! process. Each scenario below opens a set of pages and frames in a private headless Chromium
//! (every host name resolves to the loopback server: `--host-resolver-rules=MAP * 127.0.0.1`, so
//! real public-suffix cases such as `foo.co.uk` / `bar.co.uk` can be served), follows every page
//! and OOPIF the way the supervisor does (browser-level auto-attach, paused, then resumed), and
//! then, for each session X in turn, raises an `alert` in X and sends `Runtime.evaluate "1"` on
//! every session Y. A Y whose evaluate gets no reply within [`PROBE`] (and gets it right after the
//! alert is answered) is blocked by X's dialog: it runs in X's renderer.
//!
//! Printed per session: its type, URL, the `TargetInfo` fields that could predict sharing a
//! process (`openerId`, `canAccessOpener`, `openerFrameId`, `browserContextId`) and its
//! `Runtime.getIsolateId` (one V8 isolate per renderer main thread). Then the matrix, and whether
//! "same isolate id" and "same site and same opener group" predict it.
//!
//! Run: `cargo test --test it measure_renderers:: -- --ignored --nocapture --test-threads 1`.

use crate::common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::common::{HttpServer, RawCdp, Response};
use serde_json::{Value, json};

/// How long a blocked session is given to answer before it counts as blocked.
const PROBE: Duration = Duration::from_millis(700);
const T: Duration = Duration::from_secs(10);

/// `/p?n=NAME&f=URL&s=URL&d=1`: a page named NAME with an iframe per `f` (plain), per `s`
/// (sandboxed, scripts and modals allowed) and a `srcdoc` iframe when `d=1`.
fn server() -> HttpServer {
    HttpServer::start(|req| {
        let mut name = String::new();
        let mut body = String::new();
        for pair in req.query.split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = common::percent_decode(v);
            match k {
                "n" => name = v,
                "f" => body.push_str(&format!("<iframe src=\"{v}\"></iframe>")),
                "s" => body.push_str(&format!(
                    "<iframe sandbox=\"allow-scripts allow-modals\" src=\"{v}\"></iframe>"
                )),
                "d" => body.push_str("<iframe srcdoc=\"<p>srcdoc</p>\"></iframe>"),
                _ => {}
            }
        }
        Response::html(format!(
            "<!doctype html><html><head><title>{name}</title></head><body><p>{name}</p>{body}\
             </body></html>"
        ))
    })
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A tracked session.
#[derive(Debug, Clone)]
struct Sess {
    sid: String,
    tid: String,
    kind: String,
    name: String,
    info: Value,
    isolate: Option<String>,
}

struct Lab {
    cdp: RawCdp,
    port: u16,
    sessions: Vec<Sess>,
    replies: HashMap<u64, (Instant, Value)>,
    dialogs: Vec<Value>,
}

impl Lab {
    fn new(ws_url: &str, port: u16) -> Lab {
        let mut cdp = RawCdp::connect(ws_url).expect("connect");
        cdp.call(
            "Target.setAutoAttach",
            json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
            None,
            T,
        )
        .expect("browser-level auto-attach");
        Lab {
            cdp,
            port,
            sessions: Vec::new(),
            replies: HashMap::new(),
            dialogs: Vec::new(),
        }
    }

    fn url(&self, host: &str, name: &str, extra: &str) -> String {
        format!("http://{host}:{}/p?n={name}{extra}", self.port)
    }

    fn handle(&mut self, m: Value) {
        if let Some(id) = m.get("id").and_then(Value::as_u64) {
            self.replies.insert(id, (Instant::now(), m));
            return;
        }
        match m["method"].as_str().unwrap_or("") {
            "Target.attachedToTarget" => {
                let p = &m["params"];
                let sid = p["sessionId"].as_str().unwrap_or("").to_string();
                let info = p["targetInfo"].clone();
                let kind = info["type"].as_str().unwrap_or("").to_string();
                if kind == "page" || kind == "iframe" {
                    for method in ["Page.enable", "Runtime.enable"] {
                        let _ = self.cdp.send_command(method, json!({}), Some(&sid));
                    }
                    let _ = self.cdp.send_command(
                        "Target.setAutoAttach",
                        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
                        Some(&sid),
                    );
                    self.sessions.push(Sess {
                        sid: sid.clone(),
                        tid: info["targetId"].as_str().unwrap_or("").to_string(),
                        kind,
                        name: String::new(),
                        info,
                        isolate: None,
                    });
                }
                let _ =
                    self.cdp
                        .send_command("Runtime.runIfWaitingForDebugger", json!({}), Some(&sid));
            }
            "Target.detachedFromTarget" => {
                let sid = m["params"]["sessionId"].as_str().unwrap_or("");
                self.sessions.retain(|s| s.sid != sid);
            }
            "Page.javascriptDialogOpening" => self.dialogs.push(m),
            _ => {}
        }
    }

    fn pump(&mut self, d: Duration) {
        let end = Instant::now()
            .checked_add(d)
            .expect("a deadline within range");
        while let Ok(Some(m)) = self
            .cdp
            .next_message(end.saturating_duration_since(Instant::now()))
        {
            self.handle(m);
        }
    }

    fn send(&mut self, method: &str, params: Value, sid: Option<&str>) -> u64 {
        self.cdp.send_command(method, params, sid).expect("send")
    }

    fn wait_reply(&mut self, id: u64, timeout: Duration) -> Option<Value> {
        let end = Instant::now()
            .checked_add(timeout)
            .expect("a deadline within range");
        loop {
            if let Some((_, m)) = self.replies.remove(&id) {
                return Some(m);
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match self.cdp.next_message(left) {
                Ok(Some(m)) => self.handle(m),
                _ => return None,
            }
        }
    }

    fn call(&mut self, method: &str, params: Value, sid: Option<&str>) -> Option<Value> {
        let id = self.send(method, params, sid);
        self.wait_reply(id, T)
    }

    fn evaluate(&mut self, sid: &str, expr: &str) -> Option<Value> {
        self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true, "userGesture": true}),
            Some(sid),
        )
        .map(|r| r["result"]["result"]["value"].clone())
    }

    fn sid_of(&self, name: &str) -> String {
        self.sessions
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no session named {name}: {:?}", self.names()))
            .sid
            .clone()
    }

    fn names(&self) -> Vec<String> {
        self.sessions.iter().map(|s| s.name.clone()).collect()
    }

    /// Waits until every session's document has loaded and no new session came meanwhile.
    fn settle(&mut self) {
        for _ in 0..10 {
            let before = self.sessions.len();
            let sids: Vec<String> = self.sessions.iter().map(|s| s.sid.clone()).collect();
            for sid in sids {
                self.evaluate(
                    &sid,
                    "new Promise(r => document.readyState === 'complete' ? r(1) : \
                     addEventListener('load', () => r(1)))",
                );
            }
            self.pump(Duration::from_millis(300));
            if self.sessions.len() == before {
                break;
            }
        }
        // Fresh TargetInfo (URL, opener fields) and names; isolate ids.
        let targets = self
            .call("Target.getTargets", json!({}), None)
            .expect("getTargets");
        let infos = targets["result"]["targetInfos"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut blanks = 0;
        for i in 0..self.sessions.len() {
            let tid = self.sessions[i].tid.clone();
            if let Some(info) = infos.iter().find(|t| t["targetId"] == tid.as_str()) {
                self.sessions[i].info = info.clone();
            }
            let url = self.sessions[i].info["url"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let name = url
                .split_once("n=")
                .map(|(_, n)| n.split('&').next().unwrap_or("").to_string())
                .unwrap_or_else(|| {
                    blanks += 1;
                    format!("blank{blanks}")
                });
            self.sessions[i].name = name;
            let sid = self.sessions[i].sid.clone();
            self.sessions[i].isolate = self
                .call("Runtime.getIsolateId", json!({}), Some(&sid))
                .and_then(|r| r["result"]["id"].as_str().map(str::to_string));
        }
    }

    /// Raises an alert in `x` and probes every session; returns the names of the sessions that
    /// did not answer within [`PROBE`] (`x` itself included).
    fn blocked_by_alert_in(&mut self, x: usize) -> Vec<String> {
        let xs = self.sessions[x].clone();
        self.dialogs.clear();
        let r = self.evaluate(&xs.sid, "setTimeout(() => alert('x'), 0); 1");
        assert_eq!(r, Some(json!(1)), "evaluate in {}", xs.name);
        let end = Instant::now()
            .checked_add(T)
            .expect("a deadline within range");
        while self.dialogs.is_empty() && Instant::now() < end {
            self.pump(Duration::from_millis(20));
        }
        let dialog = self.dialogs.first().cloned().expect("the alert opens");
        let dsid = dialog["sessionId"].as_str().unwrap_or("").to_string();
        let probes: Vec<(String, u64)> = self
            .sessions
            .clone()
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    self.send(
                        "Runtime.evaluate",
                        json!({"expression": "1", "returnByValue": true}),
                        Some(&s.sid),
                    ),
                )
            })
            .collect();
        let sent = Instant::now();
        self.pump(PROBE);
        let blocked: Vec<String> = probes
            .iter()
            .filter(|(_, id)| {
                self.replies
                    .get(id)
                    .is_none_or(|(at, _)| *at > sent + PROBE)
            })
            .map(|(n, _)| n.clone())
            .collect();
        let ans = self.send(
            "Page.handleJavaScriptDialog",
            json!({"accept": true}),
            Some(&dsid),
        );
        assert!(self.wait_reply(ans, T).is_some(), "the alert is answered");
        for (name, id) in &probes {
            assert!(
                self.wait_reply(*id, T).is_some(),
                "{name}'s evaluate is answered once the alert is gone"
            );
        }
        blocked
    }

    fn run(&mut self, title: &str) {
        self.settle();
        let n = self.sessions.len();
        let isolates: Vec<String> = {
            let mut seen: Vec<String> = Vec::new();
            self.sessions
                .iter()
                .map(|s| match &s.isolate {
                    Some(i) => {
                        let k = seen.iter().position(|x| x == i).unwrap_or_else(|| {
                            seen.push(i.clone());
                            seen.len() - 1
                        });
                        format!("I{k}")
                    }
                    None => "I?".into(),
                })
                .collect()
        };
        let name_of = |tid: &str| {
            self.sessions.iter().find(|s| s.tid == tid).map_or_else(
                || {
                    if tid.is_empty() {
                        "-".into()
                    } else {
                        "?".into()
                    }
                },
                |s| s.name.clone(),
            )
        };
        eprintln!("\n=== {title}");
        for (i, s) in self.sessions.iter().enumerate() {
            let info = &s.info;
            eprintln!(
                "  {:>2} {:<16} {:<6} {:<4} opener={:<10} canAccessOpener={:<5} openerFrame={:<10} ctx={} {}",
                i,
                s.name,
                s.kind,
                isolates[i],
                name_of(info["openerId"].as_str().unwrap_or("")),
                info["canAccessOpener"],
                name_of(info["openerFrameId"].as_str().unwrap_or("")),
                &info["browserContextId"].as_str().unwrap_or("")
                    [..6.min(info["browserContextId"].as_str().unwrap_or("").len())],
                info["url"].as_str().unwrap_or("")
            );
        }
        eprintln!("  alert in ↓ blocks evaluate on → (B blocked, . answered)");
        eprintln!(
            "  {:<16} {}",
            "",
            (0..n).map(|i| format!("{i:>3}")).collect::<String>()
        );
        let mut mismatches = Vec::new();
        for x in 0..n {
            let blocked = self.blocked_by_alert_in(x);
            let row: String = self
                .sessions
                .iter()
                .enumerate()
                .map(|(y, s)| {
                    let b = blocked.contains(&s.name);
                    if b != (isolates[x] == isolates[y] && isolates[x] != "I?") {
                        mismatches.push(format!("{}->{}", self.sessions[x].name, s.name));
                    }
                    format!("{:>3}", if b { "B" } else { "." })
                })
                .collect();
            eprintln!("  {:<16} {row}", self.sessions[x].name);
        }
        eprintln!(
            "  same isolate id predicts it: {} mismatches {mismatches:?}",
            mismatches.len()
        );
    }

    fn close_all(&mut self) {
        let pages: Vec<String> = self
            .sessions
            .iter()
            .filter(|s| s.kind == "page")
            .map(|s| s.tid.clone())
            .collect();
        for p in pages {
            self.call("Target.closeTarget", json!({"targetId": p}), None);
        }
        self.pump(Duration::from_millis(300));
        self.sessions.clear();
    }

    /// A new page from the client (not opened by any page): `Target.createTarget`.
    fn tab(&mut self, url: &str) {
        self.call("Target.createTarget", json!({"url": url}), None)
            .expect("createTarget");
        self.pump(Duration::from_millis(200));
    }

    /// Runs `expr` with a user gesture in session `name` (each popup needs its own gesture).
    fn script(&mut self, name: &str, expr: &str) {
        let sid = self.sid_of(name);
        self.evaluate(&sid, expr);
        self.pump(Duration::from_millis(200));
    }
}

fn private_browser() -> Option<common::Browser> {
    common::chromium_path()?;
    Some(
        common::Browser::launch_with_args(&[
            "--host-resolver-rules=MAP cdp-dialog-bridge.invalid ~NOTFOUND, MAP * 127.0.0.1",
        ])
        .expect("launch a private Chromium"),
    )
}

fn open(w: &str) -> String {
    format!("window.open('{w}'); 1")
}

#[test]
#[ignore = "a measurement (issue 20): run with --ignored --nocapture"]
fn a_popups_of_every_kind() {
    let Some(b) = private_browser() else { return };
    let srv = server();
    let mut lab = Lab::new(&b.ws_url, srv.port());
    let root = lab.url("site-a.com", "opener", "");
    lab.tab(&root);
    lab.settle();
    let same = lab.url("site-a.com", "same", "");
    let sub = lab.url("sub.site-a.com", "subdomain", "");
    let cross = lab.url("site-b.com", "cross", "");
    let noopener = lab.url("site-a.com", "noopener", "");
    let rel = lab.url("site-a.com", "relnoopener", "");
    lab.script("opener", &open(&same));
    lab.script("opener", &open(&sub));
    lab.script("opener", &open(&cross));
    lab.script(
        "opener",
        &format!("window.open('{noopener}', '_blank', 'noopener'); 1"),
    );
    lab.script(
        "opener",
        &format!(
            "const a = document.createElement('a'); a.href = '{rel}'; a.target = '_blank'; \
             a.rel = 'noopener'; document.body.append(a); a.click(); 1"
        ),
    );
    lab.script(
        "opener",
        "const w = window.open(''); w.document.write('<title>blank</title>'); 1",
    );
    lab.script(
        "opener",
        "window.open('about:blank', '_blank', 'noopener'); 1",
    );
    lab.run("popups of site-a.com: same-origin, subdomain, cross-site, noopener, rel=noopener, about:blank (opener / noopener)");
    lab.close_all();
}

#[test]
#[ignore = "a measurement (issue 20): run with --ignored --nocapture"]
fn b_popups_of_popups_and_independent_tabs() {
    let Some(b) = private_browser() else { return };
    let srv = server();
    let mut lab = Lab::new(&b.ws_url, srv.port());
    let root = lab.url("site-a.com", "opener", "");
    lab.tab(&root);
    lab.settle();
    let p1 = lab.url("site-a.com", "pop1", "");
    let p2 = lab.url("site-a.com", "pop1pop", "");
    let n1 = lab.url("site-a.com", "noop1", "");
    let n2 = lab.url("site-a.com", "noop1pop", "");
    lab.script("opener", &open(&p1));
    lab.script(
        "opener",
        &format!("window.open('{n1}', '_blank', 'noopener'); 1"),
    );
    lab.settle();
    lab.script("pop1", &open(&p2));
    lab.script("noop1", &open(&n2));
    let t1 = lab.url("site-a.com", "tab1", "");
    let t2 = lab.url("site-a.com", "tab2", "");
    let tb = lab.url("site-b.com", "tabB", "");
    lab.tab(&t1);
    lab.tab(&t2);
    lab.tab(&tb);
    lab.run(
        "popups of popups (with and without noopener) and independent tabs (Target.createTarget)",
    );
    lab.close_all();
}

#[test]
#[ignore = "a measurement (issue 20): run with --ignored --nocapture"]
fn c_frames_a_b_a_sandboxed_srcdoc() {
    let Some(b) = private_browser() else { return };
    let srv = server();
    let mut lab = Lab::new(&b.ws_url, srv.port());
    let grand = lab.url("site-a.com", "grandA", "");
    let mid = lab.url("site-b.com", "midB", &format!("&f={}", enc(&grand)));
    let sub = lab.url("sub.site-a.com", "subA", "");
    let sandboxed = lab.url("site-a.com", "sandboxedA", "");
    let c = lab.url("site-c.com", "frameC", "");
    let root = lab.url(
        "site-a.com",
        "topA",
        &format!(
            "&f={}&f={}&s={}&f={}&d=1",
            enc(&mid),
            enc(&sub),
            enc(&sandboxed),
            enc(&c)
        ),
    );
    lab.tab(&root);
    // A popup of the top page, same-site: shares A's renderer with the grandchild too?
    lab.settle();
    let pop = lab.url("site-a.com", "popA", "");
    lab.script("topA", &open(&pop));
    lab.run("frames: A page > B iframe > A grandchild; same-site subdomain iframe; sandboxed same-site iframe; srcdoc; C iframe; an A popup");
    lab.close_all();
}

#[test]
#[ignore = "a measurement (issue 20): run with --ignored --nocapture"]
fn d_what_a_site_is() {
    let Some(b) = private_browser() else { return };
    let srv = server();
    let other = server();
    let mut lab = Lab::new(&b.ws_url, srv.port());
    for (root_host, variants) in [
        ("foo.co.uk", vec!["sub.foo.co.uk", "bar.co.uk"]),
        (
            "x.herokuapp.com",
            vec!["sub.x.herokuapp.com", "y.herokuapp.com"],
        ),
        ("a.localhost", vec!["b.a.localhost", "localhost"]),
        ("a.internal", vec!["b.a.internal", "c.internal"]),
        ("127.0.0.1", vec!["localhost"]),
    ] {
        let root = lab.url(root_host, "root", "");
        lab.tab(&root);
        lab.settle();
        for (i, v) in variants.iter().enumerate() {
            let u = lab.url(v, &format!("v{i}"), "");
            lab.script("root", &open(&u));
        }
        // Same host, another port.
        let port = format!("http://{root_host}:{}/p?n=port", other.port());
        lab.script("root", &open(&port));
        lab.run(&format!(
            "popups of {root_host}: {variants:?} and another port"
        ));
        lab.close_all();
    }
}
