//! What we send: a request, an answer (whole, or a chunked stream's head and chunks), and the
//! write that gives up when the peer reads nothing for too long.

use std::io;
use std::time::Duration;

use super::Timed;
use crate::deadline::Deadline;

/// Appends `name: value\r\n`; control characters in `value` (none of ours has any: they come
/// from parsed URLs or from this crate) are left out, so that no value can end the line.
fn push_header(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend(
        value
            .bytes()
            .filter(|b| *b == b'\t' || (*b >= 0x20 && *b != 0x7f)),
    );
    out.extend_from_slice(b"\r\n");
}

/// A request we send: `METHOD target HTTP/1.1` and header lines, no body.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    method: &'static str,
    target: String,
    headers: Vec<(&'static str, String)>,
}

impl Request {
    /// `GET target` (path and query).
    pub(crate) fn get(target: impl Into<String>) -> Request {
        Request {
            method: "GET",
            target: target.into(),
            headers: Vec::new(),
        }
    }

    /// The same request with one more header line.
    pub(crate) fn with(mut self, name: &'static str, value: impl Into<String>) -> Request {
        self.headers.push((name, value.into()));
        self
    }

    /// Its bytes.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        let mut out = format!("{} {} HTTP/1.1\r\n", self.method, self.target).into_bytes();
        for (name, value) in &self.headers {
            push_header(&mut out, name, value);
        }
        out.extend_from_slice(b"\r\n");
        out
    }
}

/// The reason phrase of a status we send.
fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// An answer we send: status, header lines and a body (JSON unless empty).
///
/// Its bytes carry `Content-Length` (none for 1xx, 204 and 304, which have no body),
/// `Cache-Control: no-store` (not on 1xx), and `Connection: close` when the connection ends
/// after it. A `101 Switching Protocols` is `Response::empty(101)` with the upgrade's headers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: String,
    /// The body's media type (`application/json` unless [`Response::typed`] said otherwise).
    pub(crate) content_type: &'static str,
}

impl Response {
    /// An answer with a JSON body.
    pub(crate) fn json(status: u16, body: String) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body,
            content_type: "application/json",
        }
    }

    /// An answer whose body is of `content_type` (`text/html; charset=utf-8`, ...).
    pub(crate) fn typed(status: u16, content_type: &'static str, body: String) -> Response {
        Response {
            content_type,
            ..Response::json(status, body)
        }
    }

    /// An answer without a body.
    pub(crate) fn empty(status: u16) -> Response {
        Response::json(status, String::new())
    }

    /// The same answer with one more header line.
    pub(crate) fn with(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    /// The bytes of the whole answer; `keep_alive: false` adds `Connection: close`.
    pub(crate) fn bytes(&self, keep_alive: bool) -> Vec<u8> {
        let interim = (100..200).contains(&self.status);
        let mut out = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status)).into_bytes();
        for (name, value) in &self.headers {
            push_header(&mut out, name, value);
        }
        if !self.body.is_empty() {
            push_header(&mut out, "Content-Type", self.content_type);
        }
        if !interim && self.status != 204 && self.status != 304 {
            push_header(&mut out, "Content-Length", &self.body.len().to_string());
        }
        if !interim {
            push_header(&mut out, "Cache-Control", "no-store");
            if !keep_alive {
                push_header(&mut out, "Connection", "close");
            }
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(self.body.as_bytes());
        out
    }
}

/// The head of a `200` answer whose body is a stream of chunks of `content_type`, with
/// `headers`; `keep_alive: false` adds `Connection: close`.
pub(crate) fn chunked_head(
    content_type: &str,
    headers: &[(&'static str, String)],
    keep_alive: bool,
) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\n".to_vec();
    push_header(&mut out, "Content-Type", content_type);
    for (name, value) in headers {
        push_header(&mut out, name, value);
    }
    push_header(&mut out, "Transfer-Encoding", "chunked");
    if !keep_alive {
        push_header(&mut out, "Connection", "close");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// One chunk carrying `data` (not empty: an empty chunk is the last one, [`LAST_CHUNK`]).
pub(crate) fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

/// The end of a chunked body (no trailer).
pub(crate) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Writes `bytes` whole: each write may wait at most `stall` for the peer to make room, and
/// none waits past `by`. A peer that reads slowly but steadily gets the whole of a large
/// answer; one that reads nothing for `stall` fails the write (`TimedOut`).
pub(crate) fn write_all<S: Timed>(
    stream: &mut S,
    mut bytes: &[u8],
    stall: Duration,
    by: Deadline,
) -> io::Result<()> {
    while !bytes.is_empty() {
        stream.set_deadline(by.earliest(Deadline::after(stall)));
        match stream.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    stream.flush()
}
