//! The supervisor's state machine: CDP messages in, state changes and outgoing commands out.
//!
//! [`Core`] does no I/O. The reader thread ([`crate::supervisor`]) owns the only instance, feeds
//! it every incoming message and every call registration, carries out the [`Outgoing`] actions it
//! queues, publishes [`Core::snapshot`] when [`Core::take_dirty`] says the visible state changed,
//! and then hands replies to the callers waiting for them. Unit tests drive it without sockets.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use log::{debug, info, warn};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::config::{BridgeMode, DialogPolicy, Limits};
use crate::error::Error;
use crate::frames::Frames;

mod console;
mod dialogs;
mod reconnect;
mod targets;

use crate::protocol::{self, CdpError, Incoming};
use crate::state::{
    Blocked, ClosedBy, ClosedDialog, ConsoleEntry, PendingDialog, Snapshot, SupervisorState,
    now_epoch,
};
pub use dialogs::answer_command;

/// What a call is for, beyond handing its reply to a caller.
#[derive(Debug, Clone, PartialEq)]
pub enum CallKind {
    /// Nothing: just deliver the reply.
    Plain,
    /// A caller's call into the page or one of its frames: a dialog that blocks it fails it at
    /// once with [`Error::BlockedByDialog`] (SPEC §8), and its late reply is dropped.
    Agent {
        /// Dialogs the caller already saw pending and accounted for when it made the call.
        known_dialogs: Vec<String>,
    },
    /// `Target.attachToTarget` for the page: the reply names the page session.
    AttachPage {
        /// The page target.
        target_id: String,
    },
    /// `Page.enable` on the page session: its reply means the page is not wedged.
    PageEnable,
    /// `Page.getFrameTree`: the reply seeds the frame map for that session.
    SeedFrameTree {
        /// The session it was sent on.
        session_id: String,
    },
    /// A browser-level call sent while `Page.enable` hangs: if it answers first, a dialog that no
    /// live client owns is blocking the page (SPEC §4.5).
    ProbeBlocked,
    /// `Page.handleJavaScriptDialog` for a dialog.
    DialogAnswer {
        /// `d-N`.
        dialog_id: String,
        /// Who is answering, recorded as `closed_by` when the answer lands.
        by: ClosedBy,
        /// Accept or dismiss.
        accept: bool,
        /// The prompt text sent.
        prompt_text: Option<String>,
    },
    /// Fire-and-forget automation; errors are logged at debug level.
    Automatic,
}

/// The reply a caller receives.
pub type CallResult = Result<Value, Error>;

/// A call whose reply has not arrived yet.
#[derive(Debug)]
pub struct PendingCall {
    /// The CDP method (for messages).
    pub method: String,
    /// The session it was sent on (`None`: browser-level).
    pub session_id: Option<String>,
    /// What the reply means to the state machine.
    pub kind: CallKind,
    /// Where the reply goes; `None` for fire-and-forget.
    pub reply: Option<Sender<CallResult>>,
    /// After this, nobody waits for the reply any more and the entry may be purged.
    pub expires: Option<Instant>,
}

/// A command to send (registered under a fresh id first).
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    /// The CDP method.
    pub method: &'static str,
    /// Its params.
    pub params: Value,
    /// Target session (`None`: browser-level).
    pub session_id: Option<String>,
    /// What the reply means.
    pub kind: CallKind,
}

/// Something the reader thread must do for the state machine.
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    /// Send a command.
    Command(Command),
    /// Start the watchdog for a `must_respond` dialog.
    ArmWatchdog {
        /// `d-N`.
        dialog_id: String,
        /// When to dismiss.
        deadline: Instant,
    },
    /// The dialog has closed: the watchdog must forget it.
    CancelWatchdog {
        /// `d-N`.
        dialog_id: String,
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
}

/// What a child session is attached to.
#[derive(Debug, Clone)]
struct Session {
    target_id: String,
    kind: String,
    /// The session whose auto-attach produced this one (`None` for the page).
    parent: Option<String>,
}

/// A dialog that has opened and not yet been recorded as closed.
#[derive(Debug)]
struct OpenDialog {
    public: PendingDialog,
    /// When it opened (for the proxy signature in `auto` bridge mode).
    opened: Instant,
    /// Answers written and not yet acknowledged: (call id, who answered, what it said).
    answers_in_flight: Vec<(u64, ClosedBy, (bool, String))>,
    /// `javascriptDialogClosed` arrived while an answer was in flight; the ack decides who closed it.
    closed_event: Option<(bool, String)>,
}

/// The single-writer model of one supervisor.
#[derive(Debug)]
pub struct Core {
    task_id: String,
    settings: CoreSettings,
    /// Active, reconnecting, stopped or dead: the reader decides, the snapshot shows it.
    state: SupervisorState,
    disconnect_reason: Option<String>,
    page_target_id: Option<String>,
    page_session_id: Option<String>,
    sessions: HashMap<String, Session>,
    calls: HashMap<u64, PendingCall>,
    next_dialog: u64,
    open: Vec<OpenDialog>,
    recent: VecDeque<Arc<ClosedDialog>>,
    console: VecDeque<Arc<ConsoleEntry>>,
    frames: Frames,
    blocked: Option<Blocked>,
    /// The bridge is installed on every page/iframe session (mode `on`, or `auto` after the
    /// proxy signature was seen).
    bridge_active: bool,
    /// Set when this supervisor cannot go on (its page target went away): no reconnect.
    fatal: Option<String>,
    out: Vec<Outgoing>,
    deliveries: Vec<(Sender<CallResult>, CallResult)>,
    version: u64,
    dirty: bool,
    published: Snapshot,
    dialogs_changed: bool,
    recent_changed: bool,
    console_changed: bool,
}

/// Once the call table holds this many entries (and at each doubling after), entries whose
/// caller gave up (deadline passed, reply never came) are purged.
const PURGE_EVERY: usize = 1024;

impl Core {
    /// A fresh model for `task_id` (the URL is already redacted).
    pub fn new(task_id: &str, cdp_url_redacted: &str, settings: CoreSettings) -> Core {
        let frames = Frames::new(settings.limits.clone());
        let bridge_active = settings.bridge == BridgeMode::On;
        Core {
            task_id: task_id.to_string(),
            settings,
            state: SupervisorState::Active,
            disconnect_reason: None,
            page_target_id: None,
            page_session_id: None,
            sessions: HashMap::new(),
            calls: HashMap::new(),
            next_dialog: 0,
            open: Vec::new(),
            recent: VecDeque::new(),
            console: VecDeque::new(),
            frames,
            blocked: None,
            bridge_active,
            fatal: None,
            out: Vec::new(),
            deliveries: Vec::new(),
            version: 0,
            dirty: true,
            published: Snapshot::empty(task_id, cdp_url_redacted),
            dialogs_changed: true,
            recent_changed: true,
            console_changed: true,
        }
    }

    /// Records a call before its command is written, so its reply finds it.
    pub fn register(&mut self, id: u64, call: PendingCall) {
        if let CallKind::DialogAnswer {
            dialog_id,
            by,
            accept,
            prompt_text,
        } = &call.kind
            && let Some(d) = self.open.iter_mut().find(|d| d.public.id == *dialog_id)
        {
            let said = (*accept, prompt_text.clone().unwrap_or_default());
            d.answers_in_flight.push((id, *by, said));
        }
        if self.calls.len() >= PURGE_EVERY && self.calls.len().is_power_of_two() {
            let now = Instant::now();
            self.calls.retain(|_, c| {
                c.expires.is_none_or(|t| t > now)
                    || !matches!(c.kind, CallKind::Plain | CallKind::Agent { .. })
            });
        }
        let mut call = call;
        if let CallKind::Agent { known_dialogs } = &call.kind
            && call.reply.is_some()
            && let Some(d) = self
                .open
                .iter()
                .find(|d| !known_dialogs.contains(&d.public.id) && self.dialog_blocks(d, &call))
        {
            let err = Error::BlockedByDialog {
                dialog: Box::new(d.public.clone()),
                method: call.method.clone(),
            };
            if let Some(tx) = call.reply.take() {
                self.deliveries.push((tx, Err(err)));
            }
        }
        self.calls.insert(id, call);
    }

    /// Whether open dialog `d` stands between in-flight call `call` and its reply (SPEC §8).
    /// Only dialogs that wait for the agent (`must_respond`, not yet closed) block anything.
    fn dialog_blocks(&self, d: &OpenDialog, call: &PendingCall) -> bool {
        let Some(sid) = call.session_id.as_deref() else {
            return false; // browser-level calls are never affected
        };
        if self.settings.policy != DialogPolicy::MustRespond || d.closed_event.is_some() {
            return false;
        }
        let owner = d
            .public
            .frame_id
            .as_deref()
            .and_then(|f| self.frames.owner_of(f))
            .unwrap_or(d.public.session_id.as_str());
        let hits = owner == sid
            || (call.method.starts_with("Input.") && self.page_session_id.as_deref() == Some(sid));
        hits && blocks_in_flight(&d.public.kind, &call.method)
    }

    /// Fails every in-flight agent call that the dialog at `pos` of `open` blocks.
    fn fail_calls_blocked_by(&mut self, pos: usize) {
        let d = &self.open[pos];
        let blocked: Vec<u64> = self
            .calls
            .iter()
            .filter(|(_, c)| {
                matches!(c.kind, CallKind::Agent { .. })
                    && c.reply.is_some()
                    && self.dialog_blocks(d, c)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in blocked {
            let dialog = self.open[pos].public.clone();
            if let Some(call) = self.calls.get_mut(&id)
                && let Some(tx) = call.reply.take()
            {
                debug!(
                    "task {}: {} (id {id}) is blocked by dialog {}",
                    self.task_id, call.method, dialog.id
                );
                let err = Error::BlockedByDialog {
                    dialog: Box::new(dialog),
                    method: call.method.clone(),
                };
                self.deliveries.push((tx, Err(err)));
            }
        }
    }

    /// Number of calls waiting for a reply (for tests and diagnostics).
    pub fn calls_in_flight(&self) -> usize {
        self.calls.len()
    }

    /// Applies one incoming text message.
    pub fn on_text(&mut self, text: &str) {
        match protocol::parse(text) {
            Incoming::Reply { id, outcome } => self.on_reply(id, outcome),
            Incoming::Event {
                method,
                session_id,
                params,
            } => self.on_event(&method, session_id.as_deref(), params),
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

    /// True (once) when the visible state changed since the last snapshot.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::replace(&mut self.dirty, false)
    }

    /// Why this supervisor cannot continue, if it cannot (no reconnect then).
    pub fn fatal(&self) -> Option<&str> {
        self.fatal.as_deref()
    }

    /// Builds the snapshot of the current state, sharing unchanged parts with the last one.
    pub fn snapshot(&mut self) -> Snapshot {
        self.version += 1;
        let p = &mut self.published;
        p.active = self.state == SupervisorState::Active;
        p.state.clone_from(&self.state);
        p.disconnect_reason.clone_from(&self.disconnect_reason);
        p.page_target_id.clone_from(&self.page_target_id);
        p.page_session_id.clone_from(&self.page_session_id);
        p.blocked.clone_from(&self.blocked);
        p.version = self.version;
        if std::mem::take(&mut self.dialogs_changed) {
            p.pending_dialogs = self
                .open
                .iter()
                .filter(|d| d.closed_event.is_none())
                .map(|d| d.public.clone())
                .collect();
        }
        if std::mem::take(&mut self.recent_changed) {
            p.recent_dialogs = self.recent.iter().cloned().collect();
        }
        if std::mem::take(&mut self.console_changed) {
            p.console_errors = self.console.iter().cloned().collect();
        }
        if let Some((map, tree)) = self.frames.take_published() {
            p.frames = map;
            p.frame_tree = tree;
        }
        p.clone()
    }

    /// Whether the dialog bridge is installed (SPEC §6).
    pub fn bridge_active(&self) -> bool {
        self.bridge_active
    }

    /// Installs the bridge on one session: the script, then the narrow Fetch interception.
    fn bridge_setup(&mut self, session_id: &str) {
        let sid = Some(session_id.to_string());
        self.command(
            "Page.addScriptToEvaluateOnNewDocument",
            crate::bridge::add_script_params(),
            sid.clone(),
        );
        self.command("Fetch.enable", crate::bridge::fetch_enable_params(), sid);
    }

    /// Turns the bridge on for the page and every tracked iframe session.
    fn activate_bridge(&mut self) {
        if std::mem::replace(&mut self.bridge_active, true) {
            return;
        }
        let sessions: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.kind == "page" || s.kind == "iframe")
            .map(|(id, _)| id.clone())
            .collect();
        for s in sessions {
            self.bridge_setup(&s);
        }
        self.dirty = true;
    }

    fn deliver(&mut self, call: PendingCall, result: CallResult) {
        if let Some(tx) = call.reply {
            self.deliveries.push((tx, result));
        }
    }

    // ---------------------------------------------------------------- replies

    fn on_reply(&mut self, id: u64, outcome: Result<&RawValue, CdpError>) {
        let Some(call) = self.calls.remove(&id) else {
            debug!(
                "task {}: reply to unknown or abandoned id {id}",
                self.task_id
            );
            return;
        };
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
                let result = self.on_answer_reply(id, &dialog_id, by, outcome, &call.method);
                self.deliver(call, result);
            }
            (_, Err(e)) => {
                if call.kind == CallKind::Automatic {
                    debug!(
                        "task {}: {} failed: {}",
                        self.task_id, call.method, e.message
                    );
                }
                let err = Error::Cdp {
                    method: call.method.clone(),
                    code: e.code,
                    message: e.message,
                };
                self.deliver(call, Err(err));
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
                        }
                    }
                    CallKind::SeedFrameTree { session_id } => {
                        if let Some(tree) = protocol::decode::<protocol::GetFrameTree>(Some(raw)) {
                            let is_page = self.page_session_id.as_deref() == Some(session_id);
                            let session_id = session_id.clone();
                            self.frames.seed(&session_id, &tree.frame_tree, is_page);
                            self.dirty = true;
                        }
                    }
                    CallKind::PageEnable if self.blocked.is_some() => {
                        self.blocked = None;
                        info!(
                            "task {}: the page answers again; no longer blocked",
                            self.task_id
                        );
                        self.dirty = true;
                    }
                    CallKind::ProbeBlocked => {
                        let page_enable_pending =
                            self.calls.values().any(|c| c.kind == CallKind::PageEnable);
                        if page_enable_pending && self.blocked.is_none() {
                            warn!(
                                "task {}: the page does not answer while the browser does: a dialog \
                                 opened by a client that went away is blocking it",
                                self.task_id
                            );
                            self.blocked = Some(Blocked {
                                reason: "orphaned_dialog".into(),
                                hint: ORPHAN_HINT.into(),
                            });
                            self.dirty = true;
                        }
                    }
                    _ => {}
                }
                let value = if call.reply.is_some() {
                    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
                } else {
                    Value::Null
                };
                self.deliver(call, Ok(value));
            }
        }
    }

    fn set_page_session(&mut self, session_id: &str, target_id: &str) {
        if self.page_session_id.as_deref() != Some(session_id) {
            if self.bridge_active {
                self.bridge_setup(session_id);
            }
            self.page_session_id = Some(session_id.to_string());
            self.page_target_id = Some(target_id.to_string());
            if matches!(self.state, SupervisorState::Reconnecting { .. }) {
                // Re-attached after a reconnect: active again.
                self.state = SupervisorState::Active;
                self.disconnect_reason = None;
            }
            self.sessions.insert(
                session_id.to_string(),
                Session {
                    target_id: target_id.to_string(),
                    kind: "page".into(),
                    parent: None,
                },
            );
            self.dirty = true;
        }
    }

    // ---------------------------------------------------------------- events

    fn on_event(&mut self, method: &str, session_id: Option<&str>, params: Option<&RawValue>) {
        let session = session_id.unwrap_or("");
        match method {
            "Page.javascriptDialogOpening" => {
                if let Some(ev) = protocol::decode::<protocol::DialogOpening>(params) {
                    self.dialog_opened(session, ev);
                }
            }
            "Page.javascriptDialogClosed" => {
                if let Some(ev) = protocol::decode::<protocol::DialogClosed>(params) {
                    self.dialog_closed(session, ev);
                }
            }
            "Page.frameAttached"
            | "Page.frameNavigated"
            | "Page.frameDetached"
            | "Runtime.executionContextCreated"
            | "Runtime.executionContextDestroyed"
            | "Runtime.executionContextsCleared"
                // Frame ownership only ever comes from sessions we attached: a stray session
                // must not take over (or delete) frames it does not own.
                if self.sessions.contains_key(session) =>
            {
                self.frame_event(method, session, params);
            }
            "Fetch.requestPaused" => self.request_paused(session, params),
            "Runtime.consoleAPICalled" => self.console_api(session, params),
            "Runtime.exceptionThrown" => self.exception_thrown(session, params),
            "Target.attachedToTarget" => {
                if let Some(ev) = protocol::decode::<protocol::AttachedToTarget>(params) {
                    self.target_attached(session_id, ev);
                }
            }
            "Target.detachedFromTarget" => {
                if let Some(ev) = protocol::decode::<protocol::DetachedFromTarget>(params) {
                    self.target_detached(ev);
                }
            }
            _ => {}
        }
    }

    fn command(&mut self, method: &'static str, params: Value, session_id: Option<String>) {
        self.out.push(Outgoing::Command(Command {
            method,
            params,
            session_id,
            kind: CallKind::Automatic,
        }));
    }
}

/// Whether a call of `method` that is in flight when a `dialog_kind` dialog opens on its
/// session waits on that dialog. Methods measured to answer while a dialog is open carry on,
/// except that a navigation, reload or close waits on the `beforeunload` dialog it raised.
pub fn blocks_in_flight(dialog_kind: &str, method: &str) -> bool {
    match crate::measured::answered_with_dialog_open(method) {
        Some(true) => {
            dialog_kind == "beforeunload"
                && matches!(method, "Page.navigate" | "Page.reload" | "Page.close")
        }
        _ => true,
    }
}

/// The hint published with `blocked` (SPEC §4.5, §11).
pub const ORPHAN_HINT: &str = "A JavaScript dialog opened by a CDP client that has disconnected is \
blocking this page. It cannot be answered over CDP (the browser replies 'No dialog is showing'). \
Reload or navigate the page (browser_cdp Page.reload or Page.navigate) to clear it; the supervisor \
then finishes attaching by itself.";

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

/// Shared form of a snapshot for publishing.
pub type Published = Arc<Snapshot>;
