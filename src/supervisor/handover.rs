//! Who answers for a task: the agent, or a person it was handed over to (SPEC §20).
//!
//! [`Supervisor::hand_over`] gives the task to a person and [`Supervisor::take_back`] returns it
//! to the agent; both are idempotent (handing over a held task, or taking back one that is not
//! held, changes nothing and succeeds) and return the [`Handover`] state they leave. While a
//! person holds the task, the agent's calls ([`Supervisor::call`], [`Supervisor::navigate`],
//! [`Supervisor::respond_to_dialog`], file-chooser answers) fail at once with
//! [`Error::HeldByHuman`]; reading (snapshots, waits, thumbnails) goes on, and so does
//! [`Supervisor::stop`]. The person answers dialogs with [`Supervisor::respond_as_human`],
//! recorded as `closed_by: "human"` (it works whether or not the task is held: a person may
//! answer from the supervisor page for an agent too). What the state machine stops doing while
//! the task is held is `core/handover.rs`.
//!
//! The change travels to the reader as a browser-level round trip (`Browser.getVersion`,
//! answered while any page shows a dialog) whose reply the reader applies, publishes, and then
//! hands back: when `hand_over` returns, the snapshot shows the hold. It then waits (briefly)
//! for the watchdog to acknowledge, so that a dismissal it was writing at that moment is
//! written before `hand_over` returns and none after it.

use std::time::Duration;

use crossbeam_channel::bounded;
use log::debug;
use serde_json::json;

use super::Supervisor;
use crate::config::DialogAction;
use crate::core::{CallKind, Command, answer_command};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::outbound::Outbound;
use crate::snapshot::{ClosedBy, DialogKind, Handover, PendingDialog};
use crate::watchdog::Ack;

/// How long `hand_over` waits for the watchdog's acknowledgement (it may be in a renderer
/// probe, `supervisor/stall.rs`, about 1 s at most) before it returns anyway.
const WATCHDOG_ACK_WAIT: Duration = Duration::from_secs(3);

impl Supervisor {
    /// Hands the task over to a person (SPEC §20): from the moment this returns, no dialog
    /// policy or watchdog answers a dialog of the task, no automatic command reaches its pages
    /// (module doc of `core/handover.rs` for what still goes: session set-up), and the agent's
    /// calls fail with [`Error::HeldByHuman`]. Idempotent: on a task already held it changes
    /// nothing (the hold keeps its start). Returns the hand-over state it leaves; fails when the
    /// supervisor is not active (reconnecting, stopped, dead).
    pub fn hand_over(&self) -> Result<Handover, Error> {
        self.change_holder(true)
    }

    /// Gives the task back to the agent: its calls work again, and each dialog still pending
    /// gets the task's policy as if it had just opened (`must_respond`: a fresh
    /// `dialog_timeout_s` on the watchdog; `auto_*`: answered at once). Idempotent: on a task
    /// nobody holds it changes nothing. Returns the hand-over state it leaves, whose
    /// `ended_holds_s` now counts this hold.
    pub fn take_back(&self) -> Result<Handover, Error> {
        self.change_holder(false)
    }

    /// Whether a person holds the task (the published snapshot's [`Handover`]).
    pub fn is_held(&self) -> bool {
        self.with_snapshot(|s| s.handover.is_held())
    }

    fn change_holder(&self, hold: bool) -> Result<Handover, Error> {
        self.ensure_alive()?;
        if self.with_snapshot(|s| s.handover.is_held() == hold) {
            return Ok(self.with_snapshot(|s| s.handover));
        }
        let (ack_tx, ack_rx) = bounded(1);
        let ack = hold.then(|| Ack(ack_tx));
        let cmd =
            Command::new("Browser.getVersion", json!({})).kind(CallKind::Handover { hold, ack });
        self.shared
            .round_trip(cmd, Deadline::after(self.config.call_timeout))?;
        if hold && ack_rx.recv_timeout(WATCHDOG_ACK_WAIT).is_err() {
            debug!(
                "task {}: the watchdog did not acknowledge the hand-over within {:?}",
                self.task_id, WATCHDOG_ACK_WAIT
            );
        }
        Ok(self.with_snapshot(|s| s.handover))
    }

    /// `Ok` while the agent may act: the supervisor is active ([`Supervisor::ensure_alive`])
    /// and no person holds the task ([`Error::HeldByHuman`]).
    pub(crate) fn ensure_agent_may_act(&self) -> Result<(), Error> {
        self.ensure_alive()?;
        match self.with_snapshot(|s| s.handover.held_since) {
            Some(since) => Err(Error::HeldByHuman {
                task_id: self.task_id.clone(),
                since,
            }),
            None => Ok(()),
        }
    }

    /// Answers a pending dialog and waits for the browser's acknowledgement; recorded as
    /// `closed_by: "agent"`. Fails with [`Error::HeldByHuman`] while a person holds the task.
    ///
    /// `dialog_id` may be omitted when exactly one dialog is pending. Accepting a prompt without
    /// `prompt_text` returns its default text, as pressing OK on the native dialog would.
    pub fn respond_to_dialog(
        &self,
        action: DialogAction,
        prompt_text: Option<&str>,
        dialog_id: Option<&str>,
    ) -> Result<PendingDialog, Error> {
        self.ensure_agent_may_act()?;
        self.answer_dialog(ClosedBy::Agent, action, prompt_text, dialog_id)
    }

    /// [`Supervisor::respond_to_dialog`] for a person (the supervisor page, SPEC §20): the same
    /// rules and errors, recorded as `closed_by: "human"`, and allowed whether or not the task
    /// is held.
    pub fn respond_as_human(
        &self,
        action: DialogAction,
        prompt_text: Option<&str>,
        dialog_id: Option<&str>,
    ) -> Result<PendingDialog, Error> {
        self.ensure_alive()?;
        self.answer_dialog(ClosedBy::Human, action, prompt_text, dialog_id)
    }

    fn answer_dialog(
        &self,
        by: ClosedBy,
        action: DialogAction,
        prompt_text: Option<&str>,
        dialog_id: Option<&str>,
    ) -> Result<PendingDialog, Error> {
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
        self.shared
            .round_trip(c, Deadline::after(self.config.call_timeout))?;
        Ok(dialog.clone())
    }
}
