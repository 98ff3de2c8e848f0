//! Page connections through the task's CDP endpoint on real Chromium (`mux/page.rs`): a raw
//! client on the `webSocketDebuggerUrl` that `/json/list` gives a page talks to it without
//! sessions, as on Chromium's own `/devtools/page/<id>`: it evaluates, enables `Page` and hears
//! the load of a navigation, gets a dialog, sees a later call fail at once naming it, answers it
//! and the page's script gets the answer; a page closed under a client closes the client; and
//! the task keeps its one connection to the browser throughout (counted).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cdp_supervisor::{ClosedBy, Config, StartOptions, StartRequest, SupervisorRegistry};
use serde_json::{Value, json};

use crate::common::{self, Browser, HttpServer, RawCdp, Response};
use crate::e2e_cdp_endpoint::{get, request, settled_connections};

const T: Duration = Duration::from_secs(10);

fn pages() -> HttpServer {
    HttpServer::start(|req| match req.path.as_str() {
        "/one" => Response::html("<!doctype html><title>One</title><p>one</p>"),
        "/two" => Response::html(
            "<!doctype html><title>Two</title><script>window.answer = 'none';</script>",
        ),
        _ => Response::not_found(),
    })
}

/// `/json/list`'s entry for `id`.
fn entry(http: &str, id: &str) -> Option<Value> {
    let (status, body) = get(http, "/json/list", &[]);
    assert_eq!(status, 200, "{body}");
    let list: Vec<Value> = serde_json::from_str(&body).expect("a JSON list");
    list.into_iter().find(|e| e["id"] == id)
}

/// Node and `tests/puppeteer/<name>`, copied beside `<target>/puppeteer`'s node_modules (where
/// Node resolves its imports from): (node, that directory, the copy); `None` (printed, or a
/// failure when the e2e tests are required) without Chromium or the pinned packages.
fn node_script(name: &str) -> Option<(PathBuf, PathBuf, PathBuf)> {
    if common::chromium_path().is_none() && !common::e2e_required() {
        eprintln!("SKIPPED: no Chromium");
        return None;
    }
    let Some(node) = crate::e2e_cdp_endpoint::puppeteer_node() else {
        assert!(
            !common::e2e_required(),
            "puppeteer-core and chrome-remote-interface are not installed (run .ci/run)"
        );
        eprintln!("SKIPPED: puppeteer-core and chrome-remote-interface are not installed");
        return None;
    };
    let dir = crate::mcp_python_sdk::target_dir().join("puppeteer");
    let script = dir.join(name);
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/puppeteer")
        .join(name);
    std::fs::copy(source, &script).expect("copy the script");
    Some((node, dir, script))
}

fn eval(cdp: &mut RawCdp, expr: &str) -> Result<Value, String> {
    cdp.call(
        "Runtime.evaluate",
        json!({"expression": expr, "returnByValue": true}),
        None,
        T,
    )
    .map(|r| r["result"]["value"].clone())
}

#[test]
fn a_raw_page_client_evaluates_navigates_and_answers_a_dialog_on_the_tasks_one_connection() {
    if common::chromium_path().is_none() && !common::e2e_required() {
        eprintln!("SKIPPED: no Chromium");
        return;
    }
    let browser = Browser::launch().expect("launch Chromium");
    let server = pages();
    let reg = SupervisorRegistry::new(Config::default());
    let sup = reg
        .start(
            StartRequest::new("pg", &browser.ws_url)
                .with_options(StartOptions::default().with_new_page(true)),
        )
        .expect("start");
    let page = sup.snapshot().page_target_id.clone().expect("the page");
    let ep = reg.cdp_endpoint("pg").expect("the task's endpoint");
    let upstream = settled_connections(browser.port, 2, "the task's and the popup watcher's");

    // Discovery: the page's WebSocket is under the task's token, as the browser's is.
    let e = entry(&ep.http_url, &page).expect("the task's page is listed");
    let ws = e["webSocketDebuggerUrl"].as_str().expect("a page URL");
    let token = ep.http_url.rsplit('/').next().unwrap();
    assert!(
        ws.ends_with(&format!("/{token}/devtools/page/{page}")),
        "{ws}"
    );
    assert!(e.get("devtoolsFrontendUrl").is_none(), "{e}");
    let upgrade = [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", "13"),
    ];
    let (status, body) = get(&ep.http_url, "/devtools/page/NOPE", &upgrade);
    assert_eq!((status, body.as_str()), (500, "No such target id: NOPE"));

    let mut p = RawCdp::connect(ws).expect("a page client");
    assert_eq!(eval(&mut p, "6*7").unwrap(), json!(42));

    // Page.enable, then a navigation: its load comes without sessionId.
    p.call("Page.enable", json!({}), None, T).unwrap();
    p.call(
        "Page.navigate",
        json!({"url": server.url("127.0.0.1", "/two")}),
        None,
        T,
    )
    .expect("navigate");
    p.wait_event("Page.loadEventFired", None, T)
        .expect("Page.loadEventFired without sessionId");
    assert_eq!(eval(&mut p, "document.title").unwrap(), json!("Two"));

    // A dialog: the client hears of it, a later call fails at once naming it, the client
    // answers it, and the page's script gets the answer.
    eval(
        &mut p,
        "setTimeout(() => { window.answer = prompt('Your name?', 'x'); }, 0); 1",
    )
    .unwrap();
    let opening = p
        .wait_event("Page.javascriptDialogOpening", None, T)
        .expect("Page.javascriptDialogOpening without sessionId");
    assert_eq!(opening["params"]["message"], "Your name?");
    common::wait_until(T, || {
        (!sup.snapshot().pending_dialogs.is_empty()).then_some(())
    })
    .expect("the supervisor sees it");
    let t = Instant::now();
    let err = eval(&mut p, "1").expect_err("blocked by the dialog");
    let refused_in = t.elapsed();
    assert!(err.contains("Your name?"), "{err}");
    assert!(refused_in < Duration::from_secs(1), "{refused_in:?}");
    eprintln!("a page client's call into the dialog failed in {refused_in:?}: {err}");
    p.call(
        "Page.handleJavaScriptDialog",
        json!({"accept": true, "promptText": "Bob"}),
        None,
        T,
    )
    .expect("the client answers it");
    p.wait_event("Page.javascriptDialogClosed", None, T)
        .expect("closed");
    assert_eq!(eval(&mut p, "window.answer").unwrap(), json!("Bob"));
    common::wait_until(T, || {
        sup.snapshot().pending_dialogs.is_empty().then_some(())
    })
    .expect("no dialog pending");
    let closed = sup.snapshot().recent_dialogs.last().map(|d| d.closed_by);
    assert_eq!(closed, Some(ClosedBy::Client));

    // A page a browser client of the task creates is listed too; a page client on it is
    // closed when the page closes, as Chromium closes its page socket.
    let mut b = RawCdp::connect(&ep.ws_url).expect("a browser client");
    let other = b
        .new_page(&server.url("127.0.0.1", "/one"))
        .expect("a new page");
    let e = common::wait_until(T, || entry(&ep.http_url, &other)).expect("the new page listed");
    let mut q = RawCdp::connect(e["webSocketDebuggerUrl"].as_str().unwrap()).expect("q");
    let title = common::wait_until(T, || {
        eval(&mut q, "document.title").ok().filter(|t| t == "One")
    });
    assert!(title.is_some(), "q evaluates in the new page");
    settled_connections(
        browser.port,
        upstream,
        "two page clients and a browser client added no connection to the browser",
    );
    b.close_page(&other).expect("close the new page");
    let detached = q
        .wait_event_where(T, |e| {
            e["method"] == "Inspector.detached" && e["params"]["reason"] == "target_closed"
        })
        .expect("Inspector.detached {target_closed}");
    assert!(detached.get("sessionId").is_none(), "{detached}");
    let end = common::wait_until(T, || q.next_message(Duration::from_millis(200)).err())
        .expect("q is closed");
    assert!(end.contains("page closed"), "{end}");
    assert!(
        entry(&ep.http_url, &other).is_none(),
        "gone from /json/list"
    );

    // The first client goes on; the task kept its one connection.
    assert_eq!(eval(&mut p, "2+2").unwrap(), json!(4));
    drop((p, q, b));
    settled_connections(browser.port, upstream, "after the clients");
    reg.stop("pg");
}

/// chrome-remote-interface 0.34.0 (pinned in tests/puppeteer, installed by `.ci/run` with
/// puppeteer-core) with its default target, the first page `/json/list` gives: it evaluates,
/// navigates and hears the load, and answers a prompt raised by its own evaluate, which then
/// returns the answer.
#[test]
fn chrome_remote_interface_uses_the_tasks_page_through_the_endpoint() {
    let Some((node, dir, script)) = node_script("page_client.mjs") else {
        return;
    };
    let browser = Browser::launch().expect("launch Chromium");
    let server = pages();
    let reg = SupervisorRegistry::new(Config::default());
    let sup = reg
        .start(
            StartRequest::new("cri", &browser.ws_url)
                .with_options(StartOptions::default().with_new_page(true)),
        )
        .expect("start");
    let page = sup.snapshot().page_target_id.clone().expect("the page");
    let ep = reg.cdp_endpoint("cri").expect("the endpoint");
    let upstream = settled_connections(browser.port, 2, "the task's and the popup watcher's");
    let mut cmd = std::process::Command::new(node);
    cmd.arg(&script)
        .args([&ep.http_url, &server.url("127.0.0.1", "/two")])
        .current_dir(&dir);
    let output = crate::mcp_python_sdk::run_bounded(cmd, Duration::from_secs(60)).expect("node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "chrome-remote-interface failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let v: Value = serde_json::from_str(stdout.trim().lines().last().unwrap()).expect("JSON");
    eprintln!("chrome-remote-interface on the task's page: {v}");
    let token = ep.http_url.rsplit('/').next().unwrap();
    assert!(
        v["ws"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{token}/devtools/page/{page}")),
        "{v}"
    );
    assert_eq!(v["evaluate"], 42);
    assert_eq!(v["title"], "Two");
    assert_eq!(v["dialog"], "Who?");
    assert_eq!(v["answer"], "Ann");
    // Without `local: true` it asks the endpoint's root for /json/protocol: told what to do.
    let default = v["default_options"].as_str().unwrap_or_default();
    assert!(default.contains("local: true"), "{v}");
    let closed = sup.snapshot().recent_dialogs.last().map(|d| d.closed_by);
    assert_eq!(closed, Some(ClosedBy::Client));
    settled_connections(browser.port, upstream, "after the clients");
    reg.stop("cri");
}

/// Puppeteer's `browser.close()` through the endpoint (`mux/life.rs`): the page it opened is
/// closed and it is disconnected, while the browser, the task's page and its supervisor go on,
/// and a second Puppeteer does the same through the same endpoint.
#[test]
fn puppeteer_browser_close_closes_its_pages_and_leaves_the_tasks_browser_open() {
    let Some((node, dir, script)) = node_script("close.mjs") else {
        return;
    };
    let browser = Browser::launch().expect("launch Chromium");
    let server = pages();
    let reg = SupervisorRegistry::new(Config::default());
    let sup = reg
        .start(
            StartRequest::new("bclose", &browser.ws_url)
                .with_options(StartOptions::default().with_new_page(true)),
        )
        .expect("start");
    let page = sup.snapshot().page_target_id.clone().expect("the page");
    let ep = reg.cdp_endpoint("bclose").expect("the endpoint");
    let new_url = server.url("127.0.0.1", "/two");
    let mut direct = RawCdp::connect(&browser.ws_url).expect("a direct connection");
    let pages_now = |direct: &mut RawCdp| -> Vec<(String, String)> {
        let v = direct
            .call("Target.getTargets", json!({}), None, T)
            .expect("getTargets");
        let infos = v["targetInfos"].as_array().cloned().unwrap_or_default();
        infos
            .iter()
            .filter(|i| i["type"] == "page")
            .map(|i| {
                let s = |k: &str| i[k].as_str().unwrap_or("").to_string();
                (s("targetId"), s("url"))
            })
            .collect()
    };
    for run in 1..=2 {
        let mut cmd = std::process::Command::new(&node);
        cmd.arg(&script)
            .args([&ep.ws_url, &new_url])
            .current_dir(&dir);
        let output =
            crate::mcp_python_sdk::run_bounded(cmd, Duration::from_secs(60)).expect("node ran");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "run {run}: puppeteer failed: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let v: Value = serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap();
        eprintln!("run {run}: puppeteer saw {v}");
        assert_eq!(v["title"], "Two", "{v}");
        assert_eq!(v["pages"], 2, "the task's page and its own: {v}");
        assert_eq!(v["connected"], false, "{v}");
        // Its page is closed (fire and forget: awaited), the task's is there.
        let left = common::wait_until(T, || {
            let left = pages_now(&mut direct);
            (!left.iter().any(|(_, url)| url == &new_url)).then_some(left)
        })
        .unwrap_or_else(|| panic!("run {run}: the page it opened is not closed"));
        assert!(left.iter().any(|(id, _)| id == &page), "{left:?}");
        let snap = sup.snapshot();
        assert_eq!(snap.state, cdp_supervisor::SupervisorState::Active);
        assert_eq!(snap.page_target_id.as_deref(), Some(page.as_str()));
    }
    // A page client's Browser.close (on Chromium's page socket it closes the whole browser)
    // ends that client only.
    let http = reg.cdp_endpoint("bclose").expect("the endpoint").http_url;
    let ws = entry(&http, &page).expect("the task's page is listed")["webSocketDebuggerUrl"]
        .as_str()
        .expect("its socket")
        .to_string();
    let mut pc = RawCdp::connect(&ws).expect("a page client");
    assert_eq!(pc.call("Browser.close", json!({}), None, T), Ok(json!({})));
    let after = pc.call("Runtime.evaluate", json!({"expression": "1"}), None, T);
    assert!(after.is_err(), "the page client is disconnected: {after:?}");
    let version = direct.call("Browser.getVersion", json!({}), None, T);
    assert!(version.is_ok(), "the browser is open: {version:?}");
    assert_eq!(
        sup.snapshot().state,
        cdp_supervisor::SupervisorState::Active
    );
    reg.stop("bclose");
}

/// Chromium's `/json/new`, `/json/activate/<id>` and `/json/close/<id>` under the task's token,
/// with Chromium's answers: a page opened by `/json/new` joins the task (followed: its dialog
/// is caught) and its socket is served; only the task's targets can be activated or closed.
#[test]
fn json_new_activate_and_close_act_on_the_tasks_targets_as_on_chromium() {
    if common::chromium_path().is_none() && !common::e2e_required() {
        eprintln!("SKIPPED: no Chromium");
        return;
    }
    let browser = common::shared_browser().expect("Chromium");
    let server = pages();
    let reg = SupervisorRegistry::new(Config::default());
    let start = |id: &str| {
        reg.start(
            StartRequest::new(id, &browser.ws_url)
                .with_options(StartOptions::default().with_new_page(true)),
        )
        .expect("start")
    };
    let sup = start("jn");
    let other = start("jn-other");
    let others_page = other.snapshot().page_target_id.clone().expect("its page");
    let http = reg.cdp_endpoint("jn").expect("the endpoint").http_url;
    let (status, body) = get(&http, "/json/new", &[]);
    assert_eq!(
        (status, body.as_str()),
        (
            405,
            "Using unsafe HTTP verb GET to invoke /json/new. This action supports only PUT verb."
        )
    );
    let url = server.url("127.0.0.1", "/two");
    let (status, body) = request("PUT", &http, &format!("/json/new?{url}"), &[]);
    assert_eq!(status, 200, "{body}");
    let created: Value = serde_json::from_str(&body).expect("JSON");
    let id = created["id"].as_str().expect("its id").to_string();
    assert_eq!(
        (created["type"].as_str(), created["url"].as_str()),
        (Some("page"), Some(url.as_str()))
    );
    let ws = created["webSocketDebuggerUrl"]
        .as_str()
        .expect("its socket");
    assert!(
        ws.ends_with(&format!("/devtools/page/{id}"))
            && ws.contains(http.rsplit('/').next().unwrap()),
        "{ws}"
    );
    sup.wait_for(T, |s| s.pages.iter().any(|p| p.target_id == id))
        .expect("the page joins the task (followed)");
    assert!(entry(&http, &id).is_some(), "/json/list lists it");
    // Its socket is the task's; its dialog is caught.
    let mut page = RawCdp::connect(ws).expect("its page socket");
    eval(&mut page, "setTimeout(() => alert('from json/new'), 0); 1").expect("evaluate");
    let snap = sup
        .wait_for(T, |s| {
            s.pending_dialogs
                .iter()
                .any(|d| d.message == "from json/new")
        })
        .expect("the dialog is caught");
    let dialog = snap.pending_dialogs[0].id.clone();
    sup.respond_to_dialog(cdp_supervisor::DialogAction::Accept, None, Some(&dialog))
        .expect("answer");
    drop(page);
    let (status, body) = get(&http, "/json/protocol", &[]);
    assert!(
        status == 404 && body.contains("local: true"),
        "{status} {body}"
    );
    // At the root, outside the task's token (where chrome-remote-interface asks when it is given
    // a WebSocket URL), the same answer; nothing else is served there.
    let root = format!(
        "http://{}",
        http.trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap()
    );
    let (status, body) = get(&root, "/json/protocol", &[]);
    assert!(
        status == 404 && body.contains("local: true"),
        "{status} {body}"
    );
    for path in ["/json/version", "/json/list", "/json"] {
        let (status, body) = get(&root, path, &[]);
        assert!(
            status == 404 && !body.contains("ws://"),
            "{path}: {status} {body}"
        );
    }
    // A file URL is refused by the task's security policy, as a client's createTarget is.
    let (status, body) = request("PUT", &http, "/json/new?file:///etc/passwd", &[]);
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("allow_file_urls"), "{body}");
    for (verb, path, want) in [
        (
            "GET",
            format!("/json/activate/{id}"),
            (200, "Target activated".to_string()),
        ),
        (
            "PUT",
            "/json/activate/NOPE".into(),
            (404, "No such target id: NOPE".into()),
        ),
        (
            "GET",
            format!("/json/activate/{others_page}"),
            (404, format!("No such target id: {others_page}")),
        ),
        (
            "GET",
            format!("/json/close/{others_page}"),
            (404, format!("No such target id: {others_page}")),
        ),
        (
            "GET",
            format!("/json/close/{id}"),
            (200, "Target is closing".into()),
        ),
    ] {
        assert_eq!(request(verb, &http, &path, &[]), want, "{verb} {path}");
    }
    common::wait_until(T, || entry(&http, &id).is_none().then_some(())).expect("the page closed");
    assert!(other.snapshot().page_target_id.as_deref() == Some(others_page.as_str()));
    reg.stop("jn");
    reg.stop("jn-other");
}
