//! The CDP socket: one WebSocket per supervisor, read by one reader thread, written by anyone.
//!
//! # Design (the choice SPEC §2 asks us to document)
//!
//! The [`tungstenite::WebSocket`] lives behind one [`Mutex`]. A clone of the raw [`TcpStream`]
//! is kept outside the lock:
//!
//! * **Reader** ([`Transport::wait_readable`] then [`Transport::drain`]): blocks in
//!   [`TcpStream::peek`] on the raw clone, holding no lock and using no CPU while idle (no read
//!   time-outs, no polling). When bytes arrive it takes the lock, switches the socket to
//!   non-blocking, reads whole messages until `WouldBlock` (so nothing tungstenite, or later TLS,
//!   has buffered is left behind), switches back to blocking and releases the lock. The lock is
//!   therefore held only while copying bytes that are already in memory, never across a wait.
//! * **Writers** (caller threads, the watchdog, the reader's own automatic commands) take the same
//!   lock only to write one frame ([`Transport::send_text`]). The socket has a write time-out
//!   ([`WRITE_TIMEOUT`]): a peer that stops reading cannot wedge a writer forever; a timed-out
//!   write marks the connection broken and shuts it down, which wakes the reader.
//! * `O_NONBLOCK` is a property of the shared file description, so it is only ever flipped by the
//!   reader while it holds the lock; writers always see a blocking socket.
//!
//! The alternative, a `try_clone` split into a read half and a write half, works only for
//! `ws://` (a TLS session cannot be split) and must keep tungstenite's automatic pong/close writes
//! on the read half from interleaving with frames on the write half. The lock-and-peek design has
//! neither problem.
//!
//! # `wss://`
//!
//! [`Stream`] is the seam: it is an enum over the byte streams a WebSocket can run on. TLS adds a
//! `Tls(rustls::StreamOwned<ClientConnection, TcpStream>)` variant; `peek` keeps working on the
//! raw TCP clone (encrypted bytes waiting means "go and read"), and `drain` reading until
//! `WouldBlock` also empties rustls' plaintext buffer. Nothing else changes.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Message, WebSocket};

use crate::error::Error;
use crate::redact::{Secrets, redact_url};

/// How often the reader yields to a writer holding the socket lock before it sleeps on it.
const YIELDS_BEFORE_LOCK: usize = 16;

/// How long one frame write may block before the connection is declared broken.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The byte stream under the WebSocket. See the module doc for how TLS fits in.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP (`ws://`).
    Plain(TcpStream),
    /// TLS over TCP (`wss://`), rustls.
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
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

/// `408 Request Timeout` from `HTTP/1.1 408 Request Timeout\r\n...`: the first line without
/// its version, printable ASCII only, at most 120 bytes.
fn http_status_line(bytes: &[u8]) -> String {
    let line = bytes
        .split(|b| *b == b'\r' || *b == b'\n')
        .next()
        .unwrap_or_default();
    let line: String = line
        .iter()
        .take(120)
        .map(|b| *b as char)
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .collect();
    match line.split_once(' ') {
        Some((version, rest)) if version.starts_with("HTTP/") && !rest.trim().is_empty() => {
            rest.trim().to_string()
        }
        _ => line,
    }
}

impl Read for Watched {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.stream.read(buf)?;
        if buf[..n].starts_with(b"HTTP/") {
            self.http_status = Some(http_status_line(&buf[..n]));
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

/// The `Authorization: Basic` value for a URL's `user:password@`, if it has one.
pub fn basic_auth(url: &url::Url) -> Option<String> {
    use base64::Engine;
    if url.username().is_empty() && url.password().is_none() {
        return None;
    }
    let decode = |s: &str| {
        url::form_urlencoded::parse(format!("x={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    let pair = format!(
        "{}:{}",
        decode(url.username()),
        decode(url.password().unwrap_or(""))
    );
    Some(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    ))
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
    let mut req = format!(
        "GET {target} HTTP/1.1\r\nHost: {host_header}\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
    );
    if let Some(auth) = basic_auth(url) {
        req.push_str(&format!("Authorization: {auth}\r\n"));
    }
    req.push_str("\r\n");
    stream
        .write_all(req.as_bytes())
        .and_then(|_| stream.flush())
        .map_err(|e| format!("WebSocket handshake failed: sending the upgrade request: {e}"))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 * 1024 {
            return Err(
                "WebSocket handshake failed: the answer's head is larger than 64 KiB".into(),
            );
        }
        match stream.read(&mut chunk) {
            Ok(0) => {
                return Err("WebSocket handshake failed: the server closed the connection".into());
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(format!(
                    "WebSocket handshake failed: reading the answer: {e}"
                ));
            }
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let status = head.lines().next().unwrap_or("").trim().to_string();
    if status.split_whitespace().nth(1) != Some("101") {
        return Err(format!(
            "WebSocket handshake failed: the server answered {status:?} instead of 101 Switching Protocols"
        ));
    }
    let expected = tungstenite::handshake::derive_accept_key(key.as_bytes());
    let accepted = head.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("sec-websocket-accept") && v.trim() == expected
        })
    });
    if !accepted {
        return Err("WebSocket handshake failed: wrong or missing Sec-WebSocket-Accept".into());
    }
    let leftover = buf[head_end..].to_vec();
    Ok(WebSocket::from_partially_read(
        Watched::new(stream),
        leftover,
        tungstenite::protocol::Role::Client,
        Some(ws_config(max_message_bytes)),
    ))
}

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
    /// Connects to a `ws://` CDP endpoint within `opts.connect_timeout`.
    pub fn connect(url: &str, opts: &ConnectOptions) -> Result<Transport, Error> {
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
        let deadline = Instant::now() + opts.connect_timeout;
        let addrs: Vec<_> = (host.trim_matches(['[', ']']), port)
            .to_socket_addrs()
            .map_err(|e| connect_err(format!("cannot resolve {host}: {e}")))?
            .collect();
        let mut last = format!("{host} resolved to no address");
        let mut tcp = None;
        for addr in addrs {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match TcpStream::connect_timeout(&addr, left) {
                Ok(s) => {
                    tcp = Some(s);
                    break;
                }
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        let tcp = tcp.ok_or_else(|| connect_err(last))?;
        let _ = tcp.set_nodelay(true);
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        tcp.set_read_timeout(Some(left))
            .and_then(|_| tcp.set_write_timeout(Some(left)))
            .map_err(|e| connect_err(e.to_string()))?;
        let raw = tcp.try_clone().map_err(|e| connect_err(e.to_string()))?;
        let stream = if tls {
            let config = tls_config(opts.ca_file.as_deref()).map_err(&connect_err)?;
            let name = rustls_pki_types::ServerName::try_from(
                host.trim_matches(['[', ']']).to_string(),
            )
            .map_err(|e| connect_err(format!("{host} is not a valid TLS server name: {e}")))?;
            let conn = rustls::ClientConnection::new(config, name)
                .map_err(|e| connect_err(format!("TLS setup: {e}")))?;
            let mut tls = rustls::StreamOwned::new(conn, tcp);
            // Finish the TLS handshake now so a certificate problem is reported as such.
            while tls.conn.is_handshaking() {
                tls.conn
                    .complete_io(&mut tls.sock)
                    .map_err(|e| connect_err(format!("TLS handshake failed: {e}")))?;
            }
            Stream::Tls(Box::new(tls))
        } else {
            Stream::Plain(tcp)
        };
        let socket = ws_handshake(stream, &parsed, opts.max_message_bytes).map_err(&connect_err)?;
        raw.set_read_timeout(None)
            .and_then(|_| raw.set_write_timeout(Some(WRITE_TIMEOUT)))
            .map_err(|e| connect_err(e.to_string()))?;
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

    /// Writes one text frame. Blocks at most [`WRITE_TIMEOUT`] (plus the time another writer or
    /// the draining reader holds the lock); on failure the connection is shut down.
    pub fn send_text(&self, text: String) -> Result<(), Error> {
        if self.is_broken() {
            return Err(Error::ConnectionLost("the connection is closed".into()));
        }
        let result = self.lock().send(Message::text(text));
        result.map_err(|e| {
            let reason = self.secrets.scrub(&format!("write failed: {e}"));
            self.shutdown();
            Error::ConnectionLost(reason)
        })
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
                // A writer may have raced us between our drain and this peek in the rare case
                // the socket was still non-blocking; it never is outside the lock, but be safe.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
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
        self.raw
            .set_nonblocking(true)
            .map_err(|e| format!("set_nonblocking: {e}"))?;
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
        let restore = self.raw.set_nonblocking(false);
        drop(ws);
        if let Err(e) = restore {
            return Err(format!("set_nonblocking(false): {e}"));
        }
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

    /// Sends a WebSocket close frame, best effort (bounded by the write time-out).
    pub fn close(&self) {
        if !self.is_broken() {
            let _ = self.lock().close(None);
            let _ = self.lock().flush();
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_http_response_is_reduced_to_its_status_line() {
        let full = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(http_status_line(full), "408 Request Timeout");
        assert_eq!(http_status_line(b"HTTP/1.0 503\r\n"), "503");
        assert_eq!(http_status_line(b"HTTP/1.1"), "HTTP/1.1");
        assert_eq!(
            http_status_line(b"HTTP/1.1 400 \x1b[31mx\xff\n"),
            "400 [31mx"
        );
    }

    #[test]
    fn basic_auth_comes_from_userinfo_percent_decoded() {
        let u = url::Url::parse("wss://us%40er:p%3Aw@h/x").unwrap();
        assert_eq!(basic_auth(&u).as_deref(), Some("Basic dXNAZXI6cDp3")); // "us@er:p:w"
        let u = url::Url::parse("wss://h/x?token=t").unwrap();
        assert_eq!(basic_auth(&u), None);
    }
}
