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
//! POST with a JSON body, an answer that is JSON or a stream of events), and the crate speaks
//! HTTP/1.1 already (`crate::http1`, about 1,100 lines without its tests, shared with the CDP
//! upgrade and `http://` discovery). So this is that codec and about 2,200 lines of its own
//! (`wc -l` without the tests): `accept.rs` (new connections, up to their first request),
//! `access.rs` (the `Host`, `Origin` and token rules, and the connection places), `route.rs`
//! (what a request means, decided without I/O), `conn.rs` (one connection: its loop, what it
//! writes, how each request's plan is carried out), `sessions.rs` (the legacy sessions), here
//! (options, start, shutdown). Everything it asks of MCP goes through the engine's seam
//! (`mcp::engine`). It also serves the supervisor page (`crate::page`, at every path but
//! `/mcp`): `conn.rs` runs the access rules, then hands the page the request, the registry
//! and the login's cookie.
//!
//! # Threads and limits
//!
//! * One acceptor thread holds every new connection, without a thread of its own, until its
//!   first request head is whole ([`HttpOptions::header_timeout`] from the moment it opened,
//!   else it is closed), at most [`HttpOptions::max_new_connections`] at once (past it one is
//!   closed: the oldest that sent nothing, else the oldest). Then the access rules decide: a refusal (400, 401, 403) is written by the
//!   acceptor, which reads what the client still sends before it closes (so the client reads
//!   the answer rather than a reset); a request they let in gets a thread and one of
//!   [`HttpOptions::max_connections`] places (none free: 503 with `Retry-After`, written the
//!   same way). Clients that send nothing, a head at a trickle, or no token therefore never take
//!   a place from one that does.
//! * A connection is HTTP/1.1 keep-alive: it waits up to the idle timeout for the next request,
//!   whose head then has the header timeout from its first byte and whose body the body timeout
//!   (`http1`: a client that trickles is cut off). An answer that says `Connection: close`
//!   (asked for, or HTTP/1.0) ends the connection as soon as it is written, by whichever thread
//!   wrote it.
//! * A `subscriptions/listen` stream moves its connection from the connection places to
//!   [`HttpOptions::max_listen_streams`] places of its own (none free: 503 with `Retry-After`).
//!   A write to a stream that makes no progress for 2 s ends the stream and closes its
//!   connection at once, so a client that stops reading holds nothing.
//! * Tool calls run on the server's worker pool, shared with stdio's rules: at most
//!   [`MAX_IN_FLIGHT`](crate::mcp::MAX_IN_FLIGHT) in flight (over every client together), a body
//!   is at most [`MAX_LINE`](crate::mcp::MAX_LINE) bytes. The worker writes its answer to the
//!   connection itself; the connection's thread meanwhile waits for the client to send more or
//!   to close, and when the client closes the connection before its answer, the call is
//!   cancelled (2026-07-28: closing the stream *is* the cancellation; 2025-11-25: the answer
//!   could never be delivered, since this server keeps no streams to resume).
//! * Every read and write is on the crate's deadline-bounded `transport::Socket` (`poll(2)`
//!   with the time left), never a socket time-out; a write gives up when the client reads
//!   nothing for 10 s (2 s on a stream).
//! * An idle server makes no wake-ups: the acceptor blocks in `accept`, idle connections in
//!   `poll` until their idle deadline.
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

mod accept;
mod access;
mod conn;
mod route;
mod sessions;

use crate::sync;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::McpServer;
use crate::config::Config;
use crate::error::Error;
use access::{Access, Places};
use sessions::Sessions;

/// Where `mcp --http` listens without an address: loopback, port 8737.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8737";

/// The path of the MCP endpoint.
pub const ENDPOINT: &str = "/mcp";

/// The environment variable the binary reads the bearer token from (never a command-line
/// argument: those show in `ps`).
pub const TOKEN_ENV: &str = "CDP_SUPERVISOR_MCP_TOKEN";

/// How the HTTP server listens, and its limits. Start from `HttpOptions::default()` (or
/// [`HttpOptions::from_config`], the `[mcp]` settings) and the `with_*` setters.
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// `HOST:PORT`, `[V6]:PORT`, `HOST` (port 8737) or `PORT` (on 127.0.0.1); port 0 picks a
    /// free one ([`HttpServer::local_addr`] says which).
    pub addr: String,
    /// How long a keep-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// How long a request's head may take to arrive: a connection's first from the moment it
    /// opens, a later one from its first byte (`mcp.http_head_timeout_s`).
    pub header_timeout: Duration,
    /// How long a request's body may take to arrive, after its head.
    pub body_timeout: Duration,
    /// Connections served at once (past it a request is answered 503 with `Retry-After`).
    pub max_connections: usize,
    /// Connections that have not yet sent a request the access rules let in, at most this many
    /// at once; past it the oldest is closed (`mcp.http_max_new_connections`).
    pub max_new_connections: usize,
    /// `subscriptions/listen` streams open at once; their connections count here, not in
    /// `max_connections` (`mcp.http_max_listen_streams`).
    pub max_listen_streams: usize,
    /// Whether `/mcp` is served (`watch --http` serves the supervisor page only).
    pub mcp_endpoint: bool,
    /// The bearer token every request must carry; never shown by `Debug`.
    token: Option<String>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions::from_config(&Config::default())
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
            .field("max_new_connections", &self.max_new_connections)
            .field("max_listen_streams", &self.max_listen_streams)
            .field("mcp_endpoint", &self.mcp_endpoint)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

impl HttpOptions {
    /// The defaults, with the `[mcp]` settings of `config` (`http_head_timeout_s`,
    /// `http_max_new_connections`, `http_max_listen_streams`).
    pub fn from_config(config: &Config) -> HttpOptions {
        HttpOptions {
            addr: DEFAULT_ADDR.into(),
            idle_timeout: Duration::from_secs(60),
            header_timeout: config.http_head_timeout(),
            body_timeout: Duration::from_secs(30),
            max_connections: 64,
            max_new_connections: config.http_max_new_connections(),
            max_listen_streams: config.http_max_listen_streams(),
            mcp_endpoint: true,
            token: None,
        }
    }

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

    /// Sets [`mcp_endpoint`](HttpOptions::mcp_endpoint).
    pub fn with_mcp_endpoint(mut self, on: bool) -> HttpOptions {
        self.mcp_endpoint = on;
        self
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

    /// Sets [`max_new_connections`](HttpOptions::max_new_connections) (at least 1).
    pub fn with_max_new_connections(mut self, n: usize) -> HttpOptions {
        self.max_new_connections = n.max(1);
        self
    }

    /// Sets [`max_listen_streams`](HttpOptions::max_listen_streams).
    pub fn with_max_listen_streams(mut self, n: usize) -> HttpOptions {
        self.max_listen_streams = n;
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
    access: Access,
    /// The connections that have a thread, and their places: taken by the acceptor, moved and
    /// freed by each connection's thread, all shut at shutdown.
    places: Places,
    sessions: Sessions,
    /// The supervisor page's live updates (`crate::page`).
    hub: crate::page::Hub,
    /// Set when shutdown starts: no new connections or requests.
    closing: AtomicBool,
    /// True once shutdown is done; `wait` waits for it.
    stopped: Mutex<bool>,
    stopped_cv: Condvar,
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
        let access = Access::new(addr, config.allowed_hosts(), options.token.as_deref());
        let places = Places::new(options.max_connections, options.max_listen_streams);
        let mcp = McpServer::new(config);
        let hub = crate::page::Hub::start(mcp.registry())
            .map_err(|e| Error::Io(format!("cannot start the supervisor page's hub: {e}")))?;
        let shared = Arc::new(Shared {
            mcp,
            addr,
            options,
            access,
            places,
            sessions: Sessions::default(),
            hub,
            closing: AtomicBool::new(false),
            stopped: Mutex::new(false),
            stopped_cv: Condvar::new(),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("mcp-http-accept".into())
                .stack_size(256 * 1024)
                .spawn(move || accept::run(&shared, &listener))
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

    /// Connections that hold a place (for tests, through `unversioned::mcp`).
    pub(crate) fn open_places(&self) -> usize {
        self.shared.places.open()
    }

    /// Blocks until [`HttpServer::shutdown`] has finished (from another thread).
    pub fn wait(&self) {
        let mut stopped = sync::lock(&self.shared.stopped);
        while !*stopped {
            stopped = sync::wait(&self.shared.stopped_cv, stopped);
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
        }
        // The page's event streams end (their queues dropped); listen streams end with their
        // response while their connections still take it; then every connection is shut.
        sh.hub.close();
        sh.mcp.engine.shutdown(|| sh.places.close_all());
        let acceptor = sync::lock(&self.accept).take();
        if let Some(t) = acceptor {
            let _ = t.join();
        }
        *sync::lock(&sh.stopped) = true;
        sh.stopped_cv.notify_all();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_default_to_loopback_and_port_8737() {
        assert_eq!(resolve("9000").unwrap(), "127.0.0.1:9000".parse().unwrap());
        assert_eq!(
            resolve("127.0.0.1").unwrap(),
            "127.0.0.1:8737".parse().unwrap()
        );
        assert_eq!(resolve("[::1]").unwrap(), "[::1]:8737".parse().unwrap());
        assert_eq!(resolve("[::1]:7").unwrap(), "[::1]:7".parse().unwrap());
        assert!(resolve(DEFAULT_ADDR).unwrap().ip().is_loopback());
        assert!(resolve("localhost:1").unwrap().ip().is_loopback());
        let e = resolve("no such host name.invalid:1").unwrap_err();
        assert!(e.to_string().contains("mcp --http"), "{e}");
    }
}
