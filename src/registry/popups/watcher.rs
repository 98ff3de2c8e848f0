//! One browser's popup watcher: its connection (the crate's [`Transport`], written through the
//! one outbound path, [`Outbound`]), the thread that reads it, and the hand-off of a task's
//! popup to the task's own connection (the module doc of `registry/popups.rs` says why).
//!
//! Its life: opened for the first task of a browser, it serves every task of that browser that
//! starts while it is open, and closes once the last of them has ended (after a grace, timed by
//! `Watchers::task_ended`: [`Watcher::close_if_idle`]) or when its connection ends (its tasks
//! then follow their popups themselves). A closed watcher takes no task: the next start opens
//! another.

use crate::sync::lock;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};
use serde_json::json;
use tungstenite::Message;

use crate::core::{CallKind, Command, PendingCall};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::outbound::Outbound;
use crate::protocol::{self, Incoming};
use crate::supervisor::Supervisor;
use crate::transport::{Readiness, SendError, Transport};

/// How long a hand-off may take before the page is resumed anyway (its dialogs then go unseen,
/// which beats a page held forever).
const HAND_OFF_WAIT: Duration = Duration::from_secs(2);

/// How long the watcher's own fire-and-forget commands (resume, detach) may take to write.
const SEND_WAIT: Duration = Duration::from_secs(2);

/// Page targets remembered for [`Watcher::holds`] and [`Watcher::opened_by`] (closed pages are
/// never forgotten otherwise; past it they are all forgotten, and a task starting then does not
/// find the popups its page opened before).
const KNOWN_MAX: usize = 4096;

/// Messages read per batch.
const MAX_BATCH: usize = 256;

/// The tasks a watcher serves, and whether it takes more.
#[derive(Debug, Default)]
struct Served {
    tasks: Vec<Weak<Supervisor>>,
    /// False once the watcher is closed (idle, or its connection ended): it takes no task.
    open: bool,
}

/// Whether the watcher's browser holds a page ([`Watcher::holds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holds {
    /// It does: the watcher can hand that page's popups over.
    Yes,
    /// The browser says it has no such target: the watcher is in another browser.
    No,
    /// No answer (the watcher's connection ended, or the browser is slow).
    Unknown,
}

/// One browser's popup watcher (module doc).
pub(crate) struct Watcher {
    transport: Transport,
    next_id: AtomicU64,
    /// Calls registered and not answered yet, by id; `None` once the reader has ended (a call
    /// registered then fails at once). Written by callers and by the watcher thread.
    calls: Mutex<Option<HashMap<u64, PendingCall>>>,
    /// The tasks it serves. Written by the registry's starts, by task ends (through
    /// [`Watcher::close_if_idle`]) and by the watcher thread.
    served: Mutex<Served>,
    /// Every page target the browser has held since the watcher connected, with the page or
    /// frame that opened it (`openerId`, else `openerFrameId`). Written by the watcher thread.
    known: Mutex<HashMap<String, Option<String>>>,
    /// Dropped when the watcher closes: [`Watcher::closed_signal`] disconnects.
    closed_tx: Mutex<Option<Sender<()>>>,
    closed_rx: Receiver<()>,
    /// Set while a timer waits to close the watcher once idle (`Watchers::task_ended`).
    idle_timer: AtomicBool,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("url", &self.transport.url_redacted)
            .field("open", &self.is_open())
            .finish_non_exhaustive()
    }
}

impl Outbound for Watcher {
    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn register(&self, id: u64, call: PendingCall) -> Result<(), Error> {
        match lock(&self.calls).as_mut() {
            Some(calls) => {
                calls.insert(id, call);
                Ok(())
            }
            None => Err(Error::ConnectionLost(
                "the popup watcher's connection has ended".into(),
            )),
        }
    }

    fn write_text(&self, text: String, deadline: Deadline) -> Result<(), SendError> {
        self.transport.send_text_until(text, deadline)
    }
}

impl Watcher {
    /// Starts the watcher thread on `transport` (a connection to the browser's own DevTools
    /// endpoint) and turns browser-level auto-attach on, by `deadline`.
    pub(super) fn start(transport: Transport, deadline: Deadline) -> Result<Arc<Watcher>, Error> {
        let (closed_tx, closed_rx) = bounded(0);
        let w = Arc::new(Watcher {
            transport,
            closed_tx: Mutex::new(Some(closed_tx)),
            closed_rx,
            idle_timer: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            calls: Mutex::new(Some(HashMap::new())),
            served: Mutex::new(Served {
                tasks: Vec::new(),
                open: true,
            }),
            known: Mutex::new(HashMap::new()),
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
        if let Err(e) = w.round_trip(Command::new("Target.setAutoAttach", auto), deadline) {
            w.close();
            return Err(Error::Io(format!("the popup watcher: {e}")));
        }
        Ok(w)
    }

    /// True until the watcher is closed or its connection ends.
    pub(crate) fn is_open(&self) -> bool {
        lock(&self.served).open
    }

    /// Disconnects once the watcher is closed (or its connection has ended).
    pub(super) fn closed_signal(&self) -> Receiver<()> {
        self.closed_rx.clone()
    }

    /// Marks an idle timer as started; false when one is already waiting.
    pub(super) fn start_idle_timer(&self) -> bool {
        !self.idle_timer.swap(true, Ordering::AcqRel)
    }

    /// The idle timer has waited its time.
    pub(super) fn idle_timer_done(&self) {
        self.idle_timer.store(false, Ordering::Release);
    }

    /// Closes the watcher (its connection, and with it its thread).
    pub(super) fn close(&self) {
        lock(&self.served).open = false;
        self.shut();
    }

    /// Shuts the connection and says so to [`Watcher::closed_signal`].
    fn shut(&self) {
        self.transport.shutdown();
        drop(lock(&self.closed_tx).take());
    }

    /// Whether the watcher is open and serves a live task.
    pub(super) fn is_busy(&self) -> bool {
        let served = lock(&self.served);
        let tasks: Vec<Arc<Supervisor>> = served.tasks.iter().filter_map(Weak::upgrade).collect();
        let busy = served.open && tasks.iter().any(|s| s.is_alive());
        drop(served);
        // After the lock: dropping the last reference to a supervisor stops it, and its end
        // comes back here.
        drop(tasks);
        busy
    }

    /// Closes the watcher if no task it serves is alive; true when it is closed (now or
    /// before). Under the same lock as [`Watcher::add`], so a start either adds its task
    /// first (and the watcher stays) or finds the watcher closed (and opens another).
    pub(super) fn close_if_idle(&self) -> bool {
        let mut served = lock(&self.served);
        let tasks: Vec<Arc<Supervisor>> = served.tasks.iter().filter_map(Weak::upgrade).collect();
        let busy = served.open && tasks.iter().any(|s| s.is_alive());
        let was_open = !busy && std::mem::replace(&mut served.open, false);
        drop(served);
        // After the lock, as in `is_busy`.
        drop(tasks);
        if busy {
            return false;
        }
        if was_open {
            log::info!(
                "popup watcher of {}: closed, its last task has ended",
                self.transport.url_redacted
            );
        }
        self.shut();
        true
    }

    /// Whether the watcher's browser holds `target_id` (it may have been created a moment ago:
    /// asked of the browser when not seen yet).
    pub(super) fn holds(&self, target_id: &str, deadline: Deadline) -> Holds {
        if lock(&self.known).contains_key(target_id) {
            return Holds::Yes;
        }
        let info = Command::new("Target.getTargetInfo", json!({ "targetId": target_id }));
        match self.round_trip(info, deadline) {
            Ok(_) => Holds::Yes,
            Err(Error::Cdp { .. }) => Holds::No,
            Err(_) => Holds::Unknown,
        }
    }

    /// The pages the watcher saw opened by one of `own` (a task's pages and frames), and by
    /// those, in the order found: the popups a task that starts now had before it, which the
    /// watcher let go (some may have closed since). No call to the browser.
    pub(super) fn opened_by(&self, own: &[&str]) -> Vec<String> {
        let known = lock(&self.known);
        let mut own: HashSet<&str> = own.iter().copied().collect();
        let mut found = Vec::new();
        loop {
            let next: Vec<&str> = (known.iter())
                .filter(|(t, o)| {
                    !own.contains(t.as_str()) && o.as_deref().is_some_and(|o| own.contains(o))
                })
                .map(|(t, _)| t.as_str())
                .collect();
            if next.is_empty() {
                return found;
            }
            for t in next {
                own.insert(t);
                found.push(t.to_string());
            }
        }
    }

    /// Serves `sup` from now on; false (and nothing done) when the watcher is closed.
    pub(super) fn add(&self, sup: &Arc<Supervisor>) -> bool {
        let mut served = lock(&self.served);
        if !served.open {
            return false;
        }
        served.tasks.retain(|t| t.strong_count() > 0);
        served.tasks.push(Arc::downgrade(sup));
        drop(served);
        if !sup.is_alive() {
            // It ended before it was added, so its end did not count: count it now.
            self.close_if_idle();
        }
        true
    }

    /// Sends a command on the watcher's connection, without waiting for its reply.
    fn send(&self, cmd: Command) {
        let method = cmd.method.clone();
        let cmd = cmd.kind(CallKind::Automatic);
        if let Err(e) = self.send_command(cmd, None, Deadline::after(SEND_WAIT)) {
            log::debug!("popup watcher: {method} not sent: {e}");
        }
    }

    /// Resumes a page this connection holds, and lets go of it.
    fn release(&self, session: &str, waiting: bool) {
        if waiting {
            self.send(Command::new("Runtime.runIfWaitingForDebugger", json!({})).on(session));
        }
        self.send(Command::new(
            "Target.detachFromTarget",
            json!({ "sessionId": session }),
        ));
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
        self.shut();
        // Dropping the calls fails their callers at once (their reply channels disconnect).
        drop(lock(&self.calls).take());
        let (was_open, tasks) = {
            let mut served = lock(&self.served);
            let was_open = std::mem::replace(&mut served.open, false);
            (was_open, std::mem::take(&mut served.tasks))
        };
        if !was_open {
            return; // closed on purpose: its tasks have ended
        }
        log::info!(
            "popup watcher of {}: its connection ended ({reason}); its tasks follow their popups \
             themselves",
            self.transport.url_redacted
        );
        for sup in tasks.iter().filter_map(Weak::upgrade) {
            if sup.is_alive() {
                sup.follow_popups_itself();
            }
        }
    }

    fn on_text(self: &Arc<Self>, text: &str) {
        match protocol::parse(text) {
            Incoming::Reply { id, outcome } => {
                let call = lock(&self.calls).as_mut().and_then(|c| c.remove(&id));
                if let Some(mut call) = call {
                    let result = call.reply_result(outcome);
                    match (call.reply.take(), result) {
                        (Some(tx), result) => drop(tx.send(result)),
                        (None, Err(e)) => log::debug!("popup watcher: {e}"),
                        (None, Ok(_)) => {}
                    }
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
                known.clear(); // `holds` asks the browser then
            }
            let opener = info
                .opener_id
                .clone()
                .or_else(|| info.opener_frame_id.clone());
            known.insert(info.target_id.clone(), opener);
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
        let tasks: Vec<Arc<Supervisor>> = lock(&self.served)
            .tasks
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
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
