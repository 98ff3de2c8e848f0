//! Native dialogs in the state machine (SPEC §5): open, close, answers in flight, and the one
//! place where `closed_by` is decided.

use super::*;

/// A native dialog closed remotely this soon after opening is the auto-closing proxy's signature.
const PROXY_SIGNATURE: Duration = Duration::from_millis(100);

impl Core {
    // ---------------------------------------------------------------- dialogs

    pub(super) fn dialog_opened(&mut self, session: &str, ev: protocol::DialogOpening) {
        // A second native dialog on one session means we missed the first one's close.
        let stale: Vec<String> = self
            .open
            .iter()
            .filter(|d| {
                d.public.session_id == session
                    && d.closed_event.is_none()
                    && d.public.bridge_request_id.is_none()
            })
            .map(|d| d.public.id.clone())
            .collect();
        for id in stale {
            self.finalize(&id, ClosedBy::Remote, None);
        }
        self.open_dialog(session, ev, None);
    }

    /// A bridge request paused on `session` (SPEC §6): a dialog like any other, answered with
    /// `Fetch.fulfillRequest`. Any other paused request is continued at once.
    pub(super) fn request_paused(&mut self, session: &str, params: Option<&RawValue>) {
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
        self.open_dialog(session, ev, Some(p.request_id));
    }

    fn open_dialog(
        &mut self,
        session: &str,
        ev: protocol::DialogOpening,
        bridge_request_id: Option<String>,
    ) {
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
            bridge_request_id,
        };
        info!(
            "task {}: dialog {} ({}{}) opened: {:?}",
            self.task_id,
            dialog.id,
            dialog.kind,
            if dialog.bridge_request_id.is_some() {
                ", via the bridge"
            } else {
                ""
            },
            dialog.message
        );
        let answer = match self.settings.policy {
            DialogPolicy::MustRespond => None,
            DialogPolicy::AutoDismiss => {
                Some(answer_command(&dialog, false, None, ClosedBy::AutoPolicy))
            }
            DialogPolicy::AutoAccept => {
                // Chromium gives a prompt "" unless the default text is sent explicitly.
                let text = (dialog.kind == "prompt").then_some(dialog.default_prompt.as_str());
                Some(answer_command(&dialog, true, text, ClosedBy::AutoPolicy))
            }
        };
        if answer.is_none() {
            self.out.push(Outgoing::ArmWatchdog {
                dialog_id: dialog.id.clone(),
                deadline: Instant::now() + self.settings.dialog_timeout,
            });
        }
        self.open.push(OpenDialog {
            public: dialog,
            opened: Instant::now(),
            answers_in_flight: Vec::new(),
            closed_event: None,
        });
        if answer.is_none() {
            self.fail_calls_blocked_by(self.open.len() - 1);
        }
        if let Some(c) = answer {
            self.out.push(Outgoing::Command(c));
        }
        self.dialogs_changed = true;
        self.dirty = true;
    }

    /// Bridge dialogs of `frame_id` whose document went away (navigation, detach): the paused
    /// request died with it, so nobody can answer them any more.
    pub(super) fn bridge_frame_gone(&mut self, frame_id: &str) {
        let gone: Vec<String> = self
            .open
            .iter()
            .filter(|d| {
                d.public.bridge_request_id.is_some()
                    && d.public.frame_id.as_deref() == Some(frame_id)
            })
            .map(|d| d.public.id.clone())
            .collect();
        for id in gone {
            self.finalize(&id, ClosedBy::Remote, None);
        }
    }

    pub(super) fn dialog_closed(&mut self, session: &str, ev: protocol::DialogClosed) {
        // Only native dialogs close with this event; a bridge dialog closes when its paused
        // request is fulfilled (or goes away).
        let native_open = |d: &OpenDialog| {
            d.public.session_id == session
                && d.closed_event.is_none()
                && d.public.bridge_request_id.is_none()
        };
        let pos = self
            .open
            .iter()
            .position(|d| {
                native_open(d) && (ev.frame_id.is_none() || d.public.frame_id == ev.frame_id)
            })
            .or_else(|| self.open.iter().position(native_open));
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
            let fast = d.opened.elapsed() <= PROXY_SIGNATURE;
            self.finalize(&id, ClosedBy::Remote, Some((ev.result, ev.user_input)));
            if fast && self.settings.bridge == BridgeMode::Auto && !self.bridge_active {
                warn!(
                    "task {}: dialog {id} was closed by something else within {PROXY_SIGNATURE:?} \
                     of opening (a CDP proxy that auto-closes dialogs?): turning the dialog \
                     bridge on; dialogs of the next document go through it",
                    self.task_id
                );
                self.activate_bridge();
            }
        } else {
            // Our answer is on its way: its acknowledgement decides who closed it.
            d.closed_event = Some((ev.result, ev.user_input));
            let id = d.public.id.clone();
            self.out.push(Outgoing::CancelWatchdog { dialog_id: id });
            self.dialogs_changed = true;
            self.dirty = true;
        }
    }

    pub(super) fn on_answer_reply(
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
                // A refused fulfilment means the paused bridge request is gone (the page moved
                // on); a native refusal says "No dialog is showing".
                let bridge = pos.is_some_and(|p| self.open[p].public.bridge_request_id.is_some());
                let gone = bridge || e.message.contains("No dialog is showing");
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

    pub(super) fn finalize(
        &mut self,
        dialog_id: &str,
        by: ClosedBy,
        closed: Option<(bool, String)>,
    ) {
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
        self.recent.push_back(Arc::new(ClosedDialog {
            dialog: d.public,
            closed_at: now_epoch(),
            closed_by: by,
            accepted,
            user_input,
        }));
        self.out.push(Outgoing::CancelWatchdog {
            dialog_id: dialog_id.to_string(),
        });
        self.dialogs_changed = true;
        self.recent_changed = true;
        self.dirty = true;
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
        method,
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
