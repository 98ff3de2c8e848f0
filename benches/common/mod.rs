//! Shared pieces of the latency/throughput benches (not a bench target itself: Cargo only
//! discovers `benches/*.rs` and `benches/*/main.rs`).
//!
//! * [`Peer`]: a minimal CDP server on `127.0.0.1` that answers the attach sequence with the same
//!   JSON shapes as `FakeBrowser`, and lets the bench write pre-encoded WebSocket frames straight
//!   onto a connection's socket (no per-event serialisation, no lock besides one per write).
//! * [`RawClient`]: a plain tungstenite client (the baselines).
//! * Histogram and output helpers.
//!
//! Why the benches keep their own server and client instead of `cdp_supervisor::fake` and the
//! integration tests' `RawCdp` (`tests/it/common`), which every other bench and test uses:
//!
//! * [`Peer`] serves only `detect_latency` and `ingest`, which time frames written onto one
//!   chosen connection: pre-encoded, stamped after the write lock is taken
//!   ([`PeerConn::write_stamped`]), so the figure holds the supervisor's work and not the
//!   server's. `FakeBrowser::send_raw_bytes` writes to every live connection (the baseline
//!   clients share the server with the supervisor, on the same bytes), and the fake answers
//!   `Page.handleJavaScriptDialog` only for a dialog it opened itself (`open_dialog`, which
//!   serialises the event inside the timed interval), not for an opening written as raw bytes.
//!   `respond_latency`, `scale`, `start`, `mcp_latency` and `snapshot_read` need none of this
//!   and use `FakeBrowser`.
//! * [`RawClient`] is what the supervisor is measured against in every bench that uses it: a
//!   bare blocking read loop. `RawCdp` sets a read timeout before every read (one more syscall
//!   per message), which would slow the baseline and flatter the ratios.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

/// The page target (and main frame) id the peer reports.
pub const PAGE_ID: &str = "PAGE-1";
/// The page URL the peer reports.
pub const PAGE_URL: &str = "http://peer.test/";

// ------------------------------------------------------------------------------------------------
// Environment and output.

/// Runs a command and returns its trimmed stdout.
pub fn shell(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The environment variable `name` parsed as a `T` when it parses and `ok` accepts it, else
/// `default`.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T, ok: impl Fn(&T) -> bool) -> T {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|v| ok(v))
        .unwrap_or(default)
}

/// `(date -u, nproc)`.
pub fn machine() -> (String, String) {
    let date = shell("date", &["-u"]).unwrap_or_else(|| "unknown date".into());
    let nproc = shell("nproc", &[]).unwrap_or_else(|| {
        thread::available_parallelism().map_or("?".into(), |n| n.get().to_string())
    });
    (date, nproc)
}

/// A histogram of nanoseconds, 1 ns .. 100 s, 3 significant digits.
pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("histogram bounds")
}

/// Records a duration in ns.
pub fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record((d.as_nanos() as u64).max(1));
}

/// Quantile in microseconds.
pub fn q_us(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

/// Prints the latency table header.
pub fn lat_header() {
    println!(
        "{:<46} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "variant", "n", "p50 us", "p90 us", "p99 us", "max us", "mean us", "p50 x", "p99 x"
    );
    println!("{}", "-".repeat(124));
}

/// Prints one latency row; `base` is the baseline row's histogram for the ratios.
pub fn lat_row(name: &str, h: &Histogram<u64>, base: Option<&Histogram<u64>>) {
    let (x50, x99) = match base {
        Some(b) => (
            format!("{:.2}x", q_us(h, 0.5) / q_us(b, 0.5)),
            format!("{:.2}x", q_us(h, 0.99) / q_us(b, 0.99)),
        ),
        None => ("(base)".into(), "(base)".into()),
    };
    println!(
        "{:<46} {:>6} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>8} {:>8}",
        name,
        h.len(),
        q_us(h, 0.5),
        q_us(h, 0.9),
        q_us(h, 0.99),
        h.max() as f64 / 1000.0,
        h.mean() / 1000.0,
        x50,
        x99
    );
}

/// `MET` / `MISSED`.
pub fn verdict(ok: bool) -> &'static str {
    if ok { "MET" } else { "MISSED" }
}

/// Reads a `/proc/<pid>/status` field in KiB (`VmRSS`, `VmSize`, `Threads`).
pub fn proc_status(pid: &str, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(&format!("{key}:")))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// utime + stime of `/proc/<pid>/stat`, in clock ticks.
pub fn proc_cpu_ticks(pid: &str) -> u64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // The command name may contain spaces: fields start after the last ')'.
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state(0) ppid(1) ... utime is field 14 overall -> index 11 here, stime 12.
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}

/// Clock ticks per second.
pub fn ticks_per_s() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// Restricts every thread of this process (present ones; new threads and child processes inherit
/// it) to CPU 0. False when any thread could not be pinned.
pub fn pin_process_to_cpu0() -> bool {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return false;
    };
    let mut ok = true;
    for t in tasks.flatten() {
        let Some(tid) = t
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it; the size
        // passed is the set's own size.
        let rc = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        ok &= rc == 0;
    }
    ok
}

// ------------------------------------------------------------------------------------------------
// WebSocket framing (server -> client frames are unmasked).

/// Appends one unmasked text frame carrying `text` to `out`.
pub fn push_frame(out: &mut Vec<u8>, text: &str) {
    let b = text.as_bytes();
    out.push(0x81);
    if b.len() < 126 {
        out.push(b.len() as u8);
    } else if b.len() <= 0xffff {
        out.push(126);
        out.extend_from_slice(&(b.len() as u16).to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(b.len() as u64).to_be_bytes());
    }
    out.extend_from_slice(b);
}

/// One frame as bytes.
pub fn frame(text: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(text.len() + 10);
    push_frame(&mut v, text);
    v
}

/// An event message.
pub fn event(session: Option<&str>, method: &str, params: Value) -> String {
    let mut m = json!({"method": method, "params": params});
    if let Some(s) = session {
        m["sessionId"] = json!(s);
    }
    m.to_string()
}

/// `Page.javascriptDialogOpening` on `session`.
pub fn dialog_opening(session: &str, message: &str) -> String {
    event(
        Some(session),
        "Page.javascriptDialogOpening",
        json!({"url": PAGE_URL, "frameId": PAGE_ID, "message": message, "type": "alert",
            "hasBrowserHandler": false, "defaultPrompt": ""}),
    )
}

/// `Page.javascriptDialogClosed` on `session`.
pub fn dialog_closed(session: &str) -> String {
    event(
        Some(session),
        "Page.javascriptDialogClosed",
        json!({"result": true, "userInput": ""}),
    )
}

/// `Runtime.consoleAPICalled` (type error) on `session`.
pub fn console_error(session: &str, text: &str) -> String {
    event(
        Some(session),
        "Runtime.consoleAPICalled",
        json!({"type": "error", "args": [{"type": "string", "value": text}],
            "executionContextId": 1, "timestamp": 1.0,
            "stackTrace": {"callFrames": [{"url": "http://peer.test/app.js", "functionName": "f",
                "scriptId": "1", "lineNumber": 1, "columnNumber": 1}]}}),
    )
}

/// `Page.frameAttached` of a child frame of the page.
pub fn frame_attached(session: &str, frame_id: &str) -> String {
    event(
        Some(session),
        "Page.frameAttached",
        json!({"frameId": frame_id, "parentFrameId": PAGE_ID}),
    )
}

/// `Page.frameNavigated` of a child frame of the page.
pub fn frame_navigated(session: &str, frame_id: &str, url: &str) -> String {
    event(
        Some(session),
        "Page.frameNavigated",
        json!({"frame": {"id": frame_id, "parentId": PAGE_ID, "loaderId": format!("L-{frame_id}"),
            "url": url, "securityOrigin": "http://peer.test", "mimeType": "text/html"},
            "type": "Navigation"}),
    )
}

// ------------------------------------------------------------------------------------------------
// The peer: a minimal CDP server.

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One accepted WebSocket connection of the peer.
pub struct PeerConn {
    /// The writing half: pre-encoded frames go straight onto the socket.
    writer: Mutex<TcpStream>,
    raw: TcpStream,
    page_session: Mutex<Option<String>>,
    attached: Condvar,
}

impl PeerConn {
    /// Writes pre-encoded frame bytes.
    pub fn write(&self, bytes: &[u8]) {
        let _ = lock(&self.writer).write_all(bytes);
    }

    /// Writes `bytes` and returns the instant just before the write began (after the lock).
    pub fn write_stamped(&self, bytes: &[u8]) -> Instant {
        let mut w = lock(&self.writer);
        let t = Instant::now();
        let _ = w.write_all(bytes);
        t
    }

    /// The page session handed out on this connection, once the client attached.
    pub fn wait_page_session(&self, timeout: Duration) -> Option<String> {
        let deadline = Instant::now()
            .checked_add(timeout)
            .expect("a deadline within range");
        let mut s = lock(&self.page_session);
        while s.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            s = self
                .attached
                .wait_timeout(s, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        s.clone()
    }
}

struct PeerShared {
    conns: Mutex<Vec<Arc<PeerConn>>>,
    changed: Condvar,
    shutdown: AtomicBool,
    sessions: AtomicU64,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

/// A minimal CDP server: answers the attach sequence like `FakeBrowser` (same JSON shapes), plus
/// `Browser.getVersion`, `Runtime.evaluate` and `Page.handleJavaScriptDialog` (closed event, then
/// the reply); every other command gets `{}`.
pub struct Peer {
    port: u16,
    shared: Arc<PeerShared>,
    accept: Option<JoinHandle<()>>,
}

impl Peer {
    /// Starts listening on an ephemeral port of `127.0.0.1`.
    pub fn start() -> Peer {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind the peer");
        let port = listener.local_addr().expect("local addr").port();
        let shared = Arc::new(PeerShared {
            conns: Mutex::new(Vec::new()),
            changed: Condvar::new(),
            shutdown: AtomicBool::new(false),
            sessions: AtomicU64::new(0),
            workers: Mutex::new(Vec::new()),
        });
        let sh = Arc::clone(&shared);
        let accept = thread::Builder::new()
            .name("peer-accept".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if sh.shutdown.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let _ = stream.set_nodelay(true);
                    let sh2 = Arc::clone(&sh);
                    let h = thread::Builder::new()
                        .name("peer-conn".into())
                        .spawn(move || serve(&sh2, stream))
                        .expect("spawn a peer connection thread");
                    lock(&sh.workers).push(h);
                }
            })
            .expect("spawn the peer accept thread");
        Peer {
            port,
            shared,
            accept: Some(accept),
        }
    }

    /// `ws://127.0.0.1:PORT/devtools/browser/peer`.
    pub fn ws_url(&self) -> String {
        format!("ws://127.0.0.1:{}/devtools/browser/peer", self.port)
    }

    /// The `i`-th accepted WebSocket connection (waits up to 5 s for it).
    pub fn conn(&self, i: usize) -> Arc<PeerConn> {
        let deadline = Instant::now()
            .checked_add(Duration::from_secs(5))
            .expect("a deadline within range");
        let mut c = lock(&self.shared.conns);
        while c.len() <= i {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "peer connection {i} never came");
            c = self
                .shared
                .changed
                .wait_timeout(c, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        Arc::clone(&c[i])
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], self.port)),
            Duration::from_millis(500),
        );
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        for c in lock(&self.shared.conns).iter() {
            let _ = c.raw.shutdown(Shutdown::Both);
        }
        let workers = std::mem::take(&mut *lock(&self.shared.workers));
        for w in workers {
            let _ = w.join();
        }
    }
}

fn serve(sh: &PeerShared, stream: TcpStream) {
    let (Ok(writer), Ok(raw)) = (stream.try_clone(), stream.try_clone()) else {
        return;
    };
    let Ok(mut ws) = tungstenite::accept(stream) else {
        return;
    };
    let conn = Arc::new(PeerConn {
        writer: Mutex::new(writer),
        raw,
        page_session: Mutex::new(None),
        attached: Condvar::new(),
    });
    lock(&sh.conns).push(Arc::clone(&conn));
    sh.changed.notify_all();
    while let Ok(msg) = ws.read() {
        let Message::Text(text) = msg else { continue };
        let Ok(cmd) = serde_json::from_str::<Value>(text.as_str()) else {
            continue;
        };
        answer(sh, &conn, &cmd);
    }
}

fn answer(sh: &PeerShared, conn: &PeerConn, cmd: &Value) {
    let method = cmd["method"].as_str().unwrap_or_default();
    let session = cmd.get("sessionId").and_then(Value::as_str);
    let mut out = Vec::new();
    let result = match method {
        "Target.getTargets" => json!({"targetInfos": [target_info(false)]}),
        "Target.attachToTarget" => {
            let sid = format!("S-{}", sh.sessions.fetch_add(1, Ordering::SeqCst) + 1);
            push_frame(
                &mut out,
                &event(
                    None,
                    "Target.attachedToTarget",
                    json!({"sessionId": sid, "targetInfo": target_info(true),
                        "waitingForDebugger": false}),
                ),
            );
            {
                let mut p = lock(&conn.page_session);
                if p.is_none() {
                    *p = Some(sid.clone());
                }
            }
            conn.attached.notify_all();
            json!({"sessionId": sid})
        }
        "Runtime.enable" => {
            push_frame(
                &mut out,
                &event(
                    session,
                    "Runtime.executionContextCreated",
                    json!({"context": {"id": 1, "origin": "http://peer.test", "name": "",
                        "uniqueId": "CTX-U-1", "auxData": {"isDefault": true, "type": "default",
                        "frameId": PAGE_ID}}}),
                ),
            );
            json!({})
        }
        "Page.getFrameTree" => json!({"frameTree": {"frame": {
            "id": PAGE_ID, "loaderId": "LOADER-1", "url": PAGE_URL, "domainAndRegistry": "",
            "securityOrigin": "http://peer.test", "mimeType": "text/html",
            "adFrameStatus": {"adFrameType": "none"}, "secureContextType": "InsecureScheme",
            "crossOriginIsolatedContextType": "NotIsolated", "gatedAPIFeatures": []}}}),
        "Browser.getVersion" => json!({"protocolVersion": "1.3", "product": "Peer/1.0",
            "revision": "0", "userAgent": "Peer", "jsVersion": "0"}),
        "Runtime.evaluate" => json!({"result": {"type": "number", "value": 2}}),
        "Page.handleJavaScriptDialog" => {
            let accept = cmd["params"]["accept"].as_bool().unwrap_or(false);
            push_frame(
                &mut out,
                &event(
                    session,
                    "Page.javascriptDialogClosed",
                    json!({"result": accept, "userInput": ""}),
                ),
            );
            json!({})
        }
        _ => json!({}),
    };
    let mut reply = json!({"id": cmd["id"], "result": result});
    if let Some(s) = session {
        reply["sessionId"] = json!(s);
    }
    push_frame(&mut out, &reply.to_string());
    conn.write(&out);
}

fn target_info(attached: bool) -> Value {
    json!({"targetId": PAGE_ID, "type": "page", "title": "Peer page", "url": PAGE_URL,
        "attached": attached, "canAccessOpener": false, "browserContextId": "CTX-1"})
}

// ------------------------------------------------------------------------------------------------
// The plain tungstenite client.

/// A plain blocking tungstenite CDP client: the baselines.
pub struct RawClient {
    pub ws: WebSocket<TcpStream>,
    next_id: u64,
    /// Events read while waiting for a reply.
    pub events: VecDeque<Value>,
    /// Commands sent and not answered yet (id, method), for the failure message.
    unanswered: Vec<(u64, String)>,
    /// Replies read while waiting for another one.
    replies: Vec<Value>,
}

impl RawClient {
    /// Connects (TCP + WebSocket handshake), `TCP_NODELAY` like the supervisor.
    pub fn connect(url: &str) -> RawClient {
        let u = url::Url::parse(url).expect("a ws:// url");
        let addr = format!(
            "{}:{}",
            u.host_str().expect("host"),
            u.port_or_known_default().expect("port")
        );
        let tcp = TcpStream::connect(addr).expect("connect");
        let _ = tcp.set_nodelay(true);
        // A browser that stops answering fails the bench instead of hanging it.
        let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
        let (ws, _) = tungstenite::client::client(url, tcp).expect("WebSocket handshake");
        RawClient {
            ws,
            next_id: 1,
            events: VecDeque::new(),
            unanswered: Vec::new(),
            replies: Vec::new(),
        }
    }

    /// Writes a command; returns its id.
    pub fn send(&mut self, method: &str, params: Value, session: Option<&str>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let mut m = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            m["sessionId"] = json!(s);
        }
        self.ws
            .send(Message::text(m.to_string()))
            .expect("raw client send");
        self.unanswered.push((id, method.to_string()));
        id
    }

    /// Reads and parses one text message.
    pub fn recv(&mut self) -> Value {
        loop {
            let msg = match self.ws.read() {
                Ok(m) => m,
                Err(e) => panic!(
                    "raw client read failed (10 s read time-out): {e}; unanswered: {:?}; last \
                     events: {:?}",
                    self.unanswered,
                    self.events.iter().rev().take(5).collect::<Vec<_>>()
                ),
            };
            match msg {
                Message::Text(t) => return serde_json::from_str(t.as_str()).expect("JSON"),
                _ => continue,
            }
        }
    }

    /// Reads until the reply to `id` (events are queued in `events`, other replies in
    /// `replies`: Chromium does not always answer pipelined commands in order); panics on a CDP
    /// error.
    pub fn wait_reply(&mut self, id: u64) -> Value {
        let v = loop {
            if let Some(i) = self
                .replies
                .iter()
                .position(|r| r["id"].as_u64() == Some(id))
            {
                break self.replies.swap_remove(i);
            }
            let v = self.recv();
            if let Some(got) = v.get("id").and_then(Value::as_u64) {
                self.unanswered.retain(|(i, _)| *i != got);
                if got == id {
                    break v;
                }
                self.replies.push(v);
            } else if v.get("method").is_some() {
                self.events.push_back(v);
            }
        };
        if let Some(e) = v.get("error") {
            panic!("CDP error for id {id}: {e}");
        }
        v["result"].clone()
    }

    /// Sends and waits for the reply.
    pub fn call(&mut self, method: &str, params: Value, session: Option<&str>) -> Value {
        let id = self.send(method, params, session);
        self.wait_reply(id)
    }

    /// Returns the first event named `method` (queued ones first), reading as needed.
    pub fn wait_event(&mut self, method: &str) -> Value {
        if let Some(i) = self.events.iter().position(|e| e["method"] == method) {
            return self.events.remove(i).expect("queued event");
        }
        loop {
            let v = self.recv();
            if v["method"] == method {
                return v;
            }
            if v.get("method").is_some() {
                self.events.push_back(v);
            }
        }
    }

    /// The supervisor's attach sequence done by hand: `Target.getTargets`,
    /// `Target.attachToTarget {flatten}`, then `Page.enable`, `Runtime.enable`,
    /// `Page.getFrameTree`, `Target.setAutoAttach` pipelined, waiting for all four replies.
    /// Returns the session id. `target`: the page to attach to (`None`: the first page).
    pub fn attach_sequence(&mut self, target: Option<&str>) -> String {
        let targets = self.call("Target.getTargets", json!({}), None);
        let target_id = match target {
            Some(t) => t.to_string(),
            None => targets["targetInfos"]
                .as_array()
                .and_then(|a| a.iter().find(|t| t["type"] == "page"))
                .and_then(|t| t["targetId"].as_str())
                .expect("a page target")
                .to_string(),
        };
        let r = self.call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
            None,
        );
        let sid = r["sessionId"].as_str().expect("sessionId").to_string();
        let s = Some(sid.as_str());
        let ids = [
            self.send("Page.enable", json!({}), s),
            self.send("Runtime.enable", json!({}), s),
            self.send("Page.getFrameTree", json!({}), s),
            self.send(
                "Target.setAutoAttach",
                json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
                s,
            ),
        ];
        for id in ids {
            self.wait_reply(id);
        }
        sid
    }
}
