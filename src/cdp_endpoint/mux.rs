//! One task's clients on its one upstream connection: ids rewritten both ways, sessions owned
//! per client, the dialog rule applied to every client command, bounded queues.
//!
//! # Per-client browser state: a browser session each
//!
//! Chromium keeps `Target.setDiscoverTargets`, browser-level `Target.setAutoAttach` and the rest
//! per *session*, and a connection's root is one session: clients that shared it would switch
//! each other's discovery and auto-attach. So each client gets a session of its own on the
//! browser target (`Target.attachToBrowserTarget`), and its browser-level commands (no
//! `sessionId`) are sent on it. Measured on Chromium 156 (two browser sessions plus the root, all
//! auto-attaching with `waitForDebuggerOnStart` on one connection): each got its own
//! `targetCreated`/`attachedToTarget` with a session of its own for a new page; a page resumed
//! by one attacher ran without waiting for the other; detaching one attacher's child, or its
//! whole browser session, left the other's state and sessions alone.
//!
//! # Who gets what
//!
//! A reply goes to the client whose command it answers (under the client's own id, and without
//! `sessionId` when the client sent none). An event goes to the client that owns its session: its
//! browser session (delivered without `sessionId`, as on a connection of its own) or a session
//! attached under one of its sessions (`Target.attachedToTarget`, `Target.attachToTarget`).
//! What a client owns the supervisor's state machine never sees ([`Tap::claims`]); a client
//! may not use a session it does not own (Chromium's own error: session not found).
//!
//! # Dialogs
//!
//! A command on a client session runs in a target; the supervisor's own session on that target
//! gives it a renderer, and `core/policy.rs` decides as for the supervisor's own calls: refused
//! at once with an error naming the dialog ([`policy::admit`]), or failed when a dialog opens
//! while it is in flight (on each publish, [`Tap::published`]) unless the client enabled `Page`
//! on the call's session: it is shown the dialog (`Page.javascriptDialogOpening`) and can answer
//! it, so its call waits for the answer as on a connection of its own (Puppeteer's
//! `page.evaluate(() => alert())` with a dialog handler).
//!
//! # Slow clients
//!
//! The reader hands each client its messages with `try_send` on a bounded queue
//! ([`QUEUE_MAX`]): a client that falls that far behind is disconnected (logged), never waited
//! for.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crossbeam_channel::{Sender, TrySendError};
use log::{debug, warn};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::core::policy;
use crate::deadline::Deadline;
use crate::shared::Shared;
use crate::snapshot::{Snapshot, SupervisorState};
use crate::tap::Tap;
use crate::transport::SendError;

/// Messages queued for one client before it counts as too slow and is disconnected.
pub(super) const QUEUE_MAX: usize = 4096;

/// How long writing one client command upstream may take.
const WRITE_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);

/// What a client's writer sends.
#[derive(Debug)]
pub(super) enum Out {
    /// A text message.
    Text(String),
    /// A pong with this payload.
    Pong(Vec<u8>),
    /// A close frame, then the end.
    Close(u16, String),
}

/// A client as the mux knows it.
#[derive(Debug)]
struct Client {
    tx: Sender<Out>,
    browser_session: String,
    /// For the logs: the client's address.
    peer: String,
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
    /// The session it went on (the client's own id for it: sessions are not renamed).
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
}

/// One task's clients.
pub(crate) struct Mux {
    /// Weak: the supervisor's `Shared` holds the mux (its tap), and must be freed with it.
    shared: Weak<Shared>,
    task_id: String,
    must_respond: bool,
    state: Mutex<State>,
}

impl std::fmt::Debug for Mux {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mux")
            .field("task_id", &self.task_id)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    id: Option<u64>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(rename = "sessionId", borrow)]
    session_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ClientCommand<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    method: Option<String>,
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct SessionParams {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
    #[serde(rename = "targetInfo")]
    target_info: Option<TargetInfo>,
    #[serde(rename = "targetId")]
    target_id: Option<String>,
}

#[derive(Deserialize)]
struct TargetInfo {
    #[serde(rename = "targetId")]
    target_id: String,
    #[serde(rename = "type", default)]
    kind: String,
}

fn decode<'a, T: Deserialize<'a>>(raw: Option<&'a RawValue>) -> Option<T> {
    raw.and_then(|r| serde_json::from_str(r.get()).ok())
}

/// A CDP error reply to `id` (raw JSON, `null` when the client sent none), on `session` when the
/// command named one: as Chromium's, since Playwright finds a reply's caller by its `sessionId`.
pub(super) fn error_reply(
    id: Option<&RawValue>,
    session: Option<&str>,
    code: i64,
    message: &str,
) -> String {
    let id = id.map_or("null", RawValue::get);
    let message = serde_json::Value::from(message);
    let session = session.map_or(String::new(), |s| {
        format!(r#","sessionId":{}"#, serde_json::Value::from(s))
    });
    format!(r#"{{"id":{id},"error":{{"code":{code},"message":{message}}}{session}}}"#)
}

/// What a client is told of a refusal: the supervisor's error, and how a CDP client answers.
fn client_wording(e: &crate::error::Error) -> String {
    match e {
        crate::error::Error::BlockedByDialog { .. } => format!(
            "{e} (through the supervisor), or with Page.handleJavaScriptDialog on this page"
        ),
        _ => e.to_string(),
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
    pub(super) fn new(shared: &Arc<Shared>, task_id: &str, must_respond: bool) -> Mux {
        Mux {
            shared: Arc::downgrade(shared),
            task_id: task_id.to_string(),
            must_respond,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new client on `browser_session`, its messages queued on `tx`; returns its id.
    pub(super) fn join(&self, browser_session: String, tx: Sender<Out>, peer: String) -> u64 {
        let mut st = self.lock();
        st.next_client += 1;
        let id = st.next_client;
        st.browser_sessions.insert(browser_session.clone(), id);
        st.clients.insert(
            id,
            Client {
                tx,
                browser_session,
                peer,
            },
        );
        id
    }

    /// Number of clients connected now.
    pub(super) fn client_count(&self) -> usize {
        self.lock().clients.len()
    }

    /// The client has gone: its sessions are detached (the browser session last), fire and
    /// forget, and its commands in flight forgotten.
    pub(super) fn leave(&self, client: u64) {
        let (sessions, browser_session) = {
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
                st.page_enabled.remove(s);
                st.shown.remove(s);
            }
            st.browser_sessions.retain(|_, c| *c != client);
            let b = st.clients.remove(&client).map(|c| c.browser_session);
            (mine, b)
        };
        let Some(browser_session) = browser_session else {
            return; // disconnected by the mux already, which detached it
        };
        for s in sessions {
            self.send_own("Target.detachFromTarget", &s);
        }
        self.send_own("Target.detachFromTarget", &browser_session);
    }

    /// Sends one of the endpoint's own commands (its reply swallowed).
    fn send_own(&self, method: &str, session: &str) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let id = shared.next_id();
        let params = serde_json::json!({ "sessionId": session });
        let text = format!(r#"{{"id":{id},"method":"{method}","params":{params}}}"#);
        self.lock().pending.insert(id, None);
        if let Err(SendError::Lost(e)) = shared
            .transport
            .load()
            .send_text_until(text, Deadline::after(WRITE_BUDGET))
        {
            debug!("task {}: {method} not sent: {e}", self.task_id);
        }
    }

    /// A command from `client`: checked, rewritten and sent upstream; or answered at once with
    /// an error (malformed, a session it does not own, a dialog that blocks it).
    pub(super) fn forward(&self, client: u64, text: &str) {
        let cmd: ClientCommand<'_> = match serde_json::from_str(text) {
            Ok(c) => c,
            Err(e) => {
                return self.reply(client, error_reply(None, None, -32700, &format!("{e}")));
            }
        };
        let (Some(orig_id), Some(method)) = (cmd.id, cmd.method) else {
            let msg = "Message must have integer 'id' and string 'method' properties";
            return self.reply(
                client,
                error_reply(cmd.id, cmd.session_id.as_deref(), -32600, msg),
            );
        };
        let Some(shared) = self.shared.upgrade() else {
            let msg = "the task's supervisor has ended";
            let reply = error_reply(Some(orig_id), cmd.session_id.as_deref(), -32000, msg);
            return self.reply(client, reply);
        };
        let snap = shared.snapshot.load_full();
        let mut st = self.lock();
        let Some(c) = st.clients.get(&client) else {
            return;
        };
        let browser_level = cmd.session_id.is_none();
        let session = match cmd.session_id {
            None => c.browser_session.clone(),
            Some(s) => s,
        };
        let target = match st.sessions.get(&session) {
            Some((owner, target)) if *owner == client => Some(target.clone()),
            None if st.browser_sessions.get(&session) == Some(&client) => None,
            _ => {
                let msg = format!("Session with given id not found. ({session})");
                let reply = error_reply(Some(orig_id), None, -32001, &msg);
                drop(st);
                return self.reply(client, reply);
            }
        };
        let renderer_sid = target
            .as_deref()
            .and_then(|t| supervisor_session(&snap, t))
            .map(str::to_string);
        let mut known = Vec::new();
        if let Some(sid) = &renderer_sid {
            match policy::admit(&snap, self.must_respond, sid, &method) {
                Ok(adm) => known = adm.known.iter().map(|d| d.id.clone()).collect(),
                Err(e) => {
                    let on = (!browser_level).then_some(session.as_str());
                    let reply = error_reply(Some(orig_id), on, -32000, &client_wording(&e));
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
        let id = shared.next_id();
        let params = cmd.params.map_or("{}", RawValue::get);
        let method_json = serde_json::Value::from(method.as_str());
        let session_json = serde_json::Value::from(session.as_str());
        let up = format!(
            r#"{{"id":{id},"method":{method_json},"params":{params},"sessionId":{session_json}}}"#
        );
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
            if let Some(Some(p)) = self.lock().pending.remove(&id) {
                let on = (!p.browser_level).then_some(p.session.as_str());
                self.reply(client, error_reply(Some(&p.orig_id), on, -32000, &why));
            }
        }
    }

    /// Queues `text` for `client`, from a client thread.
    fn reply(&self, client: u64, text: String) {
        let mut st = self.lock();
        deliver(&mut st, &self.task_id, client, Out::Text(text));
    }

    /// Queues a pong for `client`.
    pub(super) fn pong(&self, client: u64, payload: Vec<u8>) {
        let mut st = self.lock();
        deliver(&mut st, &self.task_id, client, Out::Pong(payload));
    }

    /// Sends `client` a close frame (its writer ends after it).
    pub(super) fn close_one(&self, client: u64, code: u16, reason: &str) {
        if let Some(c) = self.lock().clients.get(&client) {
            let _ = c.tx.try_send(Out::Close(code, reason.to_string()));
        }
    }

    /// Disconnects every client with a close frame (`code`, `reason`).
    pub(super) fn close_all(&self, code: u16, reason: &str) {
        let mut st = self.lock();
        for (_, c) in st.clients.drain() {
            let _ = c.tx.try_send(Out::Close(code, reason.to_string()));
        }
        st.pending.clear();
        st.sessions.clear();
        st.browser_sessions.clear();
        st.page_enabled.clear();
        st.shown.clear();
    }

    fn on_reply(&self, st: &mut State, id: u64, env: &Envelope<'_>) -> bool {
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
            st.sessions
                .insert(s, (p.client, p.attach_target.clone().unwrap_or_default()));
        }
        let body = match (env.result, env.error) {
            (_, Some(e)) => format!(r#""error":{}"#, e.get()),
            (Some(r), None) => format!(r#""result":{}"#, r.get()),
            (None, None) => r#""result":{}"#.to_string(),
        };
        let session = match (&env.session_id, p.browser_level) {
            (Some(s), false) => format!(r#","sessionId":{}"#, serde_json::Value::from(s.as_ref())),
            _ => String::new(),
        };
        let text = format!(r#"{{"id":{},{body}{session}}}"#, p.orig_id.get());
        deliver(st, &self.task_id, p.client, Out::Text(text));
        true
    }

    fn on_event(&self, st: &mut State, method: &str, session: &str, env: &Envelope<'_>) -> bool {
        let (client, browser_level) = if let Some(c) = st.browser_sessions.get(session) {
            (*c, true)
        } else if let Some((c, _)) = st.sessions.get(session) {
            (*c, false)
        } else {
            return false;
        };
        match method {
            "Target.attachedToTarget" => {
                if let Some(p) = decode::<SessionParams>(env.params)
                    && let Some(s) = p.session_id
                {
                    let target = p.target_info.map(|t| t.target_id).unwrap_or_default();
                    st.sessions.insert(s, (client, target));
                }
            }
            "Target.detachedFromTarget" => {
                if let Some(p) = decode::<SessionParams>(env.params)
                    && let Some(s) = p.session_id
                {
                    st.sessions.remove(&s);
                    st.page_enabled.remove(&s);
                    st.shown.remove(&s);
                }
            }
            "Page.javascriptDialogOpening" => drop(st.shown.insert(session.to_string())),
            "Page.javascriptDialogClosed" => drop(st.shown.remove(session)),
            _ => {}
        }
        let params = env.params.map_or("{}", RawValue::get);
        let m = serde_json::Value::from(method);
        let text = if browser_level {
            format!(r#"{{"method":{m},"params":{params}}}"#)
        } else {
            let s = serde_json::Value::from(session);
            format!(r#"{{"method":{m},"params":{params},"sessionId":{s}}}"#)
        };
        deliver(st, &self.task_id, client, Out::Text(text));
        true
    }
}

/// Queues `out` for `client` without waiting: a full queue disconnects the client (logged).
fn deliver(st: &mut State, task_id: &str, client: u64, out: Out) {
    let Some(c) = st.clients.get(&client) else {
        return;
    };
    match c.tx.try_send(out) {
        Ok(()) => {}
        Err(TrySendError::Full(_)) => {
            warn!(
                "task {task_id}: CDP client {} fell {QUEUE_MAX} messages behind; disconnected",
                c.peer
            );
            // Its queue goes (a sender whose receiver is gone): the writer, finding the queue
            // closed, shuts the socket, and the client's reader then leaves (detaching its
            // sessions). Until then, what else comes for it is dropped.
            if let Some(c) = st.clients.get_mut(&client) {
                c.tx = crossbeam_channel::bounded(0).0;
            }
        }
        Err(TrySendError::Disconnected(_)) => {}
    }
}

impl Tap for Mux {
    fn claims(&self, text: &str) -> bool {
        let Ok(env) = serde_json::from_str::<Envelope<'_>>(text) else {
            return false;
        };
        let Some(method) = env.method.as_deref() else {
            let Some(id) = env.id else { return false };
            let mut st = self.lock();
            return self.on_reply(&mut st, id, &env);
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
        let mut st = self.lock();
        if let Some(id) = env.id {
            return self.on_reply(&mut st, id, &env);
        }
        match env.session_id.as_deref() {
            Some(s) => self.on_event(&mut st, method, s, &env),
            // A client's browser session detached (it left): not the supervisor's business.
            None if method == "Target.detachedFromTarget" => decode::<SessionParams>(env.params)
                .and_then(|p| p.session_id)
                .is_some_and(|s| {
                    st.browser_sessions.contains_key(&s) || st.sessions.remove(&s).is_some()
                }),
            None => false,
        }
    }

    fn published(&self, snap: &Snapshot) {
        match &snap.state {
            SupervisorState::Stopped => return self.close_all(1001, "the task stopped"),
            SupervisorState::Dead { reason } => {
                return self.close_all(1011, &format!("the task's supervisor ended: {reason}"));
            }
            _ => {}
        }
        if !self.must_respond || snap.pending_dialogs.is_empty() {
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
                !p.known.contains(&d.id)
                    && policy::dialog_blocks(snap, d, sid, &p.method)
                    && policy::blocks_in_flight(&d.kind, &p.method)
            }) {
                let e = client_wording(&policy::dialog_error(d, false, &p.method));
                let on = (!p.browser_level).then_some(p.session.as_str());
                let reply = error_reply(Some(&p.orig_id), on, -32000, &e);
                failed.push((*id, p.client, reply));
            }
        }
        for (id, client, text) in failed {
            // Its reply, if it ever comes, is swallowed.
            st.pending.insert(id, None);
            deliver(&mut st, &self.task_id, client, Out::Text(text));
        }
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
