//! A dialog left open by a CDP client that disconnected (SPEC §4.5, §11), on real Chromium: the
//! supervisor attaches anyway and reports `blocked` within `start_timeout`, explains why the
//! dialog cannot be answered, recovers after `browser_cdp(Page.reload)`, and then catches a new
//! dialog whose answer reaches the page.

use crate::common;
use cdp_supervisor::StartRequest;

use std::time::{Duration, Instant};

use crate::common::{HttpServer, RawCdp, Response};
use cdp_supervisor::{Config, DialogAction, Route, StartOptions, SupervisorRegistry, tools};
use serde_json::json;

const T: Duration = Duration::from_secs(10);

const PAGE: &str = r#"<!doctype html><html><head><meta charset="utf-8"><title>orphan</title></head>
<body><script>
function report(v) { fetch('/report?' + encodeURIComponent(v)); }
</script></body></html>"#;

#[test]
fn orphaned_dialog_is_reported_blocked_and_recovered_by_reload() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let server = HttpServer::start(|req| match req.path.as_str() {
        "/" => Response::html(PAGE),
        _ => Response::not_found(),
    });
    let url = server.url("127.0.0.1", "/");
    // Client A opens the page, raises a confirm and goes away without answering it.
    let page = {
        let mut a = RawCdp::connect(&browser.ws_url).expect("client A");
        let (page, session) = a.open_page(&url, T).expect("open the page");
        a.call("Page.enable", json!({}), Some(&session), T).unwrap();
        a.evaluate(
            &session,
            "setTimeout(() => report('first:' + confirm('orphan?')), 0); 1",
            T,
        )
        .unwrap();
        a.wait_event("Page.javascriptDialogOpening", Some(&session), T)
            .expect("the dialog opened while A owned the page");
        page
    }; // A disconnects here; the dialog stays open and wedges the page.

    let start_timeout = Duration::from_secs(6);
    let reg = SupervisorRegistry::new(Config::default().with_start_timeout(start_timeout).unwrap());
    let t = Instant::now();
    let sup = reg
        .start(
            StartRequest::new("orphan", &browser.ws_url)
                .with_options(StartOptions::default().with_target_id(page.clone())),
        )
        .expect("start returns instead of hanging");
    let took = t.elapsed();
    eprintln!("start on a wedged page returned after {took:?} (start_timeout {start_timeout:?})");
    assert!(took < start_timeout, "{took:?}");
    let snap = sup.snapshot();
    let blocked = snap.blocked.clone().expect("blocked is published");
    assert_eq!(blocked.reason, "orphaned_dialog");
    assert!(blocked.hint.contains("Page.reload"), "{}", blocked.hint);
    let j = tools::browser_snapshot(&reg, "orphan", &json!({}));
    assert_eq!(j["blocked"]["reason"], "orphaned_dialog", "{j}");

    let r = tools::browser_dialog(&reg, "orphan", &json!({"action": "accept"}));
    assert_eq!(r["success"], false, "{r}");
    let err = r["error"].as_str().unwrap();
    assert!(
        err.contains("cannot be answered over CDP") && err.contains("Page.reload"),
        "{err}"
    );

    // A call the orphan would hang fails at once instead of waiting for its deadline.
    let t = Instant::now();
    let r = tools::browser_cdp(
        &reg,
        "orphan",
        &json!({"method": "Runtime.evaluate", "target_id": page,
                "params": {"expression": "1"}, "timeout_s": 30}),
    );
    assert_eq!(r["success"], false, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap_or_default()
            .contains("cannot be answered over CDP"),
        "{r}"
    );
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());

    let r = tools::browser_cdp(
        &reg,
        "orphan",
        &json!({"method": "Page.reload", "target_id": page}),
    );
    assert_eq!(r["success"], true, "{r}");
    let s = sup
        .wait_for(T, |s| {
            s.blocked.is_none() && s.frame_tree.top.as_ref().is_some_and(|t| t.url == url)
        })
        .unwrap_or_else(|| panic!("not recovered: {}", sup.snapshot().to_json()));
    assert!(s.is_active());

    // Attached for real now: a new dialog is caught and its answer reaches the page.
    sup.call(
        "Runtime.evaluate",
        json!({"expression": "setTimeout(() => report('second:' + prompt('again?', 'd')), 0); 1"}),
        Route::Target(&page),
        T,
    )
    .expect("the page answers again");
    let d = sup.wait_for_dialog(T).expect("new dialog detected");
    assert_eq!(d.message, "again?");
    sup.respond_to_dialog(DialogAction::Accept, Some("recovered ✓"), None)
        .unwrap();
    let got = std::iter::from_fn(|| server.wait_report(T))
        .find(|r| r.starts_with("second:"))
        .expect("the page reported");
    assert_eq!(got, "second:recovered ✓");
    reg.stop("orphan");
    let mut c = RawCdp::connect(&browser.ws_url).unwrap();
    let _ = c.close_page(&page);
}
