//! End-to-end tests of the dialog bridge (SPEC §6) against a real headless Chromium.
//!
//! Two sites, one server: the top page comes from `http://127.0.0.1:P` and its iframe from
//! `http://localhost:P` (a different site, so an out-of-process iframe, SPEC §11). Page JS raises
//! a dialog from a fresh task (`setTimeout(.., 0)`, so the trigger never blocks) and, once the
//! dialog returns, reports `{top, t0, type, r}` to its own origin's `/report`: the tests assert
//! exactly what the page's JavaScript received (`typeof r` tells `undefined` from `null`).
//!
//! Dialogs are only raised after the page and its iframe have loaded: Chromium cancels an open
//! native dialog when any frame of the page commits a navigation.
//!
//! One Chromium per test binary ([`common::shared_browser`]); every test opens its own pages with
//! its own [`RawCdp`] client, attaches its own supervisors (own task ids), and closes its pages
//! when it ends, also on panic ([`Fixture`]'s `Drop`). Tests skip (printing `SKIPPED: no
//! Chromium`) when no Chromium is installed, unless `CDP_SUPERVISOR_E2E=require`.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::common::pages::{self, attach_to_page};
use crate::common::{HttpServer, RawCdp, Response, js, wait_until};
use cdp_supervisor::unversioned;
use cdp_supervisor::{
    BridgeMode, ClosedBy, ClosedDialog, Config, DialogAction, PendingDialog, Route, StartOptions,
    Supervisor, SupervisorRegistry,
};
use serde_json::{Value, json};

/// Deadline of every wait in these tests.
const T: Duration = Duration::from_secs(15);
/// Images on the load-time page.
const IMAGES: usize = 20;
/// Measured loads per mode (half per phase, after one warm-up per phase).
const LOAD_RUNS: usize = 16;

/// A 1x1 transparent GIF.
const GIF: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head>\
         <body>{body}</body></html>"
    )
}

/// The page that measures its own load: 20 images, a `fetch()` and an XHR to the test server.
fn load_page(run: &str) -> String {
    let images: String = (0..IMAGES)
        .map(|i| format!("<img src=\"/img?i={i}&r={run}\" width=\"1\" height=\"1\">"))
        .collect();
    page(
        "Load",
        &format!(
            "<script>\
             window.__fetchDone = fetch('/data?kind=fetch&r={run}').then(r => r.text())\
               .then(() => performance.now());\
             window.__xhrDone = new Promise(res => {{ const x = new XMLHttpRequest(); \
               x.open('GET', '/data?kind=xhr&r={run}'); x.onloadend = () => res(performance.now()); \
               x.send(); }});\
             </script>{images}"
        ),
    )
}

/// Serves the whole test site; the top page's iframe points at the other site (`localhost`).
fn start_server() -> HttpServer {
    HttpServer::start(|req| {
        let port = req
            .header("Host")
            .and_then(|h| h.rsplit(':').next())
            .unwrap_or("0")
            .to_string();
        match req.path.as_str() {
            "/" => Response::html(page(
                "Bridge top",
                &format!(
                    "<p>top</p><iframe id=\"cross\" src=\"http://localhost:{port}/child\"></iframe>"
                ),
            )),
            "/main" => Response::html(page("Bridge main", "<p>main</p>")),
            "/child" => Response::html(page("Bridge child", "<p>child</p>")),
            "/load" => {
                let run = req
                    .query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("r="))
                    .unwrap_or("x")
                    .to_string();
                Response::html(load_page(&run))
            }
            "/img" => Response {
                status: 200,
                content_type: "image/gif".into(),
                body: GIF.to_vec(),
                headers: Vec::new(),
            },
            "/data" => Response::text("{\"ok\":true}"),
            _ => Response::not_found(),
        }
    })
}

/// Schedules `call` on a fresh task and reports what it returned, with the wall clock just before
/// the call (`t0`, ms since the epoch), to the frame's own origin.
fn trigger_expr(call: &str) -> String {
    format!(
        "setTimeout(() => {{ const t0 = Date.now(); const r = {call}; \
         fetch('/report?' + encodeURIComponent(JSON.stringify({{top: window === window.top, t0, \
         type: typeof r, r: r === undefined ? null : r}}))); }}, 0); 'scheduled'"
    )
}

/// Where a dialog is raised.
#[derive(Debug, Clone, Copy)]
enum In<'a> {
    /// The top document, through the raw client.
    Top,
    /// A frame, through the supervisor's routing.
    Frame(&'a str),
}

/// One test's server, pages, raw client and registry. Dropping it stops the supervisors and
/// closes every page it opened.
struct Fixture {
    server: HttpServer,
    /// The client that opened the pages (it has `Page.enable` and lifecycle events on them).
    cdp: RawCdp,
    /// The first page's target id (= its main frame id).
    page: String,
    /// `cdp`'s session on it.
    session: String,
    /// Further pages opened by the test: (target id, `cdp`'s session).
    more: Vec<(String, String)>,
    reg: SupervisorRegistry,
    task: String,
    ws_url: String,
}

impl Fixture {
    /// Opens `path` of the 127.0.0.1 site in a new page and waits for its `load` (iframes too).
    fn open(ws_url: &str, task: &str, path: &str) -> Fixture {
        let server = start_server();
        let mut cdp = RawCdp::connect(ws_url).expect("connect a raw CDP client");
        let (page, session) = cdp
            .open_page(&server.url("127.0.0.1", path), T)
            .expect("open the test page");
        Fixture {
            server,
            cdp,
            page,
            session,
            more: Vec::new(),
            reg: SupervisorRegistry::new(Config::default()),
            task: task.to_string(),
            ws_url: ws_url.to_string(),
        }
    }

    /// Attaches the test's supervisor to its page.
    fn attach(&self, options: StartOptions) -> Arc<Supervisor> {
        self.attach_to(&self.task, &self.page, options)
    }

    fn attach_to(&self, task: &str, page: &str, options: StartOptions) -> Arc<Supervisor> {
        attach_to_page(&self.reg, task, &self.ws_url, page, options)
    }

    fn eval_top(&mut self, expression: &str) -> Value {
        self.cdp
            .evaluate(&self.session, expression, T)
            .unwrap_or_else(|e| panic!("evaluating {expression:?} in the top page: {e}"))
    }

    /// Raises `call` in `place` (without waiting for it).
    fn trigger(&mut self, sup: &Supervisor, place: In<'_>, call: &str) {
        let expr = trigger_expr(call);
        let v = match place {
            In::Top => self.eval_top(&expr),
            In::Frame(f) => eval_in(sup, f, &expr),
        };
        assert_eq!(v, json!("scheduled"), "trigger in {place:?}");
    }

    /// The next report of a page, parsed.
    fn report(&self) -> Value {
        self.server.wait_report_json(T)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.reg.stop_all();
        for (p, _) in std::mem::take(&mut self.more) {
            let _ = self.cdp.close_page(&p);
        }
        let _ = self.cdp.close_page(&self.page);
    }
}

/// `Runtime.evaluate` (by value) in `frame` through the supervisor's routing.
fn eval_in(sup: &Supervisor, frame: &str, expression: &str) -> Value {
    let v = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
            Route::Frame(frame),
            T,
        )
        .unwrap_or_else(|e| panic!("evaluating {expression:?} in frame {frame}: {e}"));
    v["result"]["value"].clone()
}

/// Waits for the supervisor to know the page's cross-site iframe as an OOPIF with its own
/// session; returns its frame id, cross-checked with the browser's own target list.
fn settle_oopif(fx: &mut Fixture, sup: &Supervisor) -> String {
    let child_url = fx.server.url("localhost", "/child");
    let snap = sup
        .wait_for(T, |s| {
            s.frames
                .values()
                .any(|f| f.url == child_url && f.is_oopif && f.session_id.is_some())
        })
        .unwrap_or_else(|| {
            panic!(
                "the OOPIF never showed up; frame tree: {}",
                sup.snapshot().frame_tree.to_json()
            )
        });
    let id = snap
        .frames
        .values()
        .find(|f| f.url == child_url)
        .map(|f| f.frame_id.clone())
        .expect("just matched");
    let targets = fx
        .cdp
        .call("Target.getTargets", json!({}), None, T)
        .expect("Target.getTargets");
    let browser_id = targets["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["type"] == "iframe" && t["url"] == child_url.as_str())
        .and_then(|t| t["targetId"].as_str())
        .unwrap_or_else(|| panic!("no iframe target for {child_url} in {targets}"));
    assert_eq!(id, browser_id, "the OOPIF's frame id is its target id");
    id
}

/// True in a document where the bridge script replaced `alert` (it leaves no global: its
/// functions carry a comment naming the bridge).
const BRIDGE_INSTALLED: &str =
    "Function.prototype.toString.call(window.alert).includes('cdp-dialog-bridge')";

/// Waits until the bridge script is installed in `place` (the supervisor sends it fire-and-
/// forget; on a page that already loaded, `runImmediately` installs it in the live document).
fn wait_bridge_script(fx: &mut Fixture, sup: &Supervisor, place: In<'_>) {
    let probe = BRIDGE_INSTALLED;
    let ok = wait_until(T, || {
        let v = match place {
            In::Top => fx.eval_top(probe),
            In::Frame(f) => eval_in(sup, f, probe),
        };
        (v == json!(true)).then_some(())
    });
    assert!(
        ok.is_some(),
        "the bridge script never showed up in {place:?}"
    );
}

fn wait_closed(sup: &Supervisor, id: &str) -> ClosedDialog {
    pages::wait_closed(sup, T, id)
}

fn pending(sup: &Supervisor) -> PendingDialog {
    sup.wait_for_dialog(T).unwrap_or_else(|| {
        panic!(
            "no dialog pending within {T:?}; snapshot: {}",
            sup.snapshot().to_json()
        )
    })
}

/// What one dialog round gave.
struct Round {
    dialog: PendingDialog,
    report: Value,
    closed: ClosedDialog,
}

/// Raises `call` in `place`, checks the pending dialog is `kind`/`message` from `frame`, answers
/// it with `action`/`text` and returns what the page received and how the dialog was recorded.
#[allow(clippy::too_many_arguments)]
fn round(
    fx: &mut Fixture,
    sup: &Supervisor,
    place: In<'_>,
    frame: &str,
    call: &str,
    (kind, message): (&str, &str),
    action: DialogAction,
    text: Option<&str>,
) -> Round {
    fx.trigger(sup, place, call);
    let d = pending(sup);
    assert_eq!(
        (d.kind.as_str(), d.message.as_str()),
        (kind, message),
        "{d:?}"
    );
    assert_eq!(d.frame_id.as_deref(), Some(frame), "frame of {d:?}");
    let answered = sup
        .respond_to_dialog(action, text, Some(&d.id))
        .unwrap_or_else(|e| panic!("answering {d:?}: {e}"));
    assert_eq!(answered.id, d.id);
    let report = fx.report();
    let closed = wait_closed(sup, &d.id);
    Round {
        dialog: d,
        report,
        closed,
    }
}

/// `(typeof r, r)` from a report.
fn got(report: &Value) -> (String, Value) {
    (
        report["type"].as_str().unwrap_or("?").to_string(),
        report["r"].clone(),
    )
}

/// Checks a round went through the bridge and was answered by the agent.
fn assert_bridge_round(r: &Round, top: bool) {
    assert!(
        unversioned::bridge_request(&r.dialog).is_some(),
        "a bridge dialog carries its paused request: {:?}",
        r.dialog
    );
    assert_eq!(r.closed.closed_by, ClosedBy::Agent, "{:?}", r.closed);
    assert_eq!(r.report["top"], json!(top), "reported from the right frame");
}

/// The native `javascriptDialogOpening` events the raw client saw (it has `Page.enable`).
fn native_openings(fx: &mut Fixture) -> Vec<Value> {
    // A round trip, so every event sent before its reply is queued.
    fx.eval_top("1");
    fx.cdp
        .clear_events()
        .into_iter()
        .filter(|e| e["method"] == "Page.javascriptDialogOpening")
        .collect()
}

const ZOE: &str = "Zoë 日本語 ✓";

/// The full alert/confirm/prompt matrix in `place`; every dialog must come through the bridge.
fn bridge_matrix(fx: &mut Fixture, sup: &Supervisor, place: In<'_>, frame: &str) {
    let top = matches!(place, In::Top);
    let alert = round(
        fx,
        sup,
        place,
        frame,
        "alert('Hello ✓ from the bridge')",
        ("alert", "Hello ✓ from the bridge"),
        DialogAction::Accept,
        None,
    );
    assert_bridge_round(&alert, top);
    assert_eq!(got(&alert.report), ("undefined".into(), Value::Null));

    let yes = round(
        fx,
        sup,
        place,
        frame,
        "confirm('Proceed?')",
        ("confirm", "Proceed?"),
        DialogAction::Accept,
        None,
    );
    assert_bridge_round(&yes, top);
    assert_eq!(got(&yes.report), ("boolean".into(), json!(true)));

    let no = round(
        fx,
        sup,
        place,
        frame,
        "confirm('Really?')",
        ("confirm", "Really?"),
        DialogAction::Dismiss,
        None,
    );
    assert_bridge_round(&no, top);
    assert_eq!(got(&no.report), ("boolean".into(), json!(false)));

    let call = format!("prompt({}, {})", js("Your name? ✓"), js("déf"));
    let text = round(
        fx,
        sup,
        place,
        frame,
        &call,
        ("prompt", "Your name? ✓"),
        DialogAction::Accept,
        Some(ZOE),
    );
    assert_bridge_round(&text, top);
    assert_eq!(text.dialog.default_prompt, "déf");
    assert_eq!(got(&text.report), ("string".into(), json!(ZOE)));

    let dismissed = round(
        fx,
        sup,
        place,
        frame,
        &call,
        ("prompt", "Your name? ✓"),
        DialogAction::Dismiss,
        None,
    );
    assert_bridge_round(&dismissed, top);
    assert_eq!(got(&dismissed.report), ("object".into(), Value::Null));

    let default = round(
        fx,
        sup,
        place,
        frame,
        &call,
        ("prompt", "Your name? ✓"),
        DialogAction::Accept,
        None,
    );
    assert_bridge_round(&default, top);
    assert_eq!(got(&default.report), ("string".into(), json!("déf")));

    // The recent ring shows them all as answered by the agent.
    let snap = sup.snapshot();
    for r in [&alert, &yes, &no, &text, &dismissed, &default] {
        let c = snap
            .closed_dialog(&r.dialog.id)
            .unwrap_or_else(|| panic!("{} not in recent_dialogs", r.dialog.id));
        assert_eq!(c.closed_by, ClosedBy::Agent);
        assert_eq!(c.dialog.frame_id.as_deref(), Some(frame));
    }
    let j = snap.to_json();
    assert!(
        j["recent_dialogs"]
            .as_array()
            .is_some_and(|a| a.iter().all(|c| c["closed_by"] == "agent")),
        "{j}"
    );
}

// ---------------------------------------------------------------------------------------------
// Bridge on: main frame and OOPIF
// ---------------------------------------------------------------------------------------------

#[test]
fn bridge_on_main_frame_dialogs_reach_the_page_with_exact_values() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-bridge-main", "/");
    let sup = fx.attach(StartOptions::default().with_dialog_bridge(BridgeMode::On));
    settle_oopif(&mut fx, &sup);
    wait_bridge_script(&mut fx, &sup, In::Top);
    native_openings(&mut fx);

    let page = fx.page.clone();
    bridge_matrix(&mut fx, &sup, In::Top, &page);
    let page_session = sup.snapshot().page_session_id.clone();
    let r = sup.snapshot();
    let last = r.recent_dialogs.last().expect("recorded");
    assert_eq!(
        Some(unversioned::dialog_session(&last.dialog)),
        page_session.as_deref(),
        "a main-frame bridge dialog is paused on the page session"
    );
    assert!(
        native_openings(&mut fx).is_empty(),
        "no native dialog ever opened while the bridge was on"
    );
    assert!(sup.snapshot().pending_dialogs.is_empty());
}

#[test]
fn bridge_on_oopif_dialogs_carry_the_oopif_frame_id_and_reach_the_oopif() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-bridge-oopif", "/");
    let sup = fx.attach(StartOptions::default().with_dialog_bridge(BridgeMode::On));
    let oopif = settle_oopif(&mut fx, &sup);
    wait_bridge_script(&mut fx, &sup, In::Frame(&oopif));
    native_openings(&mut fx);

    bridge_matrix(&mut fx, &sup, In::Frame(&oopif), &oopif);
    let snap = sup.snapshot();
    let oopif_session = snap.frames.get(&oopif).and_then(|f| f.session_id.clone());
    let sessions: Vec<&str> = snap
        .recent_dialogs
        .iter()
        .map(|c| unversioned::dialog_session(&c.dialog))
        .collect();
    eprintln!(
        "OOPIF bridge dialogs paused on sessions {sessions:?} (OOPIF session {oopif_session:?})"
    );
    assert!(
        native_openings(&mut fx).is_empty(),
        "no native dialog ever opened while the bridge was on"
    );
    // The OOPIF still answers after six blocked-and-released XHRs.
    assert_eq!(
        eval_in(&sup, &oopif, "document.title"),
        json!("Bridge child")
    );
}

// ---------------------------------------------------------------------------------------------
// The page's own requests are not slowed down
// ---------------------------------------------------------------------------------------------

/// Navigates `session`'s page to `url` and waits for that navigation's `load`; returns the wall
/// time from the navigate command to the load event.
fn navigate_and_wait(cdp: &mut RawCdp, session: &str, url: &str) -> Duration {
    let started = Instant::now();
    let nav = cdp
        .call("Page.navigate", json!({"url": url}), Some(session), T)
        .unwrap_or_else(|e| panic!("Page.navigate {url}: {e}"));
    assert!(nav.get("errorText").is_none(), "navigating to {url}: {nav}");
    let loader = nav["loaderId"].clone();
    let frame = nav["frameId"].clone();
    cdp.wait_event_where(T, |ev| {
        ev["method"] == "Page.lifecycleEvent"
            && ev["sessionId"] == session
            && ev["params"]["name"] == "load"
            && ev["params"]["loaderId"] == loader
            && ev["params"]["frameId"] == frame
    })
    .unwrap_or_else(|| panic!("{url} did not load within {T:?}"));
    let took = started.elapsed();
    cdp.clear_events();
    took
}

/// The page's own account of its load: `(load event ms, all requests done ms)` since navigation
/// start, after checking that every image and both requests completed.
fn page_timing(cdp: &mut RawCdp, session: &str) -> (f64, f64) {
    let v = cdp
        .evaluate(
            session,
            "new Promise(res => { const go = () => Promise.all([window.__fetchDone, \
             window.__xhrDone]).then(([f, x]) => { const t = performance.timing; \
             res({load: t.loadEventStart - t.navigationStart, fetch: f, xhr: x, \
             images: Array.from(document.images).filter(i => i.complete && i.naturalWidth === 1).length}); }); \
             if (document.readyState === 'complete') go(); else addEventListener('load', go); })",
            T,
        )
        .expect("read the page's timing");
    assert_eq!(v["images"], json!(IMAGES), "every image loaded: {v}");
    let load = v["load"].as_f64().unwrap_or(f64::NAN);
    let done = load
        .max(v["fetch"].as_f64().unwrap_or(f64::NAN))
        .max(v["xhr"].as_f64().unwrap_or(f64::NAN));
    (load, done)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[test]
fn bridge_does_not_slow_the_pages_own_requests() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-bridge-load", "/main");
    let url = fx.server.url("127.0.0.1", "/main");
    let (b_page, b_session) = fx.cdp.open_page(&url, T).expect("open the second page");
    fx.more.push((b_page.clone(), b_session.clone()));
    let pages = [
        (fx.page.clone(), fx.session.clone()),
        (b_page.clone(), b_session.clone()),
    ];

    // Alone, a page with the bridge (Fetch enabled for the bridge host) loads about 1.3x as long
    // as one without here (1.26x and 1.30x on Chromium 156.0.8078.114). The other tests of this
    // binary share the Chromium and load it unevenly, which once stretched a measurement to
    // 2.07x: a measurement over the bound is made again, so only a slowdown seen every time fails.
    let mut seq = 0u32;
    let mut last = String::new();
    for attempt in 1..=3 {
        let m = measure_loads(&mut fx, &pages, attempt, &mut seq);
        if m.done_on / m.done_off < 2.0 && m.wall_on / m.wall_off < 2.0 {
            return;
        }
        last = format!(
            "the bridge slows the page's own requests or its loads: all requests done \
             {:.1} ms vs {:.1} ms, wall {:.1} ms vs {:.1} ms",
            m.done_on, m.done_off, m.wall_on, m.wall_off
        );
        eprintln!("attempt {attempt} of 3: {last}");
    }
    panic!("{last} (3 measurements)");
}

/// Medians (ms) of one measurement of [`bridge_does_not_slow_the_pages_own_requests`].
struct LoadMedians {
    done_on: f64,
    done_off: f64,
    wall_on: f64,
    wall_off: f64,
}

/// One measurement: the two pages take turns having the bridge; both load `/load` repeatedly.
/// `seq` keeps every URL of the test distinct (no cache).
fn measure_loads(
    fx: &mut Fixture,
    pages: &[(String, String); 2],
    attempt: u32,
    seq: &mut u32,
) -> LoadMedians {
    // Two phases swap which page has the bridge, and each run alternates which page loads first,
    // so neither the page nor the order favours one mode. Index 0 = bridge on, 1 = off.
    let mut wall = [Vec::new(), Vec::new()];
    let mut done = [Vec::new(), Vec::new()];
    let mut load = [Vec::new(), Vec::new()];
    for phase in 0..2 {
        let on = phase; // the page index that has the bridge in this phase
        let mut sups = Vec::new();
        for (i, (page, _)) in pages.iter().enumerate() {
            let mode = if i == on {
                BridgeMode::On
            } else {
                BridgeMode::Off
            };
            let task = format!("e2e-bridge-load-{attempt}-{phase}-{i}");
            let sup = fx.attach_to(
                &task,
                page,
                StartOptions::default().with_dialog_bridge(mode),
            );
            sups.push((task, sup));
        }
        for run in 0..=LOAD_RUNS / 2 {
            let order = if run % 2 == 0 { [0, 1] } else { [1, 0] };
            for i in order {
                *seq += 1;
                let session = pages[i].1.clone();
                let url = fx.server.url("127.0.0.1", &format!("/load?r={seq}"));
                let took = navigate_and_wait(&mut fx.cdp, &session, &url);
                let (l, d) = page_timing(&mut fx.cdp, &session);
                let mode = usize::from(i != on);
                if run > 0 {
                    wall[mode].push(took.as_secs_f64() * 1000.0);
                    load[mode].push(l);
                    done[mode].push(d);
                }
            }
        }
        // The measurement means something only if the bridge really was on for one page and off
        // for the other: the script is in the measured document, and a dialog goes through Fetch.
        for (i, (_, session)) in pages.iter().enumerate() {
            let has = fx
                .cdp
                .evaluate(session, BRIDGE_INSTALLED, T)
                .expect("probe");
            assert_eq!(has, json!(i == on), "phase {phase}: page {i} bridge script");
        }
        let sup_on = &sups[on].1;
        fx.cdp
            .evaluate(
                &pages[on].1,
                &trigger_expr("confirm('bridge still on?')"),
                T,
            )
            .expect("trigger");
        let d = pending(sup_on);
        assert!(unversioned::bridge_request(&d).is_some(), "{d:?}");
        sup_on
            .respond_to_dialog(DialogAction::Accept, None, None)
            .expect("answer");
        assert_eq!(got(&fx.report()), ("boolean".into(), json!(true)));
        for (task, _) in sups {
            assert!(fx.reg.stop(&task));
        }
    }

    let n = done[0].len();
    let [wall_on, wall_off] = wall.map(median);
    let [load_on, load_off] = load.map(median);
    let [done_on, done_off] = done.clone().map(median);
    let ratio = done_on / done_off;
    eprintln!(
        "page load with {IMAGES} images + fetch + XHR, median of {n} runs each:\n  \
         bridge on : load event {load_on:.1} ms, all requests done {done_on:.1} ms, wall {wall_on:.1} ms\n  \
         bridge off: load event {load_off:.1} ms, all requests done {done_off:.1} ms, wall {wall_off:.1} ms\n  \
         ratio on/off: done {ratio:.2}x, load {:.2}x, wall {:.2}x\n  raw done on {:.0?}\n  raw done off {:.0?}",
        load_on / load_off,
        wall_on / wall_off,
        done[0],
        done[1],
    );
    LoadMedians {
        done_on,
        done_off,
        wall_on,
        wall_off,
    }
}

// ---------------------------------------------------------------------------------------------
// Auto mode against a proxy that closes native dialogs within 10 ms
// ---------------------------------------------------------------------------------------------

/// What the simulated proxy did.
#[derive(Debug, Default)]
struct ProxyLog {
    /// Per native dialog it saw: (message, event-to-answer-acknowledged latency, answer result).
    answered: Vec<(String, Duration, Result<(), String>)>,
}

/// A second CDP client on the page that answers every native dialog the moment it opens, like a
/// hosted CDP proxy that auto-closes dialogs.
struct Proxy {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<ProxyLog>>,
}

impl Proxy {
    fn start(ws_url: &str, page: &str) -> Proxy {
        let mut cdp = RawCdp::connect(ws_url).expect("connect the proxy client");
        let sid = cdp.attach(page).expect("the proxy attaches to the page");
        cdp.call("Page.enable", json!({}), Some(&sid), T)
            .expect("Page.enable on the proxy session");
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            thread::Builder::new()
                .name("dialog-proxy".into())
                .spawn(move || {
                    let mut log = ProxyLog::default();
                    while !stop.load(Ordering::SeqCst) {
                        // A short wait only so that `stop` is noticed; an event ends it at once.
                        let Some(ev) = cdp.wait_event(
                            "Page.javascriptDialogOpening",
                            Some(&sid),
                            Duration::from_millis(100),
                        ) else {
                            cdp.clear_events();
                            continue;
                        };
                        let seen = Instant::now();
                        let res = cdp
                            .call(
                                "Page.handleJavaScriptDialog",
                                json!({"accept": true}),
                                Some(&sid),
                                Duration::from_secs(5),
                            )
                            .map(drop);
                        let message = ev["params"]["message"].as_str().unwrap_or("").to_string();
                        log.answered.push((message, seen.elapsed(), res));
                    }
                    log
                })
                .expect("spawn the proxy thread")
        };
        Proxy {
            stop,
            thread: Some(thread),
        }
    }

    fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    fn finish(mut self) -> ProxyLog {
        self.stop.store(true, Ordering::SeqCst);
        self.thread
            .take()
            .expect("not finished yet")
            .join()
            .expect("the proxy thread did not panic")
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn auto_mode_switches_to_the_bridge_when_a_proxy_closes_native_dialogs() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-bridge-auto", "/main");
    let proxy = Proxy::start(&browser.ws_url, &fx.page);
    let sup = fx.attach(StartOptions::default());
    assert_eq!(sup.config().dialog_bridge(), BridgeMode::Auto);
    assert_eq!(
        fx.eval_top(BRIDGE_INSTALLED),
        json!(false),
        "auto starts native"
    );

    // 1. A native alert: the proxy closes it before anyone else can answer. The switch needs
    // the close within 100 ms of the opening, as the supervisor's reader sees them (SPEC §6);
    // on a loaded machine the proxy's thread may not run in time (121 ms once, at load 18),
    // and then the supervisor rightly stays native: the proxy is given another alert, up to
    // `ATTEMPTS`, so that the test proves the switch on a fast close, not the machine's load.
    const ATTEMPTS: usize = 5;
    let mut slow = Vec::new();
    loop {
        let before = sup.snapshot().recent_dialogs.len();
        fx.trigger(&sup, In::Top, "alert('closed by the proxy')");
        let snap = sup
            .wait_for(T, |s| s.recent_dialogs.len() > before)
            .unwrap_or_else(|| {
                panic!(
                    "native alert {} was never recorded: {}",
                    slow.len() + 1,
                    sup.snapshot().to_json()
                )
            });
        let first = snap.recent_dialogs[before].clone();
        assert_eq!(first.dialog.kind, "alert");
        assert_eq!(first.closed_by, ClosedBy::Remote, "{first:?}");
        assert!(
            unversioned::bridge_request(&first.dialog).is_none(),
            "{first:?}"
        );
        assert_eq!(got(&fx.report()), ("undefined".into(), Value::Null));
        let open_for = first.closed_at - first.dialog.opened_at;
        eprintln!(
            "native alert was open {:.1} ms before the proxy closed it",
            open_for * 1000.0
        );
        if open_for < 0.1 {
            break;
        }
        slow.push(open_for);
        assert!(
            slow.len() < ATTEMPTS,
            "the proxy signature needs a close within 100 ms; the proxy took {slow:?} s \
             in {ATTEMPTS} attempts"
        );
    }

    // 2. The supervisor turned the bridge on: the live document already has the script.
    wait_bridge_script(&mut fx, &sup, In::Top);

    // 3. After a reload, the page's dialogs go through the bridge and wait for the agent.
    fx.cdp.clear_events();
    sup.call("Page.reload", json!({}), Route::Target(&fx.page), T)
        .expect("Page.reload through the supervisor");
    let page = fx.page.clone();
    let session = fx.session.clone();
    fx.cdp
        .wait_event_where(T, |ev| {
            ev["method"] == "Page.lifecycleEvent"
                && ev["sessionId"] == session.as_str()
                && ev["params"]["name"] == "load"
                && ev["params"]["frameId"] == page.as_str()
        })
        .expect("the reloaded page loads");
    assert_eq!(
        fx.eval_top(BRIDGE_INSTALLED),
        json!(true),
        "the reloaded document has the bridge from its start"
    );
    native_openings(&mut fx);
    let call = format!("prompt({}, {})", js("Through the bridge?"), js("def"));
    fx.trigger(&sup, In::Top, &call);
    let d = pending(&sup);
    assert_eq!(
        (d.kind.as_str(), d.message.as_str()),
        ("prompt", "Through the bridge?")
    );
    assert!(unversioned::bridge_request(&d).is_some(), "{d:?}");
    assert_eq!(d.frame_id.as_deref(), Some(fx.page.as_str()));
    // The proxy cannot close it: it is no native dialog. (Waiting for something that must not
    // happen: a deadline is the only way to observe it.)
    let closed_meanwhile = sup.wait_for(Duration::from_millis(500), |s| {
        s.pending_dialogs.iter().all(|p| p.id != d.id)
    });
    assert!(
        closed_meanwhile.is_none(),
        "the bridge dialog was closed by someone else: {}",
        sup.snapshot().to_json()
    );
    assert!(proxy.running(), "the proxy keeps running throughout");
    sup.respond_to_dialog(DialogAction::Accept, Some(ZOE), None)
        .expect("the agent answers the bridge dialog");
    assert_eq!(got(&fx.report()), ("string".into(), json!(ZOE)));
    let c = wait_closed(&sup, &d.id);
    assert_eq!(c.closed_by, ClosedBy::Agent);
    assert!(
        native_openings(&mut fx).is_empty(),
        "the bridge dialog never opened natively"
    );

    assert!(proxy.running(), "the proxy kept running throughout");
    let log = proxy.finish();
    eprintln!("proxy answers: {:?}", log.answered);
    assert_eq!(
        log.answered.len(),
        slow.len() + 1,
        "the proxy saw exactly the native alerts: {:?}",
        log.answered
    );
    for (message, _, result) in &log.answered {
        assert_eq!(message, "closed by the proxy");
        assert!(
            result.is_ok(),
            "the proxy's answer was accepted: {result:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Script present, interception off: dialogs fall back to native
// ---------------------------------------------------------------------------------------------

#[test]
fn bridge_script_without_interception_falls_back_to_native_dialogs() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-bridge-fallback", "/main");
    let sup = fx.attach(StartOptions::default().with_dialog_bridge(BridgeMode::Off));
    let session = fx.session.clone();
    fx.cdp
        .call(
            "Page.addScriptToEvaluateOnNewDocument",
            json!({"source": cdp_supervisor::unversioned::bridge::SCRIPT, "runImmediately": true}),
            Some(&session),
            T,
        )
        .expect("install the bridge script without interception");
    assert_eq!(fx.eval_top(BRIDGE_INSTALLED), json!(true));

    // How long the bridge XHR takes to fail when nobody intercepts it.
    let mut probe_ms = Vec::new();
    for _ in 0..3 {
        let v = fx.eval_top(
            "(() => { const t0 = performance.now(); let error = null, status = null; \
             try { const x = new XMLHttpRequest(); \
             x.open('GET', 'http://cdp-dialog-bridge.invalid/?kind=alert&message=probe&default_prompt=', false); \
             x.send(null); status = x.status; } catch (e) { error = e.name; } \
             return {ms: performance.now() - t0, error, status}; })()",
        );
        assert!(
            !v["error"].is_null() || v["status"] != json!(200),
            "the uninterrupted bridge XHR must fail: {v}"
        );
        probe_ms.push(v["ms"].as_f64().unwrap_or(f64::NAN));
    }
    eprintln!("uninterrupted bridge XHR failed after {probe_ms:.1?} ms");

    let page = fx.page.clone();
    let mut fallback_ms = Vec::new();
    // (call, (kind, message), answer, prompt text, (typeof r, r))
    type Case<'a> = (
        &'a str,
        (&'a str, &'a str),
        DialogAction,
        Option<&'a str>,
        (&'a str, Value),
    );
    let cases: [Case<'_>; 4] = [
        (
            "alert('native after all')",
            ("alert", "native after all"),
            DialogAction::Accept,
            None,
            ("undefined", Value::Null),
        ),
        (
            "confirm('native confirm?')",
            ("confirm", "native confirm?"),
            DialogAction::Accept,
            None,
            ("boolean", json!(true)),
        ),
        (
            "prompt('native prompt?', 'def')",
            ("prompt", "native prompt?"),
            DialogAction::Accept,
            Some(ZOE),
            ("string", json!(ZOE)),
        ),
        (
            "prompt('native prompt?', 'def')",
            ("prompt", "native prompt?"),
            DialogAction::Dismiss,
            None,
            ("object", Value::Null),
        ),
    ];
    for (call, what, action, text, (ty, value)) in cases {
        let r = round(&mut fx, &sup, In::Top, &page, call, what, action, text);
        assert!(
            unversioned::bridge_request(&r.dialog).is_none(),
            "detected as native: {:?}",
            r.dialog
        );
        assert_eq!(r.closed.closed_by, ClosedBy::Agent);
        assert_eq!(got(&r.report), (ty.to_string(), value), "{call}");
        let t0 = r.report["t0"].as_f64().unwrap_or(f64::NAN);
        fallback_ms.push(r.dialog.opened_at * 1000.0 - t0);
    }
    eprintln!("call -> native dialog detected (XHR failure + fallback): {fallback_ms:.1?} ms");
    let openings = native_openings(&mut fx);
    assert_eq!(
        openings.len(),
        4,
        "four native dialogs opened: {openings:?}"
    );
    for ms in probe_ms.iter().chain(&fallback_ms) {
        assert!(*ms < 2000.0, "the .invalid host must fail fast: {ms:.1} ms");
    }
}
