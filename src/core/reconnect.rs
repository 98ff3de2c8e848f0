//! The connection's life in the state machine (SPEC §3, §5, §10): what a dropped connection
//! closes and fails, the `state` the reader sets while it reconnects or once it ends, and what
//! a new connection starts from. The reader thread decides *when*; this decides *what changes*.

use std::collections::HashMap;

use log::warn;

use super::frames::Frames;
use super::{CallKind, Command, Core, Outgoing};
use crate::clock::Now;
use crate::error::Error;
use crate::snapshot::{ClosedBy, SupervisorState};

impl Core {
    /// A new connection is up: forget everything that belonged to the old one (sessions, frames,
    /// blocked; its dialogs were recorded by [`Core::on_disconnect`]) but keep the dialog
    /// counter, the recent/console rings and the page target. The state stays `reconnecting`
    /// until the page is attached again. Returns the page target to re-attach to: the same
    /// one, never another (SPEC §3).
    pub fn reset_for_reconnect(&mut self) -> Option<String> {
        self.sessions.clear();
        // The popups followed (or watched) are attached again once the task's page is, in the
        // order they were followed (an opener before its popups): each arrives as a
        // browser-level `attachedToTarget` naming its opener, and the usual rules follow it
        // (`Core::refollow_popups`). Sessions do not outlive a connection.
        self.refollow = self.pages.clear();
        self.page_gone = None;
        self.frames = Frames::new(self.settings.limits.clone(), self.settings.capture_console);
        self.blocked = None;
        self.blocked_session = None;
        self.page_session_id = None;
        self.choosers.clear();
        self.document = None;
        self.page_target_id.clone()
    }

    /// The connection ended: fail every waiting call at once, and record every dialog still open
    /// in `recent_dialogs` (`connection_lost`, or who answered it when its Closed event already
    /// came and only the acknowledgement was missing), so none disappears without a record.
    /// The caller sets what comes next ([`Core::reconnecting`] or [`Core::ended`]) before it
    /// publishes.
    pub fn on_disconnect(&mut self, reason: &str, now: Now) {
        self.disconnect_reason = Some(reason.to_string());
        // Who sent each answer still in flight (the calls are failed just below).
        let mut answerers: HashMap<u64, ClosedBy> = HashMap::new();
        for (id, call) in self.calls.drain() {
            if let CallKind::DialogAnswer { by, .. } = &call.kind {
                answerers.insert(id, *by);
            }
            if let Some(tx) = call.reply {
                self.deliveries
                    .push((tx, Err(Error::ConnectionLost(reason.to_string()))));
            }
        }
        let open: Vec<(String, Option<ClosedBy>)> = self
            .dialogs
            .open()
            .iter()
            .map(|d| {
                let answered = d.closed_event.as_ref().and_then(|_| {
                    d.answers_in_flight
                        .first()
                        .and_then(|f| answerers.get(&f.call_id).copied())
                });
                (d.public.id.clone(), answered)
            })
            .collect();
        for (id, answered) in open {
            match answered {
                Some(by) => {
                    let closed = self
                        .dialogs
                        .position(&id)
                        .and_then(|pos| self.dialogs.take_closed_event(pos));
                    self.finalize(&id, by, closed, now);
                }
                None => {
                    warn!(
                        "task {}: dialog {id} was open when the connection dropped: recorded as \
                         connection_lost; if the browser still shows it after a reconnect, the \
                         page shows as blocked",
                        self.task_id
                    );
                    self.finalize(&id, ClosedBy::ConnectionLost, None, now);
                }
            }
        }
    }

    /// Reconnect attempt `attempt` of `of` is under way (its back-off, connect or re-attach).
    pub fn reconnecting(&mut self, attempt: u32, of: u32) {
        self.state = SupervisorState::Reconnecting { attempt, of };
    }

    /// The supervisor has ended for good: [`SupervisorState::Stopped`] or
    /// [`SupervisorState::Dead`].
    pub fn ended(&mut self, end: SupervisorState) {
        self.state = end;
    }

    /// Active, reconnecting, stopped or dead.
    pub fn state(&self) -> &SupervisorState {
        &self.state
    }
}

impl Core {
    /// The task's page is back after a reconnect: the popups followed or watched before the
    /// drop are attached again, oldest first (fire and forget: one closed meanwhile fails
    /// the attach, logged, and is forgotten). Each is then followed, or watched, by the rules
    /// of `core/pages.rs`, as when it opened: its dialogs are caught again.
    pub(super) fn refollow_popups(&mut self) {
        for target_id in std::mem::take(&mut self.refollow) {
            // A page a client created is attached again by `Core::readopt_created`.
            if self.created.is_adopted(&target_id) {
                continue;
            }
            self.out.push(Outgoing::Command(Command {
                method: "Target.attachToTarget".into(),
                params: serde_json::json!({"targetId": target_id, "flatten": true}),
                session_id: None,
                kind: CallKind::Automatic,
            }));
        }
    }
}
