//! The HTTP/1.1 `GET` behind `http://` discovery (SPEC §9): one request per connection
//! (`Connection: close`), redirects followed by our own policy, every byte under one
//! [`Deadline`], the body capped, and nothing logged.
//!
//! # Why not an HTTP client crate
//!
//! SPEC §9 prefers a well-kept blocking client (ureq 3) to a hand-written one, so it was
//! measured first: ureq 3.5.2 with ureq-proto 0.7.1 (default features off, a logger capturing
//! every record at `Trace`) sent `GET http://127.0.0.1:P/a?token=T0KEN-S3CR3T` with
//! `Authorization: Basic ...`, followed a same-host redirect whose `Location` echoed the token,
//! and logged the token in 9 records and the `Authorization` value in 2 more: `ureq::run` prints
//! the URI with its query once trace is enabled (the request, the redirect, the response's
//! `Location`), and ureq-proto dumps every byte it writes and reads as hex and ASCII at trace
//! (`GET./a?token=T0K` / `EN-S3CR3T.HTTP/1`, `authorization:.B` / `asic.dXNlcjpwdy1`,
//! `n=T0KEN-S3CR3T..` from the `Location`). SPEC §14 forbids a credential in any log line at any
//! level, and a library cannot switch a dependency's records off: the logger and its filter
//! belong to the application. Hiding the secrets from ureq (placeholders swapped in by our own
//! transport) would still leave whatever the server echoes back (a `Location` with the token,
//! the body) in its dumps.
//!
//! So the protocol is parsed by `httparse` (the parser under hyper, already in our tree through
//! tungstenite, and silent): the status line and headers, chunk-size lines and trailers. What is
//! ours is the framing decision (RFC 9112 §6.3), the loop that reads a body, and the redirect
//! policy ([`get_following_redirects`]).
//!
//! # What it does
//!
//! * Bodies: `Transfer-Encoding: chunked` (whether or not the server then closes the
//!   connection: the last chunk ends the body), `Content-Length`, or until the server closes.
//!   1xx answers before the real one are skipped; 204 and 304 have no body.
//! * At most [`MAX_BODY`] (1 MiB) of body and [`MAX_HEAD`] of head; a chunked body that
//!   announces more is refused before it is read.
//! * Every read and write is bounded by the caller's deadline (a [`Socket`] in handshake
//!   mode), so a server that trickles one byte at a time is cut off at the deadline.

use std::io::{self, Read, Write};

use crate::deadline::Deadline;
use crate::net;
use crate::redact::Secrets;
use crate::transport::Socket;

/// Largest body accepted.
pub(crate) const MAX_BODY: usize = 1 << 20;

/// Largest head (status line and headers) accepted.
pub(crate) const MAX_HEAD: usize = 64 * 1024;

/// Most header lines accepted in a head (and in a chunked body's trailer).
const MAX_HEADERS: usize = 96;

/// Longest chunk-size line (with its extensions) accepted.
const MAX_CHUNK_LINE: usize = 4096;

/// Redirects followed before giving up (SPEC §9).
pub(crate) const MAX_REDIRECTS: usize = 5;

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
fn read_answer<R: Read>(stream: R, skip_body: impl Fn(&Answer) -> bool) -> Result<Answer, String> {
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

/// True for the redirect codes a `GET` follows.
fn is_redirect(code: u16) -> bool {
    matches!(code, 301 | 302 | 303 | 307 | 308)
}

/// The host and port a request goes to: what "the same host" means for credentials.
pub(crate) fn origin(url: &url::Url) -> (Option<url::Host<String>>, Option<u16>) {
    (
        url.host().map(|h| h.to_owned()),
        url.port_or_known_default(),
    )
}

/// Sends `GET <path and query of url>` with `authorization` (a header value) and reads the
/// answer, all by `deadline`.
fn get_once(
    url: &url::Url,
    authorization: Option<&str>,
    deadline: Deadline,
) -> Result<Answer, String> {
    let host = url.host_str().ok_or("no host")?;
    let port = url.port_or_known_default().unwrap_or(80);
    let tcp = net::connect_any(host, port, deadline)?;
    let mut socket = Socket::new(tcp, deadline);
    let mut target = url.path().to_string();
    if let Some(q) = url.query() {
        target.push('?');
        target.push_str(q);
    }
    // Userinfo never goes into the request; `authorization` says what to send instead.
    let mut req = format!(
        "GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\
         Accept: application/json\r\n"
    );
    if let Some(a) = authorization {
        req.push_str("Authorization: ");
        req.push_str(a);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    socket
        .write_all(req.as_bytes())
        .map_err(|e| match e.kind() {
            io::ErrorKind::TimedOut => {
                "the /json/version request could not be sent before the connect deadline"
                    .to_string()
            }
            _ => format!("sending the /json/version request: {e}"),
        })?;
    read_answer(socket, |a| {
        is_redirect(a.code) && a.header("location").is_some()
    })
}

/// What [`get_following_redirects`] ended with.
#[derive(Debug)]
pub(crate) struct Fetched {
    /// The last answer (not a redirect).
    pub answer: Answer,
    /// True when a redirect led to another host (or port) than the one asked: the user's
    /// credentials were not sent there, and must not be added to what it answered either.
    pub left_origin: bool,
}

/// `GET url` (an `http://` URL; its userinfo becomes `Authorization: Basic`), following up to
/// [`MAX_REDIRECTS`] redirects, all by `deadline`. The policy (SPEC §9):
///
/// * a redirect to another scheme is refused (discovery is plain `http://`; an `https://`
///   endpoint is given as its `wss://` URL);
/// * the user's credentials go to the host (and port) they were given for, never elsewhere:
///   `Authorization` is sent only there, userinfo in a `Location` is ignored, and a redirect to
///   another host whose `Location` carries a value of the user's query (a token echoed back)
///   is refused, since following it would hand the token to that host;
/// * a redirect's target is followed as the server wrote it: our query is not added to it (a
///   server that wants the token again puts it in its `Location`, on its own host).
///
/// Errors are worded for the user and carry no part of the request; the caller still scrubs
/// them with `secrets` (a server's status line could echo anything).
pub(crate) fn get_following_redirects(
    url: &url::Url,
    secrets: &Secrets,
    deadline: Deadline,
) -> Result<Fetched, String> {
    let home = origin(url);
    let authorization = net::basic_auth(url);
    let mut current = url.clone();
    let _ = current.set_username("");
    let _ = current.set_password(None);
    let mut left_origin = false;
    for hop in 0..=MAX_REDIRECTS {
        let at_home = origin(&current) == home;
        let auth = authorization.as_deref().filter(|_| at_home);
        let answer = get_once(&current, auth, deadline)?;
        let location = match answer.header("location") {
            Some(l) if is_redirect(answer.code) => l,
            _ => {
                return Ok(Fetched {
                    answer,
                    left_origin,
                });
            }
        };
        if hop == MAX_REDIRECTS {
            return Err(format!(
                "/json/version redirected more than {MAX_REDIRECTS} times"
            ));
        }
        let mut next = current
            .join(location)
            .map_err(|e| format!("/json/version redirected to an invalid URL ({e})"))?;
        if next.scheme() != current.scheme() {
            return Err(format!(
                "/json/version redirected to another scheme ({}:); only {}: is followed",
                next.scheme(),
                current.scheme()
            ));
        }
        let _ = next.set_username("");
        let _ = next.set_password(None);
        next.set_fragment(None);
        if origin(&next) != home {
            if secrets.found_in(next.as_str()) {
                return Err(format!(
                    "/json/version redirected to another host ({}) with the URL's credentials \
                     in the address; not followed, so that they stay with the host they were \
                     given for",
                    next.host_str().unwrap_or("?")
                ));
            }
            left_origin = true;
        }
        current = next;
    }
    unreachable!("the loop returns by its last hop")
}

#[cfg(test)]
mod tests {
    use super::*;

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
