//! A TCP socket whose every `read` and `write` is bounded by what it is doing ([`Mode`]): the
//! layer under TLS and the WebSocket, under `http://` discovery's `GET`, and under every
//! connection of the MCP HTTP server (through `http1::Timed`).
//!
//! Its three syscalls (read or write without waiting, wait for readiness until a deadline) are
//! the `sys` module: `sys_unix.rs` on Unix, `sys_portable.rs` elsewhere.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::deadline::Deadline;

// The platform split, as jobserver and mio lay it out: one file per platform, the same three
// functions in each (`try_recv`, `try_send`, `wait`). The Unix one makes the syscalls itself:
// each `unsafe` block has a SAFETY comment and checks its return value.
#[cfg(unix)]
#[path = "sys_unix.rs"]
#[allow(unsafe_code)]
mod sys;
#[cfg(not(unix))]
#[path = "sys_portable.rs"]
mod sys;

/// How long writes may make no progress at all before the connection is declared broken.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the [`Socket`] is doing, which says how long its `read`/`write` may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Connecting (TLS, the WebSocket upgrade, `http://` discovery): reads and writes wait until
    /// the deadline, then fail with `TimedOut`.
    Handshake(Deadline),
    /// Writing one frame for a caller whose call ends at the deadline. Writes wait until then
    /// (`WouldBlock` after it) or until [`WRITE_TIMEOUT`] without progress (`TimedOut`); reads
    /// answer `WouldBlock` at once without a syscall (a writer never consumes incoming bytes).
    Write(Deadline),
    /// The reader draining what arrived: nothing waits.
    Drain,
}

/// A TCP socket whose every `read`/`write` is bounded by its [`Mode`] (see the transport's
/// module doc). Written only under the transport's lock (or before the transport exists).
#[derive(Debug)]
pub struct Socket {
    tcp: TcpStream,
    mode: Mode,
    /// Since when writes have been blocked without progress (`None`: the last write progressed).
    /// Kept across frames, so a run of short-deadline calls cannot hide a dead peer.
    stalled_since: Option<Instant>,
    /// In [`Mode::Drain`]: a read came back shorter than asked, so the kernel had nothing more
    /// at that moment; the next read answers `WouldBlock` without a syscall. Whatever arrives
    /// later wakes the reader's next wait. Cleared by [`Socket::set_mode`].
    emptied: bool,
}

/// What [`Socket`] waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interest {
    /// Bytes to read (or the end of the stream).
    Read,
    /// Room to write.
    Write,
}

impl Socket {
    /// Wraps a connected socket, in [`Mode::Handshake`] until `deadline`.
    pub(crate) fn new(tcp: TcpStream, deadline: Deadline) -> Socket {
        Socket {
            tcp,
            mode: Mode::Handshake(deadline),
            stalled_since: None,
            emptied: false,
        }
    }

    /// Sets what the next reads and writes may wait for.
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
        self.emptied = false;
    }

    /// The TCP socket under it (to wait on it, to shut it down).
    pub(crate) fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// The TCP socket under it, for another owner.
    pub(crate) fn into_tcp(self) -> TcpStream {
        self.tcp
    }

    fn try_recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        sys::try_recv(&self.tcp, buf)
    }

    fn try_send(&self, buf: &[u8]) -> io::Result<usize> {
        sys::try_send(&self.tcp, buf)
    }

    /// Waits until the socket is ready for `interest` (or reports an error or hang-up), or
    /// `until` passes. `Ok(false)`: the deadline passed.
    fn wait(&self, interest: Interest, until: Deadline) -> io::Result<bool> {
        sys::wait(&self.tcp, interest, until)
    }
}

/// For HTTP/1.1 (`crate::http1`): a deadline is [`Mode::Handshake`] until it.
impl crate::http1::Timed for Socket {
    fn set_deadline(&mut self, deadline: Deadline) {
        self.set_mode(Mode::Handshake(deadline));
    }
}

/// The error for a connect deadline that passed.
fn handshake_timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the connect deadline passed")
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.mode {
            Mode::Write(_) => Err(io::ErrorKind::WouldBlock.into()),
            Mode::Drain if self.emptied => Err(io::ErrorKind::WouldBlock.into()),
            Mode::Drain => {
                let n = self.try_recv(buf)?;
                self.emptied = n > 0 && n < buf.len();
                Ok(n)
            }
            Mode::Handshake(until) => loop {
                match self.try_recv(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if !self.wait(Interest::Read, until)? {
                            return Err(handshake_timed_out());
                        }
                    }
                    r => return r,
                }
            },
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.try_send(buf) {
                Ok(n) => {
                    self.stalled_since = None;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            match self.mode {
                Mode::Drain => return Err(io::ErrorKind::WouldBlock.into()),
                Mode::Handshake(until) => {
                    if !self.wait(Interest::Write, until)? {
                        return Err(handshake_timed_out());
                    }
                }
                Mode::Write(call) => {
                    let since = *self.stalled_since.get_or_insert_with(Instant::now);
                    let stall = Deadline::from_start(since, WRITE_TIMEOUT);
                    if !self.wait(Interest::Write, call.earliest(stall))? {
                        return Err(if stall.passed() {
                            io::Error::new(
                                io::ErrorKind::TimedOut,
                                format!("the browser read nothing for {WRITE_TIMEOUT:?}"),
                            )
                        } else {
                            io::Error::new(
                                io::ErrorKind::WouldBlock,
                                "the call's deadline passed while its frame was being written",
                            )
                        });
                    }
                }
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Waits until `listener` has a connection waiting or one of `streams` has bytes (or reports
/// an error or hang-up), or `until` passes: which may be ready, the listener first. One
/// `poll(2)` for all on Unix; elsewhere a short sleep after which everything may be (the caller
/// tries each without waiting).
pub(crate) fn wait_readable_any(
    listener: &TcpListener,
    streams: &[&TcpStream],
    until: Deadline,
) -> io::Result<Vec<bool>> {
    sys::wait_readable_any(listener, streams, until)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    use super::*;

    #[test]
    fn a_drain_stops_after_a_short_read_and_the_next_drain_reads_what_came_since() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (ours, _) = l.accept().unwrap();
        let mut s = Socket::new(ours, Deadline::NEVER);
        peer.write_all(b"first").unwrap();
        s.set_mode(Mode::Handshake(Deadline::after(Duration::from_secs(5))));
        let mut one = [0u8; 1];
        s.read_exact(&mut one).unwrap(); // waits until "first" is there
        s.set_mode(Mode::Drain);
        let mut buf = [0u8; 64];
        assert_eq!(s.read(&mut buf).unwrap(), 4, "the rest of what was there");
        assert_eq!(&buf[..4], b"irst");
        // What arrives now is left for the next drain (the reader's wait sees it first).
        peer.write_all(b"second").unwrap();
        let mut probe = [0u8; 6];
        let until = Instant::now() + Duration::from_secs(5);
        while s.tcp().peek(&mut probe).unwrap() < 6 {
            assert!(Instant::now() < until, "the bytes never came");
        }
        let e = s.read(&mut buf).unwrap_err();
        assert_eq!(
            e.kind(),
            io::ErrorKind::WouldBlock,
            "no second recv in this drain"
        );
        s.set_mode(Mode::Drain);
        assert_eq!(s.read(&mut buf).unwrap(), 6);
        assert_eq!(&buf[..6], b"second");
        // A full read says nothing about what is left: the next read asks the kernel.
        peer.write_all(&[7u8; 100]).unwrap();
        while s.tcp().peek(&mut probe).unwrap() < 6 {
            assert!(Instant::now() < until, "the bytes never came");
        }
        s.set_mode(Mode::Drain);
        let mut small = [0u8; 10];
        assert_eq!(s.read(&mut small).unwrap(), 10);
        assert_eq!(s.read(&mut small).unwrap(), 10);
    }
}
