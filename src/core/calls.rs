//! Calls: what a command is and what its reply means ([`Command`], [`CallKind`]), the call table
//! (every call registered with the reader and not yet answered), and the calls the state
//! machine fails before their reply comes (SPEC §8, §10): into a renderer that crashed, on a
//! page that went away, or blocked by a dialog (the rules are `core/policy.rs`).

use std::borrow::Cow;

use crossbeam_channel::Sender;
use log::debug;
use serde_json::Value;
use serde_json::value::RawValue;

use super::dialogs::{AnswerInFlight, OpenDialog};
use super::{Core, policy};
use crate::clock::Now;
use crate::config::DialogPolicy;
use crate::deadline::{Deadline, Left};
use crate::error::Error;
use crate::protocol::CdpError;
use crate::snapshot::{Blocked, ClosedBy, DialogKind, PendingDialog};

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
        /// A check that a frame's main world is this context (`supervisor/main_world.rs`): its
        /// success is recorded in the frame map.
        main_world: Option<MainWorld>,
    },
    /// `Target.attachToTarget` for the page: the reply names the page session.
    AttachPage {
        /// The page target.
        target_id: String,
    },
    /// A call into a session's document whose reply proves that document answers (and clears a
    /// `blocked` naming that session): `Page.enable` on the page session or on an OOPIF's, and
    /// the `Performance.getMetrics` of the stall probe (`supervisor/stall.rs`).
    Responds {
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
        /// The session's document number it was sent for (see `Sessions::document_moved`).
        generation: u64,
    },
    /// `Target.getTargetInfo` of a page the task shows (`core/titles.rs`): the reply's title
    /// is published.
    PageTitle {
        /// The page target.
        target_id: String,
    },
    /// Fire-and-forget automation; errors are logged at debug level.
    Automatic,
    /// `Target.attachToTarget` of a page a client of the task's CDP endpoint created
    /// (`core/created.rs`): when it fails, the page is gone and no longer attached again after
    /// a reconnect.
    AdoptPage {
        /// The page target.
        target_id: String,
    },
    /// The supervisor's answer to file chooser `id` (`DOM.setFileInputFiles`), or a round trip
    /// that dismisses it: once it succeeds, the chooser is no longer pending.
    ChooserDone {
        /// `fc-N`.
        id: String,
    },
    /// A browser-level round trip sent when the page target went away while browser-level
    /// calls were still waiting: once it is answered, every reply written before it has
    /// arrived, and the supervisor may end (SPEC §11: the reply to `Target.closeTarget` comes
    /// after the page's detach).
    PageGoneDrain,
    /// A browser-level round trip that carries a hand-over or a take-back to the reader
    /// (`core/handover.rs`): applied when its reply comes, published before the caller hears.
    Handover {
        /// True: a person takes the task; false: the agent has it back.
        hold: bool,
        /// Sent to the watchdog once the change is applied (`WatchdogMsg::Ack`).
        ack: Option<crate::watchdog::Ack>,
    },
}

/// A frame's main-world context, as a caller found it through the DOM (SPEC §19: without
/// `Runtime.enable`), for the document the frame showed then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MainWorld {
    /// The frame.
    pub frame_id: String,
    /// Its document number then (`FrameRecord::document`).
    pub document: u64,
    /// The context.
    pub context: i64,
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

/// Once the call table holds this many entries (and at each doubling after), entries whose
/// caller gave up (deadline passed, reply never came) are purged.
pub(super) const PURGE_EVERY: usize = 1024;

impl PendingCall {
    /// What a reply means to whoever waits for this call, beyond what the state machine reads
    /// from it: the result, decoded (one that does not decode, nested deeper than serde_json's
    /// 128 levels, say, is an error, never a success with a wrong value; not decoded when
    /// nobody waits), or the browser's error.
    pub fn reply_result(&self, outcome: Result<&RawValue, CdpError>) -> CallResult {
        match outcome {
            Ok(_) if self.reply.is_none() => Ok(Value::Null),
            Ok(raw) => serde_json::from_str(raw.get()).map_err(|e| Error::UndecodableReply {
                method: self.method.clone(),
                reason: e.to_string(),
            }),
            Err(e) => Err(Error::Cdp {
                method: self.method.clone(),
                code: e.code,
                message: e.message,
            }),
        }
    }

    /// A caller waits for its reply: a [`CallKind::Plain`] or [`CallKind::Agent`] call that
    /// still has its reply channel. Only those are refused for a crash or a lost page.
    pub(super) fn awaited_by_caller(&self) -> bool {
        matches!(self.kind, CallKind::Plain | CallKind::Agent { .. }) && self.reply.is_some()
    }
}

impl Core {
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
            self.dialogs
                .track_answer(flight, native, call.session_id.as_deref());
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
        if let CallKind::Agent { known_dialogs, .. } = &call.kind
            && call.reply.is_some()
            && let Some(d) = self
                .dialogs
                .open()
                .iter()
                .find(|d| !known_dialogs.contains(&d.public.id) && self.holds_up(d, &call))
            && let Some(delivery) = blocked_delivery(&mut call, &d.public, d.unanswerable)
        {
            self.deliveries.push(delivery);
        }
        self.calls.insert(id, call);
    }

    /// Why a caller's call must fail at once instead of waiting for a reply that cannot come:
    /// its session died with the page, or its renderer crashed (SPEC §10,
    /// [`policy::crash_refusal`]).
    fn refusal(&self, call: &PendingCall) -> Option<Error> {
        let sid = call.session_id.as_deref()?;
        if !call.awaited_by_caller() {
            return None;
        }
        if let Some(reason) = &self.page_gone {
            return Some(Error::ConnectionLost(reason.clone()));
        }
        if self.sessions.is_crashed(sid) {
            return policy::crash_refusal(&self.describe_session(sid), &call.method);
        }
        None
    }

    /// `the page` or `frame <target id>`, for messages.
    pub(super) fn describe_session(&self, sid: &str) -> String {
        if self.page_session_id.as_deref() == Some(sid) {
            return "the page".into();
        }
        match self.sessions.get(sid) {
            Some(s) => format!("frame {}", s.target_id),
            None => format!("session {sid}"),
        }
    }

    /// Whether open dialog `d` stands between in-flight call `call` and its reply (SPEC §8,
    /// [`policy::fails_in_flight`]). Only dialogs that wait for the agent (`must_respond`, not
    /// yet closed) and dialogs CDP can no longer answer hold calls up.
    fn holds_up(&self, d: &OpenDialog, call: &PendingCall) -> bool {
        let Some(sid) = call.session_id.as_deref() else {
            return false; // browser-level calls are never affected
        };
        let holds = d.unanswerable
            || ((self.settings.policy == DialogPolicy::MustRespond || self.handover.is_held())
                && d.closed_event.is_none());
        policy::fails_in_flight(self, &d.public, holds, sid, &call.method)
    }

    /// Fails every in-flight agent call that the open dialog at `pos` blocks; with `known`,
    /// also those whose caller saw it pending when it made the call (the dialog has just become
    /// unanswerable).
    pub(super) fn fail_calls_blocked_by(&mut self, pos: usize, known: bool) {
        let d = &self.dialogs.open()[pos];
        let blocked: Vec<u64> = self
            .calls
            .iter()
            .filter(|(_, c)| {
                let CallKind::Agent { known_dialogs, .. } = &c.kind else {
                    return false;
                };
                c.reply.is_some()
                    && (known || !known_dialogs.contains(&d.public.id))
                    && self.holds_up(d, c)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in blocked {
            if let Some(call) = self.calls.get_mut(&id) {
                debug!(
                    "task {}: {} (id {id}) is blocked by dialog {}",
                    self.task_id, call.method, d.public.id
                );
                if let Some(delivery) = blocked_delivery(call, &d.public, d.unanswerable) {
                    self.deliveries.push(delivery);
                }
            }
        }
    }

    /// Fails at once every in-flight agent call into the renderer of session `sid`, which a
    /// dialog in a page the supervisor does not watch has frozen (`blocked`, SPEC §8 "No silent
    /// wedge"), except the methods Chromium answers with a dialog open. Their late replies are
    /// dropped.
    pub(super) fn fail_calls_in_renderer_of(&mut self, sid: &str) {
        let Some(blocked) = self.blocked.clone() else {
            return;
        };
        let frozen: Vec<u64> = self
            .calls
            .iter()
            .filter(|(_, c)| {
                matches!(c.kind, CallKind::Agent { .. })
                    && c.reply.is_some()
                    && c.session_id
                        .as_deref()
                        .is_some_and(|s| policy::in_renderer_of(self, sid, s))
                    && policy::blocks_in_flight(&DialogKind::Alert, &c.method)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in frozen {
            if let Some(tx) = self.calls.get_mut(&id).and_then(|c| c.reply.take()) {
                self.deliveries
                    .push((tx, Err(policy::blocked_error(&blocked))));
            }
        }
    }

    /// Hands `result` to the caller of `call`, if one waits.
    pub(super) fn deliver(&mut self, call: PendingCall, result: CallResult) {
        if let Some(tx) = call.reply {
            self.deliveries.push((tx, result));
        }
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
}

/// What an in-flight agent call is told when `dialog` blocks it ([`policy::dialog_error`]). For
/// a native dialog the call is abandoned (its late reply is dropped): Chromium sends a call's
/// reply before the events of a dialog raised after it, so the reply cannot be on its way. A
/// bridge dialog's request takes another path through the browser, and can overtake the reply
/// of the call that scheduled it: the caller keeps its channel and takes a reply that comes
/// within [`policy::BRIDGE_REPLY_GRACE`] instead. A dialog CDP can no longer answer
/// (`unanswerable`) gives [`Error::DialogUnanswerable`]: the caller must reload, not answer.
fn blocked_delivery(
    call: &mut PendingCall,
    dialog: &PendingDialog,
    unanswerable: bool,
) -> Option<(Sender<CallResult>, CallResult)> {
    let tx = if dialog.bridge_request_id.is_some() {
        if let CallKind::Agent { known_dialogs, .. } = &mut call.kind {
            known_dialogs.push(dialog.id.clone());
        }
        call.reply.clone()
    } else {
        call.reply.take()
    }?;
    Some((
        tx,
        Err(policy::dialog_error(dialog, unanswerable, &call.method)),
    ))
}
