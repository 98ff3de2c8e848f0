//! One [`Supervisor`] per task: its public API (start, snapshot, dialogs, routed calls, stop).
//!
//! Threads per supervisor:
//! * the **reader** (`crate::reader`, the reader loop): blocks on the socket, drains what arrived, feeds it to the
//!   [`Core`] state machine, writes the automatic commands the core queues (fire-and-forget),
//!   publishes a new [`Snapshot`] when the visible state changed, then hands replies to waiting
//!   callers. It is the only writer of state and never waits for a CDP reply.
//! * the **watchdog** ([`crate::watchdog`]): dismisses `must_respond` dialogs nobody answered.
//!
//! Callers ([`Supervisor::call`], [`Supervisor::respond_to_dialog`]) register their call with the
//! reader over a channel *before* writing the command, then write it themselves (see
//! [`crate::transport`]) and wait on their own reply channel with a deadline. When the connection
//! ends, the reader drops every pending call, so waiting callers fail at once with "connection
//! lost" instead of waiting for their deadline.
//!
//! The call path itself (routing, the dialog-aware rules of SPEC §8, crashes, the security
//! policy, waiting with a cancel token) is in `supervisor/calls.rs`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use log::{debug, info, warn};
use serde_json::json;

use crate::attach::{Choice, attach_page};
use crate::config::{Config, DialogAction, DialogPolicy};
use crate::core::{CallKind, Command, Core, CoreSettings, answer_command};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::measured;
use crate::reader::{Reader, ReconnectPlan};
use crate::shared::{Shared, SnapshotCell};
use crate::snapshot::{BlockedReason, ClosedBy, PendingDialog, Snapshot};
use crate::transport::ConnectOptions;
use crate::watchdog::{self, WatchdogMsg};

mod calls;

/// Where a CDP call goes (SPEC §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// Browser-level (no `sessionId`).
    Browser,
    /// The page target or a tracked iframe target.
    Target(&'a str),
    /// A frame: an OOPIF's own session, or the owning session with the frame's context.
    Frame(&'a str),
    /// The task's page (its main frame's session).
    Page,
}

impl Route<'_> {
    /// How tool results name the route: `browser`, `target`, `frame` or `page`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Route::Browser => "browser",
            Route::Target(_) => "target",
            Route::Frame(_) => "frame",
            Route::Page => "page",
        }
    }

    /// The route of a call that names neither a frame nor a target (SPEC §8): methods of the
    /// domains the browser target serves (measured on Chromium: `crate::measured`) go to the
    /// browser, every other method to the page. Two served domains stay with the page:
    /// `Fetch` and `Security` mean "this page" on a page session but "every page of the
    /// browser" on the browser target (a `Fetch.enable` there would pause other tasks'
    /// requests too), so an agent that names no target gets the narrower one.
    pub fn by_domain(method: &str) -> Route<'static> {
        let page_scoped = matches!(method.split_once('.'), Some(("Fetch" | "Security", _)));
        if measured::browser_domain(method) && !page_scoped {
            Route::Browser
        } else {
            Route::Page
        }
    }
}

/// Stack size of reader threads: they parse JSON and log, nothing deep.
const READER_STACK: usize = 256 * 1024;
/// Stack size of watchdog threads.
const WATCHDOG_STACK: usize = 128 * 1024;
/// Longest deadline a single call may have.
pub const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// Per-start settings after applying a task's overrides.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Attach to this target instead of the first page.
    pub target_id: Option<String>,
    /// Create a page of its own at start and close it at stop (see `StartOptions::new_page`).
    pub new_page: bool,
    /// Dialog policy.
    pub dialog_policy: DialogPolicy,
    /// Watchdog time-out.
    pub dialog_timeout: Duration,
    /// Bound on `start`.
    pub start_timeout: Duration,
    /// Default call deadline.
    pub call_timeout: Duration,
    /// Everything else.
    pub config: Config,
}

/// One task's persistent CDP connection: dialogs, frames, routing, and a wait-free snapshot.
pub struct Supervisor {
    task_id: String,
    /// The raw URL (may carry credentials: never printed; `Debug` shows the redacted one).
    cdp_url: String,
    settings: Settings,
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Not alive any more (set first, possibly by the registry under its slot lock).
    stopping: AtomicBool,
    /// `stop` has begun its work (exactly one caller does it).
    stop_started: AtomicBool,
    /// Dropped by `stop`: wakes the reader out of a reconnect back-off or attempt.
    stop_signal: Mutex<Option<Sender<()>>>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("task_id", &self.task_id)
            .field("cdp_url", &self.shared.url_redacted)
            .field("active", &self.is_alive())
            .finish_non_exhaustive()
    }
}

impl Supervisor {
    /// Connects, starts the reader and watchdog threads and attaches to the page (SPEC §4), all
    /// within `settings.start_timeout`. On any failure every thread is stopped again.
    pub fn start(
        task_id: &str,
        cdp_url: &str,
        settings: Settings,
    ) -> Result<Arc<Supervisor>, Error> {
        let started = Instant::now();
        let deadline = Deadline::after(settings.start_timeout);
        let opts = ConnectOptions {
            connect_timeout: settings.start_timeout.min(Duration::from_secs(10)),
            max_message_bytes: settings.config.limits.max_message_bytes,
            ca_file: settings.config.ca_file.clone(),
        };
        let transport = crate::endpoint::connect(cdp_url, &opts, deadline)?;
        let (reg_tx, reg_rx) = unbounded();
        let (wd_tx, wd_rx) = unbounded();
        let (stop_tx, stop_rx) = bounded::<()>(0);
        let core = Core::new(
            task_id,
            &transport.url_redacted,
            CoreSettings {
                policy: settings.dialog_policy,
                dialog_timeout: settings.dialog_timeout,
                limits: settings.config.limits.clone(),
                bridge: settings.config.dialog_bridge,
                follow_popups: settings.config.follow_popups,
            },
        );
        let mut first = Snapshot::empty(task_id, &transport.url_redacted);
        first.active = true;
        let shared = Arc::new(Shared::new(transport, reg_tx, first));
        let reader = Reader {
            shared: Arc::clone(&shared),
            core,
            registrations: reg_rx,
            watchdog: wd_tx,
            stop: stop_rx,
            reconnect: ReconnectPlan {
                cdp_url: cdp_url.to_string(),
                attempts: settings.config.reconnect_attempts,
                backoff: settings.config.reconnect_backoff,
                connect: opts,
                attach_timeout: settings.start_timeout,
            },
        };
        let sup = Arc::new(Supervisor {
            task_id: task_id.to_string(),
            cdp_url: cdp_url.to_string(),
            settings,
            shared,
            threads: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            stop_started: AtomicBool::new(false),
            stop_signal: Mutex::new(Some(stop_tx)),
        });
        let spawned = sup.spawn_threads(reader, wd_rx);
        let choice = match &sup.settings.target_id {
            Some(t) => Choice::Exactly(t),
            None if sup.settings.new_page => Choice::NewPage,
            None => Choice::FirstPage,
        };
        let attached = spawned.and_then(|_| attach_page(&sup.shared, choice, deadline));
        if let Err(e) = attached {
            sup.stop();
            return Err(match e {
                Error::Timeout { method, .. } => Error::StartTimeout(
                    sup.settings.start_timeout,
                    format!("{method} got no answer (is the endpoint a live, responsive browser?)"),
                ),
                other => other,
            });
        }
        info!(
            "task {}: attached to {} on {} in {:?}",
            sup.task_id,
            sup.snapshot().page_target_id.as_deref().unwrap_or("?"),
            sup.shared.url_redacted,
            started.elapsed()
        );
        Ok(sup)
    }

    fn spawn_threads(&self, reader: Reader, wd_rx: Receiver<WatchdogMsg>) -> Result<(), Error> {
        let spawn_err = |e: std::io::Error| Error::Io(format!("cannot spawn a thread: {e}"));
        let handle = std::thread::Builder::new()
            .name(format!("cdp-reader-{}", short(&self.task_id)))
            .stack_size(READER_STACK)
            .spawn(move || reader.run())
            .map_err(spawn_err)?;
        self.lock_threads().push(handle);
        let shared = Arc::clone(&self.shared);
        let task = self.task_id.clone();
        let dog = std::thread::Builder::new()
            .name(format!("cdp-watchdog-{}", short(&self.task_id)))
            .stack_size(WATCHDOG_STACK)
            .spawn(move || {
                watchdog::run(wd_rx, |dialog_id| fire_watchdog(&shared, &task, dialog_id))
            })
            .map_err(spawn_err)?;
        self.lock_threads().push(dog);
        Ok(())
    }

    fn lock_threads(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The task this supervisor serves.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The CDP URL it is connected to, credentials redacted.
    pub fn cdp_url_redacted(&self) -> &str {
        &self.shared.url_redacted
    }

    pub(crate) fn cdp_url_raw(&self) -> &str {
        &self.cdp_url
    }

    /// The settings it was started with (config plus the task's overrides).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Where the snapshot is published (for the registry's per-thread read cache).
    pub(crate) fn snapshot_cell(&self) -> &Arc<SnapshotCell> {
        &self.shared.snapshot
    }

    /// The latest published state. Wait-free: no lock, no allocation, no syscall.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.shared.snapshot.load_full()
    }

    /// Calls `f` with the latest state without even touching its reference count.
    pub fn with_snapshot<R>(&self, f: impl FnOnce(&Snapshot) -> R) -> R {
        f(&self.shared.snapshot.load())
    }

    /// Blocks until a published snapshot satisfies `pred`, or `timeout` passes (`None`). No
    /// polling: the reader wakes waiters after each publish. Returns at once with `None` when the
    /// supervisor has ended and the last snapshot does not match.
    pub fn wait_for(
        &self,
        timeout: Duration,
        pred: impl Fn(&Snapshot) -> bool,
    ) -> Option<Arc<Snapshot>> {
        self.shared.wait_for(Instant::now() + timeout, pred)
    }

    /// Waits until a dialog is pending and returns the first one.
    pub fn wait_for_dialog(&self, timeout: Duration) -> Option<PendingDialog> {
        self.wait_for(timeout, |s| !s.pending_dialogs.is_empty())
            .and_then(|s| s.pending_dialogs.first().cloned())
    }

    /// True until the supervisor is stopped or has given up (its reconnect budget is spent, or
    /// its page target went away). While it reconnects it is alive but not `active` in the
    /// snapshot, and calls fail at once.
    pub fn is_alive(&self) -> bool {
        !self.stopping.load(Ordering::Acquire) && !self.shared.reader_done.load(Ordering::Acquire)
    }

    /// True while alive and connected (the snapshot's `active`).
    pub fn is_active(&self) -> bool {
        self.is_alive() && self.shared.snapshot.load().active
    }

    fn ensure_alive(&self) -> Result<(), Error> {
        if self.is_active() {
            Ok(())
        } else if self.is_alive() {
            Err(Error::ConnectionLost(format!(
                "the connection of task {:?} dropped; the supervisor is reconnecting",
                self.task_id
            )))
        } else {
            Err(Error::NotActive(self.task_id.clone()))
        }
    }

    /// Answers a pending dialog and waits for the browser's acknowledgement.
    ///
    /// `dialog_id` may be omitted when exactly one dialog is pending. Accepting a prompt without
    /// `prompt_text` returns its default text, as pressing OK on the native dialog would.
    pub fn respond_to_dialog(
        &self,
        action: DialogAction,
        prompt_text: Option<&str>,
        dialog_id: Option<&str>,
    ) -> Result<PendingDialog, Error> {
        self.ensure_alive()?;
        let snap = self.snapshot();
        let pending = &snap.pending_dialogs;
        if pending.is_empty()
            && let Some(b) = &snap.blocked
        {
            // Only a probe that proved a dialog says so; a busy page is not an orphaned dialog.
            return Err(match b.reason {
                BlockedReason::OrphanedDialog => Error::OrphanedDialog,
                BlockedReason::UnanswerableDialog => Error::DialogUnanswerable {
                    id: String::new(),
                    frame_id: b.frame_id.clone(),
                },
                _ => Error::PageUnresponsive,
            });
        }
        let dialog =
            match dialog_id {
                Some(id) => pending.iter().find(|d| d.id == id).ok_or_else(|| {
                    match snap.closed_dialog(id) {
                        Some(c) => Error::DialogAlreadyClosed {
                            id: id.to_string(),
                            closed_by: c.closed_by,
                            detail: "it is in recent_dialogs".into(),
                        },
                        None => Error::UnknownDialog {
                            id: id.to_string(),
                            known: pending
                                .iter()
                                .map(|d| d.id.as_str())
                                .collect::<Vec<_>>()
                                .join(", "),
                        },
                    }
                })?,
                None => match pending.len() {
                    0 => return Err(Error::NoDialog),
                    1 => &pending[0],
                    n => {
                        return Err(Error::AmbiguousDialog {
                            count: n,
                            pending: pending
                                .iter()
                                .map(|d| format!("{} ({}: {:?})", d.id, d.kind, d.message))
                                .collect::<Vec<_>>()
                                .join(", "),
                        });
                    }
                },
            };
        let accept = action == DialogAction::Accept;
        let text = match (accept, prompt_text) {
            (true, Some(t)) => Some(t),
            (true, None) if dialog.kind == "prompt" => Some(dialog.default_prompt.as_str()),
            _ => None,
        };
        let c = answer_command(dialog, accept, text, ClosedBy::Agent);
        self.shared
            .call(c, Deadline::after(self.settings.call_timeout))?;
        Ok(dialog.clone())
    }

    /// Marks the supervisor as stopping: from now on it is not alive, and calls fail. The registry
    /// does this while it still holds the task's slot, so no observer ever sees two live
    /// supervisors for one task; [`Supervisor::stop`] finishes the job.
    pub(crate) fn mark_stopping(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// Stops the supervisor: dismisses dialogs still pending (so the page is not left wedged),
    /// closes the socket and joins both threads. Returns within about 1 s even when the peer has
    /// stopped answering. Idempotent.
    pub fn stop(&self) {
        let first = !self.stop_started.swap(true, Ordering::AcqRel);
        self.mark_stopping();
        if first {
            let budget = Deadline::after(Duration::from_millis(700));
            let polite_done_by = Deadline::after(Duration::from_millis(800));
            let shared = Arc::clone(&self.shared);
            let pending = self.snapshot().pending_dialogs.clone();
            let own_page = if self.settings.new_page {
                self.snapshot().page_target_id.clone()
            } else {
                None
            };
            let (done_tx, done_rx) = bounded::<()>(1);
            let polite = std::thread::Builder::new()
                .name("cdp-stop".into())
                .stack_size(READER_STACK)
                .spawn(move || {
                    dismiss_all(&shared, &pending, budget);
                    if let Some(target) = own_page {
                        close_own_page(&shared, &target, budget);
                    }
                    shared.transport.load().close();
                    let _ = done_tx.send(());
                });
            let _ = polite_done_by.recv(&done_rx);
            // Shut the connection before waking the reader: a reconnect that completes from
            // now on is refused, so the reader can never go back to reading a live socket.
            self.shared.close_for_good();
            drop(
                self.stop_signal
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take(),
            );
            if let Ok(t) = polite {
                let _ = t.join();
            }
        }
        let threads: Vec<_> = self.lock_threads().drain(..).collect();
        for t in threads {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop();
    }
}

fn short(task_id: &str) -> String {
    task_id.chars().take(12).collect()
}

fn dismiss_all(shared: &Shared, pending: &[PendingDialog], budget: Deadline) {
    let mut waits = Vec::new();
    for d in pending {
        let c = answer_command(d, false, None, ClosedBy::AutoPolicy);
        if let Ok(reply) = shared.start_call(c, budget) {
            waits.push(reply);
        }
    }
    for reply in waits {
        let _ = reply.wait();
    }
}

/// Closes the page the supervisor created for its task (`StartOptions::new_page`).
fn close_own_page(shared: &Shared, target_id: &str, budget: Deadline) {
    let c = Command::new("Target.closeTarget", json!({ "targetId": target_id }))
        .kind(CallKind::Automatic);
    if let Ok(reply) = shared.start_call(c, budget) {
        let _ = reply.wait();
    }
}

fn fire_watchdog(shared: &Shared, task_id: &str, dialog_id: &str) {
    let snap = shared.snapshot.load_full();
    let Some(dialog) = snap.pending_dialogs.iter().find(|d| d.id == dialog_id) else {
        return; // closed in the meantime: never fire for a closed dialog
    };
    warn!("task {task_id}: dialog {dialog_id} was not answered in time; the watchdog dismisses it");
    let c = answer_command(dialog, false, None, ClosedBy::Watchdog);
    if let Err(e) = shared.send_command(c, None, Deadline::NEVER) {
        debug!("task {task_id}: watchdog dismissal not sent: {e}");
    }
}
