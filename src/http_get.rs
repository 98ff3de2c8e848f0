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
//! ours is the framing decision (RFC 9112 §6.3) and the loop that reads a body
//! (`http_get/answer.rs`), and the redirect policy ([`get_following_redirects`], here).
//!
//! # What it does
//!
//! * One answer is read as `answer.rs` says: chunked, `Content-Length` or until close, 1 MiB of
//!   body at most, 1xx answers skipped.
//! * Every read and write is bounded by the caller's deadline (a [`Socket`] in handshake
//!   mode), so a server that trickles one byte at a time is cut off at the deadline.

use std::io::{self, Write};

use crate::deadline::Deadline;
use crate::net;
use crate::redact::Secrets;
use crate::transport::Socket;

mod answer;

use answer::{Answer, read_answer};

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
