//! The heart of the crate: one [`Supervisor`] per task, and **the reader loop** that owns its
//! state.
//!
//! Threads per supervisor:
//! * the **reader** ([`reader_loop`]): blocks on the socket, drains what arrived, feeds it to the
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

use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, unbounded};
use log::{debug, info, warn};
use serde_json::{Value, json};
use tungstenite::Message;

use crate::config::{Config, DialogAction, DialogPolicy};
use crate::core::{
    CallKind, CallResult, Core, CoreSettings, Outgoing, PendingCall, answer_command,
};
use crate::error::Error;
use crate::protocol;
use crate::state::{ClosedBy, PendingDialog, Snapshot};
use crate::transport::{ConnectOptions, Readiness, Transport};
use crate::watchdog::{self, WatchdogMsg};

/// Where a CDP call goes (SPEC §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// Browser-level (no `sessionId`).
    Browser,
    /// The page target or a tracked iframe target.
    Target(&'a str),
    /// A frame: an OOPIF's own session, or the owning session with the frame's context.
    Frame(&'a str),
}

/// Stack size of reader threads: they parse JSON and log, nothing deep.
const READER_STACK: usize = 256 * 1024;
/// Stack size of watchdog threads.
const WATCHDOG_STACK: usize = 128 * 1024;
/// How long `start` waits for `Page.enable` before probing for an orphaned dialog (SPEC §4.5).
const PAGE_ENABLE_PROBE_AFTER: Duration = Duration::from_secs(2);
/// Longest deadline a single call may have.
pub const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// What the reader, the watchdog and callers share.
struct Shared {
    transport: Transport,
    /// Call registrations, drained by the reader before it applies what it read.
    registrations: Sender<(u64, PendingCall)>,
    /// The published state. Written only by the reader thread.
    snapshot: ArcSwap<Snapshot>,
    /// Set by the reader thread as it exits.
    reader_done: AtomicBool,
    /// Threads blocked in [`Supervisor::wait_for`]; the reader only touches `changed` when > 0,
    /// so nobody waiting costs nothing.
    waiters: AtomicUsize,
    /// Paired with `changed` to wake `wait_for` callers after a publish.
    change_lock: Mutex<()>,
    /// Notified after every publish while someone waits.
    changed: Condvar,
}

impl Shared {
    /// Publishes a snapshot (reader thread only) and wakes `wait_for` callers, if any.
    fn publish(&self, snapshot: Snapshot) {
        self.snapshot.store(Arc::new(snapshot));
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.change_lock.lock().unwrap_or_else(|e| e.into_inner());
            self.changed.notify_all();
        }
    }

    /// Registers and writes one command. `reply`: where its reply goes.
    fn send(
        &self,
        method: &str,
        params: Value,
        session_id: Option<&str>,
        kind: CallKind,
        reply: Option<Sender<CallResult>>,
        expires: Option<Instant>,
    ) -> Result<u64, Error> {
        let id = self.transport.next_id();
        let text = protocol::encode_command(id, method, &params, session_id);
        let call = PendingCall {
            method: method.to_string(),
            session_id: session_id.map(str::to_string),
            kind,
            reply,
            expires,
        };
        self.registrations
            .send((id, call))
            .map_err(|_| Error::ConnectionLost("the supervisor's reader has stopped".into()))?;
        self.transport.send_text(text)?;
        Ok(id)
    }

    /// Sends and waits for the reply until `timeout`.
    fn call(
        &self,
        method: &str,
        params: Value,
        session_id: Option<&str>,
        kind: CallKind,
        timeout: Duration,
    ) -> CallResult {
        let (rx, deadline) = self.start_call(method, params, session_id, kind, timeout)?;
        wait_reply(&rx, method, deadline, timeout)
    }

    /// Sends, returning the reply channel and the deadline, for pipelined calls.
    fn start_call(
        &self,
        method: &str,
        params: Value,
        session_id: Option<&str>,
        kind: CallKind,
        timeout: Duration,
    ) -> Result<(Receiver<CallResult>, Instant), Error> {
        let deadline = Instant::now() + timeout;
        let (tx, rx) = bounded(1);
        self.send(method, params, session_id, kind, Some(tx), Some(deadline))?;
        Ok((rx, deadline))
    }
}

fn wait_reply(
    rx: &Receiver<CallResult>,
    method: &str,
    deadline: Instant,
    timeout: Duration,
) -> CallResult {
    match rx.recv_deadline(deadline) {
        Ok(r) => r,
        Err(RecvTimeoutError::Timeout) => Err(Error::Timeout {
            method: method.to_string(),
            after: timeout,
        }),
        Err(RecvTimeoutError::Disconnected) => Err(Error::ConnectionLost(
            "the connection closed before the reply".into(),
        )),
    }
}

/// Per-start settings after applying a task's overrides.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Attach to this target instead of the first page.
    pub target_id: Option<String>,
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
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("task_id", &self.task_id)
            .field("cdp_url", &self.shared.transport.url_redacted)
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
        let deadline = started + settings.start_timeout;
        let opts = ConnectOptions {
            connect_timeout: settings.start_timeout.min(Duration::from_secs(10)),
            max_message_bytes: settings.config.limits.max_message_bytes,
            ca_file: settings.config.ca_file.clone(),
        };
        let ws_url = crate::endpoint::resolve(cdp_url)?;
        let transport = Transport::connect(&ws_url, &opts)?;
        let (reg_tx, reg_rx) = unbounded();
        let (wd_tx, wd_rx) = unbounded();
        let core = Core::new(
            task_id,
            &transport.url_redacted,
            CoreSettings {
                policy: settings.dialog_policy,
                dialog_timeout: settings.dialog_timeout,
                limits: settings.config.limits.clone(),
            },
        );
        let mut first = Snapshot::empty(task_id, &transport.url_redacted);
        first.active = true;
        let shared = Arc::new(Shared {
            transport,
            registrations: reg_tx,
            snapshot: ArcSwap::from_pointee(first),
            reader_done: AtomicBool::new(false),
            waiters: AtomicUsize::new(0),
            change_lock: Mutex::new(()),
            changed: Condvar::new(),
        });
        let sup = Arc::new(Supervisor {
            task_id: task_id.to_string(),
            cdp_url: cdp_url.to_string(),
            settings,
            shared: Arc::clone(&shared),
            threads: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            stop_started: AtomicBool::new(false),
        });
        let spawned = sup.spawn_threads(core, reg_rx, wd_tx, wd_rx);
        if let Err(e) = spawned.and_then(|_| sup.attach(deadline)) {
            sup.stop();
            return Err(e);
        }
        info!(
            "task {}: attached to {} on {} in {:?}",
            sup.task_id,
            sup.snapshot().page_target_id.as_deref().unwrap_or("?"),
            sup.shared.transport.url_redacted,
            started.elapsed()
        );
        Ok(sup)
    }

    fn spawn_threads(
        &self,
        core: Core,
        reg_rx: Receiver<(u64, PendingCall)>,
        wd_tx: Sender<WatchdogMsg>,
        wd_rx: Receiver<WatchdogMsg>,
    ) -> Result<(), Error> {
        let spawn_err = |e: std::io::Error| Error::Io(format!("cannot spawn a thread: {e}"));
        let shared = Arc::clone(&self.shared);
        let reader = std::thread::Builder::new()
            .name(format!("cdp-reader-{}", short(&self.task_id)))
            .stack_size(READER_STACK)
            .spawn(move || reader_loop(&shared, core, reg_rx, wd_tx))
            .map_err(spawn_err)?;
        self.lock_threads().push(reader);
        let shared = Arc::clone(&self.shared);
        let task = self.task_id.clone();
        let dog = std::thread::Builder::new()
            .name(format!("cdp-watchdog-{}", short(&self.task_id)))
            .stack_size(WATCHDOG_STACK)
            .spawn(move || {
                watchdog::run(wd_rx, |dialog_id, session_id| {
                    fire_watchdog(&shared, &task, dialog_id, session_id)
                })
            })
            .map_err(spawn_err)?;
        self.lock_threads().push(dog);
        Ok(())
    }

    fn lock_threads(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// SPEC §4 steps 1-3 and 5, on the calling thread, bounded by `deadline`.
    fn attach(&self, deadline: Instant) -> Result<(), Error> {
        let left = || deadline.saturating_duration_since(Instant::now());
        let sh = &self.shared;
        let targets = sh.call(
            "Target.getTargets",
            json!({}),
            None,
            CallKind::Plain,
            left(),
        )?;
        let targets: protocol::GetTargets = serde_json::from_value(targets).unwrap_or_default();
        let target_id = match &self.settings.target_id {
            Some(want) => targets
                .target_infos
                .iter()
                .find(|t| t.target_id == *want)
                .map(|t| t.target_id.clone())
                .ok_or_else(|| {
                    Error::NoPage(format!("the browser has no target with id {want:?}"))
                })?,
            None => match targets.target_infos.iter().find(|t| is_usable_page(t)) {
                Some(t) => t.target_id.clone(),
                None => {
                    let created = sh.call(
                        "Target.createTarget",
                        json!({"url": "about:blank", "background": true}),
                        None,
                        CallKind::Plain,
                        left(),
                    )?;
                    created["targetId"]
                        .as_str()
                        .ok_or_else(|| {
                            Error::NoPage("Target.createTarget returned no targetId".into())
                        })?
                        .to_string()
                }
            },
        };
        let attached = sh.call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
            None,
            CallKind::AttachPage {
                target_id: target_id.clone(),
            },
            left(),
        )?;
        let session = attached["sessionId"]
            .as_str()
            .ok_or_else(|| Error::NoPage("Target.attachToTarget returned no sessionId".into()))?
            .to_string();
        let s = Some(session.as_str());
        // Pipelined: none of these waits for the previous one.
        let timeout = left();
        let (page_enable, _) =
            sh.start_call("Page.enable", json!({}), s, CallKind::PageEnable, timeout)?;
        sh.send(
            "Runtime.enable",
            json!({}),
            s,
            CallKind::Automatic,
            None,
            None,
        )?;
        let (tree, tree_deadline) = sh.start_call(
            "Page.getFrameTree",
            json!({}),
            s,
            CallKind::SeedFrameTree {
                session_id: session.clone(),
            },
            timeout,
        )?;
        sh.send(
            "Target.setAutoAttach",
            json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
            s,
            CallKind::Automatic,
            None,
            None,
        )?;
        let probe_at = (Instant::now() + PAGE_ENABLE_PROBE_AFTER).min(deadline);
        match page_enable.recv_deadline(probe_at) {
            Ok(r) => {
                r?;
                wait_reply(&tree, "Page.getFrameTree", tree_deadline, timeout)?;
                Ok(())
            }
            Err(RecvTimeoutError::Disconnected) => Err(Error::ConnectionLost(
                "the connection closed while attaching".into(),
            )),
            Err(RecvTimeoutError::Timeout) => {
                // The page does not answer. If the browser does, an orphaned dialog blocks it:
                // the reader publishes `blocked` and we return instead of hanging (SPEC §4.5).
                let probe = sh.call(
                    "Browser.getVersion",
                    json!({}),
                    None,
                    CallKind::ProbeBlocked,
                    left().max(Duration::from_millis(1)),
                );
                match probe {
                    Ok(_) if self.snapshot().blocked.is_some() => Ok(()),
                    Ok(_) => match page_enable.recv_deadline(deadline) {
                        Ok(r) => r.map(|_| ()),
                        Err(_) => Err(Error::StartTimeout(
                            self.settings.start_timeout,
                            "Page.enable did not answer".into(),
                        )),
                    },
                    Err(e) => Err(Error::StartTimeout(
                        self.settings.start_timeout,
                        format!("neither the page nor the browser answers: {e}"),
                    )),
                }
            }
        }
    }

    /// The task this supervisor serves.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The CDP URL it is connected to, credentials redacted.
    pub fn cdp_url_redacted(&self) -> &str {
        &self.shared.transport.url_redacted
    }

    pub(crate) fn cdp_url_raw(&self) -> &str {
        &self.cdp_url
    }

    /// The settings it was started with (config plus the task's overrides).
    pub fn settings(&self) -> &Settings {
        &self.settings
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
        let deadline = Instant::now() + timeout;
        let sh = &self.shared;
        loop {
            let snap = self.snapshot();
            if pred(&snap) {
                return Some(snap);
            }
            if sh.reader_done.load(Ordering::Acquire) && self.snapshot().version == snap.version {
                return None;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let guard = sh.change_lock.lock().unwrap_or_else(|e| e.into_inner());
            sh.waiters.fetch_add(1, Ordering::SeqCst);
            // Re-check after announcing ourselves: a publish in between is not missed.
            if sh.snapshot.load().version == snap.version {
                let _unused = sh.changed.wait_timeout(guard, left);
            }
            sh.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Waits until a dialog is pending and returns the first one.
    pub fn wait_for_dialog(&self, timeout: Duration) -> Option<PendingDialog> {
        self.wait_for(timeout, |s| !s.pending_dialogs.is_empty())
            .and_then(|s| s.pending_dialogs.first().cloned())
    }

    /// True while the connection is up, the page is attached and `stop` has not been called.
    pub fn is_alive(&self) -> bool {
        !self.stopping.load(Ordering::Acquire)
            && !self.shared.reader_done.load(Ordering::Acquire)
            && self.shared.snapshot.load().active
    }

    fn ensure_alive(&self) -> Result<(), Error> {
        if self.is_alive() {
            Ok(())
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
        let dialog =
            match dialog_id {
                Some(id) => pending.iter().find(|d| d.id == id).ok_or_else(|| {
                    match snap.closed_dialog(id) {
                        Some(c) => Error::DialogAlreadyClosed {
                            id: id.to_string(),
                            closed_by: c.closed_by.as_str().into(),
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
        let Outgoing::Command {
            method,
            params,
            session_id,
            kind,
        } = answer_command(
            &dialog.id,
            &dialog.session_id,
            accept,
            text,
            ClosedBy::Agent,
        )
        else {
            unreachable!("answer_command builds a command")
        };
        self.shared.call(
            method,
            params,
            session_id.as_deref(),
            kind,
            self.settings.call_timeout,
        )?;
        Ok(dialog.clone())
    }

    /// Sends a CDP command along `route` and waits up to `timeout` (clamped to 1 ms..300 s).
    pub fn call(
        &self,
        method: &str,
        params: Value,
        route: Route<'_>,
        timeout: Duration,
    ) -> Result<Value, Error> {
        self.call_routed(method, params, route, timeout)
            .map(|(v, _)| v)
    }

    /// Like [`Supervisor::call`], also returning the session the call went to.
    pub fn call_routed(
        &self,
        method: &str,
        mut params: Value,
        route: Route<'_>,
        timeout: Duration,
    ) -> Result<(Value, Option<String>), Error> {
        self.ensure_alive()?;
        if method.is_empty() {
            return Err(Error::InvalidArgument("method must not be empty".into()));
        }
        if params.is_null() {
            params = json!({});
        }
        if !params.is_object() {
            return Err(Error::InvalidArgument(
                "params must be a JSON object".into(),
            ));
        }
        let timeout = timeout.clamp(Duration::from_millis(1), MAX_CALL_TIMEOUT);
        let snap = self.snapshot();
        let session = match route {
            Route::Browser => None,
            Route::Target(t) => Some(session_for_target(&snap, t)?),
            Route::Frame(f) => Some(session_for_frame(&snap, f, method, &mut params)?),
        };
        let result =
            self.shared
                .call(method, params, session.as_deref(), CallKind::Plain, timeout)?;
        Ok((result, session))
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
            let budget = Instant::now() + Duration::from_millis(700);
            let shared = Arc::clone(&self.shared);
            let pending = self.snapshot().pending_dialogs.clone();
            let (done_tx, done_rx) = bounded::<()>(1);
            let polite = std::thread::Builder::new()
                .name("cdp-stop".into())
                .stack_size(READER_STACK)
                .spawn(move || {
                    dismiss_all(&shared, &pending, budget);
                    shared.transport.close();
                    let _ = done_tx.send(());
                });
            let _ = done_rx.recv_deadline(budget + Duration::from_millis(100));
            self.shared.transport.shutdown();
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

fn is_usable_page(t: &protocol::TargetInfo) -> bool {
    t.kind == "page"
        && !t.url.starts_with("devtools://")
        && !t.url.starts_with("chrome-extension://")
        && !t.url.starts_with("chrome://")
}

fn session_for_target(snap: &Snapshot, target_id: &str) -> Result<String, Error> {
    if snap.page_target_id.as_deref() == Some(target_id) {
        return snap
            .page_session_id
            .clone()
            .ok_or_else(|| Error::UnknownTarget(target_id.to_string()));
    }
    snap.frames
        .get(target_id)
        .and_then(|r| r.session_id.clone())
        .ok_or_else(|| Error::UnknownTarget(target_id.to_string()))
}

fn session_for_frame(
    snap: &Snapshot,
    frame_id: &str,
    method: &str,
    params: &mut Value,
) -> Result<String, Error> {
    let Some(rec) = snap.frames.get(frame_id) else {
        // Before the frame tree arrives, the main frame id (= page target id) still routes.
        if snap.page_target_id.as_deref() == Some(frame_id) {
            return session_for_target(snap, frame_id);
        }
        return Err(Error::UnknownFrame(frame_id.to_string()));
    };
    let session_root = rec.is_oopif || rec.parent_frame_id.is_none();
    if !session_root {
        let key = match method {
            "Runtime.evaluate" => Some("contextId"),
            "Runtime.callFunctionOn" => Some("executionContextId"),
            _ => None,
        };
        if let Some(key) = key {
            let explicit = [
                "contextId",
                "executionContextId",
                "uniqueContextId",
                "objectId",
            ]
            .iter()
            .any(|k| params.get(k).is_some());
            if !explicit {
                let ctx = rec.default_context.ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "frame {frame_id} has no JavaScript context yet (it may still be loading); retry shortly"
                    ))
                })?;
                params[key] = json!(ctx);
            }
        }
    }
    Ok(rec.owner_session.clone())
}

fn dismiss_all(shared: &Shared, pending: &[PendingDialog], budget: Instant) {
    let mut waits = Vec::new();
    for d in pending {
        let Outgoing::Command {
            method,
            params,
            session_id,
            kind,
        } = answer_command(&d.id, &d.session_id, false, None, ClosedBy::AutoPolicy)
        else {
            continue;
        };
        let (tx, rx) = bounded(1);
        if shared
            .send(
                method,
                params,
                session_id.as_deref(),
                kind,
                Some(tx),
                Some(budget),
            )
            .is_ok()
        {
            waits.push(rx);
        }
    }
    for rx in waits {
        let _ = rx.recv_deadline(budget);
    }
}

fn fire_watchdog(shared: &Shared, task_id: &str, dialog_id: &str, session_id: &str) {
    let still_pending = shared
        .snapshot
        .load()
        .pending_dialogs
        .iter()
        .any(|d| d.id == dialog_id);
    if !still_pending {
        return;
    }
    warn!("task {task_id}: dialog {dialog_id} was not answered in time; the watchdog dismisses it");
    if let Outgoing::Command {
        method,
        params,
        session_id,
        kind,
    } = answer_command(dialog_id, session_id, false, None, ClosedBy::Watchdog)
        && let Err(e) = shared.send(method, params, session_id.as_deref(), kind, None, None)
    {
        debug!("task {task_id}: watchdog dismissal not sent: {e}");
    }
}

/// The reader loop: the only writer of this supervisor's state.
///
/// Blocks until bytes arrive (no CPU, no lock), drains every complete message, applies them in
/// order, carries out what the state machine asked for, publishes once per batch if the visible
/// state changed, and only then wakes the callers whose replies arrived, so a caller that gets
/// its reply already sees its effect in the snapshot.
fn reader_loop(
    shared: &Shared,
    mut core: Core,
    registrations: Receiver<(u64, PendingCall)>,
    watchdog: Sender<WatchdogMsg>,
) {
    let transport = &shared.transport;
    let mut batch: Vec<Message> = Vec::with_capacity(64);
    let reason = loop {
        if let Readiness::Closed(reason) = transport.wait_readable() {
            break reason;
        }
        let drained = transport.drain(&mut batch);
        for (id, call) in registrations.try_iter() {
            core.register(id, call);
        }
        for msg in batch.drain(..) {
            match msg {
                Message::Text(text) => core.on_text(text.as_str()),
                Message::Binary(b) => debug!("ignoring a binary frame of {} bytes", b.len()),
                Message::Close(_) => debug!("the browser sent a close frame"),
                _ => {}
            }
        }
        carry_out(shared, &mut core, &watchdog);
        if core.take_dirty() {
            shared.publish(core.snapshot());
        }
        for (tx, result) in core.take_deliveries() {
            let _ = tx.send(result);
        }
        if let Err(reason) = drained {
            break reason;
        }
    };
    transport.shutdown();
    info!("connection to {} ended: {reason}", transport.url_redacted);
    for (id, call) in registrations.try_iter() {
        core.register(id, call);
    }
    core.on_disconnect(&reason);
    shared.reader_done.store(true, Ordering::Release);
    shared.publish(core.snapshot());
    for (tx, result) in core.take_deliveries() {
        let _ = tx.send(result);
    }
}

/// Writes the commands the state machine queued (fire-and-forget) and forwards watchdog actions.
fn carry_out(shared: &Shared, core: &mut Core, watchdog: &Sender<WatchdogMsg>) {
    for action in core.take_outgoing() {
        match action {
            Outgoing::Command {
                method,
                params,
                session_id,
                kind,
            } => {
                let id = shared.transport.next_id();
                let text = protocol::encode_command(id, method, &params, session_id.as_deref());
                core.register(
                    id,
                    PendingCall {
                        method: method.to_string(),
                        session_id,
                        kind,
                        reply: None,
                        expires: None,
                    },
                );
                if let Err(e) = shared.transport.send_text(text) {
                    debug!("automatic {method} not sent: {e}");
                }
            }
            Outgoing::ArmWatchdog {
                dialog_id,
                session_id,
                deadline,
            } => {
                let _ = watchdog.send(WatchdogMsg::Arm {
                    dialog_id,
                    session_id,
                    deadline,
                });
            }
            Outgoing::CancelWatchdog { dialog_id } => {
                let _ = watchdog.send(WatchdogMsg::Cancel { dialog_id });
            }
        }
    }
}
