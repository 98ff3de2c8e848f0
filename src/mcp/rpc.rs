//! JSON-RPC 2.0 framing for the MCP server: bounded line reading, strict classification of each
//! incoming message, and the one writer that puts whole lines on the output.
//!
//! Nothing here knows MCP methods; `mod.rs` decides what each request means.

use std::io::{BufRead, Write};
use std::sync::Mutex;

use serde_json::{Value, json};

/// JSON-RPC error codes we answer with.
pub(crate) mod code {
    /// The line is not JSON (or not UTF-8), or longer than the limit.
    pub const PARSE_ERROR: i64 = -32700;
    /// Valid JSON, but not a JSON-RPC 2.0 request or notification.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The method's params are unusable.
    pub const INVALID_PARAMS: i64 = -32602;
}

/// A JSON-RPC error response.
pub(crate) fn error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// A JSON-RPC success response.
pub(crate) fn result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A JSON-RPC notification (server to client).
pub(crate) fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// One line read by [`LineReader`].
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    /// A whole line, without its `\n`.
    Text(Vec<u8>),
    /// A line longer than the limit: it was read and discarded in chunks, never held whole.
    TooLong,
}

/// Reads `\n`-terminated lines of at most `limit` bytes. A longer line costs at most `limit`
/// bytes of memory plus one buffer of the underlying reader: the excess is consumed chunk by
/// chunk from the reader's buffer until the newline, and reported as [`Line::TooLong`].
#[derive(Debug)]
pub(crate) struct LineReader<R> {
    input: R,
    limit: usize,
}

impl<R: BufRead> LineReader<R> {
    pub(crate) fn new(input: R, limit: usize) -> Self {
        LineReader { input, limit }
    }

    /// The next line; `None` at the end of the input (a last line without `\n` still counts).
    pub(crate) fn next_line(&mut self) -> std::io::Result<Option<Line>> {
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

/// What one incoming line is.
#[derive(Debug, PartialEq)]
pub(crate) enum Incoming {
    /// A request: must be answered (unless cancelled).
    Request {
        /// A string or a number.
        id: Value,
        /// The method name.
        method: String,
        /// An object, or `Null` when absent.
        params: Value,
    },
    /// A notification: never answered.
    Notification {
        /// The method name.
        method: String,
        /// An object, or `Null` when absent.
        params: Value,
    },
    /// A response from the client (we send no requests): not answered.
    Response,
    /// Not a usable message: send this error response.
    Invalid(Value),
}

/// Classifies one line strictly (JSON-RPC 2.0, MCP flavour). `None` for a blank line.
pub(crate) fn classify(line: &[u8]) -> Option<Incoming> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Some(Incoming::Invalid(error(
            Value::Null,
            code::PARSE_ERROR,
            "parse error: the line is not valid UTF-8",
        )));
    };
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let msg: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return Some(Incoming::Invalid(error(
                Value::Null,
                code::PARSE_ERROR,
                format!("parse error: {e}"),
            )));
        }
    };
    let invalid = |id: Value, why: &str| {
        Some(Incoming::Invalid(error(
            id,
            code::INVALID_REQUEST,
            format!("invalid request: {why}"),
        )))
    };
    let obj = match msg {
        Value::Object(o) => o,
        Value::Array(_) => {
            return invalid(
                Value::Null,
                "JSON-RPC batches are not supported (no protocol version this server speaks has them); send one message per line",
            );
        }
        _ => return invalid(Value::Null, "expected a JSON object"),
    };
    if !obj.contains_key("method") && (obj.contains_key("result") || obj.contains_key("error")) {
        return Some(Incoming::Response);
    }
    let id = match obj.get("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_))) => Some(id.clone()),
        Some(_) => return invalid(Value::Null, "id must be a string or a number"),
    };
    let reply_id = id.clone().unwrap_or(Value::Null);
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(reply_id, "\"jsonrpc\": \"2.0\" is required");
    }
    let Some(method) = obj.get("method").and_then(Value::as_str) else {
        return invalid(reply_id, "method must be a string");
    };
    let params = match obj.get("params") {
        None | Some(Value::Null) => Value::Null,
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => {
            return match id {
                Some(id) => Some(Incoming::Invalid(error(
                    id,
                    code::INVALID_PARAMS,
                    "invalid params: params must be an object",
                ))),
                None => invalid(Value::Null, "params must be an object"),
            };
        }
    };
    let method = method.to_string();
    Some(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    })
}

/// The single writer of the output: each message is serialised first, then written as one
/// whole line under the lock, so concurrent responses and notifications never interleave.
pub(crate) struct Writer {
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
    pub(crate) fn new(out: Box<dyn Write + Send>) -> Writer {
        Writer {
            out: Mutex::new(Some(out)),
        }
    }

    /// Writes `msg` as one line and flushes. False when the writer is closed or the write
    /// failed (then it closes).
    pub(crate) fn send(&self, msg: &Value) -> bool {
        self.send_line(msg.to_string())
    }

    /// Writes `text` (one JSON message, no newline) as one line and flushes; as [`Writer::send`].
    pub(crate) fn send_line(&self, text: String) -> bool {
        let mut line = text.into_bytes();
        line.push(b'\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
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
    pub(crate) fn close(&self) {
        drop(self.out.lock().unwrap_or_else(|e| e.into_inner()).take());
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

    #[test]
    fn strict_classification() {
        let c = |s: &str| classify(s.as_bytes());
        let err_code = |i: Option<Incoming>| match i {
            Some(Incoming::Invalid(v)) => (v["error"]["code"].as_i64(), v["id"].clone()),
            other => panic!("not invalid: {other:?}"),
        };
        assert_eq!(c("  "), None);
        assert_eq!(
            err_code(c(r#"{"id":1,"method":"ping"}"#)),
            (Some(-32600), json!(1))
        );
        assert_eq!(
            err_code(c(r#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#)),
            (Some(-32600), json!("a"))
        );
        assert_eq!(err_code(c("[]")), (Some(-32600), Value::Null));
        assert_eq!(err_code(c("{")), (Some(-32700), Value::Null));
        assert_eq!(
            c(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Some(Incoming::Response)
        );
        assert_eq!(
            c(r#"{"id":3,"error":{"code":1}}"#),
            Some(Incoming::Response)
        );
        assert_eq!(
            c(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Some(Incoming::Notification {
                method: "notifications/initialized".into(),
                params: Value::Null
            })
        );
        assert_eq!(
            c(r#"{"jsonrpc":"2.0","id":"x","method":"ping","params":{}}"#),
            Some(Incoming::Request {
                id: json!("x"),
                method: "ping".into(),
                params: json!({})
            })
        );
        assert_eq!(
            err_code(c(
                r#"{"jsonrpc":"2.0","id":4,"method":"ping","params":[1]}"#
            )),
            (Some(-32602), json!(4))
        );
    }
}
