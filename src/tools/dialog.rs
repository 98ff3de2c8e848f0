//! `browser_dialog`: answers a pending dialog through
//! [`Supervisor::respond_to_dialog`](crate::Supervisor::respond_to_dialog).

use serde_json::{Value, json};

use super::args::{check_task, failure, live, opt_str};
use crate::config::DialogAction;
use crate::error::Error;
use crate::registry::SupervisorRegistry;
use crate::supervisor::invalid_action;

/// `browser_dialog`'s result, without the dialog status (`table::run` checked the argument
/// names).
pub(crate) fn run(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    answer(reg, task_id, args).unwrap_or_else(|e| e)
}

fn answer(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Result<Value, Value> {
    check_task(task_id)?;
    let action = match args.get("action") {
        Some(Value::String(s)) => DialogAction::parse(s),
        Some(other) => Err(invalid_action(crate::quote::quoted_json(other))),
        None => return Err(failure("missing action: use \"accept\" or \"dismiss\"")),
    }
    .map_err(failure)?;
    let prompt_text = opt_str(args, "prompt_text")?;
    let dialog_id = opt_str(args, "dialog_id")?;
    let sup = live(reg, task_id)?;
    match sup.respond_to_dialog(action, prompt_text, dialog_id) {
        Ok(d) => Ok(json!({"success": true, "action": action.as_str(), "dialog": d.to_json()})),
        Err(e) => {
            let mut out = failure(&e);
            if let Error::AnswerAppliedToOtherDialog { received, .. } = &e {
                out["answered_dialog"] = received.to_json();
            }
            Err(out)
        }
    }
}
