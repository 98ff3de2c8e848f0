//! Measurement (issue 28 items 4 and 9), ignored: what Chromium does
//! * when a popup nobody watches alerts: whether calls into its opener hang, what a fresh
//!   client attached to the popup sees (input probe, `Page.enable`, `handleJavaScriptDialog`),
//!   and what clears it;
//! * with `Target.*` methods sent on a page session instead of the browser's;
//! * with probes of a renderer that is idle, busy or frozen, and what a page sees of them.
use crate::common;

use std::time::{Duration, Instant};

use crate::common::{HttpServer, RawCdp, Response, wait_until};
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

/// Event types a page may listen to, to see a probe: what `LISTEN` records.
const LISTEN: &str = "((d, s, p) => { s.ev = []; if (d.listening) return; d.listening = 1; for (const t of ['mousemove', 'pointermove', \
    'pointerrawupdate', 'mouseover', 'mouseout', 'mouseenter', 'mouseleave', 'pointerover', \
    'pointerout', 'pointerenter', 'pointerleave', 'pointercancel', 'touchstart', 'touchend', \
    'touchcancel', 'mousedown', 'mouseup', 'wheel', 'keydown', 'keypress', 'keyup', \
    'beforeinput', 'input', 'textInput', 'compositionstart', 'compositionupdate', \
    'compositionend', 'dragenter', 'dragover', 'dragleave', 'drop', 'scroll', 'focus', \
    'blur', 'pointerdown', 'pointerup', 'click', 'contextmenu', 'gotpointercapture']) d.addEventListener(t, e => \
    s.ev.push(p + t + '@' + e.clientX + ',' + e.clientY), {capture: true, passive: true}); })";

/// What a page shows of a probe: its events since `LISTEN`, and whether `#t` is hovered.
const SEEN: &str = "JSON.stringify({ev: document.ev, hover: document.querySelector('#t').matches(':hover'), \
    value: document.querySelector('#i').value, focused: document.activeElement.id})";

/// A page with one element, `#t`, at (0, 0)-(300, 300), styled on `:hover`.
const HOVER_PAGE: &str = "<!doctype html><html><head><title>Hover</title><style>#t:hover \
    {background: red}</style></head><body style=\"margin:0\"><div id=\"t\" style=\"width:300px;\
    height:300px;background:#ccc\">t</div><input id=\"i\" value=\"v\"></body></html>";

/// The candidate probes: (label, method, params, sent on the session rather than the browser).
fn probes() -> Vec<(&'static str, &'static str, Value, bool)> {
    let on_page = |label, method, params| (label, method, params, true);
    vec![
        ("browser", "Browser.getVersion", json!({}), false),
        on_page("isolate", "Runtime.getIsolateId", json!({})),
        on_page("evaluate", "Runtime.evaluate", json!({"expression": "1"})),
        on_page("heap", "Runtime.getHeapUsage", json!({})),
        on_page("dom-counters", "Memory.getDOMCounters", json!({})),
        on_page("layout", "Page.getLayoutMetrics", json!({})),
        on_page("frame-tree", "Page.getFrameTree", json!({})),
        on_page("history", "Page.getNavigationHistory", json!({})),
        on_page("metrics", "Performance.getMetrics", json!({})),
        on_page(
            "breakpoints-active",
            "Debugger.setBreakpointsActive",
            json!({"active": true}),
        ),
        on_page(
            "stack-trace",
            "Debugger.getStackTrace",
            json!({"stackTraceId": {"id": "1"}}),
        ),
        on_page(
            "run-if-waiting",
            "Runtime.runIfWaitingForDebugger",
            json!({}),
        ),
        on_page(
            "touch-cancel",
            "Input.dispatchTouchEvent",
            json!({"type": "touchCancel", "touchPoints": []}),
        ),
        on_page(
            "mouse-move",
            "Input.dispatchMouseEvent",
            json!({"type": "mouseMoved", "x": -1, "y": -1}),
        ),
        on_page(
            "ime-empty",
            "Input.imeSetComposition",
            json!({"text": "", "selectionStart": 0, "selectionEnd": 0}),
        ),
        on_page("insert-empty", "Input.insertText", json!({"text": ""})),
        on_page(
            "key-char-empty",
            "Input.dispatchKeyEvent",
            json!({"type": "char", "text": ""}),
        ),
        on_page(
            "key-up",
            "Input.dispatchKeyEvent",
            json!({"type": "keyUp", "key": "Unidentified"}),
        ),
        on_page(
            "wheel-zero",
            "Input.dispatchMouseEvent",
            json!({"type": "mouseWheel", "x": -1, "y": -1, "deltaX": 0, "deltaY": 0}),
        ),
        on_page(
            "touch-start-outside",
            "Input.dispatchTouchEvent",
            json!({"type": "touchStart", "touchPoints": [{"x": -1, "y": -1, "id": 7}]}),
        ),
        on_page(
            "touch-cancel-after-start",
            "Input.dispatchTouchEvent",
            json!({"type": "touchCancel", "touchPoints": []}),
        ),
        on_page(
            "drag-cancel",
            "Input.dispatchDragEvent",
            json!({"type": "dragCancel", "x": -1, "y": -1,
                   "data": {"items": [], "dragOperationsMask": 0}}),
        ),
    ]
}

/// Sends the probes whose label is in `only` (all without) at once on `sid`, and prints when
/// (and whether, within `wait`) each is answered.
fn sweep(cdp: &mut RawCdp, sid: &str, wait: Duration, only: &[String]) {
    let start = Instant::now();
    let mut sent = Vec::new();
    for (label, method, params, on_session) in probes() {
        if !only.is_empty() && !only.iter().any(|o| o == label) {
            continue;
        }
        let s = on_session.then_some(sid);
        sent.push((cdp.send_command(method, params, s).expect("send"), label));
    }
    let mut answered = std::collections::HashMap::new();
    while answered.len() < sent.len() {
        let left = wait.saturating_sub(start.elapsed());
        let Ok(Some(msg)) = cdp.next_message(left) else {
            break;
        };
        let Some(id) = msg.get("id").and_then(Value::as_u64) else {
            continue;
        };
        if let Some((_, label)) = sent.iter().find(|(i, _)| *i == id) {
            let what = match msg.get("error") {
                Some(e) => format!("error {}", e["message"]),
                None => "ok".to_string(),
            };
            answered.insert(*label, (start.elapsed(), what));
        }
    }
    for (_, label) in &sent {
        match answered.get(label) {
            Some((t, what)) => eprintln!("    {label:26} {what} after {t:?}"),
            None => eprintln!("    {label:26} UNANSWERED within {wait:?}"),
        }
    }
}

/// Moves the mouse over `#t` on `sid` (what an agent's click does first).
fn hover(cdp: &mut RawCdp, sid: &str) {
    cdp.call(
        "Input.dispatchMouseEvent",
        json!({"type": "mouseMoved", "x": 50, "y": 50}),
        Some(sid),
        T,
    )
    .expect("hover");
}

/// Issue 28 item 9, the idle probe: which calls into a renderer answer and which hang while
/// it is idle, busy in a 2 s script loop, held in a 2 s synchronous XHR, or held by an alert in
/// an `about:blank` popup nobody watches (on the opener and on the popup); and whether a page
/// sees the input probes (listeners for pointer, mouse, key, input, composition, touch and drag
/// events, `:hover`, a focused `<input>`), on the page and in the popup. `PROBES=label,label`
/// sends only those (input probes one at a time, to tell apart what each shows).
///
/// Chromium 156, this machine (2026-12-03): `Performance.getMetrics` (and the other methods
/// Chromium runs in a V8 interrupt, `Debugger.setBreakpointsActive`, `Debugger.getStackTrace`)
/// answered idle in 3-8 ms and during the loop in 4-73 ms, and hung in the XHR (answered as it
/// ended) and in the dialog; every other renderer call hung in all three; the browser answered
/// throughout. `mouse-move`, `key-up` and `key-char-empty` were acknowledged in 1-3 ms in the
/// dialog and never delivered (neither page saw an event, `:hover` stayed), and delivered
/// otherwise: the mouse move made the page see `pointerrawupdate`, `pointerout`/`pointerleave`,
/// `mouseout`/`mouseleave` at (-1, -1) and lose `:hover` (no `mousemove`/`pointermove`), the keys
/// `keyup`/`keypress`. `ime-empty`, `insert-empty` and `wheel-zero` were seen by no page but hung
/// in the dialog like renderer calls; `touch-start-outside` and `drag-cancel` hung there too
/// and were seen (pointer and touch events, `:hover` lost).
#[test]
#[ignore = "measurement"]
fn renderer_probes_idle_busy_and_frozen() {
    let Some(_) = common::shared_browser() else {
        return;
    };
    let b = common::Browser::launch().expect("a Chromium of its own");
    let srv = HttpServer::start(|req| {
        if req.path == "/slow" {
            std::thread::sleep(Duration::from_secs(2));
            return Response::text("slow");
        }
        Response::html(HOVER_PAGE)
    });
    let mut cdp = RawCdp::connect(&b.ws_url).expect("connect");
    let (page, sid) = cdp.open_page(&srv.url("127.0.0.1", "/"), T).expect("open");
    let only: Vec<String> = std::env::var("PROBES")
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let reset = |cdp: &mut RawCdp, sid: &str| {
        cdp.evaluate(
            sid,
            &format!("{LISTEN}(document, document, ''); document.querySelector('#i').focus(); 1"),
            T,
        )
        .expect("listen");
    };
    // Idle, busy in a script for 2 s, blocked in a synchronous XHR for 2 s (no script runs, no
    // dialog): each begins 50 ms after it is set up, the probes 300 ms later.
    for (what, start_it) in [
        ("idle", "1"),
        (
            "busy (a 2 s loop that began 250 ms ago)",
            "setTimeout(() => { const t = Date.now() + 2000; while (Date.now() < t) {} }, 50); 1",
        ),
        (
            "in a synchronous XHR (2 s, began 250 ms ago)",
            "setTimeout(() => { const x = new XMLHttpRequest(); x.open('GET', '/slow', false); \
             x.send(); }, 50); 1",
        ),
    ] {
        hover(&mut cdp, &sid);
        reset(&mut cdp, &sid);
        cdp.evaluate(&sid, start_it, T).expect(what);
        std::thread::sleep(Duration::from_millis(300));
        eprintln!("{what}:");
        sweep(&mut cdp, &sid, Duration::from_secs(3), &only);
        std::thread::sleep(Duration::from_millis(300));
        eprintln!("  page saw: {}", cdp.evaluate(&sid, SEEN, T).expect("seen"));
    }
    // Frozen: an alert in an about:blank popup nobody watches.
    cdp.call(
        "Runtime.evaluate",
        json!({"expression": "window.w = window.open('about:blank'); \
               w.document.write(document.documentElement.outerHTML); w.document.close(); 1",
               "userGesture": true}),
        Some(&sid),
        T,
    )
    .expect("open w");
    let popup = wait_until(T, || {
        let t = cdp.call("Target.getTargets", json!({}), None, T).ok()?;
        t["targetInfos"]
            .as_array()?
            .iter()
            .find(|t| t["openerId"] == page.as_str())
            .and_then(|t| t["targetId"].as_str().map(str::to_string))
    })
    .expect("the popup");
    let psid = cdp.attach(&popup).expect("attach the popup");
    hover(&mut cdp, &sid);
    hover(&mut cdp, &psid);
    reset(&mut cdp, &sid);
    cdp.evaluate(&sid, &format!("{LISTEN}(w.document, window.pw = {{}}, 'p:'); w.document.querySelector('#i').focus(); 1"), T)
        .expect("listen in w");
    cdp.evaluate(
        &sid,
        "w.eval(\"setTimeout(() => alert('frozen'), 200)\"); 1",
        T,
    )
    .expect("alert later");
    std::thread::sleep(Duration::from_millis(600));
    eprintln!("frozen, on the opener:");
    sweep(&mut cdp, &sid, Duration::from_millis(1500), &only);
    eprintln!("frozen, on the popup:");
    sweep(&mut cdp, &psid, Duration::from_millis(1500), &only);
    // Closing the popup unfreezes the opener (measured above).
    cdp.close_page(&popup).expect("close the popup");
    let t = Instant::now();
    wait_until(T, || {
        cdp.evaluate(&sid, "1", Duration::from_millis(500)).ok()
    })
    .expect("the opener answers again");
    eprintln!("after the popup closed ({:?}):", t.elapsed());
    std::thread::sleep(Duration::from_millis(300));
    eprintln!(
        "  opener saw: {}",
        cdp.evaluate(&sid, SEEN, T).expect("seen")
    );
    eprintln!(
        "  popup saw: {}",
        cdp.evaluate(&sid, "JSON.stringify(window.pw.ev)", T)
            .expect("seen in w")
    );
    let _ = cdp.close_page(&page);
}
