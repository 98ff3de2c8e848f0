//! Issue 12 findings 6, 9, 10 and 11 against a real headless Chromium (SPEC §10, §11).
//!
//! Two sites: A (`http://127.0.0.1:P1`) serves the top page with a cross-site iframe from B
//! (`http://localhost:P2`, an out-of-process iframe), which nests a same-origin frame (same
//! process as the OOPIF). Every test opens its own page with a raw client, waits for `load`,
//! attaches its own supervisor to exactly that page, and waits for conditions with deadlines.
//!
//! Measured on Chromium 156 headless: `Page.crash` on an OOPIF session sends
//! `Inspector.targetCrashed` on that session; on the page session it first detaches the page's
//! OOPIFs, then sends `Inspector.targetCrashed`. Calls into a crashed renderer get no answer
//! until `Page.navigate`/`Page.reload` (which answer at once) bring a new one; then they are
//! answered "Target crashed" and `Inspector.targetReloadedAfterCrash` follows.
//!
//! Tests skip (printing `SKIPPED: no Chromium`) when no Chromium is installed, unless
//! `CDP_SUPERVISOR_E2E=require`.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::pages::{attach_to_page, wait_pick};
use crate::common::{HttpServer, RawCdp, Response};
use cdp_supervisor::{
    Config, Error, Route, Snapshot, StartOptions, Supervisor, SupervisorRegistry,
};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(15);

fn html(body: &str) -> String {
    format!("<!doctype html><html><head><meta charset=\"utf-8\"></head><body>{body}</body></html>")
}

struct Fixture {
    a: HttpServer,
    b: HttpServer,
    cdp: RawCdp,
    page: String,
    reg: SupervisorRegistry,
    sup: Arc<Supervisor>,
}

impl Fixture {
    fn open(ws_url: &str, task: &str, with_frames: bool) -> Fixture {
        let b = HttpServer::start(|req| match req.path.as_str() {
            "/cross" => Response::html(html(
                "<p>cross</p><iframe id=\"nested\" src=\"/nested\"></iframe>",
            )),
            "/nested" => Response::html(html("<p>nested</p>")),
            _ => Response::not_found(),
        });
        let cross = b.url("localhost", "/cross");
        let a = HttpServer::start(move |req| match req.path.as_str() {
            "/" => Response::html(html(&format!(
                "<p>top</p><iframe id=\"cross\" src=\"{cross}\"></iframe>"
            ))),
            "/plain" => Response::html(html("<p>plain</p>")),
            _ => Response::not_found(),
        });
        let path = if with_frames { "/" } else { "/plain" };
        let mut cdp = RawCdp::connect(ws_url).expect("raw CDP client");
        let (page, _session) = cdp
            .open_page(&a.url("127.0.0.1", path), T)
            .expect("open the test page");
        let reg = SupervisorRegistry::new(Config::default());
        let sup = attach_to_page(&reg, task, ws_url, &page, StartOptions::default());
        Fixture {
            a,
            b,
            cdp,
            page,
            reg,
            sup,
        }
    }

    fn cross_url(&self, path: &str) -> String {
        self.b.url("localhost", path)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.reg.stop_all();
        let _ = self.cdp.close_page(&self.page);
        let _ = &self.a;
    }
}

/// The OOPIF (not crashed, with a session) and its nested same-process frame, once both are
/// in the snapshot with a JavaScript context.
fn frames(sup: &Supervisor, cross_url: &str) -> (String, String) {
    wait_pick(sup, T, "the OOPIF and its nested frame", |s: &Snapshot| {
        let x = s
            .frames
            .values()
            .find(|r| r.is_oopif && r.session_id.is_some() && !r.crashed && r.url == cross_url)?;
        let n = s
            .frames
            .values()
            .find(|r| r.parent_frame_id.as_deref() == Some(x.frame_id.as_str()))?;
        // Its document has committed (a URL): calls routed to it find its main world.
        (!n.is_oopif && !n.url.is_empty()).then_some(())?;
        Some((x.frame_id.clone(), n.frame_id.clone()))
    })
}

fn eval(sup: &Supervisor, route: Route<'_>, expr: &str) -> Result<Value, Error> {
    sup.call(
        "Runtime.evaluate",
        json!({"expression": expr, "returnByValue": true}),
        route,
        T,
    )
    .map(|v| v["result"]["value"].clone())
}

fn url_of(s: &Snapshot, frame: &str) -> String {
    s.frames
        .get(frame)
        .map(|r| r.url.clone())
        .unwrap_or_default()
}

#[test]
fn same_document_navigations_in_top_oopif_and_nested_frame_update_frame_tree() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let fx = Fixture::open(&browser.ws_url, "e2e-hf-same-doc", true);
    let sup = &fx.sup;
    let (oopif, nested) = frames(sup, &fx.cross_url("/cross"));
    let top = fx.page.clone();

    eval(sup, Route::Page, "location.hash = 'top'; 1").expect("hash in the top frame");
    // Puppeteer's "frames within OOP iframes" case: pushState inside the OOPIF.
    eval(
        sup,
        Route::Frame(&oopif),
        "history.pushState({}, '', '/pushed?x=1'); 1",
    )
    .expect("pushState in the OOPIF");
    eval(
        sup,
        Route::Frame(&nested),
        "history.pushState({}, '', '/nested-pushed'); location.hash = 'n'; 1",
    )
    .expect("pushState and hash in the nested frame");
    let want_top = format!("{}#top", fx.a.url("127.0.0.1", "/"));
    let want_oopif = fx.cross_url("/pushed?x=1");
    let want_nested = fx.cross_url("/nested-pushed#n");
    let s = sup
        .wait_for(T, |s| {
            url_of(s, &top) == want_top
                && url_of(s, &oopif) == want_oopif
                && url_of(s, &nested) == want_nested
        })
        .unwrap_or_else(|| panic!("URLs did not follow: {}", sup.snapshot().to_json()));
    // And the capped tree the agent reads shows the same.
    assert_eq!(s.frame_tree.top.as_ref().unwrap().url, want_top);
    let shown: Vec<&str> = s
        .frame_tree
        .children
        .iter()
        .map(|c| c.url.as_str())
        .collect();
    assert!(
        shown.contains(&want_oopif.as_str()) && shown.contains(&want_nested.as_str()),
        "{shown:?}"
    );
}

#[test]
fn crashed_oopif_then_crashed_page_fail_calls_at_once_and_recover_on_reload() {
    if common::shared_browser().is_none() {
        return;
    }
    // A browser of its own: crashing a renderer takes down every frame of the same site in
    // it, and the other tests' OOPIFs are from `localhost` too.
    let browser = common::Browser::launch().expect("launch a Chromium for the crash test");
    let fx = Fixture::open(&browser.ws_url, "e2e-hf-crash", true);
    let sup = &fx.sup;
    let (oopif, _) = frames(sup, &fx.cross_url("/cross"));

    // Crash the OOPIF's renderer. `Page.crash` itself is never answered: the crash fails it.
    let t0 = Instant::now();
    let r = sup.call(
        "Page.crash",
        json!({}),
        Route::Frame(&oopif),
        Duration::from_secs(10),
    );
    assert!(matches!(r, Err(Error::TargetCrashed { .. })), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let s = wait_pick(sup, T, "the OOPIF marked crashed", |s| {
        s.frames
            .get(&oopif)
            .filter(|r| r.crashed)
            .map(|_| s.to_json())
    });
    let entry = s["frame_tree"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["frame_id"] == oopif.as_str())
        .cloned()
        .expect("the OOPIF in frame_tree");
    assert_eq!(entry["crashed"], true, "{entry}");
    assert!(s.get("crashed").is_none(), "the page did not crash");
    let t0 = Instant::now();
    let err = eval(sup, Route::Frame(&oopif), "1").expect_err("calls into a crashed OOPIF fail");
    assert!(matches!(err, Error::TargetCrashed { .. }), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "at once, not at the deadline"
    );
    assert_eq!(
        eval(sup, Route::Page, "1 + 1").expect("the page still answers"),
        json!(2)
    );

    // Reload: a new OOPIF, not crashed, answering.
    sup.call("Page.reload", json!({}), Route::Page, T)
        .expect("Page.reload");
    let (oopif2, _) = frames(sup, &fx.cross_url("/cross"));
    assert_eq!(
        eval(sup, Route::Frame(&oopif2), "2 + 2").expect("the new OOPIF answers"),
        json!(4)
    );

    // Crash the page itself.
    let t0 = Instant::now();
    let r = sup.call(
        "Page.crash",
        json!({}),
        Route::Page,
        Duration::from_secs(10),
    );
    assert!(matches!(r, Err(Error::TargetCrashed { .. })), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(5));
    let s = wait_pick(sup, T, "the page marked crashed", |s| {
        s.crashed.then(|| s.to_json())
    });
    assert_eq!(s["crashed"], true);
    assert_eq!(s["frame_tree"]["top"]["crashed"], true);
    let t0 = Instant::now();
    let err = eval(sup, Route::Page, "1").expect_err("calls into a crashed page fail");
    assert!(matches!(err, Error::TargetCrashed { .. }), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(1));
    // A reload goes through and brings the page back.
    sup.call("Page.reload", json!({}), Route::Page, T)
        .expect("Page.reload of a crashed page");
    wait_pick(sup, T, "the page recovered", |s| (!s.crashed).then_some(()));
    let (oopif3, _) = frames(sup, &fx.cross_url("/cross"));
    assert_eq!(
        eval(sup, Route::Page, "3 + 3").expect("the page answers again"),
        json!(6)
    );
    assert_eq!(
        eval(sup, Route::Frame(&oopif3), "4 + 4").expect("its OOPIF too"),
        json!(8)
    );
}

#[test]
fn closing_the_page_with_an_alert_open_reports_the_close_as_a_success() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let fx = Fixture::open(&browser.ws_url, "e2e-hf-close", false);
    let sup = &fx.sup;
    eval(sup, Route::Page, "setTimeout(() => alert('bye'), 0); 1").expect("schedule the alert");
    wait_pick(sup, T, "the alert", |s| s.pending_dialogs.first().cloned());
    // Chromium sends javascriptDialogClosed, Inspector.detached and detachedFromTarget before
    // the reply to the close (SPEC §11): the reply must still reach the caller.
    let r = sup.call(
        "Target.closeTarget",
        json!({"targetId": fx.page}),
        Route::Browser,
        T,
    );
    assert_eq!(r.expect("the close succeeded"), json!({"success": true}));
    let s = wait_pick(sup, T, "the supervisor ends", |s| {
        (!s.is_active()).then(|| s.clone())
    });
    assert!(
        s.disconnect_reason
            .as_deref()
            .unwrap_or("")
            .contains("page target"),
        "{:?}",
        s.disconnect_reason
    );
}

#[test]
fn deeply_nested_evaluate_result_is_a_clear_error_never_null() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    let fx = Fixture::open(&browser.ws_url, "e2e-hf-deep", false);
    let sup = &fx.sup;
    let deep = |n: usize| {
        format!("(() => {{ let a = []; for (let i = 1; i < {n}; i++) a = [a]; return a; }})()")
    };
    let v = eval(sup, Route::Page, &deep(100)).expect("100 deep decodes");
    let mut depth = 1;
    let mut cur = &v;
    while let Some(inner) = cur.as_array().and_then(|a| a.first()) {
        cur = inner;
        depth += 1;
    }
    assert_eq!(depth, 100);
    match eval(sup, Route::Page, &deep(130)) {
        Err(Error::UndecodableReply { method, .. }) => assert_eq!(method, "Runtime.evaluate"),
        other => panic!("a 130-deep result must be a clear decode error, got {other:?}"),
    }
    assert!(sup.is_active(), "the supervisor keeps serving");
}
