//! Helpers for the real-Chromium tests that drive a supervisor on a page a raw client opened
//! (`tests/it/e2e_bridge.rs`, `tests/it/e2e_dialogs.rs`, `tests/it/e2e_frames.rs`).

use std::sync::Arc;
use std::time::Duration;

use cdp_supervisor::{ClosedDialog, Snapshot, StartOptions, Supervisor, SupervisorRegistry};

/// Starts `task`'s supervisor on `page` (with `options` otherwise) and checks it attached there.
pub fn attach_to_page(
    reg: &SupervisorRegistry,
    task: &str,
    ws_url: &str,
    page: &str,
    options: StartOptions,
) -> Arc<Supervisor> {
    let options = StartOptions {
        target_id: Some(page.to_string()),
        ..options
    };
    let sup = reg
        .get_or_start_with(task, ws_url, options)
        .expect("the supervisor attaches to the test page");
    assert_eq!(
        sup.snapshot().page_target_id.as_deref(),
        Some(page),
        "the supervisor attached to the page it was told to"
    );
    sup
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
            panic!(
                "{what} not seen within {timeout:?}; snapshot: {}",
                sup.snapshot().to_json()
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
