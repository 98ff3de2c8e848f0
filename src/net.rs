//! What both connects share before HTTP: TCP connect to every address of a host within one
//! [`Deadline`], and `Authorization: Basic` from a URL's userinfo. The WebSocket upgrade
//! (`transport`) and `http://` discovery (`http_get`) both connect and authenticate through
//! them, so they cannot drift apart again (discovery once tried only the first address); the
//! HTTP/1.1 they then speak is `http1`'s.
//!
//! Nothing here logs, and no error text carries the request (it may hold a token).

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
