//! The supervisor page's live updates: one `page-hub` thread per HTTP server turns the
//! published snapshots of every task into Server-Sent Events for every open page.
//!
//! * **Off the hot paths.** The hub learns of changes from observers (`Supervisor::observe`
//!   on each task, `SupervisorRegistry::observe` for tasks that come and go), which run on the
//!   reader thread (or the registry's start/stop) and only set a flag and, when it was clear,
//!   send a wake-up on an unbounded channel: a burst of publishes costs one wake-up. The hub
//!   then reads snapshots wait-free (no lock of the supervisor's) and builds the views
//!   (`view.rs`). An idle server makes no wake-ups: the thread blocks on its channel, with a
//!   deadline only while a coalesced change waits.
//! * **Only what changed.** Every viewer holds the same state: each task's view as last sent
//!   (`Followed::sent`). A new viewer gets all of it once (`"reset": true`); then an event
//!   carries, per task, only the fields whose value changed ([`delta`]), with `task_id` and
//!   `version`. A list goes as its new items (objects) and, for the items the page already
//!   holds, their indexes in its current list ([`list_delta`]): `[{..}, 0, 1]` is one new
//!   item before the two the page had. A publish that changes nothing shown sends nothing,
//!   and a task whose snapshot version did not move is not even built again.
//! * **Coalescing.** A task's changes within [`COALESCE`] of the last event that carried it go
//!   out together at that event's time plus [`COALESCE`]: a task that publishes 100 times a
//!   second costs 10 events. The first change after a quiet spell and a change that brings a
//!   new pending dialog go at once (what a person is waiting for).
//! * **One serialization per event.** An event is serialized once and shared (`Arc<[u8]>`) by
//!   every viewer's queue.
//! * **Bounded per viewer.** Each viewer (one `GET /events` connection, whose own thread
//!   writes its events with a write deadline) has a queue of [`VIEWER_QUEUE`] events. The hub
//!   only ever `try_send`s: a viewer whose queue is full (it stopped reading, or reads slower
//!   than the tasks change) is dropped at once (its connection shut), and never delays the
//!   others. Its page reconnects by itself (`EventSource`) and starts from a fresh full state.
//! * With no viewer nothing is built and nothing is kept of what was sent.

use std::collections::HashMap;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError, bounded, unbounded};
use serde_json::{Map, Value, json};

use super::view;
use crate::http1;
use crate::registry::SupervisorRegistry;
use crate::supervisor::Supervisor;

/// Events a viewer may have queued before it is dropped as not reading.
const VIEWER_QUEUE: usize = 32;

/// How long after an event that carried a task its next changes wait, to go together.
const COALESCE: Duration = Duration::from_millis(100);

/// How long an open page's stream may be silent before a comment is written (which finds a
/// page that has gone, and keeps proxies from closing the stream).
const EVENTS_KEEPALIVE: Duration = Duration::from_secs(20);

/// One event of the stream, framed as a chunk of the chunked answer.
type Frame = Arc<[u8]>;

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
struct Viewer {
    /// Its queue; the connection's thread writes what comes out.
    queue: Sender<Frame>,
    /// Its connection, shut when it is dropped.
    tcp: TcpStream,
}

/// The hub: its thread's channel and the thread.
pub(crate) struct Hub {
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
    view: Map<String, Value>,
    /// The view as every viewer holds it (`None`: not sent, or no viewer).
    sent: Option<Map<String, Value>>,
    /// When the last event that carried this task went out.
    last_event: Option<Instant>,
    /// A change waits to go out at this time (coalescing).
    due: Option<Instant>,
}

impl Hub {
    /// Starts the hub of `registry`'s tasks.
    pub(crate) fn start(registry: &Arc<SupervisorRegistry>) -> std::io::Result<Hub> {
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
                .spawn(move || {
                    let mut hub = State {
                        registry: &registry,
                        wakes_tx: &tx,
                        tasks_pending: &flag,
                        followed: HashMap::new(),
                        viewers: Vec::new(),
                        changed: Vec::new(),
                    };
                    hub.run(&rx);
                })?
        };
        Ok(Hub {
            wakes: tx,
            tasks_pending,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Serves one viewer whose connection is `tcp` (the stream's head written): the full
    /// state, then every change, each event written by `send`, until a write fails, the hub
    /// drops the viewer (it fell behind: its connection is shut) or the hub closes.
    pub(crate) fn stream(&self, tcp: TcpStream, mut send: impl FnMut(&[u8]) -> bool) {
        let (queue, frames) = bounded(VIEWER_QUEUE);
        let _ = self.wakes.send(Wake::Join(Viewer { queue, tcp }));
        loop {
            let frame = match frames.recv_timeout(EVENTS_KEEPALIVE) {
                Ok(frame) => frame,
                Err(RecvTimeoutError::Timeout) => http1::chunk(b": keep-alive\n\n").into(),
                Err(RecvTimeoutError::Disconnected) => return,
            };
            if !send(&frame) {
                return;
            }
        }
    }

    /// Ends the hub: every viewer's queue is dropped (their connections end), the thread joined.
    pub(crate) fn close(&self) {
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

/// The hub thread's state.
struct State<'a> {
    registry: &'a SupervisorRegistry,
    wakes_tx: &'a Sender<Wake>,
    tasks_pending: &'a AtomicBool,
    followed: HashMap<String, Followed>,
    viewers: Vec<Viewer>,
    /// Tasks that published since they were last looked at.
    changed: Vec<String>,
}

impl State<'_> {
    /// The hub thread (module doc).
    fn run(&mut self, wakes: &Receiver<Wake>) {
        let mut rescan = true;
        loop {
            let mut joins = Vec::new();
            let mut first = None;
            if !rescan {
                // Blocks with no deadline unless a coalesced change waits.
                let due = self.followed.values().filter_map(|f| f.due).min();
                first = match due.map(|d| wakes.recv_deadline(d)) {
                    Some(Ok(wake)) => Some(wake),
                    Some(Err(RecvTimeoutError::Timeout)) => None,
                    Some(Err(RecvTimeoutError::Disconnected)) => return,
                    None => match wakes.recv() {
                        Ok(wake) => Some(wake),
                        Err(_) => return,
                    },
                };
            }
            while let Some(wake) = first.take().or_else(|| wakes.try_recv().ok()) {
                match wake {
                    Wake::Close => return,
                    Wake::Tasks => rescan = true,
                    Wake::Changed(task) => self.changed.push(task),
                    Wake::Join(v) => joins.push(v),
                }
            }
            let gone = if std::mem::take(&mut rescan) {
                self.rescan()
            } else {
                Vec::new()
            };
            for task in &self.changed {
                if let Some(f) = self.followed.get_mut(task) {
                    // Cleared before reading: a publish from here on sends a new wake-up.
                    f.pending.store(false, Ordering::Release);
                }
            }
            if self.viewers.is_empty() && joins.is_empty() {
                self.changed.clear();
                for f in self.followed.values_mut() {
                    (f.built, f.sent, f.due, f.last_event) = (None, None, None, None);
                }
                continue;
            }
            self.send_changes(gone);
            if !joins.is_empty() {
                self.welcome(joins);
            }
        }
    }

    /// Follows the tasks of the registry's map: new ones are news, gone ones are returned.
    fn rescan(&mut self) -> Vec<String> {
        self.tasks_pending.store(false, Ordering::Release);
        let map = self.registry.supervisors();
        let mut gone = Vec::new();
        self.followed.retain(|task, f| {
            let keep = map.get(task).is_some_and(|s| Arc::ptr_eq(s, &f.sup));
            if !keep {
                gone.push(task.clone());
            }
            keep
        });
        for (task, sup) in map.iter() {
            if self.followed.contains_key(task) {
                continue;
            }
            let pending = Arc::new(AtomicBool::new(false));
            {
                let (tx, flag, task) = (self.wakes_tx.clone(), Arc::clone(&pending), task.clone());
                sup.observe(Arc::new(move || {
                    if !flag.swap(true, Ordering::AcqRel) {
                        let _ = tx.send(Wake::Changed(task.clone()));
                    }
                }));
            }
            self.followed.insert(
                task.clone(),
                Followed {
                    sup: Arc::clone(sup),
                    pending,
                    built: None,
                    view: Map::new(),
                    sent: None,
                    last_event: None,
                    due: None,
                },
            );
            // A task that was replaced is news (sent in full) even if nothing publishes.
            gone.retain(|t| t != task);
            self.changed.push(task.clone());
        }
        gone
    }

    /// Sends the changes that are due (module doc: coalescing), and the tasks `gone`.
    fn send_changes(&mut self, gone: Vec<String>) {
        let at = Instant::now();
        let mut changed = std::mem::take(&mut self.changed);
        changed.sort_unstable();
        changed.dedup();
        for task in changed {
            if let Some(f) = self.followed.get_mut(&task) {
                let later = f.last_event.map_or(at, |t| t + COALESCE);
                let at_once = later <= at || f.sent.is_none() || new_dialog(f);
                f.due = Some(if at_once { at } else { f.due.unwrap_or(later) });
            }
        }
        let mut updated = Vec::new();
        let mut ready: Vec<(&String, &mut Followed)> = self
            .followed
            .iter_mut()
            .filter(|(_, f)| f.due.is_some_and(|d| d <= at))
            .collect();
        ready.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (_, f) in ready {
            f.due = None;
            build(f);
            let change = match &f.sent {
                Some(sent) => delta(sent, &f.view),
                None => Some(f.view.clone()),
            };
            if let Some(change) = change {
                f.sent = Some(f.view.clone());
                f.last_event = Some(at);
                updated.push(Value::Object(change));
            }
        }
        if !updated.is_empty() || !gone.is_empty() {
            let event = frame(
                "tasks",
                &json!({"now": now(), "tasks": updated, "gone": gone}),
            );
            broadcast(&mut self.viewers, &event);
        }
    }

    /// Sends new viewers the full state (every task as the others hold it), then has them
    /// follow.
    fn welcome(&mut self, mut joins: Vec<Viewer>) {
        let mut all: Vec<(&String, &mut Followed)> = self.followed.iter_mut().collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let views: Vec<Value> = all
            .into_iter()
            .map(|(_, f)| {
                if f.sent.is_none() {
                    build(f);
                    f.sent = Some(f.view.clone());
                }
                Value::Object(f.sent.clone().unwrap_or_default())
            })
            .collect();
        let event = frame(
            "tasks",
            &json!({"now": now(), "reset": true, "tasks": views}),
        );
        broadcast(&mut joins, &event);
        self.viewers.extend(joins);
    }
}

/// Whether `f`'s task has a pending dialog its viewers were not sent yet.
fn new_dialog(f: &Followed) -> bool {
    let shown = f
        .sent
        .as_ref()
        .and_then(|s| s.get("pending"))
        .and_then(Value::as_array);
    f.sup.snapshot().pending_dialogs.iter().any(|d| {
        !shown.is_some_and(|p| {
            p.iter()
                .any(|s| s.get("id").and_then(Value::as_str) == Some(&d.id))
        })
    })
}

/// Builds `f`'s view from its latest snapshot unless it is up to date.
fn build(f: &mut Followed) {
    let snap = f.sup.snapshot();
    if f.built == Some(snap.version) {
        return;
    }
    if let Value::Object(view) = view::task(&f.sup, &snap) {
        f.view = view;
    }
    f.built = Some(snap.version);
}

/// Fields that are sent along with a change but are no change by themselves.
const ALONG: [&str; 2] = ["task_id", "version"];

/// What a page that holds `old` of a task must be sent to hold `new`: the fields whose value
/// changed (a list as [`list_delta`]), with `task_id` and `version`; `None` when nothing shown
/// changed.
pub(super) fn delta(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
) -> Option<Map<String, Value>> {
    let mut out = Map::new();
    for (key, value) in new {
        if ALONG.contains(&key.as_str()) || old.get(key) == Some(value) {
            continue;
        }
        let sent = match (old.get(key), value) {
            (Some(Value::Array(was)), Value::Array(now)) => list_delta(was, now),
            _ => value.clone(),
        };
        out.insert(key.clone(), sent);
    }
    if out.is_empty() {
        return None;
    }
    for key in ALONG {
        if let Some(v) = new.get(key) {
            out.insert(key.to_string(), v.clone());
        }
    }
    Some(out)
}

/// `now` for a page that holds `was`: each item the page has (equal to one of `was`) as its
/// index there, each other one in full. An index is used once.
pub(super) fn list_delta(was: &[Value], now: &[Value]) -> Value {
    let mut used = vec![false; was.len()];
    let items = now
        .iter()
        .map(|item| {
            let held = (0..was.len()).find(|&i| !used[i] && was[i] == *item);
            match held {
                Some(i) => {
                    used[i] = true;
                    Value::from(i)
                }
                None => item.clone(),
            }
        })
        .collect();
    Value::Array(items)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object: {v}"),
        }
    }

    #[test]
    fn a_list_is_sent_as_its_new_items_and_the_indexes_of_those_the_page_has() {
        let a = json!({"id": "d-1", "message": "a"});
        let b = json!({"id": "d-2", "message": "b"});
        let c = json!({"id": "d-3", "message": "c"});
        assert_eq!(
            list_delta(&[a.clone(), b.clone()], &[c.clone(), a.clone()]),
            json!([c, 0])
        );
        // Equal items each take their own index; one the page lacks goes in full.
        let (x, y) = (json!(1), json!(2));
        assert_eq!(
            list_delta(&[x.clone(), y.clone()], &[y.clone(), x.clone(), x.clone()]),
            json!([1, 0, 1])
        );
        let old = map(json!({"task_id": "t", "version": 3, "state": "active",
                             "recent": [a.clone()], "held_since": null}));
        let new = map(json!({"task_id": "t", "version": 4, "state": "active",
                             "recent": [b.clone(), a.clone()], "held_since": null}));
        assert_eq!(
            Value::Object(delta(&old, &new).unwrap()),
            json!({"task_id": "t", "version": 4, "recent": [b, 0]}),
            "only the changed field, with the task and its version"
        );
        // A new version that changes nothing shown sends nothing.
        let mut same = old.clone();
        same.insert("version".into(), json!(9));
        assert_eq!(delta(&old, &same), None);
        // A field that changed from a list to nothing goes whole.
        let mut blocked = old.clone();
        blocked.insert("held_since".into(), json!(12.5));
        assert_eq!(
            Value::Object(delta(&old, &blocked).unwrap()),
            json!({"task_id": "t", "version": 3, "held_since": 12.5})
        );
    }
}
