//! HTTP/1.1 on one connection: reading a request (its head with `httparse`, its body by
//! `Content-Length` or chunked), each with a deadline, and writing answers (JSON, empty, or a
//! Server-Sent Events stream in chunks).
//!
//! Every wait is bounded. Before the first byte of a request the connection may stay idle for
//! the idle timeout (keep-alive); from that byte, the whole head must arrive within the header
//! timeout and the whole body within the body timeout, whatever pace the client keeps, so a
//! client that trickles a byte at a time is cut off (408) when its deadline passes. The head is
//! at most [`MAX_HEAD`] bytes and [`MAX_HEADERS`] lines (431), the body at most the stdio line
//! cap (413). Writes time out when the client stops reading.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::deadline::{Deadline, Left};

/// Longest request head.
pub(super) const MAX_HEAD: usize = 64 * 1024;
/// Most header lines in a request.
pub(super) const MAX_HEADERS: usize = 64;
/// How long one write of an answer may make no progress before the connection is given up.
pub(super) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The same for a frame of an event stream (written under the lock of every stream, so
/// shorter: a client that stops reading loses its stream instead of holding the others).
pub(super) const STREAM_WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// A request's head: method, target and headers (names lowercase, values as sent).
#[derive(Debug)]
pub(super) struct Head {
    pub(super) method: String,
    /// The request target's path, without its query.
    pub(super) path: String,
    /// `HTTP/1.1` (true) or `HTTP/1.0`.
    pub(super) http11: bool,
    headers: Vec<(String, Vec<u8>)>,
}

impl Head {
    /// The value of header `name` (lowercase), the first when it is repeated.
    pub(super) fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// The value of header `name` as text (`None` when absent or not UTF-8), trimmed.
    pub(super) fn text(&self, name: &str) -> Option<&str> {
        self.header(name)
            .and_then(|v| std::str::from_utf8(v).ok())
            .map(str::trim)
    }

    /// How many times header `name` is present.
    pub(super) fn count(&self, name: &str) -> usize {
        self.headers.iter().filter(|(n, _)| n == name).count()
    }

    /// Whether the connection stays open after the answer: HTTP/1.1 unless `Connection: close`
    /// (HTTP/1.0 connections are closed).
    pub(super) fn keep_alive(&self) -> bool {
        self.http11
            && !self
                .text("connection")
                .is_some_and(|c| c.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }

    #[cfg(test)]
    pub(super) fn for_test(method: &str, path: &str, headers: &[(&str, &str)]) -> Head {
        Head {
            method: method.into(),
            path: path.into(),
            http11: true,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_ascii_lowercase(), v.as_bytes().to_vec()))
                .collect(),
        }
    }
}

/// Why a request could not be read: the status to answer before closing (`None`: just close).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Unreadable {
    pub(super) status: Option<u16>,
    pub(super) why: &'static str,
}

fn fail(status: u16, why: &'static str) -> Unreadable {
    Unreadable {
        status: Some(status),
        why,
    }
}

/// The reading half of a connection: the socket and what was read past the last request (a
/// pipelined next request).
#[derive(Debug)]
pub(super) struct Reader {
    stream: TcpStream,
    buf: Vec<u8>,
}

/// What [`Reader::next_head`] found.
#[derive(Debug)]
pub(super) enum Next {
    /// A request's head.
    Head(Head),
    /// The client closed the connection, or left it idle past the idle timeout.
    Closed,
}

impl Reader {
    pub(super) fn new(stream: TcpStream) -> Reader {
        Reader {
            stream,
            buf: Vec::new(),
        }
    }

    /// Reads into the buffer once, waiting at most `wait`; `Ok(0)` at the end of the stream.
    fn fill(&mut self, wait: Duration) -> io::Result<usize> {
        // A zero timeout means "none" to the socket: wait at least a moment.
        self.stream
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The next request's head: waits up to `idle` for its first byte, then up to `header` for
    /// the rest of it.
    pub(super) fn next_head(
        &mut self,
        idle: Duration,
        header: Duration,
    ) -> Result<Next, Unreadable> {
        if self.buf.is_empty() {
            match self.fill(idle) {
                Ok(0) | Err(_) => return Ok(Next::Closed),
                Ok(_) => {}
            }
        }
        let deadline = Deadline::after(header);
        loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&self.buf) {
                Ok(httparse::Status::Complete(len)) => {
                    let head = Head {
                        method: req.method.unwrap_or("").to_string(),
                        path: req
                            .path
                            .unwrap_or("")
                            .split(['?', '#'])
                            .next()
                            .unwrap_or("")
                            .to_string(),
                        http11: req.version == Some(1),
                        headers: req
                            .headers
                            .iter()
                            .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
                            .collect(),
                    };
                    self.buf.drain(..len);
                    return Ok(Next::Head(head));
                }
                Ok(httparse::Status::Partial) if self.buf.len() > MAX_HEAD => {
                    return Err(fail(431, "the request head is too large"));
                }
                Ok(httparse::Status::Partial) => {}
                Err(httparse::Error::TooManyHeaders) => {
                    return Err(fail(431, "the request has too many header lines"));
                }
                Err(_) => return Err(fail(400, "the request is not HTTP/1.1")),
            }
            let Some(left) = time_left(deadline) else {
                return Err(fail(408, "the request head did not arrive in time"));
            };
            match self.fill(left) {
                Ok(0) => {
                    return Err(Unreadable {
                        status: None,
                        why: "the client closed the connection mid-request",
                    });
                }
                Ok(_) => {}
                Err(e) if timed_out(&e) => {
                    return Err(fail(408, "the request head did not arrive in time"));
                }
                Err(_) => {
                    return Err(Unreadable {
                        status: None,
                        why: "the connection failed mid-request",
                    });
                }
            }
        }
    }

    /// The body of the request `head`, at most `max` bytes, within `timeout`.
    pub(super) fn body(
        &mut self,
        head: &Head,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<u8>, Unreadable> {
        let deadline = Deadline::after(timeout);
        let chunked = head.text("transfer-encoding").map(|t| {
            t.rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"))
        });
        match (chunked, head.count("content-length")) {
            (Some(true), 0) => self.chunked_body(max, deadline),
            (Some(_), _) => Err(fail(
                400,
                "Transfer-Encoding other than chunked, or with Content-Length, is not accepted",
            )),
            (None, 0) => Ok(Vec::new()),
            (None, 1) => {
                let len = head
                    .text("content-length")
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| fail(400, "the Content-Length is not a number"))?;
                if len > max as u64 {
                    return Err(fail(413, "the request body is too large"));
                }
                let len = len as usize;
                self.need(len, deadline)?;
                Ok(self.buf.drain(..len).collect())
            }
            (None, _) => Err(fail(400, "the request has more than one Content-Length")),
        }
    }

    /// Waits until the buffer holds `n` bytes.
    fn need(&mut self, n: usize, deadline: Deadline) -> Result<(), Unreadable> {
        while self.buf.len() < n {
            let Some(left) = time_left(deadline) else {
                return Err(fail(408, "the request body did not arrive in time"));
            };
            match self.fill(left) {
                Ok(0) => {
                    return Err(Unreadable {
                        status: None,
                        why: "the client closed the connection mid-body",
                    });
                }
                Ok(_) => {}
                Err(e) if timed_out(&e) => {
                    return Err(fail(408, "the request body did not arrive in time"));
                }
                Err(_) => {
                    return Err(Unreadable {
                        status: None,
                        why: "the connection failed mid-body",
                    });
                }
            }
        }
        Ok(())
    }

    /// Waits for a whole line (`\r\n`-terminated) at the start of the buffer and takes it.
    fn line(&mut self, deadline: Deadline) -> Result<Vec<u8>, Unreadable> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[..i].to_vec();
                self.buf.drain(..i + 2);
                return Ok(line);
            }
            if self.buf.len() > 4096 {
                return Err(fail(400, "a chunk header is too long"));
            }
            let more = self.buf.len() + 1;
            self.need(more, deadline)?;
        }
    }

    fn chunked_body(&mut self, max: usize, deadline: Deadline) -> Result<Vec<u8>, Unreadable> {
        let mut body = Vec::new();
        loop {
            let line = self.line(deadline)?;
            let size = std::str::from_utf8(&line)
                .ok()
                .and_then(|l| l.split(';').next())
                .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
                .ok_or_else(|| fail(400, "a chunk size is not a hexadecimal number"))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !self.line(deadline)?.is_empty() {}
                return Ok(body);
            }
            if size > max.saturating_sub(body.len()) {
                return Err(fail(413, "the request body is too large"));
            }
            self.need(size + 2, deadline)?;
            body.extend(self.buf.drain(..size));
            if self.buf.drain(..2).as_slice() != b"\r\n" {
                return Err(fail(400, "a chunk does not end with CRLF"));
            }
        }
    }

    /// Waits up to `wait` for the client to send something or close: `Ok(true)` when bytes are
    /// ready (buffered or on the socket), `Ok(false)` when it closed. `Err` with a time-out
    /// kind when nothing happened.
    pub(super) fn watch(&mut self, wait: Duration) -> io::Result<bool> {
        if !self.buf.is_empty() {
            return Ok(true);
        }
        self.stream
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        let mut one = [0u8; 1];
        loop {
            match self.stream.peek(&mut one) {
                Ok(n) => return Ok(n > 0),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// The time left until `deadline` (`None` once passed; an hour without one).
fn time_left(deadline: Deadline) -> Option<Duration> {
    match deadline.left() {
        Left::Passed => None,
        Left::In(d) => Some(d),
        Left::Never => Some(Duration::from_secs(3600)),
    }
}

/// Whether a read error is its time-out.
pub(super) fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// The reason phrase of a status we send.
fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
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

/// An answer: status, extra headers and a body (JSON unless empty).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Response {
    pub(super) status: u16,
    pub(super) headers: Vec<(&'static str, String)>,
    pub(super) body: String,
}

impl Response {
    /// An answer with a JSON body.
    pub(super) fn json(status: u16, body: String) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body,
        }
    }

    /// An answer without a body.
    pub(super) fn empty(status: u16) -> Response {
        Response::json(status, String::new())
    }

    /// The same answer with one more header.
    pub(super) fn with(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    /// The bytes of the whole answer; `keep_alive: false` adds `Connection: close`.
    pub(super) fn bytes(&self, keep_alive: bool) -> Vec<u8> {
        let mut out = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        for (name, value) in &self.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        if !self.body.is_empty() {
            out.push_str("Content-Type: application/json\r\n");
        }
        if self.status != 204 {
            out.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        out.push_str("Cache-Control: no-store\r\n");
        if !keep_alive {
            out.push_str("Connection: close\r\n");
        }
        out.push_str("\r\n");
        out.push_str(&self.body);
        out.into_bytes()
    }
}

/// Writes `bytes` whole, each write bounded by `timeout` without progress.
pub(super) fn write_all(stream: &mut TcpStream, bytes: &[u8], timeout: Duration) -> io::Result<()> {
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(bytes)?;
    stream.flush()
}

/// The head of a Server-Sent Events answer (chunked, so the connection can be kept).
pub(super) fn sse_head(headers: &[(&'static str, String)]) -> Vec<u8> {
    let mut out = String::from(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache, no-store\r\n\
         X-Accel-Buffering: no\r\nTransfer-Encoding: chunked\r\n",
    );
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// One SSE `message` event carrying the JSON text `json`, as one chunk.
pub(super) fn sse_event(json: &str) -> Vec<u8> {
    let event = format!("event: message\ndata: {json}\n\n");
    let mut out = format!("{:x}\r\n", event.len()).into_bytes();
    out.extend_from_slice(event.as_bytes());
    out.extend_from_slice(b"\r\n");
    out
}

/// The end of a chunked answer.
pub(super) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A connected pair: the server's reader and the client's socket.
    fn pair() -> (Reader, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        (Reader::new(server), client)
    }

    const WAIT: Duration = Duration::from_secs(5);

    #[test]
    fn pipelined_requests_are_read_one_by_one() {
        let (mut r, mut c) = pair();
        c.write_all(
            b"POST /mcp?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}\
              POST /mcp HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
              3\r\n[1,\r\n2;ext=1\r\n2]\r\n0\r\nX-Trailer: t\r\n\r\n",
        )
        .unwrap();
        let Next::Head(h) = r.next_head(WAIT, WAIT).unwrap() else {
            panic!("a head")
        };
        assert_eq!((h.method.as_str(), h.path.as_str()), ("POST", "/mcp"));
        assert!(h.keep_alive());
        assert_eq!(r.body(&h, 100, WAIT).unwrap(), b"{}");
        let Next::Head(h) = r.next_head(WAIT, WAIT).unwrap() else {
            panic!("a head")
        };
        assert_eq!(r.body(&h, 100, WAIT).unwrap(), b"[1,2]");
        drop(c);
        assert!(matches!(r.next_head(WAIT, WAIT), Ok(Next::Closed)));
    }

    #[test]
    fn a_trickling_client_is_cut_off_at_its_deadline() {
        let (mut r, mut c) = pair();
        c.write_all(b"POST /mcp HTTP/1.1\r\nHost: a\r\n").unwrap();
        let writer = std::thread::spawn(move || {
            // One byte every 50 ms: each read succeeds, the head never completes in time.
            for b in b"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
                if c.write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let t = std::time::Instant::now();
        let e = r
            .next_head(WAIT, Duration::from_millis(300))
            .expect_err("cut off");
        assert_eq!(e.status, Some(408));
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        drop(r);
        writer.join().unwrap();

        let (mut r, mut c) = pair();
        c.write_all(b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n12")
            .unwrap();
        let Next::Head(h) = r.next_head(WAIT, WAIT).unwrap() else {
            panic!("a head")
        };
        let e = r
            .body(&h, 100, Duration::from_millis(200))
            .expect_err("cut off");
        assert_eq!(e.status, Some(408));
    }

    #[test]
    fn oversized_and_malformed_requests_are_refused() {
        let (mut r, mut c) = pair();
        c.write_all(b"POST /mcp HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n")
            .unwrap();
        let Next::Head(h) = r.next_head(WAIT, WAIT).unwrap() else {
            panic!("a head")
        };
        assert_eq!(r.body(&h, 100, WAIT).unwrap_err().status, Some(413));

        let (mut r, mut c) = pair();
        c.write_all(b"POST /mcp HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n")
            .unwrap();
        let Next::Head(h) = r.next_head(WAIT, WAIT).unwrap() else {
            panic!("a head")
        };
        assert_eq!(r.body(&h, 100, WAIT).unwrap_err().status, Some(413));

        let (mut r, mut c) = pair();
        let mut big = b"GET / HTTP/1.1\r\n".to_vec();
        big.extend(std::iter::repeat_n(b'a', MAX_HEAD + 10));
        c.write_all(&big).unwrap();
        assert_eq!(r.next_head(WAIT, WAIT).unwrap_err().status, Some(431));

        let (mut r, mut c) = pair();
        c.write_all(b"\x16\x03\x01 not http\r\n\r\n").unwrap();
        assert_eq!(r.next_head(WAIT, WAIT).unwrap_err().status, Some(400));

        let (mut r, mut c) = pair();
        c.write_all(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
            .unwrap();
        let Next::Head(h) = r.next_head(WAIT, WAIT).unwrap() else {
            panic!("a head")
        };
        assert_eq!(r.body(&h, 100, WAIT).unwrap_err().status, Some(400));
    }

    #[test]
    fn an_idle_connection_ends_at_the_idle_timeout() {
        let (mut r, _c) = pair();
        let t = std::time::Instant::now();
        assert!(matches!(
            r.next_head(Duration::from_millis(100), WAIT),
            Ok(Next::Closed)
        ));
        assert!(t.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn answers_are_framed() {
        let a = Response::json(200, "{}".into()).with("Mcp-Session-Id", "abc");
        let text = String::from_utf8(a.bytes(false)).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("Mcp-Session-Id: abc\r\n"));
        assert!(text.contains("Content-Length: 2\r\n"));
        assert!(text.contains("Connection: close\r\n"));
        assert!(text.ends_with("\r\n\r\n{}"));
        assert_eq!(
            String::from_utf8(sse_event("{\"a\":1}")).unwrap(),
            "1e\r\nevent: message\ndata: {\"a\":1}\n\n\r\n"
        );
    }
}
