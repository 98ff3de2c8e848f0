//! The supervisor page in a real browser (issue 33, point 6): a task supervised on headless
//! Chromium raises a prompt whose message is markup; the page is served by the MCP HTTP server
//! and opened in a second headless Chromium, which this crate's own supervisor drives through
//! its call API (`Runtime.evaluate`, `Input.*`, `Page.captureScreenshot`): the dialog appears
//! in the page as text, the prompt answer is typed and Accept is clicked, and the task's page
//! gets the answer. The page's layout on a narrow screen and its labels are checked there too.
//!
//! `CDP_SUPERVISOR_PAGE_SCREENSHOT=PATH` saves the screenshot taken with the dialog pending
//! (`docs/supervisor-page.png` is one).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use cdp_supervisor::mcp::http::{HttpOptions, HttpServer};
use cdp_supervisor::{Config, Route, StartOptions, Supervisor, SupervisorRegistry};
use serde_json::{Value, json};

use crate::common::pages::attach_to_page;
use crate::common::{HttpServer as Site, RawCdp, Response, js};

const T: Duration = Duration::from_secs(20);

const SHOP: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>Checkout</title></head>
<body><h1>Checkout</h1><iframe id="pay"></iframe>
<script>
  // Another site (localhost, not 127.0.0.1): an out-of-process iframe.
  document.getElementById("pay").src = "http://localhost:" + location.port + "/pay";
</script></body></html>"#;

const PAY: &str = r#"<!doctype html><html><body><p>pay</p></body></html>"#;

/// A title that is markup (a `<title>` holds text: the browser reports it as written).
const RECEIPT_TITLE: &str = "Receipt <img src=x onerror=alert(1)>";
const RECEIPT: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>Receipt <img src=x onerror=alert(1)></title></head>
<body><p>Thank you</p></body></html>"#;

/// The selector of the title of the task's page in the viewer's card.
const PAGE_TITLE: &str = "[data-task=\"checkout\"] details:nth-of-type(1) li strong";

/// The message of the prompt: markup that would run if the page inserted it as HTML.
const MARKUP: &str = "<img src=x onerror=\"document.title='pwned'\">Coupon code?";

/// `Runtime.evaluate` of `expr` in the viewer's page (awaiting a promise); its value.
pub fn eval(viewer: &Supervisor, expr: &str) -> Value {
    let r = viewer
        .call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
            Route::Page,
            T + Duration::from_secs(10),
        )
        .expect("Runtime.evaluate in the viewer");
    if let Some(e) = r.get("exceptionDetails") {
        panic!("{expr} threw: {e}");
    }
    r["result"].get("value").cloned().unwrap_or(Value::Null)
}

/// Waits in the viewer's page (a MutationObserver, no polling) until `cond` (an expression)
/// is truthy; its value. Fails after `within`.
pub fn dom_wait(viewer: &Supervisor, cond: &str, within: Duration) -> Value {
    let expr = format!(
        "new Promise((resolve, reject) => {{
           const check = () => {{ try {{ const v = ({cond}); if (v) {{ resolve(typeof v === 'object' ? true : v); return true; }} }} catch (e) {{}} return false; }};
           if (check()) return;
           const mo = new MutationObserver(() => {{ if (check()) {{ mo.disconnect(); clearTimeout(t); }} }});
           mo.observe(document, {{subtree: true, childList: true, characterData: true, attributes: true}});
           const t = setTimeout(() => {{ mo.disconnect(); reject(new Error('not within {ms} ms: ' + {quoted})); }}, {ms});
         }})",
        ms = within.as_millis(),
        quoted = js(cond),
    );
    eval(viewer, &expr)
}

/// Clicks the middle of the element `selector` finds (scrolled into view) with mouse events.
pub fn click(viewer: &Supervisor, selector: &str) {
    let rect = eval(
        viewer,
        &format!(
            "(() => {{ const e = document.querySelector({s}); e.scrollIntoView({{block: 'center'}});
                const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()",
            s = js(selector)
        ),
    );
    let (x, y) = (rect[0].as_f64().unwrap(), rect[1].as_f64().unwrap());
    for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
        viewer
            .call(
                "Input.dispatchMouseEvent",
                json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
                Route::Page,
                T,
            )
            .expect("a mouse event");
    }
}

/// A key press (down and up) of `key` (`Tab`, `Enter`).
fn press(viewer: &Supervisor, key: &str, code: i64) {
    for kind in ["keyDown", "keyUp"] {
        viewer
            .call(
                "Input.dispatchKeyEvent",
                json!({"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code}),
                Route::Page,
                T,
            )
            .expect("a key event");
    }
}

/// The viewer: a second Chromium, a page in it at `url`, and our supervisor on that page.
pub struct Viewer {
    pub sup: Arc<Supervisor>,
    _reg: SupervisorRegistry,
    _cdp: RawCdp,
    _browser: common::Browser,
}

impl Viewer {
    pub fn open(url: &str, width: u32, height: u32) -> Viewer {
        let browser = common::Browser::launch().expect("launch the viewer's Chromium");
        let mut cdp = RawCdp::connect(&browser.ws_url).expect("connect to the viewer");
        let (page, _) = cdp
            .open_visible_page(url, T)
            .expect("open the supervisor page");
        let reg = SupervisorRegistry::new(Config::default());
        let sup = attach_to_page(
            &reg,
            "viewer",
            &browser.ws_url,
            &page,
            StartOptions::default(),
        );
        sup.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
            Route::Page,
            T,
        )
        .expect("set the viewport");
        Viewer {
            sup,
            _reg: reg,
            _cdp: cdp,
            _browser: browser,
        }
    }
}

#[test]
fn a_person_answers_a_prompt_from_the_page_in_a_real_browser() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let site = Site::start(|req| match req.path.as_str() {
        "/" => Response::html(SHOP),
        "/pay" => Response::html(PAY),
        "/receipt" => Response::html(RECEIPT),
        _ => Response::not_found(),
    });
    let config = Config::default().with_capture_console(true);
    let server = HttpServer::start(config, HttpOptions::default().with_addr("127.0.0.1:0"))
        .expect("the MCP HTTP server starts");
    let mut cdp = RawCdp::connect(&browser.ws_url).expect("connect a raw client");
    let (page, session) = cdp
        .open_page(&site.url("127.0.0.1", "/"), T)
        .expect("open the task's page");
    let reg = server.mcp().registry();
    let task = attach_to_page(
        reg,
        "checkout",
        &browser.ws_url,
        &page,
        StartOptions::default(),
    );

    let viewer = Viewer::open(&format!("http://{}/", server.local_addr()), 900, 900);
    let v = &viewer.sup;
    dom_wait(v, "document.querySelector('[data-task=\"checkout\"]')", T);
    // The page's title, asked of the browser at attach (and after each load).
    dom_wait(
        v,
        &format!(
            "document.querySelector({})?.textContent === 'Checkout'",
            js(PAGE_TITLE)
        ),
        T,
    );
    // The page fetches the task page's thumbnail by itself.
    dom_wait(
        v,
        "document.querySelector('[data-task=\"checkout\"] img.thumb')",
        T,
    );

    cdp.evaluate(
        &session,
        "setTimeout(() => { throw new Error('the coupon service did not answer'); }, 0); 1",
        T,
    )
    .unwrap();
    task.wait_for(T, |s| !s.console_errors.is_empty())
        .expect("the uncaught error is in the console ring");
    let trigger = format!(
        "setTimeout(() => {{ const r = prompt({m}, 'none'); \
         fetch('/report?' + encodeURIComponent(JSON.stringify({{r}}))); }}, 0); 'scheduled'",
        m = js(MARKUP)
    );
    assert_eq!(
        cdp.evaluate(&session, &trigger, T).unwrap(),
        json!("scheduled")
    );
    let dialog = task.wait_for_dialog(T).expect("the prompt is pending");
    let box_sel = format!("[data-dialog=\"{}\"]", dialog.id);
    dom_wait(v, &format!("document.querySelector({})", js(&box_sel)), T);

    // No picture while a dialog is open (Chromium paints nothing): the page says why.
    click(v, "[data-task=\"checkout\"] button[data-key$=\"thumb\"]");
    dom_wait(
        v,
        "[...document.querySelectorAll('[data-task=\"checkout\"] .thumbs .meta')].some(p => p.textContent.includes('dialog'))",
        T,
    );
    // The markup is text: no image was made, nothing ran.
    let shown = eval(
        v,
        &format!(
            "(() => {{ const b = document.querySelector({s}); return {{
                msg: b.querySelector('.msg').textContent, imgs: b.querySelectorAll('img').length,
                title: document.title, label: b.querySelector('input').labels[0].textContent,
                buttons: [...b.querySelectorAll('button')].map(x => x.textContent),
                value: b.querySelector('input').value, meta: b.querySelector('.meta').textContent }}; }})()",
            s = js(&box_sel)
        ),
    );
    assert_eq!(shown["msg"], MARKUP, "{shown}");
    assert_eq!(shown["imgs"], 0, "{shown}");
    assert_ne!(shown["title"], "pwned");
    assert_eq!(shown["label"], "Answer to the prompt");
    assert_eq!(shown["buttons"], json!(["Accept", "Dismiss"]));
    assert_eq!(shown["value"], "none", "the default answer is filled in");
    let meta = shown["meta"].as_str().unwrap();
    assert!(
        meta.contains("opened")
            && meta.contains("s ago")
            && meta.contains("watchdog dismisses it in"),
        "{meta}"
    );

    // Every control has a name, and none is out of the keyboard's reach.
    let unlabelled = eval(
        v,
        "[...document.querySelectorAll('button, input, summary')].filter(e =>
            e.tabIndex < 0 || !(e.textContent.trim() || (e.labels && e.labels.length))).length",
    );
    assert_eq!(unlabelled, 0);

    // Type the answer (the field selected, so the typing replaces the default).
    click(v, &format!("{box_sel} input"));
    eval(
        v,
        &format!(
            "document.querySelector({}).select()",
            js(&format!("{box_sel} input"))
        ),
    );
    v.call(
        "Input.insertText",
        json!({"text": "SAVE10 from a person"}),
        Route::Page,
        T,
    )
    .expect("type");
    // Tab goes from the field to Accept.
    press(v, "Tab", 9);
    assert_eq!(eval(v, "document.activeElement.textContent"), "Accept");

    // The frame tree marks the cross-site iframe; the console error shows.
    click(v, "[data-task=\"checkout\"] details:nth-of-type(2) summary");
    click(v, "[data-task=\"checkout\"] details:nth-of-type(4) summary");
    dom_wait(
        v,
        "document.querySelector('[data-task=\"checkout\"] .oopif')",
        T,
    );
    dom_wait(
        v,
        "[...document.querySelectorAll('[data-task=\"checkout\"] li')].some(l => l.textContent.includes('the coupon service did not answer'))",
        T,
    );
    // Clicking moved the focus: back to the field, then Tab again.
    click(v, &format!("{box_sel} input"));
    press(v, "Tab", 9);
    assert_eq!(eval(v, "document.activeElement.textContent"), "Accept");
    let shot = v
        .call(
            "Page.captureScreenshot",
            json!({"format": "png"}),
            Route::Page,
            T,
        )
        .expect("a screenshot of the page");
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().unwrap())
        .unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    if let Ok(path) = std::env::var("CDP_SUPERVISOR_PAGE_SCREENSHOT") {
        std::fs::write(&path, &png).expect("save the screenshot");
    }

    click(v, &format!("{box_sel} button.primary"));
    let report = site.wait_report_json(T);
    assert_eq!(
        report["r"], "SAVE10 from a person",
        "the page's prompt() returned the answer"
    );
    let snap = task
        .wait_for(T, |s| s.closed_dialog(&dialog.id).is_some())
        .expect("the dialog is recorded closed");
    let closed = snap.closed_dialog(&dialog.id).unwrap();
    assert_eq!(closed.user_input.as_deref(), Some("SAVE10 from a person"));
    assert_eq!(closed.closed_by.as_str(), "human");
    // The page shows it closed, by whom.
    dom_wait(
        v,
        &format!(
            "!document.querySelector({}) && document.querySelector('[data-task=\"checkout\"] details:nth-of-type(3) li strong')",
            js(&box_sel)
        ),
        T,
    );

    // Take over, then back: the held time shows.
    let hold = "[data-task=\"checkout\"] button[data-key$=\"hold\"]";
    click(v, hold);
    task.wait_for(T, |s| s.handover.is_held())
        .expect("the task is held");
    dom_wait(
        v,
        &format!(
            "document.querySelector({}).textContent === 'Take back' && document.querySelector('[data-task=\"checkout\"] .held')",
            js(hold)
        ),
        T,
    );
    click(v, hold);
    task.wait_for(T, |s| !s.handover.is_held())
        .expect("the task is taken back");
    dom_wait(
        v,
        "[...document.querySelectorAll('[data-task=\"checkout\"] .meta')].some(p => p.textContent.startsWith('Held by a person 1 time'))",
        T,
    );

    // A new document's title shows after its load, as text.
    cdp.evaluate(&session, "location.href = '/receipt'; 1", T)
        .unwrap();
    dom_wait(
        v,
        &format!(
            "document.querySelector({})?.textContent === {}",
            js(PAGE_TITLE),
            js(RECEIPT_TITLE)
        ),
        T,
    );
    let imgs = eval(
        v,
        "document.querySelectorAll('[data-task=\"checkout\"] details:nth-of-type(1) img').length",
    );
    assert_eq!(imgs, 0, "the title's markup made no element");
    assert!(
        viewer.sup.snapshot().pending_dialogs.is_empty(),
        "nothing of the title ran in the viewer"
    );

    // Narrow screen: nothing wider than the viewport.
    v.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 360, "height": 740, "deviceScaleFactor": 1, "mobile": true}),
        Route::Page,
        T,
    )
    .unwrap();
    let overflow = eval(
        v,
        "document.documentElement.scrollWidth - window.innerWidth",
    );
    assert!(
        overflow.as_f64().unwrap() <= 0.0,
        "wider than a phone by {overflow} px"
    );

    reg.stop("checkout");
    dom_wait(v, "!document.querySelector('[data-task=\"checkout\"]')", T);
    let _ = cdp.close_page(&page);
    drop(viewer);
    server.shutdown();
}
