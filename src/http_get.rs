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
//! So the protocol is the crate's own `http1` (heads parsed by `httparse`, the parser under
//! hyper, already in our tree through tungstenite, and silent), and what is here is the
//! redirect policy ([`get_following_redirects`]) and the wording of what went wrong.
//!
//! # What it does
//!
//! * One answer is read as `http1` frames it: chunked, `Content-Length` or until close, 1 MiB
//!   of body at most ([`MAX_BODY`]), 1xx answers skipped, a redirect's body not read.
//! * Every read and write is bounded by the caller's deadline (a [`Socket`] given it), so a
//!   server that trickles one byte at a time is cut off at the deadline.

use std::io;
use std::time::Duration;

use crate::deadline::Deadline;
use crate::http1::{self, Conn, HttpError, Limits, Request, ResponseHead};
use crate::net;
use crate::quote::quoted;
use crate::redact::Secrets;
use crate::transport::Socket;

/// Largest body accepted.
pub(crate) const MAX_BODY: usize = 1 << 20;

/// The caps on an answer.
const LIMITS: Limits = Limits {
    head: 64 * 1024,
    headers: 96,
    body: MAX_BODY,
};

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

/// Redirects followed before giving up (SPEC §9).
pub(crate) const MAX_REDIRECTS: usize = 5;

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
    let mut req = Request::get(target)
        .with("Host", format!("{host}:{port}"))
        .with("Connection", "close")
        .with("Accept", "application/json");
    if let Some(a) = authorization {
        req = req.with("Authorization", a);
    }
    http1::write_all(&mut socket, &req.bytes(), Duration::MAX, deadline).map_err(|e| {
        match e.kind() {
            io::ErrorKind::TimedOut => {
                "the /json/version request could not be sent before the connect deadline"
                    .to_string()
            }
            _ => format!("sending the /json/version request: {e}"),
        }
    })?;
    read_answer(Conn::new(socket), deadline)
}

/// Reads one answer from `conn`: the head (after any 1xx interim answers), then the body unless
/// the answer is a redirect (which is followed, not read).
fn read_answer<S: http1::Timed>(mut conn: Conn<S>, deadline: Deadline) -> Result<Answer, String> {
    let head: ResponseHead = conn.read_response(deadline, &LIMITS).map_err(worded)?;
    if head.code == 101 {
        return Err("the server switched protocols instead of answering".into());
    }
    let framing = head.framing().map_err(worded)?;
    let mut answer = Answer {
        code: head.code,
        status: head.status,
        headers: head.headers,
        body: Vec::new(),
    };
    if !(is_redirect(answer.code) && answer.header("location").is_some()) {
        answer.body = conn
            .read_body(framing, MAX_BODY, &LIMITS, deadline)
            .map_err(worded)?;
    }
    Ok(answer)
}

/// What went wrong reading the answer, for the user.
fn worded(e: HttpError) -> String {
    match e {
        HttpError::TimedOut { read, .. } => format!(
            "/json/version did not answer before the connect deadline ({read} bytes of its \
             answer so far)"
        ),
        HttpError::Closed {
            part: http1::Part::Head,
            read,
        } => format!("not an HTTP answer ({read} bytes before the connection closed)"),
        HttpError::Closed { .. } => {
            "the server closed the connection in the middle of the /json/version answer's body"
                .into()
        }
        HttpError::NotHttp(why) => format!("not an HTTP answer ({why})"),
        HttpError::BodyTooLarge(_) => format!(
            "the /json/version answer is larger than {} MiB",
            MAX_BODY >> 20
        ),
        HttpError::HeadTooLarge(max) => format!(
            "the /json/version answer's head is larger than {} KiB",
            max / 1024
        ),
        HttpError::TooManyHeaders(max) => {
            format!("the /json/version answer has more than {max} header lines")
        }
        HttpError::Io(e) => format!("reading /json/version: {e}"),
        e => format!("the /json/version answer is invalid: {e}"),
    }
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
                "/json/version redirected to another scheme ({}); only {}: is followed",
                quoted(next.scheme()),
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
                    quoted(next.host_str().unwrap_or("?"))
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
    use crate::http1::Script;

    fn read(raw: &[u8]) -> Result<Answer, String> {
        read_answer(Conn::new(Script::hanging(raw)), Deadline::NEVER)
    }

    #[test]
    fn a_redirect_body_is_not_read() {
        // The stream would time out if the 100 bytes of body were waited for.
        let a = read(b"HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 100\r\n\r\n")
            .expect("the head alone");
        assert_eq!((a.code, a.header("location")), (302, Some("/x")));
        let a = read(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        assert_eq!(
            (a.status.as_str(), a.body.as_slice()),
            ("200 OK", &b"{}"[..])
        );
    }

    #[test]
    fn what_went_wrong_is_worded_for_discovery() {
        for (raw, says) in [
            (
                &b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n12"[..],
                "/json/version did not answer before the connect deadline (40 bytes of its \
                 answer so far)",
            ),
            (
                b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
                "switched protocols",
            ),
            (
                b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
                "not an HTTP answer (an invalid version)",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\n\r\n",
                "the /json/version answer is larger than 1 MiB",
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                "the /json/version answer is invalid: an invalid chunk size",
            ),
        ] {
            let e = read(raw).expect_err("an error");
            assert!(e.contains(says), "{}: {e}", String::from_utf8_lossy(raw));
        }
        let closed = read_answer(
            Conn::new(Script::new(b"HTTP/1.1 200", usize::MAX)),
            Deadline::NEVER,
        )
        .unwrap_err();
        assert_eq!(
            closed,
            "not an HTTP answer (12 bytes before the connection closed)"
        );
    }
}
