//! The server side of a client's WebSocket (RFC 6455), as small as CDP needs: frames the client
//! sends (masked, possibly fragmented) are read into whole messages, and frames we send are
//! encoded unmasked. One thread reads ([`FrameReader`]), one writes (the client's writer: the
//! only one, so pongs and the close frame are queued for it rather than written by the reader).

use std::io::{self, Read};

/// A whole message from the client.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Incoming {
    /// A text message (a CDP command).
    Text(String),
    /// A ping to answer with this payload.
    Ping(Vec<u8>),
    /// A pong, or a binary message (CDP has none): nothing to do.
    Ignored,
    /// The client closes.
    Close,
}

/// Why reading failed: the socket, or a frame that breaks the protocol (close code, reason).
#[derive(Debug)]
pub(super) enum ReadError {
    /// The connection ended or failed.
    Io(io::Error),
    /// The client broke the protocol: close with this code and reason.
    Protocol(u16, &'static str),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> ReadError {
        ReadError::Io(e)
    }
}

/// Reads whole messages of at most `max` bytes.
#[derive(Debug)]
pub(super) struct FrameReader {
    max: usize,
    /// A fragmented text message so far.
    partial: Option<Vec<u8>>,
}

impl FrameReader {
    pub(super) fn new(max: usize) -> FrameReader {
        FrameReader { max, partial: None }
    }

    /// The next whole message (control frames come between fragments).
    pub(super) fn read(&mut self, r: &mut impl Read) -> Result<Incoming, ReadError> {
        loop {
            let mut head = [0u8; 2];
            r.read_exact(&mut head)?;
            let fin = head[0] & 0x80 != 0;
            if head[0] & 0x70 != 0 {
                return Err(ReadError::Protocol(1002, "reserved bits set"));
            }
            let opcode = head[0] & 0x0f;
            if head[1] & 0x80 == 0 {
                return Err(ReadError::Protocol(1002, "a client frame must be masked"));
            }
            let len = match head[1] & 0x7f {
                126 => {
                    let mut b = [0u8; 2];
                    r.read_exact(&mut b)?;
                    u64::from(u16::from_be_bytes(b))
                }
                127 => {
                    let mut b = [0u8; 8];
                    r.read_exact(&mut b)?;
                    u64::from_be_bytes(b)
                }
                n => u64::from(n),
            };
            let control = opcode & 0x08 != 0;
            if control && (len > 125 || !fin) {
                return Err(ReadError::Protocol(1002, "bad control frame"));
            }
            let so_far = self.partial.as_ref().map_or(0, Vec::len) as u64;
            if len.saturating_add(so_far) > self.max as u64 {
                return Err(ReadError::Protocol(1009, "message too big"));
            }
            let mut mask = [0u8; 4];
            r.read_exact(&mut mask)?;
            let mut payload = Vec::with_capacity(len as usize);
            if r.by_ref().take(len).read_to_end(&mut payload)? as u64 != len {
                return Err(ReadError::Io(io::ErrorKind::UnexpectedEof.into()));
            }
            unmask(&mut payload, mask);
            match opcode {
                0x8 => return Ok(Incoming::Close),
                0x9 => return Ok(Incoming::Ping(payload)),
                0xA => return Ok(Incoming::Ignored),
                0x1 | 0x2 if self.partial.is_some() => {
                    return Err(ReadError::Protocol(
                        1002,
                        "a new message inside a fragmented one",
                    ));
                }
                0x1 if fin => return text(payload),
                0x2 if fin => return Ok(Incoming::Ignored),
                0x1 | 0x2 => self.partial = Some(payload),
                0x0 => {
                    let Some(mut buf) = self.partial.take() else {
                        return Err(ReadError::Protocol(1002, "a continuation of nothing"));
                    };
                    buf.extend_from_slice(&payload);
                    if fin {
                        return text(buf);
                    }
                    self.partial = Some(buf);
                }
                _ => return Err(ReadError::Protocol(1002, "unknown opcode")),
            }
        }
    }
}

/// XORs `payload` with the frame's `mask`, four bytes at a time.
fn unmask(payload: &mut [u8], mask: [u8; 4]) {
    let word = u32::from_ne_bytes(mask);
    let mut chunks = payload.chunks_exact_mut(4);
    for c in &mut chunks {
        let v = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) ^ word;
        c.copy_from_slice(&v.to_ne_bytes());
    }
    // The rest starts at a multiple of four: the mask's first bytes.
    for (b, m) in chunks.into_remainder().iter_mut().zip(mask) {
        *b ^= m;
    }
}

fn text(bytes: Vec<u8>) -> Result<Incoming, ReadError> {
    String::from_utf8(bytes)
        .map(Incoming::Text)
        .map_err(|_| ReadError::Protocol(1007, "a text message that is not UTF-8"))
}

/// One unmasked frame (FIN set) with `opcode` and `payload`.
pub(super) fn encode(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 10);
    encode_into(&mut out, opcode, payload);
    out
}

/// [`encode`], appended to `out` (a client's waiting bytes, `outlet.rs`).
pub(super) fn encode_into(out: &mut Vec<u8>, opcode: u8, payload: &[u8]) {
    out.reserve(payload.len() + 10);
    out.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => out.push(n as u8),
        n if n <= usize::from(u16::MAX) => {
            out.push(126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
}

/// A close frame with `code` and `reason` (cut to fit a control frame, on a char boundary).
pub(super) fn close_frame(code: u16, reason: &str) -> Vec<u8> {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    let mut payload = code.to_be_bytes().to_vec();
    payload.extend_from_slice(&reason.as_bytes()[..end]);
    encode(0x8, &payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(first: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [1u8, 2, 3, 4];
        let mut out = vec![first];
        match payload.len() {
            n if n < 126 => out.push(0x80 | n as u8),
            n => {
                out.push(0x80 | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
        }
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        out
    }

    #[test]
    fn reads_whole_fragmented_and_control_frames() {
        let mut wire = masked(0x81, b"{\"id\":1}");
        wire.extend(masked(0x01, b"{\"id\""));
        wire.extend(masked(0x89, b"p"));
        wire.extend(masked(0x80, b":2}"));
        wire.extend(masked(0x81, &[b'x'; 300]));
        wire.extend(masked(0x88, &[3, 232]));
        let mut r = FrameReader::new(1 << 20);
        let mut s = wire.as_slice();
        assert_eq!(r.read(&mut s).unwrap(), Incoming::Text("{\"id\":1}".into()));
        assert_eq!(r.read(&mut s).unwrap(), Incoming::Ping(b"p".to_vec()));
        assert_eq!(r.read(&mut s).unwrap(), Incoming::Text("{\"id\":2}".into()));
        assert_eq!(r.read(&mut s).unwrap(), Incoming::Text("x".repeat(300)));
        assert_eq!(r.read(&mut s).unwrap(), Incoming::Close);
        assert!(matches!(r.read(&mut s), Err(ReadError::Io(_))));
    }

    #[test]
    fn refuses_unmasked_oversized_and_bad_utf8() {
        let mut r = FrameReader::new(16);
        let unmasked = [0x81u8, 1, b'x'];
        assert!(matches!(
            r.read(&mut &unmasked[..]),
            Err(ReadError::Protocol(1002, _))
        ));
        let big = masked(0x81, &[b'x'; 17]);
        assert!(matches!(
            r.read(&mut big.as_slice()),
            Err(ReadError::Protocol(1009, _))
        ));
        let bad = masked(0x81, &[0xff, 0xfe]);
        assert!(matches!(
            r.read(&mut bad.as_slice()),
            Err(ReadError::Protocol(1007, _))
        ));
        // A payload cut short by the end of the stream.
        let cut = masked(0x81, b"{\"id\":12}");
        let e = r.read(&mut &cut[..cut.len() - 3]);
        assert!(
            matches!(&e, Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof),
            "{e:?}"
        );
    }

    #[test]
    fn unmasking_matches_the_byte_by_byte_rule_at_every_length_and_offset() {
        let mask = [0x12, 0x34, 0x56, 0x78];
        for len in 0..40 {
            let plain: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let mut wire: Vec<u8> = (plain.iter().enumerate())
                .map(|(i, b)| b ^ mask[i % 4])
                .collect();
            unmask(&mut wire, mask);
            assert_eq!(wire, plain, "length {len}");
        }
    }

    #[test]
    fn encodes_every_length_form() {
        assert_eq!(encode(0x1, b"hi"), vec![0x81, 2, b'h', b'i']);
        assert_eq!(&encode(0x1, &[0; 200])[..4], &[0x81, 126, 0, 200]);
        assert_eq!(&encode(0x1, &[0; 70_000])[..2], &[0x81, 127]);
        let c = close_frame(1001, &"é".repeat(100));
        assert_eq!(c[1] as usize, c.len() - 2);
        assert!(c.len() - 2 <= 125);
    }
}
