//! One popup watcher per browser (issue 24): the registry's tasks follow their popups without
//! each turning on browser-level auto-attach.
//!
//! Browser-level `Target.setAutoAttach {waitForDebuggerOnStart: true}` is the only way Chromium
//! offers to catch a new page before its first script (`crate::core::pages`), and it hands the
//! connection every page the browser holds at once, then every new page, paused until that
//! connection resumes it. One per task made each connect cost O(pages) and held every new tab
//! until each of N tasks had resumed it. Measured on Chromium 156 (`tests/it/measure_fleet.rs`):
//! * `Target.autoAttachRelated {targetId: <the task's page>, waitForDebuggerOnStart}` never
//!   reports a popup (0 of 20: `window.open` with and without `noopener`, `target=_blank` with
//!   and without `rel=noopener`, a written `about:blank`); page-level `setAutoAttach` with a
//!   `page` filter does not either (issue 14), and a browser-level filter only narrows by type:
//!   every page is still attached;
//! * a page held paused by one connection can be attached by another, which then sends
//!   `Page.enable` and the rest; once a browser-level round trip on that second connection has
//!   come back (the browser handles one connection's messages in order, so the set-up has been
//!   dispatched), the first resumes and detaches, and the page's first script is seen by the
//!   second (20 of 20, the five kinds above; the hand-off held the page 22–36 ms).
//!
//! So one [`Watcher`] per browser URL, with a connection and a thread of its own, has
//! browser-level auto-attach. A new page whose opener (`openerId`, else the page owning
//! `openerFrameId`) is a page of one of its tasks (that task's page or a page it follows, by its
//! published snapshot) is handed to that task: a short-lived thread has the task's connection
//! attach to it (its reader sets the page up exactly as if its own auto-attach had handed it
//! over: `Core::browser_target_attached`), waits for a browser-level round trip on the task's
//! connection, then resumes the page and detaches the watcher. Every other new page is resumed
//! and let go as soon as its event is read. Pages that exist when the watcher connects are only
//! detached.
//!
//! A task whose page the watcher's browser does not hold (an endpoint that starts a browser per
//! connection, such as Browserless) follows its popups itself, as before; so do tasks when the
//! watcher cannot connect or its connection ends.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};
use serde_json::{Value, json};
use tungstenite::Message;

use crate::config::Config;
use crate::deadline::Deadline;
use crate::error::Error;
use crate::protocol::{self, Incoming};
use crate::supervisor::Supervisor;
use crate::transport::{Readiness, Transport};

/// How long a hand-off may take before the page is resumed anyway (its dialogs then go unseen,
/// which beats a page held forever).
const HAND_OFF_WAIT: Duration = Duration::from_secs(2);

/// Page targets remembered for [`Watcher::holds`] (closed pages are never forgotten otherwise).
const KNOWN_MAX: usize = 4096;

/// Messages read per batch.
const MAX_BATCH: usize = 256;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The watchers of one registry, by CDP URL.
#[derive(Default)]
pub(crate) struct Watchers {
    /// By the raw URL (credentials included: never shown, see the `Debug` impl).
    by_url: Mutex<HashMap<String, Arc<Watcher>>>,
    /// URLs a watcher is being connected to, each with a channel that disconnects when that
    /// connect ends: concurrent first starts on one browser wait for it (never under the lock)
    /// instead of each connecting a watcher.
    connecting: Mutex<HashMap<String, Receiver<()>>>,
    /// URLs whose watcher found itself in another browser than its task's (an endpoint that
    /// starts a browser per connection): no watcher is connected to them again.
    per_connection: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for Watchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let watchers: Vec<Arc<Watcher>> = lock(&self.by_url).values().cloned().collect();
        f.debug_list().entries(watchers).finish()
    }
}

impl Watchers {
    /// The live watcher of `cdp_url`, if there is one.
    pub(crate) fn get(&self, cdp_url: &str) -> Option<Arc<Watcher>> {
        lock(&self.by_url)
            .get(cdp_url)
            .filter(|w| w.is_alive())
            .cloned()
    }

    /// The live watcher of `cdp_url`, connecting one (by `deadline`) when there is none.
    pub(crate) fn get_or_connect(
        &self,
        cdp_url: &str,
        config: &Config,
        deadline: Deadline,
    ) -> Result<Arc<Watcher>, Error> {
        loop {
            if let Some(w) = self.get(cdp_url) {
                return Ok(w);
            }
            let mut connecting = lock(&self.connecting);
            let Some(done) = connecting.get(cdp_url).cloned() else {
                let (tx, rx) = bounded::<()>(0);
                connecting.insert(cdp_url.to_string(), rx);
                drop(connecting);
                let fresh = Watcher::connect(cdp_url, config, deadline);
                if let Ok(w) = &fresh
                    && let Some(old) = lock(&self.by_url).insert(cdp_url.to_string(), Arc::clone(w))
                {
                    old.close();
                }
                lock(&self.connecting).remove(cdp_url);
                drop(tx);
                return fresh;
            };
            drop(connecting);
            crossbeam_channel::select! {
                recv(done) -> _ => {}
                recv(deadline.alarm()) -> _ => {
                    return Err(Error::Io("another start is still connecting the popup watcher".into()));
                }
            }
            if self.get(cdp_url).is_none() {
                // That connect failed: so would this one, most likely.
                return Err(Error::Io("the popup watcher could not connect".into()));
            }
        }
    }

    /// Whether `cdp_url` starts a browser per connection (see [`Watchers::not_shared`]).
    pub(crate) fn is_per_connection(&self, cdp_url: &str) -> bool {
        lock(&self.per_connection).contains(cdp_url)
    }

    /// `w`, the watcher of `cdp_url`, is in another browser than a task of that URL: the
    /// endpoint starts a browser per connection. It is closed (it would hold a browser of the
    /// endpoint's for nothing), and no watcher is connected to that URL again.
    pub(crate) fn not_shared(&self, cdp_url: &str, w: &Arc<Watcher>) {
        lock(&self.per_connection).insert(cdp_url.to_string());
        let mut map = lock(&self.by_url);
        if map.get(cdp_url).is_some_and(|m| Arc::ptr_eq(m, w)) {
            map.remove(cdp_url);
        }
        drop(map);
        w.close();
    }

    /// Closes the watchers no live task uses any more (a watcher outlives a stopped task, so
    /// that the next task on its browser does not pay for a new one).
    pub(crate) fn close_idle(&self) {
        let idle: Vec<Arc<Watcher>> = {
            let mut map = lock(&self.by_url);
            let urls: Vec<String> = map
                .iter()
                .filter(|(_, w)| !w.has_tasks() || !w.is_alive())
                .map(|(u, _)| u.clone())
                .collect();
            urls.iter().filter_map(|u| map.remove(u)).collect()
        };
        for w in idle {
            w.close();
        }
    }

    /// Closes every watcher.
    pub(crate) fn close_all(&self) {
        let all: Vec<Arc<Watcher>> = lock(&self.by_url).drain().map(|(_, w)| w).collect();
        for w in all {
            w.close();
        }
    }
}

/// One browser's popup watcher (module doc).
pub(crate) struct Watcher {
    transport: Arc<Transport>,
    next_id: AtomicU64,
    /// Calls of this connection waiting for their reply; the watcher thread delivers them.
    pending: Mutex<HashMap<u64, Sender<Result<Value, String>>>>,
    /// The tasks it serves. Written by the registry's starts and by the watcher thread.
    tasks: Mutex<Vec<Weak<Supervisor>>>,
    /// Every page target the browser has held since the watcher connected.
    known: Mutex<HashSet<String>>,
    /// False once the connection has ended.
    alive: AtomicBool,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("url", &self.transport.url_redacted)
            .field("alive", &self.is_alive())
            .finish_non_exhaustive()
    }
}

impl Watcher {
    /// Connects to `cdp_url`, starts the watcher thread and turns browser-level auto-attach on.
    fn connect(cdp_url: &str, config: &Config, deadline: Deadline) -> Result<Arc<Watcher>, Error> {
        let opts = crate::endpoint::connect_options(config);
        let transport = crate::endpoint::connect(cdp_url, &opts, deadline)?;
        let w = Arc::new(Watcher {
            transport: Arc::new(transport),
            next_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
            known: Mutex::new(HashSet::new()),
            alive: AtomicBool::new(true),
        });
        let me = Arc::clone(&w);
        std::thread::Builder::new()
            .name("cdp-popups".into())
            .stack_size(256 * 1024)
            .spawn(move || me.read())
            .map_err(|e| {
                w.close();
                Error::Io(format!("cannot start the popup watcher thread: {e}"))
            })?;
        let auto = json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true});
        if let Err(e) = w.call("Target.setAutoAttach", auto, None, deadline) {
            w.close();
            return Err(Error::Io(format!("the popup watcher: {e}")));
        }
        Ok(w)
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    fn has_tasks(&self) -> bool {
        lock(&self.tasks)
            .iter()
            .any(|t| t.upgrade().is_some_and(|s| s.is_alive()))
    }

    fn close(&self) {
        self.alive.store(false, Ordering::Release);
        self.transport.shutdown();
    }

    /// Whether the watcher's browser holds `target_id` (it may have been created a moment ago:
    /// asked of the browser when not seen yet).
    pub(crate) fn holds(&self, target_id: &str, deadline: Deadline) -> bool {
        if lock(&self.known).contains(target_id) {
            return true;
        }
        self.call(
            "Target.getTargetInfo",
            json!({ "targetId": target_id }),
            None,
            deadline,
        )
        .is_ok()
    }

    /// Serves `sup` from now on.
    pub(crate) fn add(&self, sup: &Arc<Supervisor>) {
        let mut tasks = lock(&self.tasks);
        tasks.retain(|t| t.strong_count() > 0);
        tasks.push(Arc::downgrade(sup));
    }

    /// Sends a command on the watcher's connection, without waiting.
    fn send(&self, method: &str, params: &Value, session: Option<&str>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let text = protocol::encode_command(id, method, params, session);
        if let Err(e) = self
            .transport
            .send_text_until(text, Deadline::after(Duration::from_secs(2)))
        {
            log::debug!("popup watcher: {method} not sent: {e:?}");
        }
        id
    }

    /// A call on the watcher's connection, answered by `deadline`.
    fn call(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
        deadline: Deadline,
    ) -> Result<Value, String> {
        let (tx, rx) = bounded(1);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.pending).insert(id, tx);
        let text = protocol::encode_command(id, method, &params, session);
        let sent = self.transport.send_text_until(text, deadline);
        let result = match sent {
            Ok(()) => crossbeam_channel::select! {
                recv(rx) -> r => r.unwrap_or_else(|_| Err("the watcher ended".into())),
                recv(deadline.alarm()) -> _ => Err(format!("{method}: no answer in time")),
            },
            Err(e) => Err(format!("{method} not sent: {e:?}")),
        };
        lock(&self.pending).remove(&id);
        result
    }

    /// Resumes a page this connection holds, and lets go of it.
    fn release(&self, session: &str, waiting: bool) {
        if waiting {
            self.send("Runtime.runIfWaitingForDebugger", &json!({}), Some(session));
        }
        self.send(
            "Target.detachFromTarget",
            &json!({ "sessionId": session }),
            None,
        );
    }

    /// The watcher thread: reads its connection until it ends.
    fn read(self: Arc<Self>) {
        let mut batch: Vec<Message> = Vec::with_capacity(MAX_BATCH);
        let mut more = true;
        let reason = loop {
            if !more && let Readiness::Closed(reason) = self.transport.wait_readable() {
                break reason;
            }
            let drained = self.transport.drain(&mut batch, MAX_BATCH);
            more = matches!(drained, Ok(true));
            for msg in batch.drain(..) {
                if let Message::Text(text) = msg {
                    self.on_text(text.as_str());
                }
            }
            if let Err(reason) = drained {
                break reason;
            }
        };
        if self.alive.swap(false, Ordering::AcqRel) {
            log::info!(
                "popup watcher of {}: its connection ended ({reason}); its tasks follow their \
                 popups themselves",
                self.transport.url_redacted
            );
        }
        lock(&self.pending).clear();
        let tasks: Vec<Arc<Supervisor>> = lock(&self.tasks)
            .drain(..)
            .filter_map(|t| t.upgrade())
            .collect();
        for sup in tasks {
            sup.follow_popups_itself();
        }
    }

    fn on_text(self: &Arc<Self>, text: &str) {
        match protocol::parse(text) {
            Incoming::Reply { id, outcome } => {
                if let Some(tx) = lock(&self.pending).remove(&id) {
                    let result = match outcome {
                        Ok(raw) => serde_json::from_str(raw.get()).map_err(|e| e.to_string()),
                        Err(e) => Err(e.message),
                    };
                    let _ = tx.send(result);
                }
            }
            Incoming::Event {
                method,
                session_id: None,
                params,
            } if method == "Target.attachedToTarget" => {
                if let Some(ev) = protocol::decode::<protocol::AttachedToTarget>(params) {
                    self.attached(ev);
                }
            }
            _ => {}
        }
    }

    /// A page (or other target) handed over by browser-level auto-attach.
    fn attached(self: &Arc<Self>, ev: protocol::AttachedToTarget) {
        let info = ev.target_info;
        if info.kind == "page" {
            let mut known = lock(&self.known);
            if known.len() >= KNOWN_MAX {
                known.clear(); // only a shortcut for `holds`, which asks the browser otherwise
            }
            known.insert(info.target_id.clone());
        }
        let owner = (info.kind == "page" && ev.waiting_for_debugger)
            .then(|| self.owner_of(&info))
            .flatten();
        let Some(owner) = owner else {
            self.release(&ev.session_id, ev.waiting_for_debugger);
            return;
        };
        let me = Arc::clone(self);
        let target = info.target_id;
        let session = ev.session_id;
        let spawned = std::thread::Builder::new()
            .name("cdp-popup-hand".into())
            .stack_size(128 * 1024)
            .spawn({
                let session = session.clone();
                move || {
                    let deadline = Deadline::after(HAND_OFF_WAIT);
                    if let Err(e) = owner.adopt_page(&target, deadline) {
                        log::warn!(
                            "task {}: could not take over its popup {target}: {e}",
                            owner.task_id()
                        );
                    }
                    me.release(&session, true);
                }
            });
        if spawned.is_err() {
            self.release(&session, true);
        }
    }

    /// The live task whose page opened `info`: by `openerId` among each task's pages (its own,
    /// those it follows or watches), else by the frame `openerFrameId` among its frames.
    fn owner_of(&self, info: &protocol::TargetInfo) -> Option<Arc<Supervisor>> {
        let tasks: Vec<Arc<Supervisor>> =
            lock(&self.tasks).iter().filter_map(Weak::upgrade).collect();
        tasks.into_iter().find(|sup| {
            sup.with_snapshot(|s| {
                let own = |id: &str| {
                    s.page_target_id.as_deref() == Some(id)
                        || s.pages.iter().any(|p| p.target_id == id)
                        || s.watched_pages.iter().any(|p| p.target_id == id)
                };
                info.opener_id.as_deref().is_some_and(own)
                    || info
                        .opener_frame_id
                        .as_deref()
                        .is_some_and(|f| own(f) || s.frames.contains_key(f))
            })
        })
    }
}
