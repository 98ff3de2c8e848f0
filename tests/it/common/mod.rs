//! Shared end-to-end test support for `cdp-supervisor`.
//!
//! Everything here is blocking std code (sockets + threads), matching the
//! crate under test: no async runtime.
//!
//! * [`chromium_path`], [`e2e_required`], [`shared_browser`]: find and launch
//!   a real headless Chromium, or skip loudly (`SKIPPED: no Chromium`) when
//!   none is installed, unless `CDP_SUPERVISOR_E2E=require`.
//! * [`Browser`]: one Chromium process tree in its own process group with a
//!   fresh temporary profile; killed and cleaned up on drop, on process exit
//!   (`atexit`) and when the test process dies (`PR_SET_PDEATHSIG`).
//! * [`RawCdp`]: a tiny, independent, blocking CDP client for setting pages
//!   up and for cross-checking the supervisor.
//! * [`HttpServer`]: a loopback HTTP/1.1 server with a `/report` channel so
//!   page JavaScript can tell the test exactly what it observed.
//! * [`wait_until`]: the one sanctioned polling helper.
//! * [`js`]: a JavaScript string literal for page expressions.
//! * [`bin`]: the command-line tool, built on first use (it is a package of its own).
//! * [`browserless`]: a Browserless server for one test (the pinned npm package on the system
//!   Chromium), or a loud skip.
//! * [`cut_proxy`]: a TCP proxy that cuts one connection to a real browser (a reconnect).
//! * [`fakes`]: waits and command checks for tests driving the scripted fake
//!   CDP browser.
//! * [`pages`]: supervisor helpers for the real-Chromium tests (attach to a test page, wait
//!   for a snapshot).
//! * [`procs`]: `/proc` helpers for tests that run the binary and check the
//!   processes and profile directories it leaves behind.
//! * [`raw_http`]: a raw HTTP/1.1 client for the crate's HTTP server run in the test's process.
//! * [`tls`]: a private CA and a TLS-terminating proxy for `wss://` tests.
//! * [`url_spellings`]: generated spellings of local, privileged and web URLs, by class, for
//!   the security policy's tests.

pub mod bin;
pub mod browserless;
pub mod cut_proxy;
pub mod detect;
pub mod fakes;
pub mod pages;
pub mod procs;
pub mod raw_http;
pub mod tls;
pub mod url_spellings;

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, Once, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tungstenite::{Message, WebSocket};

/// Default deadline used by the [`RawCdp`] convenience helpers that take no
/// explicit timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`Browser::launch`] waits for the `DevTools listening on` line.
pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(15);

/// Number of Chromium stderr lines kept for diagnostics.
const STDERR_TAIL_LINES: usize = 40;

/// Names looked up on `PATH` by [`chromium_path`], in order.
const CHROMIUM_NAMES: &[&str] = &[
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
];

/// Flags every launched Chromium gets (verified on Chromium 156 headless,
/// running as root). `--user-data-dir` and the start URL are appended by
/// [`Browser::launch_with_args`].
pub const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    // The dialog bridge's host never resolves: say so without a DNS lookup, which on a machine
    // with a slow or unreachable resolver sometimes took Chromium 5 s (the sync XHR of
    // `e2e_bridge`'s fallback test waited that long). src/launch.rs does the same.
    "--host-resolver-rules=MAP cdp-dialog-bridge.invalid ~NOTFOUND",
    "--remote-debugging-port=0",
];

// ---------------------------------------------------------------------------
// Discovery
// ---------------------------------------------------------------------------

/// Locates a Chromium binary.
///
/// If the `CHROME` environment variable is set (and non-empty) it wins; if it
/// names a file that does not exist this panics with a message naming it, so
/// a misconfigured CI fails loudly instead of silently skipping. Otherwise the
/// first of `chromium`, `chromium-browser`, `google-chrome`,
/// `google-chrome-stable` found (as an executable file) on `PATH` is returned.
pub fn chromium_path() -> Option<PathBuf> {
    if let Some(chrome) = std::env::var_os("CHROME").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(&chrome);
        if !path.exists() {
            panic!(
                "CHROME is set to {:?}, but that file does not exist",
                path.display()
            );
        }
        return Some(path);
    }
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    for name in CHROMIUM_NAMES {
        for dir in std::env::split_paths(&path_var) {
            let candidate = dir.join(name);
            if is_executable_file(&candidate) {
                return Some(candidate);
            }
        }
    }
    None
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// True when `CDP_SUPERVISOR_E2E=require`: a missing Chromium is then a test
/// failure rather than a skip.
pub fn e2e_required() -> bool {
    std::env::var("CDP_SUPERVISOR_E2E").as_deref() == Ok("require")
}

/// The Chromium shared by all tests of one test binary, launched on first
/// use.
///
/// Returns `None` (after printing `SKIPPED: no Chromium` to stderr once per
/// binary) when no Chromium is found, unless [`e2e_required`], in which case
/// it panics. A Chromium that is found but fails to launch always panics with
/// the launch error. Use as:
///
/// ```ignore
/// let Some(browser) = common::shared_browser() else { return };
/// ```
///
/// The instance lives until the process exits; an `atexit` handler kills its
/// process group and removes its profile (statics are never dropped).
pub fn shared_browser() -> Option<&'static Browser> {
    static SHARED: OnceLock<Result<Option<Browser>, String>> = OnceLock::new();
    let state = SHARED.get_or_init(|| {
        if chromium_path().is_none() {
            if e2e_required() {
                panic!(
                    "CDP_SUPERVISOR_E2E=require but no Chromium found (set CHROME or install chromium)"
                );
            }
            // Written to the raw stderr handle: libtest captures
            // `eprintln!` of passing tests, which would hide the skip.
            let _ = writeln!(io::stderr(), "SKIPPED: no Chromium");
            return Ok(None);
        }
        Browser::launch().map(Some).map_err(|e| e.to_string())
    });
    match state {
        Ok(browser) => browser.as_ref(),
        Err(e) => panic!("shared Chromium failed to launch: {e}"),
    }
}

// ---------------------------------------------------------------------------
// Browser
// ---------------------------------------------------------------------------

/// A running headless Chromium with its own temporary profile.
///
/// The browser runs in its own process group (leader = `pid`). It is killed
/// (SIGKILL to the whole group), reaped, and its profile removed:
/// * on [`Drop`];
/// * by an `atexit` handler, for instances still alive when the process
///   exits normally (e.g. the one behind [`shared_browser`]);
/// * via `PR_SET_PDEATHSIG(SIGKILL)` when the test process dies abruptly (the
///   profile directory then leaks, the processes do not).
///
/// Chromium's `chrome_crashpad_handler` daemons leave the process group by
/// design; they exit on their own once the browser is gone.
pub struct Browser {
    /// Browser-level DevTools WebSocket URL
    /// (`ws://127.0.0.1:PORT/devtools/browser/UUID`).
    pub ws_url: String,
    /// Pid of the browser process, which is also its process-group id.
    pub pid: u32,
    /// DevTools HTTP/WebSocket port.
    pub port: u16,
    profile_dir: PathBuf,
    child: Option<Child>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// Dropping this lets the keeper thread (the fork parent) finish.
    keeper_stop: Option<mpsc::Sender<()>>,
    keeper: Option<JoinHandle<()>>,
}

/// Live browsers the `atexit` handler must clean up: (pid, profile dir).
static LIVE: Mutex<Vec<(i32, PathBuf)>> = Mutex::new(Vec::new());
static ATEXIT: Once = Once::new();

extern "C" fn kill_live_browsers_at_exit() {
    let entries = match LIVE.try_lock() {
        Ok(mut guard) => std::mem::take(&mut *guard),
        Err(std::sync::TryLockError::Poisoned(p)) => std::mem::take(&mut *p.into_inner()),
        // Someone holds the lock while the process exits; best effort: skip.
        // PR_SET_PDEATHSIG still kills the browsers.
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    for (pid, profile) in entries {
        kill_group_and_reap(pid);
        remove_profile(&profile);
    }
}

/// SIGKILLs process group `pid` (and `pid` itself) and reaps `pid`.
fn kill_group_and_reap(pid: i32) {
    // SAFETY: plain syscalls on a pid we spawned and have not reaped yet.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
        libc::kill(pid, libc::SIGKILL);
        let mut status = 0;
        while libc::waitpid(pid, &mut status, 0) == -1
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
}

/// Removes a profile directory, retrying briefly: a killed renderer may
/// still be finishing a write when the first attempt runs.
fn remove_profile(dir: &Path) {
    wait_until(Duration::from_secs(2), || {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => Some(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Some(()),
            Err(_) => None,
        }
    });
}

/// Creates a fresh, uniquely named directory under [`std::env::temp_dir`].
pub fn make_temp_dir(prefix: &str) -> io::Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{n}-{nanos}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

impl Browser {
    /// Launches a new, independent Chromium (found via [`chromium_path`])
    /// with [`CHROMIUM_FLAGS`], a fresh profile and `about:blank`.
    pub fn launch() -> io::Result<Browser> {
        Self::launch_with_args(&[])
    }

    /// Like [`Browser::launch`], with `extra_args` appended after
    /// [`CHROMIUM_FLAGS`] (before the profile flag and start URL).
    ///
    /// Fails with an `io::Error` containing the last stderr lines if Chromium
    /// exits or does not print `DevTools listening on ws://...` within
    /// [`LAUNCH_TIMEOUT`].
    pub fn launch_with_args(extra_args: &[&str]) -> io::Result<Browser> {
        let exe = chromium_path().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "no Chromium found (set CHROME or install chromium)",
            )
        })?;
        let profile_dir = make_temp_dir("cdp-supervisor-e2e-profile")?;
        let mut cmd = Command::new(&exe);
        cmd.args(CHROMIUM_FLAGS)
            .args(extra_args)
            .arg(format!("--user-data-dir={}", profile_dir.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // Chromium's own temporary directories (its singleton socket's, which it leaves behind)
        // go into the profile and away with it, as src/launch.rs does, when the socket path
        // (`t/org.chromium.Chromium.XXXXXX/SingletonSocket`) stays within 107 bytes.
        let tmp = profile_dir.join("t");
        if tmp.as_os_str().len() + 45 <= 107 && std::fs::create_dir(&tmp).is_ok() {
            cmd.env("TMPDIR", &tmp);
        }
        let parent_pid = std::process::id() as libc::pid_t;
        // SAFETY: the closure only performs async-signal-safe syscalls.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setpgid(0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died before prctl took effect.
                if libc::getppid() != parent_pid {
                    libc::_exit(1);
                }
                Ok(())
            });
        }

        ATEXIT.call_once(|| {
            // SAFETY: registering a plain extern "C" fn with no captured state.
            unsafe {
                libc::atexit(kill_live_browsers_at_exit);
            }
        });

        // PR_SET_PDEATHSIG fires when the *thread* that forked exits, not the
        // process. Test threads are short-lived, so fork from a dedicated
        // keeper thread that lives exactly as long as this Browser.
        let (child_tx, child_rx) = mpsc::channel::<io::Result<Child>>();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let registry_profile = profile_dir.clone();
        let keeper = thread::Builder::new()
            .name("chromium-keeper".into())
            .spawn(move || {
                let spawned = {
                    // Hold the registry lock across fork so the atexit handler
                    // never misses a child that exists.
                    let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
                    let spawned = cmd.spawn();
                    if let Ok(child) = &spawned {
                        live.push((child.id() as i32, registry_profile));
                    }
                    spawned
                };
                let _ = child_tx.send(spawned);
                // Blocks until the Browser drops its Sender.
                let _ = stop_rx.recv();
            })?;
        let mut child = match child_rx.recv() {
            Ok(Ok(child)) => child,
            Ok(Err(e)) => {
                drop(stop_tx);
                let _ = keeper.join();
                remove_profile(&profile_dir);
                return Err(io::Error::new(
                    e.kind(),
                    format!("failed to spawn {}: {e}", exe.display()),
                ));
            }
            Err(_) => {
                remove_profile(&profile_dir);
                return Err(io::Error::other("chromium keeper thread died"));
            }
        };
        let pid = child.id();

        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let (line_tx, line_rx) = mpsc::channel::<String>();
        let stderr = child.stderr.take().expect("stderr was piped");
        {
            let tail = Arc::clone(&stderr_tail);
            thread::Builder::new()
                .name("chromium-stderr".into())
                .spawn(move || drain_stderr(stderr, tail, line_tx))?;
        }

        let mut browser = Browser {
            ws_url: String::new(),
            pid,
            port: 0,
            profile_dir,
            child: Some(child),
            stderr_tail,
            keeper_stop: Some(stop_tx),
            keeper: Some(keeper),
        };

        let deadline = Instant::now()
            .checked_add(LAUNCH_TIMEOUT)
            .expect("a deadline within range");
        let failure = loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match line_rx.recv_timeout(remaining) {
                Ok(line) => {
                    if let Some(idx) = line.find("DevTools listening on ") {
                        let url = line[idx + "DevTools listening on ".len()..].trim();
                        match parse_ws_port(url) {
                            Some(port) => {
                                browser.ws_url = url.to_string();
                                browser.port = port;
                                return Ok(browser);
                            }
                            None => break format!("unparsable DevTools line {line:?}"),
                        }
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    break format!("no `DevTools listening on` line within {LAUNCH_TIMEOUT:?}");
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = browser
                        .child
                        .as_mut()
                        .and_then(|c| c.wait().ok())
                        .map(|s| s.to_string())
                        .unwrap_or_else(|| "unknown status".into());
                    break format!("Chromium closed stderr / exited ({status})");
                }
            }
        };
        let tail = browser.stderr_tail();
        // Drop kills the group and removes the profile.
        drop(browser);
        Err(io::Error::other(format!(
            "launching {} failed: {failure}; last stderr lines:\n{tail}",
            exe.display()
        )))
    }

    /// `http://127.0.0.1:PORT`, the DevTools HTTP endpoint (`/json/version`,
    /// `/json/list`, ...).
    pub fn http_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The temporary profile directory (removed when the browser is cleaned
    /// up).
    pub fn profile_dir(&self) -> &Path {
        &self.profile_dir
    }

    /// The last lines Chromium printed on stderr, for diagnostics.
    pub fn stderr_tail(&self) -> String {
        let tail = self.stderr_tail.lock().unwrap_or_else(|p| p.into_inner());
        tail.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let pid = self.pid as i32;
        // Unregister first so the atexit handler never touches a reaped pid.
        LIVE.lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(p, _)| *p != pid);
        if let Some(mut child) = self.child.take() {
            // SAFETY: `pid` is our unreaped child and its process-group id.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        drop(self.keeper_stop.take());
        if let Some(keeper) = self.keeper.take() {
            let _ = keeper.join();
        }
        remove_profile(&self.profile_dir);
        // The stderr thread is not joined: it ends at EOF, which daemonized
        // helpers (crashpad) holding the pipe may delay.
    }
}

/// Reads Chromium's stderr line by line for its whole life: lines go to
/// `tail` (bounded) and, while the launcher still listens, to `lines`.
fn drain_stderr(
    stderr: impl Read,
    tail: Arc<Mutex<VecDeque<String>>>,
    lines: mpsc::Sender<String>,
) {
    let mut reader = BufReader::new(stderr);
    let mut buf = Vec::new();
    let mut lines = Some(lines);
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(&buf).trim_end().to_string();
        {
            let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
            if tail.len() == STDERR_TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(line.clone());
        }
        if let Some(tx) = &lines
            && tx.send(line).is_err()
        {
            lines = None;
        }
    }
}

fn parse_ws_port(url: &str) -> Option<u16> {
    let rest = url.strip_prefix("ws://")?;
    let authority = rest.split('/').next()?;
    authority.rsplit(':').next()?.parse().ok()
}

// ---------------------------------------------------------------------------
// RawCdp
// ---------------------------------------------------------------------------

/// A minimal blocking CDP client (flattened sessions), independent of the
/// crate under test.
///
/// Every operation has a deadline; nothing blocks past it. Events that arrive
/// while waiting for something else are queued (unbounded; see
/// [`RawCdp::clear_events`]) and later returned by [`RawCdp::wait_event`].
pub struct RawCdp {
    ws: WebSocket<TcpStream>,
    next_id: u64,
    events: VecDeque<Value>,
}

impl RawCdp {
    /// Connects to a `ws://` DevTools URL (browser or page endpoint) with a
    /// 10 s connect/handshake deadline.
    pub fn connect(ws_url: &str) -> io::Result<RawCdp> {
        let invalid = || {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad ws URL {ws_url:?}"),
            )
        };
        let authority = ws_url
            .strip_prefix("ws://")
            .and_then(|r| r.split('/').next())
            .ok_or_else(invalid)?;
        let addr = authority.to_socket_addrs()?.next().ok_or_else(invalid)?;
        let stream = TcpStream::connect_timeout(&addr, DEFAULT_TIMEOUT)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(DEFAULT_TIMEOUT))?;
        stream.set_write_timeout(Some(DEFAULT_TIMEOUT))?;
        let (ws, _response) = tungstenite::client(ws_url, stream).map_err(|e| {
            io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("WebSocket handshake with {ws_url} failed: {e}"),
            )
        })?;
        Ok(RawCdp {
            ws,
            next_id: 1,
            events: VecDeque::new(),
        })
    }

    /// Sends `method` (on `session_id`, if given) and waits for its response.
    ///
    /// Returns the `result` object, or `Err` with the CDP error message (and
    /// `data`, if any), a transport error, or a timeout description. Events
    /// received meanwhile are queued; responses to other ids (e.g. of an
    /// earlier call that timed out) are discarded.
    pub fn call(
        &mut self,
        method: &str,
        params: Value,
        session_id: Option<&str>,
        timeout: Duration,
    ) -> Result<Value, String> {
        let deadline = Instant::now()
            .checked_add(timeout)
            .expect("a deadline within range");
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(sid) = session_id {
            msg["sessionId"] = Value::from(sid);
        }
        self.send(&msg, deadline)
            .map_err(|e| format!("{method}: {e}"))?;
        loop {
            let Some(msg) = self
                .read_message(deadline)
                .map_err(|e| format!("{method}: {e}"))?
            else {
                return Err(format!("{method}: timed out after {timeout:?}"));
            };
            match msg.get("id").and_then(Value::as_u64) {
                Some(got) if got == id => {
                    if let Some(err) = msg.get("error") {
                        let message = err
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("unknown CDP error");
                        return Err(match err.get("data").and_then(Value::as_str) {
                            Some(data) => format!("{message} ({data})"),
                            None => message.to_string(),
                        });
                    }
                    return Ok(msg.get("result").cloned().unwrap_or(Value::Null));
                }
                Some(_) => {} // stale response
                None => self.events.push_back(msg),
            }
        }
    }

    /// Waits for an event named `method` whose `sessionId` equals
    /// `session_id` (`None` = browser-level events without a `sessionId`).
    /// Queued events are checked first. Returns the whole event message
    /// (`{"method", "params", "sessionId"?}`), or `None` on timeout or a
    /// transport error.
    pub fn wait_event(
        &mut self,
        method: &str,
        session_id: Option<&str>,
        timeout: Duration,
    ) -> Option<Value> {
        self.wait_event_where(timeout, |ev| {
            ev.get("method").and_then(Value::as_str) == Some(method)
                && ev.get("sessionId").and_then(Value::as_str) == session_id
        })
    }

    /// Waits for the first event (queued ones first) satisfying `pred`;
    /// non-matching events stay queued. `None` on timeout/transport error.
    pub fn wait_event_where(
        &mut self,
        timeout: Duration,
        mut pred: impl FnMut(&Value) -> bool,
    ) -> Option<Value> {
        let deadline = Instant::now()
            .checked_add(timeout)
            .expect("a deadline within range");
        if let Some(pos) = self.events.iter().position(&mut pred) {
            return self.events.remove(pos);
        }
        loop {
            let msg = self.read_message(deadline).ok()??;
            if msg.get("id").is_some() {
                continue; // stale response
            }
            if pred(&msg) {
                return Some(msg);
            }
            self.events.push_back(msg);
        }
    }

    /// Removes and returns all queued events.
    pub fn clear_events(&mut self) -> Vec<Value> {
        self.events.drain(..).collect()
    }

    /// `Target.attachToTarget {targetId, flatten: true}`; returns the
    /// `sessionId`.
    pub fn attach(&mut self, target_id: &str) -> Result<String, String> {
        let res = self.call(
            "Target.attachToTarget",
            json!({ "targetId": target_id, "flatten": true }),
            None,
            DEFAULT_TIMEOUT,
        )?;
        str_field(&res, "sessionId")
    }

    /// `Target.createTarget {url}`; returns the `targetId`. Does not wait for
    /// the page to load (see [`RawCdp::open_page`]).
    pub fn new_page(&mut self, url: &str) -> Result<String, String> {
        let res = self.call(
            "Target.createTarget",
            json!({ "url": url }),
            None,
            DEFAULT_TIMEOUT,
        )?;
        str_field(&res, "targetId")
    }

    /// `Target.closeTarget {targetId}`.
    pub fn close_page(&mut self, target_id: &str) -> Result<(), String> {
        self.call(
            "Target.closeTarget",
            json!({ "targetId": target_id }),
            None,
            DEFAULT_TIMEOUT,
        )
        .map(drop)
    }

    /// Creates a blank page, attaches to it, navigates it to `url` and waits
    /// for that navigation's `load` lifecycle event (so subframes are loaded
    /// too). Returns `(target_id, session_id)`.
    pub fn open_page(&mut self, url: &str, timeout: Duration) -> Result<(String, String), String> {
        self.open_page_in(url, None, timeout)
    }

    /// Like [`RawCdp::open_page`], in a new browser context of its own (disposed when this
    /// connection closes). Headless Chromium shows one tab per window: a page in the default
    /// context is hidden as soon as another test opens a page there, and a hidden page draws
    /// nothing (no `requestAnimationFrame`, no hit-test data for its OOPIFs). A page alone in
    /// its context keeps its window and stays visible. Returns `(target_id, session_id)`.
    pub fn open_visible_page(
        &mut self,
        url: &str,
        timeout: Duration,
    ) -> Result<(String, String), String> {
        let res = self.call(
            "Target.createBrowserContext",
            json!({ "disposeOnDetach": true }),
            None,
            DEFAULT_TIMEOUT,
        )?;
        let context = str_field(&res, "browserContextId")?;
        self.open_page_in(url, Some(&context), timeout)
    }

    fn open_page_in(
        &mut self,
        url: &str,
        context: Option<&str>,
        timeout: Duration,
    ) -> Result<(String, String), String> {
        let deadline = Instant::now()
            .checked_add(timeout)
            .expect("a deadline within range");
        let left = || deadline.saturating_duration_since(Instant::now());
        let mut params = json!({ "url": "about:blank" });
        if let Some(context) = context {
            params["browserContextId"] = json!(context);
        }
        let target_id = str_field(
            &self.call("Target.createTarget", params, None, DEFAULT_TIMEOUT)?,
            "targetId",
        )?;
        let sid = self.attach(&target_id)?;
        self.call("Page.enable", json!({}), Some(&sid), left())?;
        self.call(
            "Page.setLifecycleEventsEnabled",
            json!({ "enabled": true }),
            Some(&sid),
            left(),
        )?;
        let nav = self.call("Page.navigate", json!({ "url": url }), Some(&sid), left())?;
        if let Some(err) = nav.get("errorText").and_then(Value::as_str) {
            return Err(format!("navigating to {url} failed: {err}"));
        }
        let loader = nav.get("loaderId").cloned();
        let frame = nav.get("frameId").cloned();
        self.wait_event_where(left(), |ev| {
            ev.get("method").and_then(Value::as_str) == Some("Page.lifecycleEvent")
                && ev.get("sessionId").and_then(Value::as_str) == Some(sid.as_str())
                && ev["params"]["name"] == "load"
                && Some(&ev["params"]["loaderId"]) == loader.as_ref()
                && Some(&ev["params"]["frameId"]) == frame.as_ref()
        })
        .ok_or_else(|| format!("{url} did not finish loading within {timeout:?}"))?;
        Ok((target_id, sid))
    }

    /// `Runtime.evaluate {expression, returnByValue: true, awaitPromise:
    /// true}` on `session_id`; returns `result.value` (`Null` for
    /// `undefined`), or `Err` with the exception description.
    pub fn evaluate(
        &mut self,
        session_id: &str,
        expression: &str,
        timeout: Duration,
    ) -> Result<Value, String> {
        let res = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
            Some(session_id),
            timeout,
        )?;
        if let Some(ex) = res.get("exceptionDetails") {
            let text = ex["exception"]["description"]
                .as_str()
                .or_else(|| ex["text"].as_str())
                .unwrap_or("exception");
            return Err(format!("evaluate({expression:?}) threw: {text}"));
        }
        Ok(res["result"].get("value").cloned().unwrap_or(Value::Null))
    }

    /// Sends `method` (on `session_id`, if given) without waiting for its
    /// response; returns the command id. Pair with [`RawCdp::next_message`]
    /// to see *whether* and *when* Chromium answers (e.g. with a dialog open):
    /// [`RawCdp::call`] and [`RawCdp::wait_event`] discard the responses of
    /// ids they are not waiting for.
    pub fn send_command(
        &mut self,
        method: &str,
        params: Value,
        session_id: Option<&str>,
    ) -> Result<u64, String> {
        let id = self.next_id;
        self.next_id += 1;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(sid) = session_id {
            msg["sessionId"] = Value::from(sid);
        }
        self.send(
            &msg,
            Instant::now()
                .checked_add(DEFAULT_TIMEOUT)
                .expect("a deadline within range"),
        )
        .map_err(|e| format!("{method}: {e}"))?;
        Ok(id)
    }

    /// The next message no other method returned yet, response or event:
    /// queued events first, then what arrives, in order. `Ok(None)` after
    /// `timeout`.
    pub fn next_message(&mut self, timeout: Duration) -> Result<Option<Value>, String> {
        if let Some(ev) = self.events.pop_front() {
            return Ok(Some(ev));
        }
        self.read_message(
            Instant::now()
                .checked_add(timeout)
                .expect("a deadline within range"),
        )
    }

    fn send(&mut self, msg: &Value, deadline: Instant) -> Result<(), String> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err("timed out before sending".into());
        }
        self.ws
            .get_mut()
            .set_write_timeout(Some(remaining))
            .map_err(|e| e.to_string())?;
        self.ws
            .send(Message::text(msg.to_string()))
            .map_err(|e| format!("send failed: {e}"))
    }

    /// Next JSON message, `Ok(None)` at the deadline.
    fn read_message(&mut self, deadline: Instant) -> Result<Option<Value>, String> {
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Ok(None);
            }
            self.ws
                .get_mut()
                .set_read_timeout(Some(remaining.max(Duration::from_millis(1))))
                .map_err(|e| e.to_string())?;
            match self.ws.read() {
                Ok(Message::Text(text)) => {
                    return serde_json::from_str(text.as_str())
                        .map(Some)
                        .map_err(|e| format!("bad JSON from browser: {e}"));
                }
                Ok(Message::Binary(bytes)) => {
                    return serde_json::from_slice(&bytes)
                        .map(Some)
                        .map_err(|e| format!("bad JSON from browser: {e}"));
                }
                Ok(Message::Close(frame)) => return Err(format!("connection closed: {frame:?}")),
                Ok(_) => {} // ping/pong/raw frame
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(format!("read failed: {e}")),
            }
        }
    }
}

fn str_field(v: &Value, key: &str) -> Result<String, String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("response lacks {key}: {v}"))
}

// ---------------------------------------------------------------------------
// HttpServer
// ---------------------------------------------------------------------------

/// An HTTP request as seen by an [`HttpServer`] handler.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// Path without the query string, not percent-decoded (e.g. `/a/b`).
    pub path: String,
    /// Raw query string without `?` (empty if none), not decoded.
    pub query: String,
    /// Header (name, value) pairs in arrival order; names as sent.
    pub headers: Vec<(String, String)>,
    /// Request body (`Content-Length` bytes).
    #[allow(dead_code)] // read by no test today; kept so a handler can see POST bodies
    pub body: Vec<u8>,
}

impl Request {
    /// First header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An HTTP response produced by an [`HttpServer`] handler. `Content-Length`,
/// `Connection: close` and `Cache-Control: no-store` are added automatically.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code, e.g. 200.
    pub status: u16,
    /// `Content-Type` header value.
    pub content_type: String,
    /// Body bytes.
    pub body: Vec<u8>,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
}

impl Response {
    /// 200 `text/html; charset=utf-8`.
    pub fn html(body: impl Into<String>) -> Response {
        Response {
            status: 200,
            content_type: "text/html; charset=utf-8".into(),
            body: body.into().into_bytes(),
            headers: Vec::new(),
        }
    }

    /// 200 `text/plain; charset=utf-8`.
    pub fn text(body: impl Into<String>) -> Response {
        Response {
            content_type: "text/plain; charset=utf-8".into(),
            ..Response::html(body)
        }
    }

    /// 404 with a short plain-text body.
    pub fn not_found() -> Response {
        Response {
            status: 404,
            ..Response::text("not found")
        }
    }

    /// Adds a header (builder style).
    pub fn with_header(mut self, name: &str, value: &str) -> Response {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// A loopback HTTP/1.1 server (one thread per connection, `Connection:
/// close`) bound to `127.0.0.1:0`.
///
/// Two origins / two sites: the same server is reachable as
/// `http://127.0.0.1:PORT` and `http://localhost:PORT`, which are different
/// sites, so an iframe from one inside a page from the other is an
/// out-of-process iframe. This relies on `localhost` reaching 127.0.0.1: here
/// `/etc/hosts` maps it to 127.0.0.1, and Chromium (which resolves
/// `localhost` itself, possibly trying `::1` first) falls back to 127.0.0.1
/// after a refused `::1` connection; the selftest verifies this with a real
/// page load. Alternatively start two servers.
///
/// `GET /report?<query>` is answered by the server itself (204, with
/// `Access-Control-Allow-Origin: *`) and records the percent-decoded query
/// for [`HttpServer::wait_report`]; the handler never sees it.
///
/// Dropping the server stops accepting and joins the accept thread.
/// In-flight connection threads finish on their own (10 s socket timeouts).
pub struct HttpServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept_thread: Option<JoinHandle<()>>,
    reports: Mutex<mpsc::Receiver<String>>,
}

type Handler = dyn Fn(&Request) -> Response + Send + Sync + 'static;

impl HttpServer {
    /// Starts a server answering every request (except `/report`) with
    /// `handler`. Panics if it cannot bind a loopback port.
    pub fn start(handler: impl Fn(&Request) -> Response + Send + Sync + 'static) -> HttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0 for HttpServer");
        let addr = listener.local_addr().expect("HttpServer local_addr");
        let stop = Arc::new(AtomicBool::new(false));
        let (report_tx, report_rx) = mpsc::channel();
        let handler: Arc<Handler> = Arc::new(handler);
        let accept_thread = {
            let stop = Arc::clone(&stop);
            thread::Builder::new()
                .name(format!("http-accept-{}", addr.port()))
                .spawn(move || accept_loop(listener, stop, handler, report_tx))
                .expect("spawn HttpServer accept thread")
        };
        HttpServer {
            addr,
            stop,
            accept_thread: Some(accept_thread),
            reports: Mutex::new(report_rx),
        }
    }

    /// Serves fixed `(path, html)` pages; other paths get 404.
    pub fn static_pages(pages: &[(&str, &str)]) -> HttpServer {
        let pages: Vec<(String, String)> = pages
            .iter()
            .map(|(p, h)| (p.to_string(), h.to_string()))
            .collect();
        HttpServer::start(move |req| {
            pages
                .iter()
                .find(|(p, _)| *p == req.path)
                .map(|(_, html)| Response::html(html.clone()))
                .unwrap_or_else(Response::not_found)
        })
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://{host}:{port}{path}`; `host` is `"127.0.0.1"` or
    /// `"localhost"` (two different sites for the same server). `path`
    /// should start with `/`.
    pub fn url(&self, host: &str, path: &str) -> String {
        format!("http://{host}:{}{path}", self.port())
    }

    /// The next recorded `/report?...` query string, percent-decoded
    /// (`%XX` only; `+` stays `+`, so encode with `encodeURIComponent`) and
    /// converted to UTF-8 (lossily), or `None` after `timeout`.
    pub fn wait_report(&self, timeout: Duration) -> Option<String> {
        let rx = self.reports.lock().unwrap_or_else(|p| p.into_inner());
        rx.recv_timeout(timeout).ok()
    }

    /// The next recorded report (see [`HttpServer::wait_report`]) parsed as
    /// JSON; panics when none arrives within `timeout` or it is not JSON.
    pub fn wait_report_json(&self, timeout: Duration) -> Value {
        let raw = self
            .wait_report(timeout)
            .unwrap_or_else(|| panic!("the page reported nothing within {timeout:?}"));
        serde_json::from_str(&raw).unwrap_or_else(|e| panic!("report {raw:?} is not JSON: {e}"))
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept().
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    handler: Arc<Handler>,
    reports: mpsc::Sender<String>,
) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = conn else { continue };
        let handler = Arc::clone(&handler);
        let reports = reports.clone();
        let _ = thread::Builder::new()
            .name("http-conn".into())
            .spawn(move || {
                let _ = serve_connection(stream, &*handler, &reports);
            });
    }
}

fn serve_connection(
    mut stream: TcpStream,
    handler: &Handler,
    reports: &mpsc::Sender<String>,
) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    let Some(req) = read_request(&mut stream)? else {
        return Ok(()); // closed without a request (e.g. a preconnect)
    };
    let resp = if req.path == "/report" {
        let _ = reports.send(percent_decode(&req.query));
        Response {
            status: 204,
            content_type: "text/plain".into(),
            body: Vec::new(),
            headers: vec![("Access-Control-Allow-Origin".into(), "*".into())],
        }
    } else {
        handler(&req)
    };
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n",
        resp.status,
        reason_phrase(resp.status),
        resp.content_type,
        resp.body.len()
    );
    for (name, value) in &resp.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    if req.method != "HEAD" {
        stream.write_all(&resp.body)?;
    }
    stream.flush()?;
    let _ = stream.shutdown(Shutdown::Write);
    Ok(())
}

/// Reads one request; `Ok(None)` if the peer closed before sending one.
fn read_request(stream: &mut TcpStream) -> io::Result<Option<Request>> {
    const MAX_HEAD: usize = 64 * 1024;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too large",
            ));
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(io::ErrorKind::UnexpectedEof.into())
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or("/");
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.to_string(), String::new()),
    };
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let content_length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < content_length {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(content_length);
    Ok(Some(Request {
        method,
        path,
        query,
        headers,
        body,
    }))
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Decodes `%XX` escapes (invalid escapes are kept verbatim) and converts
/// the bytes to UTF-8 lossily. `+` is not treated as a space.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex_val(bytes[i + 1]), hex_val(bytes[i + 2]))
        {
            out.push(h << 4 | l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Page JavaScript
// ---------------------------------------------------------------------------

/// A JavaScript string literal for `s`.
pub fn js(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

// ---------------------------------------------------------------------------
// Polling
// ---------------------------------------------------------------------------

/// Polls `f` until it returns `Some` or `timeout` elapses, sleeping 1 ms
/// doubling to 20 ms between attempts; `f` is always tried at least once and
/// once more at the deadline. The one sanctioned poll, for conditions that
/// have no event to wait on (e.g. a snapshot changing).
pub fn wait_until<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now()
        .checked_add(timeout)
        .expect("a deadline within range");
    let mut backoff = Duration::from_millis(1);
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return None;
        }
        thread::sleep(backoff.min(remaining));
        backoff = (backoff * 2).min(Duration::from_millis(20));
    }
}
