//! Navigation that never waits on a dialog (issue 31.3), on real Chromium: `Supervisor::navigate`
//! and the `browser_navigate` tool return the frame and loader ids, stop within 1 s when a dialog
//! opens before the navigation is done (an alert while the new page loads, the `beforeunload` of
//! the page being left), and a second wait for the same navigation completes once the dialog is
//! answered; network errors are named; the security policy judges the URL.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{HttpServer, Response};
use cdp_supervisor::{
    Config, DialogAction, DialogKind, Error, Route, StartOptions, Supervisor, SupervisorRegistry,
    WaitUntil, tools,
};
use serde_json::json;

const T: Duration = Duration::from_secs(10);
/// A navigation's deadline in these tests: far above what a dialog may cost it (1 s).
const LONG: Duration = Duration::from_secs(30);

fn server() -> HttpServer {
    HttpServer::start(|req| match req.path.as_str() {
        "/plain" => Response::html("<!doctype html><title>plain</title><p>plain</p>"),
        "/slow.png" => {
            // The load event waits for it.
            std::thread::sleep(Duration::from_millis(1500));
            Response::text("").with_header("X-Slow", "1")
        }
        "/with-slow-image" => {
            Response::html("<!doctype html><title>slow</title><img src=\"/slow.png\">")
        }
        "/alerts-while-loading" => Response::html(
            "<!doctype html><title>alerting</title><script>alert('loading');</script>\
             <p id=after>after the alert</p>",
        ),
        "/leave-me" => Response::html(
            "<!doctype html><title>leave</title><script>\
             addEventListener('beforeunload', e => { e.preventDefault(); e.returnValue = ''; });\
             </script>",
        ),
        _ => Response::not_found(),
    })
}

fn start(reg: &SupervisorRegistry, task: &str, ws: &str) -> Arc<Supervisor> {
    reg.get_or_start_with(task, ws, StartOptions::default().with_own_page(true))
        .expect("start on a page of its own")
}

fn eval(sup: &Supervisor, expr: &str) -> serde_json::Value {
    let r = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "userGesture": true}),
            Route::Page,
            T,
        )
        .unwrap_or_else(|e| panic!("{expr}: {e}"));
    r["result"]["value"].clone()
}

#[test]
fn navigate_returns_frame_and_loader_and_commit_does_not_wait_for_load() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let srv = server();
    let reg = SupervisorRegistry::new(Config::default());
    let sup = start(&reg, "nav-basic", &browser.ws_url);
    let page = sup.snapshot().page_target_id.clone().expect("its page");

    let url = srv.url("127.0.0.1", "/plain");
    let nav = sup
        .navigate(&url, WaitUntil::Load, LONG)
        .expect("navigate to a plain page");
    assert_eq!(nav.frame_id, page, "the main frame's id is the page's");
    let loader = nav.loader_id.clone().expect("a loader id");
    assert!(!loader.is_empty());
    assert_eq!(eval(&sup, "document.readyState"), "complete");
    assert_eq!(eval(&sup, "location.href"), json!(url));

    // commit returns before the slow image lets the load event fire; load waits for it.
    let slow = srv.url("127.0.0.1", "/with-slow-image");
    let t = Instant::now();
    let nav = sup
        .navigate(&slow, WaitUntil::Commit, LONG)
        .expect("commit");
    let commit_took = t.elapsed();
    assert_ne!(nav.loader_id.as_deref(), Some(loader.as_str()));
    let state = eval(&sup, "document.readyState");
    let loaded = sup
        .wait_for_navigation(WaitUntil::Load, LONG)
        .expect("the same navigation, to its load");
    let load_took = t.elapsed();
    eprintln!("commit after {commit_took:?} (readyState {state}), load after {load_took:?}");
    assert_eq!(loaded.loader_id, nav.loader_id, "the same navigation");
    assert_ne!(state, "complete", "commit did not wait for the image");
    assert!(load_took >= Duration::from_millis(1400), "{load_took:?}");
    assert_eq!(eval(&sup, "document.readyState"), "complete");

    // The tool: the same shape, with its schema's fields.
    let out = tools::browser_navigate(
        &reg,
        "nav-basic",
        &json!({"url": url, "wait_until": "commit"}),
    );
    assert_eq!(out["success"], true, "{out}");
    assert_eq!(out["frame_id"], json!(page), "{out}");
    assert!(out["loader_id"].is_string(), "{out}");
    let out = tools::browser_navigate(
        &reg,
        "nav-basic",
        &json!({"url": url, "wait_until": "soon"}),
    );
    assert_eq!(out["success"], false, "{out}");
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .contains("\"commit\" or \"load\""),
        "{out}"
    );
    reg.stop_all();
}

#[test]
fn an_alert_while_the_page_loads_ends_the_navigation_within_a_second_and_a_second_wait_completes() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let srv = server();
    let reg = SupervisorRegistry::new(Config::default());
    let sup = start(&reg, "nav-alert", &browser.ws_url);
    let url = srv.url("127.0.0.1", "/alerts-while-loading");
    let t = Instant::now();
    let err = sup
        .navigate(&url, WaitUntil::Load, LONG)
        .expect_err("the alert stops the wait");
    let took = t.elapsed();
    eprintln!("navigate returned after {took:?}: {err}");
    let Error::BlockedByDialog { dialog, .. } = &err else {
        panic!("not BlockedByDialog: {err:?}");
    };
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(
        (&dialog.kind, dialog.message.as_str()),
        (&DialogKind::Alert, "loading")
    );
    assert!(err.to_string().contains(&dialog.id), "{err}");
    // Still loading: the alert holds the parser.
    assert!(
        sup.wait_for_navigation(WaitUntil::Load, Duration::from_millis(300))
            .is_err()
    );

    sup.respond_to_dialog(DialogAction::Accept, None, Some(&dialog.id))
        .expect("answer the alert");
    let t = Instant::now();
    let nav = sup
        .wait_for_navigation(WaitUntil::Load, LONG)
        .expect("the same navigation completes");
    eprintln!("the second wait completed after {:?}", t.elapsed());
    assert_eq!(nav.url, url);
    assert_eq!(
        nav.loader_id,
        sup.snapshot().document_loader().map(str::to_string)
    );
    assert_eq!(
        eval(&sup, "document.getElementById('after').textContent"),
        "after the alert"
    );

    // The tool says the same: blocked_by_dialog names the dialog.
    let t = Instant::now();
    let out = tools::browser_navigate(&reg, "nav-alert", &json!({"url": url}));
    let took = t.elapsed();
    assert_eq!(out["success"], false, "{out}");
    assert_eq!(out["blocked_by_dialog"]["message"], "loading", "{out}");
    assert_eq!(out["pending_dialogs"][0]["type"], "alert", "{out}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    reg.stop_all();
}

#[test]
fn a_beforeunload_of_the_page_being_left_ends_the_navigation_at_once() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let srv = server();
    let reg = SupervisorRegistry::new(Config::default());
    let sup = start(&reg, "nav-beforeunload", &browser.ws_url);
    let leave = srv.url("127.0.0.1", "/leave-me");
    let plain = srv.url("127.0.0.1", "/plain");
    sup.navigate(&leave, WaitUntil::Load, LONG)
        .expect("open the page with a beforeunload handler");
    // Dismissed: the page stays; then accepted: the navigation goes on.
    for accept in [false, true] {
        // beforeunload only fires after a user gesture on the page.
        eval(&sup, "document.body.click(); 1");
        let t = Instant::now();
        let err = sup
            .navigate(&plain, WaitUntil::Load, LONG)
            .expect_err("beforeunload stops the navigation");
        let took = t.elapsed();
        eprintln!("accept={accept}: navigate returned after {took:?}: {err}");
        let Error::BlockedByDialog { dialog, .. } = &err else {
            panic!("not BlockedByDialog: {err:?}");
        };
        assert_eq!(dialog.kind, DialogKind::BeforeUnload);
        assert!(took < Duration::from_secs(1), "{took:?}");
        let action = if accept {
            DialogAction::Accept
        } else {
            DialogAction::Dismiss
        };
        sup.respond_to_dialog(action, None, Some(&dialog.id))
            .expect("answer beforeunload");
        common::pages::wait_closed(&sup, T, &dialog.id);
        let second = sup.wait_for_navigation(WaitUntil::Load, LONG);
        if accept {
            let nav = second.expect("the navigation goes on");
            assert_eq!(nav.url, plain);
            assert_eq!(eval(&sup, "location.href"), json!(plain));
        } else {
            let e = second.expect_err("the page stayed");
            assert!(
                matches!(&e, Error::NavigationFailed { .. }) && e.to_string().contains("stayed"),
                "{e}"
            );
            assert_eq!(eval(&sup, "location.href"), json!(leave));
        }
    }
    reg.stop_all();
}

#[test]
fn network_errors_are_named_and_the_policy_judges_the_url() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let srv = server();
    let reg = SupervisorRegistry::new(Config::default());
    let sup = start(&reg, "nav-errors", &browser.ws_url);
    let plain = srv.url("127.0.0.1", "/plain");
    sup.navigate(&plain, WaitUntil::Load, LONG).expect("plain");

    let refused_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        l.local_addr().expect("its address").port()
    };
    for (url, net) in [
        (
            format!("http://127.0.0.1:{refused_port}/"),
            "net::ERR_CONNECTION_REFUSED",
        ),
        (
            "http://no-such-host.invalid/".to_string(),
            "net::ERR_NAME_NOT_RESOLVED",
        ),
    ] {
        let t = Instant::now();
        let e = sup
            .navigate(&url, WaitUntil::Load, LONG)
            .expect_err("a network error");
        eprintln!("{url}: {e} after {:?}", t.elapsed());
        let Error::NavigationFailed { error, .. } = &e else {
            panic!("not NavigationFailed: {e:?}");
        };
        assert_eq!(error, net, "{e}");
        assert!(e.to_string().contains(net), "{e}");
        let out = tools::browser_navigate(&reg, "nav-errors", &json!({"url": url}));
        assert_eq!(out["navigation_error"], net, "{out}");
    }

    // Refused before it reaches the browser: the page stays where it was.
    sup.navigate(&plain, WaitUntil::Load, LONG).expect("plain");
    for url in [
        "file:///etc/passwd",
        " FILE:///etc/hostname",
        "chrome://version",
    ] {
        let e = sup
            .navigate(url, WaitUntil::Load, LONG)
            .expect_err("refused");
        assert!(matches!(&e, Error::Refused { .. }), "{url}: {e:?}");
        let out = tools::browser_navigate(&reg, "nav-errors", &json!({"url": url}));
        assert!(
            out["refused_by"] == "security.allow_file_urls"
                || out["refused_by"] == "security.allow_page_protocol",
            "{out}"
        );
    }
    assert_eq!(eval(&sup, "location.href"), json!(plain));
    reg.stop_all();
}
