//! A task's clients through a dropped connection, a reconnect and the task's end (issue 30
//! point 7).
//!
//! # A drop
//!
//! Every session lives on a connection: when the task's upstream connection ends, the clients'
//! sessions end with it, their browser sessions too, and no reply to what they had in flight
//! will come. Each client is told at once, on the reader thread ([`Mux::lose`]):
//!
//! * each call in flight gets an error reply saying the connection ended;
//! * each session it had gets what a connection of its own gets when an attached target goes
//!   away: `Inspector.detached` on the session, then `Target.detachedFromTarget` (`sessionId`,
//!   `targetId`) on the session it was attached under (without `sessionId` when that was its
//!   browser session), children before their parent.
//!
//! Measured on Chromium 156 (`measure_what_chromium_sends_when_an_attached_target_goes_away`,
//! on one connection: a browser session B, a page attached under it as P, its cross-origin
//! iframe auto-attached under P as I). When the page is closed: `Page.frameDetached` for the
//! iframe on P, `Target.detachedFromTarget {I}` on P, `Inspector.detached {reason: "Render
//! process gone."}` on P, then `Target.detachedFromTarget {P}` on B: children first, each
//! detach on the parent's session, and `Inspector.detached` before the session's own detach.
//! When the iframe's target goes away alone, `Target.detachedFromTarget {I}` on P is all, with
//! no `Inspector.detached` on I: Chromium sends that to a session whose renderer went, not to
//! one whose frame left. A dropped connection takes every session at once with no renderer
//! gone, so the endpoint sends both to every session, in that order (a client that listens on a
//! session for `Inspector.detached` hears of each), with the reason saying what happened.
//!
//! A page client (`page.rs`) is closed instead (1001, with the reason): its page's session is
//! its root, gone with the connection.
//!
//! # Back
//!
//! Once the task is active again (the publish that says so: the supervisor has re-attached its
//! page), each client gets a new browser session ([`Mux::renew`]), and the browser-level
//! commands whose state Chromium keeps per session are sent on it again as the client last sent
//! them ([`REPLAYED`]): a discovering client hears `targetCreated` for the targets there are,
//! an auto-attaching client is attached to them again, and any client may attach again. The
//! pages clients created are the task's still (`State::joined` outlives a drop), and the
//! supervisor follows them again once its page is back (`Core::readopt_created`): their
//! dialogs are caught as before. Until
//! then its browser-level commands fail at once with an error saying why, and a command on one
//! of its old sessions gets Chromium's own "Session with given id not found".
//!
//! # The end
//!
//! When the task stops or dies, each client gets a close frame, 1001 (going away) with the
//! reason, and its threads end (`Mux::close_all`).
//!
//! # A client's `Browser.close`
//!
//! The browser is not a client's to close: the task's supervisor holds it, and other tasks and
//! clients may share it. Puppeteer's `browser.close()` after `connect` sends `Browser.close`,
//! which on Chromium would end every task of that browser (and a `proxy` that launched it). So
//! a client's `Browser.close` does for the client what it would do on a browser of its own:
//! the pages it created are closed (`Target.closeTarget`), it gets `{}`, then a close frame,
//! 1000 with the reason ([`BROWSER_STAYS`]); leaving detaches its browser session, which
//! disposes the browser contexts it created (Chromium's rule for a session's contexts). The
//! browser, the task's page and the other clients go on. `Browser.crash` is refused. Both on
//! any session the client sends them: Chromium closes the whole browser for `Browser.close` on
//! a page's session, or on a page's own socket (measured on Chromium 156), so a page client's
//! is the same end.

use rustc_hash::FxHashMap;
use serde_json::json;

use super::{Mux, Out, State, deliver};
use crate::cdp_endpoint::wire::{Envelope, SessionParams, decode, error_reply_on};

/// Browser-level commands whose state Chromium keeps per session: a client's last of each is
/// sent again on its new browser session after a reconnect.
pub(super) const REPLAYED: [&str; 2] = ["Target.setDiscoverTargets", "Target.setAutoAttach"];

/// The reason of the close frame a client gets for its `Browser.close` (module doc).
pub(super) const BROWSER_STAYS: &str =
    "Browser.close: this client's pages were closed; the task's browser stays open";

/// What a client's `Browser.crash` gets.
pub(super) const NO_CRASH: &str = "Browser.crash is refused through the task endpoint: it \
    would crash the browser the task's supervisor (and any other task) uses";

/// What a browser-level command gets while its client has no browser session.
pub(super) const RECONNECTING: &str = "the task's connection to the browser ended and is being \
    made again: send this again once the task is back (Target.detachedFromTarget came for the \
    sessions that are gone)";

/// `Inspector.detached`'s reason for a session the connection took.
const DETACH_REASON: &str = "the task's connection to the browser ended";

/// What the mux keeps for a drop and a reconnect.
#[derive(Debug, Default)]
pub(super) struct Life {
    /// The connection ended and the clients have no browser session until the task is active
    /// again.
    lost: bool,
    /// Upstream id of a client's new `Target.attachToBrowserTarget` -> the client.
    renewing: FxHashMap<u64, u64>,
    /// Client session -> the session it was attached under (a browser session or a client's).
    pub(super) parents: FxHashMap<String, String>,
}

impl Life {
    /// The connection ended and is not back yet.
    pub(super) fn is_lost(&self) -> bool {
        self.lost
    }
}

/// How many sessions lie above `session` (0: attached under a browser session).
fn depth(parents: &FxHashMap<String, String>, session: &str) -> usize {
    let mut n = 0;
    let mut at = session;
    while let Some(p) = parents.get(at)
        && n < 64
    {
        n += 1;
        at = p;
    }
    n
}

impl Mux {
    /// `client`'s browser-level `method` on its way upstream: kept when it is [`REPLAYED`].
    pub(super) fn remember(st: &mut State, client: u64, method: &str, params: Option<&str>) {
        if !REPLAYED.contains(&method) {
            return;
        }
        let params = params
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or_else(|| json!({}));
        if let Some(c) = st.clients.get_mut(&client) {
            c.replay.retain(|(m, _)| m != method);
            c.replay.push((method.to_string(), params));
        }
    }

    /// The connection ended, and the task will try to make it again (module doc, "A drop").
    pub(super) fn lose(&self, reason: &str) {
        let mut guard = self.lock();
        let st = &mut *guard;
        st.life.lost = true;
        st.life.renewing.clear();
        let why = format!(
            "the task's connection to the browser ended ({reason}); it is being made again"
        );
        self.lose_page_clients(st, &why);
        for (_, p) in std::mem::take(&mut st.pending) {
            let Some(p) = p else { continue };
            let on = (!p.browser_level).then_some(p.session.as_str());
            let text = error_reply_on(Some(&p.orig_id), on, -32000, &why);
            deliver(st, p.client, Out::Text(text));
        }
        let mut gone: Vec<(usize, String, u64, String)> = st
            .sessions
            .iter()
            .map(|(s, (c, t))| (depth(&st.life.parents, s), s.clone(), *c, t.clone()))
            .collect();
        gone.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        for (_, session, client, target) in gone {
            let detached = json!({
                "method": "Inspector.detached",
                "params": {"reason": DETACH_REASON},
                "sessionId": session,
            });
            let mut from = json!({
                "method": "Target.detachedFromTarget",
                "params": {"sessionId": session, "targetId": target},
            });
            if let Some(parent) = st.life.parents.get(&session)
                && st.sessions.contains_key(parent)
            {
                from["sessionId"] = json!(parent);
            }
            deliver(st, client, Out::Text(detached.to_string()));
            deliver(st, client, Out::Text(from.to_string()));
        }
        st.sessions.clear();
        st.life.parents.clear();
        st.browser_sessions.clear();
        st.page_enabled.clear();
        st.shown.clear();
        st.tab_sessions.clear();
        st.hidden.clear();
        for c in st.clients.values_mut() {
            c.browser_session.clear();
            c.creating = 0;
            c.held.clear();
            c.shown.clear();
        }
        self.settle(st, None);
    }

    /// On a publish that says the task is active: after a drop, asks a new browser session for
    /// each client (module doc, "Back"). Queues the commands on `st.outbox`.
    pub(super) fn renew(&self, st: &mut State) {
        if !std::mem::take(&mut st.life.lost) {
            return;
        }
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        // (A client that joined since has a browser session of the new connection.)
        let clients: Vec<u64> = (st.clients.iter())
            .filter(|(_, c)| c.browser_session.is_empty())
            .map(|(id, _)| *id)
            .collect();
        for client in clients {
            let id = shared.next_command_id();
            st.life.renewing.insert(id, client);
            let attach = "Target.attachToBrowserTarget";
            let text = crate::protocol::encode_command(id, attach, &json!({}), None);
            st.outbox.push(text);
        }
    }

    /// The reply `id` when it is to a client's new browser session: the session is the
    /// client's, and what it had sent of [`REPLAYED`] goes on it again. False for another reply.
    pub(super) fn renewed(&self, st: &mut State, id: u64, env: &Envelope<'_>) -> bool {
        let Some(client) = st.life.renewing.remove(&id) else {
            return false;
        };
        let session = decode::<SessionParams>(env.result).and_then(|r| r.session_id);
        let replay = match (st.clients.get_mut(&client), &session) {
            (Some(c), Some(s)) => {
                c.browser_session = s.clone();
                c.replay.clone()
            }
            (Some(_), None) => {
                let why = env.error.map_or("no session", |e| e.get());
                let reason = format!("the browser session was not made again: {why}");
                deliver(st, client, Out::Close(1011, reason));
                return true;
            }
            (None, Some(s)) => {
                // It left meanwhile.
                let params = json!({ "sessionId": s });
                self.own_command(st, "Target.detachFromTarget", params, None);
                return true;
            }
            (None, None) => return true,
        };
        let Some(session) = session else { return true };
        st.browser_sessions.insert(session.clone(), client);
        for (method, params) in replay {
            self.own_command(st, &method, params, Some(&session));
        }
        true
    }

    /// Forgets what the drops and reconnects kept (every client is gone).
    pub(super) fn forget_life(st: &mut State) {
        st.life = Life::default();
    }
}

impl Mux {
    /// `client`'s `Browser.close` (module doc): its pages closed, `{}`, then a close frame.
    pub(super) fn close_browser_for(
        &self,
        st: &mut State,
        client: u64,
        orig_id: &serde_json::value::RawValue,
        session: Option<&str>,
    ) {
        let Some(c) = st.clients.get_mut(&client) else {
            return;
        };
        let created = std::mem::take(&mut c.created);
        for target in created {
            self.own_command(
                st,
                "Target.closeTarget",
                json!({ "targetId": target }),
                None,
            );
        }
        let reply = match session {
            Some(s) => format!(
                r#"{{"id":{},"result":{{}},"sessionId":{}}}"#,
                orig_id.get(),
                serde_json::Value::from(s)
            ),
            None => format!(r#"{{"id":{},"result":{{}}}}"#, orig_id.get()),
        };
        deliver(st, client, Out::Text(reply));
        deliver(st, client, Out::Close(1000, BROWSER_STAYS.to_string()));
    }
}
