//! Issue 12, findings 3, 7 and 13, on real Chromium: an answer that lands on another dialog
//! than it named (through a proxy that delays every frame by 150 ms, like a hosted browser), a
//! busy page that must not be reported as an orphaned dialog, and an orphaned dialog inside a
//! cross-origin iframe that must be reported as `blocked` naming the frame.

use crate::common;
use cdp_supervisor::StartRequest;

use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::pages::{attach_to_page, wait_closed, wait_pick};
use crate::common::{HttpServer, RawCdp, Response};
use cdp_supervisor::{
    ClosedBy, Config, DialogAction, Error, Route, StartOptions, SupervisorRegistry, tools,
};
use serde_json::{Value, json};
use tungstenite::protocol::Role;
use tungstenite::{Message, WebSocket};

const T: Duration = Duration::from_secs(10);

const PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>hardening</title></head>
<body><script>
function report(v) { fetch('/report?' + encodeURIComponent(v)); }
</script></body></html>"#;

/// A page whose cross-site iframe (`localhost` inside `127.0.0.1`) is an OOPIF.
const PAGE_WITH_AD: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>ad</title></head>
<body><script>
const f = document.createElement('iframe');
f.src = 'http://localhost:' + location.port + '/ad';
document.body.appendChild(f);
</script></body></html>"#;

const AD: &str = r#"<!doctype html><html><body>ad</body></html>"#;

fn server() -> HttpServer {
    HttpServer::start(|req| match req.path.as_str() {
        "/" => Response::html(PAGE),
        "/with-ad" => Response::html(PAGE_WITH_AD),
        "/ad" => Response::html(AD),
        _ => Response::not_found(),
    })
}

// ------------------------------------------------------------------- a delaying proxy

/// A WebSocket proxy between one client and Chromium that delivers every text frame 150 ms
/// after it read it, in order, in both directions (a latency, not a bandwidth limit: a reader
/// and a writer thread per direction). Frames from the client that contain `watch` are also
/// reported on `seen` when they are read, so a test knows an answer is in flight.
struct DelayProxy {
    port: u16,
    seen: crossbeam_channel::Receiver<String>,
}

impl DelayProxy {
    fn start(upstream: &str, delay: Duration, watch: &'static str) -> DelayProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        let upstream = upstream.to_string();
        let (seen_tx, seen) = crossbeam_channel::unbounded();
        thread::spawn(move || {
            // One connection: the supervisor's (no reconnect in these tests).
            let Ok((client, _)) = listener.accept() else {
                return;
            };
            client.set_nodelay(true).unwrap();
            let handshake = client.try_clone().unwrap();
            let Ok(_ws) = tungstenite::accept(handshake) else {
                return;
            };
            let authority = upstream
                .strip_prefix("ws://")
                .and_then(|r| r.split('/').next())
                .unwrap()
                .to_string();
            let browser = TcpStream::connect(&authority).expect("connect to Chromium");
            browser.set_nodelay(true).unwrap();
            let (_up, _) = tungstenite::client(upstream.as_str(), browser.try_clone().unwrap())
                .expect("upgrade to Chromium");
            let half = |s: &TcpStream, role| {
                WebSocket::from_raw_socket(s.try_clone().unwrap(), role, None)
            };
            pump(
                half(&client, Role::Server),
                half(&browser, Role::Client),
                browser.try_clone().unwrap(),
                delay,
                Some((watch, seen_tx)),
            );
            pump(
                half(&browser, Role::Client),
                half(&client, Role::Server),
                client.try_clone().unwrap(),
                delay,
                None,
            );
        });
        DelayProxy { port, seen }
    }

    fn ws_url(&self, upstream: &str) -> String {
        let path = upstream
            .strip_prefix("ws://")
            .and_then(|r| r.find('/').map(|i| &r[i..]))
            .unwrap();
        format!("ws://127.0.0.1:{}{path}", self.port)
    }
}

/// Reads frames from `from` and writes each to `to` `delay` after it was read.
fn pump(
    mut from: WebSocket<TcpStream>,
    mut to: WebSocket<TcpStream>,
    to_socket: TcpStream,
    delay: Duration,
    watch: Option<(&'static str, crossbeam_channel::Sender<String>)>,
) {
    let (tx, rx) = crossbeam_channel::unbounded::<(Instant, Message)>();
    thread::spawn(move || {
        for (due, msg) in rx {
            // The delay is the point of this proxy: nothing to await but the clock.
            thread::sleep(due.saturating_duration_since(Instant::now()));
            if to.send(msg).is_err() {
                break;
            }
        }
        let _ = to_socket.shutdown(Shutdown::Both);
    });
    thread::spawn(move || {
        while let Ok(msg) = from.read() {
            match msg {
                Message::Text(ref t) => {
                    if let Some((w, seen)) = &watch
                        && t.as_str().contains(w)
                    {
                        let _ = seen.send(t.to_string());
                    }
                }
                Message::Binary(_) => {}
                Message::Close(_) => break,
                _ => continue,
            }
            if tx
                .send((
                    Instant::now()
                        .checked_add(delay)
                        .expect("a deadline within range"),
                    msg,
                ))
                .is_err()
            {
                break;
            }
        }
    });
}

// ------------------------------------------------------------------------ finding 3

#[test]
fn answer_in_flight_through_a_slow_proxy_lands_on_the_next_dialog_and_history_says_so() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let server = server();
    let url = server.url("127.0.0.1", "/");
    // The other client: direct, with Page enabled on the page, so it can answer dialogs.
    let mut other = RawCdp::connect(&browser.ws_url).expect("the other client");
    let (page, other_session) = other.open_page(&url, T).expect("open the page");
    let proxy = DelayProxy::start(
        &browser.ws_url,
        Duration::from_millis(150),
        "Page.handleJavaScriptDialog",
    );
    let reg = SupervisorRegistry::new(
        Config::default()
            .with_start_timeout(Duration::from_secs(20))
            .unwrap(),
    );
    let sup = attach_to_page(
        &reg,
        "slow",
        &proxy.ws_url(&browser.ws_url),
        &page,
        StartOptions::default(),
    );
    other
        .evaluate(
            &other_session,
            "setTimeout(() => { const a = confirm('Close this popup?'); \
             const b = confirm('Transfer $5000?'); report(JSON.stringify({a, b})); }, 0); 1",
            T,
        )
        .unwrap();
    let d1 = wait_pick(&sup, T, "d-1 pending", |s| {
        s.pending_dialogs.first().cloned()
    });
    assert_eq!(
        (d1.id.as_str(), d1.message.as_str()),
        ("d-1", "Close this popup?")
    );

    // The agent accepts d-1; while its answer is in the proxy, the other client dismisses d-1.
    let answering = {
        let sup = Arc::clone(&sup);
        thread::spawn(move || sup.respond_to_dialog(DialogAction::Accept, None, Some("d-1")))
    };
    proxy
        .seen
        .recv_timeout(T)
        .expect("the agent's answer reached the proxy");
    other
        .call(
            "Page.handleJavaScriptDialog",
            json!({"accept": false}),
            Some(&other_session),
            T,
        )
        .expect("the other client dismisses the first confirm");

    let page_got = server.wait_report_json(T);
    eprintln!("the page got {page_got}");
    assert_eq!(
        page_got,
        json!({"a": false, "b": true}),
        "the scenario's race"
    );
    let result = answering.join().unwrap();
    let err = result.expect_err("the answer did not reach d-1");
    match &err {
        Error::AnswerAppliedToOtherDialog { named, received } => {
            assert_eq!(named, "d-1");
            assert_eq!(received.id, "d-2");
            assert_eq!(received.message, "Transfer $5000?");
        }
        other => panic!("wrong error: {other}"),
    }
    let c1 = wait_closed(&sup, T, "d-1");
    let c2 = wait_closed(&sup, T, "d-2");
    eprintln!(
        "history: d-1 {} accepted {:?}, d-2 {} accepted {:?}",
        c1.closed_by, c1.accepted, c2.closed_by, c2.accepted
    );
    assert_eq!(c1.closed_by, ClosedBy::Remote);
    assert_eq!(c2.closed_by, ClosedBy::Agent);
    // The history agrees with what the page got.
    assert_eq!(c1.accepted, page_got["a"].as_bool());
    assert_eq!(c2.accepted, page_got["b"].as_bool());
    reg.stop("slow");
    let _ = other.close_page(&page);
}

// ------------------------------------------------------------------------ finding 7

#[test]
fn busy_page_is_reported_unresponsive_never_as_an_orphaned_dialog() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let server = server();
    let url = server.url("127.0.0.1", "/");
    let mut a = RawCdp::connect(&browser.ws_url).expect("client A");
    let (page, session) = a.open_page(&url, T).expect("open the page");
    a.evaluate(
        &session,
        "setTimeout(() => { const end = Date.now() + 8000; while (Date.now() < end) {} \
         report('idle'); }, 0); 1",
        T,
    )
    .unwrap();
    drop(a);

    let start_timeout = Duration::from_secs(7);
    let reg = SupervisorRegistry::new(Config::default().with_start_timeout(start_timeout).unwrap());
    let t = Instant::now();
    let sup = reg
        .start(
            StartRequest::new("busy", &browser.ws_url)
                .with_options(StartOptions::default().with_target_id(page.clone())),
        )
        .expect("start returns instead of hanging");
    let took = t.elapsed();
    let snap = sup.snapshot();
    eprintln!(
        "start on a busy page returned after {took:?}: {:?}",
        snap.blocked
    );
    let blocked = snap.blocked.clone().expect("blocked is published");
    assert_eq!(blocked.reason, "unresponsive", "{blocked:?}");
    assert!(blocked.hint.contains("busy") && blocked.hint.contains("Wait"));
    let j = tools::browser_snapshot(&reg, "busy", &json!({}));
    assert_eq!(j["blocked"]["reason"], "unresponsive", "{j}");
    let r = tools::browser_dialog(&reg, "busy", &json!({"action": "accept"}));
    assert_eq!(r["success"], false, "{r}");
    let err = r["error"].as_str().unwrap();
    assert!(
        !err.contains("opened by a CDP client that has disconnected;"),
        "{err}"
    );
    assert!(err.contains("busy"), "{err}");

    // The script ends; the page answers again and blocked goes away by itself.
    assert_eq!(server.wait_report(T).as_deref(), Some("idle"));
    let s = sup
        .wait_for(T, |s| s.blocked.is_none() && s.frame_tree.top.is_some())
        .unwrap_or_else(|| panic!("still blocked: {}", sup.snapshot().to_json()));
    assert!(s.is_active());
    reg.stop("busy");
    let mut c = RawCdp::connect(&browser.ws_url).unwrap();
    let _ = c.close_page(&page);
}

// ------------------------------------------------------------------------ finding 13

#[test]
fn orphaned_dialog_in_a_cross_origin_iframe_is_blocked_naming_the_frame_until_reload() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let server = server();
    let url = server.url("127.0.0.1", "/with-ad");
    // Client A enables Page on the page, attaches to the OOPIF, raises a prompt there and
    // goes away without answering it.
    let (page, ad_frame) = {
        let mut a = RawCdp::connect(&browser.ws_url).expect("client A");
        let (page, session) = a.open_page(&url, T).expect("open the page");
        a.call(
            "Target.setAutoAttach",
            json!({"autoAttach": true, "waitForDebuggerOnStart": false, "flatten": true}),
            Some(&session),
            T,
        )
        .unwrap();
        let ev = a
            .wait_event_where(T, |e| {
                e["method"] == "Target.attachedToTarget"
                    && e["params"]["targetInfo"]["type"] == "iframe"
            })
            .expect("the OOPIF attached");
        let ad_session = ev["params"]["sessionId"].as_str().unwrap().to_string();
        let ad_frame = ev["params"]["targetInfo"]["targetId"]
            .as_str()
            .unwrap()
            .to_string();
        a.call("Page.enable", json!({}), Some(&ad_session), T)
            .unwrap();
        a.evaluate(
            &ad_session,
            "setTimeout(() => prompt('Re-enter your password', ''), 0); 1",
            T,
        )
        .unwrap();
        a.wait_event_where(T, |e| e["method"] == "Page.javascriptDialogOpening")
            .expect("the prompt opened in the OOPIF");
        (page, ad_frame)
    };

    let reg = SupervisorRegistry::new(
        Config::default()
            .with_start_timeout(Duration::from_secs(8))
            .unwrap(),
    );
    let t = Instant::now();
    let sup = attach_to_page(&reg, "ad", &browser.ws_url, &page, StartOptions::default());
    let snap = sup.snapshot();
    eprintln!(
        "start with a wedged OOPIF returned after {:?}: {:?}",
        t.elapsed(),
        snap.blocked
    );
    let blocked = snap.blocked.clone().expect("blocked is published");
    assert_eq!(blocked.reason, "orphaned_dialog");
    assert_eq!(blocked.frame_id.as_deref(), Some(ad_frame.as_str()));
    assert!(blocked.hint.contains("Page.reload"), "{}", blocked.hint);
    let j = tools::browser_snapshot(&reg, "ad", &json!({}));
    assert_eq!(j["blocked"]["frame_id"], json!(ad_frame), "{j}");
    // The page itself still answers.
    sup.call(
        "Runtime.evaluate",
        json!({"expression": "1 + 1", "returnByValue": true}),
        Route::Target(&page),
        T,
    )
    .expect("the main frame answers");

    // The hint works: reloading the page clears it.
    let r = tools::browser_cdp(
        &reg,
        "ad",
        &json!({"method": "Page.reload", "target_id": page}),
    );
    assert_eq!(r["success"], true, "{r}");
    wait_pick(&sup, T, "no longer blocked", |s| {
        s.blocked.is_none().then_some(())
    });
    // The reload replaces the iframe: look for the new OOPIF (the old one may linger in the
    // tree for a moment while its session goes away) until it answers.
    let v: Value = common::wait_until(T, || {
        let oopif = sup
            .snapshot()
            .frame_tree
            .children
            .iter()
            .find(|f| f.is_oopif && f.session_id.is_some() && f.frame_id != ad_frame)?
            .frame_id
            .clone();
        sup.call(
            "Runtime.evaluate",
            json!({"expression": "location.origin.replace(/:\\d+$/, '')", "returnByValue": true}),
            Route::Frame(&oopif),
            Duration::from_secs(2),
        )
        .ok()
        .filter(|v| v["result"]["value"].is_string())
    })
    .unwrap_or_else(|| panic!("no new OOPIF answers: {}", sup.snapshot().to_json()));
    assert_eq!(v["result"]["value"], "http://localhost", "{v}");
    reg.stop("ad");
    let mut c = RawCdp::connect(&browser.ws_url).unwrap();
    let _ = c.close_page(&page);
}
