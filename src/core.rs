//! The supervisor's state machine: CDP messages in, state changes and outgoing commands out.
//!
//! [`Core`] does no I/O and reads no clock: the entry points that need the time
//! ([`Core::on_text`], [`Core::register`], [`Core::on_disconnect`]) take a [`Now`] their caller
//! read. The reader thread (`crate::reader`) owns the only instance, reads the clock once per
//! batch, feeds it every incoming message and every call registration, carries out the
//! [`Outgoing`] actions it queues, publishes what [`Core::take_published`] returns (a new
//! snapshot when the visible state changed), and then hands replies to the callers waiting for
//! them. The scenario tests in `core/tests/` (one file per part, one `Sim` harness) drive it on a simulated clock, without sockets.
//!
//! This file is the dispatch: a message in, to the part it concerns. The state lives in parts
//! that own it and say when what they publish changed, each with its `take_published`:
//! [`Frames`] (`core/frames.rs`), `Dialogs` (`core/dialogs/state.rs`; what the dialog events do
//! is `core/dialogs.rs`), `Console` (`core/console.rs`), `Pages` (`core/pages.rs`: followed and
//! watched popups) and `Sessions` (`core/sessions.rs`: the tracked sessions, their crashes and
//! renderers). The core's own few fields (state, page, `blocked`) are compared with the last
//! snapshot instead. The rules of which dialog or crash fails which call are `core/policy.rs`;
//! the call table is `core/calls.rs`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use log::debug;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::clock::Now;
use crate::config::{BridgeMode, DialogPolicy, Limits};
use crate::protocol::{self, CdpError, Incoming};
use crate::snapshot::{Blocked, Handover, MainDocument, Snapshot, SupervisorState};
use crate::watchdog::WatchdogMsg;

mod calls;
mod choosers;
mod console;
mod created;
mod dialogs;
mod document;
mod downloads;
pub(crate) mod frames;
mod handover;
mod pages;
pub(crate) mod policy;
mod reconnect;
mod session;
mod sessions;
mod targets;
#[cfg(test)]
mod tests;
mod titles;

pub use calls::{CallKind, CallResult, Command, MainWorld, PendingCall};
use choosers::Choosers;
use console::Console;
use created::Created;
use dialogs::Dialogs;
pub use dialogs::answer_command;
use downloads::Downloads;
pub use downloads::FilesSettings;
use frames::Frames;
use pages::Pages;
pub(crate) use policy::{ORPHAN_FRAME_HINT, ORPHAN_HINT, ORPHAN_OR_POPUP_HINT, UNRESPONSIVE_HINT};
pub use session::{Extras, SessionKind, auto_attach_params, session_setup};
use sessions::Sessions;

/// Something the reader thread must do for the state machine.
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    /// Send a command.
    Command(Command),
    /// Tell the watchdog: arm it for a `must_respond` dialog, or cancel it for one that closed.
    Watchdog(WatchdogMsg),
    /// Move download `guid`'s file from where the browser wrote it (`from`) to where the
    /// snapshot says it is (`to`, in the task's download directory), before publishing; a
    /// failed rename is told to [`Core::download_move_failed`].
    #[allow(missing_docs)]
    MoveDownload {
        guid: String,
        from: PathBuf,
        to: PathBuf,
    },
}

/// Per-task settings the state machine applies.
#[derive(Debug, Clone)]
pub struct CoreSettings {
    /// Dialog policy.
    pub policy: DialogPolicy,
    /// Watchdog time-out for `must_respond`.
    pub dialog_timeout: Duration,
    /// Caps.
    pub limits: Limits,
    /// Dialog bridge mode (SPEC §6).
    pub bridge: BridgeMode,
    /// `browser.follow_popups`: follow the pages the task's page opens (issue 14).
    pub follow_popups: bool,
    /// Whether the supervisor turns browser-level auto-attach on itself to catch those pages.
    /// False when the registry's popup watcher of the browser hands them over instead
    /// (`crate::registry::popups`, issue 24): the task's connection then attaches to each one
    /// and it is followed the same way.
    pub browser_auto_attach: bool,
    /// `browser.capture_console`: `Runtime.enable` on every session, for the console ring (a
    /// page can detect it: SPEC §19). Off, execution contexts are learnt on demand instead.
    pub capture_console: bool,
}

/// The single-writer model of one supervisor: the dispatch and the state that is no part's.
#[derive(Debug)]
pub struct Core {
    task_id: String,
    settings: CoreSettings,
    /// Active, reconnecting, stopped or dead: the reader decides, the snapshot shows it.
    state: SupervisorState,
    /// Why the connection ended, while it is down and after the end.
    disconnect_reason: Option<String>,
    /// The task's page target, once attached (kept across reconnects: the same page is
    /// re-attached).
    page_target_id: Option<String>,
    /// The task's page session on the current connection.
    page_session_id: Option<String>,
    /// The tracked sessions, their crashes and renderers, and the pages' browsing-context groups.
    sessions: Sessions,
    /// Calls registered and not yet answered (`core/calls.rs`).
    calls: HashMap<u64, PendingCall>,
    /// Open and recent dialogs.
    dialogs: Dialogs,
    /// The console ring.
    console: Console,
    /// The frame map.
    frames: Frames,
    /// Followed and watched popups.
    pages: Pages,
    /// The popups followed or watched when the connection dropped, oldest first: attached
    /// again once the task's page is (`core/reconnect.rs`).
    refollow: Vec<String>,
    /// The pages and browser contexts the task created (`core/created.rs`).
    created: Created,
    /// Sessions on which a client of the task's CDP endpoint sent `Page.handleJavaScriptDialog`
    /// (and when): the next dialog closed there is `closed_by: client` (`core/dialogs.rs`).
    client_answers: Vec<(String, Now)>,
    /// The task's downloads.
    downloads: Downloads,
    /// File choosers waiting for files, and the last one refused.
    choosers: Choosers,
    /// The task's page's current document (what a navigation waits for).
    document: Option<MainDocument>,
    /// The task's own page that was gone after a reconnect, replaced by a new one.
    page_replaced: Option<String>,
    /// Sent whenever the page is attached ([`FilesSettings::download_behavior`]).
    download_behavior: Option<Value>,
    /// What makes the page (or one of its iframes) unusable, when something does (SPEC §4.5).
    blocked: Option<Blocked>,
    /// The session whose hanging `Page.enable` `blocked` is about: its answer, or the session
    /// going away, clears `blocked`.
    blocked_session: Option<String>,
    /// The bridge is installed on every page/iframe session (mode `on`, or `auto` after the
    /// proxy signature was seen).
    bridge_active: bool,
    /// Whether a person holds the task (`core/handover.rs`); kept across reconnects.
    handover: Handover,
    /// Set when this supervisor cannot go on (its page target went away): no reconnect.
    fatal: Option<String>,
    /// The page target went away; [`Core::fatal`] follows once the browser-level calls that
    /// were waiting then have had their replies (see [`CallKind::PageGoneDrain`]).
    page_gone: Option<String>,
    /// What the reader must do ([`Core::take_outgoing`]).
    out: Vec<Outgoing>,
    /// Replies for callers ([`Core::take_deliveries`]).
    deliveries: Vec<(Sender<CallResult>, CallResult)>,
    /// The last snapshot built; the next one shares its unchanged parts.
    published: Snapshot,
}

impl Core {
    /// A fresh model for `task_id` (the URL is already redacted).
    pub fn new(task_id: &str, cdp_url_redacted: &str, settings: CoreSettings) -> Core {
        let limits = &settings.limits;
        Core {
            task_id: task_id.to_string(),
            state: SupervisorState::Active,
            disconnect_reason: None,
            page_target_id: None,
            page_session_id: None,
            sessions: Sessions::new(),
            calls: HashMap::new(),
            dialogs: Dialogs::new(limits),
            console: Console::new(limits.console_errors_max),
            frames: Frames::new(limits.clone(), settings.capture_console),
            pages: Pages::new(limits, settings.follow_popups),
            refollow: Vec::new(),
            created: Created::default(),
            client_answers: Vec::new(),
            downloads: Downloads::new(None),
            choosers: Choosers::new(limits.pending_dialogs_max, false),
            document: None,
            page_replaced: None,
            download_behavior: None,
            blocked: None,
            blocked_session: None,
            bridge_active: settings.bridge == BridgeMode::On,
            handover: Handover::default(),
            fatal: None,
            page_gone: None,
            out: Vec::new(),
            deliveries: Vec::new(),
            published: Snapshot::empty(task_id, cdp_url_redacted),
            settings,
        }
    }

    /// Applies one incoming text message, received at `now`.
    pub fn on_text(&mut self, text: &str, now: Now) {
        match protocol::parse(text) {
            Incoming::Reply { id, outcome } => self.on_reply(id, outcome, now),
            Incoming::Event {
                method,
                session_id,
                params,
            } => self.on_event(&method, session_id.as_deref(), params, now),
            Incoming::Malformed(why) => {
                debug!("task {}: ignoring a malformed message: {why}", self.task_id)
            }
        }
    }

    /// Commands and watchdog actions queued since the last call.
    pub fn take_outgoing(&mut self) -> Vec<Outgoing> {
        std::mem::take(&mut self.out)
    }

    /// Replies to hand to callers (after publishing).
    pub fn take_deliveries(&mut self) -> Vec<(Sender<CallResult>, CallResult)> {
        std::mem::take(&mut self.deliveries)
    }

    /// Why this supervisor cannot continue, if it cannot (no reconnect then).
    pub fn fatal(&self) -> Option<&str> {
        self.fatal.as_deref()
    }

    /// The snapshot to publish when the visible state changed since the last one (once), with
    /// the next version; `None` when nothing visible changed.
    pub fn take_published(&mut self) -> Option<Snapshot> {
        self.refresh().then(|| self.next_version())
    }

    /// The snapshot of the current state, with the next version, whether or not anything
    /// changed.
    pub fn snapshot(&mut self) -> Snapshot {
        self.refresh();
        self.next_version()
    }

    fn next_version(&mut self) -> Snapshot {
        self.published.version += 1;
        self.published.clone()
    }

    /// Brings the last snapshot up to date, sharing what did not change: what each part says
    /// changed (its `take_published`), and the core's own fields where they differ. Returns
    /// whether anything visible changed.
    fn refresh(&mut self) -> bool {
        let p = &mut self.published;
        let crashed =
            (self.page_session_id.as_deref()).is_some_and(|s| self.sessions.is_crashed(s));
        let page_changed = set(&mut p.page_target_id, &self.page_target_id)
            | set(&mut p.page_session_id, &self.page_session_id);
        let mut changed = page_changed
            | set(&mut p.state, &self.state)
            | set(&mut p.disconnect_reason, &self.disconnect_reason)
            | set(&mut p.blocked, &self.blocked)
            | set(&mut p.blocked_session, &self.blocked_session)
            | set(&mut p.crashed, &crashed)
            | set(&mut p.document, &self.document)
            | set(&mut p.page_replaced, &self.page_replaced)
            | set(&mut p.handover, &self.handover);
        changed |= self.refresh_files();
        let p = &mut self.published;
        let dialogs = self.dialogs.take_published();
        if let Some((pending, unanswerable)) = dialogs.open {
            p.pending_dialogs = pending;
            p.unanswerable = unanswerable;
            changed = true;
        }
        if let Some(recent) = dialogs.recent {
            p.recent_dialogs = recent;
            changed = true;
        }
        if let Some(console) = self.console.take_published() {
            p.console_errors = console;
            changed = true;
        }
        let frames = self.frames.take_published();
        let frames_changed = frames.is_some();
        if let Some((map, tree)) = frames {
            p.frames = map;
            p.frame_tree = tree;
            changed = true;
        }
        let main = (self.page_target_id.as_deref())
            .map(|t| (t, self.page_session_id.as_deref().unwrap_or_default()));
        let pages = self
            .pages
            .take_published(main, &self.frames, frames_changed || page_changed);
        if let Some(pages) = pages {
            p.pages = pages.pages;
            p.pages_truncated = pages.truncated;
            p.watched_pages = pages.watched;
            p.popups_let_go = pages.let_go;
            changed = true;
        }
        if let Some((targets, contexts)) = self.created.take_published() {
            p.created_targets = targets;
            p.created_contexts = contexts;
            changed = true;
        }
        // A renderer depends on the sessions (their isolates, the pages' groups, a watched
        // page's new document: `Sessions`) and on the sites of their own documents (the frames'
        // origins): rebuilt when either may have moved, kept when it is the same.
        if self.sessions.take_changed() | self.frames.take_origins_changed() {
            let renderers = self.renderers();
            if renderers != *self.published.renderers {
                self.published.renderers = Arc::new(renderers);
                changed = true;
            }
        }
        changed
    }

    /// Installs the bridge on one session.
    fn bridge_setup(&mut self, session_id: &str) {
        let commands = session::bridge_commands(session_id);
        self.out.extend(commands.into_iter().map(Outgoing::Command));
    }

    /// Queues the set-up of a new session of `kind` ([`session_setup`]), the bridge and
    /// `Runtime.enable` included when they are on.
    fn set_up_session(&mut self, session_id: &str, kind: SessionKind) {
        let extras = Extras {
            bridge: self.bridge_active,
            console: self.settings.capture_console,
        };
        let commands = session_setup(session_id, kind, extras);
        self.out.extend(commands.into_iter().map(Outgoing::Command));
    }

    /// Turns the bridge on for the page and every tracked iframe session.
    fn activate_bridge(&mut self) {
        if std::mem::replace(&mut self.bridge_active, true) {
            return;
        }
        let sessions: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.kind.shows_documents())
            .map(|(id, _)| id.clone())
            .collect();
        for s in sessions {
            self.bridge_setup(&s);
        }
    }

    // ---------------------------------------------------------------- replies

    fn on_reply(&mut self, id: u64, outcome: Result<&RawValue, CdpError>, now: Now) {
        let Some(call) = self.calls.remove(&id) else {
            debug!(
                "task {}: reply to unknown or abandoned id {id}",
                self.task_id
            );
            return;
        };
        if call.kind == CallKind::PageGoneDrain {
            self.fatal.clone_from(&self.page_gone);
            return;
        }
        if matches!(call.kind, CallKind::Agent { .. }) && call.reply.is_none() {
            debug!(
                "task {}: dropping the late reply to {} (id {id}), abandoned because a dialog \
                 blocked it",
                self.task_id, call.method
            );
            return;
        }
        match (&call.kind, outcome) {
            (CallKind::DialogAnswer { dialog_id, by, .. }, outcome) => {
                let (dialog_id, by) = (dialog_id.clone(), *by);
                let result = self.on_answer_reply(id, &dialog_id, by, outcome, &call.method, now);
                self.deliver(call, result);
            }
            (_, Err(e)) => {
                if let CallKind::AdoptPage { target_id } = &call.kind {
                    debug!(
                        "task {}: page {target_id}, created by a client, is gone: {}",
                        self.task_id, e.message
                    );
                    let target_id = target_id.clone();
                    self.created.forget_adopted(&target_id);
                }
                if call.kind == CallKind::Automatic {
                    debug!(
                        "task {}: {} failed: {}",
                        self.task_id, call.method, e.message
                    );
                }
                let result = call.reply_result(Err(e));
                self.deliver(call, result);
            }
            (kind, Ok(raw)) => {
                match kind {
                    CallKind::AttachPage { target_id } => {
                        if let Some(sid) = serde_json::from_str::<Value>(raw.get())
                            .ok()
                            .and_then(|v| v.get("sessionId")?.as_str().map(str::to_string))
                        {
                            let target_id = target_id.clone();
                            self.set_page_session(&sid, &target_id);
                            self.follow_popups_from_now();
                        }
                    }
                    CallKind::SeedFrameTree { session_id } => {
                        if let Some(tree) = protocol::decode::<protocol::GetFrameTree>(Some(raw)) {
                            let is_page = self.page_session_id.as_deref() == Some(session_id);
                            let session_id = session_id.clone();
                            self.frames.seed(&session_id, &tree.frame_tree, is_page);
                        }
                    }
                    CallKind::ChooserDone { id } => {
                        let id = id.clone();
                        self.file_chooser_done(&id);
                    }
                    CallKind::Responds { session_id } => {
                        let session_id = session_id.clone();
                        self.unblock(&session_id, "answers again");
                    }
                    CallKind::Agent {
                        main_world: Some(w),
                        ..
                    } => {
                        let session = call.session_id.as_deref().unwrap_or_default();
                        self.frames
                            .main_world_found(session, &w.frame_id, w.document, w.context);
                    }
                    CallKind::IsolateId {
                        session_id,
                        generation,
                    } => {
                        let (session_id, generation) = (session_id.clone(), *generation);
                        self.isolate_known(&session_id, generation, raw);
                    }
                    CallKind::ProbeBlocked {
                        session_id,
                        blocked,
                    } => {
                        let (session_id, blocked) = (session_id.clone(), blocked.clone());
                        self.probe_verdict(&session_id, blocked);
                    }
                    CallKind::PageTitle { target_id } => {
                        let target_id = target_id.clone();
                        self.title_known(&target_id, raw);
                    }
                    CallKind::Handover { hold, ack } => {
                        let (hold, ack) = (*hold, ack.clone());
                        self.set_held(hold, ack, now);
                    }
                    _ => {}
                }
                let value = call.reply_result(Ok(raw));
                if let Ok(v) = &value {
                    self.note_created(&call.method, v);
                }
                self.deliver(call, value);
            }
        }
        self.finish_page_gone_if_drained();
    }

    // ---------------------------------------------------------------- events

    fn on_event(
        &mut self,
        method: &str,
        session_id: Option<&str>,
        params: Option<&RawValue>,
        now: Now,
    ) {
        let session = session_id.unwrap_or("");
        match method {
            "Page.javascriptDialogOpening" => {
                if let Some(ev) = protocol::decode::<protocol::DialogOpening>(params) {
                    self.dialog_opened(session, ev, now);
                }
            }
            "Page.javascriptDialogClosed" => {
                if let Some(ev) = protocol::decode::<protocol::DialogClosed>(params) {
                    self.dialog_closed(session, ev, now);
                }
            }
            "Page.frameAttached"
            | "Page.frameNavigated"
            | "Page.frameDetached"
            | "Page.navigatedWithinDocument"
            | "Inspector.targetCrashed"
            | "Inspector.targetReloadedAfterCrash"
            | "Runtime.executionContextCreated"
            | "Runtime.executionContextDestroyed"
            | "Runtime.executionContextsCleared"
                // Frame ownership only ever comes from sessions we attached: a stray session
                // must not take over (or delete) frames it does not own. A watched page
                // (a popup past `limits.pages_max`) is watched for its dialogs only.
                if self.sessions.contains(session) =>
            {
                if self.is_watched_session(session) {
                    self.watched_frame_event(method, session, params);
                } else {
                    self.frame_event(method, session, params, now);
                }
            }
            "Fetch.requestPaused" => self.request_paused(session, params, now),
            "Page.downloadWillBegin" | "Browser.downloadWillBegin" => {
                self.download_will_begin(session_id, params, now)
            }
            "Page.downloadProgress" | "Browser.downloadProgress" => {
                self.download_progress(params, now)
            }
            "Page.fileChooserOpened" => self.file_chooser_opened(session, params, now),
            "Page.loadEventFired" => {
                self.document_loaded(session);
                self.page_loaded(session);
            }
            "Runtime.consoleAPICalled" => self.console_api(session, params, now),
            "Runtime.exceptionThrown" => self.exception_thrown(session, params, now),
            "Target.attachedToTarget" => {
                if let Some(ev) = protocol::decode::<protocol::AttachedToTarget>(params) {
                    self.target_attached(session_id, ev);
                }
            }
            "Target.detachedFromTarget" => {
                if let Some(ev) = protocol::decode::<protocol::DetachedFromTarget>(params) {
                    self.unblock(&ev.session_id, "went away");
                    self.target_detached(ev, now);
                }
            }
            "Target.targetCrashed" => {
                if let Some(ev) = protocol::decode::<protocol::TargetCrashed>(params)
                    && let Some(sid) = self.session_of_target(&ev.target_id)
                {
                    self.target_crashed(&sid);
                }
            }
            _ => {}
        }
    }

    fn command(&mut self, method: &'static str, params: Value, session_id: Option<String>) {
        self.out.push(Outgoing::Command(Command {
            method: method.into(),
            params,
            session_id,
            kind: CallKind::Automatic,
        }));
    }
}

/// Sets `slot` to `value` when they differ; returns whether they did.
fn set<T: PartialEq + Clone>(slot: &mut T, value: &T) -> bool {
    let differs = slot != value;
    if differs {
        slot.clone_from(value);
    }
    differs
}

/// How much page-controlled text one field keeps (URLs, console text; a dialog's message keeps
/// eight times as much).
const MAX_TEXT: usize = 2048;

/// Truncates on a char boundary so page-controlled text cannot grow state without bound.
fn clip(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}
