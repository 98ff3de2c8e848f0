//! MCP over Streamable HTTP (SPEC §15): `cdp-supervisor mcp --http ADDR` serves the endpoint
//! `http://ADDR/mcp` ([`ENDPOINT`]), with the same tools, worker pool and caps as stdio.
//!
//! # Why a server of our own
//!
//! The crate runs no async runtime, so the candidates were the synchronous servers. tiny_http
//! (0.12, the last release in 2022; rouille is built on it) reads each connection on a thread
//! of a pool that grows without bound, and has no read deadline of any kind: a client that
//! sends one header byte every few seconds, or opens connections and sends nothing, holds a
//! thread for as long as it likes (measured: see the report of issue 23). astra runs hyper,
//! which brings tokio into the dependency tree. What MCP needs of HTTP is small (one endpoint,
//! POST with a JSON body, an answer that is JSON or a stream of events), and the crate already
//! parses HTTP heads with `httparse` for the CDP handshake, so this is that parser plus about
//! 400 lines: `wire.rs` (a request with deadlines, an answer), `access.rs` (the `Host`, `Origin`
//! and token rules), `route.rs` (what a request means).
//!
//! # Threads and limits
//!
//! * One acceptor thread; one thread per connection, at most [`HttpOptions::max_connections`]
//!   (past it a connection is answered 503 and closed). A connection is HTTP/1.1 keep-alive:
//!   it waits up to the idle timeout for the next request, then closes. Reading a request has
//!   a header and a body deadline (`wire`), so a client that trickles is cut off.
//! * Tool calls run on the server's worker pool, shared with stdio's rules: at most
//!   [`MAX_IN_FLIGHT`](crate::mcp::MAX_IN_FLIGHT) in flight (over every client together), a body
//!   is at most [`MAX_LINE`](crate::mcp::MAX_LINE) bytes. The worker writes its answer to the
//!   connection itself; the connection's thread meanwhile watches the socket (a blocking peek,
//!   no polling), and when the client closes the connection before its answer, the call is
//!   cancelled (2026-07-28: closing the stream *is* the cancellation; 2025-11-25: the answer
//!   could never be delivered, since this server keeps no streams to resume).
//! * An idle server makes no wake-ups: the acceptor blocks in `accept`, idle connections in
//!   `read` with their idle timeout.
//!
//! # Safety
//!
//! `ADDR` defaults to loopback ([`DEFAULT_ADDR`]). Every request passes `access` first: `Host`
//! must name this server, an `Origin` must be one of its names, and with a token every request
//! needs it. A non-loopback address without a token refuses to start ([`HttpServer::start`]).
//!
//! # Shutdown
//!
//! [`HttpServer::shutdown`] (the binary's SIGTERM/SIGINT handler): no new connections, every
//! connection's socket shut (calls in flight are cancelled and get no answer: their
//! connections close), then the MCP server's shutdown (supervisors stopped, the launched
//! browser closed, its profile removed), as on stdio.

mod access;
mod route;
#[cfg(all(test, feature = "fake-browser"))]
mod tests;
mod wire;

use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::McpServer;
use crate::config::Config;
use crate::error::Error;
use route::Sessions;

pub(crate) use crate::task_id::random_hex;

/// Where `mcp --http` listens without an address: loopback, port 8737.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8737";

/// The path of the MCP endpoint.
pub const ENDPOINT: &str = "/mcp";

/// The environment variable the binary reads the bearer token from (never a command-line
/// argument: those show in `ps`).
pub const TOKEN_ENV: &str = "CDP_SUPERVISOR_MCP_TOKEN";

/// Stack size of connection threads (they parse request heads and bodies, nothing deep).
const CONN_STACK: usize = 512 * 1024;

/// How the HTTP server listens, and its limits. Start from `HttpOptions::default()` and the
/// `with_*` setters.
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// `HOST:PORT`, `[V6]:PORT`, `HOST` (port 8737) or `PORT` (on 127.0.0.1); port 0 picks a
    /// free one ([`HttpServer::local_addr`] says which).
    pub addr: String,
    /// How long a keep-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// How long a request's head may take to arrive, from its first byte.
    pub header_timeout: Duration,
    /// How long a request's body may take to arrive, after its head.
    pub body_timeout: Duration,
    /// Connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// The bearer token every request must carry; never shown by `Debug`.
    token: Option<String>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            addr: DEFAULT_ADDR.into(),
            idle_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 64,
            token: None,
        }
    }
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOptions")
            .field("addr", &self.addr)
            .field("idle_timeout", &self.idle_timeout)
            .field("header_timeout", &self.header_timeout)
            .field("body_timeout", &self.body_timeout)
            .field("max_connections", &self.max_connections)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

impl HttpOptions {
    /// Sets [`addr`](HttpOptions::addr).
    pub fn with_addr(mut self, addr: impl Into<String>) -> HttpOptions {
        self.addr = addr.into();
        self
    }

    /// Requires `Authorization: Bearer <token>` on every request (`None`: no token).
    pub fn with_token(mut self, token: Option<String>) -> HttpOptions {
        self.token = token;
        self
    }

    /// Whether a token is set.
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// Sets [`idle_timeout`](HttpOptions::idle_timeout).
    pub fn with_idle_timeout(mut self, d: Duration) -> HttpOptions {
        self.idle_timeout = d;
        self
    }

    /// Sets [`header_timeout`](HttpOptions::header_timeout).
    pub fn with_header_timeout(mut self, d: Duration) -> HttpOptions {
        self.header_timeout = d;
        self
    }

    /// Sets [`body_timeout`](HttpOptions::body_timeout).
    pub fn with_body_timeout(mut self, d: Duration) -> HttpOptions {
        self.body_timeout = d;
        self
    }

    /// Sets [`max_connections`](HttpOptions::max_connections).
    pub fn with_max_connections(mut self, n: usize) -> HttpOptions {
        self.max_connections = n;
        self
    }
}

/// The address `addr` means (see [`HttpOptions::addr`]).
fn resolve(addr: &str) -> Result<SocketAddr, Error> {
    let addr = addr.trim();
    let spelled = if addr.parse::<u16>().is_ok() {
        format!("127.0.0.1:{addr}")
    } else if addr.starts_with('[') && addr.ends_with(']') || !addr.contains(':') {
        format!("{addr}:8737")
    } else {
        addr.to_string()
    };
    let wrong = |why: String| {
        Error::InvalidArgument(format!(
            "invalid address {addr:?} for mcp --http: {why} (give HOST:PORT, [IPV6]:PORT, HOST or PORT, e.g. {DEFAULT_ADDR})"
        ))
    };
    spelled
        .to_socket_addrs()
        .map_err(|e| wrong(e.to_string()))?
        .next()
        .ok_or_else(|| wrong("it resolves to no address".into()))
}

/// The MCP server over HTTP: its listener, its connections and the MCP server they share.
/// Shuts down on drop.
#[derive(Debug)]
pub struct HttpServer {
    shared: Arc<Shared>,
    accept: Mutex<Option<JoinHandle<()>>>,
}

/// What the acceptor and the connection threads share.
#[derive(Debug)]
struct Shared {
    mcp: McpServer,
    addr: SocketAddr,
    options: HttpOptions,
    access: access::Access,
    sessions: Sessions,
    /// Set when shutdown starts: no new connections or requests.
    closing: AtomicBool,
    /// The open connections (a handle to shut each down), by number. Inserted by the
    /// acceptor, removed by the connection's thread as it ends.
    conns: Mutex<HashMap<u64, TcpStream>>,
    next_conn: AtomicU64,
    /// Connections open (the acceptor's bound).
    open: AtomicUsize,
    /// The next channel (`exchange::Exchange::channel`, the first half of a `pool::Key`): one
    /// per legacy session and per stateless request; 0 is stdio's.
    next_channel: AtomicU64,
    /// True once shutdown is done; `wait` waits for it.
    stopped: Mutex<bool>,
    stopped_cv: Condvar,
}

impl Shared {
    fn channel(&self) -> u64 {
        self.next_channel.fetch_add(1, Ordering::Relaxed)
    }
}

impl HttpServer {
    /// Binds `options.addr` and serves MCP at `http://ADDR/mcp` with a server of its own
    /// (its registry, its launched browser) configured by `config` (`mcp.allowed_hosts`
    /// among others). Refuses a non-loopback address without a token, naming why.
    pub fn start(config: Config, options: HttpOptions) -> Result<HttpServer, Error> {
        let addr = resolve(&options.addr)?;
        if let Some(t) = &options.token
            && let Some(why) = access::token_problem(t)
        {
            return Err(Error::InvalidArgument(format!(
                "the MCP bearer token ({TOKEN_ENV}) cannot be used: {why}"
            )));
        }
        if !addr.ip().is_loopback() && options.token.is_none() {
            return Err(Error::InvalidArgument(format!(
                "refusing to serve MCP over HTTP on {addr} without a token: anyone who can reach \
                 that address could drive the browser (and through browser_cdp, read what it \
                 can). Set {TOKEN_ENV} (clients then send Authorization: Bearer <token>) or bind \
                 a loopback address such as {DEFAULT_ADDR}"
            )));
        }
        let listener = TcpListener::bind(addr)
            .map_err(|e| Error::Io(format!("cannot listen on {addr} for MCP over HTTP: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::Io(format!("the MCP listener's address: {e}")))?;
        let access = access::Access::new(addr, &config.allowed_hosts, options.token.as_deref());
        let shared = Arc::new(Shared {
            mcp: McpServer::new(config),
            addr,
            options,
            access,
            sessions: Sessions::default(),
            closing: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(0),
            open: AtomicUsize::new(0),
            next_channel: AtomicU64::new(1),
            stopped: Mutex::new(false),
            stopped_cv: Condvar::new(),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("mcp-http-accept".into())
                .stack_size(256 * 1024)
                .spawn(move || accept_loop(&shared, &listener))
                .map_err(|e| Error::Io(format!("cannot start the MCP HTTP acceptor: {e}")))?
        };
        log::info!(
            "MCP over HTTP at http://{addr}{ENDPOINT} (token {})",
            if shared.options.token.is_some() {
                "required"
            } else {
                "not required"
            }
        );
        Ok(HttpServer {
            shared,
            accept: Mutex::new(Some(acceptor)),
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The endpoint's URL, `http://ADDR/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}{ENDPOINT}", self.shared.addr)
    }

    /// The MCP server behind it (its registry, for embedding and tests).
    pub fn mcp(&self) -> &McpServer {
        &self.shared.mcp
    }

    /// Blocks until [`HttpServer::shutdown`] has finished (from another thread).
    pub fn wait(&self) {
        let mut stopped = self
            .shared
            .stopped
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        while !*stopped {
            stopped = self
                .shared
                .stopped_cv
                .wait(stopped)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Stops serving (idempotent; a concurrent caller returns once it is done): no new
    /// connections, every open one closed (calls in flight are cancelled and get no answer),
    /// then the MCP server's shutdown ([`McpServer::shutdown`]).
    pub fn shutdown(&self) {
        let sh = &self.shared;
        if !sh.closing.swap(true, Ordering::AcqRel) {
            // Wake the acceptor: it sees `closing` after this connection and ends.
            let wake = match sh.addr {
                SocketAddr::V4(a) if a.ip().is_unspecified() => {
                    SocketAddr::from(([127, 0, 0, 1], a.port()))
                }
                SocketAddr::V6(a) if a.ip().is_unspecified() => {
                    SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, a.port()))
                }
                a => a,
            };
            let _ = TcpStream::connect_timeout(&wake, Duration::from_millis(200));
            // Listen streams end with their response while their connections still take it.
            sh.mcp.inner.notifier.close();
            for conn in sh.conns.lock().unwrap_or_else(|e| e.into_inner()).values() {
                let _ = conn.shutdown(Shutdown::Both);
            }
        }
        sh.mcp.shutdown();
        let acceptor = self.accept.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = acceptor {
            let _ = t.join();
        }
        *sh.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        sh.stopped_cv.notify_all();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(sh: &Arc<Shared>, listener: &TcpListener) {
    loop {
        let conn = listener.accept();
        if sh.closing.load(Ordering::Acquire) {
            return;
        }
        let stream = match conn {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of descriptors and the like: say so, and give the system a moment.
                log::warn!("MCP over HTTP: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if sh.open.load(Ordering::Acquire) >= sh.options.max_connections {
            let mut s = stream;
            let answer = wire::Response::json(
                503,
                route::error_body(
                    None,
                    -32000,
                    &format!(
                        "too many connections ({}); retry later",
                        sh.options.max_connections
                    ),
                ),
            )
            .with("Retry-After", "1");
            let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
            let _ = std::io::Write::write_all(&mut s, &answer.bytes(false));
            continue;
        }
        let n = sh.next_conn.fetch_add(1, Ordering::Relaxed);
        let Ok(handle) = stream.try_clone() else {
            continue;
        };
        sh.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(n, handle);
        sh.open.fetch_add(1, Ordering::AcqRel);
        let shared = Arc::clone(sh);
        let spawned = std::thread::Builder::new()
            .name("mcp-http-conn".into())
            .stack_size(CONN_STACK)
            .spawn(move || {
                route::serve_connection(&shared, stream);
                shared
                    .conns
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&n);
                shared.open.fetch_sub(1, Ordering::AcqRel);
            });
        if let Err(e) = spawned {
            log::warn!("MCP over HTTP: cannot start a connection thread: {e}");
            sh.conns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&n);
            sh.open.fetch_sub(1, Ordering::AcqRel);
        }
    }
}
