//! The reader's side of the mux ([`Tap`]): which upstream messages are the clients', and what
//! a publish or a lost connection does to them (on the reader thread: short locks, no waits).

use std::sync::Arc;

use super::{Mux, Out, State, deliver};
use crate::cdp_endpoint::wire::{Envelope, SessionParams, client_wording, decode, error_reply_on};
use crate::core::policy;
use crate::snapshot::{Snapshot, SupervisorState};
use crate::tap::Tap;

impl Mux {
    /// [`Tap::claims`], under the lock.
    fn claim(&self, st: &mut State, text: &str) -> bool {
        let Ok(env) = serde_json::from_str::<Envelope<'_>>(text) else {
            return false;
        };
        let Some(method) = env.method.as_deref() else {
            let Some(id) = env.id else { return false };
            return self.on_reply(st, id, &env);
        };
        // A client's browser session opening (`Target.attachToBrowserTarget`): the supervisor
        // itself never attaches to the browser target, and would let go of it.
        if env.session_id.is_none()
            && method == "Target.attachedToTarget"
            && decode::<SessionParams>(env.params)
                .and_then(|p| p.target_info)
                .is_some_and(|t| t.kind == "browser")
        {
            return true;
        }
        if let Some(id) = env.id {
            return self.on_reply(st, id, &env);
        }
        match env.session_id.as_deref() {
            Some(s) => self.on_event(st, method, s, &env, text),
            // A client's browser session detached (it left): not the supervisor's business.
            None if method == "Target.detachedFromTarget" => decode::<SessionParams>(env.params)
                .and_then(|p| p.session_id)
                .is_some_and(|s| {
                    st.browser_sessions.contains_key(&s) || st.sessions.remove(&s).is_some()
                }),
            None => false,
        }
    }
}

impl Tap for Mux {
    fn claims(&self, text: &str) -> bool {
        let (claimed, outbox) = {
            let mut st = self.lock();
            let claimed = self.claim(&mut st, text);
            (claimed, std::mem::take(&mut st.outbox))
        };
        self.flush(outbox);
        claimed
    }

    fn batch_done(&self) {
        self.send_due();
    }

    fn take_joined(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().adopt)
    }

    fn take_answers(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().answers)
    }
    fn published(&self, snap: &Snapshot) {
        match &snap.state {
            SupervisorState::Stopped => return self.close_all(1001, "the task stopped"),
            SupervisorState::Dead { reason } => {
                return self.close_all(1011, &format!("the task's supervisor ended: {reason}"));
            }
            _ => {}
        }
        if !self.policy.must_respond || snap.pending_dialogs.is_empty() {
            return;
        }
        let mut st = self.lock();
        let mut failed = Vec::new();
        for (id, p) in &st.pending {
            let Some(p) = p else { continue };
            let Some(sid) = &p.renderer_sid else { continue };
            if p.may_wait {
                continue; // it is shown the dialog: it may answer it, as on its own connection
            }
            if let Some(d) = snap.pending_dialogs.iter().find(|d| {
                !p.known.contains(&d.id) && policy::fails_in_flight(snap, d, true, sid, &p.method)
            }) {
                let e = client_wording(&policy::dialog_error(d, false, &p.method));
                let on = (!p.browser_level).then_some(p.session.as_str());
                let reply = error_reply_on(Some(&p.orig_id), on, -32000, &e);
                failed.push((*id, p.client, reply));
            }
        }
        for (id, client, text) in failed {
            // Its reply, if it ever comes, is swallowed.
            st.pending.insert(id, None);
            deliver(&mut st, client, Out::Text(text));
        }
        drop(st);
        self.send_due();
    }

    fn connection_lost(&self, reason: &str) {
        if self.shared.upgrade().is_none_or(|s| s.stop_requested()) {
            return self.close_all(1001, "the task stopped");
        }
        self.close_all(
            1011,
            &format!("the task's connection to the browser ended ({reason}); connect again"),
        );
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}
