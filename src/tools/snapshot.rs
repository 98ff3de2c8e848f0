//! `browser_snapshot`: the task's published state in the §10 shape, or that of a popup it
//! follows, read without touching the page.

use serde_json::{Value, json};

use super::args::{check_task, failure, opt_str};
use crate::config::Limits;
use crate::registry::SupervisorRegistry;
use crate::snapshot::{PendingDialog, Snapshot};

/// The task has no live supervisor. The library's `browser_snapshot` answers `{}` then (a host
/// has nothing to merge, SPEC §10); the tool table answers `no_supervisor`.
#[derive(Debug)]
pub(crate) struct NoSupervisor;

/// The view `browser_snapshot` returns (a failure for bad arguments; `table::run` checked their
/// names).
pub(crate) fn view(
    reg: &SupervisorRegistry,
    task_id: &str,
    args: &Value,
) -> Result<Value, NoSupervisor> {
    if let Err(e) = check_task(task_id) {
        return Ok(e);
    }
    let target_id = match opt_str(args, "target_id") {
        Ok(t) => t,
        Err(e) => return Ok(e),
    };
    let sup = reg
        .get(task_id)
        .filter(|s| s.is_alive())
        .ok_or(NoSupervisor)?;
    let snap = sup.snapshot();
    Ok(match target_id {
        Some(t) if snap.page_target_id.as_deref() != Some(t) => {
            followed_page(&snap, t, &reg.config().limits)
        }
        _ => snap.to_json(),
    })
}

/// A view as a tool result: with `success: true`, unless it is a failure. The MCP server's
/// snapshot fast path builds its answers with it too.
pub(crate) fn as_result(mut view: Value) -> Value {
    if let Some(o) = view.as_object_mut()
        && !o.contains_key("success")
    {
        o.insert("success".into(), json!(true));
    }
    view
}

/// The view of a popup the task follows (issue 14): its frame tree and its dialogs, in the §10
/// shape.
fn followed_page(snap: &Snapshot, target_id: &str, limits: &Limits) -> Value {
    let Some(page) = snap.pages.iter().skip(1).find(|p| p.target_id == target_id) else {
        let known: Vec<&str> = snap.pages.iter().map(|p| p.target_id.as_str()).collect();
        return failure(format!(
            "target_id {} is not a page this task follows; known pages: {known:?} (see pages \
             in browser_snapshot)",
            crate::quote::quoted(target_id)
        ));
    };
    let tree = crate::core::frames::tree_of(&snap.frames, target_id, limits);
    let mut out = json!({
        "target_id": page.target_id,
        "url": page.url,
        "opener_target_id": page.opener_target_id,
        "pending_dialogs": snap.pending_dialogs.iter().filter(|d| d.target_id == target_id)
            .map(PendingDialog::to_json).collect::<Vec<_>>(),
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
