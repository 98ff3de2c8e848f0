//! What a connection writes, shared by everyone who writes to it (its thread, the worker that
//! answers its call, the notifier that feeds its listen stream, the acceptor that refuses it):
//! the writing half [`Out`], the caps and bounds of a connection, and how an answer is put
//! into HTTP (a JSON body, an SSE stream, the status a 2026-07-28 answer's error picks).

use std::net::{Shutdown, TcpStream};
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;

use crate::deadline::Deadline;
use crate::http1::{self, HttpError, Limits, Response};
use crate::mcp::MAX_LINE;
use crate::mcp::exchange::Answer;
use crate::mcp::rpc::{self, Id};
use crate::transport::Socket;

/// How long a connection that is closed with a request possibly unread (a refusal) is read,
/// what it sends dropped, before the close: closing a socket with unread bytes resets the
/// connection, and a client still sending its request then sees the reset instead of the
/// answer.
pub(super) const LINGER: Duration = Duration::from_secs(2);

/// The caps on a request: a head of 64 KiB and 64 lines (431 past them), a body of the stdio
/// line cap (413 past it).
pub(super) const LIMITS: Limits = Limits {
    head: 64 * 1024,
    headers: 64,
    body: MAX_LINE,
};

/// How long a write of an answer may find the client reading nothing before the connection
/// is given up.
pub(super) const WRITE_STALL: Duration = Duration::from_secs(10);

/// The same for a frame of an event stream (written under the lock of every stream, so
/// shorter: a client that stops reading loses its stream instead of holding the others).
pub(super) const STREAM_WRITE_STALL: Duration = Duration::from_secs(2);

/// The writing half of a connection, shared by its thread, the worker answering its call and
/// the notifier writing to its event stream; and its number among the server's connections.
pub(super) struct Out {
    /// The connection's number (`Shared::admit`).
    pub(super) id: u64,
    socket: Mutex<Socket>,
    /// To shut the connection down without the write lock (a writer may hold it while the
    /// client reads nothing).
    tcp: TcpStream,
}

impl Out {
    /// The writing half of connection `id`: `socket` to write on, `tcp` to shut it down.
    pub(super) fn new(id: u64, socket: Socket, tcp: TcpStream) -> Out {
        Out {
            id,
            socket: Mutex::new(socket),
            tcp,
        }
    }

    /// Writes `bytes` whole (an answer): false when the client read nothing for
    /// [`WRITE_STALL`], or the connection failed.
    pub(super) fn send(&self, bytes: &[u8]) -> bool {
        self.send_within(bytes, WRITE_STALL, Deadline::NEVER)
    }

    /// Writes `bytes` whole, each write waiting at most `stall`, none past `by`.
    pub(super) fn send_within(&self, bytes: &[u8], stall: Duration, by: Deadline) -> bool {
        let mut socket = self.socket.lock().unwrap_or_else(|e| e.into_inner());
        http1::write_all(&mut *socket, bytes, stall, by).is_ok()
    }

    /// Ends the connection in both directions: its thread, waiting for the client, wakes and
    /// ends (an answer that says `close` is out, a stream ended, a write failed).
    pub(super) fn close(&self) {
        let _ = self.tcp.shutdown(Shutdown::Both);
    }

    /// Shuts the write side only: the client reads what was written, then the end.
    pub(super) fn close_write(&self) {
        let _ = self.tcp.shutdown(Shutdown::Write);
    }
}

/// A JSON-RPC error response's text; `id: None` is `null`.
pub(super) fn error_body(id: Option<&Id>, code: i64, message: &str) -> String {
    rpc::error(id, code, message)
}

/// The answer to a request that could not be read (`http1` says which status).
pub(super) fn cannot_read(e: &HttpError) -> Response {
    let status = e.status().unwrap_or(400);
    let what = match status {
        408 => "request timeout",
        413 => "content too large",
        431 => "request header fields too large",
        _ => "bad request",
    };
    Response::json(status, error_body(None, -32600, &format!("{what}: {e}")))
}

/// The head of a Server-Sent Events answer (chunked, so the connection can be kept).
pub(super) fn sse_head(keep_alive: bool) -> Vec<u8> {
    http1::chunked_head(
        "text/event-stream",
        &[
            ("Cache-Control", "no-cache, no-store".into()),
            ("X-Accel-Buffering", "no".into()),
        ],
        keep_alive,
    )
}

/// One SSE `message` event carrying the JSON text `json`, as one chunk.
pub(super) fn sse_event(json: &str) -> Vec<u8> {
    http1::chunk(format!("event: message\ndata: {json}\n\n").as_bytes())
}

/// Writes a protocol answer: a JSON body when nothing precedes the response, else an SSE
/// stream of the notifications then the response. The status of a 2026-07-28 JSON answer
/// follows its error code (`modern_status`). False when the write failed.
pub(super) fn write_answer(out: &Out, answer: Answer, modern: bool, keep_alive: bool) -> bool {
    let Some(line) = answer.line else {
        // Only an open listen stream has no line, and it never comes here.
        return false;
    };
    if answer.before.is_empty() {
        let status = if modern { modern_status(&line) } else { 200 };
        return out.send(&Response::json(status, line).bytes(keep_alive));
    }
    let mut bytes = sse_head(keep_alive);
    for n in &answer.before {
        bytes.extend(sse_event(n));
    }
    bytes.extend(sse_event(&line));
    bytes.extend_from_slice(http1::LAST_CHUNK);
    out.send(&bytes)
}

/// The HTTP status of a 2026-07-28 answer: its JSON-RPC error code decides.
pub(super) fn modern_status(line: &str) -> u16 {
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
