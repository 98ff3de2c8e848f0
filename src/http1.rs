//! HTTP/1.1 (RFC 9112), once for the whole crate: heads parsed by `httparse` (the parser under
//! hyper; this module is the only one that names it), bodies framed by `Content-Length`,
//! chunked or until the peer closes, every read and write under a caller's [`Deadline`], every
//! part under a cap.
//!
//! Its users:
//!
//! * the WebSocket upgrade (`transport/handshake.rs`): a [`Request`], the answer's head
//!   ([`Conn::read_response`]), then the stream and what was read past the head handed to
//!   tungstenite ([`Conn::into_parts`]);
//! * `http://` discovery (`http_get`): a [`Request`], an answer's head and its body;
//! * the MCP server (`mcp/http`): request heads on keep-alive connections
//!   ([`Conn::read_request`], or [`parse_request`] on bytes its acceptor gathered), bodies,
//!   answers ([`Response`]) and chunked event streams ([`chunk`]);
//! * and any server to come (a `GET` answered with JSON, or upgraded: a [`Response`] with status
//!   101 written, then [`Conn::into_parts`]).
//!
//! # Layout
//!
//! * `head.rs`: a head's bytes into an owned [`RequestHead`] or [`ResponseHead`], and what a
//!   request head may not do (say one thing twice: two `Host` lines, two `Content-Length`s, ...).
//! * `framing.rs`: how a body is delimited ([`Framing`](framing::Framing), RFC 9112 §6.3, for a request and for an
//!   answer) and the one chunk-size parser.
//! * `conn.rs`: [`Conn`], a stream and the bytes read past the last message: heads, bodies
//!   (the one chunked decoder), waiting for a peer, a lingering close.
//! * `write.rs`: what we send: [`Request`], [`Response`], chunks, and [`write_all`] with a
//!   bound on how long the peer may read nothing.
//!
//! # Strict where two readers could disagree
//!
//! A request that a proxy in front of a server could read one way and the server another is
//! refused (400), as RFC 9112 asks and hyper and h11 do: two `Host`, `Origin`, `Authorization`,
//! `Content-Type`, `Content-Length` or `Transfer-Encoding` lines; `Transfer-Encoding` with
//! `Content-Length`, or other than exactly `chunked`, or not text; a `Content-Length` that is not
//! digits (`+5`); a chunk size that is not hex digits (`+5`, `" 5"`, `5 `); a chunk or a
//! chunk-size line not ended by CRLF; obs-fold (httparse refuses it). Heads may end their lines
//! with a bare LF (RFC 9112 §2.2 lets a recipient accept it; httparse does, as hyper does).
//! Answers to our own requests are read as RFC 9112 §6.3 says (the last transfer coding
//! decides; identical repeated `Content-Length` values are one).
//!
//! # Deadlines
//!
//! A stream bounds every read and write itself ([`Timed`]: the crate's `transport::Socket` waits
//! with `poll(2)` until the deadline it is given, then fails with `TimedOut`), so a peer that
//! trickles one byte at a time ends at the deadline, not after one read per byte. Socket
//! time-outs (`SO_RCVTIMEO`) are not used: they bound one syscall, not an operation.

use std::fmt;
use std::io::{self, Read, Write};

use crate::deadline::Deadline;

mod conn;
mod framing;
mod head;
#[cfg(test)]
mod script;
#[cfg(test)]
mod tests;
mod write;

pub(crate) use conn::{Conn, may_end_head};
pub(crate) use head::{RequestHead, ResponseHead, parse_request, status_line};
#[cfg(test)]
pub(crate) use script::Script;
pub(crate) use write::{LAST_CHUNK, Request, Response, chunk, chunked_head, write_all};

/// A byte stream whose reads and writes wait at most until the deadline last given to
/// [`Timed::set_deadline`], then fail with [`io::ErrorKind::TimedOut`].
pub(crate) trait Timed: Read + Write {
    /// Bounds the reads and writes that follow.
    fn set_deadline(&mut self, deadline: Deadline);
}

/// The caps on one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The longest head (request or status line and header lines), in bytes.
    pub(crate) head: usize,
    /// The most header lines in a head (and in a chunked body's trailer).
    pub(crate) headers: usize,
    /// The longest body, in bytes (chunked: the sum of the chunks).
    pub(crate) body: usize,
}

/// Which part of a message a failure came in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// The request or status line and the header lines.
    Head,
    /// The body.
    Body,
}

impl Part {
    fn name(self) -> &'static str {
        match self {
            Part::Head => "head",
            Part::Body => "body",
        }
    }
}

/// Why a message could not be read. Worded without anything the peer sent (a caller's error
/// may quote more, with `crate::quote`).
#[derive(Debug)]
pub(crate) enum HttpError {
    /// The peer closed the connection in the middle of `part`; `read`: bytes read on the
    /// connection in all.
    Closed {
        /// Where the message stopped.
        part: Part,
        /// Bytes read on the connection in all.
        read: usize,
    },
    /// The deadline passed in the middle of `part`.
    TimedOut {
        /// What was being read.
        part: Part,
        /// Bytes read on the connection in all.
        read: usize,
    },
    /// The head is larger than this many bytes.
    HeadTooLarge(usize),
    /// The head has more than this many header lines.
    TooManyHeaders(usize),
    /// The body is larger than this many bytes.
    BodyTooLarge(usize),
    /// Not an HTTP/1.x message at all (what the parser stopped at).
    NotHttp(&'static str),
    /// An HTTP message this reader refuses: what is wrong with it.
    Invalid(&'static str),
    /// Another I/O error.
    Io(io::Error),
}

impl HttpError {
    /// The status a server answers with before it closes (`None`: nothing can be answered).
    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            HttpError::Closed { .. } | HttpError::Io(_) => None,
            HttpError::TimedOut { .. } => Some(408),
            HttpError::HeadTooLarge(_) | HttpError::TooManyHeaders(_) => Some(431),
            HttpError::BodyTooLarge(_) => Some(413),
            HttpError::NotHttp(_) | HttpError::Invalid(_) => Some(400),
        }
    }

    /// The error of a read that failed in `part` after `read` bytes: a time-out is
    /// [`HttpError::TimedOut`], an interrupted connection [`HttpError::Closed`].
    fn of_io(e: io::Error, part: Part, read: usize) -> HttpError {
        match e.kind() {
            io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
                HttpError::TimedOut { part, read }
            }
            io::ErrorKind::UnexpectedEof => HttpError::Closed { part, read },
            _ => HttpError::Io(e),
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::Closed { part, read } => write!(
                f,
                "the connection closed in the middle of the {} ({read} bytes read)",
                part.name()
            ),
            HttpError::TimedOut { part, read } => write!(
                f,
                "the {} did not arrive in time ({read} bytes read)",
                part.name()
            ),
            HttpError::HeadTooLarge(max) => {
                write!(f, "the head is larger than {} KiB", max / 1024)
            }
            HttpError::TooManyHeaders(max) => {
                write!(f, "the head has more than {max} header lines")
            }
            HttpError::BodyTooLarge(max) if *max >= 1 << 20 => {
                write!(f, "the body is larger than {} MiB", max >> 20)
            }
            HttpError::BodyTooLarge(max) => write!(f, "the body is larger than {max} bytes"),
            HttpError::NotHttp(why) => write!(f, "not HTTP/1.1 ({why})"),
            HttpError::Invalid(why) => f.write_str(why),
            HttpError::Io(e) => write!(f, "{e}"),
        }
    }
}
