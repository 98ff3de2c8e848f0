//! Measurement (issue 14 step 1): how a popup gets attached before its scripts run.
use crate::common;
use cdp_supervisor::StartRequest;

use std::time::Duration;

use crate::common::{HttpServer, RawCdp, Response};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(10);

fn server() -> HttpServer {
    HttpServer::start(|req| match req.path.as_str() {
        "/popup" => Response::html(
            "<!doctype html><title>Popup</title><script>var r = alert('hello from popup'); document.title='after';</script>",
        ),
        _ => Response::html(
            "<!doctype html><title>Opener</title><a id=l href=/popup target=_blank>x</a>",
        ),
    })
}

fn dump(cdp: &mut RawCdp, secs: u64) -> Vec<Value> {
    let mut out = Vec::new();
    let end = std::time::Instant::now()
        .checked_add(Duration::from_secs(secs))
        .expect("a deadline within range");
    while let Ok(Some(m)) =
        cdp.next_message(end.saturating_duration_since(std::time::Instant::now()))
    {
        let sid = m
            .get("sessionId")
            .and_then(Value::as_str)
            .unwrap_or("-")
            .chars()
            .take(6)
            .collect::<String>();
        let p = m["params"].to_string();
        eprintln!(
            "  [{sid}] {} {}",
            m["method"].as_str().unwrap_or("<reply>"),
            &p[..p.len().min(260)]
        );
        out.push(m);
    }
    out
}

fn variant(name: &str, setup: impl Fn(&mut RawCdp, &str)) {
    let Some(b) = common::shared_browser() else {
        return;
    };
    let srv = server();
    let mut cdp = RawCdp::connect(&b.ws_url).unwrap();
    let (_tid, sid) = cdp.open_page(&srv.url("127.0.0.1", "/"), T).unwrap();
    eprintln!("=== {name}");
    cdp.call("Runtime.enable", json!({}), Some(&sid), T)
        .unwrap();
    setup(&mut cdp, &sid);
    cdp.clear_events();
    cdp.send_command("Runtime.evaluate", json!({"expression": format!("window.open('{}'); 1", srv.url("127.0.0.1", "/popup")), "userGesture": true}), Some(&sid)).unwrap();
    let msgs = dump(&mut cdp, 3);
    // Answer / resume whatever we attached to.
    for m in &msgs {
        if m["method"] == "Target.attachedToTarget" && m["params"]["targetInfo"]["type"] == "page" {
            let psid = m["params"]["sessionId"].as_str().unwrap().to_string();
            eprintln!(
                "  -> attached page session {psid}, waiting={}",
                m["params"]["waitingForDebugger"]
            );
            let _ = cdp.send_command("Page.enable", json!({}), Some(&psid));
            let _ = cdp.send_command("Runtime.runIfWaitingForDebugger", json!({}), Some(&psid));
            let _ = dump(&mut cdp, 2);
            let _ = cdp.send_command(
                "Page.handleJavaScriptDialog",
                json!({"accept": true}),
                Some(&psid),
            );
            let _ = dump(&mut cdp, 1);
            let _ = cdp.send_command(
                "Runtime.evaluate",
                json!({"expression":"document.title", "returnByValue": true}),
                Some(&psid),
            );
            let _ = dump(&mut cdp, 1);
        }
    }
}

#[test]
#[ignore = "a measurement (issue 14): run with --ignored --nocapture"]
fn a_page_session_auto_attach() {
    variant("page-session setAutoAttach (default filter)", |cdp, sid| {
        cdp.call(
            "Target.setAutoAttach",
            json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
            Some(sid),
            T,
        )
        .unwrap();
    });
}

#[test]
#[ignore = "a measurement (issue 14): run with --ignored --nocapture"]
fn b_page_session_auto_attach_filter() {
    variant("page-session setAutoAttach filter page", |cdp, sid| {
        cdp.call("Target.setAutoAttach", json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true,
            "filter": [{"type": "page", "exclude": false}, {"type": "iframe", "exclude": false}, {}]}), Some(sid), T).unwrap();
    });
}

#[test]
#[ignore = "a measurement (issue 14): run with --ignored --nocapture"]
fn c_discover_targets() {
    variant("browser setDiscoverTargets", |cdp, _sid| {
        cdp.call(
            "Target.setDiscoverTargets",
            json!({"discover": true}),
            None,
            T,
        )
        .unwrap();
    });
}

#[test]
#[ignore = "a measurement (issue 14): run with --ignored --nocapture"]
fn d_browser_auto_attach() {
    variant("browser setAutoAttach", |cdp, _sid| {
        cdp.call(
            "Target.setAutoAttach",
            json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
            None,
            T,
        )
        .unwrap();
    });
}

#[test]
#[ignore = "a measurement (issue 14): run with --ignored --nocapture"]
fn e_discover_then_attach_at_once() {
    let Some(b) = common::shared_browser() else {
        return;
    };
    let srv = server();
    let mut cdp = RawCdp::connect(&b.ws_url).unwrap();
    let (_tid, sid) = cdp.open_page(&srv.url("127.0.0.1", "/"), T).unwrap();
    eprintln!("=== setDiscoverTargets, attachToTarget + Page.enable as soon as targetCreated");
    cdp.call(
        "Target.setDiscoverTargets",
        json!({"discover": true}),
        None,
        T,
    )
    .unwrap();
    cdp.clear_events();
    cdp.send_command(
        "Runtime.evaluate",
        json!({"expression": format!("window.open('{}'); 1", srv.url("127.0.0.1", "/popup")), "userGesture": true}),
        Some(&sid),
    )
    .unwrap();
    let created = cdp
        .wait_event_where(T, |e| {
            e["method"] == "Target.targetCreated"
                && e["params"]["targetInfo"]["openerId"].is_string()
        })
        .expect("targetCreated");
    let tid = created["params"]["targetInfo"]["targetId"]
        .as_str()
        .unwrap()
        .to_string();
    cdp.send_command(
        "Target.attachToTarget",
        json!({"targetId": tid, "flatten": true}),
        None,
    )
    .unwrap();
    let attached = cdp
        .wait_event_where(T, |e| e["method"] == "Target.attachedToTarget")
        .expect("attached");
    let psid = attached["params"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    eprintln!(
        "  attached, waiting={}",
        attached["params"]["waitingForDebugger"]
    );
    let r = cdp.call(
        "Page.enable",
        json!({}),
        Some(&psid),
        Duration::from_secs(3),
    );
    eprintln!("  Page.enable -> {r:?}");
    let _ = dump(&mut cdp, 2);
    let _ = cdp.close_page(&tid);
}

#[test]
#[ignore = "a measurement (issue 14): run with --ignored --nocapture"]
fn f_browser_auto_attach_and_a_popup_written_by_its_opener() {
    let Some(b) = common::shared_browser() else {
        return;
    };
    let srv = server();
    let mut cdp = RawCdp::connect(&b.ws_url).unwrap();
    let (_tid, sid) = cdp.open_page(&srv.url("127.0.0.1", "/"), T).unwrap();
    eprintln!("=== browser setAutoAttach; the opener writes an alert into an about:blank popup");
    cdp.call(
        "Target.setAutoAttach",
        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
        None,
        T,
    )
    .unwrap();
    cdp.clear_events();
    cdp.send_command(
        "Runtime.evaluate",
        json!({"expression": "const w = window.open(''); w.document.write('<script>alert(\"written\")<\\/script>'); 'written'", "userGesture": true}),
        Some(&sid),
    )
    .unwrap();
    let msgs = dump(&mut cdp, 2);
    for m in &msgs {
        if m["method"] == "Target.attachedToTarget" {
            let psid = m["params"]["sessionId"].as_str().unwrap().to_string();
            eprintln!(
                "  -> attached {psid}, waiting={}",
                m["params"]["waitingForDebugger"]
            );
            let _ = cdp.send_command("Page.enable", json!({}), Some(&psid));
            let _ = cdp.send_command("Runtime.runIfWaitingForDebugger", json!({}), Some(&psid));
            let _ = dump(&mut cdp, 3);
        }
    }
}

#[test]
#[ignore = "a measurement (issue 14): run with --ignored --nocapture"]
fn g_cross_site_popup_closes_itself_while_its_iframe_shows_a_dialog() {
    if common::chromium_path().is_none() {
        return;
    }
    let b = common::Browser::launch().unwrap();
    let a_port = std::sync::Arc::new(std::sync::atomic::AtomicU16::new(0));
    let ap = a_port.clone();
    let srv = HttpServer::start(move |req| match req.path.as_str() {
        "/xframe" => Response::html("<!doctype html><script>confirm('frame?')</script>"),
        "/xpop" => Response::html(format!(
            "<!doctype html><iframe src=\"http://localhost:{}/xframe\"></iframe>",
            ap.load(std::sync::atomic::Ordering::SeqCst)
        )),
        _ => Response::html("<!doctype html><title>Opener</title>"),
    });
    a_port.store(srv.port(), std::sync::atomic::Ordering::SeqCst);
    let mut cdp = RawCdp::connect(&b.ws_url).unwrap();
    let (_tid, sid) = cdp.open_page(&srv.url("127.0.0.1", "/"), T).unwrap();
    cdp.call(
        "Target.setAutoAttach",
        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
        None,
        T,
    )
    .unwrap();
    cdp.clear_events();
    cdp.send_command(
        "Runtime.evaluate",
        json!({"expression": format!("window.open('{}'); 1", srv.url("127.0.0.1", "/xpop")), "userGesture": true}),
        Some(&sid),
    )
    .unwrap();
    let att = cdp
        .wait_event_where(T, |e| e["method"] == "Target.attachedToTarget")
        .unwrap();
    let psid = att["params"]["sessionId"].as_str().unwrap().to_string();
    for m in ["Page.enable", "Runtime.enable"] {
        cdp.send_command(m, json!({}), Some(&psid)).unwrap();
    }
    cdp.send_command(
        "Target.setAutoAttach",
        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
        Some(&psid),
    )
    .unwrap();
    cdp.send_command("Runtime.runIfWaitingForDebugger", json!({}), Some(&psid))
        .unwrap();
    // Resume the OOPIF when it comes.
    let oopif = cdp
        .wait_event_where(T, |e| {
            e["method"] == "Target.attachedToTarget"
                && e["params"]["targetInfo"]["type"] == "iframe"
        })
        .unwrap();
    let osid = oopif["params"]["sessionId"].as_str().unwrap().to_string();
    cdp.send_command("Runtime.runIfWaitingForDebugger", json!({}), Some(&osid))
        .unwrap();
    let d = cdp.wait_event_where(T, |e| e["method"] == "Page.javascriptDialogOpening");
    eprintln!("  dialog: {}", d.is_some());
    let r = cdp.call(
        "Runtime.evaluate",
        json!({"expression": "setTimeout(() => window.close(), 0); 1"}),
        Some(&psid),
        T,
    );
    eprintln!("  evaluate window.close -> {r:?}");
    let _ = dump(&mut cdp, 3);
    let alive = cdp.call("Browser.getVersion", json!({}), None, T);
    eprintln!("  browser alive: {}", alive.is_ok());
    eprintln!("  stderr tail: {}", b.stderr_tail());
}

#[test]
#[ignore = "a measurement (issue 14): run with --ignored --nocapture"]
fn h_the_same_with_a_supervisor() {
    if common::chromium_path().is_none() {
        return;
    }
    let b = common::Browser::launch().unwrap();
    let a_port = std::sync::Arc::new(std::sync::atomic::AtomicU16::new(0));
    let ap = a_port.clone();
    let srv = HttpServer::start(move |req| match req.path.as_str() {
        "/xframe" => Response::html("<!doctype html><script>confirm('frame?')</script>"),
        "/xpop" => Response::html(format!(
            "<!doctype html><iframe src=\"http://localhost:{}/xframe\"></iframe>",
            ap.load(std::sync::atomic::Ordering::SeqCst)
        )),
        _ => Response::html("<!doctype html><title>Opener</title>"),
    });
    a_port.store(srv.port(), std::sync::atomic::Ordering::SeqCst);
    let mut cdp = RawCdp::connect(&b.ws_url).unwrap();
    let (tid, sid) = cdp.open_page(&srv.url("127.0.0.1", "/"), T).unwrap();
    let reg = cdp_supervisor::SupervisorRegistry::new(cdp_supervisor::Config::default());
    let sup = reg
        .start(
            StartRequest::new("m", &b.ws_url)
                .with_options(cdp_supervisor::StartOptions::default().with_target_id(tid.clone())),
        )
        .unwrap();
    cdp.send_command(
        "Runtime.evaluate",
        json!({"expression": format!("window.open('{}'); 1", srv.url("127.0.0.1", "/xpop")), "userGesture": true}),
        Some(&sid),
    )
    .unwrap();
    let snap = sup
        .wait_for(T, |s| !s.pending_dialogs.is_empty())
        .expect("dialog");
    let d = snap.pending_dialogs[0].clone();
    eprintln!("  dialog {} in {}", d.id, d.target_id);
    let r = sup.call(
        "Runtime.evaluate",
        json!({"expression": "setTimeout(() => window.close(), 0); 1"}),
        cdp_supervisor::Route::Target(&d.target_id),
        T,
    );
    eprintln!("  evaluate window.close -> {r:?}");
    let s = sup.wait_for(T, |s| s.pages.len() == 1);
    eprintln!("  pages back to 1: {}", s.is_some());
    eprintln!("  snapshot: {}", sup.snapshot().to_json());
    let alive = cdp.call("Browser.getVersion", json!({}), None, T);
    eprintln!("  browser alive: {}", alive.is_ok());
    eprintln!("  stderr tail: {}", b.stderr_tail());
}

#[test]
#[ignore = "a measurement (issue 14): run with --ignored --nocapture"]
fn i_cross_site_popup_whose_iframe_is_same_site_with_the_opener_closes_itself() {
    if common::chromium_path().is_none() {
        return;
    }
    let b = common::Browser::launch().unwrap();
    let a_port = std::sync::Arc::new(std::sync::atomic::AtomicU16::new(0));
    let ap = a_port.clone();
    let srv = HttpServer::start(move |req| match req.path.as_str() {
        "/xframe" => Response::html("<!doctype html><script>confirm('frame?')</script>"),
        "/xpop" => Response::html(format!(
            "<!doctype html><iframe src=\"http://127.0.0.1:{}/xframe\"></iframe>",
            ap.load(std::sync::atomic::Ordering::SeqCst)
        )),
        _ => Response::html("<!doctype html><title>Opener</title>"),
    });
    a_port.store(srv.port(), std::sync::atomic::Ordering::SeqCst);
    let mut cdp = RawCdp::connect(&b.ws_url).unwrap();
    let (_tid, sid) = cdp.open_page(&srv.url("127.0.0.1", "/"), T).unwrap();
    cdp.call(
        "Target.setAutoAttach",
        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
        None,
        T,
    )
    .unwrap();
    cdp.clear_events();
    cdp.send_command(
        "Runtime.evaluate",
        json!({"expression": format!("window.open('{}'); 1", srv.url("localhost", "/xpop")), "userGesture": true}),
        Some(&sid),
    )
    .unwrap();
    let att = cdp
        .wait_event_where(T, |e| e["method"] == "Target.attachedToTarget")
        .unwrap();
    let psid = att["params"]["sessionId"].as_str().unwrap().to_string();
    for m in ["Page.enable", "Runtime.enable"] {
        cdp.send_command(m, json!({}), Some(&psid)).unwrap();
    }
    cdp.send_command(
        "Target.setAutoAttach",
        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
        Some(&psid),
    )
    .unwrap();
    cdp.send_command("Runtime.runIfWaitingForDebugger", json!({}), Some(&psid))
        .unwrap();
    // Resume the OOPIF when it comes.
    let oopif = cdp
        .wait_event_where(T, |e| {
            e["method"] == "Target.attachedToTarget"
                && e["params"]["targetInfo"]["type"] == "iframe"
        })
        .unwrap();
    let osid = oopif["params"]["sessionId"].as_str().unwrap().to_string();
    cdp.send_command("Runtime.runIfWaitingForDebugger", json!({}), Some(&osid))
        .unwrap();
    let d = cdp.wait_event_where(T, |e| e["method"] == "Page.javascriptDialogOpening");
    eprintln!("  dialog: {}", d.is_some());
    let r = cdp.call(
        "Runtime.evaluate",
        json!({"expression": "setTimeout(() => window.close(), 0); 1"}),
        Some(&psid),
        T,
    );
    eprintln!("  evaluate window.close -> {r:?}");
    let _ = dump(&mut cdp, 3);
    let alive = cdp.call("Browser.getVersion", json!({}), None, T);
    eprintln!("  browser alive: {}", alive.is_ok());
    eprintln!("  stderr tail: {}", b.stderr_tail());
}

#[test]
#[ignore = "a measurement (issue 14): run with --ignored --nocapture"]
fn j_noopener_and_rel_noopener_report_an_opener() {
    let Some(b) = common::shared_browser() else {
        return;
    };
    let srv = server();
    let mut cdp = RawCdp::connect(&b.ws_url).unwrap();
    let (_tid, sid) = cdp.open_page(&srv.url("127.0.0.1", "/"), T).unwrap();
    cdp.call(
        "Target.setAutoAttach",
        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
        None,
        T,
    )
    .unwrap();
    for expr in [
        "window.open('/blank', '_blank', 'noopener'); 1",
        "const a = document.createElement('a'); a.href = '/blank'; a.target = '_blank'; a.rel = 'noopener noreferrer'; document.body.append(a); a.click(); 1",
    ] {
        cdp.clear_events();
        cdp.send_command(
            "Runtime.evaluate",
            json!({"expression": expr, "userGesture": true}),
            Some(&sid),
        )
        .unwrap();
        let att = cdp.wait_event_where(T, |e| e["method"] == "Target.attachedToTarget");
        let info = att.as_ref().map(|a| a["params"]["targetInfo"].clone());
        eprintln!(
            "  {expr}\n    -> openerId={:?} openerFrameId={:?} waiting={:?}",
            info.as_ref().map(|i| i["openerId"].clone()),
            info.as_ref().map(|i| i["openerFrameId"].clone()),
            att.as_ref()
                .map(|a| a["params"]["waitingForDebugger"].clone())
        );
        if let Some(a) = att {
            let psid = a["params"]["sessionId"].as_str().unwrap().to_string();
            let _ = cdp.send_command("Runtime.runIfWaitingForDebugger", json!({}), Some(&psid));
            let _ = cdp.close_page(a["params"]["targetInfo"]["targetId"].as_str().unwrap());
        }
    }
}
