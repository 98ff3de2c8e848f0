//! One [`Supervisor`] per task: its public API (start, snapshot, dialogs, routed calls, stop).
//!
//! Threads per supervisor:
//! * the **reader** (`crate::reader`, the reader loop): blocks on the socket, drains what arrived, feeds it to the
//!   [`Core`] state machine, writes the automatic commands the core queues (fire-and-forget),
//!   publishes a new [`Snapshot`] when the visible state changed, then hands replies to waiting
//!   callers. It is the only writer of state and never waits for a CDP reply.
//! * the **watchdog** ([`crate::watchdog`]): dismisses `must_respond` dialogs nobody answered,
//!   and probes the task's renderer while popups it let go past both caps are open
//!   (`supervisor/stall.rs`).
//!
//! Callers ([`Supervisor::call`], [`Supervisor::respond_to_dialog`]) register their call with the
//! reader over a channel *before* writing the command, then write it themselves (see
//! [`crate::transport`]) and wait on their own reply channel with a deadline. When the connection
//! ends, the reader drops every pending call, so waiting callers fail at once with "connection
//! lost" instead of waiting for their deadline.
//!
//! The call path itself (routing, the dialog-aware rules of SPEC §8, crashes, the security
//! policy, waiting with a cancel token) is in `supervisor/calls.rs`.

use crate::sync;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use log::{debug, info, warn};
use serde_json::json;

use crate::attach::{Choice, attach_page};
use crate::cancel::CancelToken;
use crate::config::{Config, DialogAction, StartOptions};
use crate::core::{Command, Core, CoreSettings, answer_command};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::outbound::Outbound;
use crate::reader::{Reader, ReconnectPlan};
use crate::shared::{Shared, SnapshotCell};
use crate::snapshot::{ClosedBy, DialogKind, PendingDialog, Snapshot, SupervisorState};
use crate::task_id::thread_label;
use crate::transport::ConnectOptions;
use crate::watchdog::{self, WatchdogMsg};

mod calls;
mod files;
mod main_world;
mod navigate;
mod stall;
mod stop;

pub use calls::Route;
pub use files::DOWNLOAD_BEGIN_GRACE;
pub use navigate::{Navigation, WaitUntil};

/// Stack size of reader threads: they parse JSON and log, nothing deep.
const READER_STACK: usize = 256 * 1024;
/// Stack size of watchdog threads.
const WATCHDOG_STACK: usize = 128 * 1024;

/// One task's persistent CDP connection: dialogs, frames, routing, and a wait-free snapshot.
pub struct Supervisor {
    task_id: String,
    /// The raw URL (may carry credentials: never printed; `Debug` shows the redacted one).
    cdp_url: String,
    /// The registry's configuration with the task's overrides applied.
    config: Config,
    /// What the task asked for at start.
    options: StartOptions,
    /// The lifecycle lives here: the published state and the stop phase (see `crate::shared`).
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Not state, a wake-up: `stop` drops it once it has shut the connection for good, which
    /// disconnects the reader's end ([`Reader::wake_reader`]) and so cuts any reconnect
    /// back-off or attempt short, now and in every later wait (a message on a one-slot channel
    /// would wake one wait only).
    wake_reader: Mutex<Option<Sender<()>>>,
    /// The task's download directory (made at start; removed at stop unless `downloads.keep`).
    download_dir: Option<std::path::PathBuf>,
    /// The latest navigation, for `wait_for_navigation` (callers' state, not the reader's).
    last_navigation: Mutex<Option<navigate::LastNavigation>>,
    /// Downloads `wait_for_download` returned already.
    downloads_taken: Mutex<std::collections::HashSet<String>>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("task_id", &self.task_id)
            .field("cdp_url", &self.shared.url_redacted)
            .field("state", &self.state().as_str())
            .finish_non_exhaustive()
    }
}

impl DialogAction {
    /// Reads the action a caller names (`browser_dialog`'s `action`): `accept` or `dismiss`,
    /// exactly, for [`Supervisor::respond_to_dialog`]. Anything else is
    /// [`Error::InvalidArgument`], naming both.
    pub fn parse(action: &str) -> Result<DialogAction, Error> {
        match action {
            "accept" => Ok(DialogAction::Accept),
            "dismiss" => Ok(DialogAction::Dismiss),
            _ => Err(invalid_action(crate::quote::quoted(action))),
        }
    }
}

/// The error for an action that is neither, `shown` through [`crate::quote`] (it may be huge).
pub(crate) fn invalid_action(shown: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!(
        "invalid action {shown}: use \"accept\" or \"dismiss\""
    ))
}

impl Supervisor {
    /// Connects, starts the reader and watchdog threads and attaches to the page (SPEC §4), all
    /// within `config.start_timeout`. The task's settings are
    /// [`config.with_overrides(&options)`](Config::with_overrides). On any failure every thread
    /// is stopped again. An invalid `task_id` (see
    /// [`SupervisorRegistry::check_task_id`](crate::SupervisorRegistry::check_task_id)) is an
    /// [`Error::InvalidArgument`].
    pub fn start(
        task_id: &str,
        cdp_url: &str,
        config: &Config,
        options: StartOptions,
    ) -> Result<Arc<Supervisor>, Error> {
        Supervisor::start_served(task_id, cdp_url, config, options, None, false, &[])
    }

    /// [`Supervisor::start`] that `cancel` calls off at once, wherever it is: connecting
    /// (discovery, TCP, TLS, the WebSocket upgrade) or attaching. It then returns
    /// [`Error::StartCancelled`] and leaves nothing behind: its threads are joined, its
    /// connection closed, a page it created closed. Two waits are not cut short: a
    /// `Target.createTarget` in flight is waited for (at most 1 s) so that the new page can be
    /// closed, and a connect blocked in system calls (DNS, TCP, TLS, the WebSocket upgrade,
    /// `http://` discovery) cannot be interrupted: the start returns at once, and the connect
    /// ends on its helper thread by its own deadline, closing what it opened.
    pub fn start_cancellable(
        task_id: &str,
        cdp_url: &str,
        config: &Config,
        options: StartOptions,
        cancel: &CancelToken,
    ) -> Result<Arc<Supervisor>, Error> {
        Supervisor::start_served(task_id, cdp_url, config, options, Some(cancel), false, &[])
    }

    /// The registry's start: like [`Supervisor::start_cancellable`] (without a cancel when
    /// `cancel` is `None`). With `popups_elsewhere` the supervisor does not turn browser-level
    /// auto-attach on: the registry then has its popup watcher hand it its popups, or calls
    /// [`Supervisor::follow_popups_itself`] (`crate::registry::popups`). A start that takes the
    /// browser's first page skips the pages in `taken` (other tasks' pages, with
    /// `security.isolate_tasks`).
    pub(crate) fn start_served(
        task_id: &str,
        cdp_url: &str,
        config: &Config,
        options: StartOptions,
        cancel: Option<&CancelToken>,
        popups_elsewhere: bool,
        taken: &[String],
    ) -> Result<Arc<Supervisor>, Error> {
        crate::task_id::check(task_id)?;
        let cancelled = |during: &str| Error::StartCancelled {
            task_id: task_id.to_string(),
            during: during.to_string(),
        };
        if cancel.is_some_and(CancelToken::is_cancelled) {
            return Err(cancelled("waiting to start"));
        }
        let config = config.with_overrides(&options);
        let started = Instant::now();
        let deadline = Deadline::after(config.start_timeout);
        let opts = crate::endpoint::connect_options(&config);
        let transport = match cancel {
            None => crate::endpoint::connect(cdp_url, &opts, deadline)?,
            Some(c) => match connect_cancellable(cdp_url, &opts, deadline, c) {
                Err(Error::Cancelled(_)) => return Err(cancelled("connecting")),
                other => other?,
            },
        };
        let (download_dir, files) = files::files_settings(task_id, &config);
        let (reg_tx, reg_rx) = unbounded();
        let (wd_tx, wd_rx) = unbounded();
        let (wake_reader_tx, wake_reader) = bounded::<()>(0);
        let mut core = Core::new(
            task_id,
            &transport.url_redacted,
            CoreSettings {
                policy: config.dialog_policy,
                dialog_timeout: config.dialog_timeout,
                limits: config.limits.clone(),
                bridge: config.dialog_bridge,
                follow_popups: config.follow_popups,
                browser_auto_attach: !popups_elsewhere,
                capture_console: config.capture_console,
            },
        );
        core.set_files(files);
        let first = Snapshot::empty(task_id, &transport.url_redacted);
        let shared = Arc::new(Shared::new(transport, reg_tx, first));
        let reader = Reader {
            shared: Arc::clone(&shared),
            core,
            registrations: reg_rx,
            watchdog: wd_tx,
            wake_reader,
            reconnect: ReconnectPlan {
                cdp_url: cdp_url.to_string(),
                attempts: config.reconnect_attempts,
                backoff: config.reconnect_backoff,
                connect: opts,
                attach_timeout: config.start_timeout,
                own_page: options.owns_page(),
            },
        };
        let sup = Arc::new(Supervisor {
            task_id: task_id.to_string(),
            cdp_url: cdp_url.to_string(),
            config,
            options,
            shared,
            threads: Mutex::new(Vec::new()),
            wake_reader: Mutex::new(Some(wake_reader_tx)),
            download_dir,
            last_navigation: Mutex::new(None),
            downloads_taken: Mutex::new(Default::default()),
        });
        let spawned = sup.spawn_threads(reader, wd_rx);
        let choice = match &sup.options.target_id {
            Some(t) => Choice::Exactly(t),
            None if sup.options.owns_page() => Choice::NewPage,
            None => Choice::FirstPage(taken),
        };
        let attached = spawned.and_then(|_| attach_page(&sup.shared, choice, deadline, cancel));
        if let Err(e) = attached {
            sup.stop();
            return Err(match e {
                Error::Cancelled(_) => cancelled("attaching to the page"),
                Error::Timeout { method, .. } => Error::StartTimeout(
                    sup.config.start_timeout,
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
            .name(format!("cdp-reader-{}", thread_label(&self.task_id)))
            .stack_size(READER_STACK)
            .spawn(move || reader.run())
            .map_err(spawn_err)?;
        self.lock_threads().push(handle);
        let shared = Arc::clone(&self.shared);
        let task = self.task_id.clone();
        let mut ticker = stall::Ticker::new(Arc::clone(&self.shared), self.task_id.clone());
        let dog = std::thread::Builder::new()
            .name(format!("cdp-watchdog-{}", thread_label(&self.task_id)))
            .stack_size(WATCHDOG_STACK)
            .spawn(move || {
                let fire = |dialog_id: &str| fire_watchdog(&shared, &task, dialog_id);
                watchdog::run(wd_rx, fire, || ticker.tick(), watchdog::PROBE_EVERY)
            })
            .map_err(spawn_err)?;
        self.lock_threads().push(dog);
        Ok(())
    }

    fn lock_threads(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        sync::lock(&self.threads)
    }

    /// Takes over a page the popup watcher holds paused (`crate::registry::popups`): this
    /// connection attaches to it, and the reader sets it up as a popup it follows (or lets it
    /// go) before the reply is delivered; then a browser-level round trip proves the browser has
    /// dispatched that set-up, so the watcher may resume the page.
    pub(crate) fn adopt_page(&self, target_id: &str, deadline: Deadline) -> Result<(), Error> {
        let attach = Command::new(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        );
        self.shared.round_trip(attach, deadline)?;
        self.shared
            .round_trip(Command::new("Browser.getVersion", json!({})), deadline)?;
        Ok(())
    }

    /// Whether this connection's browser knows `target_id` (`Target.getTargetInfo`): a browser
    /// that answers it (Chromium does) can hand a popup over from the registry's watcher.
    pub(crate) fn browser_knows(&self, target_id: &str, deadline: Deadline) -> bool {
        let info = Command::new("Target.getTargetInfo", json!({ "targetId": target_id }));
        self.shared.round_trip(info, deadline).is_ok()
    }

    /// Whether [`Supervisor::follow_popups_itself`] has been called (and popups are followed).
    pub(crate) fn follows_popups_itself(&self) -> bool {
        self.shared.follows_popups_itself.load(Ordering::Acquire)
    }

    /// Turns browser-level auto-attach on for this connection and every later one (after a
    /// reconnect), when popups are followed: no popup watcher hands this task its popups (none
    /// could serve it, or it has gone).
    pub(crate) fn follow_popups_itself(&self) {
        if self.config.follow_popups {
            // Before the round trip: a reconnect that re-attaches meanwhile turns it on again.
            self.shared
                .follows_popups_itself
                .store(true, Ordering::Release);
            // Answered before it returns: the start it ends says the task follows its popups
            // from now on (a page the browser holds is only handed over once, at once).
            let cmd = Command::new("Target.setAutoAttach", crate::core::auto_attach_params());
            if let Err(e) = self
                .shared
                .round_trip(cmd, Deadline::after(Duration::from_secs(2)))
            {
                log::debug!("task {}: Target.setAutoAttach: {e}", self.task_id);
            }
        }
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

    /// The configuration it runs with: the registry's, with the task's overrides applied
    /// ([`Config::with_overrides`]).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The options it was started with.
    pub fn options(&self) -> &StartOptions {
        &self.options
    }

    /// The page it attached to is its own: created at start, closed at stop
    /// ([`StartOptions::own_page`], which `target_id` overrides).
    fn owns_page(&self) -> bool {
        self.options.owns_page()
    }

    /// What the supervisor's threads share (for the task's CDP endpoint).
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
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

    /// Blocks until a published snapshot satisfies `pred`, or `timeout` passes (`None`;
    /// [`Duration::MAX`]: no time-out). No polling: the reader wakes waiters after each publish.
    /// Returns at once with `None` when the supervisor has ended and the last snapshot does not
    /// match.
    pub fn wait_for(
        &self,
        timeout: Duration,
        pred: impl Fn(&Snapshot) -> bool,
    ) -> Option<Arc<Snapshot>> {
        self.shared.wait_for(Deadline::after(timeout), pred)
    }

    /// Has `hook` run after every publish of a new snapshot, on the reader thread (it must not
    /// block), including the last one (`stopped`, `dead`). Once per supervisor: false when a
    /// hook is set already.
    pub(crate) fn on_publish(&self, hook: crate::shared::PublishHook) -> bool {
        self.shared.on_publish(hook)
    }

    /// Has `hook` run once the supervisor has ended (stopped or dead), on its reader thread (it
    /// must not block), or at once when it has ended already. Once per supervisor: false when a
    /// hook is set already.
    pub(crate) fn on_end(&self, hook: crate::shared::PublishHook) -> bool {
        self.shared.on_end(hook)
    }

    /// Waits until a dialog is pending and returns the first one.
    pub fn wait_for_dialog(&self, timeout: Duration) -> Option<PendingDialog> {
        self.wait_for(timeout, |s| !s.pending_dialogs.is_empty())
            .and_then(|s| s.pending_dialogs.first().cloned())
    }

    /// Where it is in its life: the published snapshot's `state`, except that it is
    /// [`SupervisorState::Stopped`] from the moment a stop is asked for (the snapshot says so
    /// once the reader has ended).
    pub fn state(&self) -> SupervisorState {
        self.shared.with_state(SupervisorState::clone)
    }

    /// True until the supervisor is stopped or has given up (its reconnect budget is spent, or
    /// its page target went away). While it reconnects it is alive but not `active`, and calls
    /// fail at once.
    pub fn is_alive(&self) -> bool {
        self.shared.with_state(|s| {
            matches!(
                s,
                SupervisorState::Active | SupervisorState::Reconnecting { .. }
            )
        })
    }

    /// True while connected and attached to its page ([`SupervisorState::Active`]).
    pub fn is_active(&self) -> bool {
        self.shared
            .with_state(|s| matches!(s, SupervisorState::Active))
    }

    /// `Ok` while active; otherwise the error a call gets: "reconnecting" while it reconnects,
    /// "not active" once it has ended.
    pub(crate) fn ensure_alive(&self) -> Result<(), Error> {
        self.shared.with_state(|s| match s {
            SupervisorState::Active => Ok(()),
            SupervisorState::Reconnecting { .. } => Err(Error::ConnectionLost(format!(
                "the connection of task {:?} dropped; the supervisor is reconnecting",
                self.task_id
            ))),
            SupervisorState::Stopped | SupervisorState::Dead { .. } => {
                Err(Error::NotActive(self.task_id.clone()))
            }
        })
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
            return Err(crate::core::policy::blocked_error(b));
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
                                .map(|d| {
                                    format!(
                                        "{} ({}: {})",
                                        d.id,
                                        d.kind,
                                        crate::quote::quoted(&d.message)
                                    )
                                })
                                .collect::<Vec<_>>()
                                .join(", "),
                        });
                    }
                },
            };
        let accept = action == DialogAction::Accept;
        let text = match (accept, prompt_text) {
            (true, Some(t)) => Some(t),
            (true, None) if dialog.kind == DialogKind::Prompt => {
                Some(dialog.default_prompt.as_str())
            }
            _ => None,
        };
        let c = answer_command(dialog, accept, text, ClosedBy::Agent);
        self.shared
            .round_trip(c, Deadline::after(self.config.call_timeout))?;
        Ok(dialog.clone())
    }
}

/// [`crate::endpoint::connect`] on a helper thread, so that `cancel` ends the wait at once
/// (the connect's system calls cannot be interrupted). A connection that completes after the
/// cancel is shut down by the helper; the helper ends by the connect's own deadline.
fn connect_cancellable(
    cdp_url: &str,
    opts: &ConnectOptions,
    deadline: Deadline,
    cancel: &CancelToken,
) -> Result<crate::transport::Transport, Error> {
    let (tx, rx) = bounded(1);
    let (url, opts) = (cdp_url.to_string(), opts.clone());
    std::thread::Builder::new()
        .name("cdp-connect".into())
        .stack_size(READER_STACK)
        .spawn(move || {
            let result = crate::endpoint::connect(&url, &opts, deadline);
            if let Err(crossbeam_channel::SendError(Ok(transport))) = tx.send(result) {
                transport.shutdown();
            }
        })
        .map_err(|e| Error::Io(format!("cannot spawn a thread: {e}")))?;
    crossbeam_channel::select! {
        recv(rx) -> r => r.unwrap_or_else(|_| Err(Error::Io("the connect thread ended without an answer".into()))),
        recv(cancel.receiver()) -> _ => Err(Error::Cancelled("connect".into())),
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
