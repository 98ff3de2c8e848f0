//! One connection's reading side: a [`Timed`] stream and the bytes read past the last message
//! (a pipelined request, the first WebSocket frames after an upgrade's head).

use std::io;
use std::time::Duration;

use super::framing::{Framing, chunk_size_line};
use super::head::{RequestHead, ResponseHead, parse_request, parse_response, parse_trailer};
use super::{HttpError, Limits, Part, Timed};
use crate::deadline::Deadline;

/// Bytes asked of the stream per read.
const READ_CHUNK: usize = 16 * 1024;

/// A stream and what was read from it but not used yet.
#[derive(Debug)]
pub(crate) struct Conn<S> {
    stream: S,
    /// Read from `stream`, not consumed yet.
    buf: Vec<u8>,
    /// Bytes read from `stream` in all (for messages).
    total: usize,
}

impl<S> Conn<S> {
    /// A connection on `stream`, nothing read yet.
    pub(crate) fn new(stream: S) -> Conn<S> {
        Conn::with_buffered(stream, Vec::new())
    }

    /// A connection on `stream` whose first bytes were already read (`buffered`).
    pub(crate) fn with_buffered(stream: S, buffered: Vec<u8>) -> Conn<S> {
        Conn {
            total: buffered.len(),
            stream,
            buf: buffered,
        }
    }

    /// The stream and the bytes read past the last message: after an upgrade, the first bytes
    /// of the new protocol.
    pub(crate) fn into_parts(self) -> (S, Vec<u8>) {
        (self.stream, self.buf)
    }

    fn consume(&mut self, n: usize) {
        self.buf.drain(..n);
    }
}

/// Whether `buf` may hold a whole head: an empty line ends one (`\n\n` or `\n\r\n`) somewhere
/// from `from` on (the bytes before were looked at already).
pub(crate) fn may_end_head(buf: &[u8], from: usize) -> bool {
    let from = from.saturating_sub(2);
    buf[from..]
        .windows(2)
        .enumerate()
        .any(|(i, w)| w == b"\n\n" || (w == b"\n\r" && buf.get(from + i + 2) == Some(&b'\n')))
}

impl<S: Timed> Conn<S> {
    /// Reads once more into the buffer, waiting until `deadline`: `Ok(false)` at the end of the
    /// stream; a time-out is an error of kind `TimedOut`.
    fn fill(&mut self, deadline: Deadline) -> io::Result<bool> {
        self.stream.set_deadline(deadline);
        let mut chunk = [0u8; READ_CHUNK];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    self.total += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads until the buffer holds `n` bytes, by `deadline`.
    fn want(&mut self, n: usize, part: Part, deadline: Deadline) -> Result<(), HttpError> {
        while self.buf.len() < n {
            match self.fill(deadline) {
                Ok(true) => {}
                Ok(false) => {
                    return Err(HttpError::Closed {
                        part,
                        read: self.total,
                    });
                }
                Err(e) => return Err(HttpError::of_io(e, part, self.total)),
            }
        }
        Ok(())
    }

    /// Reads until `parse` finds a whole head at the start of the buffer, by `deadline`, and
    /// consumes it. `parse` runs on the first bytes (so that what is no HTTP at all is refused
    /// at once), whenever an empty line may have ended the head, and once the buffer is past
    /// `limits.head` (to refuse it): not once per read, so a peer that trickles a large head
    /// does not make it parsed again for every byte.
    fn head<H>(
        &mut self,
        deadline: Deadline,
        limits: &Limits,
        parse: impl Fn(&[u8]) -> Result<Option<(H, usize)>, HttpError>,
    ) -> Result<H, HttpError> {
        let mut looked = 0;
        loop {
            let look =
                looked == 0 || self.buf.len() > limits.head || may_end_head(&self.buf, looked);
            if look && let Some((head, len)) = parse(&self.buf)? {
                self.consume(len);
                return Ok(head);
            }
            looked = self.buf.len().max(1);
            let before = self.buf.len();
            match self.fill(deadline) {
                Ok(true) => {}
                Ok(false) => {
                    return Err(HttpError::Closed {
                        part: Part::Head,
                        read: self.total,
                    });
                }
                Err(e) => return Err(HttpError::of_io(e, Part::Head, self.total)),
            }
            if before == 0 {
                looked = 0;
            }
        }
    }

    /// The next request's head, for a server. Its first byte may take until `idle`
    /// (`Ok(None)` when none came by then, or the client closed first: the connection simply
    /// ends); the rest until `then` after it (`None`: `idle` too).
    pub(crate) fn read_request(
        &mut self,
        idle: Deadline,
        then: Option<Duration>,
        limits: &Limits,
    ) -> Result<Option<RequestHead>, HttpError> {
        if self.buf.is_empty() {
            match self.fill(idle) {
                Ok(true) => {}
                Ok(false) | Err(_) => return Ok(None),
            }
        }
        let deadline = then.map_or(idle, Deadline::after);
        self.head(deadline, limits, |buf| parse_request(buf, limits))
            .map(Some)
    }

    /// The head of the answer to our request, by `deadline`; interim answers (1xx) other than
    /// `101 Switching Protocols` are skipped.
    pub(crate) fn read_response(
        &mut self,
        deadline: Deadline,
        limits: &Limits,
    ) -> Result<ResponseHead, HttpError> {
        loop {
            let head = self.head(deadline, limits, |buf| parse_response(buf, limits))?;
            if head.code == 101 || !(100..200).contains(&head.code) {
                return Ok(head);
            }
        }
    }

    /// The body `framing` says follows a head, at most `max` bytes (more is refused before it
    /// is read, as far as the framing tells), by `deadline`.
    pub(crate) fn read_body(
        &mut self,
        framing: Framing,
        max: usize,
        limits: &Limits,
        deadline: Deadline,
    ) -> Result<Vec<u8>, HttpError> {
        match framing {
            Framing::None => Ok(Vec::new()),
            Framing::Length(n) => {
                let n = usize::try_from(n)
                    .ok()
                    .filter(|n| *n <= max)
                    .ok_or(HttpError::BodyTooLarge(max))?;
                self.want(n, Part::Body, deadline)?;
                Ok(self.buf.drain(..n).collect())
            }
            Framing::UntilClose => loop {
                if self.buf.len() > max {
                    return Err(HttpError::BodyTooLarge(max));
                }
                match self.fill(deadline) {
                    Ok(true) => {}
                    Ok(false) => return Ok(std::mem::take(&mut self.buf)),
                    Err(e) => return Err(HttpError::of_io(e, Part::Body, self.total)),
                }
            },
            Framing::Chunked => self.chunked(max, limits, deadline),
        }
    }

    /// A chunked body (the crate's one decoder): chunks up to the last (size 0), then the
    /// trailer up to its empty line. The message ends there: a peer that keeps the connection
    /// open is not waited for.
    fn chunked(
        &mut self,
        max: usize,
        limits: &Limits,
        deadline: Deadline,
    ) -> Result<Vec<u8>, HttpError> {
        let mut body = Vec::new();
        loop {
            let (size, used) = loop {
                match chunk_size_line(&self.buf)? {
                    Some(line) => break line,
                    None => {
                        let more = self.buf.len() + 1;
                        self.want(more, Part::Body, deadline)?;
                    }
                }
            };
            self.consume(used);
            if size == 0 {
                break;
            }
            let size = usize::try_from(size)
                .ok()
                .filter(|s| *s <= max - body.len())
                .ok_or(HttpError::BodyTooLarge(max))?;
            self.want(size + 2, Part::Body, deadline)?;
            if &self.buf[size..size + 2] != b"\r\n" {
                return Err(HttpError::Invalid("a chunk longer than its size"));
            }
            body.extend_from_slice(&self.buf[..size]);
            self.consume(size + 2);
        }
        loop {
            match parse_trailer(&self.buf, limits)? {
                Some(len) => {
                    self.consume(len);
                    return Ok(body);
                }
                None => {
                    let more = self.buf.len() + 1;
                    self.want(more, Part::Body, deadline)?;
                }
            }
        }
    }

    /// Waits until `deadline` for the peer to send more or to close: `Ok(true)` when bytes
    /// are buffered (read now or before), `Ok(false)` when it closed; a time-out is an error of
    /// kind `TimedOut`.
    pub(crate) fn watch(&mut self, deadline: Deadline) -> io::Result<bool> {
        if !self.buf.is_empty() {
            return Ok(true);
        }
        self.fill(deadline)
    }

    /// Reads and drops what the peer still sends until it closes or `deadline` passes: after
    /// an answer that ends the connection (its write side shut by the caller), so that the
    /// close does not reset a connection the peer is still writing a request on, which would
    /// lose the answer.
    pub(crate) fn drain(&mut self, deadline: Deadline) {
        self.buf.clear();
        while let Ok(true) = self.fill(deadline) {
            self.buf.clear();
        }
    }
}
