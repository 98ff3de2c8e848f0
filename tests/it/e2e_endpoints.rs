//! An `http://127.0.0.1:PORT` endpoint of a real Chromium (what `--remote-debugging-port` prints)
//! resolves through `/json/version`, attaches, and serves dialogs (SPEC §9).

use crate::common;
use cdp_supervisor::StartRequest;

use std::time::Duration;

use crate::common::{HttpServer, RawCdp, Response};
use cdp_supervisor::{
    ClosedBy, Config, DialogAction, Route, StartOptions, SupervisorRegistry, cdp_available,
};
use serde_json::json;

const T: Duration = Duration::from_secs(10);

#[test]
fn http_endpoint_resolves_attaches_and_answers_a_dialog() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let http = browser.http_endpoint();
    assert!(http.starts_with("http://127.0.0.1:"), "{http}");
    assert!(cdp_available(&http), "cdp_available({http})");
    assert!(!cdp_available("http://127.0.0.1:1"));
    let server = HttpServer::start(|req| match req.path.as_str() {
        "/" => Response::html("<!doctype html><title>http endpoint</title><p>x</p>"),
        _ => Response::not_found(),
    });
    let mut cdp = RawCdp::connect(&browser.ws_url).expect("raw client");
    let (page, _session) = cdp
        .open_page(&server.url("127.0.0.1", "/"), T)
        .expect("open the page");
    let reg = SupervisorRegistry::new(Config::default());
    let sup = reg
        .start(
            StartRequest::new("http", &http)
                .with_options(StartOptions::default().with_target_id(page.clone())),
        )
        .expect("attach through the http endpoint");
    assert_eq!(
        sup.snapshot().page_target_id.as_deref(),
        Some(page.as_str())
    );
    let port = http.rsplit(':').next().unwrap();
    assert!(
        sup.cdp_url_redacted()
            .starts_with(&format!("ws://127.0.0.1:{port}/devtools/browser/")),
        "connected to the resolved WebSocket URL: {}",
        sup.cdp_url_redacted()
    );
    sup.call(
        "Runtime.evaluate",
        json!({"expression": "setTimeout(() => { window.__r = confirm('via http?'); }, 0); 1"}),
        Route::Target(&page),
        T,
    )
    .unwrap();
    let d = sup.wait_for_dialog(T).expect("the confirm is detected");
    assert_eq!(
        (d.kind.as_str(), d.message.as_str()),
        ("confirm", "via http?")
    );
    sup.respond_to_dialog(DialogAction::Accept, None, None)
        .unwrap();
    let got = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": "window.__r", "returnByValue": true}),
            Route::Target(&page),
            T,
        )
        .unwrap();
    assert_eq!(got["result"]["value"], json!(true), "{got}");
    assert_eq!(
        sup.snapshot().closed_dialog(&d.id).map(|c| c.closed_by),
        Some(ClosedBy::Agent)
    );
    reg.stop("http");
    let _ = cdp.close_page(&page);
}
