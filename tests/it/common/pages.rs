//! Helpers for the real-Chromium tests that drive a supervisor on a page a raw client opened
//! (`tests/it/e2e_bridge.rs`, `tests/it/e2e_dialogs.rs`, `tests/it/e2e_frames.rs`), and probe
//! which calls a dialog blocks (`tests/it/e2e_popups.rs`, `tests/it/e2e_blocked_calls.rs`).

use cdp_supervisor::StartRequest;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cdp_supervisor::{
    ClosedDialog, DialogAction, Error, PendingDialog, Route, Snapshot, StartOptions, Supervisor,
    SupervisorRegistry,
};
use serde_json::json;

/// Starts `task`'s supervisor on `page` (with `options` otherwise) and checks it attached there.
pub fn attach_to_page(
    reg: &SupervisorRegistry,
    task: &str,
    ws_url: &str,
    page: &str,
    options: StartOptions,
) -> Arc<Supervisor> {
    let options = options.with_target_id(page.to_string());
    let sup = reg
        .start(StartRequest::new(task, ws_url).with_options(options))
        .expect("the supervisor attaches to the test page");
    assert_eq!(
        sup.snapshot().page_target_id.as_deref(),
        Some(page),
        "the supervisor attached to the page it was told to"
    );
    sup
}

/// Waits until the task's set-up of `target` (a page it attached again after a reconnect, which
/// `pages` lists at once) has reached its renderer: a call into it through the task answers only
/// after that set-up (one session, in order). A dialog the page opens before then is not
/// reported over CDP (the task says `blocked`), so a test that has another client raise one
/// waits for this first.
pub fn wait_set_up(sup: &Supervisor, target: &str, timeout: Duration) {
    let one = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": "1", "returnByValue": true}),
            Route::Target(target),
            timeout,
        )
        .unwrap_or_else(|e| panic!("a call into {target} through the task: {e}"));
    assert_eq!(one["result"]["value"], 1, "{one}");
}

/// Waits (woken by the supervisor's publishes, up to `timeout`) until `pick` finds something in
/// the snapshot and returns it; panics naming `what` and showing the last snapshot otherwise.
pub fn wait_pick<R>(
    sup: &Supervisor,
    timeout: Duration,
    what: &str,
    pick: impl Fn(&Snapshot) -> Option<R>,
) -> R {
    let snap = sup
        .wait_for(timeout, |s| pick(s).is_some())
        .unwrap_or_else(|| {
            let last = sup.snapshot();
            panic!(
                "{what} not seen within {timeout:?}; snapshot: {}; recent dialogs: {:?}; \
                 blocked: {:?}",
                last.to_json(),
                last.recent_dialogs,
                last.blocked
            )
        });
    pick(&snap).expect("the snapshot wait_for returned matches")
}

/// Waits until dialog `id` is in `recent_dialogs` and no longer pending; returns its record.
pub fn wait_closed(sup: &Supervisor, timeout: Duration, id: &str) -> ClosedDialog {
    wait_pick(
        sup,
        timeout,
        &format!("dialog {id} recorded as closed"),
        |s| {
            let still_pending = s.pending_dialogs.iter().any(|d| d.id == id);
            s.closed_dialog(id).filter(|_| !still_pending).cloned()
        },
    )
}

/// A call into `route` that answers unless a dialog blocks it: `None` when it answered,
/// `Some(dialog id)` when it was refused as blocked by that dialog, which must happen well
/// before its 20 s deadline (under 1 s). Any other outcome panics.
pub fn probe(sup: &Supervisor, route: Route<'_>) -> Option<String> {
    let t = Instant::now();
    let r = sup.call(
        "Runtime.evaluate",
        json!({"expression": "1", "returnByValue": true}),
        route,
        Duration::from_secs(20),
    );
    match r {
        Ok(v) => {
            assert_eq!(v["result"]["value"], 1, "{route:?}: {v}");
            None
        }
        Err(Error::BlockedByDialog { dialog, .. }) => {
            assert!(
                t.elapsed() < Duration::from_secs(1),
                "{route:?}: blocked only after {:?}",
                t.elapsed()
            );
            Some(dialog.id)
        }
        Err(e) => panic!("{route:?}: {e}"),
    }
}

/// Raises `alert(message)` in `route` (from a timer, so the raising call answers) and waits
/// until it is pending.
pub fn raise_alert(sup: &Supervisor, route: Route<'_>, message: &str) -> PendingDialog {
    sup.call(
        "Runtime.evaluate",
        json!({"expression": format!("setTimeout(() => alert({}), 0); 1", crate::common::js(message))}),
        route,
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("raising an alert in {route:?}: {e}"));
    wait_pick(sup, Duration::from_secs(10), "the alert pending", |s| {
        s.pending_dialogs
            .iter()
            .find(|d| d.message == message)
            .cloned()
    })
}

/// For every named session in turn: raises an alert there and probes every session (SPEC §8).
/// A session of the same group in `shared` (the renderers measured on Chromium,
/// `tests/it/measure_renderers.rs`) must be refused at once naming that alert; every other
/// one must answer. Prints the matrix; panics listing every mismatch.
pub fn assert_renderers(sup: &Supervisor, sessions: &[(&str, Route<'_>)], shared: &[&[&str]]) {
    let group = |n: &str| shared.iter().position(|g| g.contains(&n));
    let mut mismatches = Vec::new();
    let mut table = String::new();
    for (x, from) in sessions {
        let d = raise_alert(sup, *from, &format!("alert in {x}"));
        table.push_str(&format!("\n  {x:<16}"));
        for (y, to) in sessions {
            let got = probe(sup, *to);
            let expect_blocked = x == y || (group(x).is_some() && group(x) == group(y));
            table.push_str(if got.is_some() { " B" } else { " ." });
            match (&got, expect_blocked) {
                (Some(id), true) if *id == d.id => {}
                (None, false) => {}
                _ => mismatches.push(format!(
                    "alert in {x}, call into {y}: {got:?} (expected {})",
                    if expect_blocked {
                        "blocked"
                    } else {
                        "an answer"
                    }
                )),
            }
        }
        sup.respond_to_dialog(DialogAction::Dismiss, None, Some(&d.id))
            .expect("dismiss the alert");
        wait_closed(sup, Duration::from_secs(10), &d.id);
    }
    eprintln!("alert in ↓ blocks → (B blocked, . answered):{table}");
    assert!(mismatches.is_empty(), "{mismatches:#?}{table}");
}

/// `blocked` reports the page `frozen` the task follows (`unresponsive`, naming it, with the
/// hint to close it); the task's own page still answers; closing `frozen` clears `blocked` and
/// takes it out of `pages`.
pub fn frozen_page_reported_then_closed(
    sup: &Supervisor,
    blocked: &cdp_supervisor::Blocked,
    frozen: &str,
    timeout: Duration,
) {
    assert_eq!(blocked.reason, cdp_supervisor::BlockedReason::Unresponsive);
    assert_eq!(blocked.target_ids, [frozen.to_string()], "{blocked:?}");
    assert!(
        blocked.hint.contains("Target.closeTarget"),
        "{}",
        blocked.hint
    );
    let r = sup
        .call(
            "Runtime.evaluate",
            json!({"expression": "6*7", "returnByValue": true}),
            Route::Page,
            timeout,
        )
        .expect("the task's page answers");
    assert_eq!(r["result"]["value"], 42);
    sup.call(
        "Target.closeTarget",
        json!({"targetId": frozen}),
        Route::Browser,
        timeout,
    )
    .expect("close the frozen page");
    wait_pick(sup, timeout, "blocked gone with the frozen page", |s| {
        (s.blocked.is_none() && s.pages.iter().all(|p| p.target_id != frozen)).then_some(())
    });
}
