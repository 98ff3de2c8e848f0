//! What the server tells a client without being asked: the events of its tasks (a dialog
//! opened or closed without the agent, the connection lost or back, the page blocked, the
//! supervisor started or ended), and where each generation of the protocol receives them.
//!
//! * **Legacy** sessions (after `initialize`) get `notifications/message` at or above the level
//!   `logging/setLevel` set (default `info`), on the output its `initialize` came with
//!   ([`Notifier::add_legacy_output`]: stdio's one output; HTTP sessions have none).
//! * **2026-07-28** has no standing log channel: `notifications/message` only answers a request
//!   that opted in with `_meta["io.modelcontextprotocol/logLevel"]`, before its response, about
//!   what happened to its task during it (`changes::request_log`, used by `Engine::tool_call`).
//!   Events are pushed the 2026-07-28 way, as `notifications/resources/updated` of the task's
//!   resource (`cdp-supervisor://tasks/{task_id}`, see `resources`) on the
//!   `subscriptions/listen` streams that asked for it (`listen`), with the event in our `_meta`
//!   key.
//!
//! The server adds no thread per task (issue 24): each connected supervisor gets a publish hook
//! (`Supervisor::on_publish`) that, run on its reader thread, puts the task's key on one
//! unbounded channel (at most once until the notifier has looked: a flag per task coalesces a
//! burst of publishes). The one `mcp-notify` thread, started with the first watch, blocks on
//! that channel (no polling; idle tasks cost no wake-ups), diffs the task's new snapshot against
//! the last one it saw ([`changes`]) and publishes what an agent should hear about. A task is
//! forgotten after its last publish (`stopped`, `dead`).

use crate::sync;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, unbounded};

use super::changes::changes;
use super::events::{Event, Level};
use super::listen::Listens;
use super::{LegacySession, Sink};
use crate::quote::quoted;
use crate::registry::SupervisorRegistry;
use crate::snapshot::Snapshot;
use crate::supervisor::Supervisor;

/// A legacy session that receives `notifications/message`, and its output.
type LegacyOutput = (Arc<LegacySession>, Arc<dyn Sink>);

/// Where events go, and the watchers that produce them (module doc).
#[derive(Default)]
pub(crate) struct Notifier {
    /// Set at shutdown: nothing is sent from then on.
    closing: AtomicBool,
    /// Task id -> the supervisor its watcher follows (so one supervisor gets one watcher).
    /// Written by `watch` (worker threads) and by each watcher as it ends.
    watched: Mutex<HashMap<String, Arc<Supervisor>>>,
    /// The legacy sessions that receive `notifications/message`, each with its output.
    /// Written by `initialize` (and the HTTP transport's sessions), read by every event.
    legacy: Mutex<Vec<LegacyOutput>>,
    /// The open `subscriptions/listen` streams.
    listens: Listens,
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

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("closing", &self.closing)
            .field("listens", &self.listens)
            .finish_non_exhaustive()
    }
}

impl Notifier {
    /// The open `subscriptions/listen` streams.
    pub(crate) fn listens(&self) -> &Listens {
        &self.listens
    }

    /// From now on `session` receives `notifications/message` on `out` (once per session).
    pub(crate) fn add_legacy_output(&self, session: &Arc<LegacySession>, out: Arc<dyn Sink>) {
        let mut legacy = sync::lock(&self.legacy);
        if !legacy.iter().any(|(s, _)| Arc::ptr_eq(s, session)) {
            legacy.push((Arc::clone(session), out));
        }
    }

    /// Nothing is sent from now on (shutdown); open listen streams end gracefully first.
    pub(crate) fn close(&self) {
        self.listens.end_all();
        self.closing.store(true, Ordering::Release);
        sync::lock(&self.watched).clear();
        sync::lock(&self.legacy).clear();
        if let Some(tx) = sync::lock(&self.thread).as_ref() {
            let _ = tx.send(Wake::Close);
        }
    }

    /// Tells every legacy session that wants it (`logged` events at or above its level) and
    /// every listener of `task`.
    pub(crate) fn publish(&self, task: &str, events: &[Event]) {
        if events.is_empty() || self.closing.load(Ordering::Acquire) {
            return;
        }
        {
            let mut legacy = sync::lock(&self.legacy);
            legacy.retain(|(session, out)| {
                events
                    .iter()
                    .filter(|e| e.logged && e.level >= session.min_level())
                    .all(|e| out.send_line(e.log_line()))
            });
        }
        self.listens.push(task, events);
    }

    /// Has the notifier thread follow `sup` (task `task`) unless it follows it already; a new
    /// watch tells the task's listeners that it is connected.
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
            let mut w = sync::lock(&self.watched);
            if w.get(task).is_some_and(|s| Arc::ptr_eq(s, sup)) {
                return;
            }
            w.insert(task.to_string(), Arc::clone(sup));
        }
        let message = format!("task {} is connected to its page", quoted(task));
        let connected = Event::new(Level::INFO, "connected", task, message).unlogged();
        self.publish(task, &[connected]);
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
        let mut thread = sync::lock(&self.thread);
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
            if next.state.is_final() {
                if let Some(w) = watches.remove(&key) {
                    self.ended(registry, &w, &next);
                }
            } else if next.version != w.last.version {
                let alive = w.sup.is_alive();
                self.publish(&w.task, &changes(&w.task, &w.last, &next, alive));
                w.last = next;
            }
        }
    }

    /// A followed supervisor published its last snapshot, `end`.
    fn ended(&self, registry: &SupervisorRegistry, w: &Watch, end: &Snapshot) {
        let (task, sup) = (w.task.as_str(), &w.sup);
        let mut events = changes(task, &w.last, end, false);
        // Stopped on purpose (disconnect, rebind, shutdown): the registry no longer has it.
        let died = registry.get(task).is_some_and(|s| Arc::ptr_eq(&s, sup));
        let t = quoted(task);
        if died {
            let reason = end.disconnect_reason.as_deref().unwrap_or("unknown reason");
            let message = format!(
                "the supervisor of task {t} ended ({reason}); call browser_connect to start a new one"
            );
            events.push(
                Event::new(Level::ERROR, "supervisor_ended", task, message).with("reason", reason),
            );
        } else {
            let message = format!("the supervisor of task {t} was stopped");
            events.push(Event::new(Level::INFO, "supervisor_stopped", task, message).unlogged());
        }
        self.publish(task, &events);
        let mut watched = sync::lock(&self.watched);
        if watched.get(task).is_some_and(|s| Arc::ptr_eq(s, sup)) {
            watched.remove(task);
        }
    }
}
