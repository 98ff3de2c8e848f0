//! `browser_dialog`: answers a pending dialog through
//! [`Supervisor::respond_to_dialog`](crate::Supervisor::respond_to_dialog), or a pending file
//! chooser (`fc-N`, or `files` given, or no dialog but a chooser pending) through
//! [`Supervisor::respond_to_file_chooser`](crate::Supervisor::respond_to_file_chooser) and
//! [`Supervisor::dismiss_file_chooser`](crate::Supervisor::dismiss_file_chooser).

use serde_json::{Value, json};

use super::args::{check_task, failure, kind_of, live, opt_str};
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
    let files = files_arg(args)?;
    let sup = live(reg, task_id)?;
    let chooser = dialog_id.map_or_else(
        || {
            files.is_some()
                || sup
                    .with_snapshot(|s| s.pending_dialogs.is_empty() && !s.file_choosers.is_empty())
        },
        |id| id.starts_with("fc-"),
    );
    if chooser {
        let answered = match (action, files) {
            (DialogAction::Accept, Some(files)) => sup.respond_to_file_chooser(&files, dialog_id),
            (DialogAction::Accept, None) => Err(Error::InvalidArgument(
                "accepting a file chooser needs files: a list of absolute paths within \
                 security.upload_dirs (or dismiss it)"
                    .into(),
            )),
            (DialogAction::Dismiss, _) => sup.dismiss_file_chooser(dialog_id),
        };
        return match answered {
            Ok(c) => Ok(json!({"success": true, "action": action.as_str(), "dialog": c.to_json()})),
            Err(e) => {
                let mut out = failure(&e);
                if let Error::Refused { option, .. } = &e {
                    out["refused_by"] = json!(option);
                }
                Err(out)
            }
        };
    }
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

/// The optional `files` argument: a list of paths.
fn files_arg(args: &Value) -> Result<Option<Vec<std::path::PathBuf>>, Value> {
    let list = match args.get("files") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(failure(format!(
                "files must be a list of file paths, got {}",
                kind_of(other)
            )));
        }
    };
    list.iter()
        .enumerate()
        .map(|(i, f)| match f {
            Value::String(s) => Ok(std::path::PathBuf::from(s)),
            other => Err(failure(format!(
                "files[{i}] must be a file path (a string), got {}",
                kind_of(other)
            ))),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}
