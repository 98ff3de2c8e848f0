//! A scripted fake Chrome DevTools Protocol browser.
//!
//! [`FakeBrowser`] is a small WebSocket server on `127.0.0.1` that speaks just
//! enough CDP (modelled on Chromium 156) for a client to discover the default
//! page target, attach to it with a flat session, read its frame tree, enable
//! the runtime and handle JavaScript dialogs. Its real purpose is to do what a
//! real Chromium cannot be made to do on demand: drop connections, swallow
//! commands (black hole), answer late, answer with arbitrary results or
//! errors, stop reading so the client's socket buffer fills up, and send
//! arbitrary (even malformed) frames. Tests override the answer of any method
//! with a [`Rule`] and emit any event with [`FakeBrowser::emit`].
//!
//! The same port also answers plain HTTP `GET /json/version`, like Chromium's
//! remote debugging port; every other plain HTTP request gets a 404.
//!
//! # Threading
//!
//! Everything is synchronous (blocking sockets and threads, no async runtime):
//!
//! * one *accept* thread blocks in `TcpListener::accept`; `Drop` wakes it by
//!   setting a shutdown flag and connecting to the listener itself;
//! * one *connection* thread per accepted socket reads the HTTP request head,
//!   then either answers it (plain HTTP) or completes the WebSocket handshake
//!   and loops on blocking reads, handling each command in turn;
//! * one *timer* thread owns a deadline-ordered queue of delayed answers
//!   ([`Rule::Delay`]), so a delay never blocks a connection's reader.
//!
//! Each WebSocket connection is split: the connection thread owns the reading
//! half, while writes (replies, events from [`FakeBrowser::emit`], delayed
//! answers, raw frames) go through a `Mutex<WebSocket<TcpStream>>` built on a
//! clone of the same socket. One caveat of the split: control frames that the
//! reading half answers by itself (pong, close reply) are written without that
//! mutex, which is harmless for the clients this fake is meant for.
//!
//! `Drop` sets the shutdown flag, wakes every waiter, shuts down every socket
//! (which wakes blocked reads and writes) and joins every thread, so it
//! returns quickly even while clients are connected.
//!
//! Bad input from a client never panics the fake: text that is not JSON and
//! binary frames are recorded (see [`FakeBrowser::received_invalid`]) and
//! otherwise ignored.
//!
//! # Layout
//!
//! * this file: the public API ([`FakeBrowser`], [`Rule`]) and shutdown;
//! * `shared`: the state every thread shares (targets, sessions, connections,
//!   recorded input) and the helpers that write to a connection;
//! * `server`: connection plumbing (accept loop, HTTP `/json/version`,
//!   WebSocket handshake and split, the per-connection reader loop);
//! * `script`: the scripted CDP behaviour (rules, built-in answers per method);
//! * `timer`: the timer thread that fires delayed answers ([`Rule::Delay`]).

mod script;
mod server;
mod shared;
#[cfg(test)]
mod tests;
mod timer;

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::Message;

use crate::sync::lock;
use script::apply_delayed;
use server::accept_loop;
use shared::{Shared, State, Target};
use timer::{TimerMsg, run_timer};

use crate::deadline::Deadline;

/// Id of the default page target; also the id of its main frame.
const DEFAULT_PAGE_ID: &str = "PAGE-1";
/// URL of the default page.
const DEFAULT_PAGE_URL: &str = "http://fake.test/";
/// Browser context every target belongs to.
const BROWSER_CONTEXT_ID: &str = "CTX-1";
/// Product string reported by `/json/version` and `Browser.getVersion`.
const PRODUCT: &str = "FakeChrome/1.0";

/// How the fake answers one CDP method (see [`FakeBrowser::set_rule`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Rule {
    /// The built-in behaviour, mimicking Chromium.
    Default,
    /// Answer `{"id", "sessionId"?, "result": value}`.
    Reply(Value),
    /// Answer `{"id", "sessionId"?, "error": {"code", "message"}}`.
    Error {
        /// CDP error code, e.g. `-32000`.
        code: i64,
        /// CDP error message.
        message: String,
    },
    /// Never answer.
    Ignore,
    /// Apply the inner rule after the delay, from the timer thread (the
    /// connection keeps reading meanwhile).
    Delay(Duration, Box<Rule>),
    /// Abruptly close the connection (TCP shutdown) instead of answering.
    CloseConnection,
}

/// A scripted fake CDP browser (see the module documentation).
pub struct FakeBrowser {
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    timer: Option<JoinHandle<()>>,
}

impl FakeBrowser {
    /// Starts the fake on `127.0.0.1` with an ephemeral port.
    pub fn start() -> io::Result<FakeBrowser> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let port = listener.local_addr()?.port();
        let (timer_tx, timer_rx) = crossbeam_channel::unbounded();
        let state = State {
            rules: HashMap::new(),
            targets: vec![Target {
                id: DEFAULT_PAGE_ID.to_string(),
                url: DEFAULT_PAGE_URL.to_string(),
                title: "Fake page".to_string(),
            }],
            next_page: 1,
            next_session: 0,
            dialog_open: false,
            received: Vec::new(),
            invalid: Vec::new(),
            conns: Vec::new(),
            accepted: 0,
            upgraded_at: Vec::new(),
            new_browser_per_connection: false,
            auto_attach_pages: false,
            silent: false,
            stop_reading: false,
            shutdown: false,
        };
        let shared = Arc::new(Shared {
            port,
            state: Mutex::new(state),
            changed: Condvar::new(),
            sockets: Mutex::new(HashMap::new()),
            next_socket: AtomicU64::new(0),
            workers: Mutex::new(Vec::new()),
            timer: timer_tx,
        });
        // Built first so that a failed spawn below still cleans up via Drop.
        let mut fake = FakeBrowser {
            shared: Arc::clone(&shared),
            accept: None,
            timer: None,
        };
        let timer_shared = Arc::clone(&shared);
        fake.timer = Some(
            thread::Builder::new()
                .name("fake-cdp-timer".into())
                .spawn(move || run_timer(&timer_rx, |d| apply_delayed(&timer_shared, d)))?,
        );
        fake.accept = Some(
            thread::Builder::new()
                .name("fake-cdp-accept".into())
                .spawn(move || accept_loop(&shared, &listener))?,
        );
        Ok(fake)
    }

    /// The browser WebSocket endpoint, `ws://127.0.0.1:PORT/devtools/browser/fake`.
    pub fn ws_url(&self) -> String {
        format!("ws://127.0.0.1:{}/devtools/browser/fake", self.shared.port)
    }

    /// The HTTP endpoint, `http://127.0.0.1:PORT`.
    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.shared.port)
    }

    /// The id of the default page target (`"PAGE-1"`), also its main frame id.
    pub fn page_target_id(&self) -> String {
        DEFAULT_PAGE_ID.to_string()
    }

    /// Overrides the answer to `method` on every connection and session.
    pub fn set_rule(&self, method: &str, rule: Rule) {
        self.shared
            .update(|st| st.rules.insert(method.to_string(), rule));
    }

    /// Restores the built-in answer to `method`.
    pub fn clear_rule(&self, method: &str) {
        self.shared.update(|st| st.rules.remove(method));
    }

    /// Sends an event (with `sessionId` when given) to every live connection.
    pub fn emit(&self, session_id: Option<&str>, method: &str, params: Value) {
        for conn in self.shared.live_conns() {
            self.shared
                .send_event(&conn, session_id, method, params.clone());
        }
    }

    /// Sends an event on every connection's page session (the session that
    /// connection attached to a page first: the default page, or the page it
    /// created for itself); connections that have not attached get nothing.
    pub fn emit_on_page(&self, method: &str, params: Value) {
        self.shared.emit_on_page(method, &params);
    }

    /// Marks a JavaScript dialog open and emits `Page.javascriptDialogOpening`
    /// on the page session of every connection. `kind` is the CDP dialog type
    /// (`alert`, `confirm`, `prompt`, `beforeunload`).
    pub fn open_dialog(&self, kind: &str, message: &str, default_prompt: &str) {
        self.shared.update(|st| st.dialog_open = true);
        let params = json!({
            "url": DEFAULT_PAGE_URL,
            "frameId": DEFAULT_PAGE_ID,
            "message": message,
            "type": kind,
            "hasBrowserHandler": false,
            "defaultPrompt": default_prompt,
        });
        self.shared
            .emit_on_page("Page.javascriptDialogOpening", &params);
    }

    /// Marks the dialog closed (as if the user dismissed it) and emits
    /// `Page.javascriptDialogClosed {result: false, userInput: ""}` on the
    /// page session of every connection.
    pub fn close_dialog_remotely(&self) {
        self.shared.update(|st| st.dialog_open = false);
        let params = json!({"result": false, "userInput": ""});
        self.shared
            .emit_on_page("Page.javascriptDialogClosed", &params);
    }

    /// Whether a JavaScript dialog is currently open.
    pub fn dialog_open(&self) -> bool {
        self.shared.state().dialog_open
    }

    /// Every JSON message received, from all connections, in arrival order
    /// (including JSON messages that were not valid commands).
    pub fn received(&self) -> Vec<Value> {
        self.shared.state().received.clone()
    }

    /// Every input that was not JSON: the text itself, or
    /// `<binary N bytes>` for a binary frame.
    pub fn received_invalid(&self) -> Vec<String> {
        self.shared.state().invalid.clone()
    }

    /// Waits until a received message matches `pred` (messages received
    /// before the call count) and returns the first match, or `None` after
    /// `timeout`. `pred` runs under the fake's lock: it must not call back
    /// into the fake.
    pub fn wait_for_command(
        &self,
        pred: impl Fn(&Value) -> bool,
        timeout: Duration,
    ) -> Option<Value> {
        let mut checked = 0;
        self.shared.wait_state(Deadline::after(timeout), |state| {
            let found = state.received[checked..].iter().find(|c| pred(c)).cloned();
            checked = state.received.len();
            found
        })
    }

    /// Number of live WebSocket connections.
    pub fn connection_count(&self) -> usize {
        self.shared.state().conns.len()
    }

    /// Number of WebSocket connections accepted since start.
    pub fn accepted_count(&self) -> usize {
        self.shared.state().accepted
    }

    /// When each WebSocket upgrade was answered (its `101 Switching Protocols` written), in
    /// order: for tests that race something against a reconnect's handshake.
    pub fn upgrade_instants(&self) -> Vec<Instant> {
        self.shared.state().upgraded_at.clone()
    }

    /// Behave like an endpoint that launches a new browser for every WebSocket connection
    /// (Browserless): from now on each new connection sees only one new page target
    /// (`PAGE-n`, a new id), the earlier pages are gone, and `/json/version` names the root URL
    /// (`ws://127.0.0.1:PORT`) as Browserless's does.
    pub fn set_new_browser_per_connection(&self, on: bool) {
        self.shared.update(|st| st.new_browser_per_connection = on);
    }

    /// Behave like Chromium on a browser-level `Target.setAutoAttach {autoAttach: true}`: attach
    /// every page the browser holds to that connection at once (one `Target.attachedToTarget`
    /// each, with a new session, not waiting for the debugger) before answering, and answer
    /// `Target.detachFromTarget` (with `Target.detachedFromTarget`) and `Target.getTargetInfo`
    /// (with which a registry connects its popup watcher). Off by default; the fleet bench turns
    /// it on to show what a connect costs while the browser holds many pages.
    pub fn set_auto_attach_pages(&self, on: bool) {
        self.shared.update(|st| st.auto_attach_pages = on);
    }

    /// The ids of the page targets the browser has now.
    pub fn page_target_ids(&self) -> Vec<String> {
        self.shared
            .state()
            .targets
            .iter()
            .map(|t| t.id.clone())
            .collect()
    }

    /// Waits until exactly `n` WebSocket connections are live; returns false
    /// on timeout.
    pub fn wait_for_connections(&self, n: usize, timeout: Duration) -> bool {
        self.shared
            .wait_state(Deadline::after(timeout), |state| {
                (state.conns.len() == n).then_some(())
            })
            .is_some()
    }

    /// Abruptly closes (TCP shutdown, no close frame) every live connection.
    pub fn drop_connections(&self) {
        for conn in self.shared.live_conns() {
            self.shared.close_conn(&conn);
        }
    }

    /// Black hole mode: keep reading and recording commands but answer
    /// nothing (delayed answers included) and emit no automatic events.
    /// Explicit [`emit`](Self::emit) and dialog calls still send.
    pub fn set_silent(&self, silent: bool) {
        self.shared.update(|st| st.silent = silent);
    }

    /// Stops (or resumes) reading every socket, so the peer's TCP send
    /// buffer eventually fills. A reader already blocked in a read handles
    /// one more message before parking.
    pub fn set_stop_reading(&self, stop: bool) {
        self.shared.update(|st| st.stop_reading = stop);
    }

    /// Sends a text frame with any content (malformed JSON, huge, ...) to
    /// every live connection.
    pub fn send_raw_text(&self, text: impl Into<String>) {
        self.send_frame(Message::text(text.into()));
    }

    /// Sends a binary frame to every live connection (CDP never sends one).
    pub fn send_raw_binary(&self, bytes: Vec<u8>) {
        self.send_frame(Message::binary(bytes));
    }

    fn send_frame(&self, msg: Message) {
        for conn in self.shared.live_conns() {
            self.shared.send(&conn, msg.clone());
        }
    }

    /// Sends a reply `{"id", "sessionId", "result"}` to every live connection, whatever the
    /// rules say: a late answer to a command the fake ignored, for instance.
    pub fn send_reply(&self, id: &Value, session_id: &str, result: Value) {
        let frame = json!({"id": id, "sessionId": session_id, "result": result});
        self.send_raw_text(frame.to_string());
    }

    /// Writes raw bytes straight onto every live connection's socket,
    /// bypassing WebSocket framing (for corrupt frames).
    pub fn send_raw_bytes(&self, bytes: &[u8]) {
        for conn in self.shared.live_conns() {
            let result = lock(&conn.writer).get_mut().write_all(bytes);
            if let Err(e) = result {
                log::debug!("fake browser: raw write failed: {e}");
                self.shared.close_conn(&conn);
            }
        }
    }

    /// The sessions the live connections have attached to `target_id`.
    pub fn sessions_on(&self, target_id: &str) -> Vec<String> {
        (self.shared.live_conns().iter())
            .flat_map(|c| c.sessions_on(target_id))
            .collect()
    }

    /// The page sessions of the live connections (each one's first session).
    pub fn page_sessions(&self) -> Vec<String> {
        self.shared
            .live_conns()
            .iter()
            .filter_map(|c| c.page_session())
            .collect()
    }
}

impl std::fmt::Debug for FakeBrowser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.state();
        f.debug_struct("FakeBrowser")
            .field("port", &self.shared.port)
            .field("live_connections", &state.conns.len())
            .field("accepted", &state.accepted)
            .field("dialog_open", &state.dialog_open)
            .field("silent", &state.silent)
            .field("stop_reading", &state.stop_reading)
            .finish_non_exhaustive()
    }
}

impl Drop for FakeBrowser {
    /// Shuts down every socket and joins every thread.
    fn drop(&mut self) {
        self.shared.update(|st| st.shutdown = true);
        if let Some(accept) = self.accept.take() {
            let addr = SocketAddr::from(([127, 0, 0, 1], self.shared.port));
            match TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
                Ok(_wake) => {
                    if accept.join().is_err() {
                        log::warn!("fake browser: accept thread panicked");
                    }
                }
                Err(e) => log::warn!("fake browser: cannot wake accept thread: {e}"),
            }
        }
        for socket in lock(&self.shared.sockets).values() {
            let _ = socket.shutdown(Shutdown::Both);
        }
        for conn in self.shared.live_conns() {
            conn.closed.store(true, Ordering::SeqCst);
        }
        self.shared.update(|_| ());
        if self.shared.timer.send(TimerMsg::Stop).is_err() {
            log::debug!("fake browser: timer already gone");
        }
        let workers = std::mem::take(&mut *lock(&self.shared.workers));
        for worker in workers {
            if worker.join().is_err() {
                log::warn!("fake browser: connection thread panicked");
            }
        }
        if let Some(timer) = self.timer.take()
            && timer.join().is_err()
        {
            log::warn!("fake browser: timer thread panicked");
        }
    }
}
