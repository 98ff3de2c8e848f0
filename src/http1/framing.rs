//! How a body is delimited (RFC 9112 §6.3), for a request a server reads and for the answer to
//! a `GET` a client reads, and the one chunk-size line parser (RFC 9112 §7.1).

use super::HttpError;

/// The longest chunk-size line (with its extensions).
pub(super) const MAX_CHUNK_LINE: usize = 4096;

/// How the body after a head is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body.
    None,
    /// This many bytes.
    Length(u64),
    /// Chunks, up to the last (size 0) and its trailer.
    Chunked,
    /// Everything until the peer closes (answers only).
    UntilClose,
}

/// A `Content-Length` value: digits only (no sign, no space inside).
fn digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// A request's body, from its `Transfer-Encoding` and `Content-Length` values (a second line
/// of either is refused with the head, `head.rs`): strict (module doc of `http1`).
pub(super) fn of_request(
    transfer_encoding: Option<&[u8]>,
    content_length: Option<&[u8]>,
) -> Result<Framing, HttpError> {
    match (transfer_encoding, content_length) {
        (Some(_), Some(_)) => Err(HttpError::Invalid(
            "both Transfer-Encoding and Content-Length",
        )),
        (Some(te), None) => {
            if te.eq_ignore_ascii_case(b"chunked") {
                Ok(Framing::Chunked)
            } else {
                Err(HttpError::Invalid(
                    "a Transfer-Encoding other than chunked (only chunked is accepted)",
                ))
            }
        }
        (None, Some(cl)) => digits(cl)
            .map(Framing::Length)
            .ok_or(HttpError::Invalid("a Content-Length that is not a number")),
        (None, None) => Ok(Framing::None),
    }
}

/// The body of the answer to a `GET` with status `code` (RFC 9112 §6.3), from the
/// comma-separated values of its `Transfer-Encoding` and `Content-Length` lines, in order.
pub(super) fn of_response<'a>(
    code: u16,
    transfer_encodings: impl Iterator<Item = &'a str>,
    content_lengths: impl Iterator<Item = &'a str>,
) -> Result<Framing, HttpError> {
    if matches!(code, 100..=199 | 204 | 304) {
        return Ok(Framing::None);
    }
    // Transfer-Encoding wins over Content-Length; chunked must be the last coding, otherwise
    // the body runs until the server closes.
    if let Some(last) = transfer_encodings.last() {
        return Ok(if last.eq_ignore_ascii_case("chunked") {
            Framing::Chunked
        } else {
            Framing::UntilClose
        });
    }
    let mut length = None;
    for v in content_lengths {
        let n = digits(v.as_bytes()).ok_or(HttpError::Invalid("an invalid Content-Length"))?;
        if length.is_some_and(|l| l != n) {
            return Err(HttpError::Invalid("conflicting Content-Length values"));
        }
        length = Some(n);
    }
    Ok(length.map_or(Framing::UntilClose, Framing::Length))
}

/// The chunk-size line at the start of `buf`: its size and its length with the CRLF,
/// `Ok(None)` while incomplete. `chunk-size [ chunk-ext ] CRLF`: one to sixteen hex digits,
/// then the CRLF, or white space, `;` and the extensions (ignored, but no control characters)
/// then the CRLF. A sign, white space before the size or after it without `;`, and a bare LF
/// are refused.
pub(super) fn chunk_size_line(buf: &[u8]) -> Result<Option<(u64, usize)>, HttpError> {
    let digits = buf.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits > 16 {
        return Err(HttpError::Invalid("a chunk size too large"));
    }
    if digits == buf.len() {
        return Ok(None);
    }
    if digits == 0 {
        return Err(HttpError::Invalid(if buf[0] == b'\r' || buf[0] == b'\n' {
            "a chunk without a size"
        } else {
            "an invalid chunk size"
        }));
    }
    let size = buf[..digits].iter().fold(0u64, |n, b| {
        (n << 4) | u64::from((*b as char).to_digit(16).unwrap_or(0))
    });
    let incomplete = || {
        if buf.len() > MAX_CHUNK_LINE {
            Err(HttpError::Invalid("a chunk-size line too long"))
        } else {
            Ok(None)
        }
    };
    let mut i = digits;
    if buf[i] != b'\r' {
        while buf.get(i).is_some_and(|b| *b == b' ' || *b == b'\t') {
            i += 1;
        }
        match buf.get(i) {
            None => return incomplete(),
            Some(b';') => {}
            Some(b'\n') => return Err(HttpError::Invalid("a chunk-size line not ended by CRLF")),
            Some(_) => return Err(HttpError::Invalid("an invalid chunk size")),
        }
        while let Some(&b) = buf.get(i) {
            match b {
                b'\r' => break,
                b'\n' => return Err(HttpError::Invalid("a chunk-size line not ended by CRLF")),
                b'\t' => {}
                b if b < 0x20 || b == 0x7f => {
                    return Err(HttpError::Invalid("an invalid chunk extension"));
                }
                _ => {}
            }
            i += 1;
        }
    }
    match (buf.get(i), buf.get(i + 1)) {
        (Some(b'\r'), Some(b'\n')) => Ok(Some((size, i + 2))),
        (Some(b'\r'), Some(_)) => Err(HttpError::Invalid("a chunk-size line not ended by CRLF")),
        _ => incomplete(),
    }
}
