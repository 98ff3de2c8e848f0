//! JSON tool handlers (SPEC §10): what a synchronous agent tool host calls.
//!
//! Each takes the registry, a task id and the tool's JSON arguments and returns JSON; none of them
//! panics on any input, and failures are `{"success": false, "error": "..."}`. An invalid task
//! id ([`SupervisorRegistry::check_task_id`]) is such a failure, naming `task_id`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::cancel::CancelToken;
use crate::config::DialogAction;
use crate::error::Error;
use crate::registry::SupervisorRegistry;
use crate::supervisor::{Route, Supervisor};

fn failure(error: impl std::fmt::Display) -> Value {
    json!({"success": false, "error": error.to_string()})
}

/// Fails (as a tool result naming `task_id`) for an invalid task id
/// ([`SupervisorRegistry::check_task_id`]).
fn check_task(task_id: &str) -> Result<(), Value> {
    SupervisorRegistry::check_task_id(task_id).map_err(failure)
}

/// The one wording for a task that has no supervisor.
pub fn no_supervisor(task_id: &str) -> Value {
    failure(format!(
        "no browser supervisor for task {task_id:?}: call browser_connect first"
    ))
}

/// The task's supervisor when it is active; otherwise the failure a call would get (its
/// lifecycle state decides: see `Supervisor::ensure_alive`).
fn live(reg: &SupervisorRegistry, task_id: &str) -> Result<std::sync::Arc<Supervisor>, Value> {
    let sup = reg.get(task_id).ok_or_else(|| no_supervisor(task_id))?;
    sup.ensure_alive().map_err(failure)?;
    Ok(sup)
}

/// Adds what every tool result carries (SPEC §10): `pending_dialogs` whenever a dialog is
/// pending and `blocked` when the page is blocked, so an agent sees a dialog on its next call
/// without polling. Does nothing when the task has no live supervisor or `out` is no object.
pub fn add_dialog_status(reg: &SupervisorRegistry, task_id: &str, out: &mut Value) {
    let Some(obj) = out.as_object_mut() else {
        return;
    };
    reg.with_snapshot(task_id, |s| {
        if !s.pending_dialogs.is_empty() && !obj.contains_key("pending_dialogs") {
            obj.insert(
                "pending_dialogs".into(),
                Value::Array(s.pending_dialogs.iter().map(|d| d.to_json()).collect()),
            );
        }
        if let Some(b) = &s.blocked
            && !obj.contains_key("blocked")
        {
            obj.insert("blocked".into(), b.to_json());
        }
    });
}

/// Fails (as a tool result) when `args` has a key not in `allowed`, naming the allowed ones.
pub fn check_args(args: &Value, allowed: &[&str]) -> Result<(), Value> {
    let Some(obj) = args.as_object() else {
        return args_object(args);
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
    Err(failure(format!(
        "unknown argument{} {}: allowed arguments are {}",
        if unknown.len() == 1 { "" } else { "s" },
        unknown
            .iter()
            .map(|k| format!("{k:?}"))
            .collect::<Vec<_>>()
            .join(", "),
        allowed.join(", ")
    )))
}

/// Reads an optional string argument; anything but a string or null is an error.
fn opt_str<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, Value> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(failure(format!(
            "{key} must be a string, got {}",
            type_name(other)
        ))),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn args_object(args: &Value) -> Result<(), Value> {
    if args.is_object() || args.is_null() {
        Ok(())
    } else {
        Err(failure(format!(
            "arguments must be a JSON object, got {}",
            type_name(args)
        )))
    }
}

/// Arguments of `browser_snapshot`.
pub const SNAPSHOT_ARGS: &[&str] = &["task_id", "target_id"];
/// Arguments of `browser_dialog`.
pub const DIALOG_ARGS: &[&str] = &["action", "prompt_text", "dialog_id", "task_id"];
/// Arguments of `browser_cdp`.
pub const CDP_ARGS: &[&str] = &[
    "method",
    "params",
    "frame_id",
    "target_id",
    "timeout_s",
    "task_id",
];

/// `browser_snapshot`: the fields a host merges into its page snapshot (with `state` saying
/// `reconnecting` while the supervisor reconnects); `{}` when the task has no live supervisor,
/// and a failure for arguments it does not take.
pub fn browser_snapshot(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    if let Err(e) = check_args(args, SNAPSHOT_ARGS).and_then(|()| check_task(task_id)) {
        return e;
    }
    let target_id = match opt_str(args, "target_id") {
        Ok(t) => t,
        Err(e) => return e,
    };
    match reg.get(task_id) {
        Some(sup) if sup.is_alive() => {
            let snap = sup.snapshot();
            match target_id {
                Some(t) if snap.page_target_id.as_deref() != Some(t) => {
                    followed_page_snapshot(&snap, t, &reg.config().limits)
                }
                _ => snap.to_json(),
            }
        }
        _ => json!({}),
    }
}

/// `browser_snapshot {target_id}` for a popup the task follows (issue 14): its frame tree and
/// its dialogs, in the §10 shape.
fn followed_page_snapshot(
    snap: &crate::Snapshot,
    target_id: &str,
    limits: &crate::Limits,
) -> Value {
    let Some(page) = snap.pages.iter().skip(1).find(|p| p.target_id == target_id) else {
        let known: Vec<&str> = snap.pages.iter().map(|p| p.target_id.as_str()).collect();
        return failure(format!(
            "target_id {target_id:?} is not a page this task follows; known pages: {known:?} \
             (see pages in browser_snapshot)"
        ));
    };
    let tree = crate::core::frames::tree_of(&snap.frames, target_id, limits);
    let mut out = json!({
        "target_id": page.target_id,
        "url": page.url,
        "opener_target_id": page.opener_target_id,
        "pending_dialogs": snap.pending_dialogs.iter().filter(|d| d.target_id == target_id)
            .map(crate::PendingDialog::to_json).collect::<Vec<_>>(),
        "frame_tree": tree.to_json(),
        "page_target_id": snap.page_target_id,
    });
    let recent: Vec<Value> = snap
        .recent_dialogs
        .iter()
        .filter(|d| d.dialog.target_id == target_id)
        .map(|d| d.to_json())
        .collect();
    if !recent.is_empty() {
        out["recent_dialogs"] = Value::Array(recent);
    }
    if !page.title.is_empty() {
        out["title"] = json!(page.title);
    }
    out
}

/// `browser_dialog {action, prompt_text?, dialog_id?}`.
pub fn browser_dialog(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    let mut out = dialog_inner(reg, task_id, args).unwrap_or_else(|e| e);
    add_dialog_status(reg, task_id, &mut out);
    out
}

fn dialog_inner(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Result<Value, Value> {
    check_args(args, DIALOG_ARGS)?;
    check_task(task_id)?;
    let action = match args.get("action") {
        Some(Value::String(s)) if s == "accept" => DialogAction::Accept,
        Some(Value::String(s)) if s == "dismiss" => DialogAction::Dismiss,
        Some(other) => {
            // At most 60 characters of it: the argument may be huge.
            let shown: String = other.to_string().chars().take(60).collect();
            return Err(failure(format!(
                "invalid action {shown}: use \"accept\" or \"dismiss\""
            )));
        }
        None => return Err(failure("missing action: use \"accept\" or \"dismiss\"")),
    };
    let prompt_text = opt_str(args, "prompt_text")?;
    let dialog_id = opt_str(args, "dialog_id")?;
    let sup = live(reg, task_id)?;
    match sup.respond_to_dialog(action, prompt_text, dialog_id) {
        Ok(d) => Ok(json!({"success": true, "action": action.as_str(), "dialog": d.to_json()})),
        Err(Error::AnswerAppliedToOtherDialog { named, received }) => {
            let e = Error::AnswerAppliedToOtherDialog {
                named,
                received: received.clone(),
            };
            let mut out = failure(e);
            out["answered_dialog"] = received.to_json();
            Err(out)
        }
        Err(e) => Err(failure(e)),
    }
}

/// `browser_cdp {method, params?, frame_id?, target_id?, timeout_s?}` (SPEC §8). Without
/// `frame_id`/`target_id` the call is routed by domain ([`Route::by_domain`]); the result says
/// where it went (`routed_to`). A call that a dialog blocks fails at once with
/// `blocked_by_dialog`.
pub fn browser_cdp(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    let mut out = cdp_inner(reg, task_id, args, None).unwrap_or_else(|e| e);
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
    let mut out = cdp_inner(reg, task_id, args, Some(cancel)).unwrap_or_else(|e| e);
    add_dialog_status(reg, task_id, &mut out);
    out
}

fn cdp_inner(
    reg: &SupervisorRegistry,
    task_id: &str,
    args: &Value,
    cancel: Option<&CancelToken>,
) -> Result<Value, Value> {
    check_args(args, CDP_ARGS)?;
    check_task(task_id)?;
    let method = match opt_str(args, "method")? {
        Some(m) if !m.trim().is_empty() => m,
        _ => {
            return Err(failure(
                "missing method: a CDP method name such as \"Runtime.evaluate\"",
            ));
        }
    };
    let params = match args.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(other) => {
            return Err(failure(format!(
                "params must be an object, got {}",
                type_name(other)
            )));
        }
    };
    let frame_id = opt_str(args, "frame_id")?;
    let target_id = opt_str(args, "target_id")?;
    // Absent: the task's `supervisor.call_timeout_s`.
    let timeout_s = match args.get("timeout_s") {
        None | Some(Value::Null) => None,
        // Clamped to 1..300 s (SPEC §8), so 0 still gets a reply that takes a moment.
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|t| t.is_finite())
            .map(|t| t.clamp(1.0, 300.0)),
        Some(other) => {
            return Err(failure(format!(
                "timeout_s must be a number of seconds, got {}",
                type_name(other)
            )));
        }
    };
    let route = match (frame_id, target_id) {
        (Some(_), Some(_)) => return Err(failure("give frame_id or target_id, not both")),
        (Some(f), None) => Route::Frame(f),
        (None, Some(t)) => Route::Target(t),
        (None, None) => Route::by_domain(method),
    };
    let sup = live(reg, task_id)?;
    let timeout = timeout_s.map_or(sup.config().call_timeout, Duration::from_secs_f64);
    let result = match cancel {
        Some(c) => sup.call_cancellable(method, params, route, timeout, c),
        None => sup.call_routed(method, params, route, timeout),
    };
    match result {
        Ok((result, session)) => {
            let mut out = json!({
                "success": true,
                "method": method,
                "routed_to": route.as_str(),
                "result": result,
            });
            if let Some(f) = frame_id {
                out["frame_id"] = json!(f);
            }
            if let Some(s) = session {
                out["session_id"] = json!(s);
            }
            Ok(out)
        }
        Err(Error::Cdp { code, message, .. }) => {
            let hint = match (route, code) {
                (Route::Browser, -32601) => {
                    " (the call went to the browser target, which does not serve this domain; \
                     pass target_id or frame_id to send it to the page)"
                }
                (_, -32601) => {
                    " (this target does not serve that method; without target_id and frame_id, \
                     browser-level domains go to the browser and the rest to the page)"
                }
                _ => "",
            };
            Err(json!({
                "success": false,
                "error": format!("CDP error from {method}: {message} (code {code}){hint}"),
                "routed_to": route.as_str(),
                "cdp_error": {"code": code, "message": message},
            }))
        }
        Err(e @ Error::BlockedByDialog { .. }) => {
            let Error::BlockedByDialog { dialog, .. } = &e else {
                unreachable!()
            };
            Err(json!({
                "success": false,
                "error": e.to_string(),
                "routed_to": route.as_str(),
                "blocked_by_dialog": dialog.to_json(),
            }))
        }
        Err(e @ Error::Refused { .. }) => {
            let Error::Refused { option, .. } = &e else {
                unreachable!()
            };
            Err(json!({
                "success": false,
                "error": e.to_string(),
                "refused_by": option,
            }))
        }
        Err(e @ Error::Cancelled(_)) => Err(json!({
            "success": false,
            "error": e.to_string(),
            "cancelled": true,
        })),
        Err(e) => Err(failure(e)),
    }
}
