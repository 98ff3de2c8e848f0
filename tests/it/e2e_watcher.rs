//! The registry's popup watcher going away, on real Chromium (issue 24): its tasks follow their
//! popups themselves from then on, and keep doing so on every connection after a reconnect.
//!
//! A private Chromium (the watcher's browser-level auto-attach would see every other test's
//! pages) behind a TCP proxy that can cut one connection: the task's connection is the first the
//! proxy accepts, the popup watcher's the second.

use crate::common;

use std::time::Duration;

use crate::common::cut_proxy::CutProxy;
use crate::common::pages::wait_pick;
use crate::common::{Browser, HttpServer, Response};
use cdp_supervisor::unversioned::follows_popups_itself;
use cdp_supervisor::{
    Config, DialogAction, Route, StartOptions, SupervisorRegistry, SupervisorState,
};
use serde_json::json;

const T: Duration = Duration::from_secs(10);

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
        .get_or_start_with(
            "watcher-gone",
            &url,
            StartOptions::default().with_new_page(true),
        )
        .expect("start with a page of its own");
    let page = sup.snapshot().page_target_id.clone().expect("its page");
    assert_eq!(
        proxy.count(),
        2,
        "the task's connection, then the popup watcher's"
    );
    assert!(!follows_popups_itself(&sup), "the watcher serves it");

    proxy.cut(1);
    common::wait_until(T, || follows_popups_itself(&sup).then_some(()))
        .expect("the task follows its popups itself once the watcher has gone");
    proxy.cut(0);
    common::wait_until(T, || {
        (proxy.count() >= 3 && sup.snapshot().state == SupervisorState::Active).then_some(())
    })
    .expect("the task reconnected and re-attached to its page");
    assert_eq!(proxy.count(), 3, "no new watcher");

    let popup_url = srv.url("127.0.0.1", "/popup");
    let opened = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": format!("window.open({}) ? 1 : 0", common::js(&popup_url)),
                   "userGesture": true, "returnByValue": true}),
            Route::Page,
            T,
        )
        .expect("window.open from the task's page");
    assert_eq!(opened["result"]["value"], 1, "{opened}");
    let d = wait_pick(&sup, T, "the popup's alert", |s| {
        s.pending_dialogs
            .iter()
            .find(|d| d.message == "after the reconnect")
            .cloned()
    });
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
