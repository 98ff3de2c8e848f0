//! Taking a task over and thumbnails on a real headless Chromium (issue 33 points 3 and 4,
//! SPEC §20): a `must_respond` dialog with a 2 s watchdog is not dismissed while a person holds
//! the task, the person's answer reaches the page's JavaScript as `closed_by: "human"`, the
//! agent's calls are refused while held, and the watchdog works again once the task is taken
//! back. Then what `Page.captureScreenshot` does while a dialog is open (measured), and the
//! thumbnail that follows the measured rule.
//!
//! Each test opens its own page in a browser context of its own (a page alone in its window is
//! visible, so it paints frames) from its own loopback [`HttpServer`], and closes it at the end
//! (also on panic, through [`Fixture`]'s `Drop`).

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::pages::attach_to_page;
use crate::common::{HttpServer, RawCdp, Response, wait_until};
use cdp_supervisor::{
    ClosedBy, Config, DialogAction, Error, Route, StartOptions, Supervisor, SupervisorRegistry,
    WaitUntil, tools,
};
use serde_json::{Value, json};

/// Deadline of the waits in these tests (generous: the machine is shared).
const T: Duration = Duration::from_secs(15);
/// The watchdog's time-out in these tests.
const WATCHDOG: Duration = Duration::from_secs(2);

const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>handover</title></head>
<body style="background:#2a6"><h1>A task a person can take over</h1></body></html>"#;

/// Schedules `call` and reports `{r: <what it returned>}` to `/report` once it returns.
fn trigger_expr(call: &str) -> String {
    format!(
        "setTimeout(() => {{ const r = {call}; \
         fetch('/report?' + encodeURIComponent(JSON.stringify({{r: r}}))); }}, 0); 'scheduled'"
    )
}

struct Fixture {
    server: HttpServer,
    cdp: RawCdp,
    page: String,
    session: String,
    reg: SupervisorRegistry,
    task: String,
    ws_url: String,
}

impl Fixture {
    fn open(ws_url: &str, task: &str) -> Fixture {
        let server = HttpServer::start(|req| match req.path.as_str() {
            "/" => Response::html(PAGE),
            _ => Response::not_found(),
        });
        let mut cdp = RawCdp::connect(ws_url).expect("connect a raw CDP client");
        let (page, session) = cdp
            .open_visible_page(&server.url("127.0.0.1", "/"), T)
            .expect("open the test page");
        Fixture {
            server,
            cdp,
            page,
            session,
            reg: SupervisorRegistry::new(Config::default()),
            task: task.to_string(),
            ws_url: ws_url.to_string(),
        }
    }

    /// Attaches this test's supervisor, `must_respond` with a `watchdog` time-out.
    fn attach(&self, watchdog: Duration) -> Arc<Supervisor> {
        attach_to_page(
            &self.reg,
            &self.task,
            &self.ws_url,
            &self.page,
            StartOptions::default().with_dialog_timeout(watchdog),
        )
    }

    fn trigger(&mut self, call: &str) {
        let v = self
            .cdp
            .evaluate(&self.session, &trigger_expr(call), T)
            .expect("schedule the dialog");
        assert_eq!(v, json!("scheduled"));
    }

    fn report(&self) -> Value {
        self.server.wait_report_json(T)["r"].clone()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.reg.stop_all();
        let _ = self.cdp.close_page(&self.page);
    }
}

fn pending_id(sup: &Supervisor) -> String {
    let d = sup.wait_for_dialog(T).expect("a dialog is pending");
    d.id
}

#[test]
fn a_held_task_keeps_its_dialog_past_the_watchdog_until_the_person_answers() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-handover");
    let sup = fx.attach(WATCHDOG);

    let held = sup.hand_over().expect("hand over");
    assert!(held.is_held() && sup.is_held());
    assert_eq!(held.holds, 1);
    assert_eq!(sup.hand_over().expect("again"), held, "idempotent");
    assert_eq!(sup.snapshot().to_json()["handover"]["held"], true);

    fx.trigger("prompt('Your name?', 'bob')");
    let id = pending_id(&sup);
    let opened = Instant::now();

    // The agent is refused, by every door, at once.
    let refused = |what: &str, r: Result<Value, Error>| match r {
        Err(Error::HeldByHuman { since, .. }) => assert_eq!(Some(since), held.held_since),
        other => panic!("{what} while held: {other:?}"),
    };
    refused(
        "call",
        sup.call(
            "Runtime.evaluate",
            json!({"expression": "1"}),
            Route::Page,
            T,
        ),
    );
    refused(
        "respond_to_dialog",
        sup.respond_to_dialog(DialogAction::Dismiss, None, None)
            .map(|_| Value::Null),
    );
    refused(
        "navigate",
        sup.navigate("about:blank", WaitUntil::Commit, T)
            .map(|_| Value::Null),
    );
    let mcp = tools::browser_cdp(&fx.reg, &fx.task, &json!({"method": "Page.reload"}));
    assert_eq!(mcp["success"], false, "{mcp}");
    assert!(
        mcp["error"]
            .as_str()
            .unwrap()
            .contains("a person holds task"),
        "{mcp}"
    );
    let mcp = tools::browser_dialog(&fx.reg, &fx.task, &json!({"action": "accept"}));
    assert_eq!(mcp["success"], false, "{mcp}");

    // Past the 2 s watchdog (and then some), the dialog still waits for the person.
    let dismissed = sup.wait_for(WATCHDOG + Duration::from_secs(1), |s| {
        s.pending_dialogs.is_empty()
    });
    assert!(dismissed.is_none(), "the dialog was closed while held");
    let waited = opened.elapsed();
    assert!(waited > WATCHDOG, "{waited:?}");
    eprintln!("held: the prompt stayed pending {waited:?} with a {WATCHDOG:?} watchdog");

    let answered = sup
        .respond_as_human(DialogAction::Accept, Some("alice"), None)
        .expect("the person answers");
    assert_eq!(answered.id, id);
    assert_eq!(
        fx.report(),
        json!("alice"),
        "the page's prompt() got the answer"
    );
    let closed = sup
        .wait_for(T, |s| s.closed_dialog(&id).is_some())
        .expect("recorded");
    let closed = closed.closed_dialog(&id).expect("closed");
    assert_eq!(closed.closed_by, ClosedBy::Human);
    assert_eq!(closed.to_json()["closed_by"], "human");

    // Taken back: the agent works again and the watchdog is back.
    let back = sup.take_back().expect("take back");
    assert!(!back.is_held() && back.held_since.is_none());
    assert!(back.ended_holds_s >= WATCHDOG.as_secs_f64(), "{back:?}");
    assert_eq!(sup.take_back().expect("again"), back, "idempotent");
    let two = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": "1+1", "returnByValue": true}),
            Route::Page,
            T,
        )
        .expect("the agent's call works again");
    assert_eq!(two["result"]["value"], 2);
    fx.trigger("confirm('Nobody answers')");
    let id = pending_id(&sup);
    assert_eq!(
        fx.report(),
        json!(false),
        "the watchdog dismissed the confirm"
    );
    let snap = sup
        .wait_for(T, |s| s.closed_dialog(&id).is_some())
        .expect("recorded");
    let c = snap.closed_dialog(&id).expect("closed");
    assert_eq!(c.closed_by, ClosedBy::Watchdog);
    let open_for = c.closed_at - c.dialog.opened_at;
    assert!(open_for >= 1.9, "dismissed after {open_for:.3} s");
    eprintln!("taken back: the watchdog dismissed the confirm after {open_for:.3} s");
    let h = snap.to_json()["handover"].clone();
    assert_eq!(
        (h["held"].clone(), h["holds"].clone()),
        (json!(false), json!(1))
    );
}

/// A dialog still pending when the task is taken back gets a fresh `dialog_timeout_s` from
/// then: the watchdog dismisses it about 2 s after the take-back, not at once.
#[test]
fn taking_back_a_task_with_a_pending_dialog_rearms_its_watchdog() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-handover-rearm");
    let sup = fx.attach(WATCHDOG);
    fx.trigger("alert('waits')");
    let id = pending_id(&sup);
    sup.hand_over().expect("hand over");
    // The watchdog armed at the opening is cancelled: past its time the alert is still open.
    assert!(
        sup.wait_for(WATCHDOG + Duration::from_millis(500), |s| s
            .pending_dialogs
            .is_empty())
            .is_none(),
        "dismissed while held"
    );
    let taken_back = now_epoch();
    sup.take_back().expect("take back");
    assert_eq!(fx.report(), Value::Null, "the alert returned (dismissed)");
    let snap = sup
        .wait_for(T, |s| s.closed_dialog(&id).is_some())
        .expect("recorded");
    let c = snap.closed_dialog(&id).expect("closed");
    assert_eq!(c.closed_by, ClosedBy::Watchdog);
    let after = c.closed_at - taken_back;
    assert!(after >= 1.8, "dismissed {after:.3} s after the take-back");
    eprintln!("re-armed: dismissed {after:.3} s after the take-back");
}

fn now_epoch() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Measured: `Page.captureScreenshot` sent while an alert is open gets no reply (no error, no
/// picture) until the alert closes; then it answers with the picture. So the thumbnail refuses
/// at once while a dialog is open, and works again once it is answered.
#[test]
fn screenshot_during_a_dialog_waits_for_the_dialog() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-thumbnail");
    // No watchdog answer during the measurement (it would close the alert).
    let sup = fx.attach(Duration::from_secs(120));

    let first = wait_until(T, || sup.thumbnail().ok()).expect("a thumbnail of the idle page");
    assert_eq!(&first.jpeg[..2], [0xFF, 0xD8], "a JPEG");
    assert!(first.width <= 320 && first.width >= 100, "{first:?}");
    assert!(
        first.height > 0 && first.height < first.width * 2,
        "{first:?}"
    );
    assert_eq!(first.target_id, fx.page);
    let again = sup.thumbnail().expect("the cached one");
    assert!(
        Arc::ptr_eq(&first, &again),
        "within a second: the same picture"
    );
    eprintln!(
        "thumbnail: {}x{} JPEG, {} bytes",
        first.width,
        first.height,
        first.jpeg.len()
    );

    fx.trigger("alert('cheese')");
    let id = pending_id(&sup);
    // The raw measurement, past the supervisor.
    let mut raw = RawCdp::connect(&fx.ws_url).expect("a second raw client");
    let sid = raw.attach(&fx.page).expect("attach");
    let shot = raw
        .send_command(
            "Page.captureScreenshot",
            json!({"format": "jpeg"}),
            Some(&sid),
        )
        .expect("send");
    let silent = Duration::from_secs(3);
    assert_eq!(
        reply_to(&mut raw, shot, silent),
        None,
        "Chromium answered Page.captureScreenshot while an alert was open: the thumbnail's \
         rule can change (src/supervisor/thumbnail.rs)"
    );
    assert_eq!(
        sup.snapshot().pending_dialogs.first().map(|d| d.id.clone()),
        Some(id.clone()),
        "the alert is still open"
    );

    // The thumbnail says why at once (its last capture is more than a second old: a fresh try).
    let t0 = Instant::now();
    let refused = match sup.thumbnail() {
        Err(Error::CannotCapture(why)) => (why, t0.elapsed()),
        other => panic!("a thumbnail while the alert is open: {other:?}"),
    };
    assert!(refused.0.contains("a dialog is open"), "{}", refused.0);
    assert!(refused.1 < Duration::from_millis(500), "{:?}", refused.1);

    let answered = Instant::now();
    sup.respond_as_human(DialogAction::Accept, None, Some(&id))
        .expect("answer");
    let late = reply_to(&mut raw, shot, T).expect("the screenshot is answered once the alert is");
    let after = answered.elapsed();
    assert!(
        late["result"]["data"]
            .as_str()
            .is_some_and(|d| d.len() > 100),
        "a picture: {late}"
    );
    assert_eq!(fx.report(), Value::Null, "the alert returned");
    eprintln!(
        "measured: Page.captureScreenshot with an alert open: no reply in {silent:?}, the \
         picture {after:?} after the alert was answered; the thumbnail was refused in {:?}: {}",
        refused.1, refused.0
    );
    let fresh = wait_until(T, || {
        sup.thumbnail().ok().filter(|t| !Arc::ptr_eq(t, &first))
    })
    .expect("a new thumbnail once the alert is answered");
    assert!(fresh.taken_at > first.taken_at);
}

/// The reply to command `id` on `raw`, waiting up to `within`; `None` when none came.
fn reply_to(raw: &mut RawCdp, id: u64, within: Duration) -> Option<Value> {
    let deadline = Instant::now() + within;
    loop {
        match raw.next_message(deadline.saturating_duration_since(Instant::now())) {
            Ok(Some(m)) if m["id"] == id => return Some(m),
            Ok(Some(_)) => {} // an event
            Ok(None) => return None,
            Err(e) => panic!("reading the raw client: {e}"),
        }
    }
}
