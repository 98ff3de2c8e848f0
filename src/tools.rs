//! JSON tool handlers (SPEC §10): what a synchronous agent tool host calls.
//!
//! Each takes the registry, a task id and the tool's JSON arguments and returns JSON; none of them
//! panics on any input, and failures are `{"success": false, "error": "..."}`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::config::DialogAction;
use crate::error::Error;
use crate::registry::SupervisorRegistry;
use crate::supervisor::{Route, Supervisor};

fn failure(error: impl std::fmt::Display) -> Value {
    json!({"success": false, "error": error.to_string()})
}

fn live(reg: &SupervisorRegistry, task_id: &str) -> Result<std::sync::Arc<Supervisor>, Value> {
    match reg.get(task_id) {
        None => Err(failure(format!(
            "no browser supervisor for task {task_id:?}: connect first (browser_connect / get_or_start)"
        ))),
        Some(s) if !s.is_alive() => Err(failure(Error::NotActive(task_id.to_string()))),
        Some(s) if !s.is_active() => Err(failure(Error::ConnectionLost(format!(
            "the connection of task {task_id:?} dropped; the supervisor is reconnecting"
        )))),
        Some(s) => Ok(s),
    }
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

/// `browser_snapshot`: the fields a host merges into its page snapshot; `{}` when the task has no
/// live supervisor.
pub fn browser_snapshot(reg: &SupervisorRegistry, task_id: &str, _args: &Value) -> Value {
    match reg.snapshot(task_id) {
        Some(s) if s.active => s.to_json(),
        _ => json!({}),
    }
}

/// `browser_dialog {action, prompt_text?, dialog_id?}`.
pub fn browser_dialog(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    dialog_inner(reg, task_id, args).unwrap_or_else(|e| e)
}

fn dialog_inner(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Result<Value, Value> {
    args_object(args)?;
    let action = match args.get("action") {
        Some(Value::String(s)) if s == "accept" => DialogAction::Accept,
        Some(Value::String(s)) if s == "dismiss" => DialogAction::Dismiss,
        Some(other) => {
            return Err(failure(format!(
                "invalid action {other}: use \"accept\" or \"dismiss\""
            )));
        }
        None => return Err(failure("missing action: use \"accept\" or \"dismiss\"")),
    };
    let prompt_text = opt_str(args, "prompt_text")?;
    let dialog_id = opt_str(args, "dialog_id")?;
    let sup = live(reg, task_id)?;
    match sup.respond_to_dialog(action, prompt_text, dialog_id) {
        Ok(d) => Ok(json!({"success": true, "action": action.as_str(), "dialog": d.to_json()})),
        Err(e) => Err(failure(e)),
    }
}

/// `browser_cdp {method, params?, frame_id?, target_id?, timeout_s?}` (SPEC §8).
pub fn browser_cdp(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    cdp_inner(reg, task_id, args).unwrap_or_else(|e| e)
}

fn cdp_inner(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Result<Value, Value> {
    args_object(args)?;
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
    let timeout_s = match args.get("timeout_s") {
        None | Some(Value::Null) => 30.0,
        Some(Value::Number(n)) => n.as_f64().unwrap_or(30.0),
        Some(other) => {
            return Err(failure(format!(
                "timeout_s must be a number of seconds, got {}",
                type_name(other)
            )));
        }
    };
    let timeout = Duration::from_secs_f64(if timeout_s.is_finite() {
        timeout_s.clamp(1.0, 300.0)
    } else {
        30.0
    });
    let route = match (frame_id, target_id) {
        (Some(_), Some(_)) => return Err(failure("give frame_id or target_id, not both")),
        (Some(f), None) => Route::Frame(f),
        (None, Some(t)) => Route::Target(t),
        (None, None) => Route::Browser,
    };
    let sup = live(reg, task_id)?;
    match sup.call_routed(method, params, route, timeout) {
        Ok((result, session)) => {
            let mut out = json!({"success": true, "method": method, "result": result});
            if let Some(f) = frame_id {
                out["frame_id"] = json!(f);
            }
            if let Some(s) = session {
                out["session_id"] = json!(s);
            }
            Ok(out)
        }
        Err(Error::Cdp { code, message, .. }) => Err(json!({
            "success": false,
            "error": format!("CDP error from {method}: {message} (code {code})"),
            "cdp_error": {"code": code, "message": message},
        })),
        Err(e) => Err(failure(e)),
    }
}
