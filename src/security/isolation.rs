//! Tasks that cannot reach each other (`security.isolate_tasks`, default on; issue 28): a task
//! reaches its own targets only: its page, the popups it follows or watches, the pages and
//! browser contexts it created through raw calls, their frames ([`Reach`]). This file is the
//! one place that rule is written; its users:
//!
//! * the call path (`supervisor/calls.rs`): [`check`] before a raw call is sent, on every route
//!   (measured on Chromium 156, `tests/it/measure_unwatched.rs`: `Target.getTargets`,
//!   `getTargetInfo`, `activateTarget`, `attachToTarget`, `createTarget` and `closeTarget` work
//!   on a page's session exactly as on the browser's), then [`filter_reply`] on its reply;
//! * the registry's start: [`another_tasks_target`] refuses a `target_id` another task owns,
//!   and a start without one never picks such a page;
//! * the task endpoint (SPEC §18): the same [`check`] for each client's commands,
//!   [`filter_reply`] for their replies, and [`is_task_target`] for the targets events name.
//!
//! | what | rule |
//! |---|---|
//! | a `targetId` parameter, of any method (`Target.attachToTarget`, `activateTarget`, `closeTarget`, `getTargetInfo`, `autoAttachRelated`, `detachFromTarget`, `sendMessageToTarget`, `exposeDevToolsProtocol`, `openDevTools`, `getDevToolsTarget`, `Browser.getWindowForTarget`, `Extensions.triggerAction`) | names a target of the task |
//! | a `browserContextId` parameter, of any method (`Target.createTarget`, `disposeBrowserContext`, `Browser.setDownloadBehavior`, `grantPermissions`, `Storage.getCookies`, ...) | names a context the task created |
//! | `Target.attachToBrowserTarget` | refused: a session on the browser target reaches every target |
//! | `Target.getTargets` | the reply lists the task's targets only |
//! | `Target.getBrowserContexts` | the reply lists the contexts the task created (and the default context's id) |
//! | `Target.sendMessageToTarget` | its command is checked by the same rules; one whose reply would need filtering (`getTargets`, `getBrowserContexts`) is refused: that reply comes back as an event nothing filters |
//! | `Target.setAutoAttach`, `setDiscoverTargets`, `setRemoteLocations` | pass: they bring events only, which `browser_cdp` never shows (a supervisor lets go at once of every page it is handed that is not the task's) and the task endpoint filters per client |
//!
//! A `sessionId` parameter is not checked: sessions belong to one connection, and the task's
//! connection holds no session of another task's (Chromium answers "No session with given id").
//!
//! What it does not promise: the default browser context is every task's (its cookies,
//! storage, permissions and download settings, which calls without `browserContextId` change
//! for all), and `Browser.close`, `Browser.crash` or `Browser.setWindowBounds` act on the whole
//! browser or on a window by number when `browser_cdp` sends them (refuse them with
//! `security.cdp_deny`; the task endpoint turns a client's `Browser.close` into that client's own
//! end and refuses its `Browser.crash`: `cdp_endpoint/mux/life.rs`).

use serde_json::Value;

use super::{Refusal, read_command};
use crate::quote::quoted;
use crate::snapshot::Snapshot;

/// The setting that turns the rule off.
pub(crate) const OPTION: &str = "security.isolate_tasks";

/// Nested `Target.sendMessageToTarget` commands deeper than this are refused.
const MAX_NESTING: usize = 4;

/// What one task may reach (module doc).
pub(crate) trait Reach {
    /// Whether `target_id` is one of the task's targets: its page, a popup it follows or
    /// watches, a page it created, one of their frames (an out-of-process iframe's target id
    /// is its frame id), or a page it was told to close to unfreeze its renderer.
    fn owns_target(&self, target_id: &str) -> bool;
    /// Whether `frame_id` is a frame of one of the task's pages.
    fn owns_frame(&self, frame_id: &str) -> bool;
    /// Whether `context_id` is a browser context the task created.
    fn owns_context(&self, context_id: &str) -> bool;
}

/// A published snapshot as the task's reach.
impl Reach for Snapshot {
    fn owns_target(&self, target_id: &str) -> bool {
        self.page_target_id.as_deref() == Some(target_id)
            || self.pages.iter().any(|p| p.target_id == target_id)
            || self.watched_pages.iter().any(|p| p.target_id == target_id)
            || self.frames.contains_key(target_id)
            || self.created_targets.iter().any(|t| t == target_id)
            || (self.blocked.as_ref()).is_some_and(|b| b.target_ids.iter().any(|t| t == target_id))
    }

    fn owns_frame(&self, frame_id: &str) -> bool {
        self.frames.contains_key(frame_id) || self.owns_target(frame_id)
    }

    fn owns_context(&self, context_id: &str) -> bool {
        self.created_contexts.iter().any(|c| c == context_id)
    }
}

/// The pages a snapshot's task owns: its page, the popups it follows or watches, the pages it
/// created (what a start that takes the browser's first page must skip).
pub(crate) fn pages_of(snap: &Snapshot) -> impl Iterator<Item = &str> {
    (snap.page_target_id.as_deref().into_iter())
        .chain(snap.pages.iter().map(|p| p.target_id.as_str()))
        .chain(snap.watched_pages.iter().map(|p| p.target_id.as_str()))
        .chain(snap.created_targets.iter().map(String::as_str))
}

/// Checks a raw call of `method` with `params` against the task's `reach`: `Err((option,
/// why))` when it reaches what is not the task's.
pub(crate) fn check(reach: &impl Reach, method: &str, params: &Value) -> Result<(), Refusal> {
    check_at(reach, method, params, 0)
}

fn check_at(reach: &impl Reach, method: &str, params: &Value, depth: usize) -> Result<(), Refusal> {
    if method == "Target.attachToBrowserTarget" {
        return Err(refuse(
            "a session on the browser target reaches every target of the browser, other tasks' \
             pages included"
                .to_string(),
        ));
    }
    match super::param(params, "targetId") {
        None | Some(Value::Null) => {}
        Some(Value::String(t)) if reach.owns_target(t) => {}
        Some(Value::String(t)) => {
            return Err(refuse(format!(
                "targetId {} is not a target of this task (its page, the popups it follows, the \
                 pages it created and their frames); another task's or another client's pages \
                 are out of its reach",
                quoted(t)
            )));
        }
        Some(_) => return Err(refuse("its targetId is not a string".to_string())),
    }
    match super::param(params, "browserContextId") {
        None | Some(Value::Null) => {}
        Some(Value::String(c)) if reach.owns_context(c) => {}
        Some(Value::String(c)) => {
            return Err(refuse(format!(
                "browserContextId {} is not a browser context this task created",
                quoted(c)
            )));
        }
        Some(_) => return Err(refuse("its browserContextId is not a string".to_string())),
    }
    if method == "Target.sendMessageToTarget"
        && let Some(message) = super::param(params, "message").and_then(Value::as_str)
    {
        if depth >= MAX_NESTING {
            return Err(refuse(
                "its message cannot be checked (Target.sendMessageToTarget nested too deeply)"
                    .to_string(),
            ));
        }
        let (nested, nested_params) = read_command(message)
            .map_err(|why| refuse(format!("its message cannot be checked ({why})")))?;
        if needs_filtering(&nested) {
            return Err(refuse(format!(
                "its nested {nested} would answer with every target of the browser, in an event \
                 the task's reply filter never sees"
            )));
        }
        check_at(reach, &nested, &nested_params, depth + 1)
            .map_err(|(option, why)| (option, format!("its nested {nested}: {why}")))?;
    }
    Ok(())
}

/// Methods whose reply [`filter_reply`] narrows.
fn needs_filtering(method: &str) -> bool {
    matches!(method, "Target.getTargets" | "Target.getBrowserContexts")
}

/// Narrows the reply `result` of a raw call of `method` to what the task may see:
/// `Target.getTargets` keeps the task's targets ([`is_task_target`]),
/// `Target.getBrowserContexts` the contexts it created. Other replies are left as they are.
pub(crate) fn filter_reply(reach: &impl Reach, method: &str, result: &mut Value) {
    match method {
        "Target.getTargets" => {
            if let Some(Value::Array(infos)) = result.get_mut("targetInfos") {
                infos.retain(|info| is_task_target(reach, info));
            }
        }
        "Target.getBrowserContexts" => {
            if let Some(Value::Array(ids)) = result.get_mut("browserContextIds") {
                ids.retain(|id| id.as_str().is_some_and(|c| reach.owns_context(c)));
            }
        }
        _ => {}
    }
}

/// Whether a `TargetInfo` (as CDP sends it) is one of the task's targets: its `targetId` is,
/// or it is an iframe (or worker) whose `parentFrameId` is a frame of the task's pages.
pub(crate) fn is_task_target(reach: &impl Reach, info: &Value) -> bool {
    let id = |key: &str| info.get(key).and_then(Value::as_str);
    id("targetId").is_some_and(|t| reach.owns_target(t))
        || id("parentFrameId").is_some_and(|f| reach.owns_frame(f))
}

/// The refusal of a start whose `target_id` another task owns.
pub(crate) fn another_tasks_target(target_id: &str) -> Refusal {
    refuse(format!(
        "target_id {} is a page (or frame) of another task, and a task reaches only its own \
         pages; connect without target_id to get a page of this task's own",
        quoted(target_id)
    ))
}

fn refuse(why: String) -> Refusal {
    (
        OPTION,
        format!("{why}; set {OPTION} = false to let tasks reach each other's pages"),
    )
}

#[cfg(test)]
mod tests;
