//! Reading one HTTP/1.1 answer to a `GET` from a byte stream: its head, how its body is
//! delimited (RFC 9112 §6.3), and the body, every part under a cap.
//!
//! * Bodies: `Transfer-Encoding: chunked` (whether or not the server then closes the
//!   connection: the last chunk ends the body), `Content-Length`, or until the server closes.
//!   1xx answers before the real one are skipped; 204 and 304 have no body.
//! * At most [`MAX_BODY`] (1 MiB) of body and [`MAX_HEAD`] of head; a chunked body that
//!   announces more is refused before it is read.
//!
//! The stream bounds every read itself (the caller's [`Socket`](crate::transport::Socket) in
//! handshake mode); here a time-out is only worded.

use std::io::{self, Read};

use crate::net;

/// Largest body accepted.
pub(crate) const MAX_BODY: usize = 1 << 20;

/// Largest head (status line and headers) accepted.
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// Most header lines accepted in a head (and in a chunked body's trailer).
const MAX_HEADERS: usize = 96;

/// Longest chunk-size line (with its extensions) accepted.
const MAX_CHUNK_LINE: usize = 4096;

/// Bytes asked of the socket per read.
const READ_CHUNK: usize = 8192;

/// An HTTP answer.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The status code.
    pub code: u16,
    /// The status line without its version (`404 Not Found`), printable ASCII only, safe for
    /// an error message.
    pub status: String,
    /// The header lines, in order, as (name, value).
    pub headers: Vec<(String, String)>,
    /// The body (empty for an answer that has none, and for a redirect, whose body is not read).
    pub body: Vec<u8>,
}

impl Answer {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A byte stream with the bytes read but not used yet.
struct Wire<R> {
    inner: R,
    /// Read from `inner`, not consumed yet.
    buf: Vec<u8>,
    /// Bytes read from `inner` in all (for a time-out message).
    total: usize,
}

impl<R: Read> Wire<R> {
    fn new(inner: R) -> Wire<R> {
        Wire {
            inner,
            buf: Vec::new(),
            total: 0,
        }
    }

    /// Reads more into `buf`; `Ok(false)` at the end of the stream.
    fn fill(&mut self) -> Result<bool, String> {
        let mut chunk = [0u8; READ_CHUNK];
        loop {
            match self.inner.read(&mut chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    self.total += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                    return Err(format!(
                        "/json/version did not answer before the connect deadline ({} bytes of \
                         its answer so far)",
                        self.total
                    ));
                }
                Err(e) => return Err(format!("reading /json/version: {e}")),
            }
        }
    }

    /// Reads until `buf` holds at least `n` bytes; `what` names the part for the error when the
    /// stream ends first.
    fn want(&mut self, n: usize, what: &str) -> Result<(), String> {
        while self.buf.len() < n {
            if !self.fill()? {
                return Err(format!(
                    "the server closed the connection in the middle of {what}"
                ));
            }
        }
        Ok(())
    }

    fn consume(&mut self, n: usize) {
        self.buf.drain(..n);
    }
}

/// A parsed head.
struct Head {
    code: u16,
    status: String,
    headers: Vec<(String, String)>,
}

/// Reads one head (status line and headers) and consumes it.
fn read_head<R: Read>(wire: &mut Wire<R>) -> Result<Head, String> {
    loop {
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Response::new(&mut slots);
        match parsed.parse(&wire.buf) {
            Ok(httparse::Status::Complete(len)) => {
                let code = parsed.code.unwrap_or(0);
                let headers = parsed
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_string(),
                            String::from_utf8_lossy(h.value).trim().to_string(),
                        )
                    })
                    .collect();
                let status = net::status_line(&wire.buf[..len]);
                wire.consume(len);
                return Ok(Head {
                    code,
                    status,
                    headers,
                });
            }
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => {
                return Err(format!(
                    "the /json/version answer has more than {MAX_HEADERS} header lines"
                ));
            }
            Err(e) => {
                return Err(format!("not an HTTP answer ({e})"));
            }
        }
        if wire.buf.len() > MAX_HEAD {
            return Err(format!(
                "the /json/version answer's head is larger than {} KiB",
                MAX_HEAD / 1024
            ));
        }
        if !wire.fill()? {
            return Err(format!(
                "not an HTTP answer ({} bytes before the connection closed)",
                wire.buf.len()
            ));
        }
    }
}

/// How an answer's body is delimited (RFC 9112 §6.3, for the answer to a `GET`).
#[derive(Debug, PartialEq, Eq)]
enum Framing {
    None,
    Chunked,
    Length(usize),
    UntilClose,
}

/// The comma-separated values of every header called `name`, in order.
fn header_values<'a>(
    headers: &'a [(String, String)],
    name: &'a str,
) -> impl Iterator<Item = &'a str> + 'a {
    headers
        .iter()
        .filter(move |(k, _)| k.eq_ignore_ascii_case(name))
        .flat_map(|(_, v)| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

fn framing(head: &Head) -> Result<Framing, String> {
    if head.code == 204 || head.code == 304 {
        return Ok(Framing::None);
    }
    let values = |name: &'static str| header_values(&head.headers, name);
    // Transfer-Encoding wins over Content-Length; chunked must be the last coding, otherwise
    // the body runs until the server closes.
    if let Some(last) = values("transfer-encoding").last() {
        return Ok(if last.eq_ignore_ascii_case("chunked") {
            Framing::Chunked
        } else {
            Framing::UntilClose
        });
    }
    let mut length: Option<u64> = None;
    for v in values("content-length") {
        let n: u64 = v
            .parse()
            .map_err(|_| format!("the /json/version answer has an invalid Content-Length {v:?}"))?;
        if length.is_some_and(|l| l != n) {
            return Err("the /json/version answer has conflicting Content-Length values".into());
        }
        length = Some(n);
    }
    match length {
        Some(n) if n > MAX_BODY as u64 => Err(too_large()),
        Some(n) => Ok(Framing::Length(n as usize)),
        None => Ok(Framing::UntilClose),
    }
}

fn too_large() -> String {
    format!(
        "the /json/version answer is larger than {} MiB",
        MAX_BODY >> 20
    )
}

/// Reads the body that `framing` says follows.
fn read_body<R: Read>(wire: &mut Wire<R>, framing: Framing) -> Result<Vec<u8>, String> {
    match framing {
        Framing::None => Ok(Vec::new()),
        Framing::Length(n) => {
            wire.want(n, "the body")?;
            let body = wire.buf[..n].to_vec();
            wire.consume(n);
            Ok(body)
        }
        Framing::UntilClose => {
            while wire.fill()? {
                if wire.buf.len() > MAX_BODY {
                    return Err(too_large());
                }
            }
            Ok(std::mem::take(&mut wire.buf))
        }
        Framing::Chunked => read_chunked(wire),
    }
}

/// A chunked body: chunks until the last (size 0), then the trailer up to its empty line. The
/// answer ends there, so a server that keeps the connection open is not waited for.
fn read_chunked<R: Read>(wire: &mut Wire<R>) -> Result<Vec<u8>, String> {
    let bad = |what: &str| format!("the /json/version answer's chunked body is invalid ({what})");
    let mut body = Vec::new();
    loop {
        let (used, size) = loop {
            match httparse::parse_chunk_size(&wire.buf) {
                // httparse takes an empty line for size 0; a size has at least one digit.
                Ok(httparse::Status::Complete(_)) if !wire.buf[0].is_ascii_hexdigit() => {
                    return Err(bad("a chunk without a size"));
                }
                Ok(httparse::Status::Complete(x)) => break x,
                Ok(httparse::Status::Partial) if wire.buf.len() > MAX_CHUNK_LINE => {
                    return Err(bad("a chunk-size line too long"));
                }
                Ok(httparse::Status::Partial) => wire.want(wire.buf.len() + 1, "the body")?,
                Err(_) => return Err(bad("an invalid chunk size")),
            }
        };
        wire.consume(used);
        if size == 0 {
            break;
        }
        if size > (MAX_BODY - body.len()) as u64 {
            return Err(too_large());
        }
        let size = size as usize;
        wire.want(size + 2, "the body")?;
        if &wire.buf[size..size + 2] != b"\r\n" {
            return Err(bad("a chunk longer than its size"));
        }
        body.extend_from_slice(&wire.buf[..size]);
        wire.consume(size + 2);
    }
    // The trailer: header lines (ignored) up to an empty line.
    loop {
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        match httparse::parse_headers(&wire.buf, &mut slots) {
            Ok(httparse::Status::Complete((used, _))) => {
                wire.consume(used);
                return Ok(body);
            }
            Ok(httparse::Status::Partial) if wire.buf.len() > MAX_HEAD => {
                return Err(bad("a trailer too large"));
            }
            Ok(httparse::Status::Partial) => wire.want(wire.buf.len() + 1, "the body")?,
            Err(_) => return Err(bad("an invalid trailer")),
        }
    }
}

/// Reads one answer from `stream`: the head (after any 1xx interim answers), then the body
/// unless the answer is a redirect (`skip_body` says which codes those are).
pub(super) fn read_answer<R: Read>(
    stream: R,
    skip_body: impl Fn(&Answer) -> bool,
) -> Result<Answer, String> {
    let mut wire = Wire::new(stream);
    let head = loop {
        let head = read_head(&mut wire)?;
        match head.code {
            101 => return Err("the server switched protocols instead of answering".into()),
            100..=199 => continue,
            _ => break head,
        }
    };
    let framing = framing(&head)?;
    let mut answer = Answer {
        code: head.code,
        status: head.status,
        headers: head.headers,
        body: Vec::new(),
    };
    if !skip_body(&answer) {
        answer.body = read_body(&mut wire, framing)?;
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http_get::is_redirect;

    /// Hands out its bytes `step` at a time.
    struct Trickle {
        data: Vec<u8>,
        step: usize,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.data.len().min(self.step).min(buf.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data.drain(..n);
            Ok(n)
        }
    }

    /// Reads `raw` as one answer, handing it out 1, 2, 7 and all bytes at a time; every way
    /// must give the same result.
    fn answer(raw: &[u8]) -> Result<Answer, String> {
        let mut results = [1, 2, 7, usize::MAX].map(|step| {
            read_answer(
                Trickle {
                    data: raw.to_vec(),
                    step,
                },
                |_| false,
            )
            .map(|a| (a.code, a.status, a.body))
        });
        for r in &results[1..] {
            assert_eq!(r, &results[0], "the split changed the result");
        }
        let r = std::mem::replace(&mut results[0], Err(String::new()));
        r.map(|(code, status, body)| Answer {
            code,
            status,
            headers: Vec::new(),
            body,
        })
    }

    fn body(raw: &[u8]) -> Vec<u8> {
        answer(raw).unwrap_or_else(|e| panic!("{e}")).body
    }

    #[test]
    fn content_length_chunked_and_until_close_bodies_are_read() {
        assert_eq!(
            body(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}extra"),
            b"{}"
        );
        assert_eq!(
            body(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{\"\r\n3;ext=1\r\na\":\r\nA\r\n1234567890\r\n0\r\n\r\nnext answer"),
            b"{\"a\":1234567890"
        );
        // Transfer-Encoding wins over Content-Length.
        assert_eq!(
            body(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nX-Trailer: 1\r\n\r\n"),
            b"x"
        );
        assert_eq!(body(b"HTTP/1.0 200 OK\r\n\r\nuntil close"), b"until close");
        assert_eq!(
            body(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nraw"),
            b"raw"
        );
        // 1xx interim answers are skipped; 204 and 304 have no body.
        assert_eq!(
            body(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"),
            b"x"
        );
        assert_eq!(body(b"HTTP/1.1 204 No Content\r\n\r\nignored"), b"");
        let a = answer(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n").unwrap();
        assert_eq!((a.code, a.status.as_str()), (404, "404 Not Found"));
    }

    #[test]
    fn a_chunked_answer_ends_at_its_last_chunk_without_waiting_for_close() {
        /// Yields the answer, then blocks "forever" (fails the test if read again).
        struct KeepAlive(Vec<u8>);
        impl Read for KeepAlive {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                assert!(!self.0.is_empty(), "read past the end of the chunked body");
                let n = self.0.len().min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0.drain(..n);
                Ok(n)
            }
        }
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
        let a = read_answer(KeepAlive(raw.to_vec()), |_| false).expect("the answer");
        assert_eq!(a.body, b"{}");
    }

    #[test]
    fn broken_answers_are_errors_that_say_what_is_wrong() {
        let err = |raw: &[u8]| answer(raw).expect_err("an error");
        let e = err(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
        assert!(e.contains("invalid chunk size"), "{e}");
        let e = err(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n");
        assert!(e.contains("without a size"), "{e}");
        let e = err(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}x\r\n0\r\n\r\n");
        assert!(e.contains("longer than its size"), "{e}");
        let e = err(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{}");
        assert!(
            e.contains("closed the connection in the middle of the body"),
            "{e}"
        );
        let e = err(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n");
        assert!(e.contains("closed the connection"), "{e}");
        let e = err(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}");
        assert!(
            e.contains("closed the connection in the middle of the body"),
            "{e}"
        );
        let e = err(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n");
        assert!(e.contains("invalid Content-Length"), "{e}");
        let e = err(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx");
        assert!(e.contains("conflicting Content-Length"), "{e}");
        let e = err(b"HTTP/1.1 200 OK\r\nContent");
        assert!(e.contains("not an HTTP answer"), "{e}");
        let e = err(b"SSH-2.0-OpenSSH_9.6\r\n\r\n");
        assert!(e.contains("not an HTTP answer"), "{e}");
        let e = err(b"HTTP/1.1 101 Switching Protocols\r\n\r\n");
        assert!(e.contains("switched protocols"), "{e}");
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: v\r\n")).collect();
        let e = err(format!("HTTP/1.1 200 OK\r\n{many}\r\n").as_bytes());
        assert!(e.contains("header lines"), "{e}");
        let long = "x".repeat(MAX_HEAD + 10);
        let e = err(format!("HTTP/1.1 200 OK\r\nX-Long: {long}").as_bytes());
        assert!(e.contains("head is larger than 64 KiB"), "{e}");
    }

    #[test]
    fn bodies_over_one_mib_are_refused_and_at_one_mib_accepted() {
        let full = vec![b'x'; MAX_BODY];
        let with_length = |n: usize| {
            let mut raw = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n").into_bytes();
            raw.extend_from_slice(&vec![b'x'; n]);
            raw
        };
        let chunked = |sizes: &[usize]| {
            let mut raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for &n in sizes {
                raw.extend_from_slice(format!("{n:x}\r\n").as_bytes());
                raw.extend_from_slice(&vec![b'x'; n]);
                raw.extend_from_slice(b"\r\n");
            }
            raw.extend_from_slice(b"0\r\n\r\n");
            raw
        };
        let until_close = |n: usize| {
            let mut raw = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
            raw.extend_from_slice(&vec![b'x'; n]);
            raw
        };
        let read = |raw: Vec<u8>| read_answer(&raw[..], |_| false).map(|a| a.body);
        assert_eq!(read(with_length(MAX_BODY)).unwrap(), full);
        assert_eq!(read(chunked(&[MAX_BODY / 2, MAX_BODY / 2])).unwrap(), full);
        assert_eq!(read(until_close(MAX_BODY)).unwrap(), full);
        for raw in [
            with_length(MAX_BODY + 1),
            chunked(&[MAX_BODY / 2, MAX_BODY / 2, 1]),
            until_close(MAX_BODY + 1),
        ] {
            let e = read(raw).expect_err("over 1 MiB");
            assert!(e.contains("larger than 1 MiB"), "{e}");
        }
        // A chunk that announces too much is refused before anything of it is read.
        let e =
            read(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffff\r\n".to_vec())
                .expect_err("a huge chunk");
        assert!(e.contains("larger than 1 MiB"), "{e}");
    }

    #[test]
    fn a_redirect_body_is_not_read() {
        let raw = b"HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 100\r\n\r\n";
        let a = read_answer(&raw[..], |a| is_redirect(a.code)).expect("the head alone");
        assert_eq!((a.code, a.header("location")), (302, Some("/x")));
    }
}
