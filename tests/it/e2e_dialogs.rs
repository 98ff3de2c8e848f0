//! End-to-end tests of native JavaScript dialogs against a real headless Chromium
//! (SPEC §3-§5, §10, §11).
//!
//! One Chromium per test binary ([`common::shared_browser`]); every test opens its own page from
//! its own loopback [`HttpServer`], attaches its own supervisor (own task id) to that page, and
//! closes the page when it ends (also on panic, through [`Fixture`]'s `Drop`).
//!
//! Dialogs are raised without blocking the trigger: the expression only schedules the dialog with
//! `setTimeout(.., 0)`; when the dialog returns, the page reports
//! `JSON.stringify({at: location.pathname, r})` to `/report`, so each test asserts exactly what the
//! page's JavaScript received.
//!
//! Tests skip (printing `SKIPPED: no Chromium`) when no Chromium is installed, unless
//! `CDP_SUPERVISOR_E2E=require`.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use crate::common::pages::{self, attach_to_page, wait_pick};
use crate::common::{HttpServer, RawCdp, Response, js, wait_until};
use cdp_supervisor::{
    BridgeMode, ClosedBy, ClosedDialog, Config, DialogAction, DialogPolicy, Error, PendingDialog,
    Route, StartOptions, Supervisor, SupervisorRegistry, tools,
};
use serde_json::{Value, json};

/// Deadline of every wait in these tests.
const T: Duration = Duration::from_secs(10);

const MAIN_PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>dialogs main</title></head>
<body><p>main</p></body></html>"#;

const PARENT_PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>dialogs parent</title></head>
<body><p>parent</p><iframe id="child" name="kid" src="/child"></iframe></body></html>"#;

const CHILD_PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>dialogs child</title></head>
<body><p>child</p></body></html>"#;

/// An expression that schedules `call` (e.g. `confirm('Sure?')`) on a fresh task and reports
/// `{at: location.pathname, r: <what it returned>}` once it returns. It evaluates at once.
fn trigger_expr(call: &str) -> String {
    format!(
        "setTimeout(() => {{ const r = {call}; \
         fetch('/report?' + encodeURIComponent(JSON.stringify({{at: location.pathname, r: r}}))); \
         }}, 0); 'scheduled'"
    )
}

/// One test's page, server, raw CDP client and registry. Dropping it stops the supervisors and
/// closes the page.
struct Fixture {
    server: HttpServer,
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
    /// Serves `/` (`root_html`) and `/child`, opens `/` in a new page and waits for it to load.
    fn open(ws_url: &str, task: &str, root_html: &'static str) -> Fixture {
        let server = HttpServer::start(move |req| match req.path.as_str() {
            "/" => Response::html(root_html),
            "/child" => Response::html(CHILD_PAGE),
            _ => Response::not_found(),
        });
        let mut cdp = RawCdp::connect(ws_url).expect("connect a raw CDP client");
        let (page, session) = cdp
            .open_page(&server.url("127.0.0.1", "/"), T)
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

    /// Attaches this test's supervisor to this test's page.
    fn attach(&self, options: StartOptions) -> Arc<Supervisor> {
        attach_to_page(&self.reg, &self.task, &self.ws_url, &self.page, options)
    }

    /// Schedules `call` in the main frame through the raw client.
    fn trigger(&mut self, call: &str) {
        let v = self
            .cdp
            .evaluate(&self.session, &trigger_expr(call), T)
            .expect("schedule the dialog");
        assert_eq!(v, json!("scheduled"));
    }

    /// The next report of the page, parsed: `{"at": path, "r": value}`.
    fn report(&self) -> Value {
        self.server.wait_report_json(T)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.reg.stop_all();
        let _ = self.cdp.close_page(&self.page);
    }
}

/// Waits until exactly one dialog is pending and returns it.
fn wait_pending(sup: &Supervisor) -> PendingDialog {
    wait_pick(sup, T, "a single pending dialog", |s| {
        match &*s.pending_dialogs {
            [d] => Some(d.clone()),
            _ => None,
        }
    })
}

/// Waits until dialog `id` is in `recent_dialogs` and no longer pending; returns its record.
fn wait_closed(sup: &Supervisor, id: &str) -> ClosedDialog {
    pages::wait_closed(sup, T, id)
}

/// Waits until some dialog of `kind` appears in `recent_dialogs`; returns its record.
fn wait_closed_kind(sup: &Supervisor, kind: &str) -> Arc<ClosedDialog> {
    wait_pick(sup, T, &format!("a closed {kind} in recent_dialogs"), |s| {
        s.recent_dialogs
            .iter()
            .rev()
            .find(|c| c.dialog.kind == kind)
            .cloned()
    })
}

/// The id of the only child frame of the page, from an independent `Page.getFrameTree`.
fn child_frame_id(fx: &mut Fixture) -> String {
    let tree = fx
        .cdp
        .call("Page.getFrameTree", json!({}), Some(&fx.session), T)
        .expect("Page.getFrameTree");
    assert_eq!(tree["frameTree"]["frame"]["id"], json!(fx.page));
    let children = tree["frameTree"]["childFrames"]
        .as_array()
        .expect("the page has child frames");
    assert_eq!(children.len(), 1, "one iframe: {tree}");
    children[0]["frame"]["id"]
        .as_str()
        .expect("child frame id")
        .to_string()
}

// ---------------------------------------------------------------------------------------------

#[test]
fn alert_on_main_frame_is_detected_answered_and_recorded_as_agent() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-alert-main", MAIN_PAGE);
    let sup = fx.attach(StartOptions::default());
    assert!(sup.snapshot().pending_dialogs.is_empty());

    fx.trigger("(alert('Hello ✓ from main'), 'after-alert')");
    let d = wait_pending(&sup);
    assert_eq!(d.kind, "alert");
    assert_eq!(d.message, "Hello ✓ from main");
    assert_eq!(d.default_prompt, "");
    assert_eq!(
        d.frame_id.as_deref(),
        Some(fx.page.as_str()),
        "the main frame's id equals the page target id"
    );
    assert_eq!(d.id, "d-1", "dialog ids start at d-1 per supervisor");
    assert!(d.opened_at > 1.6e9, "opened_at is Unix epoch seconds");
    // The snapshot JSON shows it with the §10 shape.
    let j = sup.snapshot().to_json();
    assert_eq!(j["pending_dialogs"][0]["type"], "alert");
    assert_eq!(j["pending_dialogs"][0]["frame_id"], json!(fx.page));

    let answered = sup
        .respond_to_dialog(DialogAction::Accept, None, None)
        .expect("accepting the alert succeeds");
    assert_eq!(answered.id, d.id);

    assert_eq!(
        fx.report(),
        json!({"at": "/", "r": "after-alert"}),
        "the page continued after the alert"
    );
    let closed = wait_closed(&sup, &d.id);
    assert_eq!(closed.closed_by, ClosedBy::Agent);
    assert_eq!(closed.dialog.kind, "alert");
    assert!(closed.closed_at >= closed.dialog.opened_at);
    assert!(sup.snapshot().pending_dialogs.is_empty());
    let j = sup.snapshot().to_json();
    assert_eq!(j["recent_dialogs"][0]["closed_by"], "agent");
}

#[test]
fn confirm_accept_gives_true_and_dismiss_gives_false() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-confirm", MAIN_PAGE);
    let sup = fx.attach(StartOptions::default());

    fx.trigger("confirm('Proceed?')");
    let d = wait_pending(&sup);
    assert_eq!(
        (d.kind.as_str(), d.message.as_str()),
        ("confirm", "Proceed?")
    );
    sup.respond_to_dialog(DialogAction::Accept, None, Some(&d.id))
        .expect("accept the confirm");
    assert_eq!(fx.report(), json!({"at": "/", "r": true}));
    assert_eq!(wait_closed(&sup, &d.id).closed_by, ClosedBy::Agent);

    fx.trigger("confirm('Really?')");
    let d2 = wait_pending(&sup);
    assert_ne!(d2.id, d.id, "each dialog gets a fresh id");
    assert_eq!(d2.message, "Really?");
    sup.respond_to_dialog(DialogAction::Dismiss, None, None)
        .expect("dismiss the confirm");
    assert_eq!(fx.report(), json!({"at": "/", "r": false}));
    assert_eq!(wait_closed(&sup, &d2.id).closed_by, ClosedBy::Agent);
}

#[test]
fn prompt_accept_with_text_dismiss_and_accept_with_default() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-prompt", MAIN_PAGE);
    let sup = fx.attach(StartOptions::default());
    let call = format!("prompt({}, {})", js("Your name?"), js("default"));

    // Accepted with non-ASCII text and quotes: the page gets exactly that string.
    let text = "Zoë 日本語 ✓ \"quotes\"";
    fx.trigger(&call);
    let d = wait_pending(&sup);
    assert_eq!(d.kind, "prompt");
    assert_eq!(d.message, "Your name?");
    assert_eq!(d.default_prompt, "default");
    sup.respond_to_dialog(DialogAction::Accept, Some(text), None)
        .expect("accept the prompt with text");
    assert_eq!(fx.report(), json!({"at": "/", "r": text}));
    assert_eq!(wait_closed(&sup, &d.id).closed_by, ClosedBy::Agent);

    // Dismissed: the page gets null.
    fx.trigger(&call);
    let d = wait_pending(&sup);
    sup.respond_to_dialog(DialogAction::Dismiss, None, None)
        .expect("dismiss the prompt");
    assert_eq!(fx.report(), json!({"at": "/", "r": null}));
    assert_eq!(wait_closed(&sup, &d.id).closed_by, ClosedBy::Agent);

    // Accepted without text: the page gets the prompt's default, as pressing OK would.
    fx.trigger(&call);
    let d = wait_pending(&sup);
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .expect("accept the prompt without text");
    assert_eq!(fx.report(), json!({"at": "/", "r": "default"}));
    assert_eq!(wait_closed(&sup, &d.id).closed_by, ClosedBy::Agent);
}

#[test]
fn dialogs_from_same_origin_iframe_carry_the_iframe_frame_id() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-iframe", PARENT_PAGE);
    let sup = fx.attach(StartOptions::default());
    let child = child_frame_id(&mut fx);
    assert_ne!(child, fx.page);

    // The supervisor's frame tree knows the same-origin child (same process: no session).
    let entry = wait_pick(
        &sup,
        T,
        &format!("child frame {child} in frame_tree"),
        |s| {
            s.frame_tree
                .children
                .iter()
                .find(|f| f.frame_id == child)
                .cloned()
        },
    );
    assert_eq!(entry.parent_frame_id.as_deref(), Some(fx.page.as_str()));
    assert!(!entry.is_oopif);
    assert_eq!(entry.session_id, None);

    // 1. A confirm raised by the child's own JS (evaluated in the child's realm from the parent).
    let in_child = format!(
        "document.getElementById('child').contentWindow.eval({})",
        js(&trigger_expr("confirm('From the child?')"))
    );
    let v = fx
        .cdp
        .evaluate(&fx.session, &in_child, T)
        .expect("schedule the child's confirm");
    assert_eq!(v, json!("scheduled"));
    let d = wait_pending(&sup);
    assert_eq!(d.kind, "confirm");
    assert_eq!(d.message, "From the child?");
    assert_eq!(
        d.frame_id.as_deref(),
        Some(child.as_str()),
        "the dialog carries the iframe's frame id, not the main frame's"
    );
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .expect("accept the child's confirm");
    assert_eq!(
        fx.report(),
        json!({"at": "/child", "r": true}),
        "the iframe's JS got the answer"
    );
    assert_eq!(wait_closed(&sup, &d.id).closed_by, ClosedBy::Agent);

    // 2. A prompt scheduled in the child through the supervisor's own frame routing (§8).
    let scheduled = wait_until(T, || {
        match sup.call(
            "Runtime.evaluate",
            json!({"expression": trigger_expr("prompt('Child name?', 'kid')"), "returnByValue": true}),
            Route::Frame(&child),
            T,
        ) {
            Ok(v) => Some(v),
            // The child's default context may not be known yet right after attaching.
            Err(Error::InvalidArgument(m)) if m.contains("no JavaScript context yet") => None,
            Err(e) => panic!("Runtime.evaluate routed to frame {child} failed: {e}"),
        }
    })
    .expect("the child's execution context became known");
    assert_eq!(scheduled["result"]["value"], json!("scheduled"));
    let d = wait_pending(&sup);
    assert_eq!(d.kind, "prompt");
    assert_eq!(d.default_prompt, "kid");
    assert_eq!(d.frame_id.as_deref(), Some(child.as_str()));
    sup.respond_to_dialog(DialogAction::Accept, Some("child text ✓"), Some(&d.id))
        .expect("accept the child's prompt");
    assert_eq!(fx.report(), json!({"at": "/child", "r": "child text ✓"}));
    let closed = wait_closed(&sup, &d.id);
    assert_eq!(closed.closed_by, ClosedBy::Agent);
    assert_eq!(closed.dialog.frame_id.as_deref(), Some(child.as_str()));
}

#[test]
fn tool_handler_answers_prompt_and_reports_no_dialog_afterwards() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-tool", MAIN_PAGE);
    let sup = fx.attach(StartOptions::default());
    let task = fx.task.clone();

    fx.trigger("prompt('Tool prompt?', 'default')");
    let d = wait_pending(&sup);
    let snap = tools::browser_snapshot(&fx.reg, &task, &json!({}));
    assert_eq!(snap["pending_dialogs"][0]["id"], json!(d.id), "{snap}");
    assert_eq!(snap["pending_dialogs"][0]["type"], "prompt");
    assert_eq!(snap["pending_dialogs"][0]["message"], "Tool prompt?");
    assert_eq!(snap["pending_dialogs"][0]["default_prompt"], "default");
    assert_eq!(snap["page_target_id"], json!(fx.page));

    let out = tools::browser_dialog(
        &fx.reg,
        &task,
        &json!({"action": "accept", "prompt_text": "via tool"}),
    );
    assert_eq!(out["success"], json!(true), "{out}");
    assert_eq!(out["action"], "accept", "{out}");
    assert_eq!(out["dialog"]["id"], json!(d.id), "{out}");
    assert_eq!(out["dialog"]["type"], "prompt", "{out}");
    assert_eq!(out["dialog"]["message"], "Tool prompt?", "{out}");
    assert_eq!(out["dialog"]["frame_id"], json!(fx.page), "{out}");
    assert_eq!(fx.report(), json!({"at": "/", "r": "via tool"}));
    assert_eq!(wait_closed(&sup, &d.id).closed_by, ClosedBy::Agent);

    let again = tools::browser_dialog(&fx.reg, &task, &json!({"action": "accept"}));
    assert_eq!(again["success"], json!(false), "{again}");
    let err = again["error"].as_str().expect("an error message");
    assert!(
        err.to_lowercase().contains("no dialog"),
        "error should say no dialog is open: {err:?}"
    );

    let snap = tools::browser_snapshot(&fx.reg, &task, &json!({}));
    assert_eq!(snap["pending_dialogs"], json!([]), "{snap}");
    assert_eq!(snap["recent_dialogs"][0]["id"], json!(d.id), "{snap}");
    assert_eq!(snap["recent_dialogs"][0]["closed_by"], "agent", "{snap}");
}

#[test]
fn auto_dismiss_policy_answers_confirm_false_at_once() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-auto-dismiss", MAIN_PAGE);
    let sup = fx.attach(StartOptions::default().with_dialog_policy(DialogPolicy::AutoDismiss));

    fx.trigger("confirm('Auto dismiss me?')");
    assert_eq!(fx.report(), json!({"at": "/", "r": false}));
    let closed = wait_closed_kind(&sup, "confirm");
    assert_eq!(closed.closed_by, ClosedBy::AutoPolicy);
    assert_eq!(closed.dialog.message, "Auto dismiss me?");
    assert!(sup.snapshot().pending_dialogs.is_empty());

    fx.trigger("prompt('Auto dismiss prompt?', 'default')");
    assert_eq!(fx.report(), json!({"at": "/", "r": null}));
    assert_eq!(
        wait_closed_kind(&sup, "prompt").closed_by,
        ClosedBy::AutoPolicy
    );
}

#[test]
fn auto_accept_policy_gives_prompt_its_default_and_confirm_true() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-auto-accept", MAIN_PAGE);
    let sup = fx.attach(StartOptions::default().with_dialog_policy(DialogPolicy::AutoAccept));

    fx.trigger("prompt('Auto accept prompt?', 'default')");
    assert_eq!(
        fx.report(),
        json!({"at": "/", "r": "default"}),
        "auto_accept must give a prompt its default text (§5, §11)"
    );
    let closed = wait_closed_kind(&sup, "prompt");
    assert_eq!(closed.closed_by, ClosedBy::AutoPolicy);
    assert_eq!(closed.dialog.default_prompt, "default");

    fx.trigger("confirm('Auto accept confirm?')");
    assert_eq!(fx.report(), json!({"at": "/", "r": true}));
    assert_eq!(
        wait_closed_kind(&sup, "confirm").closed_by,
        ClosedBy::AutoPolicy
    );
    assert!(sup.snapshot().pending_dialogs.is_empty());
}

#[test]
fn dialog_closed_by_another_cdp_client_is_recorded_remote() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-remote", MAIN_PAGE);
    // The bridge's `auto` mode would read a fast remote close as a proxy signature (§6); this
    // test is about the native path only.
    let sup = fx.attach(StartOptions::default().with_dialog_bridge(BridgeMode::Off));

    // A second client, independent of the supervisor and of the page's opener.
    let mut remote = RawCdp::connect(&browser.ws_url).expect("connect the second client");
    let rsid = remote.attach(&fx.page).expect("attach the second client");
    remote
        .call("Page.enable", json!({}), Some(&rsid), T)
        .expect("Page.enable on the second client");

    fx.trigger("confirm('Who answers?')");
    let d = wait_pending(&sup);
    assert_eq!(d.kind, "confirm");
    remote
        .call(
            "Page.handleJavaScriptDialog",
            json!({"accept": true}),
            Some(&rsid),
            T,
        )
        .expect("the second client answers the dialog");
    assert_eq!(fx.report(), json!({"at": "/", "r": true}));

    let closed = wait_closed(&sup, &d.id);
    assert_eq!(closed.closed_by, ClosedBy::Remote);
    assert_eq!(
        closed.accepted,
        Some(true),
        "javascriptDialogClosed said accepted"
    );
    assert_eq!(
        sup.snapshot().to_json()["recent_dialogs"][0]["closed_by"],
        "remote"
    );

    // Answering afterwards fails cleanly.
    match sup.respond_to_dialog(DialogAction::Accept, None, None) {
        Err(Error::NoDialog) => {}
        other => panic!("expected NoDialog after a remote close, got {other:?}"),
    }
    match sup.respond_to_dialog(DialogAction::Dismiss, None, Some(&d.id)) {
        Err(Error::DialogAlreadyClosed { id, closed_by, .. }) => {
            assert_eq!(id, d.id);
            assert_eq!(closed_by, ClosedBy::Remote);
        }
        other => panic!("expected DialogAlreadyClosed for {}, got {other:?}", d.id),
    }
    let out = tools::browser_dialog(&fx.reg, &fx.task, &json!({"action": "dismiss"}));
    assert_eq!(out["success"], json!(false), "{out}");
    // The supervisor is still healthy.
    assert!(sup.is_alive());
    assert_eq!(
        sup.call(
            "Runtime.evaluate",
            json!({"expression": "6*7", "returnByValue": true}),
            Route::Target(&fx.page),
            T,
        )
        .expect("evaluate after the remote close")["result"]["value"],
        json!(42)
    );
    let _ = remote.call("Page.disable", json!({}), Some(&rsid), T);
}

#[test]
fn stop_with_pending_dialog_dismisses_it_and_leaves_page_usable() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-stop", MAIN_PAGE);
    let sup = fx.attach(StartOptions::default());

    fx.trigger("confirm('Left open at stop?')");
    let d = wait_pending(&sup);
    assert_eq!(d.kind, "confirm");
    drop(sup);

    let started = std::time::Instant::now();
    assert!(fx.reg.stop(&fx.task), "there was a supervisor to stop");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "stop returned in {:?}",
        started.elapsed()
    );
    assert!(fx.reg.get(&fx.task).is_none());
    assert!(fx.reg.snapshot(&fx.task).is_none());

    assert_eq!(
        fx.report(),
        json!({"at": "/", "r": false}),
        "stop dismissed the pending confirm"
    );

    // A brand-new client can use the page: it is not wedged.
    let mut fresh = RawCdp::connect(&browser.ws_url).expect("connect a fresh client");
    let sid = fresh.attach(&fx.page).expect("attach the fresh client");
    let two = fresh
        .evaluate(&sid, "1+1", Duration::from_secs(5))
        .expect("the page evaluates within 5 s after stop");
    assert_eq!(two, json!(2));
}

#[test]
fn watchdog_dismisses_unanswered_alert_on_real_chromium() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let mut fx = Fixture::open(&browser.ws_url, "e2e-watchdog", MAIN_PAGE);
    let sup = fx.attach(StartOptions::default().with_dialog_timeout(Duration::from_millis(300)));

    fx.trigger("(alert('Nobody answers'), 'after-alert')");
    assert_eq!(
        fx.report(),
        json!({"at": "/", "r": "after-alert"}),
        "the watchdog dismissed the alert and the page continued"
    );
    let closed = wait_closed_kind(&sup, "alert");
    assert_eq!(closed.closed_by, ClosedBy::Watchdog);
    assert_eq!(closed.dialog.message, "Nobody answers");
    let open_for = closed.closed_at - closed.dialog.opened_at;
    assert!(
        open_for >= 0.25,
        "the watchdog fired only after the time-out (was open {open_for:.3} s)"
    );
    assert!(sup.snapshot().pending_dialogs.is_empty());
    match sup.respond_to_dialog(DialogAction::Accept, None, Some(&closed.dialog.id)) {
        Err(Error::DialogAlreadyClosed { closed_by, .. }) => {
            assert_eq!(closed_by, ClosedBy::Watchdog)
        }
        other => panic!("expected DialogAlreadyClosed, got {other:?}"),
    }
}
