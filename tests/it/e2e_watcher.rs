//! The registry's popup watcher going away, on real Chromium (issue 24): its tasks follow their
//! popups themselves from then on, and keep doing so on every connection after a reconnect.
//!
//! A private Chromium (the watcher's browser-level auto-attach would see every other test's
//! pages) behind a TCP proxy that can cut one connection: the task's connection is the first the
//! proxy accepts, then the registry's `/json/version` request (is this the browser's own
//! endpoint?), then the popup watcher's.

use crate::common;
use cdp_supervisor::StartRequest;

use std::time::Duration;

use crate::common::cut_proxy::CutProxy;
use crate::common::pages::{wait_pick, wait_set_up};
use crate::common::{Browser, HttpServer, RawCdp, Response, procs};
use cdp_supervisor::unversioned::follows_popups_itself;
use cdp_supervisor::{
    Config, DialogAction, PendingDialog, Route, StartOptions, Supervisor, SupervisorRegistry,
    SupervisorState,
};
use serde_json::json;

const T: Duration = Duration::from_secs(10);

/// Has the task's page open `popup_url` (a page that alerts `message` on load) and waits for
/// that alert to be pending.
fn popup_alert(sup: &Supervisor, popup_url: &str, message: &str) -> PendingDialog {
    let opened = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": format!("window.open({}) ? 1 : 0", common::js(popup_url)),
                   "userGesture": true, "returnByValue": true}),
            Route::Page,
            T,
        )
        .expect("window.open from the task's page");
    assert_eq!(opened["result"]["value"], 1, "{opened}");
    wait_pick(sup, T, "the popup's alert", |s| {
        s.pending_dialogs
            .iter()
            .find(|d| d.message == message)
            .cloned()
    })
}

#[test]
fn a_task_whose_popup_watcher_has_gone_follows_its_popups_after_a_reconnect() {
    if common::shared_browser().is_none() {
        return;
    }
    let browser = Browser::launch().expect("launch a Chromium");
    let (proxy, url) = CutProxy::in_front_of(&browser.ws_url);
    let srv = HttpServer::start(|req| match req.path.as_str() {
        "/popup" => Response::html(
            "<!doctype html><title>popup</title><script>alert('after the reconnect')</script>",
        ),
        _ => Response::not_found(),
    });
    let reg = SupervisorRegistry::new(Config::default());
    let sup = reg
        .start(
            StartRequest::new("watcher-gone", &url)
                .with_options(StartOptions::default().with_new_page(true)),
        )
        .expect("start with a page of its own");
    let page = sup.snapshot().page_target_id.clone().expect("its page");
    assert_eq!(
        proxy.count(),
        3,
        "the task's connection, the discovery request, then the popup watcher's"
    );
    assert!(!follows_popups_itself(&sup), "the watcher serves it");

    proxy.cut(2);
    common::wait_until(T, || follows_popups_itself(&sup).then_some(()))
        .expect("the task follows its popups itself once the watcher has gone");
    proxy.cut(0);
    common::wait_until(T, || {
        (proxy.count() >= 4 && sup.snapshot().state == SupervisorState::Active).then_some(())
    })
    .expect("the task reconnected and re-attached to its page");
    assert_eq!(proxy.count(), 4, "no new watcher");

    let d = popup_alert(&sup, &srv.url("127.0.0.1", "/popup"), "after the reconnect");
    assert_ne!(d.target_id, page, "the alert is the popup's");
    let snap = sup.snapshot();
    assert!(
        snap.pages
            .iter()
            .any(|p| p.target_id == d.target_id && p.opener_target_id.as_deref() == Some(&page)),
        "the popup is followed: {}",
        snap.to_json()
    );
    sup.respond_to_dialog(DialogAction::Accept, None, Some(&d.id))
        .expect("answer the popup's alert");
    reg.stop_all();
}

/// The bound: no connection of ours 1 s after the last task of the browser stops.
const CLOSED_WITHIN: Duration = Duration::from_secs(1);

/// Waits up to [`CLOSED_WITHIN`] for no connection to `port`; how long it took.
fn closed_within(port: u16, what: &str) -> Duration {
    let t0 = std::time::Instant::now();
    common::wait_until(CLOSED_WITHIN, || {
        (procs::connections_to(port) == 0).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "{what}: {} connections to the browser after {CLOSED_WITHIN:?}",
            procs::connections_to(port)
        )
    });
    t0.elapsed()
}

/// Waits for exactly two connections of ours to `port` (a discovery request's socket may be
/// closing still).
fn two_connections(port: u16, what: &str) {
    common::wait_until(T, || (procs::connections_to(port) == 2).then_some(())).unwrap_or_else(
        || {
            panic!(
                "{what}: {} connections to the browser, not 2",
                procs::connections_to(port)
            )
        },
    );
}

/// Opens a popup from the task's page that alerts on load, and answers it.
fn popup_alert_is_caught(sup: &Supervisor, srv: &HttpServer, tag: &str) {
    let url = srv.url("127.0.0.1", &format!("/popup?{tag}"));
    let d = popup_alert(sup, &url, &format!("popup {tag}"));
    sup.respond_to_dialog(DialogAction::Accept, None, Some(&d.id))
        .expect("answer the popup's alert");
}

#[test]
fn the_popup_watcher_closes_within_a_second_of_the_last_task_and_opens_for_the_next() {
    if common::shared_browser().is_none() {
        return;
    }
    // Private: this test counts every connection to the browser's port.
    let browser = Browser::launch().expect("launch a Chromium");
    let port = browser.port;
    let srv = HttpServer::start(|req| match req.path.as_str() {
        "/popup" => Response::html(format!(
            "<!doctype html><title>popup</title><script>alert('popup {}')</script>",
            req.query
        )),
        _ => Response::not_found(),
    });
    let reg = SupervisorRegistry::new(Config::default().with_reconnect_attempts(0).unwrap());
    let own = || StartOptions::default().with_new_page(true);

    let a = reg
        .start(StartRequest::new("w-a", &browser.ws_url).with_options(own()))
        .expect("a");
    assert!(!follows_popups_itself(&a), "the watcher serves a");
    two_connections(port, "the task's and the watcher's");
    popup_alert_is_caught(&a, &srv, "a");
    assert!(reg.stop("w-a"));
    let took = closed_within(port, "after the last task stopped");
    eprintln!("e2e_watcher: no connection {took:?} after the last task stopped");

    // The next task gets a watcher again, and its popups through it.
    let b = reg
        .start(StartRequest::new("w-b", &browser.ws_url).with_options(own()))
        .expect("b");
    assert!(!follows_popups_itself(&b), "a new watcher serves b");
    two_connections(port, "the task's and a new watcher's");
    popup_alert_is_caught(&b, &srv, "b");

    // The last task ends without a stop (its page closed by another client): the same.
    let page = b.snapshot().page_target_id.clone().expect("b's page");
    let mut other = RawCdp::connect(&browser.ws_url).expect("another client");
    other.close_page(&page).expect("close b's page");
    drop(other);
    assert!(
        b.wait_for(T, |s| matches!(s.state, SupervisorState::Dead { .. }))
            .is_some(),
        "b ends once its page is gone"
    );
    let took = closed_within(port, "after the last task died");
    eprintln!("e2e_watcher: no connection {took:?} after the last task died");
    reg.stop_all();
}

/// The issue's own reproduction: the MCP server's connections to a browser (`ss -tnp`: 2 while
/// a task is connected, then 1 for ever before the fix), through `browser_connect` with a
/// `cdp_url` and `browser_disconnect`.
#[test]
fn the_mcp_server_holds_no_connection_to_a_browser_a_second_after_its_last_task_disconnects() {
    use crate::mcp_stdio::{Mcp, initialize};
    if common::shared_browser().is_none() {
        return;
    }
    // Private: this test counts every connection to the browser's port.
    let browser = Browser::launch().expect("launch a Chromium");
    let port = browser.port;
    let mut mcp = Mcp::start(&[]);
    initialize(&mut mcp);
    let server = mcp.pid().to_string();
    for round in ["first", "second"] {
        mcp.ok_tool(
            "browser_connect",
            json!({"task_id": "w-mcp", "cdp_url": browser.ws_url}),
            T,
        );
        common::wait_until(T, || {
            (procs::connections_of(&server, port) == 2).then_some(())
        })
        .unwrap_or_else(|| {
            panic!(
                "{round}: {} connections of the server to the browser, not 2 (the task's and \
                 the popup watcher's)",
                procs::connections_of(&server, port)
            )
        });
        let d = mcp.ok_tool("browser_disconnect", json!({"task_id": "w-mcp"}), T);
        assert_eq!(d["stopped"], true, "{d}");
        let t0 = std::time::Instant::now();
        common::wait_until(CLOSED_WITHIN, || {
            (procs::connections_of(&server, port) == 0).then_some(())
        })
        .unwrap_or_else(|| {
            panic!(
                "{round}: {} connections of the server to the browser {CLOSED_WITHIN:?} after \
                 the disconnect",
                procs::connections_of(&server, port)
            )
        });
        eprintln!(
            "e2e_watcher: MCP server, {round} task: no connection {:?} after browser_disconnect",
            t0.elapsed()
        );
    }
}

/// A popup the task followed before its connection dropped is followed again once the task is
/// back (`Core::refollow_popups`): an alert it raises after the reconnect is caught, with its
/// target, and answered. With the registry's popup watcher and without it (the task then
/// auto-attaches at browser level itself).
#[test]
fn a_popup_followed_before_a_reconnect_is_followed_again_and_its_dialog_caught() {
    if common::shared_browser().is_none() {
        return;
    }
    let srv = HttpServer::start(|req| match req.path.as_str() {
        "/quiet" => Response::html("<!doctype html><title>quiet popup</title><p>quiet"),
        _ => Response::not_found(),
    });
    for watcher in [true, false] {
        let browser = Browser::launch().expect("launch a Chromium");
        let (proxy, url) = CutProxy::in_front_of(&browser.ws_url);
        let reg = if watcher {
            SupervisorRegistry::new(Config::default())
        } else {
            cdp_supervisor::unversioned::registry_without_popup_watcher(Config::default())
        };
        let sup = reg
            .start(
                StartRequest::new("refollow", &url)
                    .with_options(StartOptions::default().with_new_page(true)),
            )
            .expect("start with a page of its own");
        let page = sup.snapshot().page_target_id.clone().expect("its page");
        let popup_url = srv.url("127.0.0.1", "/quiet");
        let opened = sup
            .call(
                "Runtime.evaluate",
                json!({"expression": format!("window.open({}) ? 1 : 0", common::js(&popup_url)),
                       "userGesture": true, "returnByValue": true}),
                Route::Page,
                T,
            )
            .expect("window.open");
        assert_eq!(opened["result"]["value"], 1, "{opened}");
        let followed = |sup: &Supervisor| {
            wait_pick(sup, T, "the popup followed", |s| {
                s.pages
                    .iter()
                    .find(|p| p.opener_target_id.as_deref() == Some(&page))
                    .map(|p| p.target_id.clone())
            })
        };
        let popup = followed(&sup);

        proxy.cut(0);
        sup.wait_for(T, |s| s.state != SupervisorState::Active)
            .expect("the task sees the drop");
        sup.wait_for(T, |s| s.state == SupervisorState::Active)
            .expect("the task is back");
        assert_eq!(followed(&sup), popup, "watcher {watcher}: followed again");
        // Before another client raises an alert in it (`wait_set_up`; had the alert come first,
        // the task would say `blocked`, which is
        // `e2e_popups::with_the_popup_watcher_a_popup_frozen_before_the_task_started_is_reported_too`).
        wait_set_up(&sup, &popup, T);

        // An alert in the popup, raised by another client straight to the browser.
        let mut other = RawCdp::connect(&browser.ws_url).expect("another client");
        let sid = other.attach(&popup).expect("attach to the popup");
        other
            .call(
                "Runtime.evaluate",
                json!({"expression": "setTimeout(() => alert('popup after the reconnect'), 0); 1"}),
                Some(&sid),
                T,
            )
            .expect("evaluate in the popup");
        let what = format!("the popup's alert (watcher: {watcher})");
        let d = wait_pick(&sup, T, &what, |s| {
            s.pending_dialogs
                .iter()
                .find(|d| d.message == "popup after the reconnect")
                .cloned()
        });
        assert_eq!(d.target_id, popup, "watcher {watcher}: the popup's dialog");
        sup.respond_to_dialog(DialogAction::Accept, None, Some(&d.id))
            .expect("answer the popup's alert");
        drop(other);
        reg.stop_all();
    }
}
