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

use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufRead, BufReader, Cursor, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use serde_json::{Map, Value, json};
use tungstenite::protocol::{Role, WebSocketConfig};
use tungstenite::{Message, WebSocket};

/// Largest WebSocket message (and frame) accepted or sent: 64 MiB.
const MAX_MESSAGE_SIZE: usize = 64 << 20;
/// Id of the default page target; also the id of its main frame.
const DEFAULT_PAGE_ID: &str = "PAGE-1";
/// URL of the default page.
const DEFAULT_PAGE_URL: &str = "http://fake.test/";
/// Browser context every target belongs to.
const BROWSER_CONTEXT_ID: &str = "CTX-1";
/// Product string reported by `/json/version` and `Browser.getVersion`.
const PRODUCT: &str = "FakeChrome/1.0";
/// Upper bound on the size of an HTTP request head.
const MAX_REQUEST_HEAD: usize = 16 * 1024;
/// Methods the default behaviour answers with an empty object.
const EMPTY_RESULT_METHODS: &[&str] = &[
    "Page.enable",
    "Page.disable",
    "Runtime.disable",
    "Runtime.runIfWaitingForDebugger",
    "Target.setAutoAttach",
    "Target.setDiscoverTargets",
    "Fetch.enable",
    "Fetch.disable",
    "Fetch.continueRequest",
    "Fetch.fulfillRequest",
    "Network.enable",
    "Page.reload",
    "Page.navigate",
    "Log.enable",
];
/// Domains that only exist on a page session, not on the browser endpoint.
const PAGE_ONLY_DOMAINS: &[&str] = &["Page.", "Runtime.", "Network.", "Log."];

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

/// A CDP error answer.
#[derive(Debug, Clone, PartialEq)]
struct CdpError {
    code: i64,
    message: String,
}

impl CdpError {
    /// Builds an error answer.
    fn new(code: i64, message: impl Into<String>) -> Self {
        CdpError {
            code,
            message: message.into(),
        }
    }

    /// Chromium's answer for a method it does not know.
    fn not_found(method: &str) -> Self {
        CdpError::new(-32601, format!("'{method}' wasn't found"))
    }
}

/// A page target known to the fake.
#[derive(Debug, Clone)]
struct Target {
    id: String,
    url: String,
    title: String,
}

impl Target {
    /// The `TargetInfo` object Chromium reports for this target.
    fn info(&self, attached: bool) -> Value {
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
struct Sessions {
    /// Session id -> target id.
    targets: HashMap<String, String>,
    /// The first session attached to the default page target.
    page: Option<String>,
}

/// One live WebSocket connection.
struct Conn {
    /// A clone of the socket, used only to shut it down.
    raw: TcpStream,
    /// The writing half; every outgoing frame goes through it.
    writer: Mutex<WebSocket<TcpStream>>,
    /// Set once the connection has been shut down.
    closed: AtomicBool,
    /// Sessions attached on this connection.
    sessions: Mutex<Sessions>,
}

impl Conn {
    /// Whether the connection has been shut down.
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The target a session of this connection is attached to.
    fn session_target(&self, session_id: &str) -> Option<String> {
        lock(&self.sessions).targets.get(session_id).cloned()
    }

    /// The connection's page session, if it attached to the default page.
    fn page_session(&self) -> Option<String> {
        lock(&self.sessions).page.clone()
    }

    /// Records a new session; the first one on the default page becomes the
    /// page session.
    fn add_session(&self, session_id: &str, target_id: &str) {
        let mut sessions = lock(&self.sessions);
        sessions
            .targets
            .insert(session_id.to_string(), target_id.to_string());
        if target_id == DEFAULT_PAGE_ID && sessions.page.is_none() {
            sessions.page = Some(session_id.to_string());
        }
    }
}

/// Mutable state shared by every thread, guarded by `Shared::state`.
struct State {
    rules: HashMap<String, Rule>,
    targets: Vec<Target>,
    next_page: u64,
    next_session: u64,
    dialog_open: bool,
    received: Vec<Value>,
    invalid: Vec<String>,
    conns: Vec<Arc<Conn>>,
    accepted: usize,
    silent: bool,
    stop_reading: bool,
    shutdown: bool,
}

/// A delayed answer waiting in the timer queue.
struct Delayed {
    due: Instant,
    conn: Arc<Conn>,
    cmd: Value,
    rule: Rule,
}

/// Messages to the timer thread.
enum TimerMsg {
    /// Queue a delayed answer.
    Schedule(Box<Delayed>),
    /// Exit.
    Stop,
}

/// Everything the threads share.
struct Shared {
    port: u16,
    state: Mutex<State>,
    /// Notified (under the `state` lock) on every change a waiter may need.
    changed: Condvar,
    /// Every accepted socket still being served, by id, for shutdown on drop.
    sockets: Mutex<HashMap<u64, TcpStream>>,
    next_socket: AtomicU64,
    /// Connection threads to join on drop.
    workers: Mutex<Vec<JoinHandle<()>>>,
    timer: Sender<TimerMsg>,
}

/// Locks a mutex, ignoring poisoning (a panicking test must not cascade).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The WebSocket configuration used on both halves of every connection.
fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE_SIZE))
        .max_frame_size(Some(MAX_MESSAGE_SIZE))
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

/// Builds the answer to `cmd`, echoing its `id` and `sessionId`.
fn reply_frame(cmd: &Value, outcome: Result<Value, CdpError>) -> Value {
    let mut frame = Map::new();
    frame.insert("id".into(), cmd.get("id").cloned().unwrap_or(Value::Null));
    if let Some(session) = cmd.get("sessionId") {
        frame.insert("sessionId".into(), session.clone());
    }
    match outcome {
        Ok(result) => frame.insert("result".into(), result),
        Err(e) => frame.insert(
            "error".into(),
            json!({"code": e.code, "message": e.message}),
        ),
    };
    Value::Object(frame)
}

/// The security origin of a URL, as Chromium reports it for a frame.
fn origin_of(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) if scheme == "http" || scheme == "https" => {
            let host = rest.split('/').next().unwrap_or_default();
            format!("{scheme}://{host}")
        }
        _ => "://".to_string(),
    }
}

impl Shared {
    /// Locks the state.
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Applies `change` to the state and wakes every waiter.
    fn update<R>(&self, change: impl FnOnce(&mut State) -> R) -> R {
        let mut state = self.state();
        let result = change(&mut state);
        self.changed.notify_all();
        result
    }

    /// Whether `Drop` has started.
    fn is_shutdown(&self) -> bool {
        self.state().shutdown
    }

    /// A snapshot of the live connections (so no lock is held while writing).
    fn live_conns(&self) -> Vec<Arc<Conn>> {
        self.state().conns.clone()
    }

    /// Shuts a connection down and wakes its reader if it is parked.
    fn close_conn(&self, conn: &Conn) {
        conn.closed.store(true, Ordering::SeqCst);
        if let Err(e) = conn.raw.shutdown(Shutdown::Both) {
            log::debug!("fake browser: shutdown failed: {e}");
        }
        self.update(|_| ());
    }

    /// Sends a frame on a connection; a failed write closes the connection.
    fn send(&self, conn: &Conn, msg: Message) {
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
    fn send_json(&self, conn: &Conn, value: &Value) {
        self.send(conn, Message::text(value.to_string()));
    }

    /// Sends an event on a connection.
    fn send_event(&self, conn: &Conn, session_id: Option<&str>, method: &str, params: Value) {
        self.send_json(conn, &event_frame(session_id, method, params));
    }

    /// Records text or binary input that is not a JSON command.
    fn record_invalid(&self, what: String) {
        log::debug!(
            "fake browser: ignoring invalid input ({} bytes)",
            what.len()
        );
        self.update(|st| st.invalid.push(what));
    }

    /// Records a parsed command; returns whether the fake is silent and the
    /// rule for its method.
    fn record_command(&self, cmd: &Value) -> (bool, Rule) {
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
    fn schedule(&self, delay: Duration, conn: &Arc<Conn>, cmd: &Value, rule: Rule) {
        let delayed = Delayed {
            due: Instant::now() + delay,
            conn: Arc::clone(conn),
            cmd: cmd.clone(),
            rule,
        };
        if self
            .timer
            .send(TimerMsg::Schedule(Box::new(delayed)))
            .is_err()
        {
            log::debug!("fake browser: timer gone, dropping delayed answer");
        }
    }

    /// Parks a connection thread while reading is stopped; returns false when
    /// the connection or the whole fake is shutting down.
    fn wait_while_stopped(&self, conn: &Conn) -> bool {
        let mut state = self.state();
        while state.stop_reading && !state.shutdown && !conn.is_closed() {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        !state.shutdown && !conn.is_closed()
    }

    /// Registers a freshly handshaken connection.
    fn add_conn(&self, conn: &Arc<Conn>) {
        self.update(|st| {
            st.conns.push(Arc::clone(conn));
            st.accepted += 1;
        });
    }

    /// Forgets a connection whose reader has exited.
    fn remove_conn(&self, conn: &Arc<Conn>) {
        self.update(|st| st.conns.retain(|c| !Arc::ptr_eq(c, conn)));
    }

    /// Marks the dialog closed; returns whether one was open.
    fn take_dialog(&self) -> bool {
        self.update(|st| std::mem::replace(&mut st.dialog_open, false))
    }

    /// The target with the given id.
    fn target(&self, target_id: &str) -> Option<Target> {
        self.state()
            .targets
            .iter()
            .find(|t| t.id == target_id)
            .cloned()
    }

    /// A new `SESSION-n` id.
    fn new_session_id(&self) -> String {
        let mut state = self.state();
        state.next_session += 1;
        format!("SESSION-{}", state.next_session)
    }

    /// Sends `method` to every live connection's page session.
    fn emit_on_page(&self, method: &str, params: &Value) {
        for conn in self.live_conns() {
            if let Some(session) = conn.page_session() {
                self.send_event(&conn, Some(&session), method, params.clone());
            }
        }
    }
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
                .spawn(move || run_timer(&timer_shared, &timer_rx))?,
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
    /// connection attached to the default page); connections that have not
    /// attached get nothing.
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
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.state();
        let mut checked = 0;
        loop {
            if let Some(found) = state.received[checked..].iter().find(|c| pred(c)) {
                return Some(found.clone());
            }
            checked = state.received.len();
            let now = Instant::now();
            if now >= deadline || state.shutdown {
                return None;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Number of live WebSocket connections.
    pub fn connection_count(&self) -> usize {
        self.shared.state().conns.len()
    }

    /// Number of WebSocket connections accepted since start.
    pub fn accepted_count(&self) -> usize {
        self.shared.state().accepted
    }

    /// Waits until exactly `n` WebSocket connections are live; returns false
    /// on timeout.
    pub fn wait_for_connections(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.state();
        loop {
            if state.conns.len() == n {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
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

    /// Sends any frame (malformed text, binary, huge, close, ...) to every
    /// live connection.
    pub fn send_raw(&self, msg: Message) {
        for conn in self.shared.live_conns() {
            self.shared.send(&conn, msg.clone());
        }
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

    /// The session ids that live connections attached to the default page.
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

/// The accept thread: hands each socket to its own connection thread.
fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    loop {
        let accepted = listener.accept();
        if shared.is_shutdown() {
            return;
        }
        let stream = match accepted {
            Ok((stream, _)) => {
                // Small request/reply messages: Nagle plus delayed ACKs would add ~40 ms each.
                let _ = stream.set_nodelay(true);
                stream
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            Err(e) => {
                log::warn!("fake browser: accept failed, no more connections: {e}");
                return;
            }
        };
        spawn_connection(shared, stream);
    }
}

/// Registers a socket (so `Drop` can shut it down) and starts its thread.
fn spawn_connection(shared: &Arc<Shared>, stream: TcpStream) {
    let id = shared.next_socket.fetch_add(1, Ordering::SeqCst);
    match stream.try_clone() {
        Ok(clone) => lock(&shared.sockets).insert(id, clone),
        Err(e) => {
            log::debug!("fake browser: cannot clone socket: {e}");
            return;
        }
    };
    let thread_shared = Arc::clone(shared);
    let spawned = thread::Builder::new()
        .name("fake-cdp-conn".into())
        .spawn(move || {
            if let Err(e) = serve_socket(&thread_shared, &stream) {
                log::debug!("fake browser: connection ended: {e}");
            }
            let _ = stream.shutdown(Shutdown::Both);
            lock(&thread_shared.sockets).remove(&id);
        });
    match spawned {
        Ok(handle) => {
            let mut workers = lock(&shared.workers);
            // Finished threads need no join; dropping their handles is enough.
            workers.retain(|w| !w.is_finished());
            workers.push(handle);
        }
        Err(e) => {
            log::warn!("fake browser: cannot spawn connection thread: {e}");
            if let Some(socket) = lock(&shared.sockets).remove(&id) {
                let _ = socket.shutdown(Shutdown::Both);
            }
        }
    }
}

/// The parts of an HTTP request head the fake cares about.
#[derive(Debug, PartialEq)]
struct RequestHead {
    method: String,
    path: String,
    websocket_upgrade: bool,
}

/// Reads an HTTP request head (up to the empty line) from `reader`.
fn read_request_head(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut head = Vec::new();
    loop {
        let start = head.len();
        let n = reader
            .by_ref()
            .take((MAX_REQUEST_HEAD - start) as u64)
            .read_until(b'\n', &mut head)?;
        if n == 0 || !head.ends_with(b"\n") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "incomplete or oversized HTTP request head",
            ));
        }
        let line = &head[start..];
        if line == b"\r\n" || line == b"\n" {
            return Ok(head);
        }
    }
}

/// Parses the request line and looks for `Upgrade: websocket`.
fn parse_request_head(head: &[u8]) -> RequestHead {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.lines();
    let mut first = lines.next().unwrap_or_default().split_whitespace();
    let method = first.next().unwrap_or_default().to_string();
    let target = first.next().unwrap_or_default();
    let path = target.split('?').next().unwrap_or_default().to_string();
    let websocket_upgrade = lines.any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("upgrade")
                && value.to_ascii_lowercase().contains("websocket")
        })
    });
    RequestHead {
        method,
        path,
        websocket_upgrade,
    }
}

/// Formats a complete HTTP/1.1 response that closes the connection.
fn http_response(status: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json; charset=UTF-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Answers a plain HTTP request: `/json/version` or 404.
fn answer_http(shared: &Shared, head: &RequestHead, out: &mut TcpStream) -> io::Result<()> {
    let is_version =
        head.method == "GET" && (head.path == "/json/version" || head.path == "/json/version/");
    let response = if is_version {
        let ws_url = format!("ws://127.0.0.1:{}/devtools/browser/fake", shared.port);
        let body = json!({"Browser": PRODUCT, "webSocketDebuggerUrl": ws_url});
        http_response("200 OK", &body.to_string())
    } else {
        http_response("404 Not Found", "{}")
    };
    out.write_all(response.as_bytes())?;
    out.flush()
}

/// The stream given to the WebSocket handshake: the already read request
/// head is replayed before the rest of the socket.
struct HandshakeIo {
    read: io::Chain<Cursor<Vec<u8>>, BufReader<TcpStream>>,
    write: TcpStream,
}

impl Read for HandshakeIo {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read.read(buf)
    }
}

impl Write for HandshakeIo {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write.flush()
    }
}

/// Serves one accepted socket: plain HTTP or a WebSocket connection.
fn serve_socket(shared: &Shared, stream: &TcpStream) -> io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let raw_head = read_request_head(&mut reader)?;
    let head = parse_request_head(&raw_head);
    if !head.websocket_upgrade {
        return answer_http(shared, &head, &mut stream.try_clone()?);
    }
    let io = HandshakeIo {
        read: Cursor::new(raw_head).chain(reader),
        write: stream.try_clone()?,
    };
    // The handshake's socket becomes the reading half: it keeps any bytes
    // the client sent right after its upgrade request.
    let ws_reader = tungstenite::accept_with_config(io, Some(ws_config()))
        .map_err(|e| io::Error::other(format!("WebSocket handshake failed: {e}")))?;
    let writer = WebSocket::from_raw_socket(stream.try_clone()?, Role::Server, Some(ws_config()));
    let conn = Arc::new(Conn {
        raw: stream.try_clone()?,
        writer: Mutex::new(writer),
        closed: AtomicBool::new(false),
        sessions: Mutex::new(Sessions::default()),
    });
    shared.add_conn(&conn);
    read_loop(shared, &conn, ws_reader);
    shared.close_conn(&conn);
    shared.remove_conn(&conn);
    Ok(())
}

/// Reads and handles frames until the connection or the fake shuts down.
fn read_loop(shared: &Shared, conn: &Arc<Conn>, mut reader: WebSocket<HandshakeIo>) {
    while shared.wait_while_stopped(conn) {
        match reader.read() {
            Ok(Message::Text(text)) => handle_text(shared, conn, text.as_str()),
            Ok(Message::Binary(data)) => {
                shared.record_invalid(format!("<binary {} bytes>", data.len()));
            }
            Ok(Message::Close(_)) => {
                // Best effort: send the close reply queued by tungstenite.
                let _ = reader.flush();
                return;
            }
            Ok(_) => {}
            Err(e) => {
                log::debug!("fake browser: read ended: {e}");
                return;
            }
        }
    }
}

/// Handles one text message: records it and answers it per its rule.
fn handle_text(shared: &Shared, conn: &Arc<Conn>, text: &str) {
    let cmd: Value = match serde_json::from_str(text) {
        Ok(cmd) => cmd,
        Err(_) => return shared.record_invalid(text.to_string()),
    };
    let (silent, rule) = shared.record_command(&cmd);
    if silent || !cmd.get("id").is_some_and(Value::is_number) {
        return;
    }
    if !cmd.get("method").is_some_and(Value::is_string) {
        let error = CdpError::new(-32600, "Message must have string 'method' property");
        return shared.send_json(conn, &reply_frame(&cmd, Err(error)));
    }
    apply_rule(shared, conn, &cmd, rule);
}

/// Answers `cmd` on `conn` according to `rule`.
fn apply_rule(shared: &Shared, conn: &Arc<Conn>, cmd: &Value, rule: Rule) {
    if shared.state().silent {
        return;
    }
    match rule {
        Rule::Default => {
            let outcome = default_answer(shared, conn, cmd);
            shared.send_json(conn, &reply_frame(cmd, outcome));
        }
        Rule::Reply(result) => shared.send_json(conn, &reply_frame(cmd, Ok(result))),
        Rule::Error { code, message } => {
            let error = CdpError::new(code, message);
            shared.send_json(conn, &reply_frame(cmd, Err(error)));
        }
        Rule::Ignore => {}
        Rule::Delay(delay, inner) => shared.schedule(delay, conn, cmd, *inner),
        Rule::CloseConnection => shared.close_conn(conn),
    }
}

/// The built-in (Chromium-like) answer; automatic events are sent first.
fn default_answer(shared: &Shared, conn: &Conn, cmd: &Value) -> Result<Value, CdpError> {
    let method = cmd
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let params = cmd.get("params").cloned().unwrap_or(Value::Null);
    let session = match cmd.get("sessionId") {
        None => None,
        Some(id) => {
            let id = id.as_str().unwrap_or_default();
            match conn.session_target(id) {
                Some(target) => Some((id, target)),
                None => return Err(CdpError::new(-32001, "Session with given id not found.")),
            }
        }
    };
    match method {
        "Target.getTargets" => {
            let infos: Vec<Value> = shared
                .state()
                .targets
                .iter()
                .map(|t| t.info(false))
                .collect();
            Ok(json!({"targetInfos": infos}))
        }
        "Target.createTarget" => Ok(create_target(shared, &params)),
        "Target.attachToTarget" => attach_to_target(shared, conn, &params),
        "Browser.getVersion" => Ok(json!({
            "protocolVersion": "1.3",
            "product": PRODUCT,
            "revision": "0",
            "userAgent": "Fake",
            "jsVersion": "0",
        })),
        m if EMPTY_RESULT_METHODS.contains(&m) && !needs_page(m, session.is_some()) => {
            Ok(json!({}))
        }
        "Page.addScriptToEvaluateOnNewDocument" if session.is_some() => {
            Ok(json!({"identifier": "1"}))
        }
        "Runtime.evaluate" if session.is_some() => {
            Ok(json!({"result": {"type": "string", "value": "fake"}}))
        }
        "Page.getFrameTree" => match session {
            Some((_, target)) => frame_tree(shared, &target),
            None => Err(CdpError::not_found(method)),
        },
        "Runtime.enable" => match session {
            Some((id, target)) => {
                let context = json!({"context": {
                    "id": 1,
                    "origin": origin_of(&target_url(shared, &target)),
                    "name": "",
                    "uniqueId": "CTX-U-1",
                    "auxData": {"isDefault": true, "type": "default", "frameId": target},
                }});
                shared.send_event(conn, Some(id), "Runtime.executionContextCreated", context);
                Ok(json!({}))
            }
            None => Err(CdpError::not_found(method)),
        },
        "Page.handleJavaScriptDialog" => match session {
            Some((id, _)) => handle_dialog(shared, conn, id, &params),
            None => Err(CdpError::not_found(method)),
        },
        _ => Err(CdpError::not_found(method)),
    }
}

/// Whether `method` belongs to a page-only domain and there is no session.
fn needs_page(method: &str, has_session: bool) -> bool {
    !has_session && PAGE_ONLY_DOMAINS.iter().any(|d| method.starts_with(d))
}

/// The URL of a target (the default page's URL if it is unknown).
fn target_url(shared: &Shared, target_id: &str) -> String {
    shared
        .target(target_id)
        .map_or_else(|| DEFAULT_PAGE_URL.to_string(), |t| t.url)
}

/// `Target.createTarget {url}`: adds a `PAGE-n` target.
fn create_target(shared: &Shared, params: &Value) -> Value {
    let url = params
        .get("url")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .unwrap_or("about:blank")
        .to_string();
    let id = shared.update(|st| {
        st.next_page += 1;
        let id = format!("PAGE-{}", st.next_page);
        st.targets.push(Target {
            id: id.clone(),
            title: url.clone(),
            url,
        });
        id
    });
    json!({"targetId": id})
}

/// `Target.attachToTarget`: emits `Target.attachedToTarget`, then answers
/// with the new session id (Chromium's order). Always behaves as flat.
fn attach_to_target(shared: &Shared, conn: &Conn, params: &Value) -> Result<Value, CdpError> {
    let target_id = params
        .get("targetId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(target) = shared.target(target_id) else {
        return Err(CdpError::new(-32602, "No target with given id found"));
    };
    let session = shared.new_session_id();
    conn.add_session(&session, &target.id);
    let event = json!({
        "sessionId": session,
        "targetInfo": target.info(true),
        "waitingForDebugger": false,
    });
    shared.send_event(conn, None, "Target.attachedToTarget", event);
    Ok(json!({"sessionId": session}))
}

/// `Page.getFrameTree` for a page target.
fn frame_tree(shared: &Shared, target_id: &str) -> Result<Value, CdpError> {
    let url = target_url(shared, target_id);
    let secure = if url.starts_with("https://") {
        "Secure"
    } else {
        "InsecureScheme"
    };
    Ok(json!({"frameTree": {"frame": {
        "id": target_id,
        "loaderId": "LOADER-1",
        "url": url,
        "domainAndRegistry": "",
        "securityOrigin": origin_of(&url),
        "mimeType": "text/html",
        "adFrameStatus": {"adFrameType": "none"},
        "secureContextType": secure,
        "crossOriginIsolatedContextType": "NotIsolated",
        "gatedAPIFeatures": [],
    }}}))
}

/// `Page.handleJavaScriptDialog`: closes the open dialog, emits
/// `Page.javascriptDialogClosed` on the session, then answers.
fn handle_dialog(
    shared: &Shared,
    conn: &Conn,
    session: &str,
    params: &Value,
) -> Result<Value, CdpError> {
    if !shared.take_dialog() {
        return Err(CdpError::new(-32602, "No dialog is showing"));
    }
    let accept = params
        .get("accept")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let input = params
        .get("promptText")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let event = json!({"result": accept, "userInput": input});
    shared.send_event(conn, Some(session), "Page.javascriptDialogClosed", event);
    Ok(json!({}))
}

/// The timer thread: fires delayed answers in deadline order.
fn run_timer(shared: &Shared, rx: &Receiver<TimerMsg>) {
    let mut queue: BTreeMap<(Instant, u64), Delayed> = BTreeMap::new();
    let mut seq = 0u64;
    loop {
        let next_due = queue.keys().next().map(|(due, _)| *due);
        let msg = match next_due {
            Some(due) => match rx.recv_deadline(due) {
                Ok(msg) => Some(msg),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            },
            None => match rx.recv() {
                Ok(msg) => Some(msg),
                Err(_) => return,
            },
        };
        match msg {
            Some(TimerMsg::Stop) => return,
            Some(TimerMsg::Schedule(delayed)) => {
                seq += 1;
                queue.insert((delayed.due, seq), *delayed);
            }
            None => fire_due(shared, &mut queue),
        }
    }
}

/// Applies every queued answer whose deadline has passed.
fn fire_due(shared: &Shared, queue: &mut BTreeMap<(Instant, u64), Delayed>) {
    let now = Instant::now();
    while let Some(entry) = queue.first_entry() {
        if entry.key().0 > now {
            return;
        }
        let delayed = entry.remove();
        if !delayed.conn.is_closed() {
            apply_rule(shared, &delayed.conn, &delayed.cmd, delayed.rule);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tungstenite::client::client;

    /// Client read/write timeout: long enough for CI, short enough not to hang.
    const IO_TIMEOUT: Duration = Duration::from_secs(5);

    /// A minimal blocking CDP client for the tests.
    struct Client {
        ws: WebSocket<TcpStream>,
    }

    impl Client {
        /// Connects to the fake's WebSocket endpoint.
        fn connect(fake: &FakeBrowser) -> Client {
            let addr = SocketAddr::from(([127, 0, 0, 1], fake.shared.port));
            let stream = TcpStream::connect(addr).expect("connect");
            stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
            stream.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
            let (ws, _) = client(fake.ws_url(), stream).expect("handshake");
            Client { ws }
        }

        /// Sends a JSON message.
        fn send(&mut self, value: Value) {
            self.ws
                .send(Message::text(value.to_string()))
                .expect("send");
        }

        /// Sends a command, with a session when given.
        fn command(&mut self, id: u64, method: &str, params: Value, session: Option<&str>) {
            let mut cmd = json!({"id": id, "method": method, "params": params});
            if let Some(s) = session {
                cmd["sessionId"] = Value::from(s);
            }
            self.send(cmd);
        }

        /// Reads the next message as JSON (text messages only).
        fn recv(&mut self) -> Value {
            loop {
                match self.ws.read().expect("read") {
                    Message::Text(t) => return serde_json::from_str(t.as_str()).expect("json"),
                    Message::Ping(_) | Message::Pong(_) => continue,
                    other => panic!("unexpected message {other:?}"),
                }
            }
        }

        /// Attaches to the default page and returns the session id.
        fn attach(&mut self, id: u64) -> String {
            self.command(
                id,
                "Target.attachToTarget",
                json!({"targetId": DEFAULT_PAGE_ID, "flatten": true}),
                None,
            );
            let event = self.recv();
            assert_eq!(event["method"], "Target.attachedToTarget");
            let reply = self.recv();
            assert_eq!(reply["id"], id);
            reply["result"]["sessionId"]
                .as_str()
                .expect("session")
                .to_string()
        }

        /// Asserts that the connection ends (close frame or EOF/reset), not a timeout.
        fn expect_closed(&mut self) {
            loop {
                match self.ws.read() {
                    Ok(Message::Close(_)) => continue,
                    Ok(other) => panic!("unexpected message {other:?}"),
                    Err(tungstenite::Error::Io(e))
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        panic!("timed out instead of being closed")
                    }
                    Err(_) => return,
                }
            }
        }
    }

    /// Sends a raw HTTP GET and returns the whole response.
    fn http_get(fake: &FakeBrowser, path: &str) -> String {
        let addr = SocketAddr::from(([127, 0, 0, 1], fake.shared.port));
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
        write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read");
        response
    }

    #[test]
    fn attach_flow() {
        let fake = FakeBrowser::start().expect("start");
        let mut c = Client::connect(&fake);
        c.command(1, "Target.getTargets", json!({}), None);
        let reply = c.recv();
        assert_eq!(reply["id"], 1);
        let infos = reply["result"]["targetInfos"].as_array().expect("infos");
        assert_eq!(infos.len(), 1);
        assert_eq!(infos[0]["targetId"], fake.page_target_id());
        assert_eq!(infos[0]["type"], "page");

        let session = c.attach(2);
        assert_eq!(fake.page_sessions(), vec![session.clone()]);

        c.command(3, "Page.getFrameTree", json!({}), Some(&session));
        let reply = c.recv();
        assert_eq!(reply["id"], 3);
        assert_eq!(reply["sessionId"], session.as_str());
        assert_eq!(reply["result"]["frameTree"]["frame"]["id"], DEFAULT_PAGE_ID);

        c.command(4, "Runtime.enable", json!({}), Some(&session));
        let event = c.recv();
        assert_eq!(event["method"], "Runtime.executionContextCreated");
        assert_eq!(event["sessionId"], session.as_str());
        assert_eq!(
            event["params"]["context"]["auxData"]["frameId"],
            DEFAULT_PAGE_ID
        );
        assert_eq!(c.recv()["id"], 4);

        c.command(5, "Page.getFrameTree", json!({}), None);
        assert_eq!(c.recv()["error"]["code"], -32601);
        c.command(6, "Page.enable", json!({}), Some("NOPE"));
        assert_eq!(c.recv()["error"]["code"], -32001);
        c.command(7, "Nope.nothing", json!({}), None);
        let reply = c.recv();
        assert_eq!(reply["error"]["message"], "'Nope.nothing' wasn't found");
        c.command(8, "Target.attachToTarget", json!({"targetId": "X"}), None);
        assert_eq!(c.recv()["error"]["code"], -32602);

        c.command(
            9,
            "Target.createTarget",
            json!({"url": "about:blank"}),
            None,
        );
        let created = c.recv()["result"]["targetId"].clone();
        assert_eq!(created, "PAGE-2");
        c.command(10, "Target.getTargets", json!({}), None);
        assert_eq!(
            c.recv()["result"]["targetInfos"].as_array().map(Vec::len),
            Some(2)
        );
    }

    #[test]
    fn dialog_flow() {
        let fake = FakeBrowser::start().expect("start");
        let mut c = Client::connect(&fake);
        let session = c.attach(1);

        fake.open_dialog("prompt", "Name?", "anon");
        assert!(fake.dialog_open());
        let opening = c.recv();
        assert_eq!(opening["method"], "Page.javascriptDialogOpening");
        assert_eq!(opening["sessionId"], session.as_str());
        assert_eq!(opening["params"]["type"], "prompt");
        assert_eq!(opening["params"]["defaultPrompt"], "anon");
        assert_eq!(opening["params"]["frameId"], DEFAULT_PAGE_ID);

        let params = json!({"accept": true, "promptText": "bob"});
        c.command(2, "Page.handleJavaScriptDialog", params, Some(&session));
        let closed = c.recv();
        assert_eq!(closed["method"], "Page.javascriptDialogClosed");
        assert_eq!(
            closed["params"],
            json!({"result": true, "userInput": "bob"})
        );
        let reply = c.recv();
        assert_eq!(reply["id"], 2);
        assert_eq!(reply["result"], json!({}));
        assert!(!fake.dialog_open());

        let params = json!({"accept": true});
        c.command(3, "Page.handleJavaScriptDialog", params, Some(&session));
        let reply = c.recv();
        assert_eq!(
            reply["error"],
            json!({"code": -32602, "message": "No dialog is showing"})
        );

        fake.open_dialog("alert", "hi", "");
        assert_eq!(c.recv()["method"], "Page.javascriptDialogOpening");
        fake.close_dialog_remotely();
        let closed = c.recv();
        assert_eq!(closed["params"], json!({"result": false, "userInput": ""}));
        assert!(!fake.dialog_open());
    }

    #[test]
    fn rules_override_answers() {
        let fake = FakeBrowser::start().expect("start");
        let mut c = Client::connect(&fake);

        fake.set_rule("Browser.getVersion", Rule::Reply(json!({"x": 1})));
        c.command(1, "Browser.getVersion", json!({}), Some("S"));
        let reply = c.recv();
        assert_eq!(reply["result"], json!({"x": 1}));
        assert_eq!(reply["sessionId"], "S");

        let error = Rule::Error {
            code: -32000,
            message: "boom".into(),
        };
        fake.set_rule("Browser.getVersion", error);
        c.command(2, "Browser.getVersion", json!({}), None);
        assert_eq!(
            c.recv()["error"],
            json!({"code": -32000, "message": "boom"})
        );

        fake.clear_rule("Browser.getVersion");
        fake.set_rule("Page.enable", Rule::Ignore);
        c.command(3, "Page.enable", json!({}), None);
        c.command(4, "Browser.getVersion", json!({}), None);
        let reply = c.recv();
        assert_eq!(reply["id"], 4);
        assert_eq!(reply["result"]["product"], PRODUCT);

        let late = Rule::Delay(
            Duration::from_millis(200),
            Box::new(Rule::Reply(json!({"late": true}))),
        );
        fake.set_rule("Custom.slow", late);
        c.command(5, "Custom.slow", json!({}), None);
        c.command(6, "Browser.getVersion", json!({}), None);
        assert_eq!(c.recv()["id"], 6);
        let reply = c.recv();
        assert_eq!(reply["id"], 5);
        assert_eq!(reply["result"], json!({"late": true}));

        fake.set_rule("Browser.close", Rule::CloseConnection);
        c.command(7, "Browser.close", json!({}), None);
        c.expect_closed();
        assert!(fake.wait_for_connections(0, IO_TIMEOUT));
        assert_eq!(fake.accepted_count(), 1);
    }

    #[test]
    fn delayed_default_and_silent() {
        let fake = FakeBrowser::start().expect("start");
        let mut c = Client::connect(&fake);
        let delayed = Rule::Delay(Duration::from_millis(50), Box::new(Rule::Default));
        fake.set_rule("Target.attachToTarget", delayed);
        let session = c.attach(1);
        assert!(!session.is_empty());

        fake.set_silent(true);
        c.command(2, "Browser.getVersion", json!({}), None);
        assert!(
            fake.wait_for_command(|m| m["id"] == 2, IO_TIMEOUT)
                .is_some()
        );
        fake.set_silent(false);
        c.command(3, "Browser.getVersion", json!({}), None);
        assert_eq!(c.recv()["id"], 3);
    }

    #[test]
    fn emit_events() {
        let fake = FakeBrowser::start().expect("start");
        let mut c = Client::connect(&fake);
        assert!(fake.wait_for_connections(1, IO_TIMEOUT));

        fake.emit(None, "Custom.event", json!({"a": 1}));
        assert_eq!(
            c.recv(),
            json!({"method": "Custom.event", "params": {"a": 1}})
        );
        fake.emit(Some("S-9"), "Custom.event", json!({}));
        assert_eq!(c.recv()["sessionId"], "S-9");

        // Not attached: emit_on_page sends nothing, so the next frame is a reply.
        fake.emit_on_page("Page.loadEventFired", json!({}));
        c.command(1, "Browser.getVersion", json!({}), None);
        assert_eq!(c.recv()["id"], 1);

        let session = c.attach(2);
        fake.emit_on_page("Page.loadEventFired", json!({"timestamp": 1}));
        let event = c.recv();
        assert_eq!(event["method"], "Page.loadEventFired");
        assert_eq!(event["sessionId"], session.as_str());

        fake.send_raw(Message::text("garbage{"));
        match c.ws.read().expect("read") {
            Message::Text(t) => assert_eq!(t.as_str(), "garbage{"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn invalid_input_is_recorded_not_answered() {
        let fake = FakeBrowser::start().expect("start");
        let mut c = Client::connect(&fake);
        c.ws.send(Message::text("not json")).expect("send");
        c.ws.send(Message::binary(vec![1u8, 2, 3])).expect("send");
        c.send(json!({"method": "Page.enable"}));
        c.send(json!({"id": "x", "method": "Page.enable"}));
        c.command(1, "Browser.getVersion", json!({}), None);
        assert_eq!(c.recv()["id"], 1);
        assert_eq!(
            fake.received_invalid(),
            vec!["not json".to_string(), "<binary 3 bytes>".to_string()]
        );
        assert_eq!(fake.received().len(), 3);
        let found = fake.wait_for_command(|m| m["id"] == "x", Duration::ZERO);
        assert!(found.is_some());
        let missing = fake.wait_for_command(|m| m["id"] == 99, Duration::from_millis(50));
        assert!(missing.is_none());
    }

    #[test]
    fn json_version_over_http() {
        let fake = FakeBrowser::start().expect("start");
        let response = http_get(&fake, "/json/version");
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        let body = response.split("\r\n\r\n").nth(1).expect("body");
        let body: Value = serde_json::from_str(body).expect("json");
        assert_eq!(body["Browser"], PRODUCT);
        assert_eq!(body["webSocketDebuggerUrl"], fake.ws_url());
        assert!(http_get(&fake, "/json/list").starts_with("HTTP/1.1 404"));
        assert_eq!(fake.accepted_count(), 0);
        assert!(fake.http_url().starts_with("http://127.0.0.1:"));
    }

    #[test]
    fn drop_connections_wakes_client() {
        let fake = FakeBrowser::start().expect("start");
        let mut a = Client::connect(&fake);
        let mut b = Client::connect(&fake);
        assert!(fake.wait_for_connections(2, IO_TIMEOUT));
        fake.drop_connections();
        a.expect_closed();
        b.expect_closed();
        assert!(fake.wait_for_connections(0, IO_TIMEOUT));
        assert_eq!(fake.accepted_count(), 2);
    }

    #[test]
    fn stop_reading_blocks_client_writes() {
        let fake = FakeBrowser::start().expect("start");
        let mut c = Client::connect(&fake);
        // Make sure the reader is live before stopping it.
        c.command(1, "Browser.getVersion", json!({}), None);
        assert_eq!(c.recv()["id"], 1);
        fake.set_stop_reading(true);
        c.ws.get_mut()
            .set_write_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let chunk = vec![0u8; 256 * 1024];
        let mut written = 0usize;
        let mut blocked = false;
        // Loopback socket buffers absorb roughly 5-6 MB before writes block.
        while written < 32 << 20 {
            match c.ws.send(Message::binary(chunk.clone())) {
                Ok(()) => written += chunk.len(),
                Err(_) => {
                    blocked = true;
                    break;
                }
            }
        }
        assert!(blocked, "client wrote {written} bytes without blocking");
        let started = Instant::now();
        drop(fake);
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn drop_is_fast_and_joins_threads() {
        let fake = FakeBrowser::start().expect("start");
        let mut a = Client::connect(&fake);
        let _session = a.attach(1);
        let mut b = Client::connect(&fake);
        let addr = SocketAddr::from(([127, 0, 0, 1], fake.shared.port));
        let _idle = TcpStream::connect(addr).expect("connect");
        let slow = Rule::Delay(Duration::from_secs(30), Box::new(Rule::Default));
        fake.set_rule("Page.enable", slow);
        a.command(2, "Page.enable", json!({}), None);
        assert!(
            fake.wait_for_command(|m| m["id"] == 2, IO_TIMEOUT)
                .is_some()
        );
        assert!(fake.wait_for_connections(2, IO_TIMEOUT));

        let shared = Arc::downgrade(&fake.shared);
        let started = Instant::now();
        drop(fake);
        assert!(started.elapsed() < Duration::from_secs(1));
        // Every thread held an Arc<Shared>; all of them are gone.
        assert!(shared.upgrade().is_none());
        a.expect_closed();
        b.expect_closed();
    }

    #[test]
    fn request_head_parsing() {
        let head = b"GET /devtools/browser/x?y=1 HTTP/1.1\r\nUpgrade: WebSocket\r\n\r\n";
        let parsed = parse_request_head(head);
        assert_eq!(parsed.method, "GET");
        assert_eq!(parsed.path, "/devtools/browser/x");
        assert!(parsed.websocket_upgrade);
        let mut reader = Cursor::new(b"GET / HTTP/1.1\r\nHost: x".to_vec());
        assert!(read_request_head(&mut reader).is_err());
        assert_eq!(origin_of("https://a.b/c"), "https://a.b");
        assert_eq!(origin_of("about:blank"), "://");
    }
}
