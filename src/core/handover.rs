//! Taking a task over (SPEC §20): while a person holds the task, the state machine answers no
//! dialog by policy and arms no watchdog, so a dialog waits for the person; taking it back
//! applies the task's policy again to the dialogs still pending.
//!
//! The change reaches the reader like every other: as a browser-level round trip
//! (`CallKind::Handover`) that `Supervisor::hand_over`/`take_back` write, applied when its
//! reply comes ([`Core::set_held`]) and published before the caller hears back. What the hold
//! stops:
//! * the policy answers (`auto_dismiss`, `auto_accept`) of dialogs that open while it lasts
//!   (`core/dialogs.rs`, `open_dialog`); the `limits.pending_dialogs_max` cap is a bound, not a
//!   policy, and still dismisses a dialog past it;
//! * the watchdog: every armed dismissal is cancelled at the hand-over, none is armed while it
//!   lasts, and the watchdog thread checks the published hold before it fires
//!   (`supervisor.rs`, `fire_watchdog`); the hand-over waits for the watchdog to acknowledge
//!   ([`WatchdogMsg::Ack`]), so a dismissal it was writing at that moment is written before
//!   `hand_over` returns, and none after;
//! * the renderer probe of `supervisor/stall.rs` (it may move the mouse), skipped while held.
//!
//! What it does not stop, because the person's page needs it: setting up new sessions
//! (enabling domains, resuming a paused iframe), continuing network requests paused by the
//! bridge's `Fetch` pattern that are not dialogs, recording downloads. Those are plumbing, not
//! actions on the page.
//!
//! Taking back gives each dialog still pending the task's policy as if it had just opened:
//! `must_respond` arms the watchdog with a fresh `dialog_timeout_s` (the agent gets its whole
//! time to see and answer it), `auto_dismiss`/`auto_accept` answer it at once. A dialog with an
//! answer on its way (the person's) is left to that answer.

use super::{Core, Outgoing};
use crate::clock::Now;
use crate::watchdog::{Ack, WatchdogMsg};

impl Core {
    /// Applies a hand-over (`hold`) or a take-back at `now`; idempotent (handing over a held
    /// task keeps the hold that began first). Sends `ack` to the watchdog after the
    /// cancellations, so it answers once they have been handled.
    pub(super) fn set_held(&mut self, hold: bool, ack: Option<Ack>, now: Now) {
        let held = self.handover.is_held();
        if hold && !held {
            self.handover.held_since = Some(now.epoch);
            self.handover.holds = self.handover.holds.saturating_add(1);
            log::info!("task {}: handed over to a person", self.task_id);
            for d in self.dialogs.open() {
                self.out.push(Outgoing::Watchdog(WatchdogMsg::Cancel {
                    dialog_id: d.public.id.clone(),
                }));
            }
        } else if !hold && let Some(since) = self.handover.held_since.take() {
            self.handover.ended_holds_s += (now.epoch - since).max(0.0);
            log::info!(
                "task {}: taken back from the person after {:.1} s",
                self.task_id,
                (now.epoch - since).max(0.0)
            );
            self.apply_policy_to_pending(now);
        }
        if let Some(ack) = ack {
            self.out.push(Outgoing::Watchdog(WatchdogMsg::Ack(ack)));
        }
    }

    /// After a take-back: the task's policy for every dialog still pending and not being
    /// answered (module doc).
    fn apply_policy_to_pending(&mut self, now: Now) {
        let waiting: Vec<_> = self
            .dialogs
            .open()
            .iter()
            .filter(|d| d.is_pending() && d.answers_in_flight.is_empty())
            .map(|d| d.public.clone())
            .collect();
        for dialog in waiting {
            match self.policy_answer(&dialog) {
                Some(c) => self.out.push(Outgoing::Command(c)),
                None => self.arm_watchdog(&dialog.id, now),
            }
        }
    }
}
