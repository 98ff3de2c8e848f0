//! Measurements on real headless Chromium that the supervisor's call routing relies on (SPEC §8,
//! §11), asserted so that this test fails as soon as Chromium behaves differently:
//!
//! * Fact A: which CDP methods a page session still answers while a native JavaScript dialog is
//!   open on that page, and which hang until the dialog is gone; how a dialog in one frame
//!   affects the session of another (cross-site OOPIF); when the reply to a `Page.navigate` /
//!   `Page.reload` that raised a `beforeunload` dialog arrives.
//! * Fact B: which CDP domains the browser target (the browser-level connection, no
//!   `sessionId`) serves.
//!
//! The expected tables are `src/measured.rs`, included here, so the code and this test cannot
//! drift apart.
//!
//! Only a raw CDP client is used (no supervisor). Every page lives in a browser context of its
//! own: contexts never share a renderer process, so a dialog in one test's page cannot block
//! another's. "Answered" means a reply (result or CDP error) arrived before the test did
//! anything about the dialog; every probe gets [`ANSWER_WINDOW`] for that (the ones expected to
//! answer may take up to [`T`], so a loaded machine does not turn an answer into a hang).
//!
//! Tests skip (printing `SKIPPED: no Chromium`) when no Chromium is installed, unless
//! `CDP_SUPERVISOR_E2E=require`.

use crate::common;

#[allow(dead_code)]
#[path = "../../src/measured.rs"]
mod measured;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{HttpServer, RawCdp, Response};
use serde_json::{Value, json};

/// Deadline of every wait for something that must happen.
const T: Duration = Duration::from_secs(10);

/// How long a method gets to answer while a dialog is open before it counts as blocked.
const ANSWER_WINDOW: Duration = Duration::from_secs(1);

const MAIN_PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>main</title></head>
<body><p>main</p><input id="i"><script>
window.seen = [];
for (const t of ['keydown', 'keypress', 'keyup', 'mousemove', 'mousedown', 'mouseup', 'input'])
  addEventListener(t, e => seen.push(e.type), true);
</script></body></html>"#;

const OTHER_PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>other</title></head>
<body><p>other</p></body></html>"#;

const BEFOREUNLOAD_PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>bu</title></head>
<body><p>beforeunload</p><script>
addEventListener('beforeunload', e => { e.preventDefault(); e.returnValue = ''; });
</script></body></html>"#;

const CHILD_PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>child</title></head>
<body><p>child</p></body></html>"#;

/// Serves `/` ([`MAIN_PAGE`]), `/other`, `/bu` ([`BEFOREUNLOAD_PAGE`]), `/child` and `/parent`:
/// a page embedding `/child` from the other host name of the same server (`127.0.0.1` and
/// `localhost` are different sites, so the iframe is out of process).
fn server() -> HttpServer {
    HttpServer::start(|req| match req.path.as_str() {
        "/" => Response::html(MAIN_PAGE),
        "/other" => Response::html(OTHER_PAGE),
        "/bu" => Response::html(BEFOREUNLOAD_PAGE),
        "/child" => Response::html(CHILD_PAGE),
        "/parent" => {
            let host = req.header("Host").unwrap_or_default();
            let port = host.rsplit(':').next().unwrap_or_default();
            Response::html(format!(
                "<!doctype html><html><head><meta charset=\"utf-8\"><title>parent</title></head>\
                 <body><p>parent</p><iframe src=\"http://localhost:{port}/child\"></iframe></body></html>"
            ))
        }
        _ => Response::not_found(),
    })
}

// ---------------------------------------------------------------------------------------------
// A recording raw CDP client
// ---------------------------------------------------------------------------------------------

/// A raw CDP connection that keeps every message it receives, in arrival order, so that a test
/// can tell whether a reply came before or after another message, or before a command it sent.
struct Recorder {
    cdp: RawCdp,
    log: Vec<Value>,
}

/// A test page: its own browser context, the page target, our flattened session on it.
struct Page {
    context: String,
    target: String,
    session: String,
}

impl Recorder {
    fn connect(ws_url: &str) -> Recorder {
        Recorder {
            cdp: RawCdp::connect(ws_url).expect("connect a raw CDP client"),
            log: Vec::new(),
        }
    }

    /// Sends without waiting; returns the command id.
    fn send(&mut self, method: &str, params: Value, session: Option<&str>) -> u64 {
        self.cdp
            .send_command(method, params, session)
            .unwrap_or_else(|e| panic!("sending {method}: {e}"))
    }

    /// The log position now: messages at this index or later arrived after this call.
    fn mark(&self) -> usize {
        self.log.len()
    }

    /// Index of the first message at `from` or later satisfying `pred`, reading more messages
    /// for up to `timeout`; `None` if none came.
    fn find(
        &mut self,
        from: usize,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Option<usize> {
        if let Some(i) = self.log[from.min(self.log.len())..].iter().position(&pred) {
            return Some(from + i);
        }
        let deadline = Instant::now()
            .checked_add(timeout)
            .expect("a deadline within range");
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match self.cdp.next_message(left) {
                Ok(Some(msg)) => {
                    self.log.push(msg);
                    if pred(&self.log[self.log.len() - 1]) {
                        return Some(self.log.len() - 1);
                    }
                }
                Ok(None) => return None,
                Err(e) => panic!("the CDP connection failed: {e}"),
            }
        }
    }

    /// Reads (and logs) whatever arrives during `d`.
    fn pump(&mut self, d: Duration) {
        let from = self.mark();
        self.find(from, d, |_| false);
    }

    /// Index of the reply to command `id`, waiting up to `timeout`.
    fn reply_index(&mut self, id: u64, timeout: Duration) -> Option<usize> {
        self.find(0, timeout, |m| m["id"] == id)
    }

    /// The reply at `index`: `Ok(result)` or `Err(error)`.
    fn reply_at(&self, index: usize) -> Result<Value, Value> {
        let msg = &self.log[index];
        match msg.get("error") {
            Some(e) => Err(e.clone()),
            None => Ok(msg.get("result").cloned().unwrap_or(Value::Null)),
        }
    }

    /// The reply to `id`, which must arrive within [`T`].
    fn reply(&mut self, id: u64, what: &str) -> Result<Value, Value> {
        let i = self
            .reply_index(id, T)
            .unwrap_or_else(|| panic!("no reply to {what} within {T:?}"));
        self.reply_at(i)
    }

    /// Sends and waits (up to [`T`]) for the reply.
    fn call(&mut self, method: &str, params: Value, session: Option<&str>) -> Result<Value, Value> {
        let id = self.send(method, params, session);
        self.reply(id, method)
    }

    /// [`Recorder::call`] that must succeed.
    fn ok(&mut self, method: &str, params: Value, session: Option<&str>) -> Value {
        self.call(method, params, session)
            .unwrap_or_else(|e| panic!("{method} failed: {e}"))
    }

    /// Index of the first event `method` on `session` (`None`: browser-level) at `from` or later.
    fn event(
        &mut self,
        from: usize,
        method: &str,
        session: Option<&str>,
        timeout: Duration,
    ) -> Option<usize> {
        self.find(from, timeout, |m| {
            m["method"] == method && m.get("sessionId").and_then(Value::as_str) == session
        })
    }

    /// Opens `url` in a new page of a new browser context (disposed when this connection
    /// closes), attaches to it (flatten), enables Page, Runtime and lifecycle events, and waits
    /// for the page's `load`.
    fn open(&mut self, url: &str) -> Page {
        let context = str_of(
            &self.ok(
                "Target.createBrowserContext",
                json!({"disposeOnDetach": true}),
                None,
            ),
            "browserContextId",
        );
        let target = str_of(
            &self.ok(
                "Target.createTarget",
                json!({"url": "about:blank", "browserContextId": context}),
                None,
            ),
            "targetId",
        );
        let session = str_of(
            &self.ok(
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
                None,
            ),
            "sessionId",
        );
        let s = Some(session.as_str());
        self.ok("Page.enable", json!({}), s);
        self.ok("Runtime.enable", json!({}), s);
        self.ok(
            "Page.setLifecycleEventsEnabled",
            json!({"enabled": true}),
            s,
        );
        let from = self.mark();
        let nav = self.ok("Page.navigate", json!({"url": url}), s);
        assert!(nav.get("errorText").is_none(), "navigating to {url}: {nav}");
        self.wait_load(from, &session, Some(&nav["loaderId"]));
        Page {
            context,
            target,
            session,
        }
    }

    /// Waits for a `load` lifecycle event on `session` at `from` or later (of `loader`, if given).
    fn wait_load(&mut self, from: usize, session: &str, loader: Option<&Value>) {
        self.find(from, T, |m| {
            m["method"] == "Page.lifecycleEvent"
                && m["sessionId"] == session
                && m["params"]["name"] == "load"
                && loader.is_none_or(|l| m["params"]["loaderId"] == *l)
        })
        .unwrap_or_else(|| panic!("no load on {session} within {T:?}"));
    }

    /// Disposes the page's browser context (closing the page without `beforeunload`).
    fn close(&mut self, page: &Page) {
        let _ = self.call(
            "Target.disposeBrowserContext",
            json!({"browserContextId": page.context}),
            None,
        );
    }

    /// Raises `alert('x')` with a `Runtime.evaluate` on `eval_session` (its reply comes only once
    /// the dialog is gone) and waits for `Page.javascriptDialogOpening` on any session. Returns
    /// (the evaluate's id, the index of the opening event).
    fn alert(&mut self, eval_session: &str) -> (u64, usize) {
        let from = self.mark();
        let id = self.send(
            "Runtime.evaluate",
            json!({"expression": "alert('x')"}),
            Some(eval_session),
        );
        let opened = self
            .find(from, T, |m| m["method"] == "Page.javascriptDialogOpening")
            .unwrap_or_else(|| panic!("no dialog opened within {T:?}"));
        (id, opened)
    }

    /// `Runtime.evaluate {expression, returnByValue}` that must answer; returns the value.
    fn eval(&mut self, session: &str, expression: &str) -> Value {
        let r = self.ok(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
            Some(session),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"].get("value").cloned().unwrap_or(Value::Null)
    }
}

fn str_of(v: &Value, key: &str) -> String {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("no {key} in {v}"))
        .to_string()
}

fn error_message(e: &Value) -> String {
    e["message"].as_str().unwrap_or_default().to_string()
}

/// Whether the `measured` table expects `method` to answer with a dialog open.
fn expected_to_answer(method: &str) -> bool {
    measured::answered_with_dialog_open(method) == Some(true)
}

// ---------------------------------------------------------------------------------------------
// Fact A: methods on a page session while a dialog is open
// ---------------------------------------------------------------------------------------------

/// Handles the probes need, taken before the dialog opens.
struct Handles {
    target: String,
    document: String,
    window: String,
    root: u64,
}

/// The probes that leave the page and the dialog usable: all sent together, on the page session,
/// while one dialog is open.
fn page_probes(h: &Handles) -> Vec<(&'static str, Value)> {
    let url_for_cookie = "http://127.0.0.1/";
    vec![
        ("Page.stopLoading", json!({})),
        ("Page.getFrameTree", json!({})),
        ("Page.getResourceTree", json!({})),
        ("Page.getNavigationHistory", json!({})),
        ("Page.captureScreenshot", json!({})),
        ("Page.captureSnapshot", json!({})),
        ("Page.printToPDF", json!({})),
        ("Page.bringToFront", json!({})),
        ("Page.enable", json!({})),
        ("Page.getLayoutMetrics", json!({})),
        ("Page.setLifecycleEventsEnabled", json!({"enabled": true})),
        (
            "Page.addScriptToEvaluateOnNewDocument",
            json!({"source": "1"}),
        ),
        ("Page.createIsolatedWorld", json!({"frameId": h.target})),
        ("Page.setBypassCSP", json!({"enabled": false})),
        (
            "Page.setInterceptFileChooserDialog",
            json!({"enabled": false}),
        ),
        ("Page.getAppManifest", json!({})),
        ("Runtime.evaluate", json!({"expression": "1"})),
        (
            "Runtime.callFunctionOn",
            json!({"objectId": h.document, "functionDeclaration": "function () { return 1; }"}),
        ),
        ("Runtime.getProperties", json!({"objectId": h.document})),
        ("Runtime.enable", json!({})),
        ("Runtime.runIfWaitingForDebugger", json!({})),
        ("Runtime.getHeapUsage", json!({})),
        ("Runtime.addBinding", json!({"name": "probeBinding"})),
        ("Runtime.releaseObject", json!({"objectId": h.window})),
        (
            "DOM.querySelector",
            json!({"nodeId": h.root, "selector": "body"}),
        ),
        ("DOM.describeNode", json!({"nodeId": h.root})),
        ("DOM.getOuterHTML", json!({"nodeId": h.root})),
        ("DOM.resolveNode", json!({"nodeId": h.root})),
        ("DOM.getDocument", json!({})),
        ("DOM.enable", json!({})),
        (
            "Input.dispatchMouseEvent",
            json!({"type": "mouseMoved", "x": 10, "y": 10}),
        ),
        (
            "Input.dispatchKeyEvent",
            json!({"type": "keyDown", "key": "a", "text": "a"}),
        ),
        ("Input.insertText", json!({"text": "z"})),
        (
            "Input.dispatchTouchEvent",
            json!({"type": "touchStart", "touchPoints": [{"x": 1, "y": 1}]}),
        ),
        ("Input.setIgnoreInputEvents", json!({"ignore": false})),
        ("Network.enable", json!({})),
        ("Network.getCookies", json!({})),
        ("Network.getAllCookies", json!({})),
        (
            "Network.setCookie",
            json!({"name": "probe", "value": "1", "url": url_for_cookie}),
        ),
        ("Network.setExtraHTTPHeaders", json!({"headers": {}})),
        ("Network.setCacheDisabled", json!({"cacheDisabled": false})),
        (
            "Network.setUserAgentOverride",
            json!({"userAgent": "probe"}),
        ),
        ("Network.clearBrowserCache", json!({})),
        (
            "Network.emulateNetworkConditions",
            json!({"offline": false, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}),
        ),
        (
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 800, "height": 600, "deviceScaleFactor": 1, "mobile": false}),
        ),
        (
            "Emulation.setUserAgentOverride",
            json!({"userAgent": "probe"}),
        ),
        ("Emulation.setEmulatedMedia", json!({"media": ""})),
        (
            "Emulation.setTimezoneOverride",
            json!({"timezoneId": "UTC"}),
        ),
        (
            "Emulation.setFocusEmulationEnabled",
            json!({"enabled": false}),
        ),
        (
            "Emulation.setGeolocationOverride",
            json!({"latitude": 1, "longitude": 1, "accuracy": 1}),
        ),
        ("Target.getTargets", json!({})),
        ("Target.getTargetInfo", json!({})),
        (
            "Target.setAutoAttach",
            json!({"autoAttach": true, "waitForDebuggerOnStart": false, "flatten": true}),
        ),
        ("Target.activateTarget", json!({"targetId": h.target})),
        ("Target.setDiscoverTargets", json!({"discover": false})),
        ("Browser.getVersion", json!({})),
        (
            "Browser.setDownloadBehavior",
            json!({"behavior": "default"}),
        ),
        (
            "Fetch.enable",
            json!({"patterns": [{"urlPattern": "http://probe.invalid/*"}]}),
        ),
        ("Fetch.disable", json!({})),
        ("Log.enable", json!({})),
        ("Log.clear", json!({})),
        ("Accessibility.getFullAXTree", json!({})),
        ("Accessibility.enable", json!({})),
        ("Storage.getCookies", json!({})),
        ("Overlay.enable", json!({})),
        ("Overlay.hideHighlight", json!({})),
        ("CSS.enable", json!({})),
        ("Debugger.enable", json!({})),
        ("Performance.getMetrics", json!({})),
        ("Performance.enable", json!({})),
        ("Security.enable", json!({})),
        ("Inspector.enable", json!({})),
        ("DOMSnapshot.captureSnapshot", json!({"computedStyles": []})),
        ("Memory.getDOMCounters", json!({})),
        ("Profiler.enable", json!({})),
        ("HeapProfiler.enable", json!({})),
        ("Audits.enable", json!({})),
        ("ServiceWorker.enable", json!({})),
        ("Console.enable", json!({})),
    ]
}

/// Browser-level calls (no `sessionId`) about the page, sent while its dialog is open.
fn browser_probes(target: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("Browser.getVersion", json!({})),
        ("Storage.getCookies", json!({})),
        ("Target.getTargets", json!({})),
        ("Target.getTargetInfo", json!({"targetId": target})),
        ("Target.activateTarget", json!({"targetId": target})),
        (
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        ),
    ]
}

#[test]
fn methods_answered_while_a_dialog_is_open() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let server = server();
    let mut r = Recorder::connect(&browser.ws_url);
    let page = r.open(&server.url("127.0.0.1", "/"));
    let s = page.session.clone();
    let sid = Some(s.as_str());
    r.eval(&s, "document.getElementById('i').focus()");
    let object = |r: &mut Recorder, expr: &str| {
        let v = r.ok("Runtime.evaluate", json!({"expression": expr}), sid);
        str_of(&v["result"], "objectId")
    };
    let handles = Handles {
        target: page.target.clone(),
        document: object(&mut r, "document"),
        window: object(&mut r, "window"),
        root: r.ok("DOM.getDocument", json!({}), sid)["root"]["nodeId"]
            .as_u64()
            .expect("root nodeId"),
    };

    let t0 = Instant::now();
    let (alert, _) = r.alert(&s);
    let on_page: Vec<(&str, u64)> = page_probes(&handles)
        .into_iter()
        .map(|(m, p)| (m, r.send(m, p, sid)))
        .collect();
    let on_browser: Vec<(&str, u64)> = browser_probes(&page.target)
        .into_iter()
        .map(|(m, p)| (m, r.send(m, p, None)))
        .collect();
    let window_end = Instant::now()
        .checked_add(ANSWER_WINDOW)
        .expect("a deadline within range");
    // The ones expected to answer may take longer than the window on a loaded machine.
    for &(m, id) in &on_page {
        if expected_to_answer(m) {
            r.reply_index(id, T);
        }
    }
    for &(_, id) in &on_browser {
        r.reply_index(id, T);
    }
    r.pump(window_end.saturating_duration_since(Instant::now()));

    let dismissed_at = r.mark();
    let answered = |r: &Recorder, id: u64| r.log.iter().any(|m| m["id"] == id);
    let (got_answers, got_blocked): (Vec<&str>, Vec<&str>) = {
        let (a, b): (Vec<_>, Vec<_>) = on_page.iter().partition(|&&(_, id)| answered(&r, id));
        (
            a.into_iter().map(|&(m, _)| m).collect(),
            b.into_iter().map(|&(m, _)| m).collect(),
        )
    };
    let browser_blocked: Vec<&str> = on_browser
        .iter()
        .filter(|&&(_, id)| !answered(&r, id))
        .map(|&(m, _)| m)
        .collect();
    assert!(
        !answered(&r, alert),
        "the evaluate that raised the alert answered while it was open"
    );

    // The dialog is still open: nothing above closed it, and it can be answered.
    assert!(
        r.event(0, "Page.javascriptDialogClosed", sid, Duration::ZERO)
            .is_none(),
        "a probe closed the dialog"
    );
    let h = r.send("Page.handleJavaScriptDialog", json!({"accept": true}), sid);
    assert_eq!(r.reply(h, "Page.handleJavaScriptDialog"), Ok(json!({})));
    let closed = r
        .event(dismissed_at, "Page.javascriptDialogClosed", sid, T)
        .expect("the dialog closed");
    // Every blocked call answers once the dialog is gone, after the Closed event.
    let mut late_before_closed = Vec::new();
    for &(m, id) in on_page.iter().filter(|(m, _)| got_blocked.contains(m)) {
        let i = r
            .reply_index(id, T)
            .unwrap_or_else(|| panic!("{m}: no reply within {T:?} after the dialog closed"));
        if i < closed {
            late_before_closed.push(m);
        }
    }
    r.reply_index(alert, T)
        .expect("the evaluate that raised the alert answers once it is closed");
    let took = t0.elapsed();

    // Mouse and key events sent while the dialog was open were dropped; inserted text was
    // delivered once it closed. The same events sent now do arrive.
    let seen_while_open = r.eval(&s, "seen.slice()");
    r.ok(
        "Input.dispatchMouseEvent",
        json!({"type": "mouseMoved", "x": 20, "y": 20}),
        sid,
    );
    r.ok(
        "Input.dispatchKeyEvent",
        json!({"type": "keyDown", "key": "b", "text": "b"}),
        sid,
    );
    let seen_after = r.eval(&s, "seen.slice()");
    r.close(&page);

    eprintln!(
        "dialog open: {} probes answered, {} blocked; measured in {took:?}",
        got_answers.len(),
        got_blocked.len()
    );
    eprintln!("answered: {got_answers:?}");
    eprintln!("blocked: {got_blocked:?}");

    let expected_answers: BTreeSet<&str> = on_page
        .iter()
        .map(|&(m, _)| m)
        .filter(|m| expected_to_answer(m))
        .collect();
    assert_eq!(
        got_answers.iter().copied().collect::<BTreeSet<_>>(),
        expected_answers,
        "page-session methods answered with a dialog open (expected: src/measured.rs)"
    );
    for m in &got_blocked {
        assert_eq!(
            measured::answered_with_dialog_open(m),
            Some(false),
            "{m} was blocked by the dialog"
        );
    }
    assert!(
        browser_blocked.is_empty(),
        "browser-level calls blocked by a page's dialog: {browser_blocked:?}"
    );
    assert!(
        late_before_closed.is_empty(),
        "late replies that came before Page.javascriptDialogClosed: {late_before_closed:?}"
    );
    assert_eq!(
        seen_while_open,
        json!(["input"]),
        "only the inserted text reached the page"
    );
    assert_eq!(
        seen_after,
        json!(["input", "mousemove", "keydown", "keypress", "input"]),
        "input events reach the page once no dialog is open"
    );
}

/// One probe on a fresh page with a fresh dialog: how the call and the dialog ended.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    /// Replied before the test touched the dialog.
    answered: bool,
    /// `Page.javascriptDialogClosed` came before the test touched the dialog.
    closed_the_dialog: bool,
    /// For a blocked call: what `Page.handleJavaScriptDialog` then answered (`ok` or the error).
    dismissal: Option<String>,
    /// For a blocked call: what unblocked it, `dismissal` or (when the dialog could not be
    /// answered any more) `reload`; and its reply, `ok` or the error message.
    late_reply: Option<(&'static str, String)>,
}

/// Answered, closing the dialog.
const CLOSES: Outcome = Outcome {
    answered: true,
    closed_the_dialog: true,
    dismissal: None,
    late_reply: None,
};

/// Blocked until the dialog is dismissed.
fn blocked_until_dismissed() -> Outcome {
    Outcome {
        answered: false,
        closed_the_dialog: false,
        dismissal: Some("ok".into()),
        late_reply: Some(("dismissal", "ok".into())),
    }
}

/// A probe that changes the page or the dialog, run on a fresh page with a fresh dialog:
/// `method` with `params(page, url of /other)`, on the page session or (`on_browser`) on the
/// browser connection, and the outcome measured on Chromium.
struct StateProbe {
    method: &'static str,
    on_browser: bool,
    params: fn(&Page, &str) -> Value,
    expected: Outcome,
}

fn sp(
    method: &'static str,
    on_browser: bool,
    params: fn(&Page, &str) -> Value,
    expected: Outcome,
) -> StateProbe {
    StateProbe {
        method,
        on_browser,
        params,
        expected,
    }
}

/// The [`StateProbe`]s.
fn state_changing_probes() -> Vec<StateProbe> {
    vec![
        sp(
            "Page.handleJavaScriptDialog",
            false,
            |_, _| json!({"accept": true}),
            CLOSES,
        ),
        sp(
            "Page.navigate",
            false,
            |_, other| json!({"url": other}),
            CLOSES,
        ),
        sp("Page.reload", false, |_, _| json!({}), CLOSES),
        sp("Page.close", false, |_, _| json!({}), CLOSES),
        // Closes the page, but the reply is lost with the session (without a dialog it comes).
        sp(
            "Target.closeTarget",
            false,
            |p, _| json!({"targetId": p.target}),
            Outcome {
                answered: false,
                closed_the_dialog: true,
                dismissal: Some("Session with given id not found.".into()),
                late_reply: Some(("nothing: the session is gone", "no reply".into())),
            },
        ),
        sp(
            "Target.closeTarget",
            true,
            |p, _| json!({"targetId": p.target}),
            CLOSES,
        ),
        sp(
            "Page.disable",
            false,
            |_, _| json!({}),
            Outcome {
                answered: false,
                closed_the_dialog: false,
                dismissal: Some("No dialog is showing".into()),
                late_reply: Some(("reload", "ok".into())),
            },
        ),
        sp(
            "Page.crash",
            false,
            |_, _| json!({}),
            Outcome {
                answered: false,
                closed_the_dialog: true,
                dismissal: Some("No dialog is showing".into()),
                late_reply: Some(("reload", "Target crashed".into())),
            },
        ),
        sp(
            "Runtime.disable",
            false,
            |_, _| json!({}),
            blocked_until_dismissed(),
        ),
        sp(
            "Runtime.terminateExecution",
            false,
            |_, _| json!({}),
            blocked_until_dismissed(),
        ),
    ]
}

fn reply_text(r: Result<Value, Value>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => error_message(&e),
    }
}

/// Opens a page, raises an alert, sends `method` and records how it ends.
fn probe_on_fresh_page(ws_url: &str, server: &HttpServer, probe: &StateProbe) -> Outcome {
    let (method, expected) = (probe.method, &probe.expected);
    let mut r = Recorder::connect(ws_url);
    let page = r.open(&server.url("127.0.0.1", "/"));
    let s = page.session.clone();
    let sid = Some(s.as_str());
    let (_, opened) = r.alert(&s);
    let p = (probe.params)(&page, &server.url("127.0.0.1", "/other"));
    let id = r.send(method, p, if probe.on_browser { None } else { sid });
    // Every call gets ANSWER_WINDOW; the expected answer and Closed event may take up to T.
    let patience = |expected: bool| if expected { T } else { ANSWER_WINDOW };
    let reply = r.reply_index(id, patience(expected.answered));
    let closed = r
        .event(
            opened,
            "Page.javascriptDialogClosed",
            sid,
            patience(expected.closed_the_dialog),
        )
        .is_some();
    let mut outcome = Outcome {
        answered: reply.is_some(),
        closed_the_dialog: closed,
        dismissal: None,
        late_reply: None,
    };
    if reply.is_none() {
        let at = r.mark();
        let dismissal =
            reply_text(r.call("Page.handleJavaScriptDialog", json!({"accept": true}), sid));
        // What unblocks the call: the dismissal; a reload when the dialog cannot be answered
        // any more; nothing when the session is gone (the call had ANSWER_WINDOW already).
        let (unblocked_by, patience) = match dismissal.as_str() {
            "ok" => ("dismissal", T),
            "No dialog is showing" => {
                r.ok("Page.reload", json!({}), sid);
                ("reload", T)
            }
            _ => ("nothing: the session is gone", Duration::ZERO),
        };
        outcome.dismissal = Some(dismissal);
        outcome.late_reply = match r.reply_index(id, patience) {
            Some(i) if i >= at => Some((unblocked_by, reply_text(r.reply_at(i)))),
            Some(_) => Some(("nothing: it came before the dismissal", String::new())),
            None => Some((unblocked_by, "no reply".into())),
        };
    }
    r.close(&page);
    outcome
}

#[test]
fn state_changing_methods_with_a_dialog_open() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let server = server();
    let probes = state_changing_probes();
    let t0 = Instant::now();
    let got: Vec<Outcome> = thread::scope(|scope| {
        let handles: Vec<_> = probes
            .iter()
            .map(|p| {
                let (ws, server) = (&browser.ws_url, &server);
                scope.spawn(move || probe_on_fresh_page(ws, server, p))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("probe thread"))
            .collect()
    });
    eprintln!("state-changing probes measured in {:?}", t0.elapsed());
    let name =
        |m: &str, on_browser: bool| format!("{m}{}", if on_browser { " (browser)" } else { "" });
    let got: BTreeMap<String, Outcome> = probes
        .iter()
        .zip(got)
        .map(|(p, o)| (name(p.method, p.on_browser), o))
        .collect();
    for (m, o) in &got {
        eprintln!("{m}: {o:?}");
    }
    let expected: BTreeMap<String, Outcome> = probes
        .into_iter()
        .map(|p| (name(p.method, p.on_browser), p.expected))
        .collect();
    assert_eq!(got, expected);
    for (m, o) in &expected {
        if !m.ends_with("(browser)") {
            assert_eq!(
                measured::answered_with_dialog_open(m),
                Some(o.answered),
                "{m}"
            );
        }
    }
}

/// A dialog in one frame and a `Runtime.evaluate` on the session of another frame.
#[derive(Debug, PartialEq, Eq)]
struct CrossFrame {
    /// The session `Page.javascriptDialogOpening` came on: `page` or `iframe`.
    event_on: &'static str,
    /// Its `frameId`: `main` or `iframe`.
    frame: &'static str,
    /// Whether an evaluate on the *other* frame's session answered with the dialog open.
    other_session_answered: bool,
    /// Whether an evaluate on the dialog frame's own session answered with the dialog open.
    own_session_answered: bool,
    /// Whether the blocked evaluate answered once the dialog was dismissed (on the page session).
    late_reply_after_dismissal: bool,
}

fn cross_frame(ws_url: &str, server: &HttpServer, alert_in_iframe: bool) -> CrossFrame {
    let mut r = Recorder::connect(ws_url);
    let page = r.open(&server.url("127.0.0.1", "/parent"));
    let s = page.session.clone();
    let from = r.mark();
    r.ok(
        "Target.setAutoAttach",
        json!({"autoAttach": true, "waitForDebuggerOnStart": false, "flatten": true}),
        Some(&s),
    );
    let attached = r
        .find(from, T, |m| {
            m["method"] == "Target.attachedToTarget"
                && m["sessionId"] == s.as_str()
                && m["params"]["targetInfo"]["type"] == "iframe"
        })
        .expect("the cross-site iframe is attached as an OOPIF");
    let iframe_session = str_of(&r.log[attached]["params"], "sessionId");
    let iframe_target = str_of(&r.log[attached]["params"]["targetInfo"], "targetId");
    let child_url = server.url("localhost", "/child");
    assert_eq!(r.eval(&iframe_session, "location.href"), json!(child_url));

    let (own, other) = if alert_in_iframe {
        (iframe_session.as_str(), s.as_str())
    } else {
        (s.as_str(), iframe_session.as_str())
    };
    let (_, opened) = r.alert(own);
    let ev = r.log[opened].clone();
    let event_on = if ev["sessionId"] == s.as_str() {
        "page"
    } else if ev["sessionId"] == iframe_session.as_str() {
        "iframe"
    } else {
        panic!("Page.javascriptDialogOpening on an unknown session: {ev}")
    };
    let frame = if ev["params"]["frameId"] == page.target.as_str() {
        "main"
    } else if ev["params"]["frameId"] == iframe_target.as_str() {
        "iframe"
    } else {
        panic!("Page.javascriptDialogOpening for an unknown frame: {ev}")
    };
    let expr = json!({"expression": "location.href", "returnByValue": true});
    let on_other = r.send("Runtime.evaluate", expr.clone(), Some(other));
    let on_own = r.send("Runtime.evaluate", expr, Some(own));
    let other_session_answered = r.reply_index(on_other, T).is_some();
    r.pump(ANSWER_WINDOW);
    let own_session_answered = r.log.iter().any(|m| m["id"] == on_own);
    let at = r.mark();
    assert_eq!(
        r.call(
            "Page.handleJavaScriptDialog",
            json!({"accept": true}),
            Some(&s)
        ),
        Ok(json!({})),
        "the dialog is answered on the page session"
    );
    let late = r.reply_index(on_own, T);
    r.close(&page);
    CrossFrame {
        event_on,
        frame,
        other_session_answered,
        own_session_answered,
        late_reply_after_dismissal: !own_session_answered && late.is_some_and(|i| i >= at),
    }
}

#[test]
fn dialog_in_one_frame_blocks_only_that_frames_session() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let server = server();
    let (main, iframe) = thread::scope(|scope| {
        let (ws, srv) = (&browser.ws_url, &server);
        let main = scope.spawn(move || cross_frame(ws, srv, false));
        let iframe = scope.spawn(move || cross_frame(ws, srv, true));
        (main.join().unwrap(), iframe.join().unwrap())
    });
    eprintln!("alert in the main frame: {main:?}");
    eprintln!("alert in the OOPIF: {iframe:?}");
    assert_eq!(
        main,
        CrossFrame {
            event_on: "page",
            frame: "main",
            other_session_answered: true,
            own_session_answered: false,
            late_reply_after_dismissal: true,
        }
    );
    assert_eq!(
        iframe,
        CrossFrame {
            event_on: "page",
            frame: "iframe",
            other_session_answered: true,
            own_session_answered: false,
            late_reply_after_dismissal: true,
        }
    );
}

/// A `Page.navigate` or `Page.reload` that raised a `beforeunload` dialog.
#[derive(Debug, PartialEq, Eq)]
struct Unload {
    /// Whether the call's reply arrived before the dialog was answered.
    reply_before_answer: bool,
    /// `errorText` of the reply, if any.
    error_text: Option<String>,
    /// `location.pathname` afterwards.
    path: String,
    /// Whether the page kept its document (no navigation happened).
    same_document: bool,
}

fn beforeunload(ws_url: &str, server: &HttpServer, method: &str, accept: bool) -> Unload {
    let mut r = Recorder::connect(ws_url);
    let page = r.open(&server.url("127.0.0.1", "/bu"));
    let s = page.session.clone();
    let sid = Some(s.as_str());
    // `beforeunload` only fires after a user gesture (SPEC §11).
    r.ok(
        "Runtime.evaluate",
        json!({"expression": "window.marker = 1", "userGesture": true}),
        sid,
    );
    let from = r.mark();
    let params = if method == "Page.navigate" {
        json!({"url": server.url("127.0.0.1", "/other")})
    } else {
        json!({})
    };
    let id = r.send(method, params, sid);
    let opened = r
        .event(from, "Page.javascriptDialogOpening", sid, T)
        .expect("the beforeunload dialog opened");
    assert_eq!(r.log[opened]["params"]["type"], "beforeunload");
    let patience = if method == "Page.reload" {
        T
    } else {
        ANSWER_WINDOW
    };
    let reply_before_answer = r.reply_index(id, patience).is_some();
    let at = r.mark();
    assert_eq!(
        r.call(
            "Page.handleJavaScriptDialog",
            json!({"accept": accept}),
            sid
        ),
        Ok(json!({}))
    );
    let reply = r.reply(id, method).expect("the call succeeds");
    if accept {
        let loader = reply.get("loaderId").cloned();
        r.wait_load(at, &s, loader.as_ref());
    }
    let path = r.eval(&s, "location.pathname");
    let same_document = r.eval(&s, "window.marker === 1") == json!(true);
    r.close(&page);
    Unload {
        reply_before_answer,
        error_text: reply["errorText"].as_str().map(str::to_string),
        path: path.as_str().unwrap_or_default().to_string(),
        same_document,
    }
}

#[test]
fn beforeunload_and_the_call_that_raised_it() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let server = server();
    let cases = [
        ("Page.navigate", true),
        ("Page.navigate", false),
        ("Page.reload", true),
        ("Page.reload", false),
    ];
    let got: Vec<Unload> = thread::scope(|scope| {
        let handles: Vec<_> = cases
            .iter()
            .map(|&(m, accept)| {
                let (ws, srv) = (&browser.ws_url, &server);
                scope.spawn(move || beforeunload(ws, srv, m, accept))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ((m, accept), u) in cases.iter().zip(&got) {
        eprintln!("{m}, beforeunload accept={accept}: {u:?}");
    }
    let u = |reply_before_answer, error_text: Option<&str>, path: &str, same_document| Unload {
        reply_before_answer,
        error_text: error_text.map(str::to_string),
        path: path.into(),
        same_document,
    };
    assert_eq!(
        got,
        vec![
            u(false, None, "/other", false),
            u(false, Some("net::ERR_ABORTED"), "/bu", true),
            u(true, None, "/bu", false),
            u(true, None, "/bu", true),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Fact B: the domains the browser target serves
// ---------------------------------------------------------------------------------------------

/// Deadline for the replies to a whole sweep (hundreds of pipelined calls).
const SWEEP_TIMEOUT: Duration = Duration::from_secs(30);

/// Parameterless methods that are harmless on the browser and on a blank page, probed besides
/// the `get*`/`disable` ones.
const HARMLESS_PARAMETERLESS: &[&str] = &[
    "Runtime.runIfWaitingForDebugger",
    "Storage.clearPrivateVerificationTokens",
    "Storage.runBounceTrackingMitigations",
];

/// Getters left out of the sweep: on a page they run garbage collections.
const EXPENSIVE: &[&str] = &["Memory.getDOMCountersForLeakDetection"];

/// `GET path` on the browser's DevTools HTTP endpoint; returns the body.
fn http_get(port: u16, path: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to DevTools HTTP");
    stream.set_read_timeout(Some(T)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    let deadline = Instant::now()
        .checked_add(T)
        .expect("a deadline within range");
    let body_start = loop {
        assert!(Instant::now() < deadline, "GET {path} timed out");
        let n = stream.read(&mut buf).expect("read DevTools HTTP");
        assert!(n > 0, "GET {path}: connection closed before the headers");
        raw.extend_from_slice(&buf[..n]);
        if let Some(p) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&raw[..body_start]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("DevTools HTTP sends a Content-Length");
    while raw.len() < body_start + len {
        assert!(Instant::now() < deadline, "GET {path} timed out");
        let n = stream.read(&mut buf).expect("read DevTools HTTP");
        assert!(n > 0, "GET {path}: connection closed early");
        raw.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&raw[body_start..body_start + len]).into_owned()
}

/// Every protocol method that is safe to send with `{}` anywhere: one with a required parameter
/// (it fails validation and does nothing), a `get*` or `disable` method, or one of
/// [`HARMLESS_PARAMETERLESS`]; not the [`EXPENSIVE`] ones.
fn safe_probes(protocol: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for d in protocol["domains"].as_array().expect("domains") {
        let domain = d["domain"].as_str().expect("domain name");
        for c in d["commands"].as_array().into_iter().flatten() {
            let name = c["name"].as_str().expect("command name");
            let method = format!("{domain}.{name}");
            let required = c["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["optional"] != true);
            if EXPENSIVE.contains(&method.as_str()) {
                continue;
            }
            if required
                || name == "disable"
                || name.starts_with("get")
                || HARMLESS_PARAMETERLESS.contains(&method.as_str())
            {
                out.push(method);
            }
        }
    }
    out
}

/// Sends every method in `methods` with `{}` on `session` (pipelined) and returns, per method,
/// whether it is served (anything but `-32601`) and the error text, if any. Checks the
/// `-32601` text.
fn sweep(
    r: &mut Recorder,
    methods: &[String],
    session: Option<&str>,
) -> BTreeMap<String, (bool, Option<String>)> {
    let ids: Vec<u64> = methods
        .iter()
        .map(|m| r.send(m, json!({}), session))
        .collect();
    let deadline = Instant::now()
        .checked_add(SWEEP_TIMEOUT)
        .expect("a deadline within range");
    let replies: Vec<Option<usize>> = ids
        .iter()
        .map(|&id| r.reply_index(id, deadline.saturating_duration_since(Instant::now())))
        .collect();
    let missing: Vec<&String> = methods
        .iter()
        .zip(&replies)
        .filter(|(_, i)| i.is_none())
        .map(|(m, _)| m)
        .collect();
    assert!(
        missing.is_empty(),
        "no reply within {SWEEP_TIMEOUT:?} on {}: {missing:?}",
        session.unwrap_or("the browser connection")
    );
    methods
        .iter()
        .zip(replies)
        .map(|(m, i)| {
            let reply = r.reply_at(i.expect("checked above"));
            let served = match &reply {
                Err(e) if e["code"] == -32601 => {
                    let text = error_message(e);
                    if text != format!("'{m}' wasn't found") {
                        eprintln!("{m}: -32601 {text:?}");
                    }
                    assert!(
                        text.starts_with('\'') && text.ends_with("' wasn't found"),
                        "{m}: {text}"
                    );
                    false
                }
                _ => true,
            };
            (m.clone(), (served, reply.err().map(|e| error_message(&e))))
        })
        .collect()
}

fn domain_of(method: &str) -> &str {
    method.split_once('.').map_or(method, |(d, _)| d)
}

#[test]
fn domains_served_by_the_browser_target() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let protocol: Value =
        serde_json::from_str(&http_get(browser.port, "/json/protocol")).expect("protocol JSON");
    let probes = safe_probes(&protocol);
    let mut r = Recorder::connect(&browser.ws_url);
    let version = r.ok("Browser.getVersion", json!({}), None);
    eprintln!("measuring {}", version["product"]);
    let on_browser = sweep(&mut r, &probes, None);
    let page = r.open("about:blank");
    let on_page = sweep(&mut r, &probes, Some(&page.session));
    r.close(&page);

    // Per domain: the probed methods the browser serves and does not serve.
    let mut domains: BTreeMap<&str, (Vec<&str>, Vec<&str>)> = BTreeMap::new();
    for (m, (served, _)) in &on_browser {
        let e = domains.entry(domain_of(m)).or_default();
        (if *served { &mut e.0 } else { &mut e.1 }).push(m.as_str());
    }
    for (d, (yes, no)) in &domains {
        let kind = match (yes.is_empty(), no.is_empty()) {
            (true, _) => continue,
            (false, true) => "all".to_string(),
            (false, false) => format!("partial, not: {no:?}"),
        };
        let errors: BTreeSet<&str> = yes
            .iter()
            .filter_map(|m| on_browser[*m].1.as_deref())
            .collect();
        eprintln!(
            "browser target serves {d}: {kind}; {} probed; errors seen: {errors:?}",
            yes.len()
        );
    }
    let not_served: Vec<&str> = domains
        .iter()
        .filter(|(_, (yes, _))| yes.is_empty())
        .map(|(d, _)| *d)
        .collect();
    eprintln!("browser target serves none of: {not_served:?}");
    eprintln!(
        "{} methods probed; e.g. {:?}",
        probes.len(),
        on_browser["Page.getFrameTree"].1
    );

    // The table in src/measured.rs, method by method. A method that `/json/protocol` lists but
    // that this Chromium build implements on neither target ("'X' wasn't found" on both) says
    // nothing about routing: it fails wherever it goes. A method whose browser-target service
    // varies by build (`BROWSER_VARIES`) is routed to the page, which must serve it.
    let unimplemented = |m: &str| {
        let missing = |e: &Option<String>| e.as_deref().is_some_and(|e| e.contains("wasn't found"));
        missing(&on_browser[m].1) && on_page.get(m).is_none_or(|(_, e)| missing(e))
    };
    let skipped: Vec<&str> = on_browser
        .keys()
        .map(String::as_str)
        .filter(|m| unimplemented(m))
        .collect();
    eprintln!("implemented on neither target by this build, not checked: {skipped:?}");
    for m in measured::BROWSER_VARIES {
        eprintln!("{m}: browser target {:?}", on_browser.get(*m));
        // Chromium 156.0.8078.114 no longer lists Storage.getRelatedWebsiteSets in
        // `/json/protocol` (156.0.8078.73 did): a method this build does not have is not probed.
        if !on_browser.contains_key(*m) || unimplemented(m) {
            eprintln!("{m}: not in this build, not checked");
            continue;
        }
        assert!(
            on_page.get(*m).is_some_and(|(served, _)| *served),
            "{m} must be served by a page session (it is routed there)"
        );
    }
    let wrong: Vec<String> = on_browser
        .iter()
        .filter(|(m, (served, _))| {
            !unimplemented(m)
                && !measured::BROWSER_VARIES.contains(&m.as_str())
                && *served
                    != (measured::browser_domain(m)
                        || measured::BROWSER_PARTIAL.contains(&m.as_str()))
        })
        .map(|(m, (served, e))| format!("{m}: served={served} ({e:?})"))
        .collect();
    assert!(wrong.is_empty(), "differs from src/measured.rs: {wrong:#?}");
    for d in measured::BROWSER_DOMAINS {
        assert!(
            domains.get(d).is_some_and(|(yes, _)| !yes.is_empty()),
            "{d} is not probed or not served"
        );
    }
    // Methods of the table that this build's protocol does not have (the table was measured on
    // Chromium 156; e.g. 148 has no `Storage.*PrivateVerificationToken*`): nothing to route.
    let absent: Vec<&str> = measured::BROWSER_UNSERVED
        .iter()
        .chain(measured::BROWSER_PARTIAL)
        .filter(|m| !on_browser.contains_key(**m))
        .copied()
        .collect();
    eprintln!("in src/measured.rs but not in this build's protocol: {absent:?}");
    assert!(
        absent.len() * 2 < measured::BROWSER_UNSERVED.len() + measured::BROWSER_PARTIAL.len(),
        "most of the table must be probed: {absent:?}"
    );

    for (m, (served, e)) in &on_browser {
        if *served && on_page[m].1 != *e {
            eprintln!(
                "{m}: browser target {:?}, page session {:?}",
                e.as_deref().unwrap_or("ok"),
                on_page[m].1.as_deref().unwrap_or("ok")
            );
        }
    }
    // A page session serves the same domains, except two; and some methods only work on the
    // browser target.
    let browser_only: BTreeSet<&str> = on_browser
        .iter()
        .filter(|(m, (served, _))| *served && !on_page[*m].0)
        .map(|(m, _)| domain_of(m))
        .collect();
    assert_eq!(
        browser_only,
        BTreeSet::from(["BluetoothEmulation", "Tethering"])
    );
    assert_eq!(
        on_page["SystemInfo.getInfo"].1.as_deref(),
        Some("SystemInfo.getInfo is only supported on the browser target")
    );
    assert_eq!(
        on_page["Target.getBrowserContexts"].1.as_deref(),
        Some("Not allowed")
    );
}

/// Every method in src/measured.rs's dialog lists is probed by a test above, and nothing else is
/// probed on the page session without being listed.
#[test]
fn every_listed_method_is_probed() {
    let h = Handles {
        target: String::new(),
        document: String::new(),
        window: String::new(),
        root: 0,
    };
    let probed: BTreeSet<&str> = page_probes(&h)
        .into_iter()
        .map(|(m, _)| m)
        .chain(
            state_changing_probes()
                .into_iter()
                .filter(|p| !p.on_browser)
                .map(|p| p.method),
        )
        .collect();
    let listed: BTreeSet<&str> = measured::ANSWERED_WITH_DIALOG_OPEN
        .iter()
        .chain(measured::BLOCKED_BY_DIALOG)
        .copied()
        .collect();
    assert_eq!(probed, listed);
}
