//! Reading tool arguments: the one set of helpers, the one wording of every argument error, the
//! two rules by which a call names its task, and the task's live supervisor (or the failure a
//! call without one gets).
//!
//! Argument errors are tool results (`{"success": false, "error": ...}`, SPEC §10), never
//! protocol errors. A message names the argument and the kind of value it got, never the whole
//! value (it may be huge): where showing it helps, at most 64 characters of its JSON
//! ([`crate::quote`]), and at most [`NAMES_SHOWN`] unknown argument names.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::config::MAX_CALL_TIMEOUT;
use crate::quote::quoted;
use crate::registry::SupervisorRegistry;
use crate::supervisor::Supervisor;

/// A failed tool result.
pub(crate) fn failure(error: impl std::fmt::Display) -> Value {
    json!({"success": false, "error": error.to_string()})
}

/// What kind of JSON value `v` is, for messages.
pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The most unknown argument names one message shows.
const NAMES_SHOWN: usize = 3;

/// The failure for arguments that are no JSON object.
pub(crate) fn not_an_object(args: &Value) -> Value {
    failure(format!(
        "arguments must be a JSON object, got {}; see the tool's inputSchema",
        kind_of(args)
    ))
}

/// Fails (as a tool result) when `args` is no object (`null` stands for none) or has a key not
/// in `allowed`, naming the allowed ones.
pub fn check_args(args: &Value, allowed: &[&str]) -> Result<(), Value> {
    let obj = match args {
        Value::Null => return Ok(()),
        Value::Object(obj) => obj,
        _ => return Err(not_an_object(args)),
    };
    let mut unknown: Vec<&str> = obj
        .keys()
        .map(String::as_str)
        .filter(|k| !allowed.contains(k))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    unknown.sort_unstable();
    let mut names: Vec<String> = unknown
        .iter()
        .take(NAMES_SHOWN)
        .map(|k| quoted(k).to_string())
        .collect();
    if unknown.len() > NAMES_SHOWN {
        names.push(format!("and {} more", unknown.len() - NAMES_SHOWN));
    }
    Err(failure(format!(
        "unknown argument{} {}: allowed arguments are {}",
        if unknown.len() == 1 { "" } else { "s" },
        names.join(", "),
        allowed.join(", ")
    )))
}

/// An optional string argument; anything but a string or null is an error.
pub(crate) fn opt_str<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, Value> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(failure(format!(
            "{key} must be a string, got {}",
            kind_of(other)
        ))),
    }
}

/// The optional `timeout_s` argument in seconds (absent or null: the task's
/// `supervisor.call_timeout_s`), clamped to 1 s..MAX_CALL_TIMEOUT (SPEC §8) so 0 still gets a
/// reply that takes a moment.
pub(crate) fn opt_timeout_s(args: &Value) -> Result<Option<f64>, Value> {
    match args.get("timeout_s") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n
            .as_f64()
            .filter(|t| t.is_finite())
            .map(|t| t.clamp(1.0, MAX_CALL_TIMEOUT.as_secs_f64()))),
        Some(other) => Err(failure(format!(
            "timeout_s must be a number of seconds, got {}",
            kind_of(other)
        ))),
    }
}

/// Fails (naming `task_id`) for an invalid task id ([`SupervisorRegistry::check_task_id`]).
pub(crate) fn check_task(task_id: &str) -> Result<(), Value> {
    SupervisorRegistry::check_task_id(task_id).map_err(failure)
}

/// The task of a call by the `task_id` argument: `default` when absent or null (the rule of the
/// MCP server on stdio, of the Python binding and of the library: `table::Tasks::Default`).
pub(crate) fn task_or_default(args: &Value) -> Result<Cow<'_, str>, Value> {
    match args.get("task_id") {
        None | Some(Value::Null) => Ok(Cow::Borrowed("default")),
        Some(Value::String(s)) => check_task(s).map(|()| Cow::Borrowed(s.as_str())),
        Some(other) => Err(failure(format!(
            "task_id must be a string, got {}; omit it for the task \"default\"",
            kind_of(other)
        ))),
    }
}

/// The task of a call of `tool` by the rule of clients that share a server (MCP over HTTP, SPEC
/// §15: `table::Tasks::PerClient`): `browser_connect` (`fresh_if_absent`) without `task_id`
/// creates a task with a fresh unguessable id (128 random bits), every other tool needs a
/// `task_id`. So two clients that never name a task never share one.
pub(crate) fn task_per_client<'a>(
    args: &'a Value,
    tool: &str,
    fresh_if_absent: bool,
) -> Result<Cow<'a, str>, Value> {
    match args.get("task_id") {
        Some(Value::String(s)) => check_task(s).map(|()| Cow::Borrowed(s.as_str())),
        None | Some(Value::Null) if fresh_if_absent => {
            crate::task_id::fresh().map(Cow::Owned).map_err(failure)
        }
        None | Some(Value::Null) => Err(failure(format!(
            "task_id is required over HTTP: {tool} needs the task_id that browser_connect returned \
             (browser_connect without task_id creates a new task)"
        ))),
        Some(other) => Err(failure(format!(
            "task_id must be a string, got {}; over HTTP pass the task_id that browser_connect \
             returned",
            kind_of(other)
        ))),
    }
}

/// The one wording for a task that has no supervisor.
pub fn no_supervisor(task_id: &str) -> Value {
    failure(format!(
        "no browser supervisor for task {}: call browser_connect first",
        quoted(task_id)
    ))
}

/// The task's supervisor when it is active; otherwise the failure a call would get
/// ([`no_supervisor`], or what its lifecycle state says: see `Supervisor::ensure_alive`).
pub(crate) fn live(reg: &SupervisorRegistry, task_id: &str) -> Result<Arc<Supervisor>, Value> {
    let sup = reg.get(task_id).ok_or_else(|| no_supervisor(task_id))?;
    sup.ensure_alive().map_err(failure)?;
    Ok(sup)
}
