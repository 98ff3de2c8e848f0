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
//!   deadline and by [`WRITE_TIMEOUT`] without progress: a peer that stops
//!   reading cannot wedge a
//!   writer past its call's deadline, nor anyone forever.
//! * The socket itself never changes mode: it stays blocking (so `peek` blocks), and every other
//!   syscall says per call how long it may wait ([`Socket`]): `recv`/`send` with `MSG_DONTWAIT`,
//!   and `poll(2)` with the time left to a [`Deadline`] when it must wait. That is Unix
//!   (`sys_unix.rs`); elsewhere a portable fallback without `unsafe` (`sys_portable.rs`)
//!   switches the socket to non-blocking mode for one call and waits in short sleeps.
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
//!
//! # Layout
//!
//! * here: [`Transport`], the connection the reader and the writers share (the design above),
//!   and [`ConnectOptions`];
//! * `handshake.rs`: connecting, the TLS handshake and the WebSocket upgrade;
//! * `stream.rs`: [`Stream`] (plain or TLS) and [`Watched`] (raw HTTP in an open WebSocket);
//! * `socket.rs`: [`Socket`] and its [`Mode`], with the syscalls under it in `sys_unix.rs`, or
//!   `sys_portable.rs` where that does not apply (one chosen by `#[cfg]` and `#[path]`).

use crate::sync;
use std::io;
use std::net::{Shutdown, TcpStream};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tungstenite::{Message, WebSocket};

use crate::deadline::Deadline;
use crate::error::Error;
use crate::net;
use crate::redact::{Secrets, redact_url};

mod handshake;
mod socket;
mod stream;

pub(crate) use socket::{Mode, Socket, WRITE_TIMEOUT, wait_readable_any};
use stream::{Stream, Watched};

/// How often the reader yields to a writer holding the socket lock before it sleeps on it.
const YIELDS_BEFORE_LOCK: usize = 16;

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
                    reason: format!(
                        "scheme {} is not a WebSocket scheme (ws:// or wss://)",
                        crate::quote::quoted(other)
                    ),
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
            handshake::tls(socket, host, opts.ca_file.as_deref(), started).map_err(&connect_err)?
        } else {
            Stream::Plain(socket)
        };
        let mut socket = handshake::websocket(stream, &parsed, opts.max_message_bytes, deadline)
            .map_err(|e| {
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
        sync::lock(&self.socket)
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

    /// Writes one text frame for a call that ends at `deadline`.
    ///
    /// * `SendError::DeadlinePassed`: the deadline passed while the frame was being written.
    ///   The connection stays up: what was not written yet stays queued (in tungstenite's or
    ///   rustls' buffer) and goes out, whole, ahead of the next frame, so the stream never
    ///   carries half a frame followed by another. The command may therefore still run, as a
    ///   command whose reply comes too late does.
    /// * `SendError::Lost`: the connection is broken (a write error, or `WRITE_TIMEOUT`
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
    /// `WRITE_TIMEOUT` without progress).
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
