//! JSON tool handlers (SPEC §10): what a synchronous agent tool host calls, and the one table of
//! tools that every caller runs them through.
//!
//! The library functions ([`browser_snapshot`], [`browser_dialog`], [`browser_cdp`],
//! [`browser_navigate`]) take the registry, a task id and the tool's JSON arguments and return
//! JSON; none of them panics on any input, and failures are
//! `{"success": false, "error": "..."}`. An invalid task id
//! ([`SupervisorRegistry::check_task_id`]) is such a failure, naming `task_id`. They run the
//! table's handlers (`table::run`), so they answer what an MCP `tools/call` or the Python
//! binding answers for the same task and arguments, with one exception that SPEC §10 fixes:
//! [`browser_snapshot`] returns the fields a host merges into its own snapshot, so it has no
//! `success: true`, and is `{}` for a task without a live supervisor.
//!
//! * `table`: the six tools, one entry each (name, title, annotations, argument names, input
//!   and output schemas, handler), the `Context` a call runs with, and `dispatch`, which runs a
//!   call the way every caller does: the MCP engine (stdio and HTTP, `mcp::engine`), the Python
//!   binding (through `unversioned::tools::call`) and the library functions here.
//! * `schema`: the JSON Schemas of the table (`tools/list`).
//! * `args`: reading arguments, with the one wording of every argument error; the two rules by
//!   which a call names its task.
//! * `snapshot`, `dialog`, `cdp`, `navigate`: the tools that need only a registry; `connect`:
//!   `browser_connect` and `browser_disconnect`; `browser`: the one local browser a caller
//!   (the MCP server) launches for `browser_connect` without an endpoint.

mod args;
pub(crate) mod browser;
mod cdp;
mod connect;
mod dialog;
mod navigate;
mod schema;
mod snapshot;
pub(crate) mod table;
#[cfg(test)]
mod tests;

use serde_json::Value;

use crate::cancel::CancelToken;
use crate::registry::SupervisorRegistry;
use browser::BrowserSlot;
use table::{Tasks, Tool};

pub use args::{check_args, no_supervisor};
pub(crate) use snapshot::as_result as snapshot_result;
pub use table::add_dialog_status;

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
/// Arguments of `browser_connect`.
const CONNECT_ARGS: &[&str] = &[
    "cdp_url",
    "task_id",
    "target_id",
    "dialog_policy",
    "dialog_timeout_s",
    "dialog_bridge",
];
/// Arguments of `browser_disconnect`.
const DISCONNECT_ARGS: &[&str] = &["task_id"];

/// What a call runs with (`table`'s module doc): lent by its caller, read by the handlers.
#[derive(Clone, Copy)]
pub(crate) struct Context<'a> {
    /// The registry the tools act on.
    pub(crate) registry: &'a SupervisorRegistry,
    /// The browser `browser_connect` launches when neither the call nor the configuration names
    /// an endpoint; `None`: the caller launches none, and such a call fails saying so.
    pub(crate) browser: Option<&'a BrowserSlot>,
    /// How a call names its task.
    pub(crate) tasks: Tasks,
    /// Calls the call off: a `browser_connect`'s start (its launch included) or a
    /// `browser_cdp`'s CDP call.
    pub(crate) cancel: Option<&'a CancelToken>,
}

impl<'a> Context<'a> {
    /// A registry alone: no browser to launch, `task_id` absent is `default`, no cancel token.
    pub(crate) fn of(registry: &'a SupervisorRegistry) -> Context<'a> {
        Context {
            registry,
            browser: None,
            tasks: Tasks::Default,
            cancel: None,
        }
    }
}

/// `browser_snapshot`: the fields a host merges into its page snapshot (with `state` saying
/// `reconnecting` while the supervisor reconnects); `{}` when the task has no live supervisor
/// (nothing to merge), and a failure for arguments it does not take. With `target_id`: that
/// followed popup's frame tree and dialogs. The table's answer without its `success: true`
/// (module doc).
pub fn browser_snapshot(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    match table::run(&Context::of(reg), Tool::Snapshot, task_id, args) {
        Ok(mut out) => {
            if let Some(o) = out.as_object_mut()
                && o.get("success") == Some(&Value::Bool(true))
            {
                o.remove("success");
            }
            out
        }
        Err(snapshot::NoSupervisor) => Value::Object(Default::default()),
    }
}

/// `browser_dialog {action, prompt_text?, dialog_id?, files?}`: answers a pending dialog, or a
/// pending file chooser ([`DialogAction::parse`](crate::DialogAction::parse) reads `action`).
pub fn browser_dialog(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    run(&Context::of(reg), Tool::Dialog, task_id, args)
}

/// `browser_cdp {method, params?, frame_id?, target_id?, timeout_s?}` (SPEC §8). Without
/// `frame_id`/`target_id` the call is routed by domain
/// ([`Route::by_domain`](crate::Route::by_domain)); the result says where it went
/// (`routed_to`). A call that a dialog blocks fails at once with `blocked_by_dialog`.
pub fn browser_cdp(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    run(&Context::of(reg), Tool::Cdp, task_id, args)
}

/// [`browser_cdp`] that returns at once (`"cancelled": true`) when `cancel` fires; the call's
/// late reply is dropped.
pub fn browser_cdp_cancellable(
    reg: &SupervisorRegistry,
    task_id: &str,
    args: &Value,
    cancel: &CancelToken,
) -> Value {
    let ctx = Context {
        cancel: Some(cancel),
        ..Context::of(reg)
    };
    run(&ctx, Tool::Cdp, task_id, args)
}

/// The table's answer for `task_id` (only `browser_snapshot` can find no supervisor).
fn run(ctx: &Context<'_>, tool: Tool, task_id: &str, args: &Value) -> Value {
    table::run(ctx, tool, task_id, args).unwrap_or_else(|_| no_supervisor(task_id))
}

/// `browser_navigate {url, wait_until?: "commit"|"load", timeout_s?}` (SPEC §10): navigates the
/// task's page ([`Supervisor::navigate`](crate::Supervisor::navigate)); a dialog that opens
/// before `wait_until` ends it at once with `blocked_by_dialog`.
pub fn browser_navigate(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    run(&Context::of(reg), Tool::Navigate, task_id, args)
}
