//! Measurement (issue 28 items 4 and 9), ignored: what Chromium does
//! * when a popup nobody watches alerts: whether calls into its opener hang, what a fresh
//!   client attached to the popup sees (input probe, `Page.enable`, `handleJavaScriptDialog`),
//!   and what clears it;
//! * with `Target.*` methods sent on a page session instead of the browser's.
use crate::common;

use std::time::{Duration, Instant};

use crate::common::{HttpServer, RawCdp, Response};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(10);

/// Sends `method` and reports whether (and how fast) it is answered within `wait`.
fn timed(cdp: &mut RawCdp, method: &str, params: Value, sid: Option<&str>, wait: Duration) {
    let t = Instant::now();
    let r = cdp.call(method, params, sid, wait);
    let shown = match &r {
        Ok(v) => {
            let s = v.to_string();
            format!("ok {}", &s[..s.len().min(200)])
        }
        Err(e) => format!("err {e}"),
    };
    eprintln!("  {method} on {sid:?}: {shown} after {:?}", t.elapsed());
}

#[test]
#[ignore = "measurement"]
fn unwatched_blank_popup_alert() {
    let Some(b) = common::shared_browser() else {
        return;
    };
    let srv = HttpServer::start(|_| Response::html("<!doctype html><title>Opener</title><p>x"));
    let mut cdp = RawCdp::connect(&b.ws_url).expect("connect");
    let (page, sid) = cdp.open_page(&srv.url("127.0.0.1", "/"), T).expect("open");
    // Two blank popups, no client attached to them; the second alerts from a timer.
    cdp.call(
        "Runtime.evaluate",
        json!({"expression": "window.q = window.open('about:blank'); 1", "userGesture": true}),
        Some(&sid),
        T,
    )
    .expect("open q");
    cdp.call(
        "Runtime.evaluate",
        json!({"expression": "window.w = window.open('about:blank'); w.document.write('<script>setTimeout(() => alert(\\'frozen\\'), 200)<\\/script>'); 1", "userGesture": true}),
        Some(&sid),
        T,
    )
    .expect("open w");
    std::thread::sleep(Duration::from_millis(600));
    timed(
        &mut cdp,
        "Runtime.evaluate",
        json!({"expression": "1"}),
        Some(&sid),
        Duration::from_secs(2),
    );
    timed(&mut cdp, "Browser.getVersion", json!({}), None, T);
    let targets = cdp
        .call("Target.getTargets", json!({}), None, T)
        .expect("targets");
    let popups: Vec<Value> = targets["targetInfos"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t["openerId"] == page.as_str())
        .collect();
    eprintln!("popups: {popups:#?}");
    for p in &popups {
        let id = p["targetId"].as_str().unwrap_or_default().to_string();
        let t = Instant::now();
        let s = cdp.attach(&id).expect("attach");
        eprintln!(" popup {id}: attached after {:?}", t.elapsed());
        timed(
            &mut cdp,
            "Input.dispatchMouseEvent",
            json!({"type": "mouseMoved", "x": -1, "y": -1}),
            Some(&s),
            Duration::from_secs(1),
        );
        timed(
            &mut cdp,
            "Runtime.getIsolateId",
            json!({}),
            Some(&s),
            Duration::from_secs(1),
        );
        timed(
            &mut cdp,
            "Page.enable",
            json!({}),
            Some(&s),
            Duration::from_secs(1),
        );
        timed(
            &mut cdp,
            "Page.handleJavaScriptDialog",
            json!({"accept": true}),
            Some(&s),
            Duration::from_secs(1),
        );
        eprintln!(
            "  events: {:?}",
            cdp.clear_events()
                .iter()
                .map(|e| e["method"].clone())
                .collect::<Vec<_>>()
        );
    }
    timed(
        &mut cdp,
        "Input.dispatchMouseEvent",
        json!({"type": "mouseMoved", "x": -1, "y": -1}),
        Some(&sid),
        Duration::from_secs(1),
    );
    // Close the alerting popup: does the opener answer again?
    if let Some(w) = popups.last().and_then(|p| p["targetId"].as_str()) {
        timed(
            &mut cdp,
            "Target.closeTarget",
            json!({"targetId": w}),
            None,
            T,
        );
    }
    timed(
        &mut cdp,
        "Runtime.evaluate",
        json!({"expression": "1"}),
        Some(&sid),
        Duration::from_secs(3),
    );
    for p in &popups {
        let _ = cdp.close_page(p["targetId"].as_str().unwrap_or_default());
    }
    let _ = cdp.close_page(&page);
}

#[test]
#[ignore = "measurement"]
fn target_methods_on_a_page_session() {
    let Some(b) = common::shared_browser() else {
        return;
    };
    let mut cdp = RawCdp::connect(&b.ws_url).expect("connect");
    let (page, sid) = cdp.open_page("about:blank", T).expect("open");
    let other = cdp.new_page("about:blank").expect("other");
    let s = Some(sid.as_str());
    timed(&mut cdp, "Target.getTargets", json!({}), s, T);
    timed(
        &mut cdp,
        "Target.getTargetInfo",
        json!({"targetId": other}),
        s,
        T,
    );
    timed(&mut cdp, "Target.getTargetInfo", json!({}), s, T);
    timed(
        &mut cdp,
        "Target.activateTarget",
        json!({"targetId": other}),
        s,
        T,
    );
    timed(
        &mut cdp,
        "Target.attachToTarget",
        json!({"targetId": other, "flatten": true}),
        s,
        T,
    );
    timed(
        &mut cdp,
        "Target.createTarget",
        json!({"url": "about:blank"}),
        s,
        T,
    );
    timed(&mut cdp, "Target.getBrowserContexts", json!({}), s, T);
    timed(&mut cdp, "Target.createBrowserContext", json!({}), s, T);
    timed(&mut cdp, "Target.attachToBrowserTarget", json!({}), s, T);
    timed(
        &mut cdp,
        "Target.setDiscoverTargets",
        json!({"discover": true}),
        s,
        T,
    );
    timed(
        &mut cdp,
        "Target.autoAttachRelated",
        json!({"targetId": other, "waitForDebuggerOnStart": false}),
        s,
        T,
    );
    timed(
        &mut cdp,
        "Target.getDevToolsTarget",
        json!({"targetId": other}),
        s,
        T,
    );
    timed(
        &mut cdp,
        "Browser.getWindowForTarget",
        json!({"targetId": other}),
        s,
        T,
    );
    timed(
        &mut cdp,
        "Target.closeTarget",
        json!({"targetId": other}),
        s,
        T,
    );
    timed(
        &mut cdp,
        "Target.getTargetInfo",
        json!({"targetId": other}),
        None,
        T,
    );
    timed(
        &mut cdp,
        "Target.getTargets",
        json!({"filter": [{}]}),
        None,
        T,
    );
    eprintln!(
        "  events: {:?}",
        cdp.clear_events()
            .iter()
            .map(|e| e["method"].clone())
            .collect::<Vec<_>>()
    );
    let _ = cdp.close_page(&other);
    let _ = cdp.close_page(&page);
}

#[test]
#[ignore = "measurement"]
fn unwatched_alert_and_a_new_window() {
    let Some(_) = common::shared_browser() else {
        return;
    };
    let b = common::Browser::launch().expect("a Chromium of its own");
    let srv = HttpServer::start(|_| Response::html("<!doctype html><title>Opener</title><p>x"));
    let mut cdp = RawCdp::connect(&b.ws_url).expect("connect");
    let (page, sid) = cdp.open_page(&srv.url("127.0.0.1", "/"), T).expect("open");
    cdp.call(
        "Runtime.evaluate",
        json!({"expression": "window.w = window.open('about:blank'); w.document.write('<script>setTimeout(() => alert(\\'frozen\\'), 200)<\\/script>'); 1", "userGesture": true}),
        Some(&sid),
        T,
    )
    .expect("open w");
    std::thread::sleep(Duration::from_millis(600));
    timed(
        &mut cdp,
        "Runtime.evaluate",
        json!({"expression": "1"}),
        Some(&sid),
        Duration::from_secs(2),
    );
    for (what, params) in [
        ("a tab", json!({"url": "about:blank"})),
        (
            "a background window",
            json!({"url": "about:blank", "newWindow": true, "background": true}),
        ),
        ("a window", json!({"url": "about:blank", "newWindow": true})),
    ] {
        let t = cdp
            .call("Target.createTarget", params, None, T)
            .expect("create");
        eprintln!(" after {what}:");
        timed(
            &mut cdp,
            "Runtime.evaluate",
            json!({"expression": "1"}),
            Some(&sid),
            Duration::from_secs(2),
        );
        let _ = cdp.close_page(t["targetId"].as_str().unwrap_or_default());
    }
    let _ = cdp.close_page(&page);
}
