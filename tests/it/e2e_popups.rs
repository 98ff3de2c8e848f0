//! End-to-end tests of popups and new tabs against a real headless Chromium (issue 14): a page
//! the task's page opens is followed on the same connection, its dialogs are caught (even one
//! raised by a script on load), answered, auto-answered by policy, recorded `remote` when the
//! popup closes; the cap holds under a loop of popups; a page another client creates is left
//! alone.
//!
//! Two sites: A, `http://127.0.0.1:P1`, and B, `http://localhost:P2` (cross-site to A, so an A
//! iframe inside a B popup is an out-of-process iframe). Both serve the same pages. A page reports
//! what its dialog returned with `fetch('/report?...')` to its own server
//! ([`HttpServer::wait_report`]).
//!
//! One Chromium per test binary ([`common::shared_browser`]); every test opens its own page with
//! an independent [`RawCdp`] client, attaches its own supervisor to exactly that page, and closes
//! the page and every popup it opened when it ends, also on panic ([`Fixture`]'s `Drop`). Every
//! wait has a deadline and waits on a condition, never a sleep.
//!
//! Tests skip (printing `SKIPPED: no Chromium`) when no Chromium is installed, unless
//! `CDP_SUPERVISOR_E2E=require`.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use crate::common::pages::{
    assert_renderers, attach_to_page, frozen_page_reported_then_closed, probe, raise_alert,
    wait_closed, wait_pick,
};
use crate::common::{HttpServer, RawCdp, Response};
use cdp_supervisor::{
    ClosedBy, Config, DialogAction, DialogPolicy, Error, Limits, PendingDialog, Route, Snapshot,
    StartOptions, Supervisor, SupervisorRegistry, tools,
};
use serde_json::{Value, json};

/// Deadline of every wait in these tests.
const T: Duration = Duration::from_secs(15);

/// A page whose script on load runs `call` and reports `{at, r}` to its own server.
fn on_load(title: &str, call: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head><body>\
         <p>{title}</p><script>const r = {call}; \
         fetch('/report?' + encodeURIComponent(JSON.stringify({{at: location.pathname, \
         r: r === undefined ? 'undefined' : r}})));</script></body></html>"
    )
}

fn site(other_port: std::sync::Arc<std::sync::atomic::AtomicU16>) -> HttpServer {
    HttpServer::start(move |req| {
        let other = other_port.load(std::sync::atomic::Ordering::SeqCst);
        match req.path.as_str() {
            "/" => Response::html(
                "<!doctype html><html><head><title>Opener</title></head><body style=\"margin:0\">\
                 <a id=\"l\" href=\"/prompt\" target=\"_blank\" style=\"display:block;\
                 width:300px;height:200px;background:#ccc\">open</a></body></html>",
            ),
            "/alert" => Response::html(on_load("Alert popup", "alert('hello from the popup')")),
            "/prompt" => Response::html(on_load("Prompt popup", "prompt('Your name?', 'nobody')")),
            "/confirm" => Response::html(on_load("Confirm popup", "confirm('Sure?')")),
            "/xframe" => Response::html(on_load("Cross frame", "confirm('Frame sure?')")),
            "/xpop" => Response::html(format!(
                "<!doctype html><html><head><title>Cross popup</title></head><body>\
                 <iframe src=\"http://127.0.0.1:{other}/xframe\"></iframe></body></html>"
            )),
            "/xpop-local" => Response::html(format!(
                "<!doctype html><html><head><title>Popup with a localhost frame</title></head>\
                 <body><iframe src=\"http://localhost:{other}/xframe\"></iframe></body></html>"
            )),
            "/blank" => Response::html("<!doctype html><title>blank</title><p>blank</p>"),
            _ => Response::not_found(),
        }
    })
}

/// One test's sites, page, raw client and registry. Dropping it stops the supervisor and closes
/// the page and the pages it opened.
struct Fixture {
    a: HttpServer,
    b: HttpServer,
    cdp: RawCdp,
    page: String,
    session: String,
    reg: SupervisorRegistry,
    ws_url: String,
}

impl Fixture {
    fn open(ws_url: &str, config: Config) -> Fixture {
        let a_port = Arc::new(std::sync::atomic::AtomicU16::new(0));
        let b_port = Arc::new(std::sync::atomic::AtomicU16::new(0));
        // A's pages name B's port and the other way round.
        let a = site(b_port.clone());
        let b = site(a_port.clone());
        a_port.store(a.port(), std::sync::atomic::Ordering::SeqCst);
        b_port.store(b.port(), std::sync::atomic::Ordering::SeqCst);
        let mut cdp = RawCdp::connect(ws_url).expect("connect a raw CDP client");
        let (page, session) = cdp
            .open_page(&a.url("127.0.0.1", "/"), T)
            .expect("open the opener page");
        Fixture {
            a,
            b,
            cdp,
            page,
            session,
            reg: SupervisorRegistry::new(config),
            ws_url: ws_url.to_string(),
        }
    }

    fn attach(&self, options: StartOptions) -> Arc<Supervisor> {
        attach_to_page(&self.reg, "popups", &self.ws_url, &self.page, options)
    }

    /// `window.open(url)` in the opener page, with a user gesture (the popup blocker lets it).
    fn window_open(&mut self, url: &str) {
        self.cdp
            .call(
                "Runtime.evaluate",
                json!({"expression": format!("window.w = window.open({url:?}); 'opened'"),
                       "userGesture": true, "returnByValue": true}),
                Some(&self.session),
                T,
            )
            .expect("window.open");
    }

    /// Opens the popup `url` and returns its target once the browser lists it (with `title`,
    /// when given).
    fn open_popup(&mut self, url: &str, title: Option<&str>) -> String {
        self.window_open(url);
        common::wait_until(T, || {
            let p = (self.popups().into_iter())
                .find(|t| t["url"] == url && title.is_none_or(|title| t["title"] == title))?;
            p["targetId"].as_str().map(str::to_string)
        })
        .expect("the popup")
    }

    /// Opens the popup `url` (an `/alert` page) and returns its target once its title shows:
    /// its title comes before its script, so its alert opens next.
    fn open_alert_popup(&mut self, url: &str) -> String {
        self.open_popup(url, Some("Alert popup"))
    }

    /// Targets whose opener is this test's page.
    fn popups(&mut self) -> Vec<Value> {
        let targets = self
            .cdp
            .call("Target.getTargets", json!({}), None, T)
            .expect("Target.getTargets");
        targets["targetInfos"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t["openerId"] == self.page.as_str())
            .collect()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.reg.stop_all();
        for t in self.popups() {
            if let Some(id) = t["targetId"].as_str() {
                let _ = self.cdp.close_page(id);
            }
        }
        let _ = self.cdp.close_page(&self.page);
    }
}

/// Waits for exactly one pending dialog, raised in a popup; returns it.
fn wait_popup_dialog(sup: &Supervisor, page: &str) -> PendingDialog {
    wait_pick(sup, T, "one pending dialog in a popup", |s| {
        match &*s.pending_dialogs {
            [d] if d.target_id != page && !d.target_id.is_empty() => Some(d.clone()),
            _ => None,
        }
    })
}

fn browser() -> Option<&'static common::Browser> {
    common::shared_browser()
}

#[test]
fn window_open_of_a_page_that_alerts_on_load_is_caught_answered_and_listed() {
    let Some(b) = browser() else { return };
    let mut fx = Fixture::open(&b.ws_url, Config::default());
    let sup = fx.attach(StartOptions::default());
    let url = fx.a.url("127.0.0.1", "/alert");
    fx.window_open(&url);
    let d = wait_popup_dialog(&sup, &fx.page);
    assert_eq!(d.kind, "alert");
    assert_eq!(d.message, "hello from the popup");
    let snap = sup.snapshot();
    assert_eq!(snap.pages.len(), 2, "{}", snap.to_json());
    assert_eq!(snap.pages[0].target_id, fx.page);
    assert_eq!(snap.pages[1].target_id, d.target_id);
    assert_eq!(
        snap.pages[1].opener_target_id.as_deref(),
        Some(fx.page.as_str())
    );
    assert_eq!(
        snap.to_json()["pending_dialogs"][0]["target_id"],
        d.target_id.as_str()
    );
    sup.respond_to_dialog(DialogAction::Accept, None, Some(&d.id))
        .expect("answer the popup's alert");
    let report = fx.a.wait_report_json(T);
    assert_eq!(report, json!({"at": "/alert", "r": "undefined"}));
    let closed = wait_closed(&sup, T, &d.id);
    assert_eq!(closed.closed_by, ClosedBy::Agent);
    assert_eq!(closed.dialog.target_id, d.target_id);
    // The popup answers calls routed to it, and its URL is known.
    let r = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": "location.pathname", "returnByValue": true}),
            Route::Target(&d.target_id),
            T,
        )
        .expect("evaluate in the popup");
    assert_eq!(r["result"]["value"], "/alert");
    wait_pick(&sup, T, "the popup's URL", |s| {
        (s.pages.get(1)?.url == url).then_some(())
    });
}

#[test]
fn a_target_blank_link_clicked_opens_a_prompt_answered_with_text() {
    let Some(b) = browser() else { return };
    let fx = Fixture::open(&b.ws_url, Config::default());
    let sup = fx.attach(StartOptions::default());
    for kind in ["mousePressed", "mouseReleased"] {
        sup.call(
            "Input.dispatchMouseEvent",
            json!({"type": kind, "x": 50, "y": 50, "button": "left", "clickCount": 1}),
            Route::Target(&fx.page),
            T,
        )
        .expect("click the link");
    }
    let d = wait_popup_dialog(&sup, &fx.page);
    assert_eq!(d.kind, "prompt");
    assert_eq!(d.default_prompt, "nobody");
    sup.respond_to_dialog(DialogAction::Accept, Some("Ada"), None)
        .expect("answer the prompt");
    assert_eq!(
        fx.a.wait_report_json(T),
        json!({"at": "/prompt", "r": "Ada"})
    );
}

#[test]
fn a_cross_origin_popup_with_a_cross_origin_iframe_that_confirms() {
    let Some(b) = browser() else { return };
    let mut fx = Fixture::open(&b.ws_url, Config::default());
    let sup = fx.attach(StartOptions::default());
    let url = fx.b.url("localhost", "/xpop");
    fx.window_open(&url);
    let d = wait_popup_dialog(&sup, &fx.page);
    assert_eq!(d.kind, "confirm");
    let frame = d.frame_id.clone().expect("the dialog names its frame");
    assert_ne!(frame, d.target_id, "raised in the popup's iframe");
    let view = tools::browser_snapshot(&fx.reg, "popups", &json!({"target_id": d.target_id}));
    let children = view["frame_tree"]["children"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        children
            .iter()
            .any(|c| c["frame_id"] == frame.as_str() && c["is_oopif"] == true),
        "the popup's tree shows the OOPIF: {view}"
    );
    assert_eq!(view["frame_tree"]["top"]["frame_id"], d.target_id.as_str());
    assert_eq!(view["pending_dialogs"][0]["id"], d.id.as_str());
    // The task's own tree does not show the popup's frames.
    let main = sup.snapshot();
    assert!(main.frame_tree.children.iter().all(|c| c.frame_id != frame));
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .expect("answer the iframe's confirm");
    assert_eq!(
        fx.a.wait_report_json(T),
        json!({"at": "/xframe", "r": true})
    );
    // A frame_id inside the popup routes like one of the page's.
    let r = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": "location.pathname", "returnByValue": true}),
            Route::Frame(&frame),
            T,
        )
        .expect("evaluate in the popup's OOPIF");
    assert_eq!(r["result"]["value"], "/xframe");
}

#[test]
fn a_popup_closed_while_its_dialog_is_pending_leaves_pages_and_the_dialog_is_remote() {
    let Some(b) = browser() else { return };
    let mut fx = Fixture::open(&b.ws_url, Config::default());
    let sup = fx.attach(StartOptions::default());
    let url = fx.a.url("127.0.0.1", "/confirm");
    fx.window_open(&url);
    let d = wait_popup_dialog(&sup, &fx.page);
    // Closed from outside: its own script, and its same-site opener's, are blocked by the
    // dialog (measured: an evaluate in the opener hangs while the popup's confirm is open).
    fx.cdp.close_page(&d.target_id).expect("close the popup");
    let closed = wait_closed(&sup, T, &d.id);
    assert_eq!(closed.closed_by, ClosedBy::Remote);
    assert_eq!(closed.dialog.target_id, d.target_id);
    wait_pick(&sup, T, "the popup gone from pages", |s| {
        (s.pages.len() == 1).then_some(())
    });
    let e = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": "1"}),
            Route::Target(&d.target_id),
            T,
        )
        .expect_err("calls into the closed popup fail");
    assert!(e.to_string().contains(&d.target_id), "{e}");
    assert!(sup.snapshot().is_active(), "the task goes on");
}

#[test]
fn auto_dismiss_applies_to_popups() {
    let Some(b) = browser() else { return };
    let mut fx = Fixture::open(&b.ws_url, Config::default());
    let sup = fx.attach(StartOptions::default().with_dialog_policy(DialogPolicy::AutoDismiss));
    let url = fx.a.url("127.0.0.1", "/confirm");
    fx.window_open(&url);
    assert_eq!(
        fx.a.wait_report_json(T),
        json!({"at": "/confirm", "r": false})
    );
    let c = wait_pick(&sup, T, "the popup's confirm recorded", |s| {
        s.recent_dialogs.last().cloned()
    });
    assert_eq!(c.closed_by, ClosedBy::AutoPolicy);
    assert_ne!(c.dialog.target_id, fx.page);
}

#[test]
fn fifty_popups_in_a_loop_honour_the_cap_and_none_hangs() {
    let Some(b) = browser() else { return };
    let mut fx = Fixture::open(&b.ws_url, Config::default());
    let sup = fx.attach(StartOptions::default());
    let url = fx.a.url("127.0.0.1", "/blank");
    for _ in 0..50 {
        fx.window_open(&url);
    }
    wait_pick(&sup, T, "20 popups followed and the cap reported", |s| {
        (s.pages.len() == 21 && s.pages_truncated).then_some(())
    });
    let popups = wait_pick(&sup, T, "50 popups", |_| {
        let p = fx_popups_count(&b.ws_url, &fx.page);
        (p >= 50).then_some(p)
    });
    assert_eq!(popups, 50);
    // An unfollowed popup runs: it loaded and answers.
    let followed: Vec<String> = sup
        .snapshot()
        .pages
        .iter()
        .map(|p| p.target_id.clone())
        .collect();
    let other = fx
        .popups()
        .into_iter()
        .filter_map(|t| t["targetId"].as_str().map(str::to_string))
        .find(|t| !followed.contains(t))
        .expect("an unfollowed popup");
    let sid = fx
        .cdp
        .attach(&other)
        .expect("attach to an unfollowed popup");
    let state = fx
        .cdp
        .evaluate(
            &sid,
            "new Promise(r => document.readyState === 'complete' ? r(1) : onload = () => r(1))",
            T,
        )
        .expect("the unfollowed popup loads");
    assert_eq!(state, json!(1));
    assert_eq!(sup.snapshot().to_json()["pages_truncated"], true);
}

/// A task on `b` with both popup caps at 1, and both full: one popup followed, one watched;
/// the next one is let go.
fn both_caps_full(b: &common::Browser) -> (Fixture, Arc<Supervisor>) {
    let limits = Limits::default()
        .with_pages_max(1)
        .with_watched_pages_max(1);
    let mut fx = Fixture::open(&b.ws_url, Config::default().with_limits(limits).unwrap());
    let sup = fx.attach(StartOptions::default());
    let url = fx.a.url("127.0.0.1", "/blank");
    fx.window_open(&url);
    fx.window_open(&url);
    wait_pick(&sup, T, "one popup followed, one watched", |s| {
        (s.pages.len() == 2 && s.pages_truncated).then_some(())
    });
    (fx, sup)
}

/// Past [`both_caps_full`], a raw client opens a third popup, `w3` in the opener, which the
/// task lets go; returns its target id.
fn let_a_third_go(fx: &mut Fixture) -> String {
    let ids = |popups: Vec<Value>| -> Vec<String> {
        popups
            .into_iter()
            .filter_map(|t| t["targetId"].as_str().map(str::to_string))
            .collect()
    };
    let first_two = ids(fx.popups());
    fx.cdp
        .call(
            "Runtime.evaluate",
            json!({"expression": "window.w3 = window.open(''); 'opened'", "userGesture": true}),
            Some(&fx.session),
            T,
        )
        .expect("a third popup, let go");
    let let_go: Vec<String> = ids(fx.popups())
        .into_iter()
        .filter(|t| !first_two.contains(t))
        .collect();
    assert_eq!((first_two.len(), let_go.len()), (2, 1), "{let_go:?}");
    let_go[0].clone()
}

/// The snapshot that shows `blocked` within 2 s, with no call made (`what` says after what),
/// and says `dialog_in_unfollowed_page` naming `let_go` alone, with no pending dialog.
fn blocked_within_2_s(sup: &Supervisor, what: &str, let_go: &str) -> Arc<Snapshot> {
    let snap = sup
        .wait_for(Duration::from_secs(2), |s| s.blocked.is_some())
        .unwrap_or_else(|| {
            panic!(
                "no blocked within 2 s of {what}, with no call made; last snapshot: {}",
                sup.snapshot().to_json()
            )
        });
    let shown = snap.to_json();
    assert_eq!(
        shown["blocked"]["reason"], "dialog_in_unfollowed_page",
        "{what}: {shown}"
    );
    assert_eq!(
        shown["blocked"]["target_ids"],
        json!([let_go]),
        "{what}: {shown}"
    );
    assert!(
        shown["pending_dialogs"]
            .as_array()
            .is_some_and(Vec::is_empty),
        "{what}: {shown}"
    );
    snap
}

/// Issue 28 item 9 (SPEC §8 "No silent wedge"), with small caps (1 followed, 1 watched): the
/// third popup, an `about:blank` one the opener writes an `alert()` into, is let go, and its
/// alert freezes the opener's renderer unseen. The opener's call that wrote it fails within
/// 2 s, naming the page to close; `blocked` says so; later calls into the page fail at once;
/// closing that popup (which `security.isolate_tasks` lets the task do) unfreezes the page and
/// `blocked` goes. A browser of its own: a dialog no client has `Page` enabled for is Chromium's
/// own, which it dismisses when another window of the browser comes up (other tests open some).
#[test]
fn an_alert_in_a_blank_popup_past_both_caps_is_reported_within_2_s_and_calls_fail_at_once() {
    if browser().is_none() {
        return;
    }
    let b = common::Browser::launch().expect("a Chromium of its own");
    let (mut fx, sup) = both_caps_full(&b);
    let t = std::time::Instant::now();
    let wrote = sup.call(
        "Runtime.evaluate",
        json!({"expression": "window.w3 = window.open(''); \
               w3.document.write('<script>alert(\"frozen\")<\\/script>'); 'written'",
               "userGesture": true}),
        Route::Page,
        Duration::from_secs(20),
    );
    let took = t.elapsed();
    let Err(Error::DialogInUnfollowedPage { target_ids }) = &wrote else {
        panic!("expected DialogInUnfollowedPage after {took:?}, got {wrote:?}");
    };
    eprintln!("the frozen renderer was reported after {took:?}: close one of {target_ids:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    let third: Vec<String> = fx
        .popups()
        .into_iter()
        .filter_map(|t| t["targetId"].as_str().map(str::to_string))
        .filter(|t| sup.snapshot().pages.iter().all(|p| &p.target_id != t))
        .collect();
    assert_eq!(target_ids.len(), 1, "{target_ids:?}");
    assert!(third.contains(&target_ids[0]), "{target_ids:?} {third:?}");
    let snap = sup.snapshot().to_json();
    assert_eq!(
        snap["blocked"]["reason"], "dialog_in_unfollowed_page",
        "{snap}"
    );
    assert_eq!(
        snap["blocked"]["target_id"],
        target_ids[0].as_str(),
        "{snap}"
    );
    assert!(
        snap["pending_dialogs"]
            .as_array()
            .is_some_and(Vec::is_empty),
        "{snap}"
    );
    let t = std::time::Instant::now();
    let later = sup.call(
        "Runtime.evaluate",
        json!({"expression": "1"}),
        Route::Page,
        Duration::from_secs(20),
    );
    assert!(
        matches!(later, Err(Error::DialogInUnfollowedPage { .. })),
        "{later:?}"
    );
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    let again = close_then_page_answers(&sup, &target_ids[0], "typeof w3");
    assert_eq!(again, "object");
}

/// The task closes `frozen` (a popup whose dialog froze the renderer of its page), `blocked`
/// goes, and the page answers again: `expression`'s value there.
fn close_then_page_answers(sup: &Supervisor, frozen: &str, expression: &str) -> Value {
    sup.call(
        "Target.closeTarget",
        json!({"targetId": frozen}),
        Route::Browser,
        T,
    )
    .expect("the task closes the popup that froze its page");
    wait_pick(sup, T, "blocked to go", |s| {
        s.blocked.is_none().then_some(())
    });
    let again = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
            Route::Page,
            T,
        )
        .expect("the page answers again");
    again["result"]["value"].clone()
}

/// What the opener page saw of pointer events since [`LISTEN`], and whether its link is hovered.
const SEEN: &str =
    "JSON.stringify({ev: window.ev, hover: document.querySelector('#l').matches(':hover')})";

/// Records every pointer, mouse and boundary event the opener page gets into `window.ev`.
const LISTEN: &str = "window.ev = []; for (const t of ['mousemove', 'pointermove', 'pointerrawupdate', \
    'mouseover', 'mouseout', 'mouseenter', 'mouseleave', 'pointerover', 'pointerout', \
    'pointerenter', 'pointerleave', 'mousedown', 'mouseup', 'keydown', 'keyup', 'wheel']) \
    document.addEventListener(t, e => ev.push(t + '@' + e.clientX + ',' + e.clientY), \
    {capture: true, passive: true}); 'listening'";

/// Issue 28 item 9 with nobody calling: past both caps (1 + 1) a third popup is let go; an
/// alert in it freezes the task's renderer, and `blocked` says `dialog_in_unfollowed_page`
/// within 2 s although no call goes through the supervisor (the watchdog probes the page once
/// a second); the first call then fails at once naming the popup; closing it clears
/// `blocked`. The page never saw the probe: no pointer event, `:hover` kept (the listeners do
/// see the same mouse move from a raw client afterwards). A browser of its own, as above.
#[test]
fn an_alert_in_a_let_go_popup_is_reported_within_2_s_with_no_call_and_the_page_sees_no_probe() {
    if browser().is_none() {
        return;
    }
    let b = common::Browser::launch().expect("a Chromium of its own");
    let (mut fx, sup) = both_caps_full(&b);
    let let_go = vec![let_a_third_go(&mut fx)];
    let session = fx.session.clone();
    let hover = json!({"type": "mouseMoved", "x": 50, "y": 50});
    fx.cdp
        .call("Input.dispatchMouseEvent", hover, Some(&session), T)
        .expect("hover the link");
    fx.cdp.evaluate(&session, LISTEN, T).expect("listen");
    // The raw client makes the let-go popup alert and waits for nothing; nobody calls the
    // supervisor from here until `blocked` shows.
    let t = std::time::Instant::now();
    fx.cdp
        .send_command(
            "Runtime.evaluate",
            json!({"expression": "w3.eval(\"alert('frozen')\"); 'alerted'"}),
            Some(&session),
        )
        .expect("alert in the let-go popup");
    let snap = blocked_within_2_s(&sup, "the alert", &let_go[0]);
    eprintln!(
        "reported {:?} after the alert, with no call made",
        t.elapsed()
    );
    let blocked = snap.blocked.clone().expect("blocked");
    assert_eq!(blocked.target_ids, let_go);
    let t = std::time::Instant::now();
    let call = sup.call(
        "Runtime.evaluate",
        json!({"expression": "1"}),
        Route::Page,
        T,
    );
    let refused_in = t.elapsed();
    eprintln!("the next call failed after {refused_in:?}: {call:?}");
    assert!(
        matches!(&call, Err(Error::DialogInUnfollowedPage { target_ids }) if target_ids == &let_go),
        "{call:?}"
    );
    assert!(refused_in < Duration::from_millis(250), "{refused_in:?}");
    sup.call(
        "Target.closeTarget",
        json!({"targetId": let_go[0]}),
        Route::Browser,
        T,
    )
    .expect("the task closes the popup that froze it");
    wait_pick(&sup, T, "blocked to go", |s| {
        s.blocked.is_none().then_some(())
    });
    let seen = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": SEEN, "returnByValue": true}),
            Route::Page,
            T,
        )
        .expect("the page answers again");
    assert_eq!(
        seen["result"]["value"], "{\"ev\":[],\"hover\":true}",
        "the page saw the probe"
    );
    // The same mouse move from a raw client, now: the listeners see it.
    let leave = json!({"type": "mouseMoved", "x": -1, "y": -1});
    fx.cdp
        .call("Input.dispatchMouseEvent", leave, Some(&session), T)
        .expect("mouse move");
    let seen = fx.cdp.evaluate(&session, SEEN, T).expect("seen");
    assert!(
        seen.as_str()
            .is_some_and(|s| s.contains("pointerout") && s.contains("\"hover\":false")),
        "{seen}"
    );
}

/// Issue 28 item 9, the way back when the dialog ends outside the supervisor. Past both caps
/// (1 + 1) a let-go popup alerts and `blocked` shows with no call made. Then another client
/// opens a tab, which makes Chromium dismiss that dialog (nobody could answer it over CDP: it is
/// Chromium's own, `measure_unwatched::unwatched_alert_and_a_new_window`): the renderer answers
/// the probe's pending `Performance.getMetrics`, `blocked` goes and calls reach the page again.
/// The popup is still open, so the watchdog keeps probing: a second alert there is reported
/// within 2 s again (once the popup is in front: Chromium dismisses at once a dialog from a page
/// in the background); the other client then closes the popup, and `blocked` goes again.
#[test]
fn a_let_go_popups_dialog_ended_elsewhere_clears_blocked_and_the_next_one_is_reported_again() {
    if browser().is_none() {
        return;
    }
    let b = common::Browser::launch().expect("a Chromium of its own");
    let (mut fx, sup) = both_caps_full(&b);
    let let_go = let_a_third_go(&mut fx);
    let session = fx.session.clone();
    let alert = |fx: &mut Fixture, text: &str| -> std::time::Instant {
        let expression = format!("w3.eval(\"alert('{text}')\"); 'alerted'");
        fx.cdp
            .send_command(
                "Runtime.evaluate",
                json!({ "expression": expression }),
                Some(&session),
            )
            .expect("alert in the let-go popup");
        std::time::Instant::now()
    };
    let reported = |what: &str, t: std::time::Instant| {
        blocked_within_2_s(&sup, what, &let_go);
        eprintln!(
            "{what}: reported {:?} after the alert, with no call made",
            t.elapsed()
        );
    };
    let refused = |what: &str| {
        let t = std::time::Instant::now();
        let call = sup.call(
            "Runtime.evaluate",
            json!({"expression": "1"}),
            Route::Page,
            T,
        );
        let took = t.elapsed();
        assert!(
            matches!(&call, Err(Error::DialogInUnfollowedPage { .. })),
            "{what}: {call:?}"
        );
        assert!(took < Duration::from_millis(250), "{what}: {took:?}");
        eprintln!("{what}: the next call failed after {took:?}");
    };
    let cleared = |what: &str| {
        let t = std::time::Instant::now();
        wait_pick(&sup, T, "blocked to go", |s| {
            s.blocked.is_none().then_some(())
        });
        eprintln!("{what}: blocked went {:?} later", t.elapsed());
        let answer = sup
            .call(
                "Runtime.evaluate",
                json!({"expression": "typeof w3", "returnByValue": true}),
                Route::Page,
                T,
            )
            .unwrap_or_else(|e| panic!("{what}: the page answers again: {e:?}"));
        assert_eq!(answer["result"]["value"], "object", "{what}");
    };
    let t = alert(&mut fx, "one");
    reported("the first alert", t);
    refused("the first alert");
    // Another client opens a tab: Chromium dismisses the dialog nobody could answer.
    let tab = fx
        .cdp
        .new_page("about:blank")
        .expect("another client's tab");
    cleared("dismissed by another client's new tab");
    fx.cdp.close_page(&tab).expect("close that tab");
    // Chromium dismisses at once a dialog from a page in the background (the renderer never
    // froze: measured while writing this test); the user brings the popup to the front.
    fx.cdp
        .call(
            "Target.activateTarget",
            json!({"targetId": let_go}),
            None,
            T,
        )
        .expect("the popup in front");
    let t = alert(&mut fx, "two");
    reported("the second alert", t);
    refused("the second alert");
    fx.cdp
        .close_page(&let_go)
        .expect("another client closes the popup");
    cleared("the popup closed by another client");
}

/// Popups of `page`, counted by a client of its own (the fixture's is borrowed by the wait).
fn fx_popups_count(ws_url: &str, page: &str) -> usize {
    let Ok(mut c) = RawCdp::connect(ws_url) else {
        return 0;
    };
    c.call("Target.getTargets", json!({}), None, T)
        .ok()
        .and_then(|v| v["targetInfos"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter(|t| t["openerId"] == page)
        .count()
}

#[test]
fn a_page_another_client_creates_is_not_followed() {
    let Some(b) = browser() else { return };
    let mut fx = Fixture::open(&b.ws_url, Config::default());
    let sup = fx.attach(StartOptions::default());
    let url = fx.a.url("127.0.0.1", "/blank");
    let other = fx.cdp.new_page(&url).expect("another client's page");
    let sid = fx.cdp.attach(&other).expect("attach to it");
    // It runs (the supervisor resumed it) ...
    let v = fx
        .cdp
        .evaluate(
            &sid,
            "new Promise(r => document.readyState === 'complete' ? r(1) : onload = () => r(1))",
            T,
        )
        .expect("the other client's page loads");
    assert_eq!(v, json!(1));
    // ... and the task's snapshot never lists it: a browser-level round trip after its
    // creation has been answered, so its attach event was applied.
    sup.call("Browser.getVersion", json!({}), Route::Browser, T)
        .expect("browser-level call");
    let snap = sup.snapshot();
    assert_eq!(snap.pages.len(), 1, "{}", snap.to_json());
    assert_eq!(snap.pages[0].target_id, fx.page);
    let _ = fx.cdp.close_page(&other);
}

#[test]
fn an_alert_the_opener_writes_into_a_blank_popup_is_caught() {
    let Some(b) = browser() else { return };
    let mut fx = Fixture::open(&b.ws_url, Config::default());
    let sup = fx.attach(StartOptions::default());
    // The opener's evaluate waits until the popup is resumed and its alert answered: send it
    // without waiting, answer through the supervisor, then take its reply.
    let id = fx
        .cdp
        .send_command(
            "Runtime.evaluate",
            json!({"expression": "window.w = window.open(''); \
                   w.document.write('<script>alert(\"written\")<\\/script>'); 'written'",
                   "userGesture": true, "returnByValue": true}),
            Some(&fx.session),
        )
        .expect("send the opener's script");
    let d = wait_popup_dialog(&sup, &fx.page);
    assert_eq!(d.message, "written");
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .expect("answer the written alert");
    let reply = common::wait_until(T, || match fx.cdp.next_message(T) {
        Ok(Some(m)) if m["id"] == id => Some(m),
        _ => None,
    })
    .expect("the opener's script returns");
    assert_eq!(reply["result"]["result"]["value"], "written");
}

#[test]
fn a_popup_that_closes_itself_while_its_iframe_dialog_is_pending() {
    let Some(b) = browser() else { return };
    let mut fx = Fixture::open(&b.ws_url, Config::default());
    let sup = fx.attach(StartOptions::default());
    // A popup whose cross-site iframe confirms: the popup's own frame runs in another process
    // than the dialog, so it can still close itself. (Not a cross-site popup whose iframe is
    // same-site with the opener: measured, Chromium 156 itself then dies when the popup closes,
    // with no CDP client but a raw one: tests/it/measure_popups.rs, i_cross_site_popup_...)
    let url = fx.a.url("127.0.0.1", "/xpop-local");
    fx.window_open(&url);
    let d = wait_popup_dialog(&sup, &fx.page);
    sup.call(
        "Runtime.evaluate",
        json!({"expression": "setTimeout(() => window.close(), 0); 'closing'"}),
        Route::Target(&d.target_id),
        T,
    )
    .expect("the popup's main frame runs while its iframe's dialog is open");
    let closed = wait_closed(&sup, T, &d.id);
    assert_eq!(
        closed.closed_by,
        ClosedBy::Remote,
        "{}",
        sup.snapshot().to_json()
    );
    assert_eq!(closed.dialog.target_id, d.target_id);
    wait_pick(&sup, T, "the popup gone from pages", |s| {
        (s.pages.len() == 1).then_some(())
    });
    assert!(sup.snapshot().is_active(), "the task goes on");
}

#[test]
fn a_noopener_popup_is_followed_too() {
    // Measured: Chromium 156 reports openerId for `noopener` and `rel="noopener"` pages as well.
    let Some(b) = browser() else { return };
    let mut fx = Fixture::open(&b.ws_url, Config::default());
    let sup = fx.attach(StartOptions::default());
    let url = fx.a.url("127.0.0.1", "/confirm");
    fx.cdp
        .call(
            "Runtime.evaluate",
            json!({"expression": format!("window.open({url:?}, '_blank', 'noopener'); 'opened'"),
                   "userGesture": true}),
            Some(&fx.session),
            T,
        )
        .expect("window.open noopener");
    let d = wait_popup_dialog(&sup, &fx.page);
    assert_eq!(d.kind, "confirm");
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .expect("answer");
    assert_eq!(
        fx.a.wait_report_json(T),
        json!({"at": "/confirm", "r": true})
    );
}

#[test]
fn when_the_task_page_closes_while_a_popup_lives_the_task_ends_and_does_not_move() {
    let Some(b) = browser() else { return };
    let mut fx = Fixture::open(&b.ws_url, Config::default());
    let sup = fx.attach(StartOptions::default());
    let url = fx.a.url("127.0.0.1", "/blank");
    fx.window_open(&url);
    let popup = wait_pick(&sup, T, "the popup followed", |s| {
        s.pages.get(1).map(|p| p.target_id.clone())
    });
    let r = sup.call(
        "Target.closeTarget",
        json!({"targetId": fx.page}),
        Route::Browser,
        T,
    );
    assert_eq!(r.expect("the close succeeded"), json!({"success": true}));
    let s = wait_pick(&sup, T, "the supervisor ends", |s| {
        (!s.is_active()).then(|| s.clone())
    });
    assert_eq!(s.page_target_id.as_deref(), Some(fx.page.as_str()));
    assert!(
        s.disconnect_reason
            .as_deref()
            .unwrap_or("")
            .contains("page target"),
        "{:?}",
        s.disconnect_reason
    );
    // The popup still runs (nobody left it paused).
    let sid = fx.cdp.attach(&popup).expect("attach to the popup");
    assert_eq!(fx.cdp.evaluate(&sid, "1 + 1", T), Ok(json!(2)));
}

// ------------------------------------------------------------------ dialogs block their renderer

/// `/p?n=NAME`: a page titled NAME; `/alert?n=NAME`: a page that alerts on load, then reports.
fn named_pages() -> HttpServer {
    HttpServer::start(|req| {
        let name = req
            .query
            .split('&')
            .find_map(|kv| kv.strip_prefix("n="))
            .unwrap_or("")
            .to_string();
        match req.path.as_str() {
            "/p" => Response::html(format!(
                "<!doctype html><html><head><title>{name}</title></head><body style=\"margin:0\">\
                 <p>{name}</p></body></html>"
            )),
            "/alert" => Response::html(on_load(&name, &format!("alert('{name} on load')"))),
            _ => Response::not_found(),
        }
    })
}

/// The task's opener page at `http://{host}:P/p?n=opener`, with a supervisor attached to it.
struct Renderers {
    srv: HttpServer,
    cdp: RawCdp,
    page: String,
    reg: SupervisorRegistry,
    sup: Arc<Supervisor>,
}

impl Renderers {
    fn open(ws_url: &str, host: &str, task: &str) -> Renderers {
        let srv = named_pages();
        let mut cdp = RawCdp::connect(ws_url).expect("connect a raw CDP client");
        let (page, _) = cdp
            .open_page(&srv.url(host, "/p?n=opener"), T)
            .expect("open the opener page");
        let reg = SupervisorRegistry::new(Config::default());
        let sup = attach_to_page(&reg, task, ws_url, &page, StartOptions::default());
        Renderers {
            srv,
            cdp,
            page,
            reg,
            sup,
        }
    }

    /// Runs `expr` (which opens one page) with a user gesture in page `from`; returns the new
    /// page's target id, once the supervisor lists it (followed or watched) and it has loaded.
    fn open_popup(&self, from: &str, expr: &str) -> String {
        let before = self.sup.snapshot();
        let known: Vec<String> = before.pages.iter().map(|p| p.target_id.clone()).collect();
        self.sup
            .call(
                "Runtime.evaluate",
                json!({"expression": expr, "userGesture": true}),
                Route::Target(from),
                T,
            )
            .expect("open a popup");
        let popup = wait_pick(&self.sup, T, "the new popup", |s| {
            s.pages
                .iter()
                .map(|p| p.target_id.clone())
                .find(|t| !known.contains(t))
        });
        let loaded = self.sup.call(
            "Runtime.evaluate",
            json!({"expression": "new Promise(r => document.readyState === 'complete' ? r(1) : \
                   addEventListener('load', () => r(1)))", "awaitPromise": true,
                   "returnByValue": true}),
            Route::Target(&popup),
            T,
        );
        assert_eq!(loaded.expect("the popup loads")["result"]["value"], 1);
        popup
    }
}

impl Drop for Renderers {
    fn drop(&mut self) {
        self.reg.stop_all();
        let targets = self
            .cdp
            .call("Target.getTargets", json!({}), None, T)
            .unwrap_or_default();
        for t in targets["targetInfos"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            if t["openerId"] == self.page.as_str()
                || t["url"]
                    .as_str()
                    .is_some_and(|u| u.contains(&format!(":{}/", self.srv.port())))
            {
                let _ = self
                    .cdp
                    .close_page(t["targetId"].as_str().unwrap_or_default());
            }
        }
        let _ = self.cdp.close_page(&self.page);
    }
}

/// Issue 20 item 6, on Chromium: which popups share the opener's renderer (measured:
/// `tests/it/measure_renderers.rs`) and so which calls a dialog blocks. A same-origin popup, a
/// same-site one on a subdomain, an `about:blank` popup and a popup of a popup run in the
/// opener's renderer; a cross-site popup, a `noopener` one (`window.open` or a `rel=noopener`
/// link) and a `noopener` `about:blank` in their own. An alert in any of them refuses calls into
/// every page of its renderer at once, naming it, and no other call. The sites are
/// `*.localhost` names of this test only (`r6a` and `r6b`), so no other test's page can share
/// their renderers.
#[test]
fn a_dialog_in_a_popup_blocks_calls_into_every_page_of_its_renderer_and_no_other() {
    let Some(b) = browser() else { return };
    let fx = Renderers::open(&b.ws_url, "r6a.localhost", "renderers-popups");
    let port = fx.srv.port();
    let url = |host: &str, name: &str| format!("http://{host}:{port}/p?n={name}");
    let open = |w: String| format!("window.open({w:?}); 1");
    let page = fx.page.clone();
    let same = fx.open_popup(&page, &open(url("r6a.localhost", "same")));
    let sub = fx.open_popup(&page, &open(url("sub.r6a.localhost", "subdomain")));
    let cross = fx.open_popup(&page, &open(url("r6b.localhost", "cross")));
    let noopener = fx.open_popup(
        &page,
        &format!(
            "window.open({:?}, '_blank', 'noopener'); 1",
            url("r6a.localhost", "noopener")
        ),
    );
    let rel = fx.open_popup(
        &page,
        &format!(
            "const a = document.createElement('a'); a.href = {:?}; a.target = '_blank'; \
             a.rel = 'noopener'; document.body.append(a); a.click(); 1",
            url("r6a.localhost", "rel")
        ),
    );
    let blank = fx.open_popup(&page, "window.w = window.open(''); 1");
    let blank_noopener =
        fx.open_popup(&page, "window.open('about:blank', '_blank', 'noopener'); 1");
    let grand = fx.open_popup(&same, &open(url("r6a.localhost", "popup-of-popup")));
    let sessions = [
        ("opener", Route::Target(&page)),
        ("same-origin", Route::Target(&same)),
        ("subdomain", Route::Target(&sub)),
        ("cross-site", Route::Target(&cross)),
        ("noopener", Route::Target(&noopener)),
        ("rel=noopener", Route::Target(&rel)),
        ("about:blank", Route::Target(&blank)),
        ("blank noopener", Route::Target(&blank_noopener)),
        ("popup of popup", Route::Target(&grand)),
    ];
    assert_renderers(
        &fx.sup,
        &sessions,
        &[&[
            "opener",
            "same-origin",
            "subdomain",
            "about:blank",
            "popup of popup",
        ]],
    );
    // Browser-level calls are never affected.
    let d = raise_alert(&fx.sup, Route::Target(&same), "still there");
    fx.sup
        .call("Target.getTargets", json!({}), Route::Browser, T)
        .expect("a browser-level call answers");
    fx.sup
        .respond_to_dialog(DialogAction::Accept, None, Some(&d.id))
        .expect("accept");
}

/// A call in flight into the opener (an evaluate awaiting a timer) when a same-site popup
/// raises an alert returns `BlockedByDialog` naming the popup's alert at once, not at its
/// deadline; an evaluate in flight in a cross-site popup carries on and answers.
#[test]
fn a_call_in_flight_into_the_opener_fails_when_its_same_site_popup_alerts() {
    let Some(b) = browser() else { return };
    let fx = Renderers::open(&b.ws_url, "r6c.localhost", "renderers-in-flight");
    let port = fx.srv.port();
    let page = fx.page.clone();
    let same = fx.open_popup(
        &page,
        &format!("window.open('http://r6c.localhost:{port}/p?n=same'); 1"),
    );
    let cross = fx.open_popup(
        &page,
        &format!("window.open('http://r6d.localhost:{port}/p?n=cross'); 1"),
    );
    for tid in [&same, &cross] {
        assert_eq!(probe(&fx.sup, Route::Target(tid)), None);
    }
    let waiting = |target: String| {
        let sup = Arc::clone(&fx.sup);
        std::thread::spawn(move || {
            let t = std::time::Instant::now();
            let r = sup.call(
                "Runtime.evaluate",
                json!({"expression": "fetch('/report?started'); \
                                      new Promise(r => setTimeout(() => r('late'), 1500))",
                       "awaitPromise": true, "returnByValue": true}),
                Route::Target(&target),
                Duration::from_secs(20),
            );
            (r, t.elapsed())
        })
    };
    let on_opener = waiting(page.clone());
    let on_cross = waiting(cross.clone());
    // Both evaluates are running in their pages (so in flight) before the alert opens.
    for _ in 0..2 {
        assert_eq!(fx.srv.wait_report(T).as_deref(), Some("started"));
    }
    let d = raise_alert(&fx.sup, Route::Target(&same), "popup alert");
    let (r, took) = on_opener.join().expect("opener caller");
    match r {
        Err(cdp_supervisor::Error::BlockedByDialog { dialog, method }) => {
            assert_eq!(dialog.id, d.id);
            assert_eq!(dialog.target_id, same);
            assert_eq!(method, "Runtime.evaluate");
        }
        other => panic!("expected BlockedByDialog, got {other:?}"),
    }
    assert!(
        took < Duration::from_millis(1500),
        "returned after {took:?}"
    );
    let (r, _) = on_cross.join().expect("cross-site caller");
    assert_eq!(
        r.expect("the cross-site popup answers")["result"]["value"],
        "late"
    );
    fx.sup
        .respond_to_dialog(DialogAction::Accept, None, Some(&d.id))
        .expect("accept");
    assert_eq!(
        probe(&fx.sup, Route::Target(&page)),
        None,
        "the opener answers again"
    );
}

/// Issue 20 item 7, on Chromium: 20 popups are followed, the 21st raises an alert on load.
/// It is not followed but watched: its alert is pending with its target id and answerable;
/// meanwhile calls into the task's page (same site, same renderer) fail at once naming it, and
/// a click on the frozen page is refused instead of "succeeding"; afterwards the page works.
#[test]
fn the_21st_popup_alerting_on_load_is_seen_answerable_and_blocks_calls_into_its_renderer() {
    let Some(b) = browser() else { return };
    let fx = Renderers::open(&b.ws_url, "r7.localhost", "renderers-past-the-cap");
    let port = fx.srv.port();
    let page = fx.page.clone();
    for i in 0..20 {
        fx.sup
            .call(
                "Runtime.evaluate",
                json!({"expression": format!(
                    "window.open('http://r7.localhost:{port}/p?n=pop{i}'); 1"),
                       "userGesture": true}),
                Route::Target(&page),
                T,
            )
            .expect("open a popup");
    }
    wait_pick(&fx.sup, T, "20 popups followed", |s| {
        (s.pages.len() == 21).then_some(())
    });
    fx.sup
        .call(
            "Runtime.evaluate",
            json!({"expression": format!(
                "window.open('http://r7.localhost:{port}/alert?n=pop20'); 1"),
                   "userGesture": true}),
            Route::Target(&page),
            T,
        )
        .expect("open the 21st popup");
    let d = wait_pick(&fx.sup, T, "the 21st popup's alert", |s| {
        s.pending_dialogs.first().cloned()
    });
    let snap = fx.sup.snapshot();
    assert_eq!(d.message, "pop20 on load");
    assert!(snap.pages_truncated, "{}", snap.to_json());
    assert!(
        snap.pages.iter().all(|p| p.target_id != d.target_id),
        "not followed"
    );
    assert_ne!(d.target_id, page);
    // Calls into the frozen renderer fail at once, naming the alert.
    assert_eq!(probe(&fx.sup, Route::Target(&page)), Some(d.id.clone()));
    assert_eq!(
        probe(&fx.sup, Route::Target(&d.target_id)),
        Some(d.id.clone())
    );
    let t = std::time::Instant::now();
    let click = fx.sup.call(
        "Input.dispatchMouseEvent",
        json!({"type": "mousePressed", "x": 5, "y": 5, "button": "left", "clickCount": 1}),
        Route::Target(&page),
        Duration::from_secs(20),
    );
    assert!(
        matches!(&click, Err(cdp_supervisor::Error::BlockedByDialog { dialog, .. }) if dialog.id == d.id),
        "{click:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    // Answerable; the popup's script goes on, and the page works again.
    fx.sup
        .respond_to_dialog(DialogAction::Accept, None, Some(&d.id))
        .expect("answer the 21st popup's alert");
    assert_eq!(
        fx.srv.wait_report_json(T),
        json!({"at": "/alert", "r": "undefined"})
    );
    assert_eq!(wait_closed(&fx.sup, T, &d.id).closed_by, ClosedBy::Agent);
    assert_eq!(probe(&fx.sup, Route::Target(&page)), None);
}

/// A popup whose dialog opened before the task could watch it (here it opened before the task
/// started; on Browserless, Browserless's own connection lets every new page run before the
/// task's set-up arrives) cannot be answered over CDP and answers nothing else: the task
/// follows it, and 2 s later `blocked` names it, where before nothing was said. The task's page
/// (another site, another renderer) still answers; closing the popup clears `blocked`. A
/// browser of its own: a dialog no client has `Page` enabled for is Chromium's own, which it
/// dismisses when another window of the browser comes up. As on Browserless: the task follows
/// its popups on its own connection (no watcher).
#[test]
fn a_popup_frozen_by_a_dialog_before_the_task_watched_it_is_reported_and_closing_it_clears_it() {
    frozen_popup_reported(false);
}

/// The same with the registry's popup watcher: the task takes the popup over when it starts
/// (before, the watcher had let it go and the task never followed it: nothing was said).
#[test]
fn with_the_popup_watcher_a_popup_frozen_before_the_task_started_is_reported_too() {
    frozen_popup_reported(true);
}

fn frozen_popup_reported(watcher: bool) {
    if browser().is_none() {
        return;
    }
    let b = common::Browser::launch().expect("a Chromium of its own");
    let mut fx = Fixture::open(&b.ws_url, Config::default());
    let url = fx.b.url("localhost", "/alert");
    let popup = fx.open_alert_popup(&url);
    // Its alert is open once a call into it hangs (nobody has `Page` enabled there).
    let s = fx.cdp.attach(&popup).expect("attach to the popup");
    common::wait_until(T, || {
        let r = fx.cdp.evaluate(&s, "1", Duration::from_millis(300));
        r.is_err().then_some(())
    })
    .expect("the popup's alert froze it");
    let _ = fx
        .cdp
        .call("Target.detachFromTarget", json!({"sessionId": s}), None, T);

    let reg = match watcher {
        true => SupervisorRegistry::new(Config::default()),
        false => cdp_supervisor::unversioned::registry_without_popup_watcher(Config::default()),
    };
    let t0 = std::time::Instant::now();
    let sup = attach_to_page(&reg, "frozen", &b.ws_url, &fx.page, StartOptions::default());
    let blocked = wait_pick(&sup, T, "blocked naming the popup", |s| s.blocked.clone());
    let took = t0.elapsed();
    eprintln!(
        "e2e_popups: the frozen popup reported {took:?} after the start (watcher: {watcher})"
    );
    let snap = sup.snapshot();
    assert!(
        snap.pages.iter().any(|p| p.target_id == popup),
        "followed: {}",
        snap.to_json()
    );
    assert!(snap.pending_dialogs.is_empty(), "{}", snap.to_json());
    frozen_page_reported_then_closed(&sup, &blocked, &popup, T);
    reg.stop_all();
}

/// A popup the page opened before the task started is followed once it starts, with the
/// registry's popup watcher (which had let it go: the task takes it over itself) and without
/// (the task's own auto-attach hands it over): a dialog it opens later is caught with its
/// `target_id`, and the answer is the one its script gets.
#[test]
fn a_popup_opened_before_the_task_started_is_followed_and_its_later_dialog_caught() {
    let Some(b) = browser() else { return };
    for watcher in [true, false] {
        let mut fx = Fixture::open(&b.ws_url, Config::default());
        let popup = fx.open_popup(&fx.b.url("localhost", "/blank"), None);
        let own;
        let sup = if watcher {
            fx.attach(StartOptions::default())
        } else {
            own = cdp_supervisor::unversioned::registry_without_popup_watcher(Config::default());
            attach_to_page(
                &own,
                "earlier",
                &b.ws_url,
                &fx.page,
                StartOptions::default(),
            )
        };
        wait_pick(&sup, T, "the earlier popup, followed", |s| {
            s.pages.iter().any(|p| p.target_id == popup).then_some(())
        });
        let opened = sup
            .call(
                "Runtime.evaluate",
                json!({"expression": "setTimeout(() => { window.got = confirm('Later?'); }, 0); 1"}),
                Route::Target(&popup),
                T,
            )
            .expect("evaluate in the popup");
        assert_eq!(opened["result"]["value"], 1, "{opened}");
        let d = wait_popup_dialog(&sup, &fx.page);
        assert_eq!(
            (d.kind.as_str(), d.target_id.as_str()),
            ("confirm", popup.as_str())
        );
        sup.respond_to_dialog(DialogAction::Accept, None, Some(&d.id))
            .expect("answer the popup's confirm");
        assert_eq!(wait_closed(&sup, T, &d.id).closed_by, ClosedBy::Agent);
        let got = sup
            .call(
                "Runtime.evaluate",
                json!({"expression": "window.got", "returnByValue": true}),
                Route::Target(&popup),
                T,
            )
            .expect("read the answer in the popup");
        assert_eq!(got["result"]["value"], true, "watcher: {watcher}: {got}");
        sup.stop();
    }
}

/// A same-site popup shares its opener's renderer: an alert it opened before the task came
/// freezes the task's page too, and no client can answer it. The start's probe proves a dialog
/// in the page's renderer; `blocked` now names the popup (`target_ids`) and says to close it
/// first, where before its hint said only to reload the page, which leaves the popup's alert
/// in place. Closing the popup frees the page: `blocked` goes and the page answers.
#[test]
fn a_same_site_popup_frozen_before_the_task_came_is_named_when_the_page_is_found_blocked() {
    if browser().is_none() {
        return;
    }
    let b = common::Browser::launch().expect("a Chromium of its own");
    let mut fx = Fixture::open(&b.ws_url, Config::default());
    let popup = fx.open_alert_popup(&fx.a.url("127.0.0.1", "/alert"));
    // Its alert holds the renderer the page shares: a call into the page hangs.
    common::wait_until(T, || {
        let r = fx
            .cdp
            .evaluate(&fx.session, "1", Duration::from_millis(300));
        r.is_err().then_some(())
    })
    .expect("the popup's alert froze the page's renderer");

    let sup = fx.attach(StartOptions::default());
    let blocked = wait_pick(&sup, T, "blocked", |s| s.blocked.clone());
    assert_eq!(
        blocked.reason,
        cdp_supervisor::BlockedReason::OrphanedDialog,
        "{blocked:?}"
    );
    assert_eq!(
        blocked.target_ids,
        std::slice::from_ref(&popup),
        "{blocked:?}"
    );
    assert!(
        blocked.hint.contains("Close those first"),
        "{}",
        blocked.hint
    );
    assert_eq!(
        sup.snapshot().to_json()["blocked"]["target_ids"],
        json!([popup])
    );
    // The page's calls fail at once meanwhile; closing the popup frees it.
    let t = std::time::Instant::now();
    let refused = sup.call(
        "Runtime.evaluate",
        json!({"expression": "1"}),
        Route::Page,
        T,
    );
    assert!(refused.is_err(), "{refused:?}");
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(close_then_page_answers(&sup, &popup, "6*7"), 42);
}
