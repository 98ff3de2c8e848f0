//! What an HTTP request means, and one connection's loop.
//!
//! Only `/mcp` exists (anything else is 404 once the access rules pass). On it:
//!
//! * **POST** carries one JSON-RPC message (`Content-Type: application/json`, else 415). Its era
//!   is read from the message itself:
//!   - a request whose `params._meta` names a protocol version (2026-07-28 and later) is
//!     served statelessly: its mirrored headers must match the body (`MCP-Protocol-Version` =
//!     the `_meta` version, `Mcp-Method` = the method, `Mcp-Name` = `params.name` for
//!     `tools/call`; else 400 with `HeaderMismatch`, -32020), an `Mcp-Session-Id` is ignored, and
//!     the answer's JSON-RPC error, if any, picks the status (-32601: 404; the envelope,
//!     params, header and version errors: 400; otherwise 200), as the 2026-07-28 transport says;
//!   - `initialize` without `_meta` starts a 2025-11-25 (or older) session: the answer carries
//!     a fresh `Mcp-Session-Id` (128 random bits), and every later request of that client must
//!     send it (unknown: 404, so the client initializes again; absent: 400). Its
//!     `MCP-Protocol-Version`, when sent, must be the session's version (else 400). A session's
//!     requests share a pool scope, so its `notifications/cancelled` finds them;
//!   - a notification (or a client's response) is accepted with 202.
//! * **GET** is 405: this server offers no standalone stream (2025-11-25 allows that; 2026-07-28
//!   has no GET at all). Dialog events still reach the agent in every tool result.
//! * **DELETE** with an `Mcp-Session-Id` ends that session (200; unknown: 404).
//!
//! A request answered at once is written by the connection's thread; a tool call that runs on
//! a worker is written by the worker, while the connection's thread watches for the client
//! going away (module doc of `http`).

use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded};
use serde::Deserialize;
use serde_json::Value;

use super::wire::{self, Answer, Head, Next, Reader};
use super::{ENDPOINT, Shared, random_hex};
use crate::mcp::dispatch::unreadable;
use crate::mcp::pool::Key;
use crate::mcp::rpc::{self, Id, Incoming};
use crate::mcp::{Inner, MAX_LINE, PROTOCOL_VERSIONS};

/// Protocol versions served statelessly (`_meta` on every request).
const MODERN_VERSIONS: &[&str] = &["2026-07-28"];

/// The `_meta` key of a request's protocol version.
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// HeaderMismatch (2026-07-28).
const HEADER_MISMATCH: i64 = -32020;

/// Legacy sessions kept at once; past it the least recently used one is dropped (its client
/// gets 404 and initializes again, as 2025-11-25 prescribes).
const MAX_SESSIONS: usize = 1024;

/// A JSON-RPC error response's text; `id: None` is `null`.
pub(super) fn error_body(id: Option<&Id>, code: i64, message: &str) -> String {
    rpc::error(id, code, message)
}

/// The connection's writing half, shared by its thread and the worker answering its call.
type Out = Arc<Mutex<TcpStream>>;

fn send(out: &Out, bytes: &[u8]) -> bool {
    let mut s = out.lock().unwrap_or_else(|e| e.into_inner());
    wire::write_all(&mut s, bytes).is_ok()
}

/// One legacy (2025-11-25 and older) session.
#[derive(Debug)]
struct Session {
    /// Its pool scope.
    scope: u64,
    /// The version `initialize` settled on.
    version: String,
    used: Instant,
}

/// The legacy sessions by id.
#[derive(Debug, Default)]
pub(super) struct Sessions {
    map: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    fn create(&self, scope: u64, version: String) -> Result<String, String> {
        let id = random_hex(16)?;
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(
            id.clone(),
            Session {
                scope,
                version,
                used: Instant::now(),
            },
        );
        Ok(id)
    }

    /// The session's scope and version (and it counts as used now).
    fn get(&self, id: &str) -> Option<(u64, String)> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let s = map.get_mut(id)?;
        s.used = Instant::now();
        Some((s.scope, s.version.clone()))
    }

    fn remove(&self, id: &str) -> bool {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
            .is_some()
    }
}

/// What a request comes to.
enum Outcome {
    /// This answer, now. `close`: the connection ends after it (the request's body was not
    /// read, or the client asked).
    Now { answer: Answer, close: bool },
    /// A worker runs the call and writes its answer; `done` says when (disconnected: no answer
    /// was written, the call was cancelled). The client's leaving cancels `key`.
    Later { key: Key, done: Receiver<bool> },
}

fn now(answer: Answer) -> Outcome {
    Outcome::Now {
        answer,
        close: false,
    }
}

/// Serves one connection until the client closes it, it idles out, or the server shuts down.
pub(super) fn serve_connection(sh: &Arc<Shared>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let out: Out = Arc::new(Mutex::new(write_half));
    let mut reader = Reader::new(stream);
    let opts = &sh.options;
    while !sh.closing.load(std::sync::atomic::Ordering::Acquire) {
        let head = match reader.next_head(opts.idle_timeout, opts.header_timeout) {
            Ok(Next::Head(h)) => h,
            Ok(Next::Closed) => return,
            Err(e) => {
                log::debug!("MCP over HTTP: {}", e.why);
                if let Some(status) = e.status {
                    let answer = Answer::json(status, error_body(None, -32600, e.why));
                    send(&out, &answer.bytes(false));
                }
                return;
            }
        };
        let keep_alive = head.keep_alive();
        match handle(sh, &head, &mut reader, &out, keep_alive) {
            Outcome::Now { answer, close } => {
                let keep = keep_alive && !close;
                if !send(&out, &answer.bytes(keep)) || !keep {
                    return;
                }
            }
            Outcome::Later { key, done } => {
                if !wait_for_answer(sh, &mut reader, &key, &done) || !keep_alive {
                    return;
                }
            }
        }
    }
}

/// Waits for a worker's answer while watching the client: true when the answer was written
/// and the connection may go on; false when it must close (the client left, and its call was
/// cancelled; or no answer was written).
fn wait_for_answer(sh: &Shared, reader: &mut Reader, key: &Key, done: &Receiver<bool>) -> bool {
    loop {
        match done.try_recv() {
            Ok(written) => return written,
            Err(TryRecvError::Disconnected) => return false,
            Err(TryRecvError::Empty) => {}
        }
        match reader.watch(sh.options.idle_timeout) {
            // The next request (pipelined) or the client's next bytes: answer this one first.
            Ok(true) => return done.recv().unwrap_or(false),
            Ok(false) => {
                if done.try_recv().is_err() && sh.mcp.inner.pool.cancel(key) {
                    log::debug!("MCP over HTTP: the client left; its call is cancelled");
                }
                return false;
            }
            Err(e) if wire::timed_out(&e) => {}
            Err(_) => {
                sh.mcp.inner.pool.cancel(key);
                return false;
            }
        }
    }
}

/// Whether the request has a body that was not read (then the connection must close).
fn has_body(head: &Head) -> bool {
    head.header("transfer-encoding").is_some()
        || head
            .text("content-length")
            .is_some_and(|l| l.parse::<u64>() != Ok(0))
}

/// An answer decided from the head alone: the connection closes when a body is left unread.
fn before_body(head: &Head, answer: Answer) -> Outcome {
    Outcome::Now {
        answer,
        close: has_body(head),
    }
}

fn handle(
    sh: &Arc<Shared>,
    head: &Head,
    reader: &mut Reader,
    out: &Out,
    keep_alive: bool,
) -> Outcome {
    if let Err(refusal) = sh.access.check(head) {
        log::debug!(
            "MCP over HTTP: {} {} refused: {}",
            head.method,
            head.path,
            refusal.message()
        );
        let mut answer = Answer::json(
            refusal.status(),
            error_body(None, -32600, refusal.message()),
        );
        if matches!(refusal, super::access::Refusal::Unauthorized { wrong } if !wrong) {
            answer = answer.with("WWW-Authenticate", "Bearer realm=\"cdp-supervisor\"");
        } else if matches!(refusal, super::access::Refusal::Unauthorized { .. }) {
            answer = answer.with(
                "WWW-Authenticate",
                "Bearer realm=\"cdp-supervisor\", error=\"invalid_token\"",
            );
        }
        // Nothing of a refused request is read further.
        return Outcome::Now {
            answer,
            close: true,
        };
    }
    if head.path != ENDPOINT {
        return before_body(
            head,
            Answer::json(
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
        "POST" => post(sh, head, reader, out, keep_alive),
        "DELETE" => before_body(head, delete(sh, head)),
        _ => before_body(
            head,
            Answer::json(
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

fn delete(sh: &Shared, head: &Head) -> Answer {
    match head.text("mcp-session-id") {
        None => Answer::json(
            400,
            error_body(None, -32600, "bad request: DELETE needs an Mcp-Session-Id"),
        ),
        Some(id) if sh.sessions.remove(id) => Answer::empty(200),
        Some(_) => Answer::json(404, error_body(None, -32600, "no such session")),
    }
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

fn post(
    sh: &Arc<Shared>,
    head: &Head,
    reader: &mut Reader,
    out: &Out,
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
            Answer::json(
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
            Answer::json(
                406,
                error_body(
                    None,
                    -32600,
                    "not acceptable: answers are application/json or text/event-stream",
                ),
            ),
        );
    }
    if head
        .text("expect")
        .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
    {
        send(out, b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let body = match reader.body(head, MAX_LINE, sh.options.body_timeout) {
        Ok(b) => b,
        Err(e) => {
            log::debug!("MCP over HTTP: {}", e.why);
            let answer = Answer::json(e.status.unwrap_or(400), error_body(None, -32600, e.why));
            return Outcome::Now {
                answer,
                close: true,
            };
        }
    };
    let session = head.text("mcp-session-id");
    match rpc::classify(&body) {
        None => now(Answer::json(
            400,
            error_body(
                None,
                rpc::code::PARSE_ERROR,
                "parse error: the body is empty",
            ),
        )),
        Some(Incoming::Invalid(answer)) => now(Answer::json(400, answer)),
        Some(Incoming::Response) => now(Answer::empty(202)),
        Some(Incoming::Notification {
            method, request_id, ..
        }) => {
            if let Some(id) = session {
                match sh.sessions.get(id) {
                    Some((scope, _)) => {
                        sh.mcp
                            .inner
                            .notification(scope, &method, request_id.as_ref())
                    }
                    None => return now(no_session(None)),
                }
            }
            now(Answer::empty(202))
        }
        Some(Incoming::Unreadable { id, method, why }) => {
            let line = unreadable(&id, &method, &why);
            let status = if session.is_some() {
                200
            } else {
                modern_status(&line)
            };
            now(Answer::json(status, line))
        }
        Some(Incoming::Request { id, method, params }) => {
            request(sh, head, out, keep_alive, id, &method, &params)
        }
    }
}

fn no_session(id: Option<&Id>) -> Answer {
    Answer::json(
        404,
        error_body(
            id,
            -32600,
            "session not found (it ended, or the server restarted): send initialize again",
        ),
    )
}

/// The protocol version a request's `_meta` names (`Some(None)`: `_meta` has the key but it is
/// no string).
fn meta_version(params: &Value) -> Option<Option<&str>> {
    params.get("_meta")?.get(META_VERSION).map(|v| v.as_str())
}

fn request(
    sh: &Arc<Shared>,
    head: &Head,
    out: &Out,
    keep_alive: bool,
    id: Id,
    method: &str,
    params: &Value,
) -> Outcome {
    let header_version = head.text("mcp-protocol-version");
    let stateless = meta_version(params).is_some()
        || header_version.is_some_and(|v| MODERN_VERSIONS.contains(&v));
    if stateless {
        if let Err(why) = mirrored_headers_match(head, method, params) {
            return now(Answer::json(
                400,
                error_body(
                    Some(&id),
                    HEADER_MISMATCH,
                    &format!("header mismatch: {why}"),
                ),
            ));
        }
        let scope = sh.scope();
        return dispatch(sh, out, keep_alive, scope, id, method, params, true);
    }
    if let Some(sid) = head.text("mcp-session-id") {
        let Some((scope, version)) = sh.sessions.get(sid) else {
            return now(no_session(Some(&id)));
        };
        if let Some(v) = header_version
            && v != version
        {
            return now(Answer::json(
                400,
                error_body(
                    Some(&id),
                    -32600,
                    &format!(
                        "bad request: MCP-Protocol-Version {v:?} is not this session's version ({version})"
                    ),
                ),
            ));
        }
        return dispatch(sh, out, keep_alive, scope, id, method, params, false);
    }
    if method == "initialize" {
        return initialize(sh, id, params);
    }
    now(Answer::json(
        400,
        error_body(
            Some(&id),
            -32600,
            &format!(
                "bad request: no Mcp-Session-Id: send initialize first (MCP {}), or send \
                 MCP {} requests with params._meta[\"{META_VERSION}\"] and the \
                 MCP-Protocol-Version header",
                PROTOCOL_VERSIONS[0], MODERN_VERSIONS[0]
            ),
        ),
    ))
}

/// A legacy `initialize`: answered at once; a successful one starts a session.
fn initialize(sh: &Arc<Shared>, id: Id, params: &Value) -> Outcome {
    let scope = sh.scope();
    let line = sh.mcp.inner.answer(
        &id,
        "initialize",
        params,
        &crate::cancel::CancelToken::new(),
    );
    let version = serde_json::from_str::<Value>(&line).ok().and_then(|v| {
        v.pointer("/result/protocolVersion")
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let Some(version) = version else {
        return now(Answer::json(200, line));
    };
    match sh.sessions.create(scope, version) {
        Ok(session) => now(Answer::json(200, line).with("Mcp-Session-Id", session)),
        Err(why) => now(Answer::json(
            500,
            error_body(Some(&id), -32603, &format!("cannot start a session: {why}")),
        )),
    }
}

/// Checks the headers a 2026-07-28 request mirrors from its body.
fn mirrored_headers_match(head: &Head, method: &str, params: &Value) -> Result<(), String> {
    for name in ["mcp-protocol-version", "mcp-method", "mcp-name"] {
        if head.count(name) > 1 {
            return Err(format!("{name} is sent more than once"));
        }
    }
    let header_version = head.text("mcp-protocol-version");
    match (meta_version(params), header_version) {
        (_, None) => return Err("the MCP-Protocol-Version header is missing".into()),
        (Some(Some(body)), Some(h)) if body != h => {
            return Err(format!(
                "MCP-Protocol-Version {h:?} does not match params._meta's {body:?}"
            ));
        }
        _ => {}
    }
    match head.text("mcp-method") {
        None => return Err("the Mcp-Method header is missing".into()),
        Some(m) if m != method => {
            return Err(format!(
                "Mcp-Method {m:?} does not match the method {method:?}"
            ));
        }
        Some(_) => {}
    }
    let named = match method {
        "tools/call" | "prompts/get" => params.get("name"),
        "resources/read" => params.get("uri"),
        _ => None,
    };
    if let Some(body_name) = named.and_then(Value::as_str) {
        match head.text("mcp-name").map(decode_header_value) {
            None => return Err("the Mcp-Name header is missing".into()),
            Some(Some(h)) if h == body_name => {}
            Some(_) => {
                return Err(format!(
                    "Mcp-Name does not match the request's name {body_name:?}"
                ));
            }
        }
    }
    Ok(())
}

/// A header value as 2026-07-28 encodes it: as is, or `=?base64?...?=` (`None`: a broken
/// encoding, which matches nothing).
fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine;
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

/// The HTTP status of a 2026-07-28 answer: its JSON-RPC error code decides.
fn modern_status(line: &str) -> u16 {
    #[derive(Deserialize)]
    struct Reply {
        error: Option<Code>,
    }
    #[derive(Deserialize)]
    struct Code {
        code: i64,
    }
    match serde_json::from_str::<Reply>(line) {
        Ok(Reply {
            error: Some(Code { code }),
        }) => match code {
            -32601 => 404,
            -32700 | -32600 | -32602 | -32020 | -32021 | -32022 => 400,
            _ => 200,
        },
        _ => 200,
    }
}

/// Runs a request through the server: at once, or on a worker that writes the answer.
#[allow(clippy::too_many_arguments)]
fn dispatch(
    sh: &Arc<Shared>,
    out: &Out,
    keep_alive: bool,
    scope: u64,
    id: Id,
    method: &str,
    params: &Value,
    stateless: bool,
) -> Outcome {
    let (tx, rx) = bounded(1);
    let responder = Responder {
        out: Arc::clone(out),
        keep_alive,
        stateless,
        done: tx,
    };
    let key = (scope, id.key());
    let inner: &Arc<Inner> = &sh.mcp.inner;
    let reply = Box::new(move |line: String| responder.answer(line));
    match Inner::serve_with(inner, scope, id, method, params, reply) {
        Some(line) => {
            let status = if stateless { modern_status(&line) } else { 200 };
            now(Answer::json(status, line))
        }
        None => Outcome::Later { key, done: rx },
    }
}

/// Writes a worker's answer on the request's connection.
struct Responder {
    out: Out,
    keep_alive: bool,
    stateless: bool,
    /// Sent `true` once written (`false`: the write failed); dropped unsent when the call was
    /// cancelled.
    done: Sender<bool>,
}

impl Responder {
    fn answer(self, line: String) {
        let status = if self.stateless {
            modern_status(&line)
        } else {
            200
        };
        let written = send(
            &self.out,
            &Answer::json(status, line).bytes(self.keep_alive),
        );
        let _ = self.done.send(written);
    }
}
