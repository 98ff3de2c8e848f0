//! Invisible supervision on real Chromium (SPEC §19, issue 32), with the detection page
//! (`common/detect.js`: 27 checks, each a known way a page tells that a protocol client or an
//! automation layer is attached, run in the top page, a same-origin iframe and a cross-site
//! OOPIF before and after a client attaches).
//!
//! * The live control, in the same browser first: a raw client that only sends `Runtime.enable`
//!   flips the console checks in every frame (measured on Chromium 148:
//!   `console_prepare_stack_trace`, the page's `Error.prepareStackTrace` called for an `Error` it
//!   logged), so the page sees what it claims to see; the test fails if it does not.
//! * The supervisor with the default configuration flips nothing, in any frame, while it
//!   catches and answers dialogs (top page, same-origin frame, OOPIF, `beforeunload`, popup),
//!   keeps the frame tree current, routes calls into the same-origin frame's main world (found
//!   through the DOM) and tracks a crash; checked again after all that.
//! * The opt-ins flip exactly what the README says they reveal: console capture what
//!   `Runtime.enable` does, the dialog bridge its replaced functions (and, once a dialog went
//!   through it, a resource entry for its host).
//!
//! Each test has a Chromium of its own (a window opening elsewhere in the browser could take
//! the focus, which the `visibility` check reads). The side-by-side table of other clients is
//! `tests/it/measure_stealth.rs`.

use std::sync::Arc;
use std::time::Duration;

use crate::common::detect::{DetectPage, Flips, Lab, Round, raw_client};
use crate::common::pages::{attach_to_page, wait_closed, wait_pick};
use cdp_supervisor::{
    BridgeMode, Config, DialogAction, DialogKind, PendingDialog, Route, StartOptions, Supervisor,
    SupervisorRegistry,
};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(15);

/// The checks the dialog bridge flips as soon as it is installed (README "Invisible
/// supervision"), in every frame.
const BRIDGE_FLIPS: &[&str] = &[
    "tostring_alert",
    "tostring_confirm",
    "tostring_prompt",
    "descriptors",
    "stack_through_dialogs",
];

/// The frame ids of a detection page as the supervisor sees them: (same-origin, OOPIF).
fn frames_of(sup: &Supervisor, page: &DetectPage) -> (String, String) {
    let top = page.target.clone();
    wait_pick(sup, T, "the detection page's frames", |s| {
        let find = |role: &str| {
            s.frames.values().find(|f| {
                f.url.contains(&format!("role={role}&"))
                    && f.parent_frame_id.as_deref() == Some(&top)
            })
        };
        let same = find("same").filter(|f| !f.is_oopif)?;
        let oopif = find("oopif").filter(|f| f.is_oopif && f.session_id.is_some())?;
        Some((same.frame_id.clone(), oopif.frame_id.clone()))
    })
}

fn assert_no_flips(what: &str, before: &Round, after: &Round) {
    let flips = Flips::of(before, after);
    assert!(
        flips.none(),
        "{what}: the page saw the supervisor:\n{}",
        flips.describe(before, after)
    );
}

fn evaluate(sup: &Supervisor, route: Route<'_>, expression: &str) -> Value {
    let v = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
            route,
            T,
        )
        .unwrap_or_else(|e| panic!("evaluate {expression:?} in {route:?}: {e}"));
    assert!(v.get("exceptionDetails").is_none(), "{expression}: {v}");
    v["result"]["value"].clone()
}

/// Raises `call` (e.g. `confirm('x')`) from a timer in `route`, its result written to the
/// document's title (no global: the detection page counts new properties of `window`), and
/// waits until the dialog is pending.
fn raise(sup: &Supervisor, route: Route<'_>, call: &str, message: &str) -> PendingDialog {
    evaluate(
        sup,
        route,
        &format!("setTimeout(() => {{ document.title = 'answer:' + String({call}); }}, 0); 1"),
    );
    wait_pick(sup, T, &format!("{call} pending"), |s| {
        s.pending_dialogs
            .iter()
            .find(|d| d.message == message)
            .cloned()
    })
}

fn answer(sup: &Supervisor, d: &PendingDialog, action: DialogAction, text: Option<&str>) {
    sup.respond_to_dialog(action, text, Some(&d.id))
        .unwrap_or_else(|e| panic!("answering {}: {e}", d.id));
    wait_closed(sup, T, &d.id);
}

/// Waits until `route`'s document title is `want` (the page's JS got the dialog's answer).
fn wait_title(sup: &Supervisor, route: Route<'_>, want: &str) {
    let ok = crate::common::wait_until(T, || {
        (evaluate(sup, route, "document.title") == json!(want)).then_some(())
    });
    assert!(ok.is_some(), "{route:?}: the title never became {want:?}");
}

fn start(
    lab: &Lab,
    page: &DetectPage,
    config: Config,
    options: StartOptions,
) -> (SupervisorRegistry, Arc<Supervisor>) {
    let reg = SupervisorRegistry::new(config);
    let sup = attach_to_page(&reg, "stealth", &lab.ws_url, &page.target, options);
    (reg, sup)
}

/// The live control: a raw client that only sends `Runtime.enable` (on the page and its OOPIF)
/// flips console checks, and only those, in every frame; returns what it flipped.
fn live_control(lab: &mut Lab) -> Flips {
    let m = lab
        .measure(|ws, target| raw_client(ws, target, &[("Runtime.enable", json!({}))]))
        .expect("measured");
    eprintln!(
        "Runtime.enable flips: top {:?}, same-origin frame {:?}, OOPIF {:?}",
        m.flips.top, m.flips.same, m.flips.oopif
    );
    for role in ["top", "same", "oopif"] {
        let flipped = m.flips.of_role(role);
        assert!(
            !flipped.is_empty(),
            "the detection page is blind in {role}: Runtime.enable flipped nothing"
        );
        assert!(
            flipped.iter().all(|c| c.starts_with("console_")),
            "{role}: Runtime.enable alone should only flip console checks:\n{}",
            m.flips.describe(&m.before, &m.after)
        );
    }
    m.flips
}

/// Arms a `beforeunload` handler in the top page (with a user gesture, which Chromium
/// requires), navigates away through the supervisor, and dismisses the dialog that raises: the
/// page stays. The call fails at once with `BlockedByDialog`, or answers before the dialog
/// event; either way the dialog is pending.
fn beforeunload_dismissed(sup: &Supervisor, page: &DetectPage) {
    let armed = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": "addEventListener('beforeunload', e => { e.preventDefault(); \
                   e.returnValue = ''; }); 'armed'", "userGesture": true, "returnByValue": true}),
            Route::Target(&page.target),
            T,
        )
        .expect("arm beforeunload");
    assert_eq!(armed["result"]["value"], "armed", "{armed}");
    let r = sup.call(
        "Page.navigate",
        json!({"url": "about:blank"}),
        Route::Target(&page.target),
        T,
    );
    assert!(
        matches!(
            r,
            Ok(_) | Err(cdp_supervisor::Error::BlockedByDialog { .. })
        ),
        "{r:?}"
    );
    let d = wait_pick(sup, T, "the beforeunload dialog", |s| {
        s.pending_dialogs
            .iter()
            .find(|d| d.kind == DialogKind::BeforeUnload)
            .cloned()
    });
    answer(sup, &d, DialogAction::Dismiss, None);
}

#[test]
fn the_default_supervisor_flips_nothing_that_runtime_enable_flips_while_everything_works() {
    let Some(mut lab) = Lab::new(&[]) else { return };
    // The page is live: the control flips its checks in every frame, in this browser.
    live_control(&mut lab);
    let (page, before) = lab.open().expect("the detection page loads");
    let (_reg, sup) = start(&lab, &page, Config::default(), StartOptions::default());
    let (same, oopif) = frames_of(&sup, &page);
    let after_attach = lab.next_round(&page).expect("round 1");
    assert_no_flips("attached", &before, &after_attach);

    // A call routed to the same-origin frame runs in its main world (a page global only the
    // main world sees), found through the DOM.
    assert_eq!(
        evaluate(&sup, Route::Frame(&same), "detectRole"),
        json!("same")
    );
    assert_eq!(
        evaluate(&sup, Route::Frame(&oopif), "detectRole"),
        json!("oopif")
    );
    assert_eq!(
        evaluate(&sup, Route::Target(&page.target), "detectRole"),
        json!("top")
    );

    // Dialogs, caught and answered: the top page, the same-origin frame, the OOPIF.
    let d = raise(&sup, Route::Target(&page.target), "confirm('top?')", "top?");
    assert_eq!(d.kind, DialogKind::Confirm);
    answer(&sup, &d, DialogAction::Accept, None);
    wait_title(&sup, Route::Target(&page.target), "answer:true");
    let d = raise(&sup, Route::Frame(&same), "prompt('same?', 'x')", "same?");
    assert_eq!(d.frame_id.as_deref(), Some(same.as_str()));
    answer(&sup, &d, DialogAction::Accept, Some("typed"));
    wait_title(&sup, Route::Frame(&same), "answer:typed");
    let d = raise(&sup, Route::Frame(&oopif), "alert('oopif!')", "oopif!");
    assert_eq!(d.frame_id.as_deref(), Some(oopif.as_str()));
    answer(&sup, &d, DialogAction::Dismiss, None);
    wait_title(&sup, Route::Frame(&oopif), "answer:undefined");
    // `beforeunload`, caught and dismissed: the page stays.
    beforeunload_dismissed(&sup, &page);
    assert_eq!(
        evaluate(&sup, Route::Target(&page.target), "detectRole"),
        json!("top")
    );

    // Still nothing to see, after all of it.
    let after_work = lab.next_round(&page).expect("round 2");
    assert_no_flips("after dialogs and routed calls", &before, &after_work);

    // A popup the page opens is followed, and its dialog answered (after the last round: the
    // popup's tab hides the page's, which the page sees whoever is attached).
    sup.call(
        "Runtime.evaluate",
        json!({"expression": "window.open('about:blank'), 1", "userGesture": true}),
        Route::Target(&page.target),
        T,
    )
    .expect("window.open");
    let popup = wait_pick(&sup, T, "the popup followed", |s| {
        s.pages.get(1).map(|p| p.target_id.clone())
    });
    let d = raise(&sup, Route::Target(&popup), "confirm('popup?')", "popup?");
    answer(&sup, &d, DialogAction::Dismiss, None);
    wait_title(&sup, Route::Target(&popup), "answer:false");

    // The frame tree stays current: the same-origin frame navigates, and calls routed to it
    // reach its new document's main world.
    evaluate(
        &sup,
        Route::Frame(&same),
        &format!("location.href = '/detect?role=same2&p={}'; 1", page.name),
    );
    wait_pick(&sup, T, "the same-origin frame's new URL", |s| {
        s.frames
            .get(&same)
            .filter(|f| f.url.contains("role=same2"))
            .map(|_| ())
    });
    let ok = crate::common::wait_until(T, || {
        let v = sup.call(
            "Runtime.evaluate",
            json!({"expression": "typeof detectRole === 'undefined' ? null : detectRole", "returnByValue": true}),
            Route::Frame(&same),
            T,
        );
        v.ok()
            .filter(|v| v["result"]["value"] == "same2")
            .map(|_| ())
    });
    assert!(
        ok.is_some(),
        "calls routed to the navigated frame reach its new document"
    );

    // A crash is tracked: the OOPIF's renderer crashes (`Page.crash` is never answered; the
    // crash fails it), its frame is marked crashed, and calls into it fail at once.
    let r = sup.call("Page.crash", json!({}), Route::Frame(&oopif), T);
    assert!(
        matches!(r, Err(cdp_supervisor::Error::TargetCrashed { .. })),
        "{r:?}"
    );
    wait_pick(&sup, T, "the OOPIF marked crashed", |s| {
        s.frames.get(&oopif).filter(|f| f.crashed).map(|_| ())
    });
    let r = sup.call(
        "Runtime.evaluate",
        json!({"expression": "1"}),
        Route::Frame(&oopif),
        T,
    );
    assert!(
        matches!(r, Err(cdp_supervisor::Error::TargetCrashed { .. })),
        "{r:?}"
    );
    lab.close(&page);
}

#[test]
fn console_capture_shows_what_the_runtime_domain_shows() {
    let Some(mut lab) = Lab::new(&[]) else { return };
    let control = lab
        .measure(|ws, target| raw_client(ws, target, &[("Runtime.enable", json!({}))]))
        .expect("the control");
    let (page, before) = lab.open().expect("the detection page loads");
    let (_reg, sup) = start(
        &lab,
        &page,
        Config::default().with_capture_console(true),
        StartOptions::default(),
    );
    frames_of(&sup, &page);
    let after = lab.next_round(&page).expect("round 1");
    let flips = Flips::of(&before, &after);
    for role in ["top", "same", "oopif"] {
        assert_eq!(
            flips.of_role(role),
            control.flips.of_role(role),
            "{role}: console capture reveals what Runtime.enable does, nothing else:\n{}",
            flips.describe(&before, &after)
        );
    }
    // What it is for: the page's console errors reach the ring.
    evaluate(
        &sup,
        Route::Target(&page.target),
        "console.error('captured'), 1",
    );
    wait_pick(&sup, T, "the console error", |s| {
        s.console_errors
            .iter()
            .find(|e| e.text.contains("captured"))
            .map(|_| ())
    });
    lab.close(&page);
}

#[test]
fn the_dialog_bridge_flips_only_the_functions_it_replaces() {
    let Some(mut lab) = Lab::new(&[]) else { return };
    let (page, before) = lab.open().expect("the detection page loads");
    let (_reg, sup) = start(
        &lab,
        &page,
        Config::default(),
        StartOptions::default().with_dialog_bridge(BridgeMode::On),
    );
    let (same, oopif) = frames_of(&sup, &page);
    // The script is in every frame before the round (the supervisor sends it fire-and-forget).
    for route in [
        Route::Target(&page.target),
        Route::Frame(&same),
        Route::Frame(&oopif),
    ] {
        let ok = crate::common::wait_until(T, || {
            (evaluate(
                &sup,
                route,
                "Function.prototype.toString.call(alert).includes('cdp-dialog-bridge')",
            ) == json!(true))
            .then_some(())
        });
        assert!(ok.is_some(), "the bridge never reached {route:?}");
    }
    let after = lab.next_round(&page).expect("round 1");
    let flips = Flips::of(&before, &after);
    for role in ["top", "same", "oopif"] {
        assert_eq!(
            flips.of_role(role),
            BRIDGE_FLIPS,
            "{role}: the bridge shows its functions and nothing else (no global):\n{}",
            flips.describe(&before, &after)
        );
    }
    // A dialog through the bridge: caught and answered as a bridge dialog; the page then has
    // a resource entry for the bridge's host too.
    let d = raise(
        &sup,
        Route::Target(&page.target),
        "confirm('bridged?')",
        "bridged?",
    );
    assert!(
        cdp_supervisor::unversioned::bridge_request(&d).is_some(),
        "it went through the bridge: {d:?}"
    );
    answer(&sup, &d, DialogAction::Accept, None);
    wait_title(&sup, Route::Target(&page.target), "answer:true");
    let after_dialog = lab.next_round(&page).expect("round 2");
    let flips = Flips::of(&before, &after_dialog);
    let mut want: Vec<String> = BRIDGE_FLIPS.iter().map(|c| c.to_string()).collect();
    want.insert(4, "resource_entries".into());
    assert_eq!(
        flips.top,
        want,
        "{}",
        flips.describe(&before, &after_dialog)
    );
    let entries = &after_dialog.top["checks"]["resource_entries"];
    assert!(
        entries.to_string().contains("cdp-dialog-bridge.invalid"),
        "{entries}"
    );
    lab.close(&page);
}
