//! A task's own page (`StartOptions::own_page`) on real Chromium: a fresh tab per task that
//! touches no other page, re-attached after a reconnect (replaced, and reported, only when it is
//! gone), and closed when the supervisor stops, even when the stop comes while a cross-site
//! navigation of that page commits.
//!
//! Chromium 156 answers `{success: true}` to a `Target.closeTarget` that arrives between the
//! navigation's response and its commit, and keeps the page open for good (measured: see
//! `close_own_page` in `src/supervisor.rs`). That window is a few milliseconds wide and cannot be
//! held open from outside, so the test stops one supervisor per round at a different moment
//! after the new document's request reached the server: with a single `Target.closeTarget`,
//! some rounds leave their tab behind.

use crate::common;

use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::cut_proxy::CutProxy;
use crate::common::{HttpServer, RawCdp, Response};
use cdp_supervisor::{Config, Route, StartOptions, SupervisorRegistry, SupervisorState};
use serde_json::json;

const T: Duration = Duration::from_secs(10);

/// When each round stops its supervisor, after the server received the request for the
/// origin-B document (it answers at once): the commit follows within some tens of ms.
const STOP_AFTER_MS: [u64; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 17, 21, 26];

/// Whether `target_id` is still listed by `Target.getTargets` (browser-level).
fn listed(cdp: &mut RawCdp, target_id: &str) -> bool {
    let r = cdp
        .call("Target.getTargets", json!({}), None, T)
        .expect("Target.getTargets");
    r["targetInfos"]
        .as_array()
        .is_some_and(|ts| ts.iter().any(|t| t["targetId"] == target_id))
}

#[test]
fn own_page_is_closed_when_the_stop_meets_a_cross_site_navigation() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let (requested_tx, requested_rx) = mpsc::channel::<()>();
    let requested_tx = Mutex::new(requested_tx);
    let server = HttpServer::start(move |req| match req.path.as_str() {
        "/b" => {
            let _ = requested_tx.lock().unwrap().send(());
            Response::html("<!doctype html><title>own-b</title><p>B</p>")
        }
        _ => Response::not_found(),
    });
    let url_b = server.url("localhost", "/b");
    let mut cdp = RawCdp::connect(&browser.ws_url).expect("a client of our own");
    let reg = SupervisorRegistry::new(Config::default());
    let mut left_open = Vec::new();
    for (round, after) in STOP_AFTER_MS.iter().enumerate() {
        let task = format!("own-page-{round}");
        let sup = reg
            .get_or_start_with(
                &task,
                &browser.ws_url,
                StartOptions::default().with_own_page(true),
            )
            .expect("start with a page of its own");
        let page = sup.snapshot().page_target_id.clone().expect("its page");
        while requested_rx.try_recv().is_ok() {}
        let took = std::thread::scope(|s| {
            // Its reply may never come (the page closes): not waited for past the stop.
            s.spawn(|| sup.call("Page.navigate", json!({"url": url_b}), Route::Page, T));
            requested_rx
                .recv_timeout(T)
                .expect("the browser asked for the origin-B document");
            // A timing sweep, not a wait for a condition: the window is not observable.
            std::thread::sleep(Duration::from_millis(*after));
            let t = Instant::now();
            reg.stop(&task);
            t.elapsed()
        });
        assert!(took < Duration::from_millis(1500), "stop took {took:?}");
        assert_eq!(
            sup.snapshot().state,
            SupervisorState::Stopped,
            "round {round}"
        );
        // Chromium lists a page it is closing for a few more milliseconds.
        let gone = common::wait_until(Duration::from_secs(2), || {
            (!listed(&mut cdp, &page)).then_some(())
        });
        eprintln!(
            "round {round}: stop {after} ms after B's request took {took:?}; page {}",
            if gone.is_some() {
                "closed"
            } else {
                "LEFT OPEN"
            }
        );
        if gone.is_none() {
            let _ = cdp.close_page(&page);
            left_open.push((round, *after));
        }
    }
    assert!(
        left_open.is_empty(),
        "rounds (number, stop ms after B's request) whose page stayed open: {left_open:?}"
    );
}

/// Pages the supervisor creates each get a window of their own, so each stays visible while
/// other tasks open theirs: headless Chromium shows one tab per window, and a tab behind
/// another is hidden (no `requestAnimationFrame`, screenshots that wait for a frame, no
/// hit-test data for its OOPIFs). Before, every task's page was a background tab of the first window: hidden from
/// the start.
#[test]
fn own_pages_of_several_tasks_each_stay_visible_and_draw() {
    if common::shared_browser().is_none() {
        return;
    }
    // A browser of its own: another test's tab opened into one of these windows would hide
    // that page (which is the browser's rule, not ours).
    let browser = common::Browser::launch().expect("launch a Chromium");
    let reg = SupervisorRegistry::new(Config::default());
    let sups: Vec<_> = (0..3)
        .map(|i| {
            reg.get_or_start_with(
                &format!("visible-{i}"),
                &browser.ws_url,
                StartOptions::default().with_own_page(true),
            )
            .expect("start with a page of its own")
        })
        .collect();
    for (i, sup) in sups.iter().enumerate() {
        let drawn = sup
            .call(
                "Runtime.evaluate",
                json!({"expression": "new Promise(r => { \
                       requestAnimationFrame(() => r(document.visibilityState + ', drew')); \
                       setTimeout(() => r(document.visibilityState + ', no frame in 5 s'), 5000) })",
                       "awaitPromise": true, "returnByValue": true}),
                Route::Page,
                T,
            )
            .expect("evaluate in the task's page");
        assert_eq!(
            drawn["result"]["value"], "visible, drew",
            "task {i}: {drawn}"
        );
        // A hidden tab's screenshot waits for a frame that never comes (measured: 2 s, 16 s,
        // or past a 60 s deadline).
        let shot = sup
            .call("Page.captureScreenshot", json!({}), Route::Page, T)
            .unwrap_or_else(|e| panic!("task {i}: screenshot: {e}"));
        assert!(
            shot["data"].as_str().is_some_and(|d| d.len() > 100),
            "task {i}: a PNG"
        );
    }
    reg.stop_all();
}

/// The pages of `Target.getTargets`, `(target_id, url, attached)`, in its order.
fn pages(cdp: &mut RawCdp) -> Vec<(String, String, bool)> {
    let r = cdp
        .call("Target.getTargets", json!({}), None, T)
        .expect("Target.getTargets");
    r["targetInfos"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "page")
        .map(|t| {
            (
                t["targetId"].as_str().unwrap_or_default().to_string(),
                t["url"].as_str().unwrap_or_default().to_string(),
                t["attached"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

/// Issue 31.2: every task gets a fresh `about:blank` page of its own, never a page the browser
/// already holds; two tasks on one browser holding other pages get two new tabs, and the pages
/// that were there are left as they were (same URL, nobody attached).
#[test]
fn two_tasks_on_a_browser_holding_pages_get_two_new_tabs_and_touch_no_other() {
    if common::shared_browser().is_none() {
        return;
    }
    let browser = common::Browser::launch().expect("launch a Chromium");
    let srv = HttpServer::start(|req| match req.path.as_str() {
        "/other" => Response::html("<!doctype html><title>another client's page</title>"),
        _ => Response::not_found(),
    });
    let mut cdp = RawCdp::connect(&browser.ws_url).expect("a client of our own");
    let other_url = srv.url("127.0.0.1", "/other");
    cdp.new_page(&other_url).expect("another client's page");
    common::wait_until(T, || {
        pages(&mut cdp)
            .iter()
            .any(|(_, u, _)| *u == other_url)
            .then_some(())
    })
    .expect("the other page loaded");
    let before = pages(&mut cdp);
    assert!(
        before.len() >= 2,
        "the browser holds pages already: {before:?}"
    );
    let reg = SupervisorRegistry::new(Config::default());
    let started: Vec<_> = ["own-a", "own-b"]
        .iter()
        .map(|task| {
            reg.get_or_start_with(
                task,
                &browser.ws_url,
                StartOptions::default().with_own_page(true),
            )
            .expect("start with a page of its own")
        })
        .collect();
    let ids: Vec<String> = started
        .iter()
        .map(|s| s.snapshot().page_target_id.clone().expect("its page"))
        .collect();
    assert_ne!(ids[0], ids[1], "two tasks, two tabs");
    let after = pages(&mut cdp);
    eprintln!("pages before: {before:?}\npages after: {after:?}");
    for id in &ids {
        assert!(
            !before.iter().any(|(t, _, _)| t == id),
            "{id} is a new page"
        );
        let (_, url, _) = after
            .iter()
            .find(|(t, _, _)| t == id)
            .unwrap_or_else(|| panic!("{id} is listed: {after:?}"));
        assert_eq!(url, "about:blank");
    }
    assert_eq!(after.len(), before.len() + 2, "two new pages, nothing else");
    for (t, url, attached) in &before {
        let now = after.iter().find(|(a, _, _)| a == t).expect("still there");
        assert_eq!((&now.1, now.2), (url, *attached), "page {t} untouched");
    }
    reg.stop_all();
    let left = pages(&mut cdp);
    assert!(
        ids.iter().all(|id| !left.iter().any(|(t, _, _)| t == id))
            || common::wait_until(Duration::from_secs(2), || {
                let l = pages(&mut cdp);
                ids.iter()
                    .all(|id| !l.iter().any(|(t, _, _)| t == id))
                    .then_some(())
            })
            .is_some(),
        "stop closed both tabs"
    );
    assert_eq!(pages(&mut cdp).len(), before.len(), "the other pages stay");
}

/// Issue 31.2: after a reconnect the task's own page is re-attached while it exists (no new
/// tab); only when it is gone is a new one made, and the snapshot reports it (`page_replaced`).
#[test]
fn own_page_is_reattached_after_a_reconnect_and_replaced_only_when_gone() {
    if common::shared_browser().is_none() {
        return;
    }
    let browser = common::Browser::launch().expect("launch a Chromium");
    let (proxy, url) = CutProxy::in_front_of(&browser.ws_url);
    let mut cdp = RawCdp::connect(&browser.ws_url).expect("a client of our own");
    let config = Config::default().with_reconnect_backoff(Duration::from_millis(400));
    let reg = SupervisorRegistry::new(config);
    let sup = reg
        .get_or_start_with(
            "own-reconnect",
            &url,
            StartOptions::default().with_own_page(true),
        )
        .expect("start with a page of its own");
    let first = sup.snapshot();
    let page = first.page_target_id.clone().expect("its page");
    let session = first.page_session_id.clone().expect("its session");
    let count_before = pages(&mut cdp).len();

    // The connection drops: the same page again, and no new tab.
    proxy.cut(0);
    let again = sup
        .wait_for(T, |s| {
            s.is_active() && s.page_session_id.as_deref().is_some_and(|x| x != session)
        })
        .expect("re-attached after the reconnect");
    assert_eq!(again.page_target_id.as_deref(), Some(page.as_str()));
    assert_eq!(again.page_replaced, None);
    assert_eq!(pages(&mut cdp).len(), count_before, "no new tab");

    // It drops again and the page is closed meanwhile: a new page, reported.
    let session = again.page_session_id.clone().expect("its session");
    let conns = proxy.count();
    proxy.cut(conns - 1);
    cdp.close_page(&page)
        .expect("close the task's page behind its back");
    let replaced = sup
        .wait_for(T, |s| {
            s.is_active() && s.page_session_id.as_deref().is_some_and(|x| x != session)
        })
        .expect("attached again after the reconnect");
    let new_page = replaced.page_target_id.clone().expect("a page");
    assert_ne!(new_page, page);
    assert_eq!(replaced.page_replaced.as_deref(), Some(page.as_str()));
    assert_eq!(
        replaced.to_json()["page_replaced"]["old_target_id"],
        json!(page)
    );
    let listed = pages(&mut cdp);
    assert!(
        listed
            .iter()
            .any(|(t, u, _)| *t == new_page && u == "about:blank"),
        "{listed:?}"
    );
    reg.stop("own-reconnect");
    common::wait_until(Duration::from_secs(2), || {
        (!listed_now(&mut cdp, &new_page)).then_some(())
    })
    .expect("stop closed the new page");
}

fn listed_now(cdp: &mut RawCdp, target_id: &str) -> bool {
    pages(cdp).iter().any(|(t, _, _)| t == target_id)
}
