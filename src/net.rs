//! The HTTP/1.1 pieces both connects share: TCP connect to every address of a host within one
//! [`Deadline`], `Authorization: Basic` from a URL's userinfo, the request line, reading an
//! upgrade answer's head, and a status line made safe for messages. The WebSocket upgrade
//! (`transport`) and `http://` discovery (`http_get`) both connect and authenticate through
//! them, so they cannot drift apart again (discovery once tried only the first address).
//!
//! Nothing here logs, and no error text carries the request (it may hold a token): callers word
//! their errors from [`HeadError`] and the status line.

use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};

use crate::deadline::{Deadline, Left};

/// Connects TCP to `host:port` (a bracketed IPv6 literal is accepted), trying each address it
/// resolves to in turn until one answers, all within `deadline`. `Err` says why the last one
/// failed.
pub(crate) fn connect_any(host: &str, port: u16, deadline: Deadline) -> Result<TcpStream, String> {
    let addrs: Vec<_> = (host.trim_matches(['[', ']']), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    connect_first(host, addrs, deadline)
}

/// The first of `addrs` that accepts a connection by `deadline`.
fn connect_first(
    host: &str,
    addrs: Vec<SocketAddr>,
    deadline: Deadline,
) -> Result<TcpStream, String> {
    let mut last = format!("{host} resolved to no address");
    for addr in addrs {
        let attempt = match deadline.left() {
            Left::Passed => {
                last = format!("{last}; the connect deadline passed");
                break;
            }
            Left::In(d) => TcpStream::connect_timeout(&addr, d),
            Left::Never => TcpStream::connect(addr),
        };
        match attempt {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = format!("{addr}: {e}"),
        }
    }
    Err(last)
}

/// The `Authorization: Basic` value for a URL's `user:password@`, if it has one.
///
/// Userinfo is *percent*-decoded (RFC 3986 §3.2.1), not form-decoded: `pa+ss` stays `pa+ss`
/// (`+` is a space only in `application/x-www-form-urlencoded`), `%2B` is `+`, `%40` is `@`.
/// The decoded bytes are sent as they are (RFC 7617's charset is UTF-8, so a non-ASCII name the
/// URL parser percent-encoded arrives as UTF-8); a `%` not followed by two hex digits is kept
/// literally, as the URL parser kept it.
pub(crate) fn basic_auth(url: &url::Url) -> Option<String> {
    use base64::Engine;
    if url.username().is_empty() && url.password().is_none() {
        return None;
    }
    let mut pair: Vec<u8> = percent_encoding::percent_decode_str(url.username()).collect();
    pair.push(b':');
    pair.extend(percent_encoding::percent_decode_str(
        url.password().unwrap_or(""),
    ));
    Some(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    ))
}

/// A `GET` request for `target` (path and query) on `host_header`, with `headers` (each
/// `Name: value`) and the `Authorization` of `url`'s userinfo, if any.
pub(crate) fn get_request(
    url: &url::Url,
    target: &str,
    host_header: &str,
    headers: &[&str],
) -> String {
    let mut req = format!("GET {target} HTTP/1.1\r\nHost: {host_header}\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    if let Some(auth) = basic_auth(url) {
        req.push_str("Authorization: ");
        req.push_str(&auth);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    req
}

/// The head of an HTTP answer.
#[derive(Debug)]
pub(crate) struct HttpHead {
    /// The status line without its version (`101 Switching Protocols`); see [`status_line`].
    pub status: String,
    /// The status code, when the status line has one.
    pub code: Option<u16>,
    /// The header lines, in order, as (name, value) with both trimmed.
    pub headers: Vec<(String, String)>,
    /// Bytes read past the head (the start of the body, or the first WebSocket frames).
    pub leftover: Vec<u8>,
}

impl HttpHead {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why [`read_http_head`] found no head.
#[derive(Debug)]
pub(crate) enum HeadError {
    /// The peer closed the connection after this many bytes.
    Closed(usize),
    /// The head is longer than the limit.
    TooLarge(usize),
    /// The stream's deadline passed after this many bytes (the stream said `TimedOut`).
    TimedOut(usize),
    /// Another I/O error.
    Io(io::Error),
}

/// Reads an HTTP answer's head from `stream`, at most `max_bytes` of it. Every read is bounded
/// by the stream itself (a `transport::Socket` in handshake mode fails with `TimedOut` at its
/// deadline), so a peer that trickles bytes ends at that deadline, not after `max_bytes` reads.
pub(crate) fn read_http_head(
    stream: &mut impl Read,
    max_bytes: usize,
) -> Result<HttpHead, HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > max_bytes {
            return Err(HeadError::TooLarge(max_bytes));
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err(HeadError::Closed(buf.len())),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {
                return Err(HeadError::TimedOut(buf.len()));
            }
            Err(e) => return Err(HeadError::Io(e)),
        }
    };
    let text = String::from_utf8_lossy(&buf[..head_end - 4]);
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let status = status_line(first.as_bytes());
    let code = first.split_whitespace().nth(1).and_then(|c| c.parse().ok());
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(HttpHead {
        status,
        code,
        headers,
        leftover: buf[head_end..].to_vec(),
    })
}

/// `408 Request Timeout` from `HTTP/1.1 408 Request Timeout\r\n...`: the first line without
/// its version, printable ASCII only, at most 120 bytes (safe to put in an error or a log).
pub(crate) fn status_line(bytes: &[u8]) -> String {
    let line = bytes
        .split(|b| *b == b'\r' || *b == b'\n')
        .next()
        .unwrap_or_default();
    let line: String = line
        .iter()
        .take(120)
        .map(|b| *b as char)
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .collect();
    match line.split_once(' ') {
        Some((version, rest)) if version.starts_with("HTTP/") && !rest.trim().is_empty() => {
            rest.trim().to_string()
        }
        _ => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_http_response_is_reduced_to_its_status_line() {
        let full = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(status_line(full), "408 Request Timeout");
        assert_eq!(status_line(b"HTTP/1.0 503\r\n"), "503");
        assert_eq!(status_line(b"HTTP/1.1"), "HTTP/1.1");
        assert_eq!(status_line(b"HTTP/1.1 400 \x1b[31mx\xff\n"), "400 [31mx");
    }

    /// The `user:password` a URL's `Authorization: Basic` header carries.
    fn basic_pair(url: &str) -> Option<Vec<u8>> {
        use base64::Engine;
        let header = basic_auth(&url::Url::parse(url).expect("a valid URL"))?;
        let b64 = header.strip_prefix("Basic ").expect("Basic");
        Some(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .expect("base64"),
        )
    }

    #[test]
    fn basic_auth_comes_from_userinfo_percent_decoded() {
        let u = url::Url::parse("wss://us%40er:p%3Aw@h/x").unwrap();
        assert_eq!(basic_auth(&u).as_deref(), Some("Basic dXNAZXI6cDp3")); // "us@er:p:w"
        let u = url::Url::parse("wss://h/x?token=t").unwrap();
        assert_eq!(basic_auth(&u), None);
    }

    #[test]
    fn basic_auth_keeps_a_plus_and_decodes_only_percent_escapes() {
        let pair = |u: &str| String::from_utf8(basic_pair(u).expect("a header")).unwrap();
        // `+` is a space only in form encoding; in userinfo it is a `+`.
        assert_eq!(pair("ws://us+er:pa+ss@h/"), "us+er:pa+ss");
        assert_eq!(pair("ws://user:pa%2Bss@h/"), "user:pa+ss");
        assert_eq!(pair("ws://user:pa%20ss@h/"), "user:pa ss");
        assert_eq!(pair("ws://us%40er:p%40ss@h/"), "us@er:p@ss");
        // UTF-8: typed raw (the URL parser percent-encodes it) or already percent-encoded.
        assert_eq!(pair("ws://j%C3%BCrgen:p%C3%A4ss@h/"), "jürgen:päss");
        assert_eq!(pair("ws://jürgen:päss✓@h/"), "jürgen:päss✓");
        // An invalid percent sequence stays as it was written.
        assert_eq!(pair("ws://user:pa%zzss@h/"), "user:pa%zzss");
        assert_eq!(pair("ws://user:pass%@h/"), "user:pass%");
        assert_eq!(pair("ws://user:pass%4@h/"), "user:pass%4");
        // Only a user, or only a password.
        assert_eq!(pair("ws://user@h/"), "user:");
        assert_eq!(pair("ws://:pw@h/"), ":pw");
        // Bytes that are not UTF-8 are sent as they are, not replaced.
        assert_eq!(basic_pair("ws://u:%FF%FE@h/").unwrap(), b"u:\xff\xfe");
    }

    #[test]
    fn every_address_is_tried_until_one_accepts() {
        let refused = {
            // A port nobody listens on any more: connecting to it is refused at once.
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = listener.local_addr().unwrap();
        let deadline = Deadline::after(std::time::Duration::from_secs(10));
        let s = connect_first("h", vec![refused, open], deadline).expect("the second address");
        assert_eq!(s.peer_addr().unwrap(), open);
        let e = connect_first("h", vec![refused], deadline).unwrap_err();
        assert!(e.starts_with(&refused.to_string()), "{e}");
        let e = connect_first("h", vec![], deadline).unwrap_err();
        assert_eq!(e, "h resolved to no address");
    }

    #[test]
    fn a_head_split_over_reads_is_parsed_and_what_follows_is_kept() {
        /// Hands out its bytes a few at a time.
        struct Trickle(Vec<u8>);
        impl Read for Trickle {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(3).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0.drain(..n);
                Ok(n)
            }
        }
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A:  b \r\n\r\n{}";
        let head = read_http_head(&mut Trickle(answer.to_vec()), 1024).expect("head");
        assert_eq!(head.code, Some(200));
        assert_eq!(head.status, "200 OK");
        assert_eq!(head.header("content-length"), Some("2"));
        assert_eq!(head.header("x-a"), Some("b"));
        // The reads stop at the head: whatever came with its last read is kept.
        assert!(b"{}".starts_with(&head.leftover));
        assert!(matches!(
            read_http_head(&mut Trickle(b"HTTP/1.1 200".to_vec()), 1024),
            Err(HeadError::Closed(12))
        ));
        let long = [b'a'; 100];
        assert!(matches!(
            read_http_head(&mut &long[..], 10),
            Err(HeadError::TooLarge(10))
        ));
    }
}
