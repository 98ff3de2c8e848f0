//! End-to-end tests of dialog-aware calls against a real headless Chromium (SPEC §8, §10): the
//! agent's own call that raises a dialog (an evaluate, a click, a navigation away from a
//! `beforeunload` page) returns `blocked_by_dialog` at once instead of waiting for its deadline,
//! the agent answers, and the page's JavaScript gets the answer. Calls into a cross-origin
//! iframe (its own process and session) carry on while the main frame shows a dialog.
//!
//! Site A is `http://127.0.0.1:P1`, site B `http://localhost:P2`: an iframe from B in a page
//! from A is an out-of-process iframe. One Chromium per test binary; each test opens its own
//! page and closes it when it ends (also on panic).
//!
//! Tests skip (printing `SKIPPED: no Chromium`) when no Chromium is installed, unless
//! `CDP_SUPERVISOR_E2E=require`.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::pages::{assert_renderers, attach_to_page, probe, raise_alert, wait_pick};
use crate::common::{HttpServer, RawCdp, Response};
use cdp_supervisor::{Config, Route, StartOptions, Supervisor, SupervisorRegistry, tools};
use serde_json::{Value, json};

/// Deadline of every wait in these tests.
const T: Duration = Duration::from_secs(10);
/// A blocked call must return well before this.
const FAST: Duration = Duration::from_secs(1);

/// Site A's page: a button at a known place that alerts, a `beforeunload` handler when asked,
/// and an iframe from site B with a button that confirms.
const MAIN_PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>blocked calls</title>
<style>body{margin:0} #b{position:absolute;left:0;top:0;width:120px;height:40px}
iframe{position:absolute;left:0;top:100px;width:300px;height:120px;border:0}</style></head>
<body><button id="b" onclick="window.clicked = (window.clicked || 0) + 1; alert('clicked!')">go</button>
<iframe id="ad" src="IFRAME_URL"></iframe></body></html>"#;

const IFRAME_PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><style>body{margin:0} #c{position:absolute;left:0;top:0;width:120px;height:40px}</style></head>
<body><button id="c" onclick="window.answer = confirm('from the ad?')">ad</button></body></html>"#;

const NEXT_PAGE: &str =
    r#"<!doctype html><html><head><title>next</title></head><body>next</body></html>"#;

struct Fixture {
    later_tab: String,
    _a: HttpServer,
    _b: HttpServer,
    cdp: RawCdp,
    page: String,
    reg: SupervisorRegistry,
    task: String,
    ws_url: String,
    next_url: String,
}

impl Fixture {
    fn open(ws_url: &str, task: &str) -> Fixture {
        let b = HttpServer::start(|req| match req.path.as_str() {
            "/ad" => Response::html(IFRAME_PAGE),
            _ => Response::not_found(),
        });
        let iframe_url = b.url("localhost", "/ad");
        let main = MAIN_PAGE.replace("IFRAME_URL", &iframe_url);
        let a = HttpServer::start(move |req| match req.path.as_str() {
            "/" => Response::html(main.clone()),
            "/next" => Response::html(NEXT_PAGE),
            _ => Response::not_found(),
        });
        let mut cdp = RawCdp::connect(ws_url).expect("connect a raw CDP client");
        let (page, _session) = cdp
            .open_visible_page(&a.url("127.0.0.1", "/"), T)
            .expect("open the test page");
        // What another test does at any moment: open a page in the default context after
        // ours. Our page, alone in its own context, stays visible and keeps drawing.
        let later_tab = cdp.new_page("about:blank").expect("open another tab");
        let next_url = a.url("127.0.0.1", "/next");
        Fixture {
            later_tab,
            _a: a,
            _b: b,
            cdp,
            page,
            reg: SupervisorRegistry::new(Config::default()),
            task: task.to_string(),
            ws_url: ws_url.to_string(),
            next_url,
        }
    }

    fn attach(&self) -> Arc<Supervisor> {
        attach_to_page(
            &self.reg,
            &self.task,
            &self.ws_url,
            &self.page,
            StartOptions::default(),
        )
    }

    /// `browser_cdp` for this task.
    fn cdp(&self, args: Value) -> Value {
        tools::browser_cdp(&self.reg, &self.task, &args)
    }

    /// `browser_cdp` timed.
    fn timed(&self, args: Value) -> (Value, Duration) {
        let t = Instant::now();
        let out = self.cdp(args);
        (out, t.elapsed())
    }

    /// Evaluates `expr` in the main frame and returns its value.
    fn eval(&self, expr: &str) -> Value {
        let out = self.cdp(json!({"method": "Runtime.evaluate", "target_id": self.page,
                                  "params": {"expression": expr, "returnByValue": true}}));
        assert_eq!(out["success"], true, "evaluating {expr}: {out}");
        out["result"]["result"]["value"].clone()
    }

    fn answer(&self, args: Value) -> Value {
        let out = tools::browser_dialog(&self.reg, &self.task, &args);
        assert_eq!(out["success"], true, "browser_dialog {args}: {out}");
        out
    }

    /// Clicks at page coordinates through `Input.dispatchMouseEvent`; returns the result of
    /// the release (which runs the click handler).
    fn click(&self, x: u32, y: u32) -> (Value, Duration) {
        for kind in ["mouseMoved", "mousePressed"] {
            let out = self.cdp(json!({"method": "Input.dispatchMouseEvent", "params":
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}}));
            assert_eq!(out["success"], true, "{kind}: {out}");
        }
        self.timed(json!({"method": "Input.dispatchMouseEvent", "params":
            {"type": "mouseReleased", "x": x, "y": y, "button": "left", "clickCount": 1}}))
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.reg.stop_all();
        let _ = self.cdp.close_page(&self.page);
        let _ = self.cdp.close_page(&self.later_tab);
    }
}

/// The OOPIF's frame id, once the supervisor tracks it with its own session.
fn wait_oopif(sup: &Supervisor) -> String {
    wait_pick(sup, T, "the cross-origin iframe as an OOPIF", |s| {
        s.frames
            .values()
            .find(|f| f.is_oopif && f.url.contains("/ad") && f.session_id.is_some())
            .map(|f| f.frame_id.clone())
    })
}

fn assert_blocked(out: &Value, took: Duration, kind: &str) -> String {
    assert_eq!(out["success"], false, "{out}");
    assert_eq!(out["blocked_by_dialog"]["type"], kind, "{out}");
    assert!(took < FAST, "blocked after {took:?}: {out}");
    let error = out["error"].as_str().unwrap_or_default();
    assert!(error.contains("answer it with browser_dialog"), "{error}");
    out["blocked_by_dialog"]["id"]
        .as_str()
        .expect("dialog id")
        .to_string()
}

#[test]
fn evaluate_that_confirms_returns_blocked_at_once_and_the_answer_reaches_the_page() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let fx = Fixture::open(&browser.ws_url, "e2e-blocked-confirm");
    let sup = fx.attach();
    wait_oopif(&sup);
    let (out, took) = fx.timed(json!({"method": "Runtime.evaluate", "target_id": fx.page,
        "params": {"expression": "window.r = confirm('sure?')"}}));
    let id = assert_blocked(&out, took, "confirm");
    assert_eq!(
        out["error"],
        format!(
            "Runtime.evaluate is blocked by a confirm dialog {id} (\"sure?\"); answer it with \
             browser_dialog"
        )
    );
    assert_eq!(out["pending_dialogs"][0]["id"], id.as_str(), "{out}");
    // While it is pending, another evaluate is refused at once too.
    let (again, took) = fx.timed(json!({"method": "Runtime.evaluate",
        "params": {"expression": "1"}}));
    assert_blocked(&again, took, "confirm");
    assert_eq!(again["routed_to"], "page");
    fx.answer(json!({"action": "accept", "dialog_id": id}));
    assert_eq!(fx.eval("window.r"), json!(true));
}

#[test]
fn click_whose_handler_alerts_returns_blocked_on_the_page_and_in_a_cross_origin_iframe() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let fx = Fixture::open(&browser.ws_url, "e2e-blocked-click");
    let sup = fx.attach();
    let oopif = wait_oopif(&sup);
    // The main frame's button.
    let (out, took) = fx.click(20, 20);
    assert_blocked(&out, took, "alert");
    assert_eq!(out["blocked_by_dialog"]["message"], "clicked!");
    fx.answer(json!({"action": "accept"}));
    assert_eq!(fx.eval("window.clicked"), json!(1));
    // The button inside the OOPIF: the click goes to the page, the dialog opens in the iframe.
    // The browser routes a click into an OOPIF by the hit-test data of the frames it has
    // drawn: until the iframe has drawn, a click there lands on the page (seen under load).
    // Only a visible page draws: hence the page's own browser context (see `Fixture::open`).
    let drawn = fx.cdp(
        json!({"method": "Runtime.evaluate", "frame_id": oopif, "params": {
        "expression": "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => \
                       r(document.readyState))))",
        "awaitPromise": true, "returnByValue": true}}),
    );
    assert_eq!(drawn["result"]["result"]["value"], "complete", "{drawn}");
    let (out, took) = fx.click(20, 120);
    assert_blocked(&out, took, "confirm");
    assert_eq!(
        out["blocked_by_dialog"]["frame_id"],
        oopif.as_str(),
        "{out}"
    );
    fx.answer(json!({"action": "accept"}));
    let answer = fx.cdp(json!({"method": "Runtime.evaluate", "frame_id": oopif,
        "params": {"expression": "window.answer", "returnByValue": true}}));
    assert_eq!(answer["result"]["result"]["value"], json!(true), "{answer}");
}

#[test]
fn evaluate_in_the_oopif_carries_on_while_the_main_frame_shows_an_alert() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let fx = Fixture::open(&browser.ws_url, "e2e-blocked-oopif");
    let sup = fx.attach();
    let oopif = wait_oopif(&sup);
    let (out, took) = fx.timed(json!({"method": "Runtime.evaluate", "target_id": fx.page,
        "params": {"expression": "alert('main busy')"}}));
    assert_blocked(&out, took, "alert");
    let inside = fx.cdp(json!({"method": "Runtime.evaluate", "frame_id": oopif,
        "params": {"expression": "document.getElementById('c').textContent",
                   "returnByValue": true}}));
    assert_eq!(inside["success"], true, "{inside}");
    assert_eq!(inside["result"]["result"]["value"], "ad");
    assert_eq!(inside["routed_to"], "frame");
    assert_eq!(inside["pending_dialogs"][0]["message"], "main busy");
    fx.answer(json!({"action": "dismiss"}));
}

#[test]
fn navigate_away_from_a_beforeunload_page_reports_the_dialog_and_accepting_completes_it() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let fx = Fixture::open(&browser.ws_url, "e2e-blocked-beforeunload");
    let sup = fx.attach();
    wait_oopif(&sup);
    // beforeunload only fires after a user gesture.
    let out = fx.cdp(
        json!({"method": "Runtime.evaluate", "params": {"userGesture": true,
        "expression": "addEventListener('beforeunload', e => { e.preventDefault(); \
                       e.returnValue = ''; }); 'armed'", "returnByValue": true}}),
    );
    assert_eq!(out["result"]["result"]["value"], "armed", "{out}");
    let (out, took) = fx.timed(json!({"method": "Page.navigate", "params": {"url": fx.next_url}}));
    assert!(took < FAST, "Page.navigate took {took:?}: {out}");
    let reported = out["blocked_by_dialog"]["type"] == "beforeunload"
        || out["pending_dialogs"]
            .as_array()
            .is_some_and(|p| p.iter().any(|d| d["type"] == "beforeunload"));
    let pending = if reported {
        None
    } else {
        // The reply may come before the dialog's event: it is pending right after.
        Some(wait_pick(&sup, T, "the beforeunload dialog", |s| {
            s.pending_dialogs
                .iter()
                .find(|d| d.kind == "beforeunload")
                .cloned()
        }))
    };
    assert!(
        reported || pending.is_some(),
        "navigate did not report beforeunload: {out}"
    );
    fx.answer(json!({"action": "accept"}));
    let next = fx.next_url.clone();
    wait_pick(&sup, T, "the navigation to /next", |s| {
        s.frame_tree
            .top
            .as_ref()
            .filter(|t| t.url == next)
            .map(|_| ())
    });
    // The new document has committed; its title is there once it is parsed.
    let out = fx.cdp(
        json!({"method": "Runtime.evaluate", "params": {"awaitPromise": true,
        "returnByValue": true, "expression": "document.readyState === 'loading' ? new Promise(r => \
        addEventListener('DOMContentLoaded', () => r(document.title))) : document.title"}}),
    );
    assert_eq!(out["result"]["result"]["value"], json!("next"), "{out}");
}

/// SPEC §11: an iframe's `confirm` raised while a main-frame `alert` is open makes Chromium send
/// Opening(main), Opening(iframe), Closed(main); the iframe's dialog stays open but CDP can no
/// longer answer it. It is reported through `blocked` naming the frame, never as closed, and a
/// reload clears it.
#[test]
fn iframe_dialog_behind_a_main_frame_alert_is_unanswerable_and_a_reload_clears_it() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let fx = Fixture::open(&browser.ws_url, "e2e-blocked-unanswerable");
    let sup = fx.attach();
    let oopif = wait_oopif(&sup);
    let (out, took) = fx.timed(json!({"method": "Runtime.evaluate", "target_id": fx.page,
        "params": {"expression": "alert('main first')"}}));
    let main_dialog = assert_blocked(&out, took, "alert");
    let out = fx.cdp(json!({"method": "Runtime.evaluate", "frame_id": oopif,
        "params": {"expression": "setTimeout(() => { window.answer = confirm('iframe second') }, 0); 'ok'",
                   "returnByValue": true}}));
    assert_eq!(out["result"]["result"]["value"], "ok", "{out}");
    // Chromium closes the main alert; the iframe's confirm is pending.
    let iframe_dialog = wait_pick(
        &sup,
        T,
        "the iframe's confirm pending, the alert closed",
        |s| {
            let closed = s.closed_dialog(&main_dialog).is_some();
            let d = s
                .pending_dialogs
                .iter()
                .find(|d| d.message == "iframe second")?;
            closed.then(|| d.id.clone())
        },
    );
    let out = tools::browser_dialog(
        &fx.reg,
        &fx.task,
        &json!({"action": "accept", "dialog_id": iframe_dialog}),
    );
    assert_eq!(out["success"], false, "{out}");
    let error = out["error"].as_str().unwrap_or_default();
    assert!(error.contains("can no longer be answered"), "{error}");
    assert_eq!(out["blocked"]["reason"], "unanswerable_dialog", "{out}");
    assert_eq!(out["blocked"]["frame_id"], oopif.as_str(), "{out}");
    let s = sup.snapshot();
    assert!(s.pending_dialogs.is_empty(), "{:?}", s.pending_dialogs);
    assert!(s.closed_dialog(&iframe_dialog).is_none(), "not closed");
    // A reload clears it: the dialog is recorded remote and nothing is blocked any more.
    let out = fx.cdp(json!({"method": "Page.reload"}));
    assert_eq!(out["success"], true, "{out}");
    let closed = wait_pick(
        &sup,
        T,
        "the iframe's dialog recorded after the reload",
        |s| {
            s.closed_dialog(&iframe_dialog)
                .filter(|_| s.blocked.is_none())
                .map(|c| c.closed_by)
        },
    );
    assert_eq!(closed, cdp_supervisor::ClosedBy::Remote);
}

/// `/p?n=NAME&f=URL&s=URL`: a page named NAME with an iframe per `f` and a sandboxed iframe
/// (scripts and modals allowed) per `s` (the URLs percent-encoded).
fn nested_pages() -> HttpServer {
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

/// The frame whose URL names `name`, once it is known (an OOPIF with its session when `oopif`,
/// else with its default execution context).
fn frame_named(sup: &Supervisor, name: &str, oopif: bool) -> String {
    let needle = format!("n={name}");
    wait_pick(sup, T, &format!("frame {name}"), |s| {
        s.frames
            .values()
            .find(|f| {
                f.url.contains(&needle)
                    && if oopif {
                        f.is_oopif && f.session_id.is_some()
                    } else {
                        !f.is_oopif
                    }
            })
            .map(|f| f.frame_id.clone())
    })
}

/// A page opened by a raw client with a supervisor attached; dropping it stops the supervisor
/// and closes the page (also on panic).
struct Attached {
    cdp: RawCdp,
    page: String,
    reg: SupervisorRegistry,
    sup: Arc<Supervisor>,
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.reg.stop_all();
        let _ = self.cdp.close_page(&self.page);
    }
}

/// Opens `url` in a new page with a raw client (waiting for its load, iframes included) and
/// attaches `task`'s supervisor to it.
fn open_with_supervisor(ws_url: &str, url: &str, task: &str) -> Attached {
    let mut cdp = RawCdp::connect(ws_url).expect("connect a raw CDP client");
    let (page, _) = cdp.open_page(url, T).expect("open the test page");
    let reg = SupervisorRegistry::new(Config::default());
    let sup = attach_to_page(&reg, task, ws_url, &page, StartOptions::default());
    Attached {
        cdp,
        page,
        reg,
        sup,
    }
}

/// Issue 20 item 6, frames, on Chromium (measured: `tests/it/measure_renderers.rs`): an A page
/// with a B iframe holding an A grandchild (its own OOPIF session, in A's renderer), a
/// same-site iframe on a subdomain (in the page's process, no session of its own) and a
/// sandboxed same-site iframe (its own OOPIF session and renderer). An alert in any of them
/// refuses calls into every frame of its renderer at once, naming it, and no other call. The
/// sites (`r6f`, `r6g` `.localhost`) are this test's only.
#[test]
fn a_dialog_in_a_frame_blocks_calls_into_every_frame_of_its_renderer_and_no_other() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let srv = nested_pages();
    let u = |host: &str, rest: &str| srv.url(host, &format!("/p?n={rest}"));
    let grand = u("r6f.localhost", "grand");
    let mid = u("r6g.localhost", &format!("mid&f={}", enc(&grand)));
    let top = u(
        "r6f.localhost",
        &format!(
            "top&f={}&f={}&s={}",
            enc(&mid),
            enc(&u("sub.r6f.localhost", "subdomain")),
            enc(&u("r6f.localhost", "sandboxed"))
        ),
    );
    let fx = open_with_supervisor(&browser.ws_url, &top, "e2e-renderers");
    let (page, sup) = (fx.page.clone(), Arc::clone(&fx.sup));
    let mid = frame_named(&sup, "mid", true);
    let grand = frame_named(&sup, "grand", true);
    let sandboxed = frame_named(&sup, "sandboxed", true);
    let sub = frame_named(&sup, "subdomain", false);
    let sessions = [
        ("A page", Route::Target(&page)),
        ("B iframe", Route::Frame(&mid)),
        ("A grandchild", Route::Frame(&grand)),
        ("A subdomain", Route::Frame(&sub)),
        ("A sandboxed", Route::Frame(&sandboxed)),
    ];
    assert_renderers(
        &sup,
        &sessions,
        &[&["A page", "A grandchild", "A subdomain"]],
    );
}

/// Issue 20 item 13, on Chromium: a B iframe's `confirm` raised behind the main frame's alert
/// becomes unanswerable (SPEC §11) and keeps B's renderer frozen. A call into the other B
/// iframe of the page (its own session, B's renderer) used to wait for its deadline; now it is
/// refused at once with the reload hint, as is a call into the iframe itself, while the page
/// (A's renderer, its alert closed by Chromium) answers. A reload clears it.
#[test]
fn calls_into_the_renderer_of_an_unanswerable_dialog_are_refused_up_front() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let srv = nested_pages();
    let u = |host: &str, rest: &str| srv.url(host, &format!("/p?n={rest}"));
    let top = u(
        "r13a.localhost",
        &format!(
            "top&f={}&f={}",
            enc(&u("r13b.localhost", "b1")),
            enc(&u("r13b.localhost", "b2"))
        ),
    );
    let fx = open_with_supervisor(&browser.ws_url, &top, "e2e-unanswerable-renderer");
    let (page, sup) = (fx.page.clone(), Arc::clone(&fx.sup));
    let b1 = frame_named(&sup, "b1", true);
    let b2 = frame_named(&sup, "b2", true);
    let main = raise_alert(&sup, Route::Target(&page), "main first");
    let out = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": "setTimeout(() => confirm('b1 second'), 0); 1"}),
            Route::Frame(&b1),
            T,
        )
        .expect("b1 answers before its confirm");
    assert_eq!(out["result"]["value"], 1);
    let b1_dialog = wait_pick(&sup, T, "b1's confirm pending, the alert closed", |s| {
        let closed = s.closed_dialog(&main.id).is_some();
        let d = s
            .pending_dialogs
            .iter()
            .find(|d| d.message == "b1 second")?;
        closed.then(|| d.id.clone())
    });
    let e = sup
        .respond_to_dialog(cdp_supervisor::DialogAction::Accept, None, Some(&b1_dialog))
        .expect_err("unanswerable");
    assert!(
        matches!(e, cdp_supervisor::Error::DialogUnanswerable { .. }),
        "{e}"
    );
    for (name, route) in [("b1", Route::Frame(&b1)), ("b2", Route::Frame(&b2))] {
        let t = Instant::now();
        let r = sup.call(
            "Runtime.evaluate",
            json!({"expression": "1"}),
            route,
            Duration::from_secs(20),
        );
        match &r {
            Err(cdp_supervisor::Error::DialogUnanswerable { id, frame_id }) => {
                assert_eq!(id, &b1_dialog, "{name}");
                assert_eq!(frame_id.as_deref(), Some(b1.as_str()), "{name}");
            }
            other => panic!("{name}: expected DialogUnanswerable, got {other:?}"),
        }
        assert!(t.elapsed() < FAST, "{name}: after {:?}", t.elapsed());
    }
    assert_eq!(
        probe(&sup, Route::Target(&page)),
        None,
        "A's renderer answers"
    );
    sup.call("Page.reload", json!({}), Route::Target(&page), T)
        .expect("Page.reload goes through");
    wait_pick(&sup, T, "nothing blocked after the reload", |s| {
        s.blocked.is_none().then_some(())
    });
}
