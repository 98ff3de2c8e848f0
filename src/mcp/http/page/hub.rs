//! The supervisor page's live updates: one `page-hub` thread per HTTP server turns the
//! published snapshots of every task into Server-Sent Events for every open page.
//!
//! * **Off the hot paths.** The hub learns of changes from observers (`Supervisor::observe`
//!   on each task, `SupervisorRegistry::observe` for tasks that come and go), which run on the
//!   reader thread (or the registry's start/stop) and only set a flag and, when it was clear,
//!   send a wake-up on an unbounded channel: a burst of publishes costs one wake-up. The hub
//!   then reads snapshots wait-free (no lock of the supervisor's) and builds the views
//!   (`view.rs`). An idle server makes no wake-ups: the thread blocks on its channel.
//! * **One serialization per change.** A batch of changed tasks becomes one event, serialized
//!   once and shared (`Arc<[u8]>`) by every viewer's queue.
//! * **Bounded per viewer.** Each viewer (one `GET /events` connection, whose own thread
//!   writes its events with a write deadline) has a queue of [`VIEWER_QUEUE`] events. The hub
//!   only ever `try_send`s: a viewer whose queue is full (it stopped reading, or reads slower
//!   than the tasks change) is dropped at once (its connection shut), and never delays the
//!   others. Its page reconnects by itself (`EventSource`) and starts from a fresh full state.
//! * **A new viewer** gets the full state first (`"reset": true`): every task's view, built
//!   only for what changed since the last viewer left (with no viewer, nothing is built).

use std::collections::HashMap;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TrySendError, unbounded};
use serde_json::{Value, json};

use super::view;
use crate::http1;
use crate::registry::SupervisorRegistry;
use crate::supervisor::Supervisor;

/// Events a viewer may have queued before it is dropped as not reading.
pub(in crate::mcp::http) const VIEWER_QUEUE: usize = 32;

/// One event of the stream, framed as a chunk of the chunked answer.
pub(in crate::mcp::http) type Frame = Arc<[u8]>;

/// What the hub thread is told.
enum Wake {
    /// A task was published or removed: look at the registry's map again.
    Tasks,
    /// This task published.
    Changed(String),
    /// A new viewer.
    Join(Viewer),
    /// The server shuts down.
    Close,
}

/// An open page's event stream.
pub(in crate::mcp::http) struct Viewer {
    /// Its queue; the connection's thread writes what comes out.
    pub(in crate::mcp::http) queue: Sender<Frame>,
    /// Its connection, shut when it is dropped.
    pub(in crate::mcp::http) tcp: TcpStream,
}

/// The hub: its thread's channel and the thread.
pub(in crate::mcp::http) struct Hub {
    wakes: Sender<Wake>,
    /// Set by the registry's observer when it sends [`Wake::Tasks`], cleared by the hub.
    tasks_pending: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").finish_non_exhaustive()
    }
}

/// A task the hub follows (owned by its thread).
struct Followed {
    sup: Arc<Supervisor>,
    /// Set by the task's observer when it sends [`Wake::Changed`], cleared by the hub before
    /// it reads the snapshot.
    pending: Arc<AtomicBool>,
    /// The snapshot version `view` was built from; `None`: not built, or out of date.
    built: Option<u64>,
    view: Value,
}

impl Hub {
    /// Starts the hub of `registry`'s tasks.
    pub(in crate::mcp::http) fn start(registry: &Arc<SupervisorRegistry>) -> std::io::Result<Hub> {
        let (tx, rx) = unbounded();
        let tasks_pending = Arc::new(AtomicBool::new(false));
        {
            let (tx, flag) = (tx.clone(), Arc::clone(&tasks_pending));
            registry.observe(Arc::new(move || {
                if !flag.swap(true, Ordering::AcqRel) {
                    let _ = tx.send(Wake::Tasks);
                }
            }));
        }
        let thread = {
            let (registry, tx, flag) =
                (Arc::clone(registry), tx.clone(), Arc::clone(&tasks_pending));
            std::thread::Builder::new()
                .name("page-hub".into())
                .stack_size(256 * 1024)
                .spawn(move || run(&registry, &tx, &flag, &rx))?
        };
        Ok(Hub {
            wakes: tx,
            tasks_pending,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Adds a viewer: it gets the full state, then every change.
    pub(in crate::mcp::http) fn join(&self, viewer: Viewer) {
        let _ = self.wakes.send(Wake::Join(viewer));
    }

    /// Ends the hub: every viewer's queue is dropped (their connections end), the thread joined.
    pub(in crate::mcp::http) fn close(&self) {
        let _ = self.wakes.send(Wake::Close);
        self.tasks_pending.store(true, Ordering::Release);
        let thread = crate::sync::lock(&self.thread).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

/// Seconds since the Unix epoch (what the snapshots' times are in).
fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One SSE event `name` carrying `data` (one line of JSON), as one chunk.
fn frame(name: &str, data: &Value) -> Frame {
    let text = format!("event: {name}\ndata: {data}\n\n");
    Arc::from(http1::chunk(text.as_bytes()))
}

/// The hub thread (module doc).
fn run(
    registry: &SupervisorRegistry,
    wakes_tx: &Sender<Wake>,
    tasks_pending: &AtomicBool,
    wakes: &Receiver<Wake>,
) {
    let mut followed: HashMap<String, Followed> = HashMap::new();
    let mut viewers: Vec<Viewer> = Vec::new();
    let mut rescan = true;
    let mut changed: Vec<String> = Vec::new();
    loop {
        let mut joins = Vec::new();
        let mut first = if rescan { None } else { wakes.recv().ok() };
        if !rescan && first.is_none() {
            return;
        }
        while let Some(wake) = first.take().or_else(|| wakes.try_recv().ok()) {
            match wake {
                Wake::Close => return,
                Wake::Tasks => rescan = true,
                Wake::Changed(task) => changed.push(task),
                Wake::Join(v) => joins.push(v),
            }
        }
        let mut gone = Vec::new();
        if rescan {
            rescan = false;
            tasks_pending.store(false, Ordering::Release);
            let map = registry.supervisors();
            followed.retain(|task, f| {
                let keep = map.get(task).is_some_and(|s| Arc::ptr_eq(s, &f.sup));
                if !keep {
                    gone.push(task.clone());
                }
                keep
            });
            for (task, sup) in map.iter() {
                if followed.contains_key(task) {
                    continue;
                }
                let pending = Arc::new(AtomicBool::new(false));
                {
                    let (tx, flag, task) = (wakes_tx.clone(), Arc::clone(&pending), task.clone());
                    sup.observe(Arc::new(move || {
                        if !flag.swap(true, Ordering::AcqRel) {
                            let _ = tx.send(Wake::Changed(task.clone()));
                        }
                    }));
                }
                followed.insert(
                    task.clone(),
                    Followed {
                        sup: Arc::clone(sup),
                        pending,
                        built: None,
                        view: Value::Null,
                    },
                );
                // A task that was replaced is news even if nothing publishes.
                gone.retain(|t| t != task);
                changed.push(task.clone());
            }
        }
        for task in &changed {
            if let Some(f) = followed.get_mut(task) {
                // Cleared before reading: a publish from here on sends a new wake-up.
                f.pending.store(false, Ordering::Release);
            }
        }
        if viewers.is_empty() && joins.is_empty() {
            for task in changed.drain(..) {
                if let Some(f) = followed.get_mut(&task) {
                    f.built = None;
                }
            }
            continue;
        }
        let mut updated = Vec::new();
        changed.sort_unstable();
        changed.dedup();
        for task in changed.drain(..) {
            if let Some(f) = followed.get_mut(&task)
                && build(f)
            {
                updated.push(f.view.clone());
            }
        }
        if !updated.is_empty() || !gone.is_empty() {
            let event = frame(
                "tasks",
                &json!({"now": now(), "tasks": updated, "gone": gone}),
            );
            broadcast(&mut viewers, &event);
        }
        if !joins.is_empty() {
            let mut all: Vec<&mut Followed> = followed.values_mut().collect();
            all.sort_by(|a, b| a.sup.task_id().cmp(b.sup.task_id()));
            let views: Vec<Value> = all
                .into_iter()
                .map(|f| {
                    build(f);
                    f.view.clone()
                })
                .collect();
            let event = frame(
                "tasks",
                &json!({"now": now(), "reset": true, "tasks": views}),
            );
            let mut joined: Vec<Viewer> = joins;
            broadcast(&mut joined, &event);
            viewers.extend(joined);
        }
    }
}

/// Builds `f`'s view from its latest snapshot unless it is up to date: true when it changed.
fn build(f: &mut Followed) -> bool {
    let snap = f.sup.snapshot();
    if f.built == Some(snap.version) {
        return false;
    }
    f.view = view::task(&f.sup, &snap);
    f.built = Some(snap.version);
    true
}

/// Queues `event` for every viewer; drops (and shuts) a viewer whose queue is full or whose
/// connection has ended.
fn broadcast(viewers: &mut Vec<Viewer>, event: &Frame) {
    viewers.retain(|v| match v.queue.try_send(Arc::clone(event)) {
        Ok(()) => true,
        Err(TrySendError::Full(_)) => {
            log::debug!("supervisor page: a viewer stopped reading; it is dropped");
            let _ = v.tcp.shutdown(Shutdown::Both);
            false
        }
        Err(TrySendError::Disconnected(_)) => false,
    });
}
