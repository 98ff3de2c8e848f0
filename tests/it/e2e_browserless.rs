//! The registry against a real Browserless (issue 28 point 1): its popup watcher never connects
//! there. Browserless's root URL starts a browser per connection, and every WebSocket it serves,
//! a `/devtools/browser/<id>` joining a browser it runs included, takes a concurrency slot
//! (measured on 2.42: a second connection to a joined browser counts as `running` in
//! `/pressure`). So a task there is one connection: its browser goes when the task does, a
//! browser a script opened is released once the script and the task have left, and with
//! `CONCURRENT=1 QUEUED=1` a queued task connects once the first leaves. Popups are followed
//! by the task's own connection.
//!
//! Each test starts its own Browserless ([`Browserless::start`]: the pinned npm package on the
//! system Chromium, installed by `.ci/run`; skipped loudly when it is not installed, a failure
//! under `CDP_SUPERVISOR_E2E=require`) and counts this process's TCP connections to its port.

use cdp_supervisor::StartRequest;
use std::time::{Duration, Instant};

use crate::common::browserless::Browserless;
use crate::common::pages::{frozen_page_reported_then_closed, wait_pick};
use crate::common::{HttpServer, RawCdp, Response, js, procs, wait_until};
use cdp_supervisor::unversioned::follows_popups_itself;
use cdp_supervisor::{Config, DialogAction, Route, StartOptions, Supervisor, SupervisorRegistry};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(20);

fn registry() -> SupervisorRegistry {
    SupervisorRegistry::new(Config::default().with_reconnect_attempts(0).unwrap())
}

/// The task's page opens a popup of `srv`; once the task follows it (its document seen on the
/// task's own connection), the popup alerts `popup <tag>`, and the alert is caught and answered
/// there.
///
/// Not an alert while the popup loads: Browserless's own connection to its browser auto-attaches
/// every new page and resumes it at once (measured:
/// [`measure_browserless_resumes_a_popup_held_for_the_debugger_and_its_on_load_dialog_wedges_it`]),
/// so there a popup does not wait for the task's `Page.enable`, and an on-load dialog that opens
/// before that reaches Chromium is one no client can answer (it failed 1 run in 4 under CI's
/// load). README, "Browserless", says so.
fn popup_alert_is_caught(sup: &Supervisor, srv: &HttpServer, tag: &str) {
    let url = srv.url("127.0.0.1", &format!("/popup?{tag}"));
    let opened = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": format!("window.open({}) ? 1 : 0", js(&url)),
                   "userGesture": true, "returnByValue": true}),
            Route::Page,
            T,
        )
        .expect("window.open from the task's page");
    assert_eq!(opened["result"]["value"], 1, "{opened}");
    let popup = wait_pick(sup, T, "the popup followed", |s| {
        s.pages
            .iter()
            .find(|p| p.url == url && p.opener_target_id == s.page_target_id)
            .map(|p| p.target_id.clone())
    });
    let raised = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": format!("setTimeout(() => alert('popup {tag}')), 1")}),
            Route::Target(&popup),
            T,
        )
        .expect("the popup answers on the task's connection");
    assert_eq!(raised["result"]["value"], 1, "{raised}");
    let d = wait_pick(sup, T, "the popup's alert", |s| {
        s.pending_dialogs
            .iter()
            .find(|d| d.message == format!("popup {tag}"))
            .cloned()
    });
    assert_eq!(d.target_id, popup, "{d:?}");
    sup.respond_to_dialog(DialogAction::Accept, None, Some(&d.id))
        .expect("answer the popup's alert");
}

/// The first page `Target.getTargets` lists to client `c`.
fn first_page(c: &mut RawCdp) -> String {
    let targets = c.call("Target.getTargets", json!({}), None, T).unwrap();
    targets["targetInfos"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["type"] == "page"))
        .and_then(|t| t["targetId"].as_str())
        .expect("the browser's page")
        .to_string()
}

fn popups() -> HttpServer {
    HttpServer::start(|req| match req.path.as_str() {
        "/popup" => Response::html("<!doctype html><title>popup</title>popup".to_string()),
        "/alerts" => Response::html(
            "<!doctype html><title>popup</title><script>alert('on load')</script>".to_string(),
        ),
        _ => Response::not_found(),
    })
}

/// Waits until Browserless runs no browser; how long that took.
fn no_browser_within(bl: &Browserless, within: Duration, what: &str) -> Duration {
    let t0 = Instant::now();
    wait_until(within, || bl.browsers().is_empty().then_some(())).unwrap_or_else(|| {
        panic!(
            "{what}: Browserless still runs {:?} after {within:?}",
            bl.browsers()
        )
    });
    t0.elapsed()
}

#[test]
fn a_task_on_the_root_url_is_one_connection_and_its_browser_goes_with_it() {
    let Some(bl) = Browserless::start(10, 10) else {
        return;
    };
    let srv = popups();
    let reg = registry();
    for (i, url) in [bl.ws_url(), bl.http_url()].into_iter().enumerate() {
        let task = format!("bl-root-{i}");
        let sup = reg.get_or_start(&task, &url).expect("start on Browserless");
        assert!(
            follows_popups_itself(&sup),
            "{i}: no watcher: the task follows its popups"
        );
        assert_eq!(
            procs::connections_to(bl.port),
            1,
            "{i}: the task's connection alone"
        );
        assert_eq!(
            bl.browsers().len(),
            1,
            "{i}: one browser: {:?}",
            bl.browsers()
        );
        assert_eq!(
            bl.sessions_launched(),
            i + 1,
            "{i}: one browser started per task"
        );
        popup_alert_is_caught(&sup, &srv, &task);
        assert_eq!(procs::connections_to(bl.port), 1, "{i}: still one");
        assert!(reg.stop(&task));
        let took = no_browser_within(&bl, T, "after the task stopped");
        eprintln!("e2e_browserless: root URL ({i}): its browser gone {took:?} after the stop");
        assert_eq!(procs::connections_to(bl.port), 0);
    }
    assert_eq!(bl.pressure()["recentlyRejected"], 0, "{}", bl.pressure());
    // The http:// URL's discovery (the task's own) made Browserless read its version once.
    eprintln!(
        "e2e_browserless: root URL: {} browsers launched for /json/version",
        bl.version_launches()
    );
}

#[test]
fn a_browser_a_script_opened_is_released_once_the_script_and_the_task_have_left() {
    let Some(bl) = Browserless::start(10, 10) else {
        return;
    };
    let script = RawCdp::connect(&bl.ws_url()).expect("a script opens a browser");
    let browser = wait_until(T, || bl.browsers().into_iter().next()).expect("its browser");
    let id = browser["id"].as_str().expect("the browser's id");
    let endpoint = format!("ws://127.0.0.1:{}/devtools/browser/{id}", bl.port);
    let joined = format!("{endpoint}?token={}", bl.token);
    let reg = registry();
    let sup = reg
        .start(
            StartRequest::new("bl-joined", &joined)
                .with_options(StartOptions::default().with_new_page(true)),
        )
        .expect("the task joins the script's browser");
    assert!(follows_popups_itself(&sup), "no watcher on Browserless");
    assert_eq!(
        procs::connections_to(bl.port),
        2,
        "the script's and the task's"
    );
    let joined_browser = bl.browsers();
    assert_eq!(
        joined_browser.len(),
        1,
        "the script's browser: {joined_browser:?}"
    );
    assert_eq!(joined_browser[0]["numbConnected"], 2, "{joined_browser:?}");
    assert_eq!(bl.sessions_launched(), 1, "the script's alone");
    // Asking /json/version whether the URL is a browser's own endpoint (it is not: Browserless
    // names its root) makes Browserless launch a browser once in its life to read the version,
    // outside its sessions and slots, closed at once.
    assert!(bl.version_launches() <= 1, "{}", bl.version_launches());

    drop(script);
    wait_until(T, || {
        bl.browsers()
            .first()
            .is_some_and(|b| b["numbConnected"] == 1)
            .then_some(())
    })
    .unwrap_or_else(|| panic!("the script has left: {:?}", bl.browsers()));
    assert!(sup.is_active(), "the task keeps the browser");
    assert!(reg.stop("bl-joined"));
    let took = no_browser_within(&bl, T, "after the script and the task left");
    eprintln!("e2e_browserless: the joined browser released {took:?} after the task stopped");
    assert_eq!(procs::connections_to(bl.port), 0);
}

#[test]
fn with_one_slot_and_one_queued_the_queued_task_connects_once_the_first_leaves() {
    let Some(bl) = Browserless::start(1, 1) else {
        return;
    };
    let reg = registry();
    let first = reg
        .get_or_start("bl-first", &bl.ws_url())
        .expect("the first task");
    assert!(first.is_active());
    assert_eq!(
        procs::connections_to(bl.port),
        1,
        "the one slot is the task's"
    );
    assert_eq!(bl.sessions_launched(), 1);
    std::thread::scope(|s| {
        let queued = s.spawn(|| {
            let t0 = Instant::now();
            let r = reg.get_or_start("bl-queued", &bl.ws_url());
            (r, t0.elapsed())
        });
        wait_until(T, || (bl.pressure()["queued"] == 1).then_some(()))
            .unwrap_or_else(|| panic!("the second task waits in the queue: {}", bl.pressure()));
        let left = Instant::now();
        assert!(reg.stop("bl-first"));
        let (r, waited) = queued.join().expect("the queued start");
        let sup = r.unwrap_or_else(|e| {
            panic!(
                "the queued task connects once the first leaves: {e}\n{}",
                bl.log_tail()
            )
        });
        assert!(sup.is_active());
        eprintln!(
            "e2e_browserless: the queued task started {:?} after the first left (waited {waited:?})",
            left.elapsed()
        );
    });
    let p: Value = bl.pressure();
    assert_eq!(p["recentlyRejected"], 0, "nothing refused: {p}");
    assert_eq!(p["running"], 1, "{p}");
    assert_eq!(procs::connections_to(bl.port), 1, "the queued task's alone");
    assert_eq!(bl.sessions_launched(), 2, "one per task");
    reg.stop_all();
    no_browser_within(&bl, T, "after the last task stopped");
}

/// The case the measurement below shows, end to end on Browserless: a script's page opens a
/// popup (another site) whose on-load alert opens with nobody's `Page` enabled (Browserless's own connection let
/// it run), so no client can answer it. A task that joins the script's browser on that page
/// follows the popup, and 2 s later `blocked` names it (`unresponsive`); the task's page still
/// answers; closing the popup clears `blocked`.
#[test]
fn a_popup_frozen_before_the_task_came_is_reported_and_closing_it_clears_it() {
    let Some(bl) = Browserless::start(10, 10) else {
        return;
    };
    let srv = popups();
    let mut script = RawCdp::connect(&bl.ws_url()).expect("a script opens a browser");
    let page = first_page(&mut script);
    let session = script.attach(&page).expect("attach its page");
    // The page on one site, the popup on another: two renderers. (From `about:blank` the popup
    // shares the page's renderer, and its alert freezes the page too: the start's own probe
    // then reports the page, `orphaned_dialog`, naming the popup in `target_ids`: see
    // `e2e_popups::a_same_site_popup_frozen_before_the_task_came_is_named_when_the_page_is_found_blocked`.)
    let opener = srv.url("127.0.0.1", "/popup?opener");
    let go = json!({"url": opener});
    script.call("Page.navigate", go, Some(&session), T).unwrap();
    wait_until(T, || {
        let here = script.evaluate(&session, "location.href", T).ok()?;
        (here == opener.as_str()).then_some(())
    })
    .expect("the page on its site");
    let url = srv.url("localhost", "/alerts");
    let open =
        json!({"expression": format!("window.open({}) ? 1 : 0", js(&url)), "userGesture": true});
    script
        .call("Runtime.evaluate", open, Some(&session), T)
        .unwrap();
    // Its title comes before its script; then a call into it hangs once the alert is open.
    let popup = wait_until(T, || {
        let t = script.call("Target.getTargets", json!({}), None, T).ok()?;
        let p = t["targetInfos"]
            .as_array()?
            .iter()
            .find(|t| t["openerId"] == page.as_str() && t["title"] == "popup")?;
        p["targetId"].as_str().map(str::to_string)
    })
    .expect("the popup, parsed up to its script");
    let ps = script.attach(&popup).expect("attach to the popup");
    wait_until(T, || {
        let r = script.evaluate(&ps, "1", Duration::from_millis(300));
        r.is_err().then_some(())
    })
    .expect("the popup's alert froze it");
    let _ = script.call("Target.detachFromTarget", json!({"sessionId": ps}), None, T);

    let browser = wait_until(T, || bl.browsers().into_iter().next()).expect("its browser");
    let id = browser["id"].as_str().expect("the browser's id");
    let joined = format!(
        "ws://127.0.0.1:{}/devtools/browser/{id}?token={}",
        bl.port, bl.token
    );
    let reg = registry();
    let t0 = Instant::now();
    let sup = reg
        .start(
            StartRequest::new("bl-frozen", &joined)
                .with_options(StartOptions::default().with_target_id(page.clone())),
        )
        .expect("the task joins the script's browser on its page");
    let blocked = wait_pick(&sup, T, "blocked naming the popup", |s| s.blocked.clone());
    eprintln!(
        "e2e_browserless: the frozen popup reported {:?} after the start",
        t0.elapsed()
    );
    frozen_page_reported_then_closed(&sup, &blocked, &popup, T);
    assert!(reg.stop("bl-frozen"));
    drop(script);
    no_browser_within(&bl, T, "after the script and the task left");
}

/// Measured on Browserless 2.42.0 with Chromium 156: a client that holds a new popup paused
/// (browser-level `Target.setAutoAttach {waitForDebuggerOnStart: true}`, and no
/// `Runtime.runIfWaitingForDebugger`) does not hold it there: Browserless's own connection to its
/// browser auto-attaches every page and resumes it, and the popup loads anyway. Its on-load
/// alert then opens with nobody's `Page` enabled: the client's `Page.enable` and
/// `Runtime.evaluate` on it hang, `Page.handleJavaScriptDialog` answers "No dialog is showing"
/// (SPEC §11), and `Target.closeTarget` ends it.
#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn measure_browserless_resumes_a_popup_held_for_the_debugger_and_its_on_load_dialog_wedges_it() {
    let Some(bl) = Browserless::start(10, 10) else {
        return;
    };
    let srv = popups();
    let mut c = RawCdp::connect(&bl.ws_url()).expect("a client of Browserless");
    let page = first_page(&mut c);
    let session = c.attach(&page).expect("attach its page");
    let hold = json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true});
    c.call("Target.setAutoAttach", hold, None, T).unwrap();
    let url = srv.url("127.0.0.1", "/alerts");
    let open =
        json!({"expression": format!("window.open({}) ? 1 : 0", js(&url)), "userGesture": true});
    c.call("Runtime.evaluate", open, Some(&session), T).unwrap();
    let att = c
        .wait_event_where(T, |e| {
            e["method"] == "Target.attachedToTarget"
                && e["params"]["targetInfo"]["openerId"] == page.as_str()
        })
        .expect("the popup, attached");
    assert_eq!(att["params"]["waitingForDebugger"], true, "{att}");
    let popup = att["params"]["targetInfo"]["targetId"]
        .as_str()
        .unwrap()
        .to_string();
    let popup_session = att["params"]["sessionId"].as_str().unwrap().to_string();
    let t0 = Instant::now();
    let loaded = wait_until(T, || {
        let info = c
            .call("Target.getTargetInfo", json!({"targetId": popup}), None, T)
            .ok()?;
        (info["targetInfo"]["title"] == "popup").then_some(t0.elapsed())
    })
    .expect("the popup loaded, though this client never resumed it");
    eprintln!("measure_browserless: the held popup loaded {loaded:?} after its attach");
    let short = Duration::from_secs(2);
    let enable = c.call("Page.enable", json!({}), Some(&popup_session), short);
    eprintln!("measure_browserless: Page.enable on it: {enable:?}");
    assert!(enable.is_err(), "Page.enable answered: {enable:?}");
    let answer = json!({"accept": true});
    let handled = c.call(
        "Page.handleJavaScriptDialog",
        answer,
        Some(&popup_session),
        short,
    );
    eprintln!("measure_browserless: Page.handleJavaScriptDialog: {handled:?}");
    assert!(
        handled
            .as_ref()
            .is_err_and(|e| e.contains("No dialog is showing")),
        "{handled:?}"
    );
    let closed = c.call("Target.closeTarget", json!({"targetId": popup}), None, T);
    eprintln!("measure_browserless: Target.closeTarget: {closed:?}");
    assert_eq!(closed.expect("closeTarget")["success"], true);
}
