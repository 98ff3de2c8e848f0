//! MCP logging (`logging/setLevel`, `notifications/message`) and the one notifier thread that
//! pushes every task's dialog and connection events to the client.
//!
//! The server adds no thread per task (issue 24): each connected supervisor gets a publish hook
//! (`Supervisor::on_publish`) that, run on its reader thread, puts the task's key on one
//! unbounded channel (at most once until the notifier has looked: a flag per task coalesces a
//! burst of publishes). The `mcp-notify` thread, started with the first watch, blocks on that
//! channel (no polling; idle tasks cost no wake-ups), diffs the task's new snapshot against the
//! last one it saw, and sends a message for each change that an agent should hear about: a dialog
//! opened, a dialog closed by someone other than the agent, the connection lost or back, the page
//! blocked, the supervisor ended. A task is forgotten after its last publish (`stopped`, `dead`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwapOption;
use crossbeam_channel::{Receiver, Sender, unbounded};
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
    /// Task id -> the supervisor the notifier follows for it (so one supervisor is followed
    /// once). Written by `watch` (worker threads) and by the notifier thread as a task ends.
    watched: Mutex<HashMap<String, Arc<Supervisor>>>,
    /// The notifier thread's queue once `watch` has started it.
    thread: Mutex<Option<Sender<Wake>>>,
    /// The next watch's key.
    next_key: AtomicU64,
}

/// What the notifier thread is told.
enum Wake {
    /// Follow a new supervisor under this key.
    Watch(u64, Watch),
    /// The supervisor followed under this key published.
    Changed(u64),
    /// The server shuts down.
    Close,
}

/// One supervisor the notifier thread follows (owned by that thread).
struct Watch {
    task: String,
    sup: Arc<Supervisor>,
    /// The last snapshot reported on.
    last: Arc<Snapshot>,
    /// Set by the publish hook when it sends [`Wake::Changed`], cleared by the notifier before
    /// it reads the snapshot.
    pending: Arc<AtomicBool>,
}

impl Notifier {
    pub(crate) fn new() -> Notifier {
        Notifier {
            min_level: AtomicU8::new(Level::INFO.0),
            writer: ArcSwapOption::empty(),
            closing: AtomicBool::new(false),
            watched: Mutex::new(HashMap::new()),
            thread: Mutex::new(None),
            next_key: AtomicU64::new(0),
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
        if let Some(tx) = self
            .thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            let _ = tx.send(Wake::Close);
        }
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

    /// Has the notifier thread follow `sup` (task `task`) unless it follows it already.
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
        let Some(wakes) = self.wakes(registry) else {
            return;
        };
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let pending = Arc::new(AtomicBool::new(false));
        let watch = Watch {
            task: task.to_string(),
            sup: Arc::clone(sup),
            last: sup.snapshot(),
            pending: Arc::clone(&pending),
        };
        // The watch reaches the thread before any wake-up the hook sends (one channel).
        let _ = wakes.send(Wake::Watch(key, watch));
        let hook = move || {
            if !pending.swap(true, Ordering::AcqRel) {
                let _ = wakes.send(Wake::Changed(key));
            }
        };
        if !sup.on_publish(Box::new(hook)) {
            log::debug!("task {task}: its supervisor is followed already");
        }
    }

    /// The notifier thread's queue, starting the thread with the first watch.
    fn wakes(self: &Arc<Self>, registry: &Arc<SupervisorRegistry>) -> Option<Sender<Wake>> {
        let mut thread = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tx) = thread.as_ref() {
            return Some(tx.clone());
        }
        let (tx, rx) = unbounded();
        let me = Arc::clone(self);
        let registry = Arc::clone(registry);
        let spawned = std::thread::Builder::new()
            .name("mcp-notify".into())
            .stack_size(256 * 1024)
            .spawn(move || me.follow(&registry, &rx));
        if let Err(e) = spawned {
            log::warn!("cannot start the MCP dialog notifier: {e}; dialogs are not pushed");
            return None;
        }
        *thread = Some(tx.clone());
        Some(tx)
    }

    /// The notifier thread: diffs a task's snapshot against the last one it saw whenever the
    /// task publishes, until the task's last publish or the server's shutdown.
    fn follow(&self, registry: &SupervisorRegistry, wakes: &Receiver<Wake>) {
        let mut watches: HashMap<u64, Watch> = HashMap::new();
        for wake in wakes {
            let key = match wake {
                Wake::Close => break,
                Wake::Watch(key, watch) => {
                    watches.insert(key, watch);
                    key // a publish may have come before the hook was set
                }
                Wake::Changed(key) => key,
            };
            let Some(w) = watches.get_mut(&key) else {
                continue;
            };
            // Cleared before reading: a publish from here on sends a new wake-up.
            w.pending.store(false, Ordering::Release);
            let next = w.sup.snapshot();
            let alive = w.sup.is_alive();
            if next.version != w.last.version {
                self.report_changes(&w.task, &w.last, &next, alive);
                w.last = Arc::clone(&next);
            }
            if next.state.is_final()
                && let Some(w) = watches.remove(&key)
            {
                self.ended(registry, &w.task, &w.sup, &next);
            }
        }
    }

    /// A followed supervisor published its last snapshot.
    fn ended(
        &self,
        registry: &SupervisorRegistry,
        task: &str,
        sup: &Arc<Supervisor>,
        end: &Snapshot,
    ) {
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
