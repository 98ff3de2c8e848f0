//! State shared by the fake's threads: targets, per-connection sessions,
//! recorded input, and the helpers that write frames to a connection.

use crate::sync::{self, lock};
use std::collections::HashMap;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use serde_json::{Map, Value, json};
use tungstenite::{Message, WebSocket};

use super::timer::TimerMsg;
use super::{BROWSER_CONTEXT_ID, Rule};
use crate::deadline::{Deadline, Left};

/// A page target known to the fake.
#[derive(Debug, Clone)]
pub(super) struct Target {
    pub(super) id: String,
    pub(super) url: String,
    pub(super) title: String,
}

impl Target {
    /// The `TargetInfo` object Chromium reports for this target.
    pub(super) fn info(&self, attached: bool) -> Value {
        json!({
            "targetId": self.id,
            "type": "page",
            "title": self.title,
            "url": self.url,
            "attached": attached,
            "canAccessOpener": false,
            "browserContextId": BROWSER_CONTEXT_ID,
        })
    }
}

/// Sessions handed out on one connection.
#[derive(Debug, Default)]
pub(super) struct Sessions {
    /// Session id -> target id.
    targets: HashMap<String, String>,
    /// The connection's page session: the first session it attached to a page (the default
    /// page, or the page it created for itself, as an MCP task does).
    page: Option<String>,
}

/// One live WebSocket connection.
pub(super) struct Conn {
    /// A clone of the socket, used only to shut it down.
    pub(super) raw: TcpStream,
    /// The writing half; every outgoing frame goes through it.
    pub(super) writer: Mutex<WebSocket<TcpStream>>,
    /// Set once the connection has been shut down.
    pub(super) closed: AtomicBool,
    /// Sessions attached on this connection.
    pub(super) sessions: Mutex<Sessions>,
}

impl Conn {
    /// Whether the connection has been shut down.
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The target a session of this connection is attached to.
    pub(super) fn session_target(&self, session_id: &str) -> Option<String> {
        lock(&self.sessions).targets.get(session_id).cloned()
    }

    /// The sessions of this connection attached to `target_id`.
    pub(super) fn sessions_on(&self, target_id: &str) -> Vec<String> {
        let sessions = lock(&self.sessions);
        (sessions.targets.iter())
            .filter(|(_, t)| *t == target_id)
            .map(|(s, _)| s.clone())
            .collect()
    }

    /// The connection's page session, if it attached to a page.
    pub(super) fn page_session(&self) -> Option<String> {
        lock(&self.sessions).page.clone()
    }

    /// Forgets a session; returns its target.
    pub(super) fn remove_session(&self, session_id: &str) -> Option<String> {
        let mut sessions = lock(&self.sessions);
        if sessions.page.as_deref() == Some(session_id) {
            sessions.page = None;
        }
        sessions.targets.remove(session_id)
    }

    /// Records a new session; the connection's first one (every target of the fake is a page)
    /// becomes its page session.
    pub(super) fn add_session(&self, session_id: &str, target_id: &str) {
        let mut sessions = lock(&self.sessions);
        sessions
            .targets
            .insert(session_id.to_string(), target_id.to_string());
        if sessions.page.is_none() {
            sessions.page = Some(session_id.to_string());
        }
    }
}

/// Mutable state shared by every thread, guarded by `Shared::state`.
pub(super) struct State {
    pub(super) rules: HashMap<String, Rule>,
    pub(super) targets: Vec<Target>,
    pub(super) next_page: u64,
    pub(super) next_session: u64,
    pub(super) dialog_open: bool,
    pub(super) received: Vec<Value>,
    pub(super) invalid: Vec<String>,
    pub(super) conns: Vec<Arc<Conn>>,
    pub(super) accepted: usize,
    /// When each WebSocket upgrade was answered (the 101 written), in order.
    pub(super) upgraded_at: Vec<Instant>,
    /// Each new WebSocket connection gets a browser of its own: one new page, new ids.
    pub(super) new_browser_per_connection: bool,
    /// A browser-level `Target.setAutoAttach` attaches every page (`set_auto_attach_pages`).
    pub(super) auto_attach_pages: bool,
    pub(super) silent: bool,
    pub(super) stop_reading: bool,
    pub(super) shutdown: bool,
}

/// Everything the threads share.
pub(super) struct Shared {
    pub(super) port: u16,
    pub(super) state: Mutex<State>,
    /// Notified (under the `state` lock) on every change a waiter may need.
    pub(super) changed: Condvar,
    /// Every accepted socket still being served, by id, for shutdown on drop.
    pub(super) sockets: Mutex<HashMap<u64, TcpStream>>,
    pub(super) next_socket: AtomicU64,
    /// Connection threads to join on drop.
    pub(super) workers: Mutex<Vec<JoinHandle<()>>>,
    /// The timer thread's queue of delayed answers.
    pub(super) timer: Sender<TimerMsg<Delayed>>,
}

/// A delayed answer ([`Rule::Delay`]): `rule` applied to `cmd` on `conn` once it is due.
pub(super) struct Delayed {
    pub(super) conn: Arc<Conn>,
    pub(super) cmd: Value,
    pub(super) rule: Rule,
}

/// Builds an event frame.
fn event_frame(session_id: Option<&str>, method: &str, params: Value) -> Value {
    let mut frame = Map::new();
    frame.insert("method".into(), Value::from(method));
    frame.insert("params".into(), params);
    if let Some(session) = session_id {
        frame.insert("sessionId".into(), Value::from(session));
    }
    Value::Object(frame)
}

impl Shared {
    /// Locks the state.
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Waits until `check` returns `Some` (it runs under the lock after every state change) or
    /// `deadline` passes or the fake shuts down (`None`).
    pub(super) fn wait_state<T>(
        &self,
        deadline: Deadline,
        mut check: impl FnMut(&State) -> Option<T>,
    ) -> Option<T> {
        let mut state = self.state();
        loop {
            if let Some(v) = check(&state) {
                return Some(v);
            }
            let left = deadline.left();
            if left == Left::Passed || state.shutdown {
                return None;
            }
            state = match left {
                Left::In(d) => {
                    self.changed
                        .wait_timeout(state, d)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                _ => sync::wait(&self.changed, state),
            };
        }
    }

    /// Applies `change` to the state and wakes every waiter.
    pub(super) fn update<R>(&self, change: impl FnOnce(&mut State) -> R) -> R {
        let mut state = self.state();
        let result = change(&mut state);
        self.changed.notify_all();
        result
    }

    /// Whether `Drop` has started.
    pub(super) fn is_shutdown(&self) -> bool {
        self.state().shutdown
    }

    /// A snapshot of the live connections (so no lock is held while writing).
    pub(super) fn live_conns(&self) -> Vec<Arc<Conn>> {
        self.state().conns.clone()
    }

    /// Shuts a connection down and wakes its reader if it is parked.
    pub(super) fn close_conn(&self, conn: &Conn) {
        conn.closed.store(true, Ordering::SeqCst);
        if let Err(e) = conn.raw.shutdown(Shutdown::Both) {
            log::debug!("fake browser: shutdown failed: {e}");
        }
        self.update(|_| ());
    }

    /// Sends a frame on a connection; a failed write closes the connection.
    pub(super) fn send(&self, conn: &Conn, msg: Message) {
        if conn.is_closed() {
            return;
        }
        let result = lock(&conn.writer).send(msg);
        if let Err(e) = result {
            log::debug!("fake browser: write failed, closing connection: {e}");
            self.close_conn(conn);
        }
    }

    /// Sends a JSON frame on a connection.
    pub(super) fn send_json(&self, conn: &Conn, value: &Value) {
        self.send(conn, Message::text(value.to_string()));
    }

    /// Sends an event on a connection.
    pub(super) fn send_event(
        &self,
        conn: &Conn,
        session_id: Option<&str>,
        method: &str,
        params: Value,
    ) {
        self.send_json(conn, &event_frame(session_id, method, params));
    }

    /// Records text or binary input that is not a JSON command.
    pub(super) fn record_invalid(&self, what: String) {
        log::debug!(
            "fake browser: ignoring invalid input ({} bytes)",
            what.len()
        );
        self.update(|st| st.invalid.push(what));
    }

    /// Records a parsed command; returns whether the fake is silent and the
    /// rule for its method.
    pub(super) fn record_command(&self, cmd: &Value) -> (bool, Rule) {
        self.update(|st| {
            st.received.push(cmd.clone());
            let rule = cmd
                .get("method")
                .and_then(Value::as_str)
                .and_then(|m| st.rules.get(m).cloned())
                .unwrap_or(Rule::Default);
            (st.silent, rule)
        })
    }

    /// Queues a delayed answer on the timer thread.
    pub(super) fn schedule(&self, delay: Duration, conn: &Arc<Conn>, cmd: &Value, rule: Rule) {
        let delayed = Delayed {
            conn: Arc::clone(conn),
            cmd: cmd.clone(),
            rule,
        };
        let due = Deadline::after(delay);
        let item = Box::new(delayed);
        if self.timer.send(TimerMsg::Schedule { due, item }).is_err() {
            log::debug!("fake browser: timer gone, dropping delayed answer");
        }
    }

    /// Parks a connection thread while reading is stopped; returns false when
    /// the connection or the whole fake is shutting down.
    pub(super) fn wait_while_stopped(&self, conn: &Conn) -> bool {
        let mut state = self.state();
        while state.stop_reading && !state.shutdown && !conn.is_closed() {
            state = sync::wait(&self.changed, state);
        }
        !state.shutdown && !conn.is_closed()
    }

    /// Registers a freshly handshaken connection. In new-browser-per-connection mode, every
    /// connection after the first replaces the targets with one new page, like an endpoint
    /// (Browserless) that launches a browser per WebSocket connection.
    pub(super) fn add_conn(&self, conn: &Arc<Conn>) {
        let now = Instant::now();
        self.update(|st| {
            if st.new_browser_per_connection && st.accepted > 0 {
                st.next_page += 1;
                st.targets = vec![Target {
                    id: format!("PAGE-{}", st.next_page),
                    url: "about:blank".to_string(),
                    title: "about:blank".to_string(),
                }];
                st.dialog_open = false;
            }
            st.conns.push(Arc::clone(conn));
            st.accepted += 1;
            st.upgraded_at.push(now);
        });
    }

    /// Forgets a connection whose reader has exited.
    pub(super) fn remove_conn(&self, conn: &Arc<Conn>) {
        self.update(|st| st.conns.retain(|c| !Arc::ptr_eq(c, conn)));
    }

    /// Marks the dialog closed; returns whether one was open.
    pub(super) fn take_dialog(&self) -> bool {
        self.update(|st| std::mem::replace(&mut st.dialog_open, false))
    }

    /// The target with the given id.
    pub(super) fn target(&self, target_id: &str) -> Option<Target> {
        self.state()
            .targets
            .iter()
            .find(|t| t.id == target_id)
            .cloned()
    }

    /// A new `SESSION-n` id.
    pub(super) fn new_session_id(&self) -> String {
        let mut state = self.state();
        state.next_session += 1;
        format!("SESSION-{}", state.next_session)
    }

    /// Sends `method` to every live connection's page session.
    pub(super) fn emit_on_page(&self, method: &str, params: &Value) {
        for conn in self.live_conns() {
            if let Some(session) = conn.page_session() {
                self.send_event(&conn, Some(&session), method, params.clone());
            }
        }
    }
}
