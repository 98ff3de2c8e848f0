//! End-to-end tests of frame tracking and CDP routing against a real headless Chromium
//! (SPEC §4, §7, §8, §10, §11, §13).
//!
//! Three sites, one server each:
//! * site A, `http://127.0.0.1:P1` ([`HttpServer`]): the top page `/` with a `srcdoc` iframe, a
//!   same-origin iframe `/same` and a cross-site iframe from site B;
//! * site B, `http://localhost:P2` (a second [`HttpServer`], addressed as `localhost`): `/cross`,
//!   an out-of-process iframe (OOPIF) that nests a frame from site C and defines `report(v)`,
//!   which sends `v` to B's own `/report`;
//! * site C, `http://127.0.0.2:P3` ([`ThirdSite`], a tiny server in this file, because
//!   [`HttpServer`] binds 127.0.0.1 only and a socket bound there is not reachable as
//!   127.0.0.2): `/third`, nested in the OOPIF and cross-site to it, so its own OOPIF.
//!
//! One Chromium per test binary ([`common::shared_browser`]); every test opens its own page with
//! an independent [`RawCdp`] client, attaches its own supervisor (own task id) to exactly that
//! page, waits for the frame map to settle with [`Supervisor::wait_for`] (no sleeps), and closes
//! the page when it ends, also on panic ([`Fixture`]'s `Drop`). Frame ids found in the
//! supervisor's snapshot are cross-checked against what the raw client reads from the browser.
//!
//! Tests skip (printing `SKIPPED: no Chromium`) when no Chromium is installed, unless
//! `CDP_SUPERVISOR_E2E=require`.

use crate::common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::common::pages::attach_to_page;
use crate::common::{HttpServer, RawCdp, Response, js};
use cdp_supervisor::FrameRecord;
use cdp_supervisor::unversioned;
use cdp_supervisor::{
    Config, DialogAction, Route, Snapshot, StartOptions, Supervisor, SupervisorRegistry, tools,
};
use serde_json::{Value, json};

/// Deadline of every wait in these tests.
const T: Duration = Duration::from_secs(15);

const TOP_TITLE: &str = "Frames top";
const SAME_TITLE: &str = "Same origin child";
const CROSS_TITLE: &str = "Cross child";
const THIRD_TITLE: &str = "Third";
const OTHER_TITLE: &str = "Other";
/// Iframes on `/many` (more than `frame_tree_max_entries`, 30).
const MANY: usize = 40;

/// A small HTML document.
fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
         <body>{body}</body></html>"
    )
}

/// Percent-encodes everything but ASCII letters and digits (for a query value).
fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Site C: a tiny static server bound to 127.0.0.2.
// ---------------------------------------------------------------------------------------------

/// A static-page HTTP server bound to `127.0.0.2:0` (loopback, a third site).
struct ThirdSite {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl ThirdSite {
    fn start(pages: Vec<(&'static str, String)>) -> ThirdSite {
        let listener = TcpListener::bind("127.0.0.2:0").expect("bind 127.0.0.2:0 for site C");
        let addr = listener.local_addr().expect("site C local_addr");
        let stop = Arc::new(AtomicBool::new(false));
        let pages = Arc::new(pages);
        let accept = {
            let stop = Arc::clone(&stop);
            thread::Builder::new()
                .name(format!("site-c-{}", addr.port()))
                .spawn(move || {
                    for conn in listener.incoming() {
                        if stop.load(Ordering::SeqCst) {
                            return;
                        }
                        let Ok(stream) = conn else { continue };
                        let pages = Arc::clone(&pages);
                        let _ = thread::Builder::new()
                            .name("site-c-conn".into())
                            .spawn(move || serve_static(stream, &pages));
                    }
                })
                .expect("spawn site C accept thread")
        };
        ThirdSite {
            addr,
            stop,
            accept: Some(accept),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.2:{}{path}", self.addr.port())
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.2:{}", self.addr.port())
    }
}

impl Drop for ThirdSite {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// Answers one request with the page for its path (404 otherwise) and closes the connection.
fn serve_static(mut stream: TcpStream, pages: &[(&'static str, String)]) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let target = head.split(' ').nth(1).unwrap_or("/");
    let path = target.split('?').next().unwrap_or(target);
    let (status, body) = match pages.iter().find(|(p, _)| *p == path) {
        Some((_, html)) => ("200 OK", html.as_str()),
        None => ("404 Not Found", "not found"),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\nCache-Control: no-store\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes());
    let _ = stream.flush();
    let _ = stream.shutdown(Shutdown::Write);
}

// ---------------------------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------------------------

/// One test's three sites, page, raw CDP client and registry. Dropping it stops the supervisors
/// and closes the page.
struct Fixture {
    /// Site A (`127.0.0.1`): the top page.
    a: HttpServer,
    /// Site B (addressed as `localhost`): the OOPIF.
    b: HttpServer,
    /// Site C (`127.0.0.2`): the frame nested in the OOPIF.
    c: ThirdSite,
    /// The client that opened the page (it has `Page.enable` on its own session).
    cdp: RawCdp,
    /// The page target id (= its main frame id).
    page: String,
    /// `cdp`'s session on the page.
    session: String,
    reg: SupervisorRegistry,
    task: String,
    ws_url: String,
}

impl Fixture {
    /// Starts the three sites, opens `path` of site A in a new page and waits for its `load`
    /// (which waits for every iframe, cross-site ones included).
    fn open(ws_url: &str, task: &str, path: &str) -> Fixture {
        let c = ThirdSite::start(vec![
            ("/third", page(THIRD_TITLE, "<p>third</p>")),
            ("/other", page(OTHER_TITLE, "<p>other</p>")),
            // Creates one iframe per `next` query parameter (while parsing, so before `load`).
            (
                "/nest",
                page(
                    "Nest",
                    "<p>nest</p><script>\
                     for (const n of new URLSearchParams(location.search).getAll('next')) { \
                     const f = document.createElement('iframe'); f.src = n; \
                     document.body.appendChild(f); }</script>",
                ),
            ),
        ]);
        let third_url = c.url("/third");
        let c_origin = c.origin();
        let b = HttpServer::start(move |req| match req.path.as_str() {
            "/cross" => Response::html(page(
                CROSS_TITLE,
                &format!(
                    "<p>cross</p><script>function report(v) {{ \
                     fetch('/report?' + encodeURIComponent(String(v))); }}</script>\
                     <iframe id=\"third\" src=\"{third_url}\"></iframe>"
                ),
            )),
            // B (depth 1) > C `/nest` (depth 2) > {B `/leaf-b` (an OOPIF at depth 3), C `/third`
            // (same process as its parent, depth 3)}.
            "/deep" => {
                let host = req.header("Host").unwrap_or("localhost");
                let leaf_b = format!("http://{host}/leaf-b");
                Response::html(page(
                    "Deep B",
                    &format!(
                        "<iframe id=\"nest\" src=\"{c_origin}/nest?next={}&next={}\"></iframe>",
                        url_encode(&leaf_b),
                        url_encode("/third")
                    ),
                ))
            }
            "/leaf-b" => Response::html(page("Leaf B", "<p>leaf b</p>")),
            _ => Response::not_found(),
        });
        let cross_url = b.url("localhost", "/cross");
        let deep_url = b.url("localhost", "/deep");
        let a = HttpServer::start(move |req| match req.path.as_str() {
            "/" => Response::html(page(
                TOP_TITLE,
                &format!(
                    "<p>top</p>\
                     <iframe id=\"inline\" srcdoc=\"&lt;p&gt;inline&lt;/p&gt;\"></iframe>\
                     <iframe id=\"same\" src=\"/same\"></iframe>\
                     <iframe id=\"cross\" src=\"{cross_url}\"></iframe>"
                ),
            )),
            "/same" => Response::html(page(SAME_TITLE, "<p>same</p>")),
            "/deep" => Response::html(page(
                "Deep top",
                &format!("<iframe id=\"deep\" src=\"{deep_url}\"></iframe>"),
            )),
            "/many" => Response::html(page(
                "Many frames",
                &(0..MANY)
                    .map(|i| format!("<iframe src=\"/leaf?i={i}\"></iframe>"))
                    .collect::<String>(),
            )),
            "/leaf" => Response::html(page("Leaf", "<p>leaf</p>")),
            _ => Response::not_found(),
        });
        let mut cdp = RawCdp::connect(ws_url).expect("connect a raw CDP client");
        let (page, session) = cdp
            .open_page(&a.url("127.0.0.1", path), T)
            .expect("open the test page");
        Fixture {
            a,
            b,
            c,
            cdp,
            page,
            session,
            reg: SupervisorRegistry::new(Config::default()),
            task: task.to_string(),
            ws_url: ws_url.to_string(),
        }
    }

    /// Attaches this test's supervisor to this test's page.
    fn attach(&self) -> Arc<Supervisor> {
        attach_to_page(
            &self.reg,
            &self.task,
            &self.ws_url,
            &self.page,
            StartOptions::default(),
        )
    }

    fn top_url(&self) -> String {
        self.a.url("127.0.0.1", "/")
    }
    fn top_origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.a.port())
    }
    fn same_url(&self) -> String {
        self.a.url("127.0.0.1", "/same")
    }
    fn cross_url(&self) -> String {
        self.b.url("localhost", "/cross")
    }
    fn cross_origin(&self) -> String {
        format!("http://localhost:{}", self.b.port())
    }

    /// Evaluates `expression` in the top page through the raw client.
    fn eval_top(&mut self, expression: &str) -> Value {
        self.cdp
            .evaluate(&self.session, expression, T)
            .unwrap_or_else(|e| panic!("evaluating {expression:?} in the top page: {e}"))
    }

    /// The browser's own view, read by the raw client: `(srcdoc id, same id, cross id, third
    /// id)`. Same-process children come from `Page.getFrameTree`, OOPIFs (whose target id is
    /// their frame id) from `Target.getTargets`.
    fn browser_frame_ids(&mut self) -> (String, String, String, String) {
        let tree = self
            .cdp
            .call("Page.getFrameTree", json!({}), Some(&self.session), T)
            .expect("Page.getFrameTree");
        assert_eq!(tree["frameTree"]["frame"]["id"], json!(self.page), "{tree}");
        let children = tree["frameTree"]["childFrames"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let child_with_url = |url: &str| {
            children
                .iter()
                .find(|c| c["frame"]["url"] == url)
                .and_then(|c| c["frame"]["id"].as_str())
                .unwrap_or_else(|| panic!("no child frame with url {url} in {tree}"))
                .to_string()
        };
        let srcdoc = child_with_url("about:srcdoc");
        let same = child_with_url(&self.same_url());
        let targets = self
            .cdp
            .call("Target.getTargets", json!({}), None, T)
            .expect("Target.getTargets");
        let iframe_with_url = |url: &str| {
            targets["targetInfos"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|t| t["type"] == "iframe" && t["url"] == url)
                .and_then(|t| t["targetId"].as_str())
                .unwrap_or_else(|| panic!("no iframe target with url {url} in {targets}"))
                .to_string()
        };
        let cross = iframe_with_url(&self.cross_url());
        let third = iframe_with_url(&self.c.url("/third"));
        (srcdoc, same, cross, third)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.reg.stop_all();
        let _ = self.cdp.close_page(&self.page);
    }
}

// ---------------------------------------------------------------------------------------------
// Snapshot helpers
// ---------------------------------------------------------------------------------------------

/// The first frame in the full map with exactly `url`.
fn frame_by_url<'a>(s: &'a Snapshot, url: &str) -> Option<&'a FrameRecord> {
    s.frames.values().find(|f| f.url == url)
}

/// Everything about the frames in a snapshot, for failure messages.
fn dump(s: &Snapshot) -> String {
    let mut frames: Vec<_> = s.frames.values().collect();
    frames.sort_by(|x, y| x.url.cmp(&y.url));
    let frames: Vec<String> = frames.iter().map(|f| format!("  {f:?}")).collect();
    format!(
        "frame_tree: {}\nframes ({}):\n{}\nconsole_errors: {:?}",
        s.frame_tree.to_json(),
        frames.len(),
        frames.join("\n"),
        s.console_errors
    )
}

/// Waits until `pred` holds on a published snapshot; panics with `what` and the last snapshot.
fn settle(sup: &Supervisor, what: &str, pred: impl Fn(&Snapshot) -> bool) -> Arc<Snapshot> {
    sup.wait_for(T, pred).unwrap_or_else(|| {
        panic!(
            "{what}: not reached within {T:?}; last snapshot:\n{}",
            dump(&sup.snapshot())
        )
    })
}

/// The frame ids of the standard page, as the supervisor sees them.
struct Ids {
    srcdoc: String,
    same: String,
    cross: String,
    third: String,
}

/// Waits until the supervisor knows all four child frames of `/` with their final URLs, both
/// OOPIFs with their own sessions and the same-origin child's default execution context.
fn settle_standard(fx: &Fixture, sup: &Supervisor) -> (Arc<Snapshot>, Ids) {
    let (same_url, cross_url, third_url) = (fx.same_url(), fx.cross_url(), fx.c.url("/third"));
    let snap = settle(sup, "the frame map of / settles", |s| {
        s.frame_tree.top.is_some()
            && frame_by_url(s, "about:srcdoc").is_some()
            && frame_by_url(s, &same_url).is_some_and(|f| !f.is_oopif)
            && frame_by_url(s, &cross_url).is_some_and(|f| f.is_oopif && f.session_id.is_some())
            && frame_by_url(s, &third_url).is_some_and(|f| f.is_oopif && f.session_id.is_some())
    });
    let id = |url: &str| frame_by_url(&snap, url).map(|f| f.frame_id.clone());
    let ids = Ids {
        srcdoc: id("about:srcdoc").expect("srcdoc"),
        same: id(&same_url).expect("same"),
        cross: id(&cross_url).expect("cross"),
        third: id(&third_url).expect("third"),
    };
    (snap, ids)
}

/// `browser_cdp` `Runtime.evaluate` of `expression` (by value) with extra routing `args`.
fn tool_eval(fx: &Fixture, expression: &str, route: Value) -> Value {
    let mut args = json!({
        "method": "Runtime.evaluate",
        "params": {"expression": expression, "returnByValue": true},
    });
    if let (Some(a), Some(r)) = (args.as_object_mut(), route.as_object()) {
        a.extend(r.clone());
    }
    tools::browser_cdp(&fx.reg, &fx.task, &args)
}

/// `document.title` of a frame through the supervisor's routing, once its document has loaded
/// (right after a navigation commits, the new document may not have parsed its `<title>` yet).
/// Waits for the `load` event, not a timer: timers in background pages are throttled.
fn title_in(sup: &Supervisor, route: Route<'_>) -> Value {
    let expression = "new Promise(r => { const done = () => r(document.title); \
                      if (document.readyState === 'complete') done(); \
                      else addEventListener('load', done); })";
    let v = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": expression, "awaitPromise": true, "returnByValue": true}),
            route,
            T,
        )
        .unwrap_or_else(|e| panic!("Runtime.evaluate routed to {route:?}: {e}"));
    v["result"]["value"].clone()
}

// ---------------------------------------------------------------------------------------------
// 1. The frame tree
// ---------------------------------------------------------------------------------------------

#[test]
fn frame_tree_shows_every_frame_with_oopifs_and_nesting() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-frames-tree", "/");
    let sup = fx.attach();
    let (snap, ids) = settle_standard(&fx, &sup);
    let (srcdoc, same, cross, third) = fx.browser_frame_ids();
    assert_eq!(
        (&ids.srcdoc, &ids.same, &ids.cross, &ids.third),
        (&srcdoc, &same, &cross, &third),
        "the supervisor's frame ids are the browser's\n{}",
        dump(&snap)
    );

    // top: the page itself.
    let top = snap.frame_tree.top.as_ref().expect("top");
    assert_eq!(top.frame_id, fx.page, "main frame id == page target id");
    assert!(!top.is_oopif);
    assert_eq!(top.url, fx.top_url());
    assert_eq!(top.origin, fx.top_origin());
    assert_eq!(top.parent_frame_id, None);
    assert_eq!(top.session_id, None, "session_id only on OOPIFs");

    let children = &snap.frame_tree.children;
    assert_eq!(children.len(), 4, "{}", dump(&snap));
    assert!(!snap.frame_tree.truncated);
    let child = |id: &str| {
        children
            .iter()
            .find(|c| c.frame_id == id)
            .unwrap_or_else(|| panic!("{id} not in frame_tree.children\n{}", dump(&snap)))
    };

    let s = child(&srcdoc);
    assert_eq!(s.url, "about:srcdoc");
    // Chromium itself reports `securityOrigin: "://"` for about:srcdoc (read independently here);
    // SPEC §7/§10 want an opaque origin serialised as "null".
    let raw_tree = fx
        .cdp
        .call("Page.getFrameTree", json!({}), Some(&fx.session), T)
        .expect("Page.getFrameTree");
    let raw_srcdoc_origin = raw_tree["frameTree"]["childFrames"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["frame"]["id"] == json!(srcdoc))
        .map(|c| c["frame"]["securityOrigin"].clone());
    assert_eq!(
        s.origin,
        "null",
        "a srcdoc frame's origin must be \"null\" (SPEC §10); the browser sent securityOrigin \
         {raw_srcdoc_origin:?}\n{}",
        dump(&snap)
    );
    assert!(!s.is_oopif);
    assert_eq!(s.session_id, None);
    assert_eq!(s.parent_frame_id.as_deref(), Some(fx.page.as_str()));

    let s = child(&same);
    assert_eq!(s.url, fx.same_url());
    assert_eq!(s.origin, fx.top_origin());
    assert!(!s.is_oopif);
    assert_eq!(s.session_id, None);
    assert_eq!(s.parent_frame_id.as_deref(), Some(fx.page.as_str()));

    let c = child(&cross);
    assert_eq!(c.url, fx.cross_url());
    assert_eq!(c.origin, fx.cross_origin());
    assert!(c.is_oopif, "a cross-site iframe is an OOPIF");
    let cross_session = c.session_id.clone().expect("an OOPIF has its own session");
    assert_ne!(Some(&cross_session), snap.page_session_id.as_ref());
    assert_eq!(c.parent_frame_id.as_deref(), Some(fx.page.as_str()));

    let t = child(&third);
    assert_eq!(t.url, fx.c.url("/third"));
    assert_eq!(t.origin, fx.c.origin());
    assert!(t.is_oopif, "cross-site to its parent: its own OOPIF");
    let third_session = t.session_id.clone().expect("its own session");
    assert_ne!(third_session, cross_session);
    assert_eq!(
        t.parent_frame_id.as_deref(),
        Some(cross.as_str()),
        "nested in the OOPIF"
    );

    // Breadth-first: the three direct children before the one nested in the OOPIF.
    let pos = |id: &str| {
        children
            .iter()
            .position(|c| c.frame_id == id)
            .unwrap_or(usize::MAX)
    };
    assert!(
        [&srcdoc, &same, &cross]
            .iter()
            .all(|id| pos(id) < pos(&third)),
        "{}",
        dump(&snap)
    );

    // The full map agrees, and knows who owns every frame.
    assert_eq!(snap.frames.len(), 5, "{}", dump(&snap));
    let rec = |id: &str| snap.frames.get(id).expect("in the full map");
    let page_session = snap.page_session_id.clone().expect("page session");
    assert_eq!(unversioned::owner_session(rec(&fx.page)), page_session);
    assert_eq!(unversioned::owner_session(rec(&srcdoc)), page_session);
    assert_eq!(unversioned::owner_session(rec(&same)), page_session);
    assert_eq!(unversioned::owner_session(rec(&cross)), cross_session);
    assert_eq!(unversioned::owner_session(rec(&third)), third_session);
    assert_eq!(rec(&srcdoc).session_id, None);
    assert_eq!(rec(&same).session_id, None);

    // The JSON shape (SPEC §10): no session_id anywhere (issue 31), parent_frame_id on
    // children.
    let j = snap.to_json();
    let tree = &j["frame_tree"];
    assert_eq!(tree["truncated"], json!(false));
    assert_eq!(tree["top"]["frame_id"], json!(fx.page));
    assert_eq!(tree["top"]["is_oopif"], json!(false));
    assert!(tree["top"].get("session_id").is_none(), "{tree}");
    assert!(tree["top"].get("parent_frame_id").is_none(), "{tree}");
    assert_eq!(j["page_target_id"], json!(fx.page));
    for c in tree["children"].as_array().expect("children") {
        assert!(c["is_oopif"].is_boolean(), "{c}");
        assert!(c.get("session_id").is_none(), "{c}");
        assert!(c["parent_frame_id"].is_string(), "{c}");
        assert!(c["url"].is_string() && c["origin"].is_string(), "{c}");
    }
    let via_tool = tools::browser_snapshot(&fx.reg, &fx.task, &json!({}));
    assert_eq!(
        via_tool["frame_tree"]["children"].as_array().map(Vec::len),
        Some(4),
        "{via_tool}"
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Routing through browser_cdp
// ---------------------------------------------------------------------------------------------

#[test]
fn browser_cdp_routes_into_every_frame() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-frames-route", "/");
    let sup = fx.attach();
    let (snap, ids) = settle_standard(&fx, &sup);
    let cross_session = snap.frames[&ids.cross].session_id.clone().expect("sid");
    let page_session = snap.page_session_id.clone().expect("page session");

    // The OOPIF: its own session.
    let out = tool_eval(&fx, "document.title", json!({"frame_id": ids.cross}));
    assert_eq!(out["success"], json!(true), "{out}");
    assert_eq!(out["method"], json!("Runtime.evaluate"));
    assert_eq!(
        out["result"]["result"]["value"],
        json!(CROSS_TITLE),
        "{out}"
    );
    assert_eq!(out["frame_id"], json!(ids.cross));
    // Session ids stay out of tool results (issue 31); the values prove the routing.
    assert!(out.get("session_id").is_none(), "{out}");
    assert!(!out.to_string().contains(&cross_session), "{out}");

    // The same-origin child: the page's session, but the child's default context.
    let out = tool_eval(&fx, "document.title", json!({"frame_id": ids.same}));
    assert_eq!(out["success"], json!(true), "{out}");
    assert_eq!(
        out["result"]["result"]["value"],
        json!(SAME_TITLE),
        "evaluated in the child, not in the top page: {out}"
    );
    assert!(!out.to_string().contains(&page_session), "{out}");
    // Also location, to be sure of the realm.
    let out = tool_eval(&fx, "location.href", json!({"frame_id": ids.same}));
    assert_eq!(
        out["result"]["result"]["value"],
        json!(fx.same_url()),
        "{out}"
    );

    // The srcdoc child, too.
    let out = tool_eval(&fx, "location.href", json!({"frame_id": ids.srcdoc}));
    assert_eq!(out["success"], json!(true), "{out}");
    assert_eq!(
        out["result"]["result"]["value"],
        json!("about:srcdoc"),
        "{out}"
    );

    // The third-site frame nested in the OOPIF.
    let out = tool_eval(&fx, "document.title", json!({"frame_id": ids.third}));
    assert_eq!(out["success"], json!(true), "{out}");
    assert_eq!(
        out["result"]["result"]["value"],
        json!(THIRD_TITLE),
        "{out}"
    );
    assert!(out.get("session_id").is_none(), "{out}");

    // The main frame by frame id, and the page by target id.
    let out = tool_eval(&fx, "document.title", json!({"frame_id": fx.page}));
    assert_eq!(out["result"]["result"]["value"], json!(TOP_TITLE), "{out}");
    let out = tool_eval(&fx, "document.title", json!({"target_id": fx.page}));
    assert_eq!(out["success"], json!(true), "{out}");
    assert_eq!(out["result"]["result"]["value"], json!(TOP_TITLE), "{out}");
    assert!(out.get("frame_id").is_none(), "{out}");

    // A tracked OOPIF target by target id (its target id is its frame id).
    let out = tool_eval(&fx, "document.title", json!({"target_id": ids.cross}));
    assert_eq!(
        out["result"]["result"]["value"],
        json!(CROSS_TITLE),
        "{out}"
    );

    // Browser-level: no session.
    let out = tools::browser_cdp(&fx.reg, &fx.task, &json!({"method": "Browser.getVersion"}));
    assert_eq!(out["success"], json!(true), "{out}");
    assert!(out["result"]["product"].is_string(), "{out}");
    assert!(out.get("session_id").is_none(), "{out}");

    // An unknown frame id: points at frame_tree.
    let out = tool_eval(&fx, "1", json!({"frame_id": "NOSUCHFRAME"}));
    assert_eq!(out["success"], json!(false), "{out}");
    let err = out["error"].as_str().expect("error text");
    assert!(err.contains("frame_tree"), "{out}");
    assert!(err.contains("NOSUCHFRAME"), "{out}");
    assert!(out.get("cdp_error").is_none(), "{out}");

    // An unknown target id: a clear error.
    let out = tool_eval(&fx, "1", json!({"target_id": "NOSUCHTARGET"}));
    assert_eq!(out["success"], json!(false), "{out}");
    assert!(
        out["error"].as_str().unwrap_or("").contains("NOSUCHTARGET"),
        "{out}"
    );

    // Both routes at once.
    let out = tool_eval(
        &fx,
        "1",
        json!({"frame_id": ids.cross, "target_id": fx.page}),
    );
    assert_eq!(out["success"], json!(false), "{out}");

    // A CDP error: code and message.
    let out = tools::browser_cdp(
        &fx.reg,
        &fx.task,
        &json!({"method": "Runtime.nope", "frame_id": ids.cross}),
    );
    assert_eq!(out["success"], json!(false), "{out}");
    assert_eq!(out["cdp_error"]["code"], json!(-32601), "{out}");
    assert!(
        out["cdp_error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Runtime.nope")),
        "{out}"
    );
    assert!(
        out["error"].as_str().unwrap_or("").contains("Runtime.nope"),
        "{out}"
    );

    // timeout_s: clamped to at least 1 s, so 0 still works: a call that keeps the frame busy
    // for 300 ms (synchronously: timers in background pages are throttled) still gets its
    // reply. A non-number is an error.
    let started = Instant::now();
    let out = tools::browser_cdp(
        &fx.reg,
        &fx.task,
        &json!({
            "method": "Runtime.evaluate",
            "params": {"expression": "{ const t0 = Date.now(); while (Date.now() - t0 < 300) {} 'late ok' }",
                       "returnByValue": true},
            "frame_id": ids.cross,
            "timeout_s": 0,
        }),
    );
    assert_eq!(
        out["success"],
        json!(true),
        "timeout_s 0 is clamped to 1 s: {out}"
    );
    assert_eq!(out["result"]["result"]["value"], json!("late ok"), "{out}");
    assert!(started.elapsed() >= Duration::from_millis(250));
    let out = tools::browser_cdp(
        &fx.reg,
        &fx.task,
        &json!({"method": "Browser.getVersion", "timeout_s": -5}),
    );
    assert_eq!(
        out["success"],
        json!(true),
        "negative timeout_s is clamped: {out}"
    );
    let out = tools::browser_cdp(
        &fx.reg,
        &fx.task,
        &json!({"method": "Browser.getVersion", "timeout_s": "x"}),
    );
    assert_eq!(out["success"], json!(false), "{out}");
    assert!(
        out["error"].as_str().unwrap_or("").contains("timeout_s"),
        "{out}"
    );

    // The page itself was never disturbed.
    assert_eq!(fx.eval_top("document.title"), json!(TOP_TITLE));
}

// ---------------------------------------------------------------------------------------------
// 3. A prompt inside the OOPIF
// ---------------------------------------------------------------------------------------------

#[test]
fn prompt_in_oopif_is_pending_with_its_frame_id_and_gets_the_answer() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let fx = Fixture::open(&browser.ws_url, "e2e-frames-prompt", "/");
    let sup = fx.attach();
    let (_, ids) = settle_standard(&fx, &sup);

    let v = sup
        .call(
            "Runtime.evaluate",
            json!({
                "expression": "setTimeout(() => report(prompt('Frame asks', 'def')), 0); 'scheduled'",
                "returnByValue": true,
            }),
            Route::Frame(&ids.cross),
            T,
        )
        .expect("schedule the prompt in the OOPIF");
    assert_eq!(v["result"]["value"], json!("scheduled"), "{v}");

    let d = sup
        .wait_for_dialog(T)
        .unwrap_or_else(|| panic!("no dialog pending\n{}", dump(&sup.snapshot())));
    assert_eq!(d.kind, "prompt");
    assert_eq!(d.message, "Frame asks");
    assert_eq!(d.default_prompt, "def");
    assert_eq!(
        d.frame_id.as_deref(),
        Some(ids.cross.as_str()),
        "the dialog carries the OOPIF's frame id"
    );
    let j = sup.snapshot().to_json();
    assert_eq!(j["pending_dialogs"][0]["frame_id"], json!(ids.cross), "{j}");

    let answered = sup
        .respond_to_dialog(DialogAction::Accept, Some("from agent ✓"), None)
        .expect("accept the OOPIF's prompt");
    assert_eq!(answered.id, d.id);
    let report =
        fx.b.wait_report(T)
            .expect("the OOPIF reported what prompt() returned to its own server");
    assert_eq!(report, "from agent ✓");
    let closed = sup
        .wait_for(T, |s| {
            s.pending_dialogs.is_empty() && s.closed_dialog(&d.id).is_some()
        })
        .expect("the dialog is recorded as closed");
    let c = closed.closed_dialog(&d.id).expect("closed");
    assert_eq!(c.closed_by.as_str(), "agent");
    assert_eq!(c.dialog.frame_id.as_deref(), Some(ids.cross.as_str()));
    // The OOPIF still answers.
    assert_eq!(title_in(&sup, Route::Frame(&ids.cross)), json!(CROSS_TITLE));

    // A confirm in the third-site frame nested in the OOPIF (an OOPIF of its own).
    let v = sup
        .call(
            "Runtime.evaluate",
            json!({
                "expression": "setTimeout(() => { window.__answer = confirm('Third asks'); }, 0); 'scheduled'",
                "returnByValue": true,
            }),
            Route::Frame(&ids.third),
            T,
        )
        .expect("schedule the confirm in the nested frame");
    assert_eq!(v["result"]["value"], json!("scheduled"), "{v}");
    let d = sup
        .wait_for_dialog(T)
        .unwrap_or_else(|| panic!("no dialog pending\n{}", dump(&sup.snapshot())));
    assert_eq!(
        (d.kind.as_str(), d.message.as_str()),
        ("confirm", "Third asks")
    );
    assert_eq!(d.frame_id.as_deref(), Some(ids.third.as_str()));
    sup.respond_to_dialog(DialogAction::Accept, None, Some(&d.id))
        .expect("accept the nested frame's confirm");
    let answer = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": "window.__answer", "returnByValue": true}),
            Route::Frame(&ids.third),
            T,
        )
        .expect("read the answer back");
    assert_eq!(answer["result"]["value"], json!(true), "{answer}");
}

// ---------------------------------------------------------------------------------------------
// 4. Navigation and removal
// ---------------------------------------------------------------------------------------------

#[test]
fn oopif_navigation_and_iframe_removal_update_the_tree() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-frames-nav", "/");
    let sup = fx.attach();
    let (_, ids) = settle_standard(&fx, &sup);

    // Navigate the OOPIF (site B) to site C.
    let other = fx.c.url("/other");
    fx.eval_top(&format!(
        "document.querySelector('#cross').src = {}; 'ok'",
        js(&other)
    ));
    let (page, cross, third) = (fx.page.clone(), ids.cross.clone(), ids.third.clone());
    let c_origin = fx.c.origin();
    let snap = settle(&sup, "the OOPIF shows its new url", |s| {
        s.frames
            .get(&cross)
            .is_some_and(|f| f.url == other && f.is_oopif && f.session_id.is_some())
            && !s.frames.contains_key(&third)
    });
    let f = &snap.frames[&cross];
    assert_eq!(f.origin, c_origin, "{}", dump(&snap));
    assert_eq!(
        f.parent_frame_id.as_deref(),
        Some(page.as_str()),
        "still a child of top"
    );
    let entry = snap
        .frame_tree
        .children
        .iter()
        .find(|c| c.frame_id == cross)
        .unwrap_or_else(|| panic!("navigated OOPIF not in frame_tree\n{}", dump(&snap)));
    assert_eq!(entry.url, other);
    assert_eq!(entry.origin, c_origin);
    assert!(entry.is_oopif && entry.session_id.is_some());
    // Exactly top, srcdoc, same and the navigated frame: the nested third-site frame went away
    // with the document that held it.
    let mut known: Vec<&str> = snap.frames.keys().map(String::as_str).collect();
    known.sort_unstable();
    let mut want = vec![
        page.as_str(),
        ids.srcdoc.as_str(),
        ids.same.as_str(),
        cross.as_str(),
    ];
    want.sort_unstable();
    assert_eq!(known, want, "{}", dump(&snap));
    assert_eq!(snap.frame_tree.children.len(), 3, "{}", dump(&snap));
    // Routing follows the new session.
    assert_eq!(
        title_in(&sup, Route::Frame(&cross)),
        json!(OTHER_TITLE),
        "{}",
        dump(&sup.snapshot())
    );

    // Remove the same-origin iframe: it (and only it) leaves the tree and the map.
    fx.eval_top("document.querySelector('#same').remove(); 'ok'");
    let same = ids.same.clone();
    let snap = settle(&sup, "the removed iframe leaves the map", |s| {
        !s.frames.contains_key(&same)
    });
    assert!(
        !snap.frame_tree.children.iter().any(|c| c.frame_id == same),
        "{}",
        dump(&snap)
    );
    let mut known: Vec<&str> = snap.frames.keys().map(String::as_str).collect();
    known.sort_unstable();
    let mut want = vec![page.as_str(), ids.srcdoc.as_str(), cross.as_str()];
    want.sort_unstable();
    assert_eq!(known, want, "only the removed frame left\n{}", dump(&snap));
    assert_eq!(snap.frame_tree.children.len(), 2, "{}", dump(&snap));

    // Remove the OOPIF too: gone from the map, its session no longer routes.
    fx.eval_top("document.querySelector('#cross').remove(); 'ok'");
    let snap = settle(&sup, "the removed OOPIF leaves the map", |s| {
        !s.frames.contains_key(&cross)
    });
    assert_eq!(snap.frames.len(), 2, "{}", dump(&snap));
    let out = tool_eval(&fx, "1", json!({"frame_id": cross}));
    assert_eq!(out["success"], json!(false), "{out}");
    assert_eq!(title_in(&sup, Route::Target(&page)), json!(TOP_TITLE));
}

// ---------------------------------------------------------------------------------------------
// 5. The 30-entry cap
// ---------------------------------------------------------------------------------------------

#[test]
fn forty_iframes_are_capped_at_thirty_entries_and_truncated() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let fx = Fixture::open(&browser.ws_url, "e2e-frames-many", "/many");
    let sup = fx.attach();
    let leaf_prefix = fx.a.url("127.0.0.1", "/leaf?i=");
    let snap = settle(&sup, "all 41 frames are known", |s| {
        s.frames.len() == MANY + 1
            && s.frames
                .values()
                .filter(|f| f.url.starts_with(&leaf_prefix))
                .count()
                == MANY
    });
    assert_eq!(snap.frame_tree.children.len(), 30, "{}", dump(&snap));
    assert!(snap.frame_tree.truncated);
    // Document order: the first 30 iframes are the ones shown.
    for (i, c) in snap.frame_tree.children.iter().enumerate() {
        assert_eq!(c.url, format!("{leaf_prefix}{i}"), "{}", dump(&snap));
        assert_eq!(c.parent_frame_id.as_deref(), Some(fx.page.as_str()));
        assert!(!c.is_oopif);
    }
    let j = snap.to_json();
    assert_eq!(j["frame_tree"]["truncated"], json!(true), "{j}");
    assert_eq!(
        j["frame_tree"]["children"].as_array().map(Vec::len),
        Some(30)
    );
    // A frame left out of the tree still routes.
    let hidden = snap
        .frames
        .values()
        .find(|f| f.url == format!("{leaf_prefix}{}", MANY - 1))
        .expect("the last leaf")
        .frame_id
        .clone();
    let out = tool_eval(&fx, "location.search", json!({"frame_id": hidden}));
    assert_eq!(
        out["result"]["result"]["value"],
        json!(format!("?i={}", MANY - 1)),
        "{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Console ring
// ---------------------------------------------------------------------------------------------

#[test]
fn console_errors_and_exceptions_from_page_and_oopif_land_in_the_ring() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-frames-console", "/");
    // The console ring is an opt-in (a page can tell that the Runtime domain is on: SPEC §19).
    fx.reg = SupervisorRegistry::new(Config::default().with_capture_console(true));
    let sup = fx.attach();
    let (_, ids) = settle_standard(&fx, &sup);

    let script = |who: &str| {
        format!(
            "console.log('log-{who}'); console.info('info-{who}'); console.error('boom-{who}'); \
             setTimeout(() => {{ throw new Error('kaboom-{who}') }}, 0); 'ok'"
        )
    };
    let page = fx.page.clone();
    for (who, route) in [
        ("page", Route::Target(&page)),
        ("oopif", Route::Frame(&ids.cross)),
    ] {
        let v = sup
            .call(
                "Runtime.evaluate",
                json!({"expression": script(who), "returnByValue": true}),
                route,
                T,
            )
            .unwrap_or_else(|e| panic!("evaluate in the {who}: {e}"));
        assert_eq!(v["result"]["value"], json!("ok"), "{v}");
    }
    let has = |s: &Snapshot, level: &str, text: &str| {
        s.console_errors
            .iter()
            .any(|e| e.level == level && e.text.contains(text))
    };
    let snap = settle(&sup, "all four console entries arrive", |s| {
        has(s, "error", "boom-page")
            && has(s, "exception", "kaboom-page")
            && has(s, "error", "boom-oopif")
            && has(s, "exception", "kaboom-oopif")
    });
    // The logs and infos were emitted first on the same sessions, so they would be here by now.
    for e in snap.console_errors.iter() {
        assert!(
            !e.text.contains("log-") && !e.text.contains("info-"),
            "console.log/info are not errors: {e:?}"
        );
        assert!(e.ts > 1.6e9, "{e:?}");
    }
    assert_eq!(snap.console_errors.len(), 4, "{:?}", snap.console_errors);
    let oopif_error = snap
        .console_errors
        .iter()
        .find(|e| e.text.contains("boom-oopif"))
        .expect("oopif error");
    assert_eq!(oopif_error.text, "boom-oopif");
    let j = oopif_error.to_json();
    assert!(j["ts"].is_f64() && j["url"].is_string(), "{j}");
}

// ---------------------------------------------------------------------------------------------
// 7. Frames created after attaching
// ---------------------------------------------------------------------------------------------

#[test]
fn iframes_created_after_attach_appear_and_are_resumed() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-frames-late", "/");
    let sup = fx.attach();
    let _ = settle_standard(&fx, &sup);

    let late_same = fx.a.url("127.0.0.1", "/same?late=1");
    let late_cross = fx.b.url("localhost", "/cross?late=1");
    let third_url = fx.c.url("/third");
    fx.eval_top(&format!(
        "for (const [id, src] of [['late-same', {}], ['late-cross', {}]]) {{ \
           const f = document.createElement('iframe'); f.id = id; f.src = src; \
           document.body.appendChild(f); }} 'ok'",
        js(&late_same),
        js(&late_cross)
    ));
    let page = fx.page.clone();
    let snap = settle(&sup, "the late iframes appear", |s| {
        let same_ok = frame_by_url(s, &late_same)
            .is_some_and(|f| !f.is_oopif && f.parent_frame_id.as_deref() == Some(&page));
        let cross = frame_by_url(s, &late_cross);
        let cross_ok = cross.is_some_and(|f| {
            f.is_oopif && f.session_id.is_some() && f.parent_frame_id.as_deref() == Some(&page)
        });
        // The late OOPIF nests a third-site frame of its own: it was auto-attached (recursively)
        // and resumed too, or it would never have loaded.
        let nested_ok = cross.is_some_and(|c| {
            s.frames.values().any(|f| {
                f.url == third_url
                    && f.is_oopif
                    && f.parent_frame_id.as_deref() == Some(&c.frame_id)
            })
        });
        same_ok && cross_ok && nested_ok
    });
    assert_eq!(snap.frames.len(), 8, "{}", dump(&snap));
    let late_cross_id = frame_by_url(&snap, &late_cross)
        .expect("late cross")
        .frame_id
        .clone();
    let late_same_id = frame_by_url(&snap, &late_same)
        .expect("late same")
        .frame_id
        .clone();
    let late_third_id = snap
        .frames
        .values()
        .find(|f| f.parent_frame_id.as_deref() == Some(late_cross_id.as_str()))
        .expect("late third")
        .frame_id
        .clone();
    // Not left paused: script runs in each of them.
    assert_eq!(
        title_in(&sup, Route::Frame(&late_cross_id)),
        json!(CROSS_TITLE)
    );
    assert_eq!(
        title_in(&sup, Route::Frame(&late_same_id)),
        json!(SAME_TITLE)
    );
    assert_eq!(
        title_in(&sup, Route::Frame(&late_third_id)),
        json!(THIRD_TITLE)
    );
    assert_eq!(
        fx.eval_top("document.getElementById('late-cross').contentWindow.length"),
        json!(1),
        "the late OOPIF finished building its document"
    );
    // Both show in the tree, the late OOPIF with its session.
    let tree = snap.frame_tree.to_json();
    let entry = tree["children"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["frame_id"] == json!(late_cross_id))
        .cloned()
        .unwrap_or_else(|| panic!("late OOPIF not in frame_tree: {tree}"));
    assert_eq!(entry["is_oopif"], json!(true));
    assert!(entry.get("session_id").is_none(), "{entry}");
    assert_eq!(entry["origin"], json!(fx.cross_origin()));
}

// ---------------------------------------------------------------------------------------------
// 8. An OOPIF that navigates back to its parent's site
// ---------------------------------------------------------------------------------------------

#[test]
fn oopif_navigating_back_to_the_top_site_becomes_in_process_and_still_routes() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-frames-swap-back", "/");
    let sup = fx.attach();
    let (_, ids) = settle_standard(&fx, &sup);

    let back = fx.a.url("127.0.0.1", "/same?back=1");
    fx.eval_top(&format!(
        "document.querySelector('#cross').src = {}; 'ok'",
        js(&back)
    ));
    let (page, cross, third) = (fx.page.clone(), ids.cross.clone(), ids.third.clone());
    let snap = settle(&sup, "the former OOPIF is an in-process frame", |s| {
        s.frames
            .get(&cross)
            .is_some_and(|f| f.url == back && !f.is_oopif)
            && !s.frames.contains_key(&third)
    });
    let f = &snap.frames[&cross];
    assert_eq!(f.session_id, None, "{}", dump(&snap));
    assert_eq!(f.origin, fx.top_origin());
    assert_eq!(f.parent_frame_id.as_deref(), Some(page.as_str()));
    assert_eq!(
        Some(unversioned::owner_session(f)),
        snap.page_session_id.as_deref(),
        "owned by the page session now\n{}",
        dump(&snap)
    );
    assert_eq!(snap.frames.len(), 4, "{}", dump(&snap));
    let j = snap.frame_tree.to_json();
    let entry = j["children"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["frame_id"] == json!(cross))
        .cloned()
        .unwrap_or_else(|| panic!("frame {cross} not in frame_tree: {j}"));
    assert_eq!(entry["is_oopif"], json!(false));
    assert!(entry.get("session_id").is_none(), "{entry}");

    // Routing by frame id now needs the frame's main world on the page session: the supervisor
    // finds it through the DOM (no Runtime domain, SPEC §19), and evaluation runs in that frame.
    let out = tool_eval(&fx, "location.href", json!({"frame_id": cross}));
    assert_eq!(out["success"], json!(true), "{out}\n{}", dump(&snap));
    assert_eq!(out["result"]["result"]["value"], json!(back), "{out}");
    assert_eq!(title_in(&sup, Route::Frame(&cross)), json!(SAME_TITLE));
}

// ---------------------------------------------------------------------------------------------
// 9. Reloading the top page
// ---------------------------------------------------------------------------------------------

#[test]
fn reloading_the_page_replaces_every_child_frame() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let fx = Fixture::open(&browser.ws_url, "e2e-frames-reload", "/");
    let sup = fx.attach();
    let (_, old) = settle_standard(&fx, &sup);

    let out = tools::browser_cdp(
        &fx.reg,
        &fx.task,
        &json!({"method": "Page.reload", "target_id": fx.page}),
    );
    assert_eq!(out["success"], json!(true), "{out}");
    let old_ids = [
        old.srcdoc.clone(),
        old.same.clone(),
        old.cross.clone(),
        old.third.clone(),
    ];
    let (same_url, cross_url, third_url) = (fx.same_url(), fx.cross_url(), fx.c.url("/third"));
    let snap = settle(
        &sup,
        "the reloaded page's frames replace the old ones",
        |s| {
            old_ids.iter().all(|id| !s.frames.contains_key(id))
                && frame_by_url(s, "about:srcdoc").is_some()
                && frame_by_url(s, &same_url).is_some()
                && frame_by_url(s, &cross_url).is_some_and(|f| f.is_oopif && f.session_id.is_some())
                && frame_by_url(s, &third_url).is_some_and(|f| f.is_oopif && f.session_id.is_some())
        },
    );
    assert_eq!(snap.frames.len(), 5, "no stale frames\n{}", dump(&snap));
    assert_eq!(
        snap.frame_tree.top.as_ref().map(|t| t.frame_id.as_str()),
        Some(fx.page.as_str()),
        "the main frame keeps its id"
    );
    assert_eq!(snap.frame_tree.children.len(), 4, "{}", dump(&snap));
    let cross = frame_by_url(&snap, &cross_url)
        .expect("cross")
        .frame_id
        .clone();
    assert_eq!(title_in(&sup, Route::Frame(&cross)), json!(CROSS_TITLE));
    let same = settle(&sup, "the new same-origin child is in the map", |s| {
        frame_by_url(s, &same_url).is_some_and(|f| !f.is_oopif)
    });
    let same = frame_by_url(&same, &same_url)
        .expect("same")
        .frame_id
        .clone();
    assert_eq!(title_in(&sup, Route::Frame(&same)), json!(SAME_TITLE));
}

// ---------------------------------------------------------------------------------------------
// 10. OOPIF depth cap
// ---------------------------------------------------------------------------------------------

#[test]
fn oopifs_deeper_than_two_levels_are_left_out_of_the_tree_but_still_route() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let fx = Fixture::open(&browser.ws_url, "e2e-frames-deep", "/deep");
    let sup = fx.attach();
    let deep_b = fx.b.url("localhost", "/deep");
    let leaf_b = fx.b.url("localhost", "/leaf-b");
    let (third_url, nest_prefix) = (fx.c.url("/third"), fx.c.url("/nest?"));
    let snap = settle(&sup, "all five frames are known", |s| {
        s.frames.len() == 5
            && frame_by_url(s, &deep_b).is_some_and(|f| f.is_oopif)
            && s.frames
                .values()
                .any(|f| f.url.starts_with(&nest_prefix) && f.is_oopif)
            && frame_by_url(s, &leaf_b).is_some_and(|f| f.is_oopif && f.session_id.is_some())
            && frame_by_url(s, &third_url).is_some()
    });
    let id = |url: &str| frame_by_url(&snap, url).expect(url).frame_id.clone();
    let (deep_b_id, leaf_b_id, third_id) = (id(&deep_b), id(&leaf_b), id(&third_url));
    let nest = snap
        .frames
        .values()
        .find(|f| f.url.starts_with(&nest_prefix))
        .expect("nest")
        .clone();
    // Shape of the real tree.
    assert_eq!(nest.parent_frame_id.as_deref(), Some(deep_b_id.as_str()));
    let leaf = &snap.frames[&leaf_b_id];
    assert_eq!(
        leaf.parent_frame_id.as_deref(),
        Some(nest.frame_id.as_str())
    );
    let third = &snap.frames[&third_id];
    assert_eq!(
        third.parent_frame_id.as_deref(),
        Some(nest.frame_id.as_str())
    );
    assert!(
        !third.is_oopif,
        "same site as its parent: same process\n{}",
        dump(&snap)
    );
    assert_eq!(
        unversioned::owner_session(third),
        unversioned::owner_session(&nest)
    );

    // The capped view: the depth-3 OOPIF is left out, the depth-3 in-process frame is not.
    let shown: Vec<&str> = snap
        .frame_tree
        .children
        .iter()
        .map(|c| c.frame_id.as_str())
        .collect();
    assert!(shown.contains(&deep_b_id.as_str()), "{}", dump(&snap));
    assert!(shown.contains(&nest.frame_id.as_str()), "{}", dump(&snap));
    assert!(shown.contains(&third_id.as_str()), "{}", dump(&snap));
    assert!(!shown.contains(&leaf_b_id.as_str()), "{}", dump(&snap));
    assert_eq!(shown.len(), 3, "{}", dump(&snap));
    assert!(snap.frame_tree.truncated);
    assert_eq!(snap.to_json()["frame_tree"]["truncated"], json!(true));

    // Left out of the view, still in the map: it routes.
    assert_eq!(title_in(&sup, Route::Frame(&leaf_b_id)), json!("Leaf B"));
    let third_ctx = settle(&sup, "the depth-3 in-process frame is in the map", |s| {
        s.frames.get(&third_id).is_some_and(|f| !f.is_oopif)
    });
    assert!(third_ctx.frames.contains_key(&third_id));
    assert_eq!(title_in(&sup, Route::Frame(&third_id)), json!(THIRD_TITLE));
}
