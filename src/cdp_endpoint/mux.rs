//! One task's clients on its one upstream connection: ids rewritten both ways, sessions owned
//! per client, the dialog rule applied to every client command, bounded queues.
//!
//! # Per-client browser state: a browser session each
//!
//! Chromium keeps `Target.setDiscoverTargets`, browser-level `Target.setAutoAttach` and the rest
//! per *session*, and a connection's root is one session: clients that shared it would switch
//! each other's discovery and auto-attach. So each client gets a session of its own on the
//! browser target (`Target.attachToBrowserTarget`), and its browser-level commands (no
//! `sessionId`) are sent on it. Measured on Chromium 156.0.8078.114
//! (`e2e_cdp_endpoint::measure_two_auto_attachers_waiting_for_the_debugger_on_one_connection`):
//! two browser sessions on one connection, both auto-attaching with `waitForDebuggerOnStart`,
//! each got a new page on a session of its own, waiting for the debugger; the first
//! `Runtime.runIfWaitingForDebugger`, from either, released it (the other's then answered `{}`).
//! So one client's resume is not held for another's, and the mux adds nothing. Measured before
//! (with the root auto-attaching too): detaching one attacher's child, or its whole browser
//! session, left the other's state and sessions alone.
//!
//! # Who gets what
//!
//! A reply goes to the client whose command it answers (under the client's own id, and without
//! `sessionId` when the client sent none). An event goes to the client that owns its session: its
//! browser session (delivered without `sessionId`, as on a connection of its own) or a session
//! attached under one of its sessions (`Target.attachedToTarget`, `Target.attachToTarget`).
//! What a client owns the supervisor's state machine never sees ([`Tap::claims`](crate::tap::Tap::claims)); a client
//! may not use a session it does not own (Chromium's own error: session not found).
//!
//! # Dialogs, drops and the end
//!
//! The dialog rule, and how long a call waits for an answer its client may give: `wait.rs`.
//! What clients get when the connection drops, when the task is back and when it ends:
//! `life.rs`.
//!
//! # Slow clients
//!
//! The reader hands each client its messages without waiting: appended to its
//! [`Outlet`], written once per batch read ([`Tap::batch_done`](crate::tap::Tap::batch_done)) with a
//! write that never waits, the rest by the client's writer thread. A client too slow past the
//! outlet's bounds (in bytes and time) is disconnected (logged), never waited for.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use log::debug;
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::value::RawValue;

use super::outlet::{Out, Outlet, Pushed};
use super::wire::{
    ClientCommand, Envelope, SessionParams, client_wording, decode, error_reply, error_reply_on,
    push_json_str,
};
use crate::core::policy;
use crate::deadline::Deadline;
use crate::shared::Shared;
use crate::snapshot::Snapshot;
use crate::transport::SendError;

mod life;
mod page;
mod scope;
mod tap;
mod wait;

/// How long writing one client command upstream may take.
const WRITE_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);

/// A client as the mux knows it.
#[derive(Debug)]
struct Client {
    outlet: Arc<Outlet>,
    browser_session: String,
    /// Its `Target.createTarget` calls in flight (`scope.rs`).
    creating: usize,
    /// Its browser-level target events about a target not known yet, held while it creates
    /// one (`scope.rs`).
    held: Vec<String>,
    /// The targets it was shown (`targetCreated`, `attachedToTarget`): the ones whose
    /// `targetDestroyed` it gets.
    shown: FxHashSet<String>,
    /// Its last browser-level commands of [`life::REPLAYED`], with their params.
    replay: Vec<(String, serde_json::Value)>,
    /// A page client's page (`page.rs`): its commands without `sessionId` go there.
    page: Option<page::PageRoot>,
    /// The pages it created (`Target.createTarget`): closed by its `Browser.close` (`life.rs`).
    created: Vec<String>,
}

/// A client command in flight, under its upstream id.
#[derive(Debug)]
struct Pending {
    client: u64,
    /// The client's own id, as it sent it.
    orig_id: Box<RawValue>,
    method: String,
    /// The client sent no `sessionId` (it went on the client's browser session).
    browser_level: bool,
    /// The session it went on, as the client named it (sessions are not renamed).
    session: String,
    /// The supervisor's session on the command's target, for the dialog rule.
    renderer_sid: Option<String>,
    /// The dialogs pending when it was sent, which it was let through.
    known: Vec<String>,
    /// `Target.attachToTarget`'s target: the session in its reply is the client's, on it.
    attach_target: Option<String>,
    /// Sent on a session with `Page` enabled before a dialog was shown there: its client may
    /// answer the dialog that opens, and the call waits for that.
    may_wait: bool,
}

#[derive(Debug, Default)]
struct State {
    clients: FxHashMap<u64, Client>,
    /// Upstream id -> the client command it carries (`None`: the endpoint's own, swallowed).
    pending: FxHashMap<u64, Option<Pending>>,
    /// Session -> (owning client, its target).
    sessions: FxHashMap<String, (u64, String)>,
    /// Browser session -> client.
    browser_sessions: FxHashMap<String, u64>,
    /// Client sessions with `Page` enabled: shown the dialogs of their target, their owner can
    /// answer them, so their calls in flight wait for the answer.
    page_enabled: FxHashSet<String>,
    /// Client sessions shown a dialog that has not closed yet: a call sent on one after that is
    /// not waiting for an answer it may give (it would hang), and fails like anyone's.
    shown: FxHashSet<String>,
    next_client: u64,
    /// Targets that joined the task through its clients (`scope.rs`): pages they created,
    /// targets attached under a session on one of the task's (workers, iframes), popups of
    /// the task's pages; each leaves with its `targetDestroyed`.
    joined: FxHashSet<String>,
    /// The supervisor's sessions clients sent `Page.handleJavaScriptDialog` into, since the
    /// reader last asked ([`Tap::take_answers`](crate::tap::Tap::take_answers)).
    answers: Vec<String>,
    /// Pages clients created since the reader last asked ([`Tap::take_joined`](crate::tap::Tap::take_joined)).
    adopt: Vec<String>,
    /// Client sessions on a `tab` target (Puppeteer attaches to tabs, then to their page).
    tab_sessions: FxHashSet<String>,
    /// Tab targets whose page is not the task's.
    foreign_tabs: FxHashSet<String>,
    /// Sessions attached for a client to a target not of its task: let go upstream, never
    /// shown; what comes on them is swallowed.
    hidden: FxHashSet<String>,
    /// The endpoint's own commands, written once the lock is released.
    outbox: Vec<String>,
    /// Drops and reconnects (`life.rs`).
    life: life::Life,
    /// Calls waiting for a dialog their client was shown (`wait.rs`).
    waits: wait::Waits,
    /// Outlets with bytes to send ([`Mux::send_due`]), once the lock is released.
    due: Vec<Arc<Outlet>>,
    /// The close every client got ([`Mux::close_all`]: the task or the endpoint has ended): a
    /// client that joins after it gets the same at once.
    closed: Option<(u16, String)>,
}

/// The task's settings the mux applies to every client.
#[derive(Debug, Clone)]
pub(super) struct Policy {
    /// `browser.dialog_policy = "must_respond"`: calls blocked by a dialog fail fast.
    pub(super) must_respond: bool,
    /// `[security]`, judged for every client command as for `browser_cdp`.
    pub(super) security: crate::config::Security,
    /// The task's own download directory.
    pub(super) own_downloads: Option<std::path::PathBuf>,
    /// `endpoint.all_targets`: clients see every target of the browser.
    pub(super) all_targets: bool,
}

/// One task's clients.
pub(crate) struct Mux {
    /// Itself, for the dialog clock's thread (`wait.rs`).
    me: Weak<Mux>,
    /// Weak: the supervisor's `Shared` holds the mux (its tap), and must be freed with it.
    shared: Weak<Shared>,
    task_id: String,
    policy: Policy,
    state: Mutex<State>,
    /// Set (under the lock, before the command that brings their batch is sent) when
    /// `State::answers` / `State::adopt` got an entry: the reader's batch looks at them without
    /// the lock when nothing waits there, as for almost every batch.
    answers_queued: AtomicBool,
    adopt_queued: AtomicBool,
}

impl std::fmt::Debug for Mux {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mux")
            .field("task_id", &self.task_id)
            .finish_non_exhaustive()
    }
}

/// The supervisor's session on `target_id` (its page, a followed or watched popup, an OOPIF).
fn supervisor_session<'s>(snap: &'s Snapshot, target_id: &str) -> Option<&'s str> {
    if snap.page_target_id.as_deref() == Some(target_id) {
        return snap.page_session_id.as_deref();
    }
    if let Some(p) =
        (snap.pages.iter().chain(snap.watched_pages.iter())).find(|p| p.target_id == target_id)
    {
        return Some(p.session_id.as_str());
    }
    snap.frames
        .get(target_id)
        .filter(|f| f.is_oopif)
        .and_then(|f| f.session_id.as_deref())
}

impl Mux {
    pub(super) fn new(shared: &Arc<Shared>, task_id: &str, policy: Policy) -> Arc<Mux> {
        Arc::new_cyclic(|me| Mux {
            me: me.clone(),
            shared: Arc::downgrade(shared),
            task_id: task_id.to_string(),
            policy,
            state: Mutex::new(State::default()),
            answers_queued: AtomicBool::new(false),
            adopt_queued: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new client on `browser_session`, its messages written through `outlet`, a page
    /// client when `page` names its target (`page.rs`); its id. When every client was closed
    /// already, it is closed at once the same way (it was opening its browser session
    /// meanwhile) and its browser session let go.
    pub(super) fn join(
        &self,
        browser_session: String,
        outlet: Arc<Outlet>,
        page: Option<String>,
    ) -> u64 {
        let mut st = self.lock();
        st.next_client += 1;
        let id = st.next_client;
        if let Some((code, reason)) = st.closed.clone() {
            outlet.push(Out::Close(code, reason));
            let params = serde_json::json!({ "sessionId": browser_session });
            self.own_command(&mut st, "Target.detachFromTarget", params, None);
            let outbox = std::mem::take(&mut st.outbox);
            drop(st);
            self.flush(outbox);
            return id;
        }
        st.browser_sessions.insert(browser_session.clone(), id);
        st.clients.insert(
            id,
            Client {
                outlet,
                browser_session,
                creating: 0,
                held: Vec::new(),
                shown: FxHashSet::default(),
                replay: Vec::new(),
                page: page.map(|target| page::PageRoot {
                    target,
                    session: None,
                }),
                created: Vec::new(),
            },
        );
        id
    }

    /// The close every client got, once they were all closed ([`Mux::close_all`]).
    pub(super) fn closed(&self) -> Option<(u16, String)> {
        self.lock().closed.clone()
    }

    /// Number of clients connected now.
    pub(super) fn client_count(&self) -> usize {
        self.lock().clients.len()
    }

    /// The client has gone: its sessions are detached (the browser session last), fire and
    /// forget, and its commands in flight forgotten.
    pub(super) fn leave(&self, client: u64) {
        let outbox = {
            let mut st = self.lock();
            st.pending
                .retain(|_, p| p.as_ref().is_none_or(|p| p.client != client));
            let mine: Vec<String> = st
                .sessions
                .iter()
                .filter(|(_, (c, _))| *c == client)
                .map(|(s, _)| s.clone())
                .collect();
            for s in &mine {
                st.sessions.remove(s);
                st.life.parents.remove(s);
                st.page_enabled.remove(s);
                st.shown.remove(s);
            }
            st.browser_sessions.retain(|_, c| *c != client);
            let Some(gone) = st.clients.remove(&client) else {
                return; // disconnected by the mux already, which detached it
            };
            gone.outlet.end();
            // Detaching its browser session detaches what was attached under it; the others
            // (attached by target id) one by one.
            for s in mine {
                st.tab_sessions.remove(&s);
                let params = serde_json::json!({ "sessionId": s });
                self.own_command(&mut st, "Target.detachFromTarget", params, None);
            }
            if !gone.browser_session.is_empty() {
                let params = serde_json::json!({ "sessionId": gone.browser_session });
                self.own_command(&mut st, "Target.detachFromTarget", params, None);
            }
            std::mem::take(&mut st.outbox)
        };
        self.flush(outbox);
    }

    /// Queues one of the endpoint's own commands (its reply swallowed) for [`Mux::flush`].
    fn own_command(
        &self,
        st: &mut State,
        method: &str,
        params: serde_json::Value,
        session: Option<&str>,
    ) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let id = shared.next_command_id();
        st.pending.insert(id, None);
        st.outbox.push(crate::protocol::encode_command(
            id, method, &params, session,
        ));
    }

    /// Writes the endpoint's own commands (never waiting past [`WRITE_BUDGET`]).
    fn flush(&self, outbox: Vec<String>) {
        if outbox.is_empty() {
            return;
        }
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        for text in outbox {
            if let Err(SendError::Lost(e)) = shared
                .transport
                .load()
                .send_text_until(text, Deadline::after(WRITE_BUDGET))
            {
                debug!(
                    "task {}: a command of the endpoint not sent: {e}",
                    self.task_id
                );
            }
        }
    }

    /// A command from `client`: checked, rewritten and sent upstream; or answered at once with
    /// an error (malformed, a session it does not own, a dialog that blocks it).
    pub(super) fn forward(&self, client: u64, text: &str) {
        let cmd: ClientCommand<'_> = match serde_json::from_str(text) {
            Ok(c) => c,
            Err(e) => {
                return self.reply(client, error_reply(None, -32700, &format!("{e}")));
            }
        };
        let (Some(orig_id), Some(method)) = (cmd.id, cmd.method) else {
            let msg = "Message must have integer 'id' and string 'method' properties";
            return self.reply(client, error_reply(cmd.id, -32600, msg));
        };
        let Some(shared) = self.shared.upgrade() else {
            let msg = "the task's supervisor has ended";
            return self.reply(client, error_reply(Some(orig_id), -32000, msg));
        };
        let snap = shared.snapshot.load_full();
        let mut st = self.lock();
        let Some(c) = st.clients.get(&client) else {
            return;
        };
        let browser_level = cmd.session_id.is_none();
        let session = match cmd.session_id {
            None => c.root_session().to_string(),
            Some(s) => s,
        };
        // A page client's browser session is not its to use.
        let own_browser = c.page.is_none();
        if browser_level && session.is_empty() {
            drop(st); // the connection dropped and its new browser session is not there yet
            return self.reply(
                client,
                error_reply(Some(orig_id), -32000, life::RECONNECTING),
            );
        }
        let target = match st.sessions.get(&session) {
            Some((owner, target)) if *owner == client => Some(target.clone()),
            None if own_browser && st.browser_sessions.get(&session) == Some(&client) => None,
            _ => {
                let msg = format!("Session with given id not found. ({session})");
                let reply = error_reply(Some(orig_id), -32001, &msg);
                drop(st);
                return self.reply(client, reply);
            }
        };
        let params = match cmd.params.map(|p| crate::security::judged_params(p.get())) {
            None => serde_json::json!({}),
            Some(Ok(v)) => v,
            Some(Err(e)) => {
                let on = (!browser_level).then_some(session.as_str());
                let msg = format!("invalid params: {e}");
                let reply = error_reply_on(Some(orig_id), on, -32602, &msg);
                drop(st);
                return self.reply(client, reply);
            }
        };
        if let Err(e) = self.judge_command(&st, &snap, &method, &params) {
            let on = (!browser_level).then_some(session.as_str());
            let reply = error_reply_on(Some(orig_id), on, -32000, &e.to_string());
            drop(st);
            return self.reply(client, reply);
        }
        // The browser is not the client's to close or crash (`life.rs`), on whichever session
        // it asks: Chromium closes the whole browser for a page's session or socket too.
        if matches!(method.as_str(), "Browser.close" | "Browser.crash") {
            let on = (!browser_level).then_some(session.as_str());
            if method == "Browser.close" {
                self.close_browser_for(&mut st, client, orig_id, on);
            } else {
                let refusal = error_reply_on(Some(orig_id), on, -32000, life::NO_CRASH);
                deliver(&mut st, client, Out::Text(refusal));
            }
            let outbox = std::mem::take(&mut st.outbox);
            drop(st);
            self.flush(outbox);
            return self.send_due();
        }
        let renderer_sid = target
            .as_deref()
            .and_then(|t| supervisor_session(&snap, t))
            .map(str::to_string);
        // While a person holds the task (SPEC §20), a client's command into one of its pages
        // fails as the agent's own calls do; resuming a target paused on attach still passes,
        // so that no page is left waiting for a debugger.
        if let (Some(_), Some(since)) = (&renderer_sid, snap.handover.held_since)
            && method != "Runtime.runIfWaitingForDebugger"
        {
            let held = crate::error::Error::HeldByHuman {
                task_id: snap.task_id.clone(),
                since,
            };
            let reply = error_reply(Some(orig_id), -32000, &held.to_string());
            drop(st);
            return self.reply(client, reply);
        }
        let mut known = Vec::new();
        if let Some(sid) = &renderer_sid {
            match policy::admit(&snap, self.policy.must_respond, sid, &method) {
                Ok(adm) => known = adm.known.iter().map(|d| d.id.clone()).collect(),
                Err(e) => {
                    let on = (!browser_level).then_some(session.as_str());
                    let reply = error_reply_on(Some(orig_id), on, -32000, &client_wording(&e));
                    drop(st);
                    return self.reply(client, reply);
                }
            }
        }
        let attach_target = (method == "Target.attachToTarget")
            .then(|| decode::<SessionParams>(cmd.params).and_then(|p| p.target_id))
            .flatten();
        match method.as_str() {
            "Page.enable" if target.is_some() => drop(st.page_enabled.insert(session.clone())),
            "Page.disable" => drop(st.page_enabled.remove(&session)),
            _ => {}
        }
        let may_wait = st.page_enabled.contains(&session) && !st.shown.contains(&session);
        let creates = method == "Target.createTarget";
        if method == "Page.handleJavaScriptDialog"
            && let Some(sid) = &renderer_sid
        {
            st.answers.push(sid.clone());
            self.answers_queued.store(true, Ordering::Release);
        }
        if creates && let Some(c) = st.clients.get_mut(&client) {
            c.creating += 1;
        }
        if browser_level {
            Mux::remember(&mut st, client, &method, cmd.params.map(RawValue::get));
        }
        let id = shared.next_command_id();
        let params = cmd.params.map_or("{}", RawValue::get);
        let mut up = String::with_capacity(params.len() + method.len() + session.len() + 64);
        up.push_str(r#"{"id":"#);
        let _ = write!(up, "{id}");
        up.push_str(r#","method":"#);
        push_json_str(&mut up, &method);
        up.push_str(r#","params":"#);
        up.push_str(params);
        up.push_str(r#","sessionId":"#);
        push_json_str(&mut up, &session);
        up.push('}');
        st.pending.insert(
            id,
            Some(Pending {
                client,
                orig_id: orig_id.to_owned(),
                method,
                browser_level,
                session: session.clone(),
                renderer_sid,
                known,
                attach_target,
                may_wait,
            }),
        );
        drop(st);
        let sent = shared
            .transport
            .load()
            .send_text_until(up, Deadline::after(WRITE_BUDGET));
        if let Err(e) = sent {
            let why = match e {
                SendError::DeadlinePassed => "the browser did not take the command in time".into(),
                SendError::Lost(e) => e.to_string(),
            };
            let mut st = self.lock();
            if let Some(Some(p)) = st.pending.remove(&id) {
                if creates && let Some(c) = st.clients.get_mut(&client) {
                    c.creating = c.creating.saturating_sub(1);
                }
                let on = (!p.browser_level).then_some(p.session.as_str());
                let text = error_reply_on(Some(&p.orig_id), on, -32000, &why);
                drop(st);
                self.reply(client, text);
            }
        }
    }

    /// Sends `text` to `client` now (from a client thread).
    fn reply(&self, client: u64, text: String) {
        deliver(&mut self.lock(), client, Out::Text(text));
        self.send_due();
    }

    /// Sends `client` a pong now.
    pub(super) fn pong(&self, client: u64, payload: Vec<u8>) {
        deliver(&mut self.lock(), client, Out::Pong(payload));
        self.send_due();
    }

    /// Writes what waits for clients ([`State::due`]), from this thread, without waiting.
    pub(super) fn send_due(&self) {
        let due = std::mem::take(&mut self.lock().due);
        for outlet in due {
            outlet.send();
        }
    }

    /// Sends `client` a close frame (its writer ends after it).
    pub(super) fn close_one(&self, client: u64, code: u16, reason: &str) {
        if let Some(c) = self.lock().clients.get(&client) {
            c.outlet.push(Out::Close(code, reason.to_string()));
        }
    }

    /// Disconnects every client with a close frame (`code`, `reason`).
    pub(super) fn close_all(&self, code: u16, reason: &str) {
        self.stop_clock();
        let mut st = self.lock();
        Mux::forget_life(&mut st);
        if st.closed.is_none() {
            st.closed = Some((code, reason.to_string()));
        }
        for (_, c) in st.clients.drain() {
            c.outlet.push(Out::Close(code, reason.to_string()));
        }
        st.pending.clear();
        st.sessions.clear();
        st.browser_sessions.clear();
        st.page_enabled.clear();
        st.shown.clear();
    }
}

/// Queues `out` for `client` without waiting (a client past its outlet's bounds is cut); its
/// outlet is due for [`Mux::send_due`] when nothing waited there.
fn deliver(st: &mut State, client: u64, out: Out) {
    if let Some(c) = st.clients.get(&client)
        && c.outlet.push(out) == Pushed::First
    {
        let outlet = Arc::clone(&c.outlet);
        st.due.push(outlet);
    }
}
