//! `browser_handover`: hands the task over to a person or takes it back
//! ([`Supervisor::hand_over`](crate::Supervisor::hand_over),
//! [`Supervisor::take_back`](crate::Supervisor::take_back); SPEC §20).

use serde_json::{Value, json};

use super::args::{check_task, failure, live};
use crate::registry::SupervisorRegistry;

/// `browser_handover`'s result, without the dialog status (`table::run` checked the argument
/// names).
pub(crate) fn run(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    change(reg, task_id, args).unwrap_or_else(|e| e)
}

fn change(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Result<Value, Value> {
    check_task(task_id)?;
    let hold = match args.get("action") {
        Some(Value::String(s)) if s == "hand_over" => true,
        Some(Value::String(s)) if s == "take_back" => false,
        None => return Err(failure(r#"missing action: use "hand_over" or "take_back""#)),
        Some(other) => {
            return Err(failure(format!(
                r#"invalid action {}: use "hand_over" or "take_back""#,
                crate::quote::quoted_json(other)
            )));
        }
    };
    let sup = live(reg, task_id)?;
    let state = if hold {
        sup.hand_over()
    } else {
        sup.take_back()
    }
    .map_err(failure)?;
    let mut out = json!({
        "success": true,
        "task_id": task_id,
        "action": if hold { "hand_over" } else { "take_back" },
    });
    if let (Some(o), Value::Object(h)) = (out.as_object_mut(), state.to_json()) {
        o.extend(h);
    }
    Ok(out)
}
