//! MCP logging (`logging/setLevel`, `notifications/message`) and the per-task watchers that
//! push dialog and connection events to the client.
//!
//! One watcher thread per connected supervisor blocks in [`Supervisor::wait_for`] until the
//! next publish (no polling; an idle task costs no wake-ups beyond a 10-minute re-check), diffs
//! the new snapshot against the last one it saw, and sends a message for each change that an
//! agent should hear about: a dialog opened, a dialog closed by someone other than the agent, the
//! connection lost or back, the page blocked, the supervisor ended. It ends with its supervisor.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use serde_json::{Value, json};

use super::rpc::{self, Writer};
use crate::registry::SupervisorRegistry;
use crate::snapshot::{ClosedBy, Snapshot};
use crate::supervisor::Supervisor;

/// RFC 5424 severities as MCP names them, least severe first.
pub(crate) const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A severity: an index into [`LEVELS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Level(u8);

impl Level {
    pub(crate) const DEBUG: Level = Level(0);
    pub(crate) const INFO: Level = Level(1);
    pub(crate) const NOTICE: Level = Level(2);
    pub(crate) const WARNING: Level = Level(3);
    pub(crate) const ERROR: Level = Level(4);

    pub(crate) fn parse(name: &str) -> Option<Level> {
        LEVELS
            .iter()
            .position(|l| *l == name)
            .and_then(|i| u8::try_from(i).ok())
            .map(Level)
    }

    fn name(self) -> &'static str {
        LEVELS.get(usize::from(self.0)).copied().unwrap_or("info")
    }
}

/// Where log messages go, and the watchers that produce them.
#[derive(Debug)]
pub(crate) struct Notifier {
    /// The least severe level sent (default `info`); written by `logging/setLevel`.
    min_level: AtomicU8,
    /// The client's output while `run` serves one; `None` before and after.
    writer: ArcSwapOption<Writer>,
    /// Set at shutdown: watchers stay silent from then on.
    closing: AtomicBool,
    /// Task id -> the supervisor its watcher follows (so one supervisor gets one watcher).
    /// Written by `watch` (worker threads) and by each watcher as it ends.
    watched: Mutex<HashMap<String, Arc<Supervisor>>>,
}

impl Notifier {
    pub(crate) fn new() -> Notifier {
        Notifier {
            min_level: AtomicU8::new(Level::INFO.0),
            writer: ArcSwapOption::empty(),
            closing: AtomicBool::new(false),
            watched: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn set_writer(&self, w: Option<Arc<Writer>>) {
        self.writer.store(w);
    }

    pub(crate) fn set_level(&self, level: Level) {
        self.min_level.store(level.0, Ordering::Release);
    }

    pub(crate) fn close(&self) {
        self.closing.store(true, Ordering::Release);
        self.watched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Sends `notifications/message` when `level` passes the client's threshold.
    pub(crate) fn log(&self, level: Level, data: Value) {
        if level.0 < self.min_level.load(Ordering::Acquire) || self.closing.load(Ordering::Acquire)
        {
            return;
        }
        if let Some(w) = self.writer.load_full() {
            w.send(&rpc::notification(
                "notifications/message",
                json!({"level": level.name(), "logger": "cdp-supervisor", "data": data}),
            ));
        }
    }

    /// Starts a watcher for `sup` (task `task`) unless one already follows it.
    pub(crate) fn watch(
        self: &Arc<Self>,
        registry: &Arc<SupervisorRegistry>,
        task: &str,
        sup: &Arc<Supervisor>,
    ) {
        if self.closing.load(Ordering::Acquire) {
            return;
        }
        {
            let mut w = self.watched.lock().unwrap_or_else(|e| e.into_inner());
            if w.get(task).is_some_and(|s| Arc::ptr_eq(s, sup)) {
                return;
            }
            w.insert(task.to_string(), Arc::clone(sup));
        }
        let me = Arc::clone(self);
        let registry = Arc::clone(registry);
        let sup = Arc::clone(sup);
        let task = task.to_string();
        let spawned = std::thread::Builder::new()
            .name("mcp-watch".into())
            .stack_size(256 * 1024)
            .spawn(move || me.follow(&registry, &task, &sup));
        if let Err(e) = spawned {
            log::warn!("cannot start the MCP dialog watcher: {e}; dialogs are not pushed");
        }
    }

    fn follow(&self, registry: &SupervisorRegistry, task: &str, sup: &Arc<Supervisor>) {
        let mut last = sup.snapshot();
        loop {
            let seen = last.version;
            match sup.wait_for(Duration::from_secs(600), |s| s.version != seen) {
                Some(next) => {
                    self.report_changes(task, &last, &next, sup.is_alive());
                    last = next;
                }
                None if sup.is_alive() => {}
                None => break,
            }
        }
        let end = sup.snapshot();
        self.report_changes(task, &last, &end, false);
        // Stopped on purpose (disconnect, rebind, shutdown): the registry no longer has it.
        let died = registry.get(task).is_some_and(|s| Arc::ptr_eq(&s, sup));
        if died {
            let reason = end
                .disconnect_reason
                .clone()
                .unwrap_or_else(|| "unknown reason".into());
            self.log(
                Level::ERROR,
                json!({
                    "event": "supervisor_ended", "task_id": task, "reason": reason,
                    "message": format!("the supervisor of task {task:?} ended ({reason}); call browser_connect to start a new one"),
                }),
            );
        }
        let mut w = self.watched.lock().unwrap_or_else(|e| e.into_inner());
        if w.get(task).is_some_and(|s| Arc::ptr_eq(s, sup)) {
            w.remove(task);
        }
    }

    /// `alive`: false once the supervisor is stopping or ended (its last disconnect is no news).
    fn report_changes(&self, task: &str, last: &Snapshot, next: &Snapshot, alive: bool) {
        for d in next.pending_dialogs.iter() {
            if !last.pending_dialogs.iter().any(|p| p.id == d.id) {
                self.log(
                    Level::WARNING,
                    json!({
                        "event": "dialog_opened", "task_id": task, "dialog": d.to_json(),
                        "message": format!(
                            "a {} dialog {} is open on task {task:?} ({:?}); the page is blocked until browser_dialog answers it",
                            d.kind, d.id, d.message
                        ),
                    }),
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
            self.log(
                level,
                json!({
                    "event": "dialog_closed", "task_id": task, "dialog": c.to_json(),
                    "message": format!(
                        "the {} dialog {} of task {task:?} was closed by {}",
                        c.dialog.kind, c.dialog.id, c.closed_by.as_str()
                    ),
                }),
            );
        }
        if alive && last.is_active() && !next.is_active() {
            let reason = next.disconnect_reason.clone().unwrap_or_default();
            self.log(
                Level::WARNING,
                json!({
                    "event": "connection_lost", "task_id": task, "reason": reason,
                    "message": format!("task {task:?} lost its CDP connection ({reason}); reconnecting"),
                }),
            );
        }
        if !last.is_active() && next.is_active() {
            self.log(
                Level::NOTICE,
                json!({
                    "event": "reconnected", "task_id": task,
                    "message": format!("task {task:?} is connected again"),
                }),
            );
        }
        if let (None, Some(b)) = (&last.blocked, &next.blocked) {
            self.log(
                Level::WARNING,
                json!({
                    "event": "page_blocked", "task_id": task, "blocked": b.to_json(),
                    "message": format!("the page of task {task:?} does not answer ({}): {}", b.reason, b.hint),
                }),
            );
        }
    }
}
