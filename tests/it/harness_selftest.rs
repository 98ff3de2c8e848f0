//! Self-test of the shared end-to-end support code in `tests/it/common`.
//!
//! Tests needing Chromium skip (printing `SKIPPED: no Chromium`) when none is
//! installed, unless `CDP_SUPERVISOR_E2E=require`.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{Browser, HttpServer, RawCdp, Response, wait_until};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(10);
const REPORTED: &str = "héllo wörld ✓ & 100% +1 ?=#";

/// Main page (served from 127.0.0.1) embedding a cross-site iframe from
/// `localhost` on the same port; both report through `/report`.
const MAIN_PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>harness main ✓</title></head>
<body>
<iframe id="f"></iframe>
<script>
  document.getElementById('f').src = 'http://localhost:' + location.port + '/frame';
  window.addEventListener('load', () => {
    fetch('/report?' + encodeURIComponent('main:' + "héllo wörld ✓ & 100% +1 ?=#"));
  });
</script>
</body></html>"#;

const FRAME_PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>frame</title></head>
<body><script>
  fetch('/report?' + encodeURIComponent('frame:' + location.host));
</script></body></html>"#;

/// Minimal blocking HTTP GET for testing the server without a browser.
fn http_get(host: &str, port: u16, path_and_query: &str) -> (u16, String) {
    let mut s = TcpStream::connect((host, port)).expect("connect to HttpServer");
    s.set_read_timeout(Some(T)).unwrap();
    write!(
        s,
        "GET {path_and_query} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read HTTP response");
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    let body = out
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .unwrap_or("")
        .to_string();
    (status, body)
}

#[test]
fn http_server_serves_pages_and_decodes_reports() {
    let server = HttpServer::static_pages(&[("/", "<p>hi</p>")]);
    assert_eq!(
        http_get("127.0.0.1", server.port(), "/"),
        (200, "<p>hi</p>".into())
    );
    // `localhost` reaches the 127.0.0.1-bound server on this machine.
    assert_eq!(http_get("localhost", server.port(), "/").0, 200);
    assert_eq!(http_get("127.0.0.1", server.port(), "/missing").0, 404);
    assert!(
        server
            .url("localhost", "/x")
            .ends_with(&format!(":{}/x", server.port()))
    );

    let (status, _) = http_get(
        "127.0.0.1",
        server.port(),
        "/report?h%C3%A9llo%20w%C3%B6rld%20%E2%9C%93%2B+%zz",
    );
    assert_eq!(status, 204);
    assert_eq!(server.wait_report(T).as_deref(), Some("héllo wörld ✓++%zz"));
    let start = Instant::now();
    assert_eq!(server.wait_report(Duration::from_millis(100)), None);
    assert!(start.elapsed() >= Duration::from_millis(100));

    let custom = HttpServer::start(|req| {
        if req.path == "/echo" {
            Response::text(format!("{} {}", req.method, req.query)).with_header("X-Test", "1")
        } else {
            Response::not_found()
        }
    });
    assert_eq!(
        http_get("127.0.0.1", custom.port(), "/echo?a=1"),
        (200, "GET a=1".into())
    );

    let start = Instant::now();
    drop(server);
    drop(custom);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "drop must not hang"
    );
}

#[test]
fn wait_until_polls_until_deadline() {
    let mut n = 0;
    assert_eq!(
        wait_until(T, || {
            n += 1;
            (n == 5).then_some(n)
        }),
        Some(5)
    );
    let start = Instant::now();
    assert_eq!(wait_until(Duration::from_millis(50), || None::<()>), None);
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(50) && took < Duration::from_secs(1),
        "{took:?}"
    );
}

#[test]
fn shared_browser_cross_site_iframe_title_and_reports() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    assert!(
        browser.ws_url.starts_with("ws://127.0.0.1:"),
        "{}",
        browser.ws_url
    );
    assert_eq!(
        browser.http_endpoint(),
        format!("http://127.0.0.1:{}", browser.port)
    );
    assert!(std::path::Path::new(&format!("/proc/{}", browser.pid)).exists());

    let server = HttpServer::static_pages(&[("/", MAIN_PAGE), ("/frame", FRAME_PAGE)]);
    let mut cdp = RawCdp::connect(&browser.ws_url).expect("RawCdp::connect");

    let url = server.url("127.0.0.1", "/");
    let target_id = cdp.new_page(&url).expect("new_page");
    let sid = cdp.attach(&target_id).expect("attach");

    // new_page does not wait for the load; poll until the page is complete.
    let title = wait_until(T, || {
        cdp.evaluate(
            &sid,
            "document.readyState === 'complete' && location.href.startsWith('http') \
             ? document.title : null",
            T,
        )
        .ok()
        .filter(|v| !v.is_null())
    })
    .expect("page loaded");
    assert_eq!(title, json!("harness main ✓"));

    // Both documents report; order is not guaranteed.
    let mut reports = vec![
        server.wait_report(T).expect("first report"),
        server.wait_report(T).expect("second report"),
    ];
    reports.sort();
    assert_eq!(
        reports,
        vec![
            format!("frame:localhost:{}", server.port()),
            format!("main:{REPORTED}"),
        ]
    );

    // The localhost iframe is cross-site, hence an OOPIF that auto-attach
    // reports as an "iframe" target.
    cdp.call(
        "Target.setAutoAttach",
        json!({ "autoAttach": true, "waitForDebuggerOnStart": false, "flatten": true }),
        Some(&sid),
        T,
    )
    .expect("setAutoAttach");
    let ev = cdp
        .wait_event("Target.attachedToTarget", Some(&sid), T)
        .expect("Target.attachedToTarget for the OOPIF");
    let info = &ev["params"]["targetInfo"];
    println!(
        "observed OOPIF: type={} url={} child session={}",
        info["type"], info["url"], ev["params"]["sessionId"]
    );
    assert_eq!(info["type"], "iframe");
    assert_eq!(info["url"], json!(server.url("localhost", "/frame")));

    // The child session works and sees its own origin.
    let child_sid = ev["params"]["sessionId"].as_str().expect("child sessionId");
    assert_eq!(
        cdp.evaluate(child_sid, "location.host", T)
            .expect("evaluate in OOPIF"),
        json!(format!("localhost:{}", server.port()))
    );

    cdp.close_page(&target_id).expect("close_page");
}

#[test]
fn raw_cdp_open_page_errors_and_deadlines() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let server = HttpServer::static_pages(&[("/p", "<title>open_page</title>")]);
    let mut cdp = RawCdp::connect(&browser.ws_url).expect("RawCdp::connect");

    let (target_id, sid) = cdp
        .open_page(&server.url("127.0.0.1", "/p"), T)
        .expect("open_page");
    assert_eq!(
        cdp.evaluate(&sid, "document.title", T),
        Ok(json!("open_page"))
    );
    assert_eq!(
        cdp.evaluate(&sid, "Promise.resolve(6 * 7)", T),
        Ok(json!(42))
    );
    assert_eq!(cdp.evaluate(&sid, "undefined", T), Ok(Value::Null));
    let err = cdp
        .evaluate(&sid, "throw new Error('boom')", T)
        .expect_err("exception must be an Err");
    assert!(err.contains("boom"), "{err}");

    let err = cdp
        .call("No.suchMethod", json!({}), None, T)
        .expect_err("unknown method must be an Err");
    assert!(err.contains("wasn't found"), "{err}");

    // Deadlines: nothing hangs past its timeout.
    let start = Instant::now();
    assert!(
        cdp.wait_event("Never.happens", None, Duration::from_millis(200))
            .is_none()
    );
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_secs(2),
        "{took:?}"
    );
    let start = Instant::now();
    let err = cdp
        .evaluate(&sid, "new Promise(() => {})", Duration::from_millis(200))
        .expect_err("never-settling promise must time out");
    assert!(err.contains("timed out"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(2));

    // Events arriving during a call are queued, not lost.
    cdp.call(
        "Target.setDiscoverTargets",
        json!({ "discover": true }),
        None,
        T,
    )
    .expect("setDiscoverTargets");
    let second = cdp.new_page("about:blank").expect("new_page");
    let created = cdp
        .wait_event_where(T, |ev| {
            ev["method"] == "Target.targetCreated"
                && ev["params"]["targetInfo"]["targetId"] == second
        })
        .expect("targetCreated queued during createTarget");
    assert!(created.get("sessionId").is_none());

    cdp.close_page(&second).expect("close second");
    cdp.close_page(&target_id).expect("close first");
}

#[test]
fn own_browser_launch_and_drop_kills_process_group() {
    if common::shared_browser().is_none() {
        return; // skipped (message already printed)
    }
    let browser = Browser::launch().expect("Browser::launch");
    let pid = browser.pid;
    let profile = browser.profile_dir().to_path_buf();
    assert!(profile.is_dir());
    let proc_dir = format!("/proc/{pid}");
    assert!(std::path::Path::new(&proc_dir).exists());

    let mut cdp = RawCdp::connect(&browser.ws_url).expect("connect own browser");
    let version = cdp
        .call("Browser.getVersion", json!({}), None, T)
        .expect("Browser.getVersion");
    println!("own browser: {}", version["product"]);
    assert_ne!(browser.ws_url, common::shared_browser().unwrap().ws_url);

    drop(browser);
    assert!(
        wait_until(T, || (!std::path::Path::new(&proc_dir).exists())
            .then_some(()))
        .is_some(),
        "{proc_dir} still exists after drop"
    );
    assert!(
        !profile.exists(),
        "profile {} not removed",
        profile.display()
    );
    // No live (non-zombie) process is left in the browser's process group.
    // Zombies may linger if PID 1 does not reap orphans.
    let leftovers = wait_until(T, || {
        let live = group_members(pid);
        live.is_empty().then_some(())
    });
    assert!(
        leftovers.is_some(),
        "live group members: {:?}",
        group_members(pid)
    );
    // The connection notices the browser is gone instead of hanging.
    assert!(cdp.call("Browser.getVersion", json!({}), None, T).is_err());
}

/// Pids of non-zombie processes whose process group is `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the parenthesised comm: state ppid pgrp ...
        let Some(rest) = stat.rsplit_once(')').map(|x| x.1) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string() {
            out.push(pid);
        }
    }
    out
}
