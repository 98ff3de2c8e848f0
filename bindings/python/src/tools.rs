//! `cdp_supervisor.tools`: the JSON tool handlers, returning the text an MCP client gets as the
//! tool result of `browser_snapshot`, `browser_dialog` and `browser_cdp` (the server's
//! `task_id` rule and the dialog status it adds included), for agents that hand tool results
//! straight to a model.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::{Value, json};

use cdp_supervisor::tools;

use crate::blocking;
use crate::convert::from_py;
use crate::registry::PySupervisorRegistry;

/// Longest task id accepted (as the MCP server).
const TASK_ID_MAX: usize = 256;

fn failure(error: String) -> Value {
    json!({"success": false, "error": error})
}

/// The task of a call: `default` when absent or null (the MCP server's rule and words).
fn task_id(args: &Value) -> Result<String, Value> {
    match args.get("task_id") {
        None | Some(Value::Null) => Ok("default".into()),
        Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= TASK_ID_MAX => Ok(s.clone()),
        Some(Value::String(_)) => Err(failure(format!(
            "task_id must be a non-empty string of at most {TASK_ID_MAX} bytes"
        ))),
        Some(other) => Err(failure(format!(
            "task_id must be a string, got {other}; omit it for the task \"default\""
        ))),
    }
}

/// Runs tool `name` with `arguments` (the tool's JSON arguments, `task_id` included) and returns
/// the JSON text of its result.
#[pyfunction]
#[pyo3(name = "_call_tool")]
pub fn call_tool(
    py: Python<'_>,
    registry: &Bound<'_, PySupervisorRegistry>,
    name: String,
    arguments: &Bound<'_, PyDict>,
) -> PyResult<String> {
    let args = from_py(arguments.as_any())?;
    let inner = Arc::clone(&registry.get().inner);
    let out = blocking::call(py, move |cancel| {
        let task = match task_id(&args) {
            Ok(t) => t,
            Err(e) => return e,
        };
        let reg = &inner.registry;
        let mut out = match name.as_str() {
            "browser_snapshot" => {
                let mut s = tools::browser_snapshot(reg, &task, &args);
                match s.as_object_mut() {
                    Some(o) if o.is_empty() => tools::no_supervisor(&task),
                    Some(o) => {
                        if !o.contains_key("success") {
                            o.insert("success".into(), json!(true));
                        }
                        s
                    }
                    None => s,
                }
            }
            "browser_dialog" => tools::browser_dialog(reg, &task, &args),
            "browser_cdp" => match cancel {
                Some(c) => tools::browser_cdp_cancellable(reg, &task, &args, c),
                None => tools::browser_cdp(reg, &task, &args),
            },
            other => failure(format!("unknown tool {other:?}")),
        };
        tools::add_dialog_status(reg, &task, &mut out);
        out
    })?;
    Ok(out.to_string())
}
