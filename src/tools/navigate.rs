//! `browser_navigate`: navigates the task's page through
//! [`Supervisor::navigate`](crate::Supervisor::navigate), and every way it can fail as a tool
//! result (a dialog that opened during it, a network error, the security policy).

use std::time::Duration;

use serde_json::{Value, json};

use super::args::{check_task, failure, live, opt_str, opt_timeout_s};
use crate::error::Error;
use crate::registry::SupervisorRegistry;
use crate::supervisor::WaitUntil;

/// `browser_navigate`'s result, without the dialog status (`table::run` checked the argument
/// names).
pub(crate) fn run(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Value {
    navigate(reg, task_id, args).unwrap_or_else(|e| e)
}

fn navigate(reg: &SupervisorRegistry, task_id: &str, args: &Value) -> Result<Value, Value> {
    check_task(task_id)?;
    let url = match opt_str(args, "url")? {
        Some(u) if !u.trim().is_empty() => u,
        _ => {
            return Err(failure(
                "missing url: the address to open, e.g. \"https://example.com/\"",
            ));
        }
    };
    let wait_until = match opt_str(args, "wait_until")? {
        None => WaitUntil::Load,
        Some(w) => WaitUntil::parse(w).map_err(failure)?,
    };
    let timeout_s = opt_timeout_s(args)?;
    let sup = live(reg, task_id)?;
    let timeout = timeout_s.map_or(sup.config().call_timeout, Duration::from_secs_f64);
    match sup.navigate(url, wait_until, timeout) {
        Ok(nav) => Ok(json!({
            "success": true,
            "url": nav.url,
            "frame_id": nav.frame_id,
            "loader_id": nav.loader_id,
            "wait_until": wait_until.as_str(),
        })),
        Err(e) => {
            let mut out = failure(&e);
            match &e {
                Error::BlockedByDialog { dialog, .. } => {
                    out["blocked_by_dialog"] = dialog.to_json();
                }
                Error::NavigationFailed { error, .. } => out["navigation_error"] = json!(error),
                Error::Refused { option, .. } => out["refused_by"] = json!(option),
                _ => {}
            }
            Err(out)
        }
    }
}
