//! Native dialogs in the state machine (SPEC §5): what the dialog events and the answers'
//! acknowledgements do, and the one place where `closed_by` is decided ([`Core::finalize`]).
//! The dialogs themselves (open, recent, the id counter, the cap) are owned by [`Dialogs`]
//! (`dialogs/state.rs`), which publishes them.
//!
//! Which dialog an answer reached. Chromium applies `Page.handleJavaScriptDialog` to whichever
//! dialog the session shows when the command arrives, not to the one the caller meant. On one
//! connection it sends `javascriptDialogClosed` and then the reply before the page can run on and
//! open another dialog (measured on Chromium 156: Closed, reply, next Opening). So an `Opening`
//! on a session that arrives while an answer to an older dialog of that session is still
//! unacknowledged proves that the answer did not close the older one (something else did): the
//! older one is recorded `remote`, and the answer is carried over to the new dialog, where the
//! browser will apply it (or refuse it). When its acknowledgement comes, the new dialog is
//! closed by whoever answered, and the caller gets [`Error::AnswerAppliedToOtherDialog`] naming
//! it. An answer registered after its dialog already closed is attached the same way to the
//! dialog its session shows.
//!
//! Caps (SPEC §14): at most `limits.pending_dialogs_max` dialogs are open at once. A bridge
//! request past the cap is failed (`Fetch.failRequest`) and never becomes a dialog: the page's
//! own `fetch`/XHR flood is answered with a network error, and a genuine `alert`/`confirm`/
//! `prompt` falls back to the native dialog. A native dialog past the cap cannot be refused, so
//! the supervisor dismisses it at once, as `auto_dismiss` would, without listing it as pending;
//! it is recorded in `recent_dialogs` as `auto_policy`.

use std::time::Duration;

use log::{debug, info, warn};
use serde_json::json;
use serde_json::value::RawValue;

use super::{CallKind, CallResult, Command, Core, MAX_TEXT, Outgoing, clip};
use crate::clock::Now;
use crate::config::{BridgeMode, DialogPolicy};
use crate::core::policy::UNANSWERABLE_HINT;
use crate::error::Error;
use crate::protocol::{self, CdpError};
use crate::quote::quoted;
use crate::snapshot::{Blocked, BlockedReason, ClosedBy, DialogKind, PendingDialog};
use crate::watchdog::WatchdogMsg;

mod state;

pub(crate) use state::{AnswerInFlight, Dialogs, OpenDialog};

/// A native dialog closed remotely less than this after opening (by the time the reader passes
/// in) is the auto-closing proxy's signature (SPEC §6: within 100 ms; at 100 ms it is not).
const PROXY_SIGNATURE: Duration = Duration::from_millis(100);

impl Core {
    // ---------------------------------------------------------------- dialogs

    pub(super) fn dialog_opened(&mut self, session: &str, ev: protocol::DialogOpening, now: Now) {
        // A new native dialog on a session means the older ones there are closed (their Closed
        // event came, or was missed). An answer to one of them still unacknowledged did not
        // close it: Chromium will apply it to the new dialog (module doc).
        let older: Vec<String> = self
            .dialogs
            .open()
            .iter()
            .filter(|d| d.public.session_id == session && d.public.bridge_request_id.is_none())
            .map(|d| d.public.id.clone())
            .collect();
        let mut carried = Vec::new();
        for id in older {
            let Some(pos) = self.dialogs.position(&id) else {
                continue;
            };
            let mut answers = self.dialogs.take_answers(pos);
            if !answers.is_empty() {
                info!(
                    "task {}: dialog {id} was closed by something else before the answer to it \
                     arrived; the browser will apply that answer to the dialog that opens now",
                    self.task_id
                );
            }
            carried.append(&mut answers);
            let closed = self.dialogs.take_closed_event(pos);
            self.finalize(&id, ClosedBy::Remote, closed, now);
        }
        self.open_dialog(session, ev, None, carried, now);
    }

    /// Security origin of `frame_id` from the frame map (the last published one: a frame is
    /// older than its dialogs), else of `url`.
    fn origin_for(&self, frame_id: Option<&str>, url: &str) -> String {
        frame_id
            .and_then(|f| self.published.frames.get(f))
            .map(|r| r.origin.clone())
            .filter(|o| !o.is_empty())
            .or_else(|| (!url.is_empty()).then(|| crate::core::frames::origin_of(url)))
            .unwrap_or_default()
    }

    /// A bridge request paused on `session` (SPEC §6): a dialog like any other, answered with
    /// `Fetch.fulfillRequest`. Any other paused request is continued at once.
    pub(super) fn request_paused(&mut self, session: &str, params: Option<&RawValue>, now: Now) {
        #[derive(serde::Deserialize, Default)]
        #[serde(default, rename_all = "camelCase")]
        struct Paused {
            request_id: String,
            request: PausedRequest,
            frame_id: Option<String>,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct PausedRequest {
            url: String,
        }
        let Some(p) = protocol::decode::<Paused>(params) else {
            return;
        };
        if p.request_id.is_empty() {
            return;
        }
        let sid = Some(session.to_string()).filter(|s| !s.is_empty());
        let Some(req) = crate::bridge::parse_request(&p.request.url) else {
            if crate::bridge::is_bridge_url(&p.request.url) {
                // The bridge host but not a dialog: never leave it hanging, never let it out.
                self.command(
                    "Fetch.failRequest",
                    json!({"requestId": p.request_id, "errorReason": "BlockedByClient"}),
                    sid,
                );
                return;
            }
            self.command(
                "Fetch.continueRequest",
                json!({"requestId": p.request_id}),
                sid,
            );
            return;
        };
        let ev = protocol::DialogOpening {
            url: String::new(),
            frame_id: p.frame_id,
            message: req.message,
            kind: req.kind,
            default_prompt: Some(req.default_prompt),
        };
        if self.dialogs.at_cap() {
            if self.dialogs.note_cap_refusal() {
                warn!(
                    "task {}: {} dialogs are already open (limits.pending_dialogs_max): bridge \
                     dialog requests are refused until some are answered",
                    self.task_id,
                    self.dialogs.open().len()
                );
            }
            self.command(
                "Fetch.failRequest",
                json!({"requestId": p.request_id, "errorReason": "BlockedByClient"}),
                sid,
            );
            return;
        }
        self.open_dialog(session, ev, Some(p.request_id), Vec::new(), now);
    }

    fn open_dialog(
        &mut self,
        session: &str,
        ev: protocol::DialogOpening,
        bridge_request_id: Option<String>,
        carried: Vec<AnswerInFlight>,
        now: Now,
    ) {
        let over_cap = self.dialogs.at_cap();
        let default_prompt = ev.default_prompt.unwrap_or_default();
        let frame_id = ev.frame_id.filter(|f| !f.is_empty());
        let origin = clip(self.origin_for(frame_id.as_deref(), &ev.url), MAX_TEXT);
        let dialog = PendingDialog {
            id: self.dialogs.next_id(),
            kind: DialogKind::from(clip(ev.kind, 64)),
            message: clip(ev.message, MAX_TEXT * 8),
            default_prompt: clip(default_prompt, MAX_TEXT * 8),
            opened_at: now.epoch,
            frame_id,
            url: clip(ev.url, MAX_TEXT),
            origin,
            target_id: self.dialog_target(session),
            session_id: session.to_string(),
            bridge_request_id,
        };
        info!(
            "task {}: dialog {} ({}{}) opened: {}",
            self.task_id,
            dialog.id,
            dialog.kind,
            if dialog.bridge_request_id.is_some() {
                ", via the bridge"
            } else {
                ""
            },
            quoted(&dialog.message)
        );
        if over_cap {
            warn!(
                "task {}: dialog {} opened with {} dialogs already open \
                 (limits.pending_dialogs_max): dismissing it",
                self.task_id,
                dialog.id,
                self.dialogs.open().len()
            );
        }
        // While a person holds the task (`core/handover.rs`) the dialog waits for them: no
        // policy answer, no watchdog. The cap is no policy: past it a dialog is still dismissed.
        let held = self.handover.is_held();
        let answer = match over_cap {
            true => Some(answer_command(&dialog, false, None, ClosedBy::AutoPolicy)),
            false if held => None,
            false => self.policy_answer(&dialog),
        };
        if answer.is_none() && !held {
            self.arm_watchdog(&dialog.id, now);
        }
        let pos = self.dialogs.push(OpenDialog {
            public: dialog,
            opened: now.instant,
            answers_in_flight: carried,
            closed_event: None,
            shown: !over_cap,
            unanswerable: false,
        });
        match answer {
            None => self.fail_calls_blocked_by(pos, false),
            Some(c) => self.out.push(Outgoing::Command(c)),
        }
    }

    /// The answer the task's dialog policy gives `dialog` at once (`auto_dismiss`,
    /// `auto_accept`); `None` for `must_respond`, which waits for an answer.
    pub(super) fn policy_answer(&self, dialog: &PendingDialog) -> Option<Command> {
        match self.settings.policy {
            DialogPolicy::MustRespond => None,
            DialogPolicy::AutoDismiss => {
                Some(answer_command(dialog, false, None, ClosedBy::AutoPolicy))
            }
            DialogPolicy::AutoAccept => {
                // Chromium gives a prompt "" unless the default text is sent explicitly.
                let text =
                    (dialog.kind == DialogKind::Prompt).then_some(dialog.default_prompt.as_str());
                Some(answer_command(dialog, true, text, ClosedBy::AutoPolicy))
            }
        }
    }

    /// Has the watchdog dismiss `dialog_id` `dialog_timeout_s` after `now` unless it closes.
    pub(super) fn arm_watchdog(&mut self, dialog_id: &str, now: Now) {
        self.out.push(Outgoing::Watchdog(WatchdogMsg::Arm {
            dialog_id: dialog_id.to_string(),
            deadline: now.after(self.settings.dialog_timeout).instant,
        }));
    }

    /// Bridge dialogs of `frame_id` whose document went away (navigation, detach): the paused
    /// request died with it, so nobody can answer them any more.
    pub(super) fn bridge_frame_gone(&mut self, frame_id: &str, now: Now) {
        let gone: Vec<String> = self
            .dialogs
            .open()
            .iter()
            .filter(|d| {
                d.public.bridge_request_id.is_some()
                    && d.public.frame_id.as_deref() == Some(frame_id)
            })
            .map(|d| d.public.id.clone())
            .collect();
        for id in gone {
            self.finalize(&id, ClosedBy::Remote, None, now);
        }
    }

    pub(super) fn dialog_closed(&mut self, session: &str, ev: protocol::DialogClosed, now: Now) {
        // Only native dialogs close with this event; a bridge dialog closes when its paused
        // request is fulfilled (or goes away).
        let native_open = |d: &OpenDialog| {
            d.public.session_id == session
                && d.closed_event.is_none()
                && d.public.bridge_request_id.is_none()
        };
        // Only an event without `frameId` (older Chromium) falls back to any native dialog of
        // the session: with a frame named, a dialog of another frame is never the one that
        // closed (SPEC §11: `Closed(frameId = main)` while an iframe's dialog stays open).
        let frame = ev.frame_id.as_deref().filter(|f| !f.is_empty());
        let open = self.dialogs.open();
        let pos = match frame {
            Some(f) => open
                .iter()
                .position(|d| native_open(d) && d.public.frame_id.as_deref() == Some(f))
                .or_else(|| {
                    open.iter()
                        .position(|d| native_open(d) && d.public.frame_id.is_none())
                }),
            None => open.iter().position(native_open),
        };
        let Some(pos) = pos else {
            debug!(
                "task {}: javascriptDialogClosed for no open dialog",
                self.task_id
            );
            return;
        };
        let d = &open[pos];
        if d.answers_in_flight.is_empty() {
            let id = d.public.id.clone();
            let fast = now.since(d.opened) < PROXY_SIGNATURE;
            self.finalize(&id, ClosedBy::Remote, Some((ev.result, ev.user_input)), now);
            // A fallback match is a guess about which dialog closed: never enough to switch.
            if fast
                && frame.is_some()
                && self.settings.bridge == BridgeMode::Auto
                && !self.bridge_active
            {
                warn!(
                    "task {}: dialog {id} was closed by something else within {PROXY_SIGNATURE:?} \
                     of opening (a CDP proxy that auto-closes dialogs, or another automation \
                     client on this page, such as Puppeteer or Playwright handling dialogs): \
                     turning the dialog bridge on. From now on every alert/confirm/prompt of this \
                     page, starting with the next one on the current document, goes through the \
                     bridge; set dialog_bridge = \"off\" to share the page with another \
                     automation client",
                    self.task_id
                );
                self.activate_bridge();
            }
        } else {
            // Our answer is on its way: its acknowledgement decides who closed it.
            let id = d.public.id.clone();
            self.dialogs
                .set_closed_event(pos, (ev.result, ev.user_input));
            self.out
                .push(Outgoing::Watchdog(WatchdogMsg::Cancel { dialog_id: id }));
        }
    }

    pub(super) fn on_answer_reply(
        &mut self,
        call_id: u64,
        dialog_id: &str,
        by: ClosedBy,
        outcome: Result<&RawValue, CdpError>,
        method: &str,
        now: Now,
    ) -> CallResult {
        // The dialog the answer lands on holds it (module doc); it is the named one unless the
        // events showed otherwise.
        let (pos, said) = match self.dialogs.take_answer(call_id) {
            Some((pos, said)) => (Some(pos), said),
            None => (None, None),
        };
        match outcome {
            Ok(_) => {
                let Some(pos) = pos else {
                    return Ok(json!({}));
                };
                // The browser's own account (the Closed event) wins over what we sent.
                let closed = self.dialogs.take_closed_event(pos).or(said);
                let landed = self.dialogs.open()[pos].public.clone();
                self.finalize(&landed.id, by, closed, now);
                if landed.id == dialog_id {
                    return Ok(json!({}));
                }
                warn!(
                    "task {}: the answer meant for dialog {dialog_id} was applied to dialog {} \
                     ({}): {dialog_id} had already been closed by something else",
                    self.task_id,
                    landed.id,
                    quoted(&landed.message)
                );
                Err(Error::AnswerAppliedToOtherDialog {
                    named: dialog_id.to_string(),
                    received: Box::new(landed),
                })
            }
            Err(e) => {
                // A refused fulfilment means the paused bridge request is gone (the page moved
                // on); a native refusal says "No dialog is showing".
                let open = self.dialogs.open();
                let bridge = pos.is_some_and(|p| open[p].public.bridge_request_id.is_some());
                let not_showing = e.message.contains("No dialog is showing");
                // No Closed event came: the dialog may still block its frame, unanswerable
                // (SPEC §11). It is recorded `remote` only if a Closed event comes later.
                if let Some(pos) = pos
                    && !bridge
                    && not_showing
                    && open[pos].closed_event.is_none()
                    && open[pos].answers_in_flight.is_empty()
                    && open[pos].public.id == dialog_id
                {
                    return Err(self.mark_unanswerable(pos));
                }
                let gone = bridge || not_showing;
                if let Some(pos) = pos {
                    let d = &open[pos];
                    if gone || (d.closed_event.is_some() && d.answers_in_flight.is_empty()) {
                        let id = d.public.id.clone();
                        let closed = self.dialogs.take_closed_event(pos);
                        self.finalize(&id, ClosedBy::Remote, closed, now);
                    }
                }
                match self.dialogs.recent(dialog_id) {
                    Some(c) if gone || pos.is_none() => Err(Error::DialogAlreadyClosed {
                        id: dialog_id.to_string(),
                        closed_by: c.closed_by,
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

    /// The dialog at `pos` can no longer be answered over CDP but still blocks its frame: out
    /// of `pending_dialogs`, into `blocked` (naming the frame) until it ends. Returns the
    /// caller's error.
    fn mark_unanswerable(&mut self, pos: usize) -> Error {
        self.dialogs.mark_unanswerable(pos);
        let d = &self.dialogs.open()[pos].public;
        let (id, frame_id) = (d.id.clone(), d.frame_id.clone());
        warn!(
            "task {}: dialog {id} can no longer be answered over CDP ('No dialog is showing') but \
             no Closed event came: it still blocks frame {}; reload the page to clear it",
            self.task_id,
            frame_id.as_deref().unwrap_or("?")
        );
        self.out.push(Outgoing::Watchdog(WatchdogMsg::Cancel {
            dialog_id: id.clone(),
        }));
        if self.blocked.is_none() {
            self.blocked = Some(Blocked {
                reason: BlockedReason::UnanswerableDialog,
                hint: UNANSWERABLE_HINT.into(),
                frame_id: frame_id.clone(),
                target_ids: Vec::new(),
            });
        }
        // Calls in flight into its renderer, even those made while it was pending (a method
        // not measured, waiting out its grace), would now wait for their deadline.
        self.fail_calls_blocked_by(pos, true);
        Error::DialogUnanswerable { id, frame_id }
    }

    /// Unanswerable dialogs whose frame got a new document (or went away): the reload cleared
    /// them. A new document of the page's main frame clears them all.
    pub(super) fn unanswerable_frame_gone(&mut self, frame_id: &str, now: Now) {
        let main = self.page_target_id.as_deref() == Some(frame_id);
        let gone: Vec<String> = self
            .dialogs
            .open()
            .iter()
            .filter(|d| d.unanswerable && (main || d.public.frame_id.as_deref() == Some(frame_id)))
            .map(|d| d.public.id.clone())
            .collect();
        for id in gone {
            self.finalize(&id, ClosedBy::Remote, None, now);
        }
    }

    /// Records open dialog `dialog_id` as closed by `by` (with the browser's account `closed`,
    /// when it gave one): the one place every close goes through.
    pub(super) fn finalize(
        &mut self,
        dialog_id: &str,
        by: ClosedBy,
        closed: Option<(bool, String)>,
        now: Now,
    ) {
        let Some(pos) = self.dialogs.position(dialog_id) else {
            return;
        };
        let was_unanswerable = self.dialogs.close(pos, by, closed, now.epoch);
        if was_unanswerable
            && !self.dialogs.any_unanswerable()
            && self
                .blocked
                .as_ref()
                .is_some_and(|b| b.reason == BlockedReason::UnanswerableDialog)
        {
            info!(
                "task {}: dialog {dialog_id} that CDP could not answer has ended; no longer \
                 blocked",
                self.task_id
            );
            self.blocked = None;
        }
        info!("task {}: dialog {dialog_id} closed by {by}", self.task_id);
        self.out.push(Outgoing::Watchdog(WatchdogMsg::Cancel {
            dialog_id: dialog_id.to_string(),
        }));
    }
}

/// The command that answers `dialog`: `Page.handleJavaScriptDialog` for a native dialog,
/// `Fetch.fulfillRequest` for a bridge dialog; on the session the dialog came from.
pub fn answer_command(
    dialog: &PendingDialog,
    accept: bool,
    prompt_text: Option<&str>,
    by: ClosedBy,
) -> Command {
    let (method, params) = match &dialog.bridge_request_id {
        Some(request_id) => (
            "Fetch.fulfillRequest",
            crate::bridge::fulfill_params(
                request_id,
                accept,
                if accept { prompt_text } else { None },
            ),
        ),
        None => {
            let mut params = json!({"accept": accept});
            if let Some(t) = prompt_text {
                params["promptText"] = json!(t);
            }
            ("Page.handleJavaScriptDialog", params)
        }
    };
    Command {
        method: method.into(),
        params,
        session_id: Some(dialog.session_id.clone()),
        kind: CallKind::DialogAnswer {
            dialog_id: dialog.id.clone(),
            by,
            accept,
            prompt_text: prompt_text.map(str::to_string),
        },
    }
}
