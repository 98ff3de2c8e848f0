//! One [`Supervisor`] per task: its public API (start, snapshot, dialogs, routed calls, stop).
//!
//! Threads per supervisor:
//! * the **reader** (`crate::reader`, the reader loop): blocks on the socket, drains what arrived, feeds it to the
//!   [`Core`](crate::core::Core) state machine, writes the automatic commands the core queues (fire-and-forget),
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
//! policy, waiting with a cancel token) is in `supervisor/calls.rs`; the start (the
//! [`StartRequest`] and the one path that runs it), in `supervisor/start.rs`.

use crate::sync;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;
use serde_json::json;

use crate::cancel::CancelToken;
use crate::config::{Config, DialogAction, StartOptions};
use crate::core::{Command, answer_command};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::outbound::Outbound;
use crate::shared::{Shared, SnapshotCell};
use crate::snapshot::{ClosedBy, DialogKind, PendingDialog, Snapshot, SupervisorState};

mod calls;
mod files;
mod handover;
mod main_world;
mod navigate;
mod stall;
pub(crate) use stall::pages_opened_by;
mod start;
mod stop;
mod thumbnail;

pub use calls::{CallRequest, Route};
pub use files::DOWNLOAD_BEGIN_GRACE;
pub use navigate::{Navigation, WaitUntil};
pub use start::StartRequest;
pub use thumbnail::Thumbnail;

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
    /// disconnects the reader's end ([`Reader::wake_reader`](crate::reader::Reader::wake_reader)) and so cuts any reconnect
    /// back-off or attempt short, now and in every later wait (a message on a one-slot channel
    /// would wake one wait only).
    wake_reader: Mutex<Option<Sender<()>>>,
    /// The task's download directory (made at start; removed at stop unless `downloads.keep`).
    download_dir: Option<std::path::PathBuf>,
    /// The latest navigation, for `wait_for_navigation` (callers' state, not the reader's).
    last_navigation: Mutex<Option<navigate::LastNavigation>>,
    /// Downloads `wait_for_download` returned already.
    downloads_taken: Mutex<std::collections::HashSet<String>>,
    /// The last thumbnail (`supervisor/thumbnail.rs`).
    thumbnail: Mutex<thumbnail::ThumbnailCache>,
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

impl Supervisor {
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
        if self.config.follow_popups() {
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

    /// Has `observer` run after every publish from now on, on the reader thread (it must not
    /// block), beside the publish hook; any number of them.
    pub(crate) fn observe(&self, observer: crate::shared::Observer) {
        self.shared.observe(observer);
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

    /// Answers a pending dialog and waits for the browser's acknowledgement:
    /// [`Supervisor::answer_dialog`] of that [`DialogAnswer`].
    ///
    /// `dialog_id` may be omitted when exactly one dialog is pending. Accepting a prompt without
    /// `prompt_text` returns its default text, as pressing OK on the native dialog would.
    pub fn respond_to_dialog(
        &self,
        action: DialogAction,
        prompt_text: Option<&str>,
        dialog_id: Option<&str>,
    ) -> Result<PendingDialog, Error> {
        let answer = DialogAnswer::new(action)
            .with_prompt_text(prompt_text)
            .with_dialog_id(dialog_id);
        self.answer_dialog(answer)
    }

    /// The one dialog-answer path: answers the dialog `answer` names (or the only one pending)
    /// and waits for the browser's acknowledgement up to `supervisor.call_timeout_s`, or until
    /// its token is cancelled ([`Error::Cancelled`]: the answer may still reach the browser,
    /// and its acknowledgement is dropped).
    /// Fails with [`Error::HeldByHuman`] while a person holds the task.
    pub fn answer_dialog(&self, answer: DialogAnswer<'_>) -> Result<PendingDialog, Error> {
        self.ensure_agent_may_act()?;
        self.answer_as(answer, ClosedBy::Agent)
    }

    /// [`Supervisor::answer_dialog`] recorded as closed `by` the agent or a person
    /// ([`Supervisor::respond_as_human`]), without the check of who may act.
    fn answer_as(&self, answer: DialogAnswer<'_>, by: ClosedBy) -> Result<PendingDialog, Error> {
        let DialogAnswer {
            action,
            prompt_text,
            dialog_id,
            cancel,
        } = answer;
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
        let c = answer_command(dialog, accept, text, by);
        let deadline = Deadline::after(self.config.call_timeout());
        self.shared
            .start_call(c, deadline)?
            .wait(deadline, cancel)?;
        Ok(dialog.clone())
    }
}

/// The answer to one pending dialog, as a value: accept or dismiss, the text for a prompt, which
/// dialog (`None`: the only one pending), and a token that abandons the wait for the browser's
/// acknowledgement. Built with [`DialogAnswer::new`] and the `with_*` setters; given to
/// [`Supervisor::answer_dialog`] ([`Supervisor::respond_to_dialog`] builds one).
#[derive(Debug, Clone, Copy)]
pub struct DialogAnswer<'a> {
    action: DialogAction,
    prompt_text: Option<&'a str>,
    dialog_id: Option<&'a str>,
    cancel: Option<&'a CancelToken>,
}

impl<'a> DialogAnswer<'a> {
    /// `action` on the only pending dialog, without prompt text or token.
    pub fn new(action: DialogAction) -> DialogAnswer<'a> {
        DialogAnswer {
            action,
            prompt_text: None,
            dialog_id: None,
            cancel: None,
        }
    }

    /// The text a prompt is accepted with (`None`, the default: the prompt's own default
    /// text).
    pub fn with_prompt_text(mut self, text: impl Into<Option<&'a str>>) -> DialogAnswer<'a> {
        self.prompt_text = text.into();
        self
    }

    /// Which dialog, as `PendingDialog::id` names it (`None`, the default: the only one
    /// pending).
    pub fn with_dialog_id(mut self, dialog_id: impl Into<Option<&'a str>>) -> DialogAnswer<'a> {
        self.dialog_id = dialog_id.into();
        self
    }

    /// Has `cancel` abandon the wait for the acknowledgement at once (a token or an `Option`
    /// of one).
    pub fn with_cancel(mut self, cancel: impl Into<Option<&'a CancelToken>>) -> DialogAnswer<'a> {
        self.cancel = cancel.into();
        self
    }
}
