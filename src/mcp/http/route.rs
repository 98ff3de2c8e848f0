//! What an HTTP request means. Nothing here reads or writes the connection: [`head`] decides
//! from a request's head whether its body is read, [`post`] what a POST's message comes to
//! (a [`Plan`]); the connection's thread (`conn.rs`) carries it out.
//!
//! Only `/mcp` exists (anything else is 404 once the access rules pass). On it:
//!
//! * **POST** carries one JSON-RPC message (`Content-Type: application/json`, else 415). Its era
//!   is read from the message itself:
//!   - a request whose `params._meta` names a protocol version (2026-07-28 and later), or that
//!     sends a 2026-07-28 `MCP-Protocol-Version` header, is served statelessly: its mirrored
//!     headers must match the body (`MCP-Protocol-Version` = the `_meta` version, `Mcp-Method`
//!     = the method, `Mcp-Name` = `params.name` for `tools/call`; else 400 with
//!     `HeaderMismatch`, -32020), an `Mcp-Session-Id` is ignored, and the answer's JSON-RPC
//!     error, if any, picks the status (-32601: 404; the envelope, params, header and version
//!     errors: 400; otherwise 200), as the 2026-07-28 transport says. The answer is one JSON
//!     body, or an SSE stream when notifications precede it (request-scoped logs the request
//!     asked for with `_meta["io.modelcontextprotocol/logLevel"]`). A `subscriptions/listen`
//!     request's answer is an SSE stream that stays open: its acknowledgement, then
//!     `notifications/resources/updated` of the tasks it names, until the client closes the
//!     connection (that ends the stream) or the server shuts down (that ends it with its
//!     response);
//!   - `initialize` without `_meta` starts a 2025-11-25 (or older) session: the answer carries
//!     a fresh `Mcp-Session-Id` (128 random bits), and every later request of that client must
//!     send it (unknown: 404, so the client initializes again; absent: 400). Its
//!     `MCP-Protocol-Version`, when sent, must be the session's version (else 400). A session's
//!     requests share a channel (`Engine::channel`), so its
//!     `notifications/cancelled` finds them;
//!   - a notification (or a client's response) is accepted with 202.
//! * **GET** is 405: this server offers no standalone stream (2025-11-25 allows that; 2026-07-28
//!   has no GET at all). Dialog events still reach the agent in every tool result.
//! * **DELETE** with an `Mcp-Session-Id` ends that session (200; unknown: 404) and cancels its
//!   calls in flight.
//!
//! A request's era is the engine's to decide, once ([`Request::new`]): a request is stateless
//! when it carries the 2026-07-28 envelope, well formed or not. Everything a request needs of
//! the protocol goes through the engine's seam (`mcp::engine`): a [`Request`] and a [`Client`]
//! in, an answer out.

use std::sync::Arc;

use serde_json::Value;

use super::sessions::{self, NoSession};
use super::{ENDPOINT, Shared};
use crate::http1::{RequestHead as Head, Response};
use crate::mcp::engine::{
    Client, Engine, LEGACY_VERSIONS, LegacySession, META_VERSION, MODERN_VERSIONS, Request,
    Transport,
};
use crate::mcp::rpc::{self, Id, Incoming, code};
use crate::quote::quoted;

/// HeaderMismatch (2026-07-28).
const HEADER_MISMATCH: i64 = -32020;

/// What a request comes to.
pub(super) enum Plan {
    /// This response, now. `close`: a body of the request may be left unread, so the
    /// connection ends after it (once what the client still sends is read, `conn.rs`).
    Respond { response: Response, close: bool },
    /// Read the body (after `100 Continue` when the client waits for it), then [`post`].
    ReadBody,
    /// The engine answers the request (`Engine::serve`): now, or from a worker.
    Serve { request: Request, client: Client },
    /// A `subscriptions/listen` request: its stream, if the engine opens one, holds the
    /// connection until it ends.
    Listen { request: Request, client: Client },
}

fn now(response: Response) -> Plan {
    Plan::Respond {
        response,
        close: false,
    }
}

/// A response decided from the head alone: the connection closes when a body is left unread.
fn before_body(head: &Head, response: Response) -> Plan {
    Plan::Respond {
        response,
        close: head.has_body(),
    }
}

/// A JSON-RPC error response with `status` (`id: None` is `null`).
fn error(status: u16, id: Option<&Id>, code: i64, message: &str) -> Response {
    Response::json(status, rpc::error(id, code, message))
}

/// The HTTP status of a 2026-07-28 answer: its JSON-RPC error code decides (`None`: no error).
pub(super) fn status_of(error: Option<i64>) -> u16 {
    match error {
        Some(-32601) => 404,
        Some(-32700 | -32600 | -32602 | -32020 | -32021 | -32022) => 400,
        _ => 200,
    }
}

/// What a request's head comes to: the access rules, the endpoint, the method and the media
/// types decide before anything of its body is read.
pub(super) fn head(sh: &Shared, head: &Head) -> Plan {
    if let Some(response) = sh.access.refusal(head) {
        return Plan::Respond {
            response,
            close: true,
        };
    }
    if head.path() != ENDPOINT {
        let message = format!("not found: the MCP endpoint is {ENDPOINT}");
        return before_body(head, error(404, None, -32601, &message));
    }
    match head.method.as_str() {
        "POST" if !is_json(head) => before_body(
            head,
            error(
                415,
                None,
                code::INVALID_REQUEST,
                "unsupported media type: POST one JSON-RPC message with Content-Type: application/json",
            ),
        ),
        "POST" if !accepts_ours(head) => before_body(
            head,
            error(
                406,
                None,
                code::INVALID_REQUEST,
                "not acceptable: answers are application/json or text/event-stream",
            ),
        ),
        "POST" => Plan::ReadBody,
        "DELETE" => before_body(head, delete(sh, head)),
        _ => before_body(
            head,
            error(
                405,
                None,
                code::INVALID_REQUEST,
                "method not allowed: send JSON-RPC messages with POST (this server offers \
                 no standalone event stream; DELETE ends a 2025-11-25 session)",
            )
            .with("Allow", "POST, DELETE"),
        ),
    }
}

fn delete(sh: &Shared, head: &Head) -> Response {
    match head.text("mcp-session-id") {
        None => error(
            400,
            None,
            code::INVALID_REQUEST,
            "bad request: DELETE needs an Mcp-Session-Id",
        ),
        Some(id) => match sh.sessions.remove(id) {
            Some(channel) => {
                sh.mcp.engine.forget(channel);
                Response::empty(200)
            }
            None => error(404, None, code::INVALID_REQUEST, "no such session"),
        },
    }
}

/// What a POST's message (its `body`) comes to.
pub(super) fn post(sh: &Shared, head: &Head, body: &[u8]) -> Plan {
    let session = head.text("mcp-session-id");
    match rpc::classify(body) {
        None => now(error(
            400,
            None,
            code::PARSE_ERROR,
            "parse error: the body is empty",
        )),
        Some(Incoming::Invalid(answer)) => now(Response::json(400, answer)),
        Some(Incoming::Response) => now(Response::empty(202)),
        Some(Incoming::Notification {
            method, request_id, ..
        }) => {
            if let Some(id) = session {
                match sh.sessions.get(id) {
                    Some((channel, _)) => {
                        sh.mcp
                            .engine
                            .notification(channel, &method, request_id.as_ref())
                    }
                    None => return now(no_session(None)),
                }
            }
            now(Response::empty(202))
        }
        Some(Incoming::Unreadable { id, method, why }) => {
            let answer = Engine::unreadable(&id, &method, &why);
            let status = match session {
                Some(_) => 200,
                None => status_of(answer.error),
            };
            now(Response::json(status, answer.line.unwrap_or_default()))
        }
        Some(Incoming::Request { id, method, params }) => {
            request(sh, head, Request::new(id, method, params))
        }
    }
}

fn no_session(id: Option<&Id>) -> Response {
    error(
        404,
        id,
        code::INVALID_REQUEST,
        "session not found (it ended, or the server restarted): send initialize again",
    )
}

/// A request, by its era (module doc): a stateless one on a channel of its own, a session's
/// on the session's, the handshake starting a session.
fn request(sh: &Shared, head: &Head, request: Request) -> Plan {
    let engine = &sh.mcp.engine;
    let header_version = head.text("mcp-protocol-version");
    let session = head.text("mcp-session-id");
    if request.method == "initialize" && session.is_none() && !request.stateless() {
        // The handshake (with the 2026-07-28 envelope it is a removed method: `protocol`).
        return initialize(sh, request);
    }
    let bad = |code: i64, message: &str| now(error(400, Some(&request.id), code, message));
    if request.stateless() || header_version.is_some_and(|v| MODERN_VERSIONS.contains(&v)) {
        if let Err(why) = mirrored_headers_match(head, &request) {
            return bad(HEADER_MISMATCH, &format!("header mismatch: {why}"));
        }
        if !request.stateless() {
            // A 2026-07-28 header on a body without the envelope: not a request of any era.
            let message = format!(
                "invalid params: a {} request carries params._meta[\"{META_VERSION}\"] and \
                 params._meta[\"io.modelcontextprotocol/clientCapabilities\"]",
                MODERN_VERSIONS[0]
            );
            return bad(code::INVALID_PARAMS, &message);
        }
        let client = http_client(engine.channel(), None);
        if request.method == "subscriptions/listen" {
            return Plan::Listen { request, client };
        }
        return Plan::Serve { request, client };
    }
    let Some(sid) = session else {
        let message = format!(
            "bad request: no Mcp-Session-Id: send initialize first (MCP {}), or send MCP {} \
             requests with params._meta[\"{META_VERSION}\"] and the MCP-Protocol-Version header",
            LEGACY_VERSIONS[0], MODERN_VERSIONS[0]
        );
        return bad(code::INVALID_REQUEST, &message);
    };
    let Some((channel, legacy)) = sh.sessions.get(sid) else {
        return now(no_session(Some(&request.id)));
    };
    let version = legacy.version().unwrap_or(LEGACY_VERSIONS[0]);
    if let Some(v) = header_version
        && v != version
    {
        let message = format!(
            "bad request: MCP-Protocol-Version {} is not this session's version ({version})",
            quoted(v)
        );
        return bad(code::INVALID_REQUEST, &message);
    }
    // No stream: this server keeps no standalone stream (GET is 405), and a session's
    // notifications/message would carry every task's events to every session.
    let client = http_client(channel, Some(legacy));
    Plan::Serve { request, client }
}

/// A client over HTTP on `channel` (of its `session`, if it has one), without a stream (a
/// listen stream's is set by `conn.rs`).
fn http_client(channel: u64, session: Option<Arc<LegacySession>>) -> Client {
    Client {
        transport: Transport::Http,
        channel,
        session,
        stream: None,
    }
}

/// A legacy `initialize`: answered at once; a successful one starts a session.
fn initialize(sh: &Shared, request: Request) -> Plan {
    let engine = &sh.mcp.engine;
    let legacy = Arc::new(LegacySession::default());
    let client = http_client(engine.channel(), Some(Arc::clone(&legacy)));
    let line = engine.answer(&request, &client).line.unwrap_or_default();
    if legacy.version().is_none() {
        return now(Response::json(200, line));
    }
    let id = Some(&request.id);
    match sh.sessions.create(client.channel, legacy) {
        Ok(session) => now(Response::json(200, line).with("Mcp-Session-Id", session)),
        Err(NoSession::Full { retry_after }) => {
            let message = format!(
                "too many sessions in use ({}): a new one can start once one has been idle for \
                 {} minutes (retry later), or end one with DELETE",
                sessions::MAX_SESSIONS,
                sessions::IDLE_BEFORE_EVICTION.as_secs() / 60
            );
            now(error(503, id, -32000, &message)
                .with("Retry-After", retry_after.as_secs().max(1).to_string()))
        }
        Err(NoSession::Random(why)) => {
            let message = format!("cannot start a session: {why}");
            now(error(500, id, -32603, &message))
        }
    }
}

/// Whether a POST says it carries JSON.
fn is_json(head: &Head) -> bool {
    head.text("content-type").is_some_and(|t| {
        t.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    })
}

/// Whether an `Accept` value admits JSON or an event stream (absent: anything goes).
fn accepts_ours(head: &Head) -> bool {
    head.text("accept").is_none_or(|a| {
        a.split(',').any(|t| {
            let t = t
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            matches!(
                t.as_str(),
                "application/json" | "text/event-stream" | "application/*" | "text/*" | "*/*"
            )
        })
    })
}

/// Checks the headers a 2026-07-28 request mirrors from its body (`MCP-Protocol-Version`,
/// `Mcp-Method`, `Mcp-Name`).
fn mirrored_headers_match(head: &Head, request: &Request) -> Result<(), String> {
    for name in ["mcp-protocol-version", "mcp-method", "mcp-name"] {
        if head.count(name) > 1 {
            return Err(format!("{name} is sent more than once"));
        }
    }
    match (request.claimed_version(), head.text("mcp-protocol-version")) {
        (_, None) => return Err("the MCP-Protocol-Version header is missing".into()),
        (Some(body), Some(h)) if body != h => {
            return Err(format!(
                "MCP-Protocol-Version {} does not match params._meta's {}",
                quoted(h),
                quoted(body)
            ));
        }
        _ => {}
    }
    let method = request.method.as_str();
    match head.text("mcp-method") {
        None => return Err("the Mcp-Method header is missing".into()),
        Some(m) if m != method => {
            return Err(format!(
                "Mcp-Method {} does not match the method {}",
                quoted(m),
                quoted(method)
            ));
        }
        Some(_) => {}
    }
    let named = match method {
        "tools/call" | "prompts/get" => request.params.get("name"),
        "resources/read" => request.params.get("uri"),
        _ => None,
    };
    if let Some(body_name) = named.and_then(Value::as_str) {
        match head.text("mcp-name").map(decode_header_value) {
            None => return Err("the Mcp-Name header is missing".into()),
            Some(Some(h)) if h == body_name => {}
            Some(_) => {
                return Err(format!(
                    "Mcp-Name does not match the request's name {}",
                    quoted(body_name)
                ));
            }
        }
    }
    Ok(())
}

/// A header value as 2026-07-28 encodes it: as is, or `=?base64?...?=` (`None`: a broken
/// encoding, which matches nothing).
fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine as _;
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        None => Some(value.to_string()),
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
    }
}
