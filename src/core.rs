//! The supervisor's state machine: CDP messages in, state changes and outgoing commands out.
//!
//! [`Core`] does no I/O and reads no clock: the entry points that need the time
//! ([`Core::on_text`], [`Core::register`], [`Core::on_disconnect`]) take a [`Now`] their caller
//! read. The reader thread (`crate::reader`) owns the only instance, reads the clock once per
//! batch, feeds it every incoming message and every call registration, carries out the
//! [`Outgoing`] actions it queues, publishes [`Core::snapshot`] when [`Core::take_dirty`] says
//! the visible state changed, and then hands replies to the callers waiting for them. The
//! scenario tests in `core/tests.rs` drive it on a simulated clock, without sockets.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use log::{debug, info, warn};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::clock::Now;
use crate::config::{BridgeMode, DialogPolicy, Limits};
use crate::core::frames::Frames;
use crate::deadline::{Deadline, Left};
use crate::error::Error;

mod console;
mod dialogs;
pub(crate) mod frames;
mod pages;
pub(crate) mod policy;
mod reconnect;
mod session;
mod targets;
#[cfg(test)]
mod tests;

use crate::protocol::{self, CdpError, Incoming};
use crate::snapshot::{
    Blocked, BlockedReason, ClosedBy, ClosedDialog, ConsoleEntry, DialogKind, PageInfo,
    PendingDialog, Renderer, Snapshot, SupervisorState,
};
pub use dialogs::answer_command;
pub use session::{SessionKind, session_setup};

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
    /// `Page.enable` on the page session or on an OOPIF's: its reply means that document is
    /// not wedged (and clears a `blocked` naming that session).
    PageEnable {
        /// The session it was sent on.
        session_id: String,
    },
    /// `Page.getFrameTree`: the reply seeds the frame map for that session.
    SeedFrameTree {
        /// The session it was sent on.
        session_id: String,
    },
    /// A browser-level call sent once the attach sequence has probed a session whose
    /// `Page.enable` hangs (SPEC §4.5): if `Page.enable` on that session is still unanswered
    /// when this reply comes, `blocked` (the probe's verdict) is published.
    ProbeBlocked {
        /// The session whose `Page.enable` hangs.
        session_id: String,
        /// What to publish.
        blocked: Blocked,
    },
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
    /// `Runtime.getIsolateId` on a page or OOPIF session: the reply says which renderer the
    /// session's document runs in (`core::policy`), unless a newer document came since.
    IsolateId {
        /// The session it was sent on.
        session_id: String,
        /// The session's document number it was sent for (see `Core::isolates`).
        generation: u64,
    },
    /// Fire-and-forget automation; errors are logged at debug level.
    Automatic,
    /// A browser-level round trip sent when the page target went away while browser-level
    /// calls were still waiting: once it is answered, every reply written before it has
    /// arrived, and the supervisor may end (SPEC §11: the reply to `Target.closeTarget` comes
    /// after the page's detach).
    PageGoneDrain,
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
    /// Once this has passed, nobody waits for the reply any more and the entry may be purged
    /// ([`Deadline::NEVER`]: kept until its reply comes or the connection ends).
    pub expires: Deadline,
}

/// A command to send (registered under a fresh id first): what the state machine queues, and
/// what every caller hands to `Shared::send_command`, the one outbound path.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    /// The CDP method.
    pub method: Cow<'static, str>,
    /// Its params.
    pub params: Value,
    /// Target session (`None`: browser-level).
    pub session_id: Option<String>,
    /// What the reply means.
    pub kind: CallKind,
}

impl Command {
    /// A browser-level [`CallKind::Plain`] command; see [`Command::on`] and [`Command::kind`].
    pub fn new(method: impl Into<Cow<'static, str>>, params: Value) -> Command {
        Command {
            method: method.into(),
            params,
            session_id: None,
            kind: CallKind::Plain,
        }
    }

    /// Sent on `session` instead.
    pub fn on(mut self, session: impl Into<String>) -> Command {
        self.session_id = Some(session.into());
        self
    }

    /// Its reply means `kind` to the state machine.
    pub fn kind(mut self, kind: CallKind) -> Command {
        self.kind = kind;
        self
    }
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
    /// `browser.follow_popups`: follow the pages the task's page opens (issue 14).
    pub follow_popups: bool,
}

/// What a child session is attached to.
#[derive(Debug, Clone)]
struct Session {
    target_id: String,
    kind: SessionKind,
    /// The session whose auto-attach produced this one (`None` for the page).
    parent: Option<String>,
}

/// An answer written and not yet acknowledged.
#[derive(Debug)]
struct AnswerInFlight {
    /// Its call id.
    call_id: u64,
    /// What it said: (accept, prompt text).
    said: (bool, String),
    /// The dialog it was meant for. It differs from the dialog that holds it when the events
    /// showed that the named one was closed by something else and the browser will apply the
    /// answer to the dialog it shows now (SPEC §5).
    named: String,
}

/// A dialog that has opened and not yet been recorded as closed.
#[derive(Debug)]
struct OpenDialog {
    public: PendingDialog,
    /// When it opened (for the proxy signature in `auto` bridge mode).
    opened: Instant,
    /// Answers that will land on this dialog, written and not yet acknowledged.
    answers_in_flight: Vec<AnswerInFlight>,
    /// `javascriptDialogClosed` arrived while an answer was in flight; the ack decides who closed it.
    closed_event: Option<(bool, String)>,
    /// False for a native dialog that opened past `limits.pending_dialogs_max`: the supervisor
    /// dismisses it at once and never lists it as pending.
    shown: bool,
    /// The browser refused an answer with "No dialog is showing" although no Closed event came:
    /// the dialog still blocks its frame but CDP can no longer answer it (SPEC §5, §11). It is
    /// out of `pending_dialogs` and reported through `blocked` until a Closed event or a new
    /// document of its frame (a reload) ends it.
    unanswerable: bool,
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
    /// The session whose hanging `Page.enable` `blocked` is about: its answer, or the session
    /// going away, clears `blocked`.
    blocked_session: Option<String>,
    /// A bridge request was refused for the pending-dialog cap and not yet logged.
    cap_logged: bool,
    /// The bridge is installed on every page/iframe session (mode `on`, or `auto` after the
    /// proxy signature was seen).
    bridge_active: bool,
    /// Set when this supervisor cannot go on (its page target went away): no reconnect.
    fatal: Option<String>,
    /// The page target went away; [`Core::fatal`] follows once the browser-level calls that
    /// were waiting then have had their replies (see [`CallKind::PageGoneDrain`]).
    page_gone: Option<String>,
    /// Tracked sessions whose renderer crashed (`Inspector.targetCrashed`); a subset of
    /// `sessions`' keys, so bounded by them.
    crashed_sessions: HashSet<String>,
    /// The popups and new tabs the task follows (issue 14), oldest first; the task's own page
    /// is not in it. At most `limits.pages_max`.
    pages: Vec<PageInfo>,
    /// A popup was left alone because of `limits.pages_max`.
    pages_truncated: bool,
    /// Popups past `limits.pages_max` watched for their dialogs only (SPEC §8 "No silent
    /// wedge"), oldest first; at most `limits.watched_pages_max`.
    watched: Vec<PageInfo>,
    /// A popup was left alone because of `limits.watched_pages_max` (logged once).
    watch_truncated: bool,
    /// Per page and OOPIF session: its document number (bumped by each new document of the
    /// session's own frame) and the `Runtime.getIsolateId` answered for that document
    /// (`core::policy`). Bounded by `sessions`.
    isolates: HashMap<String, (u64, Option<String>)>,
    /// The browsing-context group of each page (the task's, followed, watched): the target id of
    /// the first page of its chain of openers that can script each other. Bounded by the pages.
    page_groups: HashMap<String, String>,
    /// The published `renderers` map is out of date: set when a session comes or goes, an
    /// isolate id is learnt or forgotten, or a session's own document changes (its site).
    renderers_changed: bool,
    out: Vec<Outgoing>,
    deliveries: Vec<(Sender<CallResult>, CallResult)>,
    version: u64,
    dirty: bool,
    published: Snapshot,
    dialogs_changed: bool,
    recent_changed: bool,
    console_changed: bool,
    pages_changed: bool,
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
            blocked_session: None,
            cap_logged: false,
            bridge_active,
            fatal: None,
            page_gone: None,
            crashed_sessions: HashSet::new(),
            pages: Vec::new(),
            pages_truncated: false,
            watched: Vec::new(),
            watch_truncated: false,
            isolates: HashMap::new(),
            page_groups: HashMap::new(),
            renderers_changed: true,
            out: Vec::new(),
            deliveries: Vec::new(),
            version: 0,
            dirty: true,
            published: Snapshot::empty(task_id, cdp_url_redacted),
            dialogs_changed: true,
            recent_changed: true,
            console_changed: true,
            pages_changed: true,
        }
    }

    /// Records a call before its command is written, so its reply finds it. `now` decides which
    /// abandoned calls a purge drops.
    pub fn register(&mut self, id: u64, call: PendingCall, now: Now) {
        if let CallKind::DialogAnswer {
            dialog_id,
            accept,
            prompt_text,
            ..
        } = &call.kind
        {
            let flight = AnswerInFlight {
                call_id: id,
                said: (*accept, prompt_text.clone().unwrap_or_default()),
                named: dialog_id.clone(),
            };
            let native = call.method == "Page.handleJavaScriptDialog";
            self.track_answer(flight, native, call.session_id.as_deref());
        }
        if self.calls.len() >= PURGE_EVERY && self.calls.len().is_power_of_two() {
            self.calls.retain(|_, c| {
                c.expires.left_at(now.instant) != Left::Passed
                    || !matches!(c.kind, CallKind::Plain | CallKind::Agent { .. })
            });
        }
        let mut call = call;
        if let Some(err) = self.refusal(&call)
            && let Some(tx) = call.reply.take()
        {
            self.deliveries.push((tx, Err(err)));
        }
        if let CallKind::Agent { known_dialogs } = &call.kind
            && call.reply.is_some()
            && let Some(d) = self
                .open
                .iter()
                .find(|d| !known_dialogs.contains(&d.public.id) && self.dialog_blocks(d, &call))
        {
            let (dialog, unanswerable) = (d.public.clone(), d.unanswerable);
            self.deliver_blocked(&mut call, dialog, unanswerable);
        }
        self.calls.insert(id, call);
    }

    /// Why a caller's call must fail at once instead of waiting for a reply that cannot come:
    /// its session died with the page, or its renderer crashed (SPEC §10).
    fn refusal(&self, call: &PendingCall) -> Option<Error> {
        let sid = call.session_id.as_deref()?;
        if !matches!(call.kind, CallKind::Plain | CallKind::Agent { .. }) || call.reply.is_none() {
            return None;
        }
        if let Some(reason) = &self.page_gone {
            return Some(Error::ConnectionLost(reason.clone()));
        }
        if self.crashed_sessions.contains(sid) && !answered_when_crashed(&call.method) {
            return Some(Error::TargetCrashed {
                what: self.describe_session(sid),
                method: call.method.clone(),
            });
        }
        None
    }

    /// `the page` or `frame <target id>`, for messages.
    fn describe_session(&self, sid: &str) -> String {
        if self.page_session_id.as_deref() == Some(sid) {
            return "the page".into();
        }
        match self.sessions.get(sid) {
            Some(s) => format!("frame {}", s.target_id),
            None => format!("session {sid}"),
        }
    }

    /// Whether open dialog `d` stands between in-flight call `call` and its reply (SPEC §8,
    /// the rule in [`policy::dialog_blocks`]). Only dialogs that wait for the agent
    /// (`must_respond`, not yet closed) and dialogs CDP can no longer answer block anything.
    fn dialog_blocks(&self, d: &OpenDialog, call: &PendingCall) -> bool {
        let Some(sid) = call.session_id.as_deref() else {
            return false; // browser-level calls are never affected
        };
        if !d.unanswerable
            && (self.settings.policy != DialogPolicy::MustRespond || d.closed_event.is_some())
        {
            return false;
        }
        policy::dialog_blocks(self, &d.public, sid, &call.method)
            && blocks_in_flight(&d.public.kind, &call.method)
    }

    /// What the dialog rule knows of the renderer behind document session `sid`
    /// ([`policy::Renderer`]); `None` for workers and sessions not tracked.
    pub(crate) fn renderer_of(&self, sid: &str) -> Option<Renderer> {
        let s = self.sessions.get(sid)?;
        if s.kind == SessionKind::Worker {
            return None;
        }
        let page = self.page_of_session(sid)?;
        let group = self
            .page_groups
            .get(page)
            .map_or(page, String::as_str)
            .to_string();
        let isolate = self.isolates.get(sid).and_then(|(_, i)| i.clone());
        let site = match s.kind {
            // Its frames are not tracked: the URL of its document, from its own events.
            SessionKind::Watched => self
                .watched
                .iter()
                .find(|p| p.session_id == sid)
                .and_then(|p| policy::site_key(&frames::origin_of(&p.url))),
            _ => self
                .frames
                .origin_of(&s.target_id)
                .and_then(policy::site_key),
        };
        Some(Renderer {
            isolate,
            group,
            site,
        })
    }

    /// Session `sid`'s own frame has a new document, perhaps in another renderer: what it runs
    /// in is unknown until a new `Runtime.getIsolateId` answers.
    pub(super) fn renderer_moved(&mut self, sid: &str) {
        let entry = self.isolates.entry(sid.to_string()).or_insert((0, None));
        entry.0 += 1;
        entry.1 = None;
        let probe = session::isolate_probe(sid, entry.0);
        self.out.push(Outgoing::Command(probe));
        self.renderers_changed = true;
        self.dirty = true;
    }

    /// The answer to a [`CallKind::IsolateId`]: recorded if it is about the session's current
    /// document; then in-flight calls are checked again against the dialogs open now.
    fn isolate_known(&mut self, session_id: &str, generation: u64, raw: &RawValue) {
        let Some(id) = serde_json::from_str::<Value>(raw.get())
            .ok()
            .and_then(|v| v.get("id")?.as_str().map(str::to_string))
        else {
            return;
        };
        if !self.sessions.contains_key(session_id) {
            return;
        }
        let entry = self
            .isolates
            .entry(session_id.to_string())
            .or_insert((0, None));
        if entry.0 != generation {
            return;
        }
        entry.1 = Some(clip(id, 128));
        self.renderers_changed = true;
        self.dirty = true;
        for pos in 0..self.open.len() {
            self.fail_calls_blocked_by(pos, false);
        }
    }

    /// Fails every in-flight agent call that the dialog at `pos` of `open` blocks; with
    /// `known`, also those whose caller saw it pending when it made the call (the dialog has
    /// just become unanswerable).
    fn fail_calls_blocked_by(&mut self, pos: usize, known: bool) {
        let d = &self.open[pos];
        let blocked: Vec<u64> = self
            .calls
            .iter()
            .filter(|(_, c)| {
                let CallKind::Agent { known_dialogs } = &c.kind else {
                    return false;
                };
                c.reply.is_some()
                    && (known || !known_dialogs.contains(&d.public.id))
                    && self.dialog_blocks(d, c)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in blocked {
            let dialog = self.open[pos].public.clone();
            let unanswerable = self.open[pos].unanswerable;
            if let Some(mut call) = self.calls.remove(&id) {
                debug!(
                    "task {}: {} (id {id}) is blocked by dialog {}",
                    self.task_id, call.method, dialog.id
                );
                self.deliver_blocked(&mut call, dialog, unanswerable);
                self.calls.insert(id, call);
            }
        }
    }

    /// Tells an in-flight agent call that `dialog` blocks it. For a native dialog the call is
    /// abandoned (its late reply is dropped): Chromium sends a call's reply before the events of
    /// a dialog raised after it, so the reply cannot be on its way. A bridge dialog's request
    /// takes another path through the browser, and can overtake the reply of the call that
    /// scheduled it: the caller keeps its channel and takes a reply that comes within
    /// `BRIDGE_REPLY_GRACE` (`supervisor/calls.rs`) instead.
    /// A dialog CDP can no longer answer (`unanswerable`) gives [`Error::DialogUnanswerable`]
    /// instead: the caller must reload, not answer.
    fn deliver_blocked(
        &mut self,
        call: &mut PendingCall,
        dialog: PendingDialog,
        unanswerable: bool,
    ) {
        let bridge = dialog.bridge_request_id.is_some();
        let tx = if bridge {
            if let CallKind::Agent { known_dialogs } = &mut call.kind {
                known_dialogs.push(dialog.id.clone());
            }
            call.reply.clone()
        } else {
            call.reply.take()
        };
        if let Some(tx) = tx {
            let err = if unanswerable {
                Error::DialogUnanswerable {
                    id: dialog.id,
                    frame_id: dialog.frame_id,
                }
            } else {
                Error::BlockedByDialog {
                    dialog: Box::new(dialog),
                    method: call.method.clone(),
                }
            };
            self.deliveries.push((tx, Err(err)));
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
        p.crashed = self
            .page_session_id
            .as_ref()
            .is_some_and(|s| self.crashed_sessions.contains(s));
        p.version = self.version;
        if std::mem::take(&mut self.dialogs_changed) {
            p.pending_dialogs = self
                .open
                .iter()
                .filter(|d| d.shown && !d.unanswerable && d.closed_event.is_none())
                .map(|d| d.public.clone())
                .collect();
            p.unanswerable = self
                .open
                .iter()
                .filter(|d| d.unanswerable)
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
            self.pages_changed = true;
        }
        if std::mem::take(&mut self.pages_changed) {
            let pages = self.pages_list();
            let p = &mut self.published;
            p.pages = pages.into();
            p.pages_truncated = self.pages_truncated;
            p.watched_pages = self.watched.clone().into();
        }
        if std::mem::take(&mut self.renderers_changed) {
            let renderers = self
                .sessions
                .keys()
                .filter_map(|sid| Some((sid.clone(), self.renderer_of(sid)?)))
                .collect();
            self.published.renderers = Arc::new(renderers);
        }
        self.published.clone()
    }

    /// Installs the bridge on one session.
    fn bridge_setup(&mut self, session_id: &str) {
        let commands = session::bridge_commands(session_id);
        self.out.extend(commands.into_iter().map(Outgoing::Command));
    }

    /// Queues the set-up of a new session of `kind` ([`session_setup`]), the bridge included
    /// when it is on.
    fn set_up_session(&mut self, session_id: &str, kind: SessionKind) {
        let commands = session_setup(session_id, kind, self.bridge_active);
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
        self.dirty = true;
    }

    /// Clears `blocked` when it is about `session_id` (its `Page.enable` answered, or the
    /// session went away).
    fn unblock(&mut self, session_id: &str, why: &str) {
        if self.blocked.is_some() && self.blocked_session.as_deref() == Some(session_id) {
            let what = match self.blocked.take().and_then(|b| b.frame_id) {
                Some(f) => format!("iframe {f}"),
                None => "the page".into(),
            };
            self.blocked_session = None;
            info!("task {}: {what} {why}; no longer blocked", self.task_id);
            self.dirty = true;
        }
    }

    fn deliver(&mut self, call: PendingCall, result: CallResult) {
        if let Some(tx) = call.reply {
            self.deliveries.push((tx, result));
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
                            self.follow_popups_from_now();
                        }
                    }
                    CallKind::SeedFrameTree { session_id } => {
                        if let Some(tree) = protocol::decode::<protocol::GetFrameTree>(Some(raw)) {
                            let is_page = self.page_session_id.as_deref() == Some(session_id);
                            let session_id = session_id.clone();
                            self.frames.seed(&session_id, &tree.frame_tree, is_page);
                            // The session's own document is known now: its site too.
                            self.renderers_changed = true;
                            self.dirty = true;
                        }
                    }
                    CallKind::PageEnable { session_id } => {
                        let session_id = session_id.clone();
                        self.unblock(&session_id, "answers again");
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
                        let still_hangs = self.calls.values().any(|c| {
                            matches!(&c.kind, CallKind::PageEnable { session_id: s } if s == session_id)
                        });
                        if still_hangs && self.blocked.is_none() {
                            warn!(
                                "task {}: {} does not answer while the browser does: {}",
                                self.task_id,
                                blocked
                                    .frame_id
                                    .as_deref()
                                    .map_or("the page".to_string(), |f| format!("iframe {f}")),
                                if blocked.reason == BlockedReason::OrphanedDialog {
                                    "a dialog opened by a client that went away is blocking it"
                                } else {
                                    "a busy script, or a dialog no client can answer"
                                }
                            );
                            self.blocked = Some(blocked.clone());
                            self.blocked_session = Some(session_id.clone());
                            self.dirty = true;
                        }
                    }
                    _ => {}
                }
                // A reply that does not decode (nested deeper than serde_json's 128 levels,
                // say) is an error, never a success with a wrong value.
                let value = if call.reply.is_some() {
                    serde_json::from_str(raw.get()).map_err(|e| Error::UndecodableReply {
                        method: call.method.clone(),
                        reason: e.to_string(),
                    })
                } else {
                    Ok(Value::Null)
                };
                self.deliver(call, value);
            }
        }
        self.finish_page_gone_if_drained();
    }

    /// Once the page is gone and no browser-level caller waits any more, the supervisor ends.
    pub(crate) fn finish_page_gone_if_drained(&mut self) {
        if self.fatal.is_some() || self.page_gone.is_none() {
            return;
        }
        let waiting = self.calls.values().any(|c| {
            c.session_id.is_none() && c.reply.is_some() && c.kind != CallKind::PageGoneDrain
        });
        if !waiting {
            self.fatal.clone_from(&self.page_gone);
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
                    kind: SessionKind::Page,
                    parent: None,
                },
            );
            self.page_groups
                .insert(target_id.to_string(), target_id.to_string());
            self.renderers_changed = true;
            self.dirty = true;
        }
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
                if self.sessions.contains_key(session) =>
            {
                if self.is_watched_session(session) {
                    self.watched_frame_event(method, session, params);
                } else {
                    self.frame_event(method, session, params, now);
                }
            }
            "Fetch.requestPaused" => self.request_paused(session, params, now),
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

/// Whether a call of `method` still gets an answer from a page whose renderer crashed. Measured
/// on Chromium 156: `Page.navigate` and `Page.reload` answer at once and bring a new renderer;
/// everything else on the crashed session waits until then, and is answered "Target crashed".
pub fn answered_when_crashed(method: &str) -> bool {
    matches!(method, "Page.navigate" | "Page.reload")
}

/// What a call of `method` does when a dialog that blocks it is already pending (SPEC §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WithDialog {
    /// Chromium answers it with a dialog open: send it.
    Send,
    /// Chromium does not answer it (or drops it) while the dialog is open: fail at once, unsent.
    Refuse,
    /// Not measured: send it, and fail after `DIALOG_GRACE` (`supervisor/calls.rs`) without a
    /// reply.
    Grace,
}

/// [`WithDialog`] for `method`, from what was measured on Chromium (`crate::measured`).
/// `Input.*` events are refused although Chromium answers them: it drops the event (the page
/// never sees the click or key), so "success" would be a lie.
pub fn with_dialog_pending(method: &str) -> WithDialog {
    if method.starts_with("Input.") {
        return WithDialog::Refuse;
    }
    match crate::measured::answered_with_dialog_open(method) {
        Some(true) => WithDialog::Send,
        Some(false) => WithDialog::Refuse,
        None => WithDialog::Grace,
    }
}

/// Whether a call of `method` that is in flight when a `dialog_kind` dialog opens on its
/// session waits on that dialog. Methods measured to answer while a dialog is open carry on,
/// except input events (the click whose handler opened the dialog answers only once the dialog
/// is gone) and `Page.navigate`/`Page.close` under the `beforeunload` dialog they raised (their
/// reply waits for the answer; `Page.reload`'s does not: measured).
pub fn blocks_in_flight(dialog_kind: &DialogKind, method: &str) -> bool {
    if method.starts_with("Input.") {
        return true;
    }
    match crate::measured::answered_with_dialog_open(method) {
        Some(true) => {
            *dialog_kind == DialogKind::BeforeUnload
                && matches!(method, "Page.navigate" | "Page.close")
        }
        _ => true,
    }
}

/// The hint published with `blocked` when a probe proved a dialog on the page (SPEC §4.5, §11).
pub const ORPHAN_HINT: &str = "A JavaScript dialog opened by a CDP client that has disconnected is \
blocking this page. It cannot be answered over CDP (the browser replies 'No dialog is showing'). \
Reload or navigate the page (browser_cdp Page.reload or Page.navigate) to clear it; the supervisor \
then finishes attaching by itself.";

/// The hint published with `blocked` when a probe proved a dialog in an out-of-process iframe.
pub const ORPHAN_FRAME_HINT: &str = "A JavaScript dialog opened by a CDP client that has \
disconnected is blocking the cross-origin iframe named by frame_id (the rest of the page still \
answers). It cannot be answered over CDP (the browser replies 'No dialog is showing'). Reload the \
page (browser_cdp Page.reload, without frame_id) to clear it.";

/// The hint published with `blocked` for a dialog CDP can no longer answer (SPEC §5, §11).
pub const UNANSWERABLE_HINT: &str = "A JavaScript dialog in the frame named by frame_id still \
blocks it, but the browser no longer lets CDP answer it ('No dialog is showing'; Chromium does this to \
an iframe's dialog raised while another dialog was open). Reload the page (browser_cdp Page.reload) to \
clear it.";

/// The hint published with `blocked` when the page (or the iframe named by `frame_id`) does not
/// answer and no probe proved a dialog: safe for both causes.
pub const UNRESPONSIVE_HINT: &str = "The page (or the iframe named by frame_id) does not answer CDP \
while the browser does: either a script keeps it busy, or a JavaScript dialog opened by a CDP \
client that went away blocks it. Wait a few seconds first: a busy page answers again by itself and \
blocked then disappears (the supervisor finishes attaching by itself). If it stays blocked, reload \
the page (browser_cdp Page.reload), which clears both causes but loses the page's state.";

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
