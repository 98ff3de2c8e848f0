//! The stdio transport: one client, one JSON-RPC message per line on stdin, answers and
//! notifications as whole lines on stdout ([`McpServer::run`]); and the same, one line at a
//! time, for embedding ([`McpServer::handle_line`]). It frames lines (bounded: a line longer
//! than [`MAX_LINE`] is skipped in bounded memory) and hands each message to the engine.

use crate::sync;
use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::engine::{Answer, Client, Engine, Request, Served, Sink, Transport};
use super::rpc::{self, Incoming, code};
use super::{MAX_LINE, McpServer};
use crate::deadline::Deadline;

impl McpServer {
    /// Serves `input` line by line until it ends (or [`McpServer::shutdown`] is called and the
    /// next line arrives), writing answers and notifications to `output`, then shuts down.
    pub fn run(
        &self,
        input: impl BufRead,
        output: impl Write + Send + 'static,
    ) -> std::io::Result<()> {
        let writer = Arc::new(Writer::new(Box::new(output)));
        self.writer.store(Some(Arc::clone(&writer)));
        let client = self.client(Some(Arc::clone(&writer) as Arc<dyn Sink>));
        let mut lines = LineReader::new(input, MAX_LINE);
        let result = loop {
            if self.engine.is_closing() {
                break Ok(());
            }
            match lines.next_line() {
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
                Ok(Some(Line::TooLong)) => {
                    writer.send_line(rpc::error(
                        None,
                        code::PARSE_ERROR,
                        format!("message too large: lines are limited to {MAX_LINE} bytes"),
                    ));
                }
                Ok(Some(Line::Text(line))) => {
                    let answer = rpc::classify(&line).and_then(|message| {
                        self.answer_message(message, |request| {
                            // A worker's answer goes to the output too (closed at shutdown:
                            // nothing is written after it).
                            let out = Arc::clone(&writer);
                            let reply = move |answer: Answer| answer.write_to(&*out);
                            match self.engine.serve(request, &client, reply) {
                                Served::Now(answer) => Some(answer),
                                Served::Later(_) => None,
                            }
                        })
                    });
                    if let Some(answer) = answer {
                        answer.write_to(&*writer);
                    }
                }
            }
        };
        self.shutdown();
        result
    }

    /// Answers one line synchronously (`None` for notifications, client responses and blank
    /// lines); tool calls run on the calling thread. For embedding and in-process tests. The
    /// answer is parsed into a [`Value`], so a numeric id beyond `f64` precision is rounded
    /// there: [`McpServer::handle_line_text`] gives the exact text.
    pub fn handle_line(&self, line: &str) -> Option<Value> {
        serde_json::from_str(&self.handle_line_text(line)?).ok()
    }

    /// [`McpServer::handle_line`], answering with the exact JSON text the server would write
    /// (one line, without its newline): the request's id byte for byte as sent.
    pub fn handle_line_text(&self, line: &str) -> Option<String> {
        let message = rpc::classify(line.as_bytes())?;
        // No output to stream to: no listen streams, no notifications.
        let client = self.client(None);
        let answer = self.answer_message(message, |request| {
            Some(self.engine.answer(&request, &client))
        });
        answer?.line
    }

    /// What one message is answered with (`None`: nothing, or a worker answers later): a
    /// notification goes to the engine, a request to `serve`.
    fn answer_message(
        &self,
        message: Incoming,
        serve: impl FnOnce(Request) -> Option<Answer>,
    ) -> Option<Answer> {
        match message {
            Incoming::Response => None,
            Incoming::Invalid(line) => Some(Answer::result(line)),
            Incoming::Unreadable { id, method, why } => {
                Some(Engine::unreadable(&id, &method, &why))
            }
            Incoming::Notification {
                method, request_id, ..
            } => {
                self.engine
                    .notification(self.channel, &method, request_id.as_ref());
                None
            }
            Incoming::Request { id, method, params } => serve(Request::new(id, method, params)),
        }
    }

    /// stdio's one client, with its output (`None`: none to stream to).
    fn client(&self, stream: Option<Arc<dyn Sink>>) -> Client {
        Client {
            transport: Transport::Stdio,
            channel: self.channel,
            session: Some(Arc::clone(&self.session)),
            stream,
        }
    }
}

/// One line read by [`LineReader`].
#[derive(Debug, PartialEq)]
enum Line {
    /// A whole line, without its `\n`.
    Text(Vec<u8>),
    /// A line longer than the limit: it was read and discarded in chunks, never held whole.
    TooLong,
}

/// Reads `\n`-terminated lines of at most `limit` bytes. A longer line costs at most `limit`
/// bytes of memory plus one buffer of the underlying reader: the excess is consumed chunk by
/// chunk from the reader's buffer until the newline, and reported as [`Line::TooLong`].
#[derive(Debug)]
struct LineReader<R> {
    input: R,
    limit: usize,
}

impl<R: BufRead> LineReader<R> {
    fn new(input: R, limit: usize) -> Self {
        LineReader { input, limit }
    }

    /// The next line; `None` at the end of the input (a last line without `\n` still counts).
    fn next_line(&mut self) -> std::io::Result<Option<Line>> {
        let mut line = Vec::new();
        let mut too_long = false;
        loop {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                return Ok(match (too_long, line.is_empty()) {
                    (true, _) => Some(Line::TooLong),
                    (false, true) => None,
                    (false, false) => Some(Line::Text(line)),
                });
            }
            let (part, used, ended) = match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (&chunk[..i], i + 1, true),
                None => (chunk, chunk.len(), false),
            };
            if !too_long {
                if line.len() + part.len() > self.limit {
                    too_long = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(part);
                }
            }
            self.input.consume(used);
            if ended {
                return Ok(Some(if too_long {
                    Line::TooLong
                } else {
                    Line::Text(line)
                }));
            }
        }
    }
}

/// The single writer of the output: each message is serialised first, then written as one
/// whole line under the lock, so concurrent responses and notifications never interleave.
pub(super) struct Writer {
    /// `None` once closed (shutdown, or a write failed: the client is gone). Written by any
    /// thread that sends; taken by `close`.
    out: Mutex<Option<Box<dyn Write + Send>>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").finish_non_exhaustive()
    }
}

impl Writer {
    fn new(out: Box<dyn Write + Send>) -> Writer {
        Writer {
            out: Mutex::new(Some(out)),
        }
    }

    /// Writes `text` (one JSON message, no newline) as one line and flushes. False when the
    /// writer is closed or the write failed (then it closes).
    fn send_line(&self, text: String) -> bool {
        let mut line = text.into_bytes();
        line.push(b'\n');
        let mut out = sync::lock(&self.out);
        let Some(w) = out.as_mut() else {
            return false;
        };
        match w.write_all(&line).and_then(|()| w.flush()) {
            Ok(()) => true,
            Err(e) => {
                log::warn!("cannot write to the MCP client ({e}); no more output");
                *out = None;
                false
            }
        }
    }

    /// Nothing more is written after this.
    pub(super) fn close(&self) {
        drop(sync::lock(&self.out).take());
    }
}

impl Sink for Writer {
    fn send_line(&self, line: String) -> bool {
        Writer::send_line(self, line)
    }

    /// A stream's end is one more line: stdio's output goes on.
    fn end(&self, line: String, _by: Deadline) -> bool {
        Writer::send_line(self, line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], limit: usize, buf: usize) -> Vec<Line> {
        let mut r = LineReader::new(std::io::BufReader::with_capacity(buf, input), limit);
        let mut out = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            out.push(l);
        }
        out
    }

    #[test]
    fn an_oversized_line_is_skipped_and_the_next_one_is_read() {
        let mut input = b"a\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 1000));
        input.extend_from_slice(b"\nbb\nlast");
        let got = lines(&input, 10, 16);
        assert_eq!(
            got,
            vec![
                Line::Text(b"a".to_vec()),
                Line::TooLong,
                Line::Text(b"bb".to_vec()),
                Line::Text(b"last".to_vec()),
            ]
        );
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_accepted() {
        assert_eq!(
            lines(b"0123456789\n", 10, 4),
            vec![Line::Text(b"0123456789".to_vec())]
        );
        assert_eq!(lines(b"0123456789a\n", 10, 4), vec![Line::TooLong]);
    }
}
