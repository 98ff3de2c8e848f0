//! Measurement (issue 20, item 9): `http://host:port/?token=T` against a real Browserless, which
//! answers `/json/version` chunked on a kept-alive connection and names a `webSocketDebuggerUrl`
//! without the token. Ignored: it needs a Browserless server, which is too heavy for CI (the npm
//! package is about 580 MB with its dependencies and wants Node 24).
//!
//! Run by hand (Browserless 2.42.0 on the system Chromium worked with Node 20 here):
//!
//! ```text
//! mkdir /tmp/bl && cd /tmp/bl
//! npm install --ignore-scripts @browserless.io/browserless@2.42.0
//! # Playwright's Chromium is where Browserless looks; point it at the system one.
//! mkdir -p pw/chromium-1208/chrome-linux64
//! ln -s /usr/lib/chromium/chromium pw/chromium-1208/chrome-linux64/chrome
//! # The npm layout hoists playwright-core, which Browserless requires from its own folder.
//! mkdir -p node_modules/@browserless.io/browserless/node_modules
//! ln -s /tmp/bl/node_modules/playwright-core node_modules/@browserless.io/browserless/node_modules/
//! # Only the Chromium routes (the others refuse to start without Chrome, Edge, Firefox, WebKit).
//! cat > start.mjs <<'EOF'
//! import { Browserless, BrowserlessChromeRoutes, BrowserlessEdgeRoutes,
//!          BrowserlessFirefoxRoutes, BrowserlessWebKitRoutes } from '@browserless.io/browserless';
//! const b = new Browserless();
//! for (const r of [BrowserlessChromeRoutes, BrowserlessEdgeRoutes, BrowserlessFirefoxRoutes,
//!                  BrowserlessWebKitRoutes]) b.disableRoutes(...Object.values(r));
//! b.start();
//! EOF
//! PLAYWRIGHT_BROWSERS_PATH=/tmp/bl/pw TOKEN=S3cretBL PORT=3123 HOST=127.0.0.1 node start.mjs &
//! BROWSERLESS_URL='http://127.0.0.1:3123/?token=S3cretBL' \
//!   cargo test --test it measure_browserless -- --ignored --nocapture
//! ```

use std::time::{Duration, Instant};

use cdp_supervisor::unversioned::resolve;
use cdp_supervisor::{ClosedBy, Config, DialogAction, Route, SupervisorRegistry, cdp_available};
use serde_json::json;

const T: Duration = Duration::from_secs(20);

#[test]
#[ignore = "needs a running Browserless: see the module doc"]
fn browserless_http_endpoint_with_a_token_attaches_and_answers_a_dialog() {
    let url = std::env::var("BROWSERLESS_URL")
        .expect("BROWSERLESS_URL=http://127.0.0.1:3123/?token=... (see the module doc)");
    let token = url::Url::parse(&url)
        .expect("a URL")
        .query_pairs()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
        .expect("a ?token=");

    let t = Instant::now();
    let ws = resolve(&url).expect("discovery");
    eprintln!(
        "discovery: {:?} -> {}",
        t.elapsed(),
        cdp_supervisor::redact_url(&ws)
    );
    assert!(ws.starts_with("ws://"), "{ws}");
    assert!(
        ws.contains(&format!("token={token}")),
        "the token rides along"
    );

    let t = Instant::now();
    assert!(cdp_available(&url), "cdp_available");
    eprintln!("cdp_available: {:?}", t.elapsed());

    let reg = SupervisorRegistry::new(Config::default());
    let t = Instant::now();
    let sup = reg.get_or_start("bl", &url).expect("attach");
    eprintln!("attach: {:?}", t.elapsed());
    let snap = sup.snapshot();
    let page = snap.page_target_id.clone().expect("a page");
    assert!(!snap.cdp_url.contains(&token), "{}", snap.cdp_url);
    sup.call(
        "Runtime.evaluate",
        json!({"expression": "setTimeout(() => { window.__r = prompt('via Browserless?', 'no'); }, 0); 1"}),
        Route::Target(&page),
        T,
    )
    .expect("evaluate");
    let t = Instant::now();
    let d = sup.wait_for_dialog(T).expect("the prompt is detected");
    eprintln!("dialog detected after {:?}", t.elapsed());
    assert_eq!(d.message, "via Browserless?");
    sup.respond_to_dialog(DialogAction::Accept, Some("yes ✓"), None)
        .expect("answer");
    let got = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": "window.__r", "returnByValue": true}),
            Route::Target(&page),
            T,
        )
        .expect("read the answer");
    assert_eq!(got["result"]["value"], json!("yes ✓"), "{got}");
    assert_eq!(
        sup.snapshot().closed_dialog(&d.id).map(|c| c.closed_by),
        Some(ClosedBy::Agent)
    );
    reg.stop_all();
}
