//! A head's bytes into an owned head: the request line or status line and the header lines (and
//! a chunked body's trailer), as `httparse` reads them: the only file of the crate that names
//! it. A request head must also say each of a few things at most once (module doc of `http1`).

use super::framing::{self, Framing};
use super::{HttpError, Limits};

/// Request header fields that may appear once: a second line could be read instead of the
/// first by whatever stands in front of the server (a proxy, a cache), and then one of them
/// checks what the other does not act on.
const ONCE: [(&str, &str); 6] = [
    ("host", "more than one Host header"),
    ("origin", "more than one Origin header"),
    ("authorization", "more than one Authorization header"),
    ("content-type", "more than one Content-Type header"),
    ("content-length", "more than one Content-Length header"),
    (
        "transfer-encoding",
        "more than one Transfer-Encoding header",
    ),
];

/// A request's head: method, target, version and header lines (names lowercase, values as
/// sent, without the white space around them).
#[derive(Debug, Clone)]
pub(crate) struct RequestHead {
    /// `GET`, `POST`, ...
    pub(crate) method: String,
    /// The request target as sent (path and query, usually).
    pub(crate) target: String,
    /// `HTTP/1.1` (true) or `HTTP/1.0`.
    pub(crate) http11: bool,
    headers: Vec<(String, Vec<u8>)>,
}

impl RequestHead {
    /// The target's path, without its query or fragment.
    pub(crate) fn path(&self) -> &str {
        self.target.split(['?', '#']).next().unwrap_or("")
    }

    /// The value of header `name` (lowercase), the first when it is repeated.
    pub(crate) fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }

    /// The value of header `name` as text (`None` when absent or not UTF-8).
    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// How many lines header `name` has.
    pub(crate) fn count(&self, name: &str) -> usize {
        self.headers.iter().filter(|(n, _)| n == name).count()
    }

    /// Whether header `name`'s comma-separated list holds `token` (case-insensitive):
    /// `Connection: keep-alive, Upgrade` holds `upgrade`.
    pub(crate) fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .filter_map(|(_, v)| std::str::from_utf8(v).ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    /// Whether the connection may carry another request after this one's answer: HTTP/1.1
    /// without `Connection: close`. An HTTP/1.0 connection is closed after its answer (its
    /// `keep-alive` extension is not offered).
    pub(crate) fn keep_alive(&self) -> bool {
        self.http11 && !self.has_token("connection", "close")
    }

    /// Whether the client waits for `100 Continue` before it sends the body.
    pub(crate) fn expects_continue(&self) -> bool {
        self.text("expect")
            .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
    }

    /// How the body that follows is delimited (400 for what the module doc refuses).
    pub(crate) fn framing(&self) -> Result<Framing, HttpError> {
        framing::of_request(
            self.header("transfer-encoding"),
            self.header("content-length"),
        )
    }

    /// Whether a body follows the head (whatever its framing says, valid or not).
    pub(crate) fn has_body(&self) -> bool {
        self.header("transfer-encoding").is_some()
            || self
                .header("content-length")
                .is_some_and(|l| l.iter().any(|b| *b != b'0'))
    }

    #[cfg(test)]
    pub(crate) fn for_test(method: &str, path: &str, headers: &[(&str, &str)]) -> RequestHead {
        RequestHead {
            method: method.into(),
            target: path.into(),
            http11: true,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_ascii_lowercase(), v.as_bytes().to_vec()))
                .collect(),
        }
    }
}

/// An answer's head: its status and header lines.
#[derive(Debug, Clone)]
pub(crate) struct ResponseHead {
    /// The status code.
    pub(crate) code: u16,
    /// The status line without its version (`404 Not Found`), safe for a message
    /// ([`status_line`]).
    pub(crate) status: String,
    /// The header lines in order, as (name, value); a value that is not UTF-8 is read lossily.
    pub(crate) headers: Vec<(String, String)>,
}

impl ResponseHead {
    /// The first header called `name` (case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// How the body that follows is delimited, for the answer to a `GET`.
    pub(crate) fn framing(&self) -> Result<Framing, HttpError> {
        framing::of_response(
            self.code,
            self.values("transfer-encoding"),
            self.values("content-length"),
        )
    }

    /// The comma-separated values of every header called `name`, in order.
    fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(k, _)| k.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
    }
}

/// What httparse's error means, for [`HttpError::NotHttp`].
fn parse_error(e: httparse::Error, limits: &Limits) -> HttpError {
    match e {
        httparse::Error::TooManyHeaders => HttpError::TooManyHeaders(limits.headers),
        httparse::Error::HeaderName => HttpError::NotHttp("an invalid header name"),
        httparse::Error::HeaderValue => HttpError::NotHttp("an invalid header value"),
        httparse::Error::NewLine => HttpError::NotHttp("an invalid line ending"),
        httparse::Error::Status => HttpError::NotHttp("an invalid status"),
        httparse::Error::Token => HttpError::NotHttp("an invalid method or target"),
        httparse::Error::Version => HttpError::NotHttp("an invalid version"),
    }
}

/// The length of the head httparse found at the start of `buf` (`None`: not whole yet), within
/// `limits.head`.
fn head_len(
    parsed: httparse::Result<usize>,
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<usize>, HttpError> {
    match parsed {
        Ok(httparse::Status::Complete(len)) if len <= limits.head => Ok(Some(len)),
        Ok(httparse::Status::Partial) if buf.len() <= limits.head => Ok(None),
        Ok(_) => Err(HttpError::HeadTooLarge(limits.head)),
        Err(e) => Err(parse_error(e, limits)),
    }
}

/// A request head at the start of `buf`, and its length: `Ok(None)` while it is incomplete
/// (and within `limits.head`).
pub(crate) fn parse_request(
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<(RequestHead, usize)>, HttpError> {
    let mut slots = vec![httparse::EMPTY_HEADER; limits.headers];
    let mut req = httparse::Request::new(&mut slots);
    let Some(len) = head_len(req.parse(buf), buf, limits)? else {
        return Ok(None);
    };
    let head = RequestHead {
        method: req.method.unwrap_or("").to_string(),
        target: req.path.unwrap_or("").to_string(),
        http11: req.version == Some(1),
        headers: req
            .headers
            .iter()
            .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
            .collect(),
    };
    if let Some((_, why)) = ONCE.iter().find(|(name, _)| head.count(name) > 1) {
        return Err(HttpError::Invalid(why));
    }
    Ok(Some((head, len)))
}

/// An answer's head at the start of `buf`, and its length: `Ok(None)` while it is incomplete
/// (and within `limits.head`).
pub(crate) fn parse_response(
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<(ResponseHead, usize)>, HttpError> {
    let mut slots = vec![httparse::EMPTY_HEADER; limits.headers];
    let mut parsed = httparse::Response::new(&mut slots);
    let Some(len) = head_len(parsed.parse(buf), buf, limits)? else {
        return Ok(None);
    };
    let head = ResponseHead {
        code: parsed.code.unwrap_or(0),
        status: status_line(&buf[..len]),
        headers: parsed
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_string(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect(),
    };
    Ok(Some((head, len)))
}

/// The bytes of a trailer section (header lines up to an empty line) at the start of `buf`:
/// `Ok(None)` while incomplete.
pub(crate) fn parse_trailer(buf: &[u8], limits: &Limits) -> Result<Option<usize>, HttpError> {
    let mut slots = vec![httparse::EMPTY_HEADER; limits.headers];
    match httparse::parse_headers(buf, &mut slots) {
        Ok(httparse::Status::Complete((len, _))) => Ok(Some(len)),
        Ok(httparse::Status::Partial) if buf.len() > limits.head => {
            Err(HttpError::Invalid("a chunked body's trailer is too large"))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(_) => Err(HttpError::Invalid(
            "an invalid trailer after the last chunk",
        )),
    }
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
