//! The reader's side of the mux ([`Tap`]): which upstream messages are the clients', and what
//! a publish or a lost connection does to them (on the reader thread: short locks, no waits).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::value::RawValue;

use super::scope::Level;
use super::{Mux, Out, State, deliver};
use crate::cdp_endpoint::wire::{
    Envelope, Reply, SessionParams, client_wording, decode, error_reply_on,
};
use crate::core::policy;
use crate::snapshot::{Snapshot, SupervisorState};
use crate::tap::Tap;

/// Methods whose replies [`Mux::on_reply`] reads (a session or target to record) or narrows
/// (`scope.rs`): these go the parsed way.
const READ_REPLIES: &[&str] = &[
    "Target.attachToTarget",
    "Target.createTarget",
    "Target.getBrowserContexts",
    "Target.getTargets",
];

impl Mux {
    /// [`Tap::claims`], under the lock.
    fn claim(&self, st: &mut State, text: &str) -> bool {
        if let Some(reply) = Reply::split(text)
            && let Some(done) = self.pass_reply(st, &reply)
        {
            return done;
        }
        let Ok(env) = serde_json::from_str::<Envelope<'_>>(text) else {
            return false;
        };
        let Some(method) = env.method.as_deref() else {
            let Some(id) = env.id else { return false };
            return self.renewed(st, id, &env) || self.on_reply(st, id, &env);
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

    /// A client's reply that goes on as it came but for its id (and its session, for a command
    /// sent at browser level): `None` when it needs [`Mux::on_reply`]'s parsed way (a reply
    /// the endpoint reads or narrows) or is not a pending command's (a renewal's: `life.rs`).
    fn pass_reply(&self, st: &mut State, reply: &Reply<'_>) -> Option<bool> {
        let reads = match st.pending.get(&reply.id)? {
            Some(p) => READ_REPLIES.contains(&p.method.as_str()),
            None => false,
        };
        if reads {
            return None;
        }
        // `None`: the endpoint's own command, whose reply is swallowed.
        let Some(p) = st.pending.remove(&reply.id).flatten() else {
            return Some(true);
        };
        let orig = p.orig_id.get();
        let mut text = String::with_capacity(reply.body.len() + orig.len() + 64);
        text.push_str(r#"{"id":"#);
        text.push_str(orig);
        text.push(',');
        text.push_str(reply.body);
        if let (Some(s), false) = (reply.session, p.browser_level) {
            text.push_str(r#","sessionId":""#);
            text.push_str(s);
            text.push('"');
        }
        text.push('}');
        deliver(st, p.client, Out::Text(text));
        Some(true)
    }

    pub(super) fn on_reply(&self, st: &mut State, id: u64, env: &Envelope<'_>) -> bool {
        let Some(entry) = st.pending.remove(&id) else {
            return false;
        };
        let Some(p) = entry else {
            return true;
        };
        if p.method == "Target.attachToTarget"
            && let Some(r) = decode::<SessionParams>(env.result)
            && let Some(s) = r.session_id
        {
            st.life.parents.insert(s.clone(), p.session.clone());
            st.sessions
                .insert(s, (p.client, p.attach_target.clone().unwrap_or_default()));
        }
        if p.method == "Target.createTarget" {
            self.created(st, p.client, env.result);
        }
        let narrowed = env
            .result
            .and_then(|r| self.narrow_reply(st, p.client, &p.method, r));
        let body = match (narrowed, env.result, env.error) {
            (_, _, Some(e)) => format!(r#""error":{}"#, e.get()),
            (Some(n), _, None) => format!(r#""result":{n}"#),
            (None, Some(r), None) => format!(r#""result":{}"#, r.get()),
            (None, None, None) => r#""result":{}"#.to_string(),
        };
        let session = match (&env.session_id, p.browser_level) {
            (Some(s), false) => format!(r#","sessionId":{}"#, serde_json::Value::from(s.as_ref())),
            _ => String::new(),
        };
        let text = format!(r#"{{"id":{},{body}{session}}}"#, p.orig_id.get());
        deliver(st, p.client, Out::Text(text));
        true
    }

    pub(super) fn on_event(
        &self,
        st: &mut State,
        method: &str,
        session: &str,
        env: &Envelope<'_>,
        text: &str,
    ) -> bool {
        // `root`: its events go without `sessionId` (a browser session, or a page client's page).
        let (client, browser_level, root) = if let Some(c) = st.browser_sessions.get(session) {
            let c = *c;
            if st.clients.get(&c).is_some_and(|c| c.page.is_some()) {
                return self.on_page_browser_event(st, c, method, env);
            }
            (c, true, true)
        } else if let Some((c, _)) = st.sessions.get(session) {
            let c = *c;
            (
                c,
                false,
                st.clients.get(&c).is_some_and(|x| x.is_root(session)),
            )
        } else {
            return st.hidden.contains(session);
        };
        let level = Level {
            browser: browser_level,
            root,
        };
        if self.screen(st, client, session, level, method, env.params, text) {
            return true;
        }
        match method {
            "Target.attachedToTarget" => {
                if let Some(p) = decode::<SessionParams>(env.params)
                    && let Some(s) = p.session_id
                {
                    let target = p.target_info.map(|t| t.target_id).unwrap_or_default();
                    st.life.parents.insert(s.clone(), session.to_string());
                    st.sessions.insert(s, (client, target));
                }
            }
            "Target.detachedFromTarget" => {
                if let Some(p) = decode::<SessionParams>(env.params)
                    && let Some(s) = p.session_id
                {
                    st.sessions.remove(&s);
                    st.life.parents.remove(&s);
                    st.page_enabled.remove(&s);
                    st.shown.remove(&s);
                }
            }
            "Page.javascriptDialogOpening" => drop(st.shown.insert(session.to_string())),
            "Page.javascriptDialogClosed" => drop(st.shown.remove(session)),
            _ => {}
        }
        // An event of a session the client attached is its own, word for word, as Chromium
        // sent it (no copy to re-write); one of its browser session, or of a page client's
        // page, loses the `sessionId`.
        let text = if root {
            let params = env.params.map_or("{}", RawValue::get);
            let m = serde_json::Value::from(method);
            format!(r#"{{"method":{m},"params":{params}}}"#)
        } else {
            text.to_string()
        };
        deliver(st, client, Out::Text(text));
        true
    }

    /// On a publish with dialogs pending: the calls in flight that one of them now blocks fail,
    /// but for those whose client was shown it, which wait for its answer (`wait.rs`).
    fn fail_in_flight(&self, st: &mut State, snap: &Snapshot) {
        let mut failed = Vec::new();
        let mut waiting = Vec::new();
        for (id, p) in &st.pending {
            let Some(p) = p else { continue };
            let Some(sid) = &p.renderer_sid else { continue };
            let Some(d) = snap.pending_dialogs.iter().find(|d| {
                !p.known.contains(&d.id) && policy::fails_in_flight(snap, d, true, sid, &p.method)
            }) else {
                continue;
            };
            if p.may_wait {
                waiting.push((*id, d.id.clone()));
                continue;
            }
            let e = client_wording(&policy::dialog_error(d, false, &p.method));
            let on = (!p.browser_level).then_some(p.session.as_str());
            let reply = error_reply_on(Some(&p.orig_id), on, -32000, &e);
            failed.push((*id, p.client, reply));
        }
        for (id, client, text) in failed {
            // Its reply, if it ever comes, is swallowed.
            st.pending.insert(id, None);
            deliver(st, client, Out::Text(text));
        }
        for (id, dialog) in waiting {
            self.wait_for_client(st, id, &dialog);
        }
    }
}

impl Tap for Mux {
    fn claims(&self, text: &str) -> bool {
        let (claimed, outbox) = {
            let mut st = self.lock();
            let claimed = self.claim(&mut st, text);
            self.settle(&mut st, None);
            (claimed, std::mem::take(&mut st.outbox))
        };
        self.flush(outbox);
        claimed
    }

    fn batch_done(&self) {
        self.send_due();
    }

    fn take_joined(&self) -> Vec<String> {
        if !self.adopt_queued.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut self.lock().adopt)
    }

    fn take_answers(&self) -> Vec<String> {
        if !self.answers_queued.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut self.lock().answers)
    }
    fn published(&self, snap: &Snapshot) {
        match &snap.state {
            SupervisorState::Stopped => return self.close_all(1001, "the task stopped"),
            SupervisorState::Dead { reason } => {
                return self.close_all(1001, &format!("the task ended: {reason}"));
            }
            _ => {}
        }
        let outbox = {
            let mut st = self.lock();
            if snap.state == SupervisorState::Active {
                self.renew(&mut st);
            }
            self.settle(&mut st, Some(snap));
            if self.policy.must_respond && !snap.pending_dialogs.is_empty() {
                self.fail_in_flight(&mut st, snap);
            }
            std::mem::take(&mut st.outbox)
        };
        self.flush(outbox);
        self.send_due();
    }

    fn connection_lost(&self, reason: &str) {
        if self.shared.upgrade().is_none_or(|s| s.stop_requested()) {
            return self.close_all(1001, "the task stopped");
        }
        self.lose(reason);
        self.send_due();
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}
