//! The connection's life in the state machine (SPEC §3, §5, §10): what a dropped connection
//! closes and fails, the `state` the reader sets while it reconnects or once it ends, and what
//! a new connection starts from. The reader thread decides *when*; this decides *what changes*.

use super::*;

impl Core {
    /// A new connection is up: forget everything that belonged to the old one (sessions, frames,
    /// blocked; its dialogs were recorded by [`Core::on_disconnect`]) but keep the dialog
    /// counter, the recent/console rings and the page target. The state stays `reconnecting`
    /// until the page is attached again. Returns the page target to re-attach to: the same
    /// one, never another (SPEC §3).
    pub fn reset_for_reconnect(&mut self) -> Option<String> {
        self.sessions.clear();
        self.crashed_sessions.clear();
        // Followed popups are not carried across a reconnect: only the task's page is
        // re-attached, and popups opened from then on are followed again.
        self.pages.clear();
        self.pages_truncated = false;
        self.pages_changed = true;
        self.page_gone = None;
        self.frames = Frames::new(self.settings.limits.clone());
        self.blocked = None;
        self.blocked_session = None;
        self.page_session_id = None;
        self.dialogs_changed = true;
        self.dirty = true;
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
            .open
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
                        .open
                        .iter_mut()
                        .find(|d| d.public.id == id)
                        .and_then(|d| d.closed_event.take());
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
        self.dirty = true;
    }

    /// Reconnect attempt `attempt` of `of` is under way (its back-off, connect or re-attach).
    pub fn reconnecting(&mut self, attempt: u32, of: u32) {
        let next = SupervisorState::Reconnecting { attempt, of };
        if self.state != next {
            self.state = next;
            self.dirty = true;
        }
    }

    /// The supervisor has ended for good: [`SupervisorState::Stopped`] or
    /// [`SupervisorState::Dead`].
    pub fn ended(&mut self, end: SupervisorState) {
        self.state = end;
        self.dirty = true;
    }

    /// Active, reconnecting, stopped or dead.
    pub fn state(&self) -> &SupervisorState {
        &self.state
    }
}

#[cfg(test)]
mod tests {
    //! Driven without sockets.

    use super::*;

    fn core() -> Core {
        Core::new(
            "t",
            "ws://x/",
            CoreSettings {
                policy: DialogPolicy::MustRespond,
                dialog_timeout: Duration::from_secs(300),
                limits: Limits::default(),
                bridge: BridgeMode::Off,
                follow_popups: false,
            },
        )
    }

    fn open(core: &mut Core, message: &str) -> PendingDialog {
        let now = Now::read();
        core.on_text(
            &json!({"method": "Page.javascriptDialogOpening", "sessionId": "S",
                    "params": {"url": "http://a/", "frameId": "F", "message": message,
                               "type": "confirm", "defaultPrompt": ""}})
            .to_string(),
            now,
        );
        let snap = core.snapshot();
        snap.pending_dialogs.last().cloned().expect("pending")
    }

    #[test]
    fn a_dialog_pending_at_a_drop_is_recorded_as_connection_lost() {
        let mut core = core();
        let now = Now::read();
        let d = open(&mut core, "Leave?");
        core.on_disconnect("the browser closed the connection", now);
        core.reconnecting(1, 5);
        let snap = core.snapshot();
        assert!(snap.pending_dialogs.is_empty());
        let rec = snap.closed_dialog(&d.id).expect("recorded");
        assert_eq!(rec.closed_by, ClosedBy::ConnectionLost);
        assert_eq!(rec.to_json()["closed_by"], "connection_lost");
        assert!(!snap.active);
        assert_eq!(
            snap.state,
            SupervisorState::Reconnecting { attempt: 1, of: 5 }
        );
        // The watchdog forgets it.
        assert!(core.take_outgoing().contains(&Outgoing::CancelWatchdog {
            dialog_id: d.id.clone()
        }));
    }

    #[test]
    fn a_dialog_whose_close_came_while_our_answer_was_in_flight_stays_the_answerers() {
        let mut core = core();
        let now = Now::read();
        let d = open(&mut core, "Transfer?");
        let c = answer_command(&d, true, None, ClosedBy::Agent);
        core.register(
            7,
            PendingCall {
                method: c.method.to_string(),
                session_id: c.session_id,
                kind: c.kind,
                reply: None,
                expires: None,
            },
            now,
        );
        core.on_text(
            &json!({"method": "Page.javascriptDialogClosed", "sessionId": "S",
                    "params": {"result": true, "userInput": ""}})
            .to_string(),
            now,
        );
        // The ack never comes: the connection drops first.
        core.on_disconnect("the browser closed the connection", now);
        let snap = core.snapshot();
        let rec = snap.closed_dialog(&d.id).expect("recorded");
        assert_eq!(rec.closed_by, ClosedBy::Agent);
        assert_eq!(rec.accepted, Some(true));
    }

    #[test]
    fn re_attaching_after_a_reconnect_makes_the_state_active_again() {
        let mut core = core();
        let now = Now::read();
        // An unknown id: ignored.
        core.on_text(
            &json!({"id": 1, "result": {"sessionId": "S1"}}).to_string(),
            now,
        );
        core.on_disconnect("gone", now);
        core.reconnecting(2, 3);
        assert_eq!(core.reset_for_reconnect(), None);
        assert!(!core.snapshot().active);
        core.register(
            2,
            PendingCall {
                method: "Target.attachToTarget".into(),
                session_id: None,
                kind: CallKind::AttachPage {
                    target_id: "P".into(),
                },
                reply: None,
                expires: None,
            },
            now,
        );
        core.on_text(
            &json!({"id": 2, "result": {"sessionId": "S2"}}).to_string(),
            now,
        );
        let snap = core.snapshot();
        assert!(snap.active);
        assert_eq!(snap.state, SupervisorState::Active);
        assert_eq!(snap.disconnect_reason, None);
        assert_eq!(snap.to_json()["state"], "active");
    }
}
