//! The CDP socket: one WebSocket per supervisor, read by one reader thread, written by anyone.
//!
//! # Design (the choice SPEC §2 asks us to document)
//!
//! The [`tungstenite::WebSocket`] lives behind one [`Mutex`]. A clone of the raw [`TcpStream`]
//! is kept outside the lock:
//!
//! * **Reader** ([`Transport::wait_readable`] then [`Transport::drain`]): blocks in
//!   [`TcpStream::peek`] on the raw clone, holding no lock and using no CPU while idle (no read
//!   time-outs, no polling). When bytes arrive it takes the lock and reads whole messages until
//!   `WouldBlock` (so nothing tungstenite or TLS has buffered is left behind), then releases the
//!   lock. The lock is therefore held only while copying bytes that are already in memory, never
//!   across a wait.
//! * **Writers** (caller threads, the watchdog, the reader's own automatic commands) take the same
//!   lock only to write one frame ([`Transport::send_text_until`]), bounded by the caller's
//!   deadline and by [`WRITE_TIMEOUT`] without progress: a peer that stops reading cannot wedge a
//!   writer past its call's deadline, nor anyone forever.
//! * The socket itself never changes mode: it stays blocking (so `peek` blocks), and every other
//!   syscall says per call how long it may wait ([`Socket`]): `recv`/`send` with `MSG_DONTWAIT`,
//!   and `poll(2)` with the time left to a [`Deadline`] when it must wait. That is Unix; elsewhere
//!   a portable fallback without `unsafe` switches the socket to non-blocking mode for one call
//!   and waits in short sleeps (the `sys` module).
//!
//! The alternative, a `try_clone` split into a read half and a write half, works only for
//! `ws://` (a TLS session cannot be split) and must keep tungstenite's automatic pong/close writes
//! on the read half from interleaving with frames on the write half. The lock-and-peek design has
//! neither problem.
//!
//! # Deadlines
//!
//! Socket time-outs (`SO_RCVTIMEO`/`SO_SNDTIMEO`) bound one syscall, not an operation: a peer
//! that trickles one byte a second satisfies every read and keeps a handshake going forever,
//! and a write loop that makes a little progress per call restarts its time-out each time.
//! So the [`Socket`] under the WebSocket carries a [`Deadline`] for the operation in progress
//! (the whole connect, or one frame write) and re-reads the time left before every wait.
//!
//! # `wss://`
//!
//! [`Stream`] is the seam: it is an enum over the byte streams a WebSocket can run on. TLS is a
//! `Tls(rustls::StreamOwned<ClientConnection, Socket>)` variant; `peek` keeps working on the
//! raw TCP clone (encrypted bytes waiting means "go and read"), and `drain` reading until
//! `WouldBlock` also empties rustls' plaintext buffer. A writer never reads: rustls may try to
//! while it flushes, and the [`Socket`] answers `WouldBlock` without touching the wire, so
//! incoming records are left for the reader, which is the thread that `peek` wakes.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Message, WebSocket};

use crate::deadline::Deadline;
use crate::error::Error;
use crate::net::{self, HeadError};
use crate::redact::{Secrets, redact_url};

/// How often the reader yields to a writer holding the socket lock before it sleeps on it.
const YIELDS_BEFORE_LOCK: usize = 16;

/// How long writes may make no progress at all before the connection is declared broken.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the [`Socket`] is doing, which says how long its `read`/`write` may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Connecting (TLS, the WebSocket upgrade, `http://` discovery): reads and writes wait until
    /// the deadline, then fail with `TimedOut`.
    Handshake(Deadline),
    /// Writing one frame for a caller whose call ends at the deadline. Writes wait until then
    /// (`WouldBlock` after it) or until [`WRITE_TIMEOUT`] without progress (`TimedOut`); reads
    /// answer `WouldBlock` at once without a syscall (a writer never consumes incoming bytes).
    Write(Deadline),
    /// The reader draining what arrived: nothing waits.
    Drain,
}

/// A TCP socket whose every `read`/`write` is bounded by its [`Mode`] (see the module doc).
/// Written only under the transport's lock (or before the transport exists).
#[derive(Debug)]
pub struct Socket {
    tcp: TcpStream,
    mode: Mode,
    /// Since when writes have been blocked without progress (`None`: the last write progressed).
    /// Kept across frames, so a run of short-deadline calls cannot hide a dead peer.
    stalled_since: Option<Instant>,
}

/// What [`Socket`] waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interest {
    /// Bytes to read (or the end of the stream).
    Read,
    /// Room to write.
    Write,
}

/// The syscalls under [`Socket`] on Unix: `recv`/`send` with `MSG_DONTWAIT`, which never wait
/// whatever the socket's mode (so the reader's `peek` on the blocking clone keeps blocking),
/// and `poll(2)` with the time left to a deadline.
#[cfg(unix)]
mod sys {
    use std::io;
    use std::net::TcpStream;
    use std::os::fd::AsRawFd;

    use super::Interest;
    use crate::deadline::{Deadline, Left};

    /// `Err(last_os_error)` when a libc call returned -1 (jobserver-rs' `cvt`).
    fn cvt(rc: isize) -> io::Result<usize> {
        usize::try_from(rc).map_err(|_| io::Error::last_os_error())
    }

    #[cfg(target_os = "linux")]
    const SEND_FLAGS: libc::c_int = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
    #[cfg(not(target_os = "linux"))]
    const SEND_FLAGS: libc::c_int = libc::MSG_DONTWAIT;

    /// Reads what is there without waiting (`WouldBlock` when nothing is).
    pub(super) fn try_recv(tcp: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the duration of the
            // call; the return value is checked by `cvt`.
            let rc = unsafe {
                libc::recv(
                    tcp.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            match cvt(rc) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }

    /// Writes what fits without waiting (`WouldBlock` when nothing does).
    pub(super) fn try_send(tcp: &TcpStream, buf: &[u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the duration of the
            // call; the return value is checked by `cvt`.
            let rc =
                unsafe { libc::send(tcp.as_raw_fd(), buf.as_ptr().cast(), buf.len(), SEND_FLAGS) };
            match cvt(rc) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r,
            }
        }
    }

    /// Waits until `interest` or an error/hang-up is reported, or `until` passes. `Ok(false)`:
    /// the deadline passed.
    pub(super) fn wait(tcp: &TcpStream, interest: Interest, until: Deadline) -> io::Result<bool> {
        let events = match interest {
            Interest::Read => libc::POLLIN,
            Interest::Write => libc::POLLOUT,
        };
        loop {
            let left = until.left();
            if left == Left::Passed {
                return Ok(false);
            }
            let mut pfd = libc::pollfd {
                fd: tcp.as_raw_fd(),
                events,
                revents: 0,
            };
            // SAFETY: one valid pollfd, on this stack frame, and a count of 1; the return value
            // is checked by `cvt`.
            let rc = unsafe { libc::poll(&mut pfd, 1, left.poll_millis()) };
            match cvt(rc as isize) {
                Ok(0) => {} // time-out: the loop re-reads the deadline
                Ok(_) => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The portable fallback (no `unsafe`): a read or write without waiting switches the socket to
/// non-blocking mode for that one call, and a wait sleeps in short steps until the deadline
/// (only a handshake or a stalled write waits, so an idle supervisor still never wakes up). The
/// mode is shared with the reader's clone: a `peek` that starts while a writer has switched it
/// sees `WouldBlock` and tries again (see `Transport::wait_readable`).
#[cfg(not(unix))]
mod sys {
    use std::io::{self, Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    use super::Interest;
    use crate::deadline::{Deadline, Left};

    /// The longest sleep of a wait.
    const STEP: Duration = Duration::from_millis(5);

    fn without_waiting<T>(
        tcp: &TcpStream,
        op: impl FnOnce(&TcpStream) -> io::Result<T>,
    ) -> io::Result<T> {
        tcp.set_nonblocking(true)?;
        let r = op(tcp);
        tcp.set_nonblocking(false)?;
        r
    }

    /// Reads what is there without waiting (`WouldBlock` when nothing is).
    pub(super) fn try_recv(tcp: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        without_waiting(tcp, |mut t| t.read(buf))
    }

    /// Writes what fits without waiting (`WouldBlock` when nothing does).
    pub(super) fn try_send(tcp: &TcpStream, buf: &[u8]) -> io::Result<usize> {
        without_waiting(tcp, |mut t| t.write(buf))
    }

    /// Sleeps one step (at most until `until`); `Ok(false)` once the deadline has passed. The
    /// caller then simply tries again.
    pub(super) fn wait(_tcp: &TcpStream, _interest: Interest, until: Deadline) -> io::Result<bool> {
        match until.left() {
            Left::Passed => Ok(false),
            Left::In(d) => {
                std::thread::sleep(d.min(STEP));
                Ok(true)
            }
            Left::Never => {
                std::thread::sleep(STEP);
                Ok(true)
            }
        }
    }
}

impl Socket {
    /// Wraps a connected socket, in [`Mode::Handshake`] until `deadline`.
    pub(crate) fn new(tcp: TcpStream, deadline: Deadline) -> Socket {
        Socket {
            tcp,
            mode: Mode::Handshake(deadline),
            stalled_since: None,
        }
    }

    /// Sets what the next reads and writes may wait for.
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        sys::try_recv(&self.tcp, buf)
    }

    fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        sys::try_send(&self.tcp, buf)
    }

    /// Waits until the socket is ready for `interest` (or reports an error or hang-up), or
    /// `until` passes. `Ok(false)`: the deadline passed.
    fn wait(&self, interest: Interest, until: Deadline) -> io::Result<bool> {
        sys::wait(&self.tcp, interest, until)
    }
}

/// The error for a connect deadline that passed.
fn handshake_timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the connect deadline passed")
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.mode {
            Mode::Write(_) => Err(io::ErrorKind::WouldBlock.into()),
            Mode::Drain => self.try_recv(buf),
            Mode::Handshake(until) => loop {
                match self.try_recv(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if !self.wait(Interest::Read, until)? {
                            return Err(handshake_timed_out());
                        }
                    }
                    r => return r,
                }
            },
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.try_send(buf) {
                Ok(n) => {
                    self.stalled_since = None;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            match self.mode {
                Mode::Drain => return Err(io::ErrorKind::WouldBlock.into()),
                Mode::Handshake(until) => {
                    if !self.wait(Interest::Write, until)? {
                        return Err(handshake_timed_out());
                    }
                }
                Mode::Write(call) => {
                    let since = *self.stalled_since.get_or_insert_with(Instant::now);
                    let stall = Deadline::from_start(since, WRITE_TIMEOUT);
                    if !self.wait(Interest::Write, call.earliest(stall))? {
                        return Err(if stall.passed() {
                            io::Error::new(
                                io::ErrorKind::TimedOut,
                                format!("the browser read nothing for {WRITE_TIMEOUT:?}"),
                            )
                        } else {
                            io::Error::new(
                                io::ErrorKind::WouldBlock,
                                "the call's deadline passed while its frame was being written",
                            )
                        });
                    }
                }
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The byte stream under the WebSocket. See the module doc for how TLS fits in.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP (`ws://`).
    Plain(Socket),
    /// TLS over TCP (`wss://`), rustls.
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, Socket>>),
}

impl Stream {
    fn socket_mut(&mut self) -> &mut Socket {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => &mut s.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// A [`Stream`] as the open WebSocket reads it, watching for raw HTTP. Some servers write an
/// HTTP response straight into an open WebSocket and close it: Browserless does, with
/// `HTTP/1.1 408 Request Timeout`, when its session time-out ends a session. Tungstenite then
/// reports a framing error ("Reserved bits are non-zero") or a reset, which says nothing useful;
/// this remembers the status line so that [`Transport::drain`] can say what really happened.
///
/// Only a read that *starts* with `HTTP/` counts (one comparison per read, nothing copied), and
/// any message parsed afterwards clears it, so a JSON message that happens to have `HTTP/` at a
/// read boundary never does. A response that arrives in the same read as a frame before it is
/// not recognised (the error is then reported as tungstenite words it).
#[derive(Debug)]
pub struct Watched {
    stream: Stream,
    /// The status line (`408 Request Timeout`) of raw HTTP seen at the start of a read.
    http_status: Option<String>,
}

impl Watched {
    fn new(stream: Stream) -> Watched {
        Watched {
            stream,
            http_status: None,
        }
    }
}

impl Read for Watched {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.stream.read(buf)?;
        if buf[..n].starts_with(b"HTTP/") {
            self.http_status = Some(net::status_line(&buf[..n]));
        }
        Ok(n)
    }
}

impl Write for Watched {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

/// The client side of the WebSocket upgrade, done here rather than by tungstenite's client
/// handshake so that nothing logs the request line or headers (query tokens, `Authorization`):
/// credentials never reach a log line, even a dependency's at trace level.
fn ws_handshake(
    mut stream: Stream,
    url: &url::Url,
    max_message_bytes: usize,
) -> Result<WebSocket<Watched>, String> {
    let key = tungstenite::handshake::client::generate_key();
    let host = url.host_str().unwrap_or("");
    let host_header = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let mut target = url.path().to_string();
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    let key_header = format!("Sec-WebSocket-Key: {key}");
    let req = net::get_request(
        url,
        &target,
        &host_header,
        &[
            "Upgrade: websocket",
            "Connection: Upgrade",
            &key_header,
            "Sec-WebSocket-Version: 13",
        ],
    );
    stream
        .write_all(req.as_bytes())
        .and_then(|_| stream.flush())
        .map_err(|e| match e.kind() {
            io::ErrorKind::TimedOut => {
                "the WebSocket upgrade request could not be sent before the connect deadline"
                    .to_string()
            }
            _ => format!("WebSocket handshake failed: sending the upgrade request: {e}"),
        })?;
    let head = net::read_http_head(&mut stream, MAX_UPGRADE_HEAD).map_err(|e| match e {
        HeadError::Closed(n) => format!(
            "WebSocket handshake failed: the server closed the connection ({n} bytes of its \
             answer)"
        ),
        HeadError::TooLarge(max) => format!(
            "WebSocket handshake failed: the answer's head is larger than {} KiB",
            max / 1024
        ),
        HeadError::TimedOut(n) => format!(
            "the server did not finish the WebSocket upgrade before the connect deadline \
             ({n} bytes of its answer so far)"
        ),
        HeadError::Io(e) => format!("WebSocket handshake failed: reading the answer: {e}"),
    })?;
    if head.code != Some(101) {
        return Err(format!(
            "WebSocket handshake failed: the server answered {:?} instead of 101 Switching Protocols",
            head.status
        ));
    }
    let expected = tungstenite::handshake::derive_accept_key(key.as_bytes());
    if head.header("sec-websocket-accept") != Some(expected.as_str()) {
        return Err("WebSocket handshake failed: wrong or missing Sec-WebSocket-Accept".into());
    }
    Ok(WebSocket::from_partially_read(
        Watched::new(stream),
        head.leftover,
        tungstenite::protocol::Role::Client,
        Some(ws_config(max_message_bytes)),
    ))
}

/// Longest upgrade answer head accepted.
const MAX_UPGRADE_HEAD: usize = 64 * 1024;

/// A rustls client configuration: the web PKI roots, plus the certificates of `ca_file` (PEM).
pub fn tls_config(ca_file: Option<&std::path::Path>) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("cannot read CA file {}: {e}", path.display()))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("bad PEM in CA file {}: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!("CA file {} holds no certificate", path.display()));
        }
        for c in certs {
            roots
                .add(c)
                .map_err(|e| format!("unusable certificate in {}: {e}", path.display()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Why [`Transport::send_text_until`] failed.
#[derive(Debug)]
pub enum SendError {
    /// The call's deadline passed while its frame was being written; the connection is fine.
    DeadlinePassed,
    /// The connection is broken and has been shut down.
    Lost(Error),
}

/// What [`Transport::wait_readable`] saw.
#[derive(Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Bytes are waiting.
    Data,
    /// The peer closed, or the socket was shut down.
    Closed(String),
}

/// One CDP WebSocket connection, shared by the reader thread and any number of writers.
pub struct Transport {
    /// The WebSocket. Locked by the reader only to drain already-arrived bytes, and by writers only
    /// to write one frame.
    socket: Mutex<WebSocket<Watched>>,
    /// A clone of the TCP socket: the reader peeks on it without the lock; `shutdown` uses it to
    /// wake everyone.
    raw: TcpStream,
    /// Set once the connection is known to be broken (write failure, shutdown).
    broken: AtomicBool,
    /// The CDP URL, redacted, for messages.
    pub url_redacted: String,
    /// The URL's secret parts, scrubbed from lower layers' error text.
    pub secrets: Secrets,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("url", &self.url_redacted)
            .finish_non_exhaustive()
    }
}

/// Connection settings.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Bound on TCP connect plus the WebSocket handshake.
    pub connect_timeout: Duration,
    /// Largest accepted message; larger frames close the connection with a logged reason.
    pub max_message_bytes: usize,
    /// Extra CA certificates (PEM) trusted for `wss://`, besides the web PKI roots.
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            connect_timeout: Duration::from_secs(10),
            max_message_bytes: 64 << 20,
            ca_file: None,
        }
    }
}

/// Bytes tungstenite reads per `read` call. Its default (128 KiB) is zero-filled before every
/// read, which costs microseconds per message and makes 128 KiB per connection resident; CDP
/// messages are mostly small, and large ones simply take more reads.
const READ_CHUNK: usize = 8 * 1024;

fn ws_config(max: usize) -> WebSocketConfig {
    WebSocketConfig::default()
        .read_buffer_size(READ_CHUNK)
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
}

impl Transport {
    /// Connects to a `ws://` or `wss://` CDP endpoint within `opts.connect_timeout`.
    pub fn connect(url: &str, opts: &ConnectOptions) -> Result<Transport, Error> {
        Transport::connect_until(url, opts, Deadline::after(opts.connect_timeout))
    }

    /// Connects to a `ws://` or `wss://` CDP endpoint: TCP, TLS and the WebSocket upgrade all
    /// end by `deadline` (and `opts.connect_timeout` is not used).
    pub fn connect_until(
        url: &str,
        opts: &ConnectOptions,
        deadline: Deadline,
    ) -> Result<Transport, Error> {
        let started = Instant::now();
        let secrets = Secrets::of(url);
        let url_redacted = redact_url(url);
        let connect_err = |reason: String| Error::Connect {
            url: url_redacted.clone(),
            reason: secrets.scrub(&reason),
        };
        let parsed = url::Url::parse(url).map_err(|e| Error::InvalidUrl {
            url: url_redacted.clone(),
            reason: e.to_string(),
        })?;
        let tls = match parsed.scheme() {
            "ws" => false,
            "wss" => true,
            other => {
                return Err(Error::InvalidUrl {
                    url: url_redacted,
                    reason: format!("scheme {other:?} is not a WebSocket scheme (ws:// or wss://)"),
                });
            }
        };
        let host = parsed.host_str().ok_or_else(|| Error::InvalidUrl {
            url: url_redacted.clone(),
            reason: "no host".into(),
        })?;
        let port = parsed.port_or_known_default().unwrap_or(80);
        let tcp = net::connect_any(host, port, deadline).map_err(&connect_err)?;
        let raw = tcp.try_clone().map_err(|e| connect_err(e.to_string()))?;
        let socket = Socket::new(tcp, deadline);
        let stream = if tls {
            let config = tls_config(opts.ca_file.as_deref()).map_err(&connect_err)?;
            let name = rustls_pki_types::ServerName::try_from(
                host.trim_matches(['[', ']']).to_string(),
            )
            .map_err(|e| connect_err(format!("{host} is not a valid TLS server name: {e}")))?;
            let conn = rustls::ClientConnection::new(config, name)
                .map_err(|e| connect_err(format!("TLS setup: {e}")))?;
            let mut tls = rustls::StreamOwned::new(conn, socket);
            // Finish the TLS handshake now so a certificate problem is reported as such.
            while tls.conn.is_handshaking() {
                tls.conn.complete_io(&mut tls.sock).map_err(|e| {
                    connect_err(match e.kind() {
                        io::ErrorKind::TimedOut => format!(
                            "the TLS handshake did not finish before the connect deadline \
                             ({:.1} s after the start)",
                            started.elapsed().as_secs_f64()
                        ),
                        _ => format!("TLS handshake failed: {e}"),
                    })
                })?;
            }
            Stream::Tls(Box::new(tls))
        } else {
            Stream::Plain(socket)
        };
        let mut socket = ws_handshake(stream, &parsed, opts.max_message_bytes).map_err(|e| {
            connect_err(format!(
                "{e} ({:.1} s after the start)",
                started.elapsed().as_secs_f64()
            ))
        })?;
        socket.get_mut().stream.socket_mut().set_mode(Mode::Drain);
        Ok(Transport {
            socket: Mutex::new(socket),
            raw,
            broken: AtomicBool::new(false),
            url_redacted,
            secrets,
        })
    }

    /// True once a write failed or the socket was shut down.
    pub fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, WebSocket<Watched>> {
        self.socket.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`Transport::lock`] for the reader: a writer holds the lock only for one frame write, so
    /// while it does, yield the CPU (to that writer, if it was preempted on this CPU) a few times
    /// before sleeping on the mutex.
    fn lock_yielding(&self) -> std::sync::MutexGuard<'_, WebSocket<Watched>> {
        for _ in 0..YIELDS_BEFORE_LOCK {
            match self.socket.try_lock() {
                Ok(g) => return g,
                Err(std::sync::TryLockError::Poisoned(e)) => return e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => std::thread::yield_now(),
            }
        }
        self.lock()
    }

    /// Writes one text frame, bounded by [`WRITE_TIMEOUT`] without progress (plus the time
    /// another writer or the draining reader holds the lock); on failure the connection is shut
    /// down.
    pub fn send_text(&self, text: String) -> Result<(), Error> {
        self.send_text_until(text, Deadline::NEVER)
            .map_err(|e| match e {
                SendError::DeadlinePassed => {
                    // Unreachable without a deadline; reported as what it would mean.
                    Error::ConnectionLost("the write did not finish".into())
                }
                SendError::Lost(e) => e,
            })
    }

    /// Writes one text frame for a call that ends at `deadline`.
    ///
    /// * [`SendError::DeadlinePassed`]: the deadline passed while the frame was being written.
    ///   The connection stays up: what was not written yet stays queued (in tungstenite's or
    ///   rustls' buffer) and goes out, whole, ahead of the next frame, so the stream never
    ///   carries half a frame followed by another. The command may therefore still run, as a
    ///   command whose reply comes too late does.
    /// * [`SendError::Lost`]: the connection is broken (a write error, or [`WRITE_TIMEOUT`]
    ///   without any progress, summed over frames) and has been shut down.
    pub fn send_text_until(&self, text: String, deadline: Deadline) -> Result<(), SendError> {
        if self.is_broken() {
            return Err(SendError::Lost(Error::ConnectionLost(
                "the connection is closed".into(),
            )));
        }
        let mut ws = self.lock();
        ws.get_mut()
            .stream
            .socket_mut()
            .set_mode(Mode::Write(deadline));
        let result = ws.send(Message::text(text));
        drop(ws);
        match result {
            Ok(()) => Ok(()),
            Err(tungstenite::Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                Err(SendError::DeadlinePassed)
            }
            Err(e) => {
                let reason = self.secrets.scrub(&format!("write failed: {e}"));
                self.shutdown();
                Err(SendError::Lost(Error::ConnectionLost(reason)))
            }
        }
    }

    /// Blocks until bytes are waiting or the connection ends. Holds no lock, uses no CPU.
    pub fn wait_readable(&self) -> Readiness {
        let mut byte = [0u8; 1];
        loop {
            match self.raw.peek(&mut byte) {
                Ok(0) => {
                    let reason = self
                        .server_ended_session()
                        .unwrap_or_else(|| "the browser closed the connection".into());
                    return Readiness::Closed(reason);
                }
                Ok(_) => return Readiness::Data,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The socket is always blocking on Unix (see the module doc); elsewhere a writer
                // may have made it non-blocking for one write: let it finish.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => return Readiness::Closed(format!("socket error: {e}")),
            }
        }
    }

    /// Reads every complete message already available, appending it to `out`, without waiting
    /// for more. `Err` means the connection is finished (closed, broken, protocol violation,
    /// oversize frame); messages read before that are still in `out`.
    ///
    /// At most `max` messages are taken per call (so a flood is applied and published in
    /// batches); `Ok(true)` means the cap was hit and more may already be buffered above the
    /// socket, where [`Transport::wait_readable`] cannot see it: call `drain` again without
    /// waiting.
    pub fn drain(&self, out: &mut Vec<Message>, max: usize) -> Result<bool, String> {
        let mut ws = self.lock_yielding();
        ws.get_mut().stream.socket_mut().set_mode(Mode::Drain);
        let mut taken = 0usize;
        let result = loop {
            if taken >= max {
                break Ok(true);
            }
            match ws.read() {
                Ok(msg) => {
                    out.push(msg);
                    taken += 1;
                    if ws.get_ref().http_status.is_some() {
                        ws.get_mut().http_status = None; // `HTTP/` in a message, not a response
                    }
                }
                Err(tungstenite::Error::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                    break Ok(false);
                }
                Err(tungstenite::Error::Io(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => {
                    break Err("the browser closed the WebSocket".to_string());
                }
                Err(e) => break Err(self.secrets.scrub(&format!("WebSocket error: {e}"))),
            }
        };
        let result = match (result, &ws.get_ref().http_status) {
            (Err(_), Some(status)) => Err(server_ended(status)),
            (result, _) => result,
        };
        drop(ws);
        result
    }

    /// "the server ended the session: 408 Request Timeout" when the last bytes read were a raw
    /// HTTP response rather than WebSocket frames (see [`Watched`]).
    fn server_ended_session(&self) -> Option<String> {
        self.lock()
            .get_ref()
            .http_status
            .as_deref()
            .map(server_ended)
    }

    /// Sends a WebSocket close frame, best effort, giving up at `deadline` (and after
    /// [`WRITE_TIMEOUT`] without progress).
    pub fn close_until(&self, deadline: Deadline) {
        if !self.is_broken() {
            let mut ws = self.lock();
            ws.get_mut()
                .stream
                .socket_mut()
                .set_mode(Mode::Write(deadline));
            let _ = ws.close(None);
            let _ = ws.flush();
        }
    }

    /// Sends a WebSocket close frame, best effort (bounded by the write time-out).
    pub fn close(&self) {
        self.close_until(Deadline::NEVER);
    }

    /// Shuts the TCP connection down in both directions: the reader's `peek` returns, blocked
    /// writers fail at once. Idempotent.
    pub fn shutdown(&self) {
        self.broken.store(true, Ordering::Release);
        let _ = self.raw.shutdown(Shutdown::Both);
    }
}

fn server_ended(status: &str) -> String {
    format!("the server ended the session: {status}")
}
