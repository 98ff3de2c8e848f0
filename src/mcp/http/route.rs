//! What an HTTP request means, and one connection's loop.
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
//!     requests share a channel (`exchange::Exchange::channel`), so its
//!     `notifications/cancelled` finds them;
//!   - a notification (or a client's response) is accepted with 202.
//! * **GET** is 405: this server offers no standalone stream (2025-11-25 allows that; 2026-07-28
//!   has no GET at all). Dialog events still reach the agent in every tool result.
//! * **DELETE** with an `Mcp-Session-Id` ends that session (200; unknown: 404) and cancels its
//!   calls in flight.
//!
//! A request answered at once is written by the connection's thread; a tool call that runs on
//! a worker is written by the worker, while the connection's thread watches for the client
//! going away (`conn.rs`). Everything a request needs of the protocol goes through the seam of
//! `exchange`: an [`Exchange`] in, an [`Answer`] out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded};
use serde_json::Value;

use super::out::{
    LIMITS, Out, STREAM_WRITE_STALL, cannot_read, error_body, modern_status, sse_event, sse_head,
    write_answer,
};
use super::{ENDPOINT, Shared, random_hex};
use crate::deadline::Deadline;
use crate::http1::{self, Conn, RequestHead as Head, Response};
use crate::mcp::dispatch::unreadable;
use crate::mcp::exchange::{Answer, Exchange, LegacySession, Sink, Transport};
use crate::mcp::pool::Key;
use crate::mcp::protocol::meta::PROTOCOL_VERSION as META_VERSION;
use crate::mcp::rpc::{self, Id, Incoming};
use crate::mcp::{Inner, LEGACY_VERSIONS, MAX_LINE, MODERN_VERSIONS};
use crate::quote::quoted;
use crate::transport::Socket;

mod checks;
mod responder;
#[path = "sessions.rs"]
mod sessions;
mod stream;

use checks::*;
use responder::*;
pub(super) use sessions::Sessions;
pub(super) use stream::follow_stream;
use stream::*;

/// HeaderMismatch (2026-07-28).
const HEADER_MISMATCH: i64 = -32020;

/// What a request comes to.
pub(super) enum Outcome {
    /// This response, now. `close`: a body of the request may be left unread, so the
    /// connection ends after it (once what the client still sends is read, `conn.rs`).
    Now { response: Response, close: bool },
    /// This answer of the protocol, now (a JSON body or an SSE stream).
    Answered { answer: Answer, modern: bool },
    /// A worker runs the call and writes its answer; `done` says when (disconnected: no answer
    /// was written, the call was cancelled). The client's leaving cancels `key`.
    Later { key: Key, done: Receiver<bool> },
    /// A `subscriptions/listen` stream is open on the connection, on `channel`; the
    /// connection ends with it.
    Stream { channel: u64 },
}

fn now(response: Response) -> Outcome {
    Outcome::Now {
        response,
        close: false,
    }
}

/// A response decided from the head alone: the connection closes when a body is left unread.
fn before_body(head: &Head, response: Response) -> Outcome {
    Outcome::Now {
        response,
        close: head.has_body(),
    }
}

/// The access rules' refusal of a request (module doc of `access`), as the answer it gets:
/// `None` when they let it in. Nothing of a refused request is read further.
pub(super) fn refusal(sh: &Shared, head: &Head) -> Option<Response> {
    let refusal = sh.access.check(head).err()?;
    log::debug!(
        "MCP over HTTP: {} {} refused: {}",
        quoted(&head.method),
        quoted(head.path()),
        refusal.message()
    );
    let mut response = Response::json(
        refusal.status(),
        error_body(None, -32600, refusal.message()),
    );
    if let super::access::Refusal::Unauthorized { wrong } = refusal {
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

pub(super) fn handle(
    sh: &Arc<Shared>,
    head: &Head,
    conn: &mut Conn<Socket>,
    out: &Arc<Out>,
    keep_alive: bool,
) -> Outcome {
    if let Some(response) = refusal(sh, head) {
        return Outcome::Now {
            response,
            close: true,
        };
    }
    if head.path() != ENDPOINT {
        return before_body(
            head,
            Response::json(
                404,
                error_body(
                    None,
                    -32601,
                    &format!("not found: the MCP endpoint is {ENDPOINT}"),
                ),
            ),
        );
    }
    match head.method.as_str() {
        "POST" => post(sh, head, conn, out, keep_alive),
        "DELETE" => before_body(head, delete(sh, head)),
        _ => before_body(
            head,
            Response::json(
                405,
                error_body(
                    None,
                    -32600,
                    "method not allowed: send JSON-RPC messages with POST (this server offers \
                     no standalone event stream; DELETE ends a 2025-11-25 session)",
                ),
            )
            .with("Allow", "POST, DELETE"),
        ),
    }
}

fn delete(sh: &Shared, head: &Head) -> Response {
    match head.text("mcp-session-id") {
        None => Response::json(
            400,
            error_body(None, -32600, "bad request: DELETE needs an Mcp-Session-Id"),
        ),
        Some(id) => match sh.sessions.remove(id) {
            Some(channel) => {
                sh.mcp.inner.pool.cancel_channel(channel);
                Response::empty(200)
            }
            None => Response::json(404, error_body(None, -32600, "no such session")),
        },
    }
}

fn post(
    sh: &Arc<Shared>,
    head: &Head,
    conn: &mut Conn<Socket>,
    out: &Arc<Out>,
    keep_alive: bool,
) -> Outcome {
    let json = head.text("content-type").is_some_and(|t| {
        t.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    });
    if !json {
        return before_body(
            head,
            Response::json(
                415,
                error_body(
                    None,
                    -32600,
                    "unsupported media type: POST one JSON-RPC message with Content-Type: application/json",
                ),
            ),
        );
    }
    if !accepts_ours(head) {
        return before_body(
            head,
            Response::json(
                406,
                error_body(
                    None,
                    -32600,
                    "not acceptable: answers are application/json or text/event-stream",
                ),
            ),
        );
    }
    let deadline = Deadline::after(sh.options.body_timeout);
    let body = head.framing().and_then(|framing| {
        if head.expects_continue() {
            out.send(&Response::empty(100).bytes(true));
        }
        conn.read_body(framing, MAX_LINE, &LIMITS, deadline)
    });
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            log::debug!("MCP over HTTP: {e}");
            return Outcome::Now {
                response: cannot_read(&e),
                close: true,
            };
        }
    };
    let session = head.text("mcp-session-id");
    match rpc::classify(&body) {
        None => now(Response::json(
            400,
            error_body(
                None,
                rpc::code::PARSE_ERROR,
                "parse error: the body is empty",
            ),
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
                            .inner
                            .notification(channel, &method, request_id.as_ref())
                    }
                    None => return now(no_session(None)),
                }
            }
            now(Response::empty(202))
        }
        Some(Incoming::Unreadable { id, method, why }) => {
            let line = unreadable(&id, &method, &why);
            let status = if session.is_some() {
                200
            } else {
                modern_status(&line)
            };
            now(Response::json(status, line))
        }
        Some(Incoming::Request { id, method, params }) => {
            request(sh, head, out, keep_alive, id, &method, &params)
        }
    }
}

fn no_session(id: Option<&Id>) -> Response {
    Response::json(
        404,
        error_body(
            id,
            -32600,
            "session not found (it ended, or the server restarted): send initialize again",
        ),
    )
}

fn request(
    sh: &Arc<Shared>,
    head: &Head,
    out: &Arc<Out>,
    keep_alive: bool,
    id: Id,
    method: &str,
    params: &Value,
) -> Outcome {
    let header_version = head.text("mcp-protocol-version");
    let session = head.text("mcp-session-id");
    if method == "initialize" && session.is_none() && meta_version(params).is_none() {
        // The handshake (with the 2026-07-28 envelope it is a removed method: `protocol`).
        return initialize(sh, id, params);
    }
    let stateless = meta_version(params).is_some()
        || header_version.is_some_and(|v| MODERN_VERSIONS.contains(&v));
    if stateless {
        if let Err(why) = mirrored_headers_match(head, method, params) {
            return now(Response::json(
                400,
                error_body(
                    Some(&id),
                    HEADER_MISMATCH,
                    &format!("header mismatch: {why}"),
                ),
            ));
        }
        if meta_version(params).is_none() {
            // A 2026-07-28 header on a body without the envelope: not a request of any era.
            return now(Response::json(
                400,
                error_body(
                    Some(&id),
                    rpc::code::INVALID_PARAMS,
                    &format!(
                        "invalid params: a {} request carries params._meta[\"{META_VERSION}\"] \
                         and params._meta[\"io.modelcontextprotocol/clientCapabilities\"]",
                        MODERN_VERSIONS[0]
                    ),
                ),
            ));
        }
        let x = Exchange {
            transport: Transport::Http,
            channel: sh.channel(),
            legacy: None,
            stream: None,
        };
        if method == "subscriptions/listen" {
            return listen(sh, out, x, id, params);
        }
        return dispatch(sh, out, keep_alive, x, id, method, params, true);
    }
    if let Some(sid) = session {
        let Some((channel, legacy)) = sh.sessions.get(sid) else {
            return now(no_session(Some(&id)));
        };
        let version = legacy.version().unwrap_or(LEGACY_VERSIONS[0]);
        if let Some(v) = header_version
            && v != version
        {
            return now(Response::json(
                400,
                error_body(
                    Some(&id),
                    -32600,
                    &format!(
                        "bad request: MCP-Protocol-Version {} is not this session's version ({version})",
                        quoted(v)
                    ),
                ),
            ));
        }
        // No stream: this server keeps no standalone stream (GET is 405), and a session's
        // notifications/message would carry every task's events to every session.
        let x = Exchange {
            transport: Transport::Http,
            channel,
            legacy: Some(legacy),
            stream: None,
        };
        return dispatch(sh, out, keep_alive, x, id, method, params, false);
    }
    now(Response::json(
        400,
        error_body(
            Some(&id),
            -32600,
            &format!(
                "bad request: no Mcp-Session-Id: send initialize first (MCP {}), or send \
                 MCP {} requests with params._meta[\"{META_VERSION}\"] and the \
                 MCP-Protocol-Version header",
                LEGACY_VERSIONS[0], MODERN_VERSIONS[0]
            ),
        ),
    ))
}

/// A legacy `initialize`: answered at once; a successful one starts a session.
fn initialize(sh: &Arc<Shared>, id: Id, params: &Value) -> Outcome {
    let legacy = Arc::new(LegacySession::default());
    let x = Exchange {
        transport: Transport::Http,
        channel: sh.channel(),
        legacy: Some(Arc::clone(&legacy)),
        stream: None,
    };
    let answer = sh.mcp.inner.answer(
        &id,
        "initialize",
        params,
        &x,
        &crate::cancel::CancelToken::new(),
    );
    let line = answer.line.unwrap_or_default();
    if legacy.version().is_none() {
        return now(Response::json(200, line));
    }
    match sh.sessions.create(x.channel, legacy) {
        Ok(session) => now(Response::json(200, line).with("Mcp-Session-Id", session)),
        Err(sessions::NoSession::Full { retry_after }) => now(Response::json(
            503,
            error_body(
                Some(&id),
                -32000,
                &format!(
                    "too many sessions in use ({}): a new one can start once one has been idle \
                     for {} minutes (retry later), or end one with DELETE",
                    sessions::MAX_SESSIONS,
                    sessions::IDLE_BEFORE_EVICTION.as_secs() / 60
                ),
            ),
        )
        .with("Retry-After", retry_after.as_secs().max(1).to_string())),
        Err(sessions::NoSession::Random(why)) => now(Response::json(
            500,
            error_body(Some(&id), -32603, &format!("cannot start a session: {why}")),
        )),
    }
}

/// Opens a `subscriptions/listen` stream on this POST's connection, which moves to a listen
/// stream's place (none free: 503) and closes when the stream ends.
fn listen(sh: &Arc<Shared>, out: &Arc<Out>, mut x: Exchange, id: Id, params: &Value) -> Outcome {
    if !sh.start_listening(out.id) {
        let max = sh.options.max_listen_streams;
        return now(Response::json(
            503,
            error_body(
                Some(&id),
                -32000,
                &format!("too many subscriptions/listen streams over HTTP ({max}); retry later"),
            ),
        )
        .with("Retry-After", "1"));
    }
    let sink = Arc::new(StreamSink {
        out: Arc::clone(out),
        state: Mutex::new(StreamState::default()),
    });
    x.stream = Some(Arc::clone(&sink) as Arc<dyn Sink>);
    let answer = sh.mcp.inner.answer(
        &id,
        "subscriptions/listen",
        params,
        &x,
        &crate::cancel::CancelToken::new(),
    );
    if answer.line.is_some() {
        // Refused (a bad filter, too many streams): a plain answer, nothing was streamed.
        sh.stop_listening(out.id);
        return Outcome::Answered {
            answer,
            modern: true,
        };
    }
    Outcome::Stream { channel: x.channel }
}

/// Runs a request through the server: at once, or on a worker that writes the answer.
#[allow(clippy::too_many_arguments)]
fn dispatch(
    sh: &Arc<Shared>,
    out: &Arc<Out>,
    keep_alive: bool,
    x: Exchange,
    id: Id,
    method: &str,
    params: &Value,
    modern: bool,
) -> Outcome {
    let (tx, rx) = bounded(1);
    let responder = Responder {
        out: Arc::clone(out),
        keep_alive,
        modern,
        done: tx,
    };
    let key = (x.channel, id.key());
    let inner: &Arc<Inner> = &sh.mcp.inner;
    let reply = Box::new(move |answer: Answer| responder.answer(answer));
    match Inner::serve_with(inner, id, method, params, &x, reply) {
        Some(answer) => Outcome::Answered { answer, modern },
        None => Outcome::Later { key, done: rx },
    }
}
