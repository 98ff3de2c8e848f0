//! Who may talk to the HTTP server (SPEC §15): the `Host` and `Origin` rules against DNS
//! rebinding, the bearer token, and the random ids (task ids, session ids) nobody can guess;
//! and how many may (the connection places, [`Places`]).
//!
//! * **Host.** A web page the user visits can make the browser send requests to
//!   `127.0.0.1:PORT` under a name the attacker controls (DNS rebinding). The browser then sends
//!   that name in `Host`, so a request is served only when `Host` names this server: `127.0.0.1`,
//!   `localhost` or `[::1]` with the server's port, the bound address itself, or an entry of
//!   `mcp.allowed_hosts` (`name` matches that name on any port, `name:port` exactly). Names are
//!   compared without regard to case. Anything else is 403; a value that is no `host[:port]`
//!   at all (a port that is not plain digits, `+8737`, or has a leading zero, `08737`, which a
//!   proxy in front could read otherwise) is 400, as RFC 9112 §3.2 asks. A second `Host` or
//!   `Origin` line is refused (400) before this, by `http1`.
//! * **Origin.** Present on every cross-site request a browser makes; when a request has one,
//!   its `host[:port]` must pass the same rule (and its scheme be `http` or `https`), else 403.
//!   `Origin: null` (sandboxed frames, `file:` pages) is refused too.
//! * **Token.** With a token (`CDP_SUPERVISOR_MCP_TOKEN`), every request needs
//!   `Authorization: Bearer <token>`, else 401 with `WWW-Authenticate: Bearer`; the supervisor
//!   page's paths (not `/mcp`) also take its cookie (the token's SHA-256), and `GET /` the
//!   one-time `?token=` login that sets it. The comparison
//!   is of SHA-256 digests in constant time, so neither the token's bytes nor its length show
//!   in how long a refusal takes. The token is never logged and never echoed.

use crate::sync;
use std::borrow::Cow;
use std::collections::HashMap;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream};
use std::sync::{Mutex, MutexGuard};

use ring::digest::{SHA256, digest};

use crate::http1::{RequestHead as Head, Response};
use crate::mcp::rpc;
use crate::quote::quoted;

/// Why a request is refused before anything reads its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refusal {
    /// 400: no `Host` header (HTTP/1.1 requires one).
    NoHost,
    /// 400: a `Host` value that is no `host[:port]`.
    BadHost,
    /// 403: `Host` names another server.
    ForeignHost,
    /// 403: `Origin` names another site.
    ForeignOrigin,
    /// 401: no bearer token, or another one.
    Unauthorized {
        /// A token was sent, but not this server's.
        wrong: bool,
    },
}

impl Refusal {
    /// The HTTP status.
    pub(super) fn status(&self) -> u16 {
        match self {
            Refusal::NoHost | Refusal::BadHost => 400,
            Refusal::ForeignHost | Refusal::ForeignOrigin => 403,
            Refusal::Unauthorized { .. } => 401,
        }
    }

    /// What the client is told (never the token, never what it sent).
    pub(super) fn message(&self) -> &'static str {
        match self {
            Refusal::NoHost => "bad request: a Host header is required",
            Refusal::BadHost => {
                "bad request: the Host header is not a host name with an optional port (plain \
                 digits, no leading zero)"
            }
            Refusal::ForeignHost => {
                "forbidden: the Host header does not name this server (127.0.0.1, localhost or \
                 [::1] with its port, or an entry of mcp.allowed_hosts); see the README's MCP over \
                 HTTP section"
            }
            Refusal::ForeignOrigin => {
                "forbidden: the Origin header names another site (allowed: this server's own \
                 host names, see mcp.allowed_hosts)"
            }
            Refusal::Unauthorized { wrong: false } => {
                "unauthorized: this server needs Authorization: Bearer <token> (the value of \
                 CDP_SUPERVISOR_MCP_TOKEN where it runs)"
            }
            Refusal::Unauthorized { wrong: true } => {
                "unauthorized: the bearer token is not this server's"
            }
        }
    }
}

/// The rules of one server (module doc).
pub(super) struct Access {
    /// The server's port (in `Host` values without one, port 80 is meant).
    port: u16,
    /// The bound IP, when it is a specific address (not `0.0.0.0`/`::`): its own name is fine.
    bound: Option<IpAddr>,
    /// `mcp.allowed_hosts`, lowercase.
    allowed: Vec<String>,
    /// SHA-256 of the token, when there is one.
    token: Option<[u8; 32]>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("port", &self.port)
            .field("bound", &self.bound)
            .field("allowed", &self.allowed)
            .field("token", &self.token.map(|_| "***"))
            .finish()
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, bytes).as_ref());
    out
}

/// Whether two digests are equal, looking at every byte whatever they hold.
fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

impl Access {
    pub(super) fn new(addr: SocketAddr, allowed: &[String], token: Option<&str>) -> Access {
        Access {
            port: addr.port(),
            bound: Some(addr.ip()).filter(|ip| !ip.is_unspecified()),
            allowed: allowed.iter().map(|h| h.to_ascii_lowercase()).collect(),
            token: token.map(|t| sha256(t.as_bytes())),
        }
    }

    /// The `Set-Cookie` value that answers the supervisor page's one-time login (`/?token=`,
    /// which [`Access::check`] let in): the page's [`COOKIE`], the token's SHA-256 in hex.
    /// `None` for any other request, or without a token.
    pub(super) fn login_cookie(&self, head: &Head) -> Option<String> {
        login_token(&head.target)?;
        let value: String = self.token?.iter().map(|b| format!("{b:02x}")).collect();
        Some(format!(
            "{COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/"
        ))
    }

    /// The answer to a request the rules refuse (module doc); `None` when they let it in.
    /// Nothing of a refused request is read further.
    pub(super) fn refusal(&self, head: &Head) -> Option<Response> {
        let refusal = self.check(head).err()?;
        log::debug!(
            "MCP over HTTP: {} {} refused: {}",
            quoted(&head.method),
            quoted(head.path()),
            refusal.message()
        );
        let mut response = if head.path() == super::ENDPOINT {
            let body = rpc::error(None, rpc::code::INVALID_REQUEST, refusal.message());
            Response::json(refusal.status(), body)
        } else {
            // The supervisor page's: for a person, in a browser.
            let body = match refusal {
                Refusal::Unauthorized { .. } => PAGE_UNAUTHORIZED.to_string(),
                _ => refusal.message().to_string(),
            };
            Response::typed(refusal.status(), "text/plain; charset=utf-8", body)
        };
        if let Refusal::Unauthorized { wrong } = refusal {
            response = response.with(
                "WWW-Authenticate",
                if wrong {
                    "Bearer realm=\"cdp-supervisor\", error=\"invalid_token\""
                } else {
                    "Bearer realm=\"cdp-supervisor\""
                },
            );
        }
        Some(response)
    }

    /// `Ok` when the request's head passes every rule (module doc).
    pub(super) fn check(&self, head: &Head) -> Result<(), Refusal> {
        let host = head.header("host").ok_or(Refusal::NoHost)?;
        let host = std::str::from_utf8(host).map_err(|_| Refusal::BadHost)?;
        let host = host.trim().to_ascii_lowercase();
        let (name, port) = split_host(&host).ok_or(Refusal::BadHost)?;
        if !self.names_this_server(name, port) {
            return Err(Refusal::ForeignHost);
        }
        if let Some(origin) = head.header("origin") {
            let ok = std::str::from_utf8(origin).is_ok_and(|o| self.origin_ok(o.trim()));
            if !ok {
                return Err(Refusal::ForeignOrigin);
            }
        }
        if let Some(want) = &self.token {
            let sent = match sent_token(head) {
                None => return Err(Refusal::Unauthorized { wrong: false }),
                Some(Sent::Token(t)) => sha256(&t),
                Some(Sent::Digest(d)) => d,
            };
            if !same_digest(want, &sent) {
                return Err(Refusal::Unauthorized { wrong: true });
            }
        }
        Ok(())
    }

    /// Whether `value` (`name`, `name:port`, `[v6]`, `[v6]:port`) names this server.
    fn host_ok(&self, value: &str) -> bool {
        let value = value.to_ascii_lowercase();
        split_host(&value).is_some_and(|(name, port)| self.names_this_server(name, port))
    }

    /// Whether `name` (lowercase) with `port` (`None`: 80) names this server.
    fn names_this_server(&self, name: &str, port: Option<u16>) -> bool {
        let port_is_ours = port.unwrap_or(80) == self.port;
        let loopback = matches!(name, "127.0.0.1" | "localhost" | "[::1]");
        let bound = self.bound.is_some_and(|ip| match ip {
            IpAddr::V4(v4) => name == v4.to_string(),
            IpAddr::V6(v6) => name == format!("[{v6}]"),
        });
        if (loopback || bound) && port_is_ours {
            return true;
        }
        self.allowed.iter().any(|entry| match split_host(entry) {
            Some((n, None)) => n == name,
            Some((n, Some(p))) => n == name && Some(p) == port,
            None => false,
        })
    }

    /// Whether an `Origin` value (`scheme://host[:port]`) is this server's own.
    fn origin_ok(&self, origin: &str) -> bool {
        let lower = origin.to_ascii_lowercase();
        let (rest, default_port) = if let Some(r) = lower.strip_prefix("http://") {
            (r, 80)
        } else if let Some(r) = lower.strip_prefix("https://") {
            (r, 443)
        } else {
            return false;
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '@', '?', '#']) {
            return false;
        }
        match split_host(rest) {
            // `https://localhost` means port 443: spell it out for the Host rule.
            Some((name, None)) => self.host_ok(&format!("{name}:{default_port}")),
            Some(_) => self.host_ok(rest),
            None => false,
        }
    }
}

/// `name[:port]` or `[v6][:port]` into the name (brackets kept) and the port; `None` when the
/// port is not plain digits without a leading zero (`+80`, `080`, ` 80`), or past 65535.
fn split_host(value: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = if value.starts_with('[') {
        let end = value.find(']')? + 1;
        let (name, tail) = value.split_at(end);
        match tail {
            "" => (name, None),
            t => (name, Some(t.strip_prefix(':')?)),
        }
    } else {
        match value.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (value, None),
        }
    };
    if name.is_empty() {
        return None;
    }
    match port {
        None => Some((name, None)),
        Some(p) if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) => None,
        Some(p) if p.len() > 1 && p.starts_with('0') => None,
        Some(p) => p.parse::<u16>().ok().map(|p| (name, Some(p))),
    }
}

/// The cookie that carries the token for the supervisor page (set by `/?token=`).
const COOKIE: &str = "cdp_supervisor_token";

/// What a person is told when the supervisor page needs the token.
const PAGE_UNAUTHORIZED: &str = "unauthorized: this supervisor page needs its token. Open \
    /?token=TOKEN once (TOKEN: the value of CDP_SUPERVISOR_MCP_TOKEN where the server runs); \
    the page then keeps it in a cookie and takes it out of the address bar.";

/// What a request carries in place of the token.
enum Sent<'a> {
    /// The token itself.
    Token(Cow<'a, [u8]>),
    /// The [`COOKIE`]: the token's SHA-256 (so the cookie jar never holds the token, and any
    /// printable token makes a valid cookie value).
    Digest([u8; 32]),
}

/// The token a request carries: `Authorization: Bearer` on any path; on the supervisor page's
/// paths (anything but `/mcp`) also the [`COOKIE`]; and on `GET /` the `token` query
/// parameter (the one-time login, which the page answers with the cookie and a redirect).
/// `/mcp` takes the header only, so a cookie never authorizes an MCP call.
fn sent_token(head: &Head) -> Option<Sent<'_>> {
    if let Some(t) = head.header("authorization").and_then(bearer) {
        return Some(Sent::Token(Cow::Borrowed(t)));
    }
    if head.path() == super::ENDPOINT {
        return None;
    }
    if let Some(c) = head.text("cookie").and_then(|c| cookie(c, COOKIE)) {
        // A cookie that is no digest is a wrong token (all zeros never matches a digest).
        return Some(Sent::Digest(unhex(c).unwrap_or([0; 32])));
    }
    if head.method == "GET" && head.path() == "/" {
        return login_token(&head.target).map(|t| Sent::Token(Cow::Owned(t)));
    }
    None
}

/// 64 hex digits into 32 bytes.
fn unhex(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in b.chunks(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

/// The value of cookie `name` in a `Cookie` header (`a=1; b=2`), not empty.
fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header
        .split(';')
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim_matches('"'))
        .filter(|v| !v.is_empty())
}

/// The `token` query parameter of a request target (percent-decoded), not empty.
fn login_token(target: &str) -> Option<Vec<u8>> {
    let query = target.split_once('?')?.1;
    let query = query.split('#').next().unwrap_or("");
    let value = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "token")?
        .1;
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    Some(out).filter(|t| !t.is_empty())
}

/// The token of an `Authorization: Bearer <token>` value (the scheme in any case).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let value = value.trim_ascii();
    if value.len() < 7 || !value[..7].eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    Some(value[7..].trim_ascii()).filter(|t| !t.is_empty())
}

/// Why a token cannot be used (it must travel in a header): `None` when it can.
pub(crate) fn token_problem(token: &str) -> Option<&'static str> {
    if token.is_empty() {
        Some("it is empty")
    } else if !token.bytes().all(|b| b.is_ascii_graphic()) {
        Some("it must be printable ASCII without spaces (it travels in an HTTP header)")
    } else {
        None
    }
}

/// What a connection with a thread is doing, which says whose places it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Serving requests: one of `max_serving`.
    Serving,
    /// Carrying a `subscriptions/listen` stream: one of `max_listening`.
    Listening,
}

/// The places of the connections that have a thread (module doc of `http`, "Threads and
/// limits"): taken by the acceptor (`admit`), moved by a connection's thread (a listen stream,
/// its refusal), freed when that thread ends.
#[derive(Debug)]
pub(super) struct Places {
    max_serving: usize,
    max_listening: usize,
    conns: Mutex<Conns>,
}

/// The connections that have a thread.
#[derive(Debug, Default)]
struct Conns {
    /// A handle to shut each down (shutdown), and its kind.
    open: HashMap<u64, (TcpStream, Kind)>,
    serving: usize,
    listening: usize,
    next: u64,
}

impl Places {
    /// `max_serving` connections that serve requests, `max_listening` that carry a stream.
    pub(super) fn new(max_serving: usize, max_listening: usize) -> Places {
        Places {
            max_serving,
            max_listening,
            conns: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Conns> {
        sync::lock(&self.conns)
    }

    /// A place for a connection that serves requests: its number, `None` when all are taken.
    pub(super) fn admit(&self, tcp: &TcpStream) -> Option<u64> {
        let handle = tcp.try_clone().ok()?;
        let mut c = self.lock();
        if c.serving >= self.max_serving {
            return None;
        }
        c.serving += 1;
        c.next += 1;
        let n = c.next;
        c.open.insert(n, (handle, Kind::Serving));
        Some(n)
    }

    /// Moves connection `n` to a listen stream's place; false when all are taken.
    pub(super) fn start_listening(&self, n: u64) -> bool {
        let mut c = self.lock();
        if c.listening >= self.max_listening {
            return false;
        }
        let Some(entry) = c.open.get_mut(&n) else {
            return false;
        };
        if entry.1 == Kind::Serving {
            entry.1 = Kind::Listening;
            c.serving -= 1;
            c.listening += 1;
        }
        true
    }

    /// Moves connection `n` back to serving requests (its listen request was refused).
    pub(super) fn stop_listening(&self, n: u64) {
        let mut c = self.lock();
        if let Some(entry) = c.open.get_mut(&n)
            && entry.1 == Kind::Listening
        {
            entry.1 = Kind::Serving;
            c.listening -= 1;
            c.serving += 1;
        }
    }

    /// Connection `n`'s thread ended: its place is free.
    pub(super) fn release(&self, n: u64) {
        let mut c = self.lock();
        match c.open.remove(&n).map(|(_, kind)| kind) {
            Some(Kind::Serving) => c.serving -= 1,
            Some(Kind::Listening) => c.listening -= 1,
            None => {}
        }
    }

    /// Shuts every connection down (shutdown): their threads wake and end.
    pub(super) fn close_all(&self) {
        for (conn, _) in self.lock().open.values() {
            let _ = conn.shutdown(Shutdown::Both);
        }
    }

    /// Connections that have a thread (for tests, through `unversioned::mcp`).
    pub(super) fn open(&self) -> usize {
        self.lock().open.len()
    }
}

#[cfg(test)]
mod tests;
