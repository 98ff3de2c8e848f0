//! What an agent should hear about a task: the events between two of its snapshots
//! ([`changes`]: dialogs opened and closed, the connection lost and back, the page blocked,
//! downloads begun and ended, file choosers opened or refused, the page replaced), which the
//! notifier (`notify`) publishes, and the request-scoped log of a 2026-07-28 request
//! ([`request_log`]).

use std::sync::Arc;

use super::events::{Event, Level};
use crate::quote::quoted;
use crate::registry::SupervisorRegistry;
use crate::snapshot::{ClosedBy, Snapshot};

/// What an agent should hear about between two snapshots of `task`. `alive`: false once the
/// supervisor is stopping or ended (its last disconnect is no news).
pub(crate) fn changes(task: &str, last: &Snapshot, next: &Snapshot, alive: bool) -> Vec<Event> {
    let mut events = Vec::new();
    let t = quoted(task);
    for d in next.pending_dialogs.iter() {
        if !last.pending_dialogs.iter().any(|p| p.id == d.id) {
            let message = format!(
                "a {} dialog {} is open on task {t} ({}); the page is blocked until browser_dialog answers it",
                d.kind,
                d.id,
                quoted(&d.message)
            );
            events.push(
                Event::new(Level::WARNING, "dialog_opened", task, message)
                    .with("dialog", d.to_json()),
            );
        }
    }
    for c in next.recent_dialogs.iter() {
        if last
            .recent_dialogs
            .iter()
            .any(|r| r.dialog.id == c.dialog.id)
        {
            continue;
        }
        let level = match c.closed_by {
            ClosedBy::Watchdog => Level::WARNING,
            ClosedBy::AutoPolicy => Level::NOTICE,
            ClosedBy::Agent => Level::DEBUG,
            _ => Level::INFO,
        };
        let message = format!(
            "the {} dialog {} of task {t} was closed by {}",
            c.dialog.kind,
            c.dialog.id,
            c.closed_by.as_str()
        );
        events.push(Event::new(level, "dialog_closed", task, message).with("dialog", c.to_json()));
    }
    let lost = alive && last.is_active() && !next.is_active();
    // A drop and a reconnect between two snapshots the watcher saw (it reads the newest one,
    // not each): both active, but the page's session is a new one.
    let reattached = alive
        && last.is_active()
        && next.is_active()
        && last.page_session_id.is_some()
        && next.page_session_id.is_some()
        && last.page_session_id != next.page_session_id;
    if lost || reattached {
        let unknown = if reattached {
            "the connection dropped"
        } else {
            ""
        };
        let reason = next.disconnect_reason.as_deref().unwrap_or(unknown);
        let message = format!("task {t} lost its CDP connection ({reason}); reconnecting");
        events.push(
            Event::new(Level::WARNING, "connection_lost", task, message).with("reason", reason),
        );
    }
    if (!last.is_active() && next.is_active()) || reattached {
        let message = format!("task {t} is connected again");
        events.push(Event::new(Level::NOTICE, "reconnected", task, message));
    }
    events.extend(file_changes(task, last, next));
    if let (None, Some(b)) = (&last.blocked, &next.blocked) {
        let message = format!(
            "the page of task {t} does not answer ({}): {}",
            b.reason, b.hint
        );
        events.push(
            Event::new(Level::WARNING, "page_blocked", task, message).with("blocked", b.to_json()),
        );
    }
    events
}

/// Downloads that began or ended, file choosers opened or refused, and a page replaced after a
/// reconnect (issue 31), between two snapshots of `task`.
fn file_changes(task: &str, last: &Snapshot, next: &Snapshot) -> Vec<Event> {
    let mut events = Vec::new();
    let t = quoted(task);
    for d in next.downloads.iter() {
        let before = last.downloads.iter().find(|p| p.guid == d.guid);
        let name = quoted(&d.suggested_filename);
        if before.is_none() {
            let message = format!("task {t} began downloading {name}");
            events.push(
                Event::new(Level::INFO, "download_started", task, message)
                    .with("download", d.to_json()),
            );
        }
        if d.state.is_final() && before.is_none_or(|b| !b.state.is_final()) {
            let level = match d.state {
                crate::snapshot::DownloadState::Completed => Level::INFO,
                _ => Level::WARNING,
            };
            let path = d.path.as_ref().map(|p| format!(": {}", p.display()));
            let message = format!(
                "the download {name} of task {t} is {}{}",
                d.state,
                path.unwrap_or_default()
            );
            events.push(
                Event::new(level, "download_finished", task, message).with("download", d.to_json()),
            );
        }
    }
    for c in next.file_choosers.iter() {
        if !last.file_choosers.iter().any(|p| p.id == c.id) {
            let message = format!(
                "the page of task {t} opened file chooser {} ({}): answer it with browser_dialog and files, or dismiss it",
                c.id,
                c.mode.as_str()
            );
            events.push(
                Event::new(Level::WARNING, "file_chooser_opened", task, message)
                    .with("dialog", c.to_json()),
            );
        }
    }
    let refused = |s: &Snapshot| s.file_chooser_refused.as_ref().map_or(0, |r| r.count);
    if let Some(r) = &next.file_chooser_refused
        && refused(next) > refused(last)
    {
        let message = format!(
            "the page of task {t} opened a file chooser, left unanswered: {} is off",
            crate::snapshot::ChooserRefused::OPTION
        );
        events.push(
            Event::new(Level::WARNING, "file_chooser_refused", task, message)
                .with("file_chooser_refused", r.to_json()),
        );
    }
    if let Some(old) = &next.page_replaced
        && last.page_replaced.as_ref() != Some(old)
    {
        let message =
            format!("the page of task {t} was gone after a reconnect; it has a new, blank page");
        events.push(
            Event::new(Level::WARNING, "page_replaced", task, message)
                .with("old_target_id", old.as_str())
                .with("page_target_id", next.page_target_id.clone()),
        );
    }
    events
}

/// The request-scoped `notifications/message` lines of a 2026-07-28 request that asked for
/// logs at `level` or above: what happened to `task` between `before` (its snapshot when the
/// request started; `None`: no supervisor then) and now.
pub(crate) fn request_log(
    registry: &SupervisorRegistry,
    task: &str,
    before: Option<&Arc<Snapshot>>,
    level: Level,
) -> Vec<String> {
    let after = registry.get(task).map(|s| s.snapshot());
    changes_during(task, before, after.as_ref())
        .iter()
        .filter(|e| e.level >= level)
        .map(Event::log_line)
        .collect()
}

/// What happened to `task` during one request, from its snapshots before and after (`None`:
/// no supervisor then). A supervisor that started during the request counts from an empty
/// page: its pending dialogs are news.
fn changes_during(
    task: &str,
    before: Option<&Arc<Snapshot>>,
    after: Option<&Arc<Snapshot>>,
) -> Vec<Event> {
    match (before, after) {
        (Some(b), Some(a)) if Arc::ptr_eq(b, a) => Vec::new(),
        (Some(b), Some(a)) if b.task_id == a.task_id && a.version >= b.version => {
            changes(task, b, a, true)
        }
        (_, Some(a)) => {
            let mut empty = Snapshot::clone(a);
            empty.pending_dialogs = Arc::new([]);
            empty.recent_dialogs = Arc::new([]);
            empty.downloads = Arc::new([]);
            empty.file_choosers = Arc::new([]);
            empty.blocked = None;
            changes(task, &empty, a, true)
        }
        (_, None) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::SupervisorState;

    fn names(events: &[Event]) -> Vec<String> {
        events
            .iter()
            .map(|e| e.data["event"].as_str().unwrap_or("").to_string())
            .collect()
    }

    fn attached(session: &str) -> Snapshot {
        let mut s = Snapshot::empty("t", "ws://x");
        s.page_session_id = Some(session.into());
        s
    }

    #[test]
    fn a_drop_and_reconnect_between_two_snapshots_is_still_reported() {
        let before = attached("S1");
        // Seen one by one: down, then up.
        let mut down = attached("S1");
        down.state = SupervisorState::Reconnecting { attempt: 1, of: 3 };
        down.disconnect_reason = Some("the browser closed the connection".into());
        assert_eq!(
            names(&changes("t", &before, &down, true)),
            ["connection_lost"]
        );
        assert_eq!(
            names(&changes("t", &down, &attached("S2"), true)),
            ["reconnected"]
        );
        // The watcher only saw the newest snapshot: a new page session says it happened.
        let after = attached("S2");
        assert_eq!(
            names(&changes("t", &before, &after, true)),
            ["connection_lost", "reconnected"]
        );
        // Same session, or a supervisor that is ending: no news.
        assert!(changes("t", &before, &attached("S1"), true).is_empty());
        assert!(changes("t", &before, &after, false).is_empty());
    }

    #[test]
    fn a_download_is_news_when_it_begins_and_when_it_ends() {
        use crate::snapshot::{Download, DownloadState};
        let download = |state| {
            Arc::new(Download {
                guid: "G".into(),
                url: "http://a.test/f".into(),
                suggested_filename: "f.bin".into(),
                state,
                received_bytes: 3,
                total_bytes: Some(3),
                path: None,
                frame_id: None,
                started_at: 1.0,
                ended_at: None,
            })
        };
        let with = |state: Option<DownloadState>| {
            let mut s = attached("S1");
            s.downloads = state.map(download).into_iter().collect();
            s
        };
        let none = with(None);
        let going = with(Some(DownloadState::InProgress));
        let done = with(Some(DownloadState::Completed));
        assert_eq!(
            names(&changes("t", &none, &going, true)),
            ["download_started"]
        );
        assert!(changes("t", &going, &going, true).is_empty());
        let ended = changes("t", &going, &done, true);
        assert_eq!(names(&ended), ["download_finished"]);
        assert_eq!(ended[0].data["download"]["state"], "completed");
        // Begun and ended between two looks: both.
        assert_eq!(
            names(&changes("t", &none, &done, true)),
            ["download_started", "download_finished"]
        );
        let failed = changes("t", &going, &with(Some(DownloadState::Canceled)), true);
        assert_eq!(failed[0].level, Level::WARNING);
    }
}
