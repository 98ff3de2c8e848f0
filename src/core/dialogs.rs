//! Native dialogs in the state machine (SPEC §5): open, close, answers in flight, and the one
//! place where `closed_by` is decided.

use super::*;

impl Core {
    // ---------------------------------------------------------------- dialogs

    pub(super) fn dialog_opened(&mut self, session: &str, ev: protocol::DialogOpening) {
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

    pub(super) fn dialog_closed(&mut self, session: &str, ev: protocol::DialogClosed) {
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
