//! The attach sequence (SPEC §4 steps 1-3 and 5), run on a caller's thread at start and on a
//! short-lived thread after a reconnect — never on the reader thread, which must keep reading the
//! replies this sequence waits for.

use std::time::{Duration, Instant};

use crossbeam_channel::RecvTimeoutError;
use serde_json::json;

use crate::core::CallKind;
use crate::error::Error;
use crate::link::{Shared, wait_reply};
use crate::protocol;

/// How long to wait for `Page.enable` before probing for an orphaned dialog (SPEC §4.5).
const PAGE_ENABLE_PROBE_AFTER: Duration = Duration::from_secs(2);

/// Which page to attach to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Choice<'a> {
    /// Exactly this target (the caller named it): missing is an error.
    Exactly(&'a str),
    /// After a reconnect: this target, the task's page, and never another (SPEC §3). Missing is
    /// [`Error::UnknownTarget`]: the endpoint gave a new browser (Browserless starts one per
    /// connection) or the page was closed, and the page is gone for good.
    Same(&'a str),
    /// The first usable page; a new `about:blank` when there is none.
    FirstPage,
    /// Always a new `about:blank` page (the task's own).
    NewPage,
}

fn is_usable_page(t: &protocol::TargetInfo) -> bool {
    t.kind == "page"
        && !t.url.starts_with("devtools://")
        && !t.url.starts_with("chrome-extension://")
        && !t.url.starts_with("chrome://")
}

/// Chooses the page, attaches, enables the domains pipelined and seeds the frame tree, all by
/// `deadline`. Returns the page target id. A page wedged by an orphaned dialog returns `Ok` with
/// `blocked` published (the reader finishes attaching when the page answers again).
pub(crate) fn attach_page(
    sh: &Shared,
    choice: Choice<'_>,
    start_timeout: Duration,
    deadline: Instant,
) -> Result<String, Error> {
    let left = || deadline.saturating_duration_since(Instant::now());
    let targets = sh.call(
        "Target.getTargets",
        json!({}),
        None,
        CallKind::Plain,
        left(),
    )?;
    let targets: protocol::GetTargets = serde_json::from_value(targets).unwrap_or_default();
    let find = |id: &str| targets.target_infos.iter().find(|t| t.target_id == id);
    let first_page = targets.target_infos.iter().find(|t| is_usable_page(t));
    let chosen = match choice {
        Choice::Exactly(id) => Some(
            find(id)
                .ok_or_else(|| Error::NoPage(format!("the browser has no target with id {id:?}")))?
                .target_id
                .clone(),
        ),
        Choice::Same(id) => Some(
            find(id)
                .ok_or_else(|| Error::UnknownTarget(id.to_string()))?
                .target_id
                .clone(),
        ),
        Choice::FirstPage => first_page.map(|t| t.target_id.clone()),
        Choice::NewPage => None,
    };
    let target_id = match chosen {
        Some(t) => t,
        None => {
            let created = sh.call(
                "Target.createTarget",
                json!({"url": "about:blank", "background": true}),
                None,
                CallKind::Plain,
                left(),
            )?;
            created["targetId"]
                .as_str()
                .ok_or_else(|| Error::NoPage("Target.createTarget returned no targetId".into()))?
                .to_string()
        }
    };
    let attached = sh.call(
        "Target.attachToTarget",
        json!({"targetId": target_id, "flatten": true}),
        None,
        CallKind::AttachPage {
            target_id: target_id.clone(),
        },
        left(),
    )?;
    let session = attached["sessionId"]
        .as_str()
        .ok_or_else(|| Error::NoPage("Target.attachToTarget returned no sessionId".into()))?
        .to_string();
    let s = Some(session.as_str());
    // Pipelined: none of these waits for the previous one.
    let timeout = left();
    let (page_enable, _) =
        sh.start_call("Page.enable", json!({}), s, CallKind::PageEnable, timeout)?;
    sh.send(
        "Runtime.enable",
        json!({}),
        s,
        CallKind::Automatic,
        None,
        None,
    )?;
    let (tree, tree_deadline) = sh.start_call(
        "Page.getFrameTree",
        json!({}),
        s,
        CallKind::SeedFrameTree {
            session_id: session.clone(),
        },
        timeout,
    )?;
    sh.send(
        "Target.setAutoAttach",
        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
        s,
        CallKind::Automatic,
        None,
        None,
    )?;
    let probe_at = (Instant::now() + PAGE_ENABLE_PROBE_AFTER).min(deadline);
    match page_enable.recv_deadline(probe_at) {
        Ok(r) => {
            r?;
            wait_reply(&tree, "Page.getFrameTree", tree_deadline, timeout)?;
            Ok(target_id)
        }
        Err(RecvTimeoutError::Disconnected) => Err(Error::ConnectionLost(
            "the connection closed while attaching".into(),
        )),
        Err(RecvTimeoutError::Timeout) => {
            // The page does not answer. If the browser does, an orphaned dialog blocks it: the
            // reader publishes `blocked` and we return instead of hanging (SPEC §4.5).
            let probe = sh.call(
                "Browser.getVersion",
                json!({}),
                None,
                CallKind::ProbeBlocked,
                left().max(Duration::from_millis(1)),
            );
            match probe {
                Ok(_) if sh.snapshot.load().blocked.is_some() => Ok(target_id),
                Ok(_) => match page_enable.recv_deadline(deadline) {
                    Ok(r) => r.map(|_| target_id),
                    Err(_) => Err(Error::StartTimeout(
                        start_timeout,
                        "Page.enable did not answer".into(),
                    )),
                },
                Err(e) => Err(Error::StartTimeout(
                    start_timeout,
                    format!("neither the page nor the browser answers: {e}"),
                )),
            }
        }
    }
}
