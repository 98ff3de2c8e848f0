//! Helpers for tests that drive a supervisor with the scripted fake CDP browser
//! (`tests/it/fake_bridge.rs`, `tests/it/fake_dialogs.rs`, `tests/it/fake_frames.rs`).

use std::sync::Arc;
use std::time::Duration;

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{Route, Snapshot, Supervisor};
use serde_json::{Value, json};

/// Deadline of every wait in the fake-browser tests.
pub const WAIT: Duration = Duration::from_secs(5);

/// Waits (up to [`WAIT`]) for a snapshot satisfying `pred`; panics naming `what` and showing the
/// last snapshot otherwise.
pub fn wait_snapshot(
    sup: &Supervisor,
    what: &str,
    pred: impl Fn(&Snapshot) -> bool,
) -> Arc<Snapshot> {
    sup.wait_for(WAIT, pred).unwrap_or_else(|| {
        panic!(
            "timed out waiting for {what}; last snapshot: {}",
            sup.snapshot().to_json()
        )
    })
}

/// Waits until exactly `n` dialogs are pending.
pub fn wait_pending(sup: &Supervisor, n: usize) -> Arc<Snapshot> {
    wait_snapshot(sup, &format!("{n} pending dialogs"), |s| {
        s.pending_dialogs.len() == n
    })
}

/// The supervisor's session on the page.
pub fn page_session(sup: &Supervisor) -> String {
    sup.snapshot()
        .page_session_id
        .clone()
        .expect("the page session is known after start")
}

/// Everything emitted before this call has been applied and published, and every automatic
/// command it triggered has been recorded by the fake.
pub fn barrier(sup: &Supervisor) {
    for _ in 0..2 {
        sup.call("Browser.getVersion", json!({}), Route::Browser, WAIT)
            .expect("browser-level call");
    }
}

/// Commands the fake received on `session`, in order.
pub fn sent_on(fake: &FakeBrowser, session: &str) -> Vec<Value> {
    fake.received()
        .into_iter()
        .filter(|c| c["sessionId"] == session)
        .collect()
}

/// The methods of `cmds`, in order.
pub fn methods(cmds: &[Value]) -> Vec<String> {
    cmds.iter()
        .map(|c| c["method"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// Waits (up to [`WAIT`]) for the fake to receive `method` on `session`; returns the command.
pub fn wait_sent(fake: &FakeBrowser, session: &str, method: &str) -> Value {
    fake.wait_for_command(|c| c["sessionId"] == session && c["method"] == method, WAIT)
        .unwrap_or_else(|| {
            panic!(
                "{method} never sent on {session}; sent there: {:?}",
                methods(&sent_on(fake, session))
            )
        })
}

/// Emits `Page.frameNavigated` for `frame` (under `parent`, if any) on `session`: a new document
/// at `url` (its loader id changes with the URL), with the URL's origin.
pub fn frame_navigated(
    fake: &FakeBrowser,
    session: &str,
    frame: &str,
    parent: Option<&str>,
    url: &str,
) {
    let mut f = json!({
        "id": frame,
        "loaderId": format!("L-{frame}-{url}"),
        "url": url,
        "domainAndRegistry": "",
        "securityOrigin": origin(url),
        "mimeType": "text/html",
        "secureContextType": "InsecureScheme",
        "crossOriginIsolatedContextType": "NotIsolated",
        "gatedAPIFeatures": [],
    });
    if let Some(p) = parent {
        f["parentId"] = json!(p);
    }
    fake.emit(
        Some(session),
        "Page.frameNavigated",
        json!({"frame": f, "type": "Navigation"}),
    );
}

/// `scheme://host[:port]` of `url`.
fn origin(url: &str) -> String {
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    let host = rest.split('/').next().unwrap_or("");
    let scheme = url.split("://").next().unwrap_or("");
    format!("{scheme}://{host}")
}
