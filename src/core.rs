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

use crate::config::{DialogPolicy, Limits};
use crate::error::Error;
use crate::frames::Frames;
use crate::protocol::{self, CdpError, Incoming};
use crate::state::{
    Blocked, ClosedBy, ClosedDialog, ConsoleEntry, PendingDialog, Snapshot, now_epoch,
};

/// What a call is for, beyond handing its reply to a caller.
#[derive(Debug, Clone, PartialEq)]
pub enum CallKind {
    /// Nothing: just deliver the reply.
    Plain,
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

/// Something the reader thread must do for the state machine.
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    /// Send a command (registered under a fresh id first).
    Command {
        /// The CDP method.
        method: &'static str,
        /// Its params.
        params: Value,
        /// Target session (`None`: browser-level).
        session_id: Option<String>,
        /// What the reply means.
        kind: CallKind,
    },
    /// Start the watchdog for a `must_respond` dialog.
    ArmWatchdog {
        /// `d-N`.
        dialog_id: String,
        /// Where the dismissal goes.
        session_id: String,
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
    active: bool,
    disconnect_reason: Option<String>,
    page_target_id: Option<String>,
    page_session_id: Option<String>,
    sessions: HashMap<String, Session>,
    calls: HashMap<u64, PendingCall>,
    next_dialog: u64,
    open: Vec<OpenDialog>,
    recent: VecDeque<ClosedDialog>,
    console: VecDeque<ConsoleEntry>,
    frames: Frames,
    blocked: Option<Blocked>,
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

/// How long an entry for a caller that gave up may stay in the call table before a purge.
const PURGE_EVERY: usize = 1024;

impl Core {
    /// A fresh model for `task_id` (the URL is already redacted).
    pub fn new(task_id: &str, cdp_url_redacted: &str, settings: CoreSettings) -> Core {
        let frames = Frames::new(settings.limits.clone());
        Core {
            task_id: task_id.to_string(),
            settings,
            active: true,
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
            self.calls
                .retain(|_, c| c.expires.is_none_or(|t| t > now) || c.kind != CallKind::Plain);
        }
        self.calls.insert(id, call);
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

    /// A new connection is up: forget everything that belonged to the old one (sessions, frames,
    /// open dialogs, blocked) but keep the dialog counter and the recent/console rings. Returns
    /// the page target to re-attach to, preferably.
    pub fn reset_for_reconnect(&mut self) -> Option<String> {
        for d in self.open.drain(..) {
            warn!(
                "task {}: dialog {} was open when the connection dropped; if it is still open the \
                 page will show as blocked",
                self.task_id, d.public.id
            );
            self.out.push(Outgoing::CancelWatchdog {
                dialog_id: d.public.id,
            });
        }
        self.sessions.clear();
        self.frames = Frames::new(self.settings.limits.clone());
        self.blocked = None;
        self.active = true;
        self.disconnect_reason = None;
        self.page_session_id = None;
        self.dialogs_changed = true;
        self.dirty = true;
        self.page_target_id.take()
    }

    /// The connection ended: fail every waiting call at once and mark the state inactive.
    pub fn on_disconnect(&mut self, reason: &str) {
        self.active = false;
        self.disconnect_reason = Some(reason.to_string());
        for (_, call) in self.calls.drain() {
            if let Some(tx) = call.reply {
                self.deliveries
                    .push((tx, Err(Error::ConnectionLost(reason.to_string()))));
            }
        }
        self.dirty = true;
    }

    /// Builds the snapshot of the current state, sharing unchanged parts with the last one.
    pub fn snapshot(&mut self) -> Snapshot {
        self.version += 1;
        let p = &mut self.published;
        p.active = self.active;
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
                .collect::<Vec<_>>()
                .into();
        }
        if std::mem::take(&mut self.recent_changed) {
            p.recent_dialogs = self.recent.iter().cloned().collect::<Vec<_>>().into();
        }
        if std::mem::take(&mut self.console_changed) {
            p.console_errors = self.console.iter().cloned().collect::<Vec<_>>().into();
        }
        if let Some((map, tree)) = self.frames.take_published() {
            p.frames = map;
            p.frame_tree = tree;
        }
        p.clone()
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
            self.page_session_id = Some(session_id.to_string());
            self.page_target_id = Some(target_id.to_string());
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
            "Runtime.consoleAPICalled" => self.console_api(params),
            "Runtime.exceptionThrown" => self.exception_thrown(params),
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

    fn frame_event(&mut self, method: &str, session: &str, params: Option<&RawValue>) {
        match method {
            "Page.frameAttached" => {
                if let Some(ev) = protocol::decode::<protocol::FrameAttached>(params) {
                    self.dirty |= self
                        .frames
                        .attached(session, &ev.frame_id, &ev.parent_frame_id);
                }
            }
            "Page.frameNavigated" => {
                if let Some(ev) = protocol::decode::<protocol::FrameNavigated>(params) {
                    let is_page = self.page_session_id.as_deref() == Some(session);
                    self.dirty |= self.frames.navigated(session, &ev.frame, is_page);
                }
            }
            "Page.frameDetached" => {
                if let Some(ev) = protocol::decode::<protocol::FrameDetached>(params) {
                    self.dirty |= self
                        .frames
                        .detached(session, &ev.frame_id, ev.reason.as_deref());
                }
            }
            "Runtime.executionContextCreated" => {
                if let Some(ev) = protocol::decode::<protocol::ExecutionContextCreated>(params)
                    && let Some(aux) = ev.context.aux_data
                    && aux.is_default
                    && let Some(frame_id) = aux.frame_id
                {
                    self.dirty |= self
                        .frames
                        .context_created(session, &frame_id, ev.context.id);
                }
            }
            "Runtime.executionContextDestroyed" => {
                if let Some(ev) = protocol::decode::<protocol::ExecutionContextDestroyed>(params) {
                    self.dirty |= self
                        .frames
                        .context_destroyed(session, ev.execution_context_id);
                }
            }
            "Runtime.executionContextsCleared" => {
                self.dirty |= self.frames.contexts_cleared(session);
            }
            _ => {}
        }
    }

    fn target_attached(&mut self, parent_session: Option<&str>, ev: protocol::AttachedToTarget) {
        let info = ev.target_info;
        if ev.session_id.is_empty() {
            return;
        }
        if parent_session.is_none() {
            // Browser-level: only the page we asked to attach to concerns us (it may arrive before
            // the attach reply).
            let ours = self.calls.values().any(|c| {
                matches!(&c.kind, CallKind::AttachPage { target_id } if *target_id == info.target_id)
            });
            if ours {
                self.set_page_session(&ev.session_id, &info.target_id);
            }
            return;
        }
        let parent = parent_session.unwrap_or_default().to_string();
        let sid = ev.session_id.clone();
        let child = Some(sid.clone());
        let room = self.sessions.len() < self.settings.limits.frames_max;
        match info.kind.as_str() {
            "iframe" if room => {
                self.sessions.insert(
                    sid.clone(),
                    Session {
                        target_id: info.target_id.clone(),
                        kind: info.kind.clone(),
                        parent: Some(parent.clone()),
                    },
                );
                self.dirty |= self.frames.oopif_attached(
                    &parent,
                    &sid,
                    &info.target_id,
                    &info.url,
                    info.parent_frame_id.as_deref(),
                );
                for method in ["Page.enable", "Runtime.enable"] {
                    self.command(method, json!({}), child.clone());
                }
                self.command(
                    "Target.setAutoAttach",
                    json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
                    child.clone(),
                );
                self.command("Page.getFrameTree", json!({}), child.clone());
                if let Some(Outgoing::Command { kind, .. }) = self.out.last_mut() {
                    *kind = CallKind::SeedFrameTree {
                        session_id: sid.clone(),
                    };
                }
            }
            "worker" | "shared_worker" | "service_worker" if room => {
                self.sessions.insert(
                    sid.clone(),
                    Session {
                        target_id: info.target_id.clone(),
                        kind: info.kind.clone(),
                        parent: Some(parent.clone()),
                    },
                );
                self.command("Runtime.enable", json!({}), child.clone());
            }
            _ => {}
        }
        // Always resume: a paused target that nobody resumes hangs its page.
        if ev.waiting_for_debugger || info.kind == "iframe" {
            self.command("Runtime.runIfWaitingForDebugger", json!({}), child);
        }
    }

    fn target_detached(&mut self, ev: protocol::DetachedFromTarget) {
        let Some(session) = self.sessions.remove(&ev.session_id) else {
            return;
        };
        if self.page_session_id.as_deref() == Some(ev.session_id.as_str()) {
            warn!(
                "task {}: the page target {} went away",
                self.task_id, session.target_id
            );
            self.fatal = Some("the page target was closed or detached".into());
            self.dirty = true;
            return;
        }
        // Sessions attached through this one die with it; Chromium does not always say so.
        let mut gone = vec![ev.session_id.clone()];
        let mut i = 0;
        while i < gone.len() {
            let parent = gone[i].clone();
            let children: Vec<String> = self
                .sessions
                .iter()
                .filter(|(_, s)| s.parent.as_deref() == Some(parent.as_str()))
                .map(|(id, _)| id.clone())
                .collect();
            for c in children {
                if let Some(s) = self.sessions.remove(&c)
                    && s.kind == "iframe"
                {
                    self.dirty |= self.frames.oopif_gone(&c, &s.target_id);
                }
                gone.push(c);
            }
            i += 1;
        }
        if session.kind == "iframe" {
            self.dirty |= self
                .frames
                .oopif_detached(&ev.session_id, &session.target_id);
        }
        // Calls on sessions that went away will never be answered.
        let dead: Vec<u64> = self
            .calls
            .iter()
            .filter(|(_, c)| c.session_id.as_ref().is_some_and(|s| gone.contains(s)))
            .map(|(id, _)| *id)
            .collect();
        for id in dead {
            if let Some(call) = self.calls.remove(&id) {
                self.deliver(call, Err(Error::ConnectionLost("target detached".into())));
            }
        }
    }

    fn command(&mut self, method: &'static str, params: Value, session_id: Option<String>) {
        self.out.push(Outgoing::Command {
            method,
            params,
            session_id,
            kind: CallKind::Automatic,
        });
    }

    // ---------------------------------------------------------------- console

    fn push_console(&mut self, level: &str, text: String, url: String) {
        let max = self.settings.limits.console_errors_max;
        while self.console.len() >= max {
            self.console.pop_front();
        }
        self.console.push_back(ConsoleEntry {
            ts: now_epoch(),
            level: level.to_string(),
            text: clip(text, MAX_TEXT),
            url: clip(url, MAX_TEXT),
        });
        self.console_changed = true;
        self.dirty = true;
    }

    fn console_api(&mut self, params: Option<&RawValue>) {
        #[derive(serde::Deserialize, Default)]
        #[serde(default, rename_all = "camelCase")]
        struct Call {
            #[serde(rename = "type")]
            kind: String,
            args: Vec<Value>,
            stack_trace: Option<Value>,
        }
        let Some(call) = protocol::decode::<Call>(params) else {
            return;
        };
        let level = match call.kind.as_str() {
            "error" | "assert" | "warning" => call.kind.as_str(),
            _ => return,
        };
        let text = call
            .args
            .iter()
            .map(remote_object_text)
            .collect::<Vec<_>>()
            .join(" ");
        let url = call
            .stack_trace
            .as_ref()
            .and_then(|s| s.get("callFrames")?.get(0)?.get("url")?.as_str())
            .unwrap_or("")
            .to_string();
        let level = level.to_string();
        self.push_console(&level, text, url);
    }

    fn exception_thrown(&mut self, params: Option<&RawValue>) {
        let Some(v) = protocol::decode::<Value>(params) else {
            return;
        };
        let d = &v["exceptionDetails"];
        let text = d["exception"]["description"]
            .as_str()
            .or_else(|| d["text"].as_str())
            .unwrap_or("uncaught exception")
            .to_string();
        let url = d["url"].as_str().unwrap_or("").to_string();
        self.push_console("exception", text, url);
    }

    // ---------------------------------------------------------------- dialogs

    fn dialog_opened(&mut self, session: &str, ev: protocol::DialogOpening) {
        // A second dialog on one session means we missed the first one's close.
        let stale: Vec<String> = self
            .open
            .iter()
            .filter(|d| d.public.session_id == session && d.closed_event.is_none())
            .map(|d| d.public.id.clone())
            .collect();
        for id in stale {
            self.finalize(&id, ClosedBy::Remote, None);
        }
        self.next_dialog += 1;
        let default_prompt = ev.default_prompt.unwrap_or_default();
        let dialog = PendingDialog {
            id: format!("d-{}", self.next_dialog),
            kind: clip(ev.kind, 64),
            message: clip(ev.message, MAX_TEXT * 8),
            default_prompt: clip(default_prompt, MAX_TEXT * 8),
            opened_at: now_epoch(),
            frame_id: ev.frame_id.filter(|f| !f.is_empty()),
            url: clip(ev.url, MAX_TEXT),
            session_id: session.to_string(),
        };
        info!(
            "task {}: dialog {} ({}) opened: {:?}",
            self.task_id, dialog.id, dialog.kind, dialog.message
        );
        let (id, kind, default) = (
            dialog.id.clone(),
            dialog.kind.clone(),
            dialog.default_prompt.clone(),
        );
        self.open.push(OpenDialog {
            public: dialog,
            answers_in_flight: Vec::new(),
            closed_event: None,
        });
        self.dialogs_changed = true;
        self.dirty = true;
        match self.settings.policy {
            DialogPolicy::MustRespond => self.out.push(Outgoing::ArmWatchdog {
                dialog_id: id,
                session_id: session.to_string(),
                deadline: Instant::now() + self.settings.dialog_timeout,
            }),
            DialogPolicy::AutoDismiss => self.out.push(answer_command(
                &id,
                session,
                false,
                None,
                ClosedBy::AutoPolicy,
            )),
            DialogPolicy::AutoAccept => {
                // Chromium gives a prompt "" unless the default text is sent explicitly.
                let text = (kind == "prompt").then_some(default.as_str());
                self.out.push(answer_command(
                    &id,
                    session,
                    true,
                    text,
                    ClosedBy::AutoPolicy,
                ))
            }
        }
    }

    fn dialog_closed(&mut self, session: &str, ev: protocol::DialogClosed) {
        let pos = self
            .open
            .iter()
            .position(|d| {
                d.public.session_id == session
                    && d.closed_event.is_none()
                    && (ev.frame_id.is_none() || d.public.frame_id == ev.frame_id)
            })
            .or_else(|| {
                self.open
                    .iter()
                    .position(|d| d.public.session_id == session && d.closed_event.is_none())
            });
        let Some(pos) = pos else {
            debug!(
                "task {}: javascriptDialogClosed for no open dialog",
                self.task_id
            );
            return;
        };
        let d = &mut self.open[pos];
        if d.answers_in_flight.is_empty() {
            let id = d.public.id.clone();
            self.finalize(&id, ClosedBy::Remote, Some((ev.result, ev.user_input)));
        } else {
            // Our answer is on its way: its acknowledgement decides who closed it.
            d.closed_event = Some((ev.result, ev.user_input));
            let id = d.public.id.clone();
            self.out.push(Outgoing::CancelWatchdog { dialog_id: id });
            self.dialogs_changed = true;
            self.dirty = true;
        }
    }

    fn on_answer_reply(
        &mut self,
        call_id: u64,
        dialog_id: &str,
        by: ClosedBy,
        outcome: Result<&RawValue, CdpError>,
        method: &str,
    ) -> CallResult {
        let pos = self.open.iter().position(|d| d.public.id == dialog_id);
        let mut said = None;
        if let Some(pos) = pos {
            let flights = &mut self.open[pos].answers_in_flight;
            if let Some(i) = flights.iter().position(|(id, _, _)| *id == call_id) {
                said = Some(flights.remove(i).2);
            }
        }
        match outcome {
            Ok(_) => {
                if let Some(pos) = pos {
                    // The browser's own account (the Closed event) wins over what we sent.
                    let closed = self.open[pos].closed_event.take().or(said);
                    self.finalize(dialog_id, by, closed);
                }
                Ok(json!({}))
            }
            Err(e) => {
                let gone = e.message.contains("No dialog is showing");
                if let Some(pos) = pos {
                    let d = &self.open[pos];
                    if gone || (d.closed_event.is_some() && d.answers_in_flight.is_empty()) {
                        let closed = self.open[pos].closed_event.take();
                        self.finalize(dialog_id, ClosedBy::Remote, closed);
                    }
                }
                match self.recent.iter().rev().find(|c| c.dialog.id == dialog_id) {
                    Some(c) if gone || pos.is_none() => Err(Error::DialogAlreadyClosed {
                        id: dialog_id.to_string(),
                        closed_by: c.closed_by.as_str().to_string(),
                        detail: e.message,
                    }),
                    _ => Err(Error::Cdp {
                        method: method.to_string(),
                        code: e.code,
                        message: e.message,
                    }),
                }
            }
        }
    }

    fn finalize(&mut self, dialog_id: &str, by: ClosedBy, closed: Option<(bool, String)>) {
        let Some(pos) = self.open.iter().position(|d| d.public.id == dialog_id) else {
            return;
        };
        let d = self.open.remove(pos);
        info!(
            "task {}: dialog {} closed by {}",
            self.task_id, d.public.id, by
        );
        let max = self.settings.limits.recent_dialogs_max;
        while self.recent.len() >= max {
            self.recent.pop_front();
        }
        let (accepted, user_input) = match closed {
            Some((a, u)) => (Some(a), Some(u)),
            None => (None, None),
        };
        self.recent.push_back(ClosedDialog {
            dialog: d.public,
            closed_at: now_epoch(),
            closed_by: by,
            accepted,
            user_input,
        });
        self.out.push(Outgoing::CancelWatchdog {
            dialog_id: dialog_id.to_string(),
        });
        self.dialogs_changed = true;
        self.recent_changed = true;
        self.dirty = true;
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

fn remote_object_text(v: &Value) -> String {
    match v.get("value") {
        Some(Value::String(s)) => s.clone(),
        Some(other) if !other.is_null() => other.to_string(),
        _ => v
            .get("description")
            .and_then(Value::as_str)
            .or_else(|| v.get("type").and_then(Value::as_str))
            .unwrap_or("")
            .to_string(),
    }
}

/// The `Page.handleJavaScriptDialog` command for a dialog.
pub fn answer_command(
    dialog_id: &str,
    session_id: &str,
    accept: bool,
    prompt_text: Option<&str>,
    by: ClosedBy,
) -> Outgoing {
    let mut params = json!({"accept": accept});
    if let Some(t) = prompt_text {
        params["promptText"] = json!(t);
    }
    Outgoing::Command {
        method: "Page.handleJavaScriptDialog",
        params,
        session_id: Some(session_id.to_string()),
        kind: CallKind::DialogAnswer {
            dialog_id: dialog_id.to_string(),
            by,
            accept,
            prompt_text: prompt_text.map(str::to_string),
        },
    }
}

/// Shared form of a snapshot for publishing.
pub type Published = Arc<Snapshot>;
