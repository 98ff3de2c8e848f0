//! [`SupervisorRegistry::cdp_proxy`] (issue 30 point 1, `cdp-supervisor proxy`): a path of the
//! registry's listener whose every client becomes a task of its own.
//!
//! A client that upgrades at the proxy's `ws://…/<token>/devtools/browser/<id>` gets a task
//! `client-N` (N counting from 1) started on the proxy's browser on a new page of its own
//! (`StartOptions::own_page`), and is then served as any client of that task is
//! (`client.rs`). When the client leaves, its task stops (its page closed). A thread per task
//! follows its snapshots and reports its dialogs; every report is a [`ProxyEvent`] handed to
//! the caller's callback, on the client's threads (never on a supervisor's reader).
//!
//! `/json/version` answers before any client: the browser's own `/json/version` is asked once
//! when the proxy starts (a `ws://` or `http://` URL; later, a task's `Browser.getVersion` when
//! that failed), its fields kept, its `webSocketDebuggerUrl` the proxy's. `/json/list` is
//! empty: each client sees its own task, and a discovery request is no client.
//!
//! [`CdpProxy::close`] (also on drop) refuses new clients, closes every client with 1001 and
//! the reason ("the proxy is shutting down", or the caller's: [`CdpProxy::close_because`]),
//! stops their tasks and waits (at most [`CLOSE_WAIT`]) until each has reported
//! `task_stopped`.

use std::collections::HashSet;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use serde_json::{Value, json};

use super::{CdpEndpoint, Listener, client, lock};
use crate::config::StartOptions;
use crate::deadline::Deadline;
use crate::error::Error;
use crate::registry::SupervisorRegistry;
use crate::snapshot::{ClosedDialog, PendingDialog, SupervisorState};
use crate::supervisor::{StartRequest, Supervisor};

/// How long [`CdpProxy::close`] waits for its clients' tasks to stop.
pub const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// What a proxy's clients are told when it closes for no reason of the browser's.
const SHUTTING_DOWN: &str = "the proxy is shutting down";

/// How long asking the browser's `/json/version` may take at start.
const VERSION_TIMEOUT: Duration = Duration::from_secs(3);

/// What happened to a proxy's tasks: one JSON line each for `cdp-supervisor proxy`
/// ([`ProxyEvent::to_json`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ProxyEvent {
    /// A client connected and its task started.
    TaskStarted {
        /// `client-N`.
        task_id: String,
        /// The client's address.
        client: String,
        /// The task's new page.
        page_target_id: Option<String>,
    },
    /// A dialog opened in a task's pages.
    DialogOpened {
        /// The task.
        task_id: String,
        /// The dialog, as the snapshot shows it.
        dialog: PendingDialog,
    },
    /// A dialog closed (its `closed_by` says who closed it: `client` for a proxied client).
    DialogClosed {
        /// The task.
        task_id: String,
        /// The dialog and how it closed.
        dialog: Arc<ClosedDialog>,
    },
    /// A task stopped: its client left, the proxy closed (its reason), or its connection ended.
    TaskStopped {
        /// The task.
        task_id: String,
        /// Why, for a person.
        reason: String,
    },
}

impl ProxyEvent {
    /// `{"event": "task_started" | "dialog_opened" | "dialog_closed" | "task_stopped",
    /// "task_id": …, …}`: a dialog as the snapshot's JSON shows it (SPEC §10).
    pub fn to_json(&self) -> Value {
        match self {
            ProxyEvent::TaskStarted {
                task_id,
                client,
                page_target_id,
            } => json!({
                "event": "task_started",
                "task_id": task_id,
                "client": client,
                "page_target_id": page_target_id,
            }),
            ProxyEvent::DialogOpened { task_id, dialog } => json!({
                "event": "dialog_opened",
                "task_id": task_id,
                "dialog": dialog.to_json(),
            }),
            ProxyEvent::DialogClosed { task_id, dialog } => json!({
                "event": "dialog_closed",
                "task_id": task_id,
                "dialog": dialog.to_json(),
                "closed_by": dialog.closed_by.as_str(),
            }),
            ProxyEvent::TaskStopped { task_id, reason } => json!({
                "event": "task_stopped",
                "task_id": task_id,
                "reason": reason,
            }),
        }
    }
}

/// The caller's callback: called on the proxy's threads, one event at a time per task.
type Events = Box<dyn Fn(&ProxyEvent) + Send + Sync>;

/// The proxy's state, shared by its listener path and its clients' threads.
pub(crate) struct Proxy {
    registry: Weak<SupervisorRegistry>,
    cdp_url: String,
    events: Events,
    next: AtomicU64,
    closing: AtomicBool,
    /// Why it closes, once it does: the clients' close reason, and their tasks'.
    close_reason: Mutex<String>,
    /// The browser's `/json/version` fields, once known.
    version: Mutex<Option<Value>>,
    /// Each client's thread holds a clone; [`CdpProxy::close`] drops this one and waits on
    /// `done` until every clone is gone.
    open: Mutex<Option<Sender<()>>>,
    done: Receiver<()>,
    /// The tasks of connected clients.
    tasks: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("cdp_url", &crate::redact::redact_url(&self.cdp_url))
            .finish_non_exhaustive()
    }
}

/// A client's task while it runs.
pub(super) struct Task {
    pub(super) sup: Arc<Supervisor>,
    /// Held until the task has stopped and said so.
    _open: Sender<()>,
}

impl Proxy {
    /// Starts `client-N` for a client at `peer` that is upgrading (before it is answered).
    pub(super) fn start_task(&self, peer: SocketAddr) -> Result<Task, Error> {
        let closed = || Error::InvalidArgument("the proxy is closing".into());
        let open = lock(&self.open).clone().ok_or_else(closed)?;
        let registry = self.registry.upgrade().ok_or_else(closed)?;
        let task_id = format!("client-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        log::info!("proxy: client {peer} gets task {task_id}");
        let request = StartRequest::new(&task_id, &self.cdp_url)
            .with_options(StartOptions::default().with_own_page(true));
        let sup = registry.start(request)?;
        lock(&self.tasks).insert(task_id.clone());
        if self.closing.load(Ordering::Acquire) {
            self.end(&registry, &task_id);
            return Err(closed());
        }
        Ok(Task { sup, _open: open })
    }

    /// Serves the upgraded client of `task` (`upgraded`: the 101 was written) until it leaves,
    /// then stops its task; reports all of it.
    pub(super) fn run_client(
        self: &Arc<Self>,
        task: Task,
        upgraded: bool,
        tcp: TcpStream,
        leftover: Vec<u8>,
        peer: SocketAddr,
    ) {
        let sup = Arc::clone(&task.sup);
        let task_id = sup.task_id().to_string();
        (self.events)(&ProxyEvent::TaskStarted {
            task_id: task_id.clone(),
            client: peer.to_string(),
            page_target_id: sup.with_snapshot(|s| s.page_target_id.clone()),
        });
        let watcher = {
            let (me, sup) = (Arc::clone(self), Arc::clone(&sup));
            std::thread::Builder::new()
                .name("cdp-proxy-dialogs".into())
                .stack_size(256 * 1024)
                .spawn(move || me.report_dialogs(&sup))
        };
        if upgraded {
            client::run(&sup, tcp, leftover, peer, None);
        }
        let reason = match sup.state() {
            _ if self.closing.load(Ordering::Acquire) => lock(&self.close_reason).clone(),
            SupervisorState::Dead { reason } => format!("the task's supervisor ended: {reason}"),
            SupervisorState::Stopped => "the task was stopped".to_string(),
            _ => "the client left".to_string(),
        };
        if let Some(registry) = self.registry.upgrade() {
            self.end(&registry, &task_id);
        } else {
            sup.stop();
        }
        if let Ok(w) = watcher {
            let _ = w.join();
        }
        (self.events)(&ProxyEvent::TaskStopped { task_id, reason });
        drop(task);
    }

    /// Stops `task_id` and forgets it.
    fn end(&self, registry: &SupervisorRegistry, task_id: &str) {
        registry.stop(task_id);
        lock(&self.tasks).remove(task_id);
    }

    /// Reports the dialogs of `sup` as they open and close, until its last snapshot.
    fn report_dialogs(&self, sup: &Supervisor) {
        let task_id = sup.task_id().to_string();
        let (mut opened, mut closed) = (HashSet::new(), HashSet::new());
        loop {
            let snap = sup.snapshot();
            let fresh_closed: Vec<&Arc<ClosedDialog>> = snap
                .recent_dialogs
                .iter()
                .filter(|c| closed.insert(c.dialog.id.clone()))
                .collect();
            // A dialog that opened and closed between two looks is reported as both.
            let open_now = snap.pending_dialogs.iter();
            let seen_closing = fresh_closed.iter().map(|c| &c.dialog);
            for d in seen_closing.chain(open_now) {
                if opened.insert(d.id.clone()) {
                    (self.events)(&ProxyEvent::DialogOpened {
                        task_id: task_id.clone(),
                        dialog: d.clone(),
                    });
                }
            }
            for c in fresh_closed {
                (self.events)(&ProxyEvent::DialogClosed {
                    task_id: task_id.clone(),
                    dialog: Arc::clone(c),
                });
            }
            if snap.state.is_final() {
                return;
            }
            let v = snap.version;
            // Wakes at the next publish (the last one included); an hour only bounds the wait.
            sup.wait_for(Duration::from_secs(3600), |s| s.version != v);
        }
    }

    /// The browser's `/json/version` fields: kept from the first answer (the browser's own
    /// discovery, else a running task's `Browser.getVersion`); empty strings until one came.
    pub(super) fn version(&self) -> Value {
        if let Some(v) = lock(&self.version).clone() {
            return v;
        }
        let asked =
            crate::endpoint::browser_version(&self.cdp_url, Deadline::after(VERSION_TIMEOUT))
                .ok()
                .or_else(|| {
                    let registry = self.registry.upgrade()?;
                    let task = lock(&self.tasks).iter().next().cloned()?;
                    let sup = registry.get(&task)?;
                    Some(super::http::task_version(&sup))
                })
                .filter(|v| {
                    v.get("Browser")
                        .and_then(Value::as_str)
                        .is_some_and(|b| !b.is_empty())
                });
        match asked {
            Some(v) => {
                *lock(&self.version) = Some(v.clone());
                v
            }
            None => json!({}),
        }
    }
}

/// A running proxy ([`SupervisorRegistry::cdp_proxy`]): its URLs, and its close. Dropping it
/// closes it.
#[derive(Debug)]
pub struct CdpProxy {
    endpoint: CdpEndpoint,
    token: String,
    proxy: Arc<Proxy>,
    listener: Weak<Listener>,
}

impl CdpProxy {
    /// Where clients connect: `ws_url` as to a browser, or `http_url` for discovery.
    pub fn endpoint(&self) -> &CdpEndpoint {
        &self.endpoint
    }

    /// Refuses new clients, closes every client with 1001 and the reason `the proxy is shutting
    /// down`, stops their tasks, and waits (at most 5 s, `CLOSE_WAIT`) until each task has
    /// stopped and been reported. Idempotent.
    pub fn close(&self) {
        self.close_because(SHUTTING_DOWN);
    }

    /// [`CdpProxy::close`], telling the clients `reason` (cut to the 123 bytes a close frame
    /// carries; also each task's `task_stopped` reason). Only the first close says why.
    pub fn close_because(&self, reason: &str) {
        let p = &self.proxy;
        {
            // Set before `closing`: whoever sees it closing reads this reason.
            let mut why = lock(&p.close_reason);
            if p.closing.load(Ordering::Acquire) {
                return;
            }
            *why = reason.to_string();
            p.closing.store(true, Ordering::Release);
        }
        drop(lock(&p.open).take());
        let tasks: Vec<String> = lock(&p.tasks).iter().cloned().collect();
        if let Some(registry) = p.registry.upgrade() {
            for task in tasks {
                // The mux made if its client has not come to it yet: the client then gets this
                // close when it does (`Mux::join`).
                if let Some(m) = registry.get(&task).and_then(|s| client::mux_for(&s)) {
                    m.close_all(1001, reason);
                }
                registry.stop(&task);
            }
        }
        let until = Instant::now() + CLOSE_WAIT;
        loop {
            match p.done.recv_deadline(until) {
                Ok(()) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    log::warn!("proxy: clients still connected after {CLOSE_WAIT:?}");
                    break;
                }
            }
        }
        if let Some(l) = self.listener.upgrade() {
            l.remove(&self.token);
        }
    }
}

impl Drop for CdpProxy {
    fn drop(&mut self) {
        self.close();
    }
}

impl SupervisorRegistry {
    /// Serves the browser at `cdp_url` through a path of this registry's CDP endpoint
    /// (`[endpoint] listen`) where every client that connects becomes a task of its own,
    /// `client-N`, on a new page of its own, stopped when the client leaves (module
    /// `cdp_endpoint::proxy`). `events` hears of each task and each of its dialogs, on the
    /// proxy's threads (it should not block long). The URLs carry a secret token.
    pub fn cdp_proxy(
        self: &Arc<Self>,
        cdp_url: &str,
        events: impl Fn(&ProxyEvent) + Send + Sync + 'static,
    ) -> Result<CdpProxy, Error> {
        crate::config::Config::default().with_cdp_url(cdp_url)?;
        let listener = self.endpoint_listener()?;
        let (open, done) = bounded(0);
        let proxy = Arc::new(Proxy {
            registry: Arc::downgrade(self),
            cdp_url: cdp_url.to_string(),
            events: Box::new(events),
            next: AtomicU64::new(0),
            closing: AtomicBool::new(false),
            close_reason: Mutex::new(String::new()),
            version: Mutex::new(None),
            open: Mutex::new(Some(open)),
            done,
            tasks: Mutex::new(HashSet::new()),
        });
        // Asked now, so that discovery answers before the first client.
        proxy.version();
        let (token, endpoint) = listener.add_proxy(&proxy)?;
        Ok(CdpProxy {
            endpoint,
            token,
            proxy,
            listener: Arc::downgrade(&listener),
        })
    }
}
