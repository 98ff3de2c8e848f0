//! Page connections: a client on `/<token>/devtools/page/<targetId>`, as on Chromium's
//! `ws://HOST:PORT/devtools/page/<targetId>` (chrome-remote-interface's and pychrome's default,
//! and the `webSocketDebuggerUrl` of each `/json/list` entry).
//!
//! Measured on Chromium 156.0.8078.114 with a raw client on a page's WebSocket: commands without
//! `sessionId` run in the page (`Runtime.evaluate`, `Page.enable`, `Page.navigate`) and its
//! events come without `sessionId`; the Target domain answers there too (`Target.getTargets`
//! lists the browser's targets, `Target.attachToTarget` gives a flat session whose
//! `attachedToTarget` comes without `sessionId`, `Target.setDiscoverTargets` sends
//! `targetCreated` without one); `Page.javascriptDialogOpening` comes, a later
//! `Runtime.evaluate` gets no reply while the dialog is open (2 s waited) and
//! `Page.handleJavaScriptDialog` answers it. When the page is closed the client gets
//! `Inspector.detached {reason: "Render process gone."}`, then `{reason: "target_closed"}`,
//! and the socket is closed (no close frame: 1006 for the client). An unknown target id is
//! refused before the upgrade: HTTP 500, `No such target id: <id>`.
//!
//! # How the endpoint carries one
//!
//! The client gets a browser session of its own as every client does (never shown to it), and
//! under it a flat session on the page, its *root* ([`PageRoot`]), opened before its first
//! frame is read. Its commands without `sessionId` go on the root and their replies come
//! without one; the root's events come without `sessionId`; sessions it attaches (on the root:
//! `Target.attachToTarget`, `Target.setAutoAttach`) are its own as for any client. Everything
//! else is the rule for every client: the dialog rule (a call into the page while a dialog
//! blocks it fails fast naming the dialog; `Page.handleJavaScriptDialog` passes; a call made
//! with `Page` enabled before the dialog waits for the client's answer, bounded), the
//! `[security]` policy, the task's targets only (`Target.*` events on the root are screened as
//! a browser session's are).
//!
//! When the root goes (`Target.detachedFromTarget` on the hidden browser session: the page
//! closed, or the root was detached), the client gets `Inspector.detached {reason:
//! "target_closed"}` and a close frame (1001, "the page closed"): Chromium closes the socket
//! without one. When the task's connection drops, a page client is closed the same way (1001,
//! with the reason) rather than carried through the reconnect. When the client leaves, its
//! sessions and its browser session are detached upstream (`Mux::leave`).

use serde_json::json;

use super::{Client, Mux, Out, State, deliver};
use crate::cdp_endpoint::wire::{Envelope, SessionParams, decode};

/// What `Inspector.detached` says when a page client's page goes (Chromium's words).
const TARGET_CLOSED: &str = "target_closed";

/// A page client's root: the page and its flat session there (once attached).
#[derive(Debug, Clone)]
pub(super) struct PageRoot {
    pub(super) target: String,
    pub(super) session: Option<String>,
}

impl Client {
    /// Where this client's commands without `sessionId` go: its page's session, or its
    /// browser session.
    pub(super) fn root_session(&self) -> &str {
        match &self.page {
            Some(p) => p.session.as_deref().unwrap_or(""),
            None => &self.browser_session,
        }
    }

    /// Whether `session` is this client's page root.
    pub(super) fn is_root(&self, session: &str) -> bool {
        self.page
            .as_ref()
            .is_some_and(|p| p.session.as_deref() == Some(session))
    }
}

impl Mux {
    /// An event on a page client's hidden browser session: its page's attach (the root
    /// becomes known) and the root's end (the client is closed); nothing is delivered.
    pub(super) fn on_page_browser_event(
        &self,
        st: &mut State,
        client: u64,
        method: &str,
        env: &Envelope<'_>,
    ) -> bool {
        let Some(p) = decode::<SessionParams>(env.params) else {
            return true;
        };
        let Some(session) = p.session_id else {
            return true;
        };
        match method {
            "Target.attachedToTarget" => {
                let target = p.target_info.map(|t| t.target_id).unwrap_or_default();
                Mux::root_attached(st, client, &target, &session);
            }
            "Target.detachedFromTarget" => {
                let root = st.clients.get(&client).is_some_and(|c| c.is_root(&session));
                if root {
                    self.close_page_client(st, client, TARGET_CLOSED, "the page closed");
                }
            }
            _ => {}
        }
        true
    }

    /// `client`'s page `target` is attached on `session`: its root, unless it has one.
    fn root_attached(st: &mut State, client: u64, target: &str, session: &str) {
        let Some(c) = st.clients.get_mut(&client) else {
            return;
        };
        if let Some(root) = &mut c.page
            && root.session.is_none()
            && root.target == target
        {
            root.session = Some(session.to_string());
            let browser = c.browser_session.clone();
            st.life.parents.insert(session.to_string(), browser);
            (st.sessions).insert(session.to_string(), (client, target.to_string()));
        }
    }

    /// The browser answered `client`'s page attach with `session` (its `attachedToTarget`,
    /// which came first, made it the root already): whether the client has its root.
    pub(in crate::cdp_endpoint) fn page_attached(&self, client: u64, session: &str) -> bool {
        let mut st = self.lock();
        let target = (st.clients.get(&client))
            .and_then(|c| c.page.as_ref())
            .map(|p| p.target.clone());
        if let Some(target) = target {
            Mux::root_attached(&mut st, client, &target, session);
        }
        st.clients.get(&client).is_some_and(|c| c.is_root(session))
    }

    /// Closes page client `client` (its page or the connection went): `Inspector.detached`
    /// with `reason`, then a close frame (1001, `why`). Its browser session is detached
    /// upstream (what was under it goes with it); the client is the mux's no more.
    pub(super) fn close_page_client(&self, st: &mut State, client: u64, reason: &str, why: &str) {
        let detached = json!({"method": "Inspector.detached", "params": {"reason": reason}});
        deliver(st, client, Out::Text(detached.to_string()));
        self.forget_client(st, client);
        let Some(c) = st.clients.remove(&client) else {
            return;
        };
        c.outlet.push(Out::Close(1001, why.to_string()));
        st.browser_sessions.remove(&c.browser_session);
        if !c.browser_session.is_empty() && !st.life.is_lost() {
            let params = json!({ "sessionId": c.browser_session });
            self.own_command(st, "Target.detachFromTarget", params, None);
        }
    }

    /// Forgets `client`'s sessions and calls in flight (no detach sent).
    pub(super) fn forget_client(&self, st: &mut State, client: u64) {
        st.pending
            .retain(|_, p| p.as_ref().is_none_or(|p| p.client != client));
        let mine: Vec<String> = (st.sessions.iter())
            .filter(|(_, (c, _))| *c == client)
            .map(|(s, _)| s.clone())
            .collect();
        for s in &mine {
            st.sessions.remove(s);
            st.life.parents.remove(s);
            st.page_enabled.remove(s);
            st.shown.remove(s);
            st.tab_sessions.remove(s);
        }
    }

    /// The connection dropped: every page client is closed (module doc), before the other
    /// clients are told of their sessions.
    pub(super) fn lose_page_clients(&self, st: &mut State, why: &str) {
        let pages: Vec<u64> = (st.clients.iter())
            .filter(|(_, c)| c.page.is_some())
            .map(|(id, _)| *id)
            .collect();
        for client in pages {
            self.close_page_client(st, client, why, why);
        }
    }
}
