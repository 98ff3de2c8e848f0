//! What the supervisor page shows of one task: its snapshot, read wait-free, cut to what a
//! person looks at, as JSON. Every list is capped here (the newest kept), and so is every
//! text, so the page's DOM and each event stay bounded whatever the task does.

use serde_json::{Value, json};

use crate::config::DialogPolicy;
use crate::snapshot::{Snapshot, SupervisorState};
use crate::supervisor::Supervisor;

/// Frames shown per task (the tree's first ones; the rest are counted).
const FRAMES_MAX: usize = 40;
/// Recent (closed) dialogs shown per task, the newest.
const RECENT_MAX: usize = 8;
/// Console errors shown per task, the newest.
const CONSOLE_MAX: usize = 12;
/// Downloads shown per task, the newest.
const DOWNLOADS_MAX: usize = 8;
/// Pending dialogs shown per task (a page can stack only a few; a bound all the same).
const PENDING_MAX: usize = 16;
/// Characters kept of a dialog message, a console text.
const TEXT_MAX: usize = 1000;
/// Characters kept of a URL or a title.
const URL_MAX: usize = 300;

/// `s` cut to `max` characters (an ellipsis says it was).
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

/// The last `n` of `items`.
fn last<T>(items: &[T], n: usize) -> &[T] {
    &items[items.len().saturating_sub(n)..]
}

/// What the page shows of task `sup` (its snapshot `snap`).
pub(super) fn task(sup: &Supervisor, snap: &Snapshot) -> Value {
    let held_since = snap.handover.held_since;
    let (state, attempt, of, reason) = match &snap.state {
        SupervisorState::Active => ("active", None, None, None),
        SupervisorState::Reconnecting { attempt, of } => (
            "reconnecting",
            Some(*attempt),
            Some(*of),
            snap.disconnect_reason.clone(),
        ),
        SupervisorState::Stopped => ("stopped", None, None, None),
        SupervisorState::Dead { reason } => ("dead", None, None, Some(reason.clone())),
    };
    let options = sup.options();
    let config = sup.config();
    let policy = options.dialog_policy.unwrap_or(config.dialog_policy());
    let timeout = options.dialog_timeout.unwrap_or(config.dialog_timeout());
    let watchdog = (policy == DialogPolicy::MustRespond).then_some(timeout.as_secs_f64());
    let pending: Vec<Value> = snap
        .pending_dialogs
        .iter()
        .take(PENDING_MAX)
        .map(|d| {
            json!({
                "id": d.id,
                "kind": d.kind.as_str(),
                "message": cut(&d.message, TEXT_MAX),
                "default_prompt": cut(&d.default_prompt, TEXT_MAX),
                "frame_id": d.frame_id,
                "url": cut(&d.url, URL_MAX),
                "origin": cut(&d.origin, URL_MAX),
                "target_id": d.target_id,
                "opened_at": d.opened_at,
                // No watchdog while a person holds the task.
                "watchdog_at": watchdog.filter(|_| held_since.is_none()).map(|t| d.opened_at + t),
            })
        })
        .collect();
    let recent: Vec<Value> = last(&snap.recent_dialogs, RECENT_MAX)
        .iter()
        .rev()
        .map(|c| {
            json!({
                "id": c.dialog.id,
                "kind": c.dialog.kind.as_str(),
                "message": cut(&c.dialog.message, TEXT_MAX),
                "closed_by": c.closed_by.as_str(),
                "closed_at": c.closed_at,
                "accepted": c.accepted,
                "user_input": c.user_input.as_deref().map(|t| cut(t, TEXT_MAX)),
            })
        })
        .collect();
    let tree = &snap.frame_tree;
    let frames: Vec<Value> = tree
        .top
        .iter()
        .chain(tree.children.iter())
        .take(FRAMES_MAX)
        .map(|f| {
            json!({
                "frame_id": f.frame_id,
                "parent_frame_id": f.parent_frame_id,
                "url": cut(&f.url, URL_MAX),
                "origin": cut(&f.origin, URL_MAX),
                "oopif": f.is_oopif,
                "crashed": f.crashed,
                "name": f.name.as_deref().map(|n| cut(n, URL_MAX)),
            })
        })
        .collect();
    let shown = tree.top.iter().count() + tree.children.len();
    let pages: Vec<Value> = snap
        .pages
        .iter()
        .map(|p| {
            json!({
                "target_id": p.target_id,
                "url": cut(&p.url, URL_MAX),
                "title": cut(&p.title, URL_MAX),
                "opener": p.opener_target_id,
            })
        })
        .collect();
    let console: Vec<Value> = last(&snap.console_errors, CONSOLE_MAX)
        .iter()
        .rev()
        .map(|c| {
            json!({
                "ts": c.ts,
                "level": c.level,
                "text": cut(&c.text, TEXT_MAX),
                "url": cut(&c.url, URL_MAX),
            })
        })
        .collect();
    let downloads: Vec<Value> = last(&snap.downloads, DOWNLOADS_MAX)
        .iter()
        .rev()
        .map(|d| {
            json!({
                "guid": d.guid,
                "url": cut(&d.url, URL_MAX),
                "file": cut(&d.suggested_filename, URL_MAX),
                "state": d.state.as_str(),
                "received": d.received_bytes,
                "total": d.total_bytes,
                "started_at": d.started_at,
            })
        })
        .collect();
    json!({
        "task_id": snap.task_id,
        "version": snap.version,
        "cdp_url": cut(&snap.cdp_url, URL_MAX),
        "state": state,
        "attempt": attempt,
        "of": of,
        "reason": reason.map(|r| cut(&r, TEXT_MAX)),
        "crashed": snap.crashed,
        "blocked": snap.blocked.as_ref().map(|b| json!({
            "reason": b.reason.as_str(),
            "hint": cut(&b.hint, TEXT_MAX),
        })),
        "policy": policy.as_str(),
        "held_since": held_since,
        "held_before_s": snap.handover.ended_holds_s,
        "holds": snap.handover.holds,
        "page_target_id": snap.page_target_id,
        "pages": pages,
        "pages_truncated": snap.pages_truncated,
        "frames": frames,
        "frames_hidden": (shown.saturating_sub(FRAMES_MAX)) + usize::from(tree.truncated),
        "pending": pending,
        "pending_hidden": snap.pending_dialogs.len().saturating_sub(PENDING_MAX),
        "recent": recent,
        "console": console,
        "console_total": snap.console_errors.len(),
        "downloads": downloads,
        "downloads_total": snap.downloads.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_cut_on_character_boundaries() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcd", 3), "abc…");
        assert_eq!(cut("ééé", 2), "éé…");
        assert_eq!(last(&[1, 2, 3], 2), &[2, 3]);
        assert_eq!(last(&[1], 5), &[1]);
    }
}
