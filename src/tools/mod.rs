//! JSON tool handlers (SPEC §10): what a synchronous agent tool host calls, and the one table of
//! tools that every transport dispatches through.
//!
//! The library functions ([`browser_snapshot`], [`browser_dialog`], [`browser_cdp`]) take the
//! registry, a task id and the tool's JSON arguments and return JSON; none of them panics on any
//! input, and failures are `{"success": false, "error": "..."}`. An invalid task id
//! ([`SupervisorRegistry::check_task_id`]) is such a failure, naming `task_id`.
//!
//! * `table`: the six tools, one entry each (name, title, annotations, argument names, input
//!   and output schemas, handler), and `dispatch`, which runs one call the way every transport
//!   does: the MCP server (`mcp`), the Python binding (through `unversioned::tools::call`) and
//!   the HTTP transport to come, each a `Host` that names the task of a call by its own rule.
//! * `schema`: the JSON Schemas of the table (`tools/list`).
//! * `args`: reading arguments, with the one wording of every argument error.
//! * `snapshot`, `dialog`, `cdp`, `navigate`: the tools that need only a registry.

mod args;
mod cdp;
mod dialog;
mod navigate;
mod schema;
mod snapshot;
pub(crate) mod table;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use serde_json::Value;

use crate::cancel::CancelToken;
use crate::registry::SupervisorRegistry;
use crate::supervisor::Supervisor;

pub use args::check_args;
pub(crate) use args::{check_task, failure, kind_of, opt_str};
pub(crate) use snapshot::as_result as snapshot_result;

/// Arguments of `browser_snapshot`.
pub const SNAPSHOT_ARGS: &[&str] = &["task_id", "target_id"];
/// Arguments of `browser_dialog`.
pub const DIALOG_ARGS: &[&str] = &["action", "prompt_text", "dialog_id", "files", "task_id"];
/// Arguments of `browser_navigate`.
pub const NAVIGATE_ARGS: &[&str] = &["url", "wait_until", "timeout_s", "task_id"];
/// Arguments of `browser_cdp`.
pub const CDP_ARGS: &[&str] = &[
    "method",
    "params",
    "frame_id",
    "target_id",
    "timeout_s",
    "task_id",
];

/// The one wording for a task that has no supervisor.
pub fn no_supervisor(task_id: &str) -> Value {
    failure(format!(
        "no browser supervisor for task {}: call browser_connect first",
        crate::quote::quoted(task_id)
    ))
}

/// Adds what every tool result carries (SPEC §10): `pending_dialogs` whenever a dialog (or a
/// file chooser) is pending and `blocked` when the page is blocked, so an agent sees a dialog on its next call
/// without polling. Does nothing when the task has no supervisor or `out` is no object.
/// [`browser_dialog`] and [`browser_cdp`] add it themselves; `table::dispatch` adds it once per
/// call for every tool of the table that carries it.
pub fn add_dialog_status(reg: &SupervisorRegistry, task_id: &str, out: &mut Value) {
    let Some(obj) = out.as_object_mut() else {
        return;
    };
    reg.with_snapshot(task_id, |s| {
        let pending = !s.pending_dialogs.is_empty() || !s.file_choosers.is_empty();
        if pending && !obj.contains_key("pending_dialogs") {
            obj.insert("pending_dialogs".into(), Value::Array(s.pending_json()));
        }
        if let Some(b) = &s.blocked
            && !obj.contains_key("blocked")
        {
            obj.insert("blocked".into(), b.to_json());
        }
    });
}

/// The task's supervisor when it is active; otherwise the failure a call would get
/// ([`no_supervisor`], or what its lifecycle state says: see `Supervisor::ensure_alive`).
fn live(reg: &SupervisorRegistry, task_id: &str) -> Result<Arc<Supervisor>, Value> {
    let sup = reg.get(task_id).ok_or_else(|| no_supervisor(task_id))?;
    sup.ensure_alive().map_err(failure)?;
    Ok(sup)
}

/// `browser_snapshot`: the fields a host merges into its page snapshot (with `state` saying
/// `reconnecting` while the supervisor reconnects); `{}` when the task has no live supervisor
/// (nothing to merge), and a failure for arguments it does not take. With `target_id`: that
/// followed popup's frame tree and dialogs.
pub fn browser_snapshot(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    snapshot::view(reg, task_id, args)
        .unwrap_or_else(|snapshot::NoSupervisor| Value::Object(Default::default()))
}

/// `browser_dialog {action, prompt_text?, dialog_id?}`: answers a pending dialog
/// ([`DialogAction::parse`](crate::DialogAction::parse) reads `action`).
pub fn browser_dialog(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    let mut out = dialog::run(reg, task_id, args);
    add_dialog_status(reg, task_id, &mut out);
    out
}

/// `browser_cdp {method, params?, frame_id?, target_id?, timeout_s?}` (SPEC §8). Without
/// `frame_id`/`target_id` the call is routed by domain
/// ([`Route::by_domain`](crate::Route::by_domain)); the result says where it went
/// (`routed_to`). A call that a dialog blocks fails at once with `blocked_by_dialog`.
pub fn browser_cdp(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    let mut out = cdp::run(reg, task_id, args, None);
    add_dialog_status(reg, task_id, &mut out);
    out
}

/// [`browser_cdp`] that returns at once (`"cancelled": true`) when `cancel` fires; the call's
/// late reply is dropped.
pub fn browser_cdp_cancellable(
    reg: &SupervisorRegistry,
    task_id: &str,
    args: &Value,
    cancel: &CancelToken,
) -> Value {
    let mut out = cdp::run(reg, task_id, args, Some(cancel));
    add_dialog_status(reg, task_id, &mut out);
    out
}

/// `browser_navigate {url, wait_until?: "commit"|"load", timeout_s?}` (SPEC §10): navigates the
/// task's page ([`Supervisor::navigate`]); a dialog that opens before `wait_until` ends it at
/// once with `blocked_by_dialog`.
pub fn browser_navigate(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    let mut out = navigate::run(reg, task_id, args);
    add_dialog_status(reg, task_id, &mut out);
    out
}
