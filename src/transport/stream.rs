//! The byte stream under the WebSocket ([`Stream`]: plain TCP or TLS over the same [`Socket`]),
//! as the open WebSocket reads it ([`Watched`]: noticing raw HTTP where frames should be).

use std::io::{self, Read, Write};

use super::socket::Socket;
use crate::http1;

/// The byte stream under the WebSocket. The transport's module doc (`wss://`) says how TLS
/// fits in.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP (`ws://`).
    Plain(Socket),
    /// TLS over TCP (`wss://`), rustls.
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, Socket>>),
}

impl Stream {
    pub(super) fn socket_mut(&mut self) -> &mut Socket {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => &mut s.sock,
        }
    }
}

/// The upgrade's request and answer go over TLS as over TCP: the deadline is the socket's.
impl crate::http1::Timed for Stream {
    fn set_deadline(&mut self, deadline: crate::deadline::Deadline) {
        crate::http1::Timed::set_deadline(self.socket_mut(), deadline);
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// A [`Stream`] as the open WebSocket reads it, watching for raw HTTP. Some servers write an
/// HTTP response straight into an open WebSocket and close it: Browserless does, with
/// `HTTP/1.1 408 Request Timeout`, when its session time-out ends a session. Tungstenite then
/// reports a framing error ("Reserved bits are non-zero") or a reset, which says nothing useful;
/// this remembers the status line so that [`Transport::drain`](super::Transport::drain) can say
/// what really happened.
///
/// Only a read that *starts* with `HTTP/` counts (one comparison per read, nothing copied), and
/// any message parsed afterwards clears it, so a JSON message that happens to have `HTTP/` at a
/// read boundary never does. A response that arrives in the same read as a frame before it is
/// not recognised (the error is then reported as tungstenite words it).
#[derive(Debug)]
pub struct Watched {
    /// The stream read and written.
    pub(super) stream: Stream,
    /// The status line (`408 Request Timeout`) of raw HTTP seen at the start of a read.
    pub(super) http_status: Option<String>,
}

impl Watched {
    pub(super) fn new(stream: Stream) -> Watched {
        Watched {
            stream,
            http_status: None,
        }
    }
}

impl Read for Watched {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.stream.read(buf)?;
        if buf[..n].starts_with(b"HTTP/") {
            self.http_status = Some(http1::status_line(&buf[..n]));
        }
        Ok(n)
    }
}

impl Write for Watched {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}
