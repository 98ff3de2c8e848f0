//! The socket's syscalls where `sys_unix.rs` does not apply: a portable fallback without `unsafe`.
//!
//! A read or write without waiting switches the socket to non-blocking mode for that one call,
//! and a wait sleeps in short steps until the deadline (only a handshake or a stalled write
//! waits, so an idle supervisor still never wakes up). The mode is shared with the reader's
//! clone: a `peek` that starts while a writer has switched it sees `WouldBlock` and tries again
//! (see `Transport::wait_readable`).

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use super::Interest;
use crate::deadline::{Deadline, Left};

/// The longest sleep of a wait.
const STEP: Duration = Duration::from_millis(5);

fn without_waiting<T>(
    tcp: &TcpStream,
    op: impl FnOnce(&TcpStream) -> io::Result<T>,
) -> io::Result<T> {
    tcp.set_nonblocking(true)?;
    let r = op(tcp);
    tcp.set_nonblocking(false)?;
    r
}

/// Reads what is there without waiting (`WouldBlock` when nothing is).
pub(super) fn try_recv(tcp: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    without_waiting(tcp, |mut t| t.read(buf))
}

/// Writes what fits without waiting (`WouldBlock` when nothing does).
pub(super) fn try_send(tcp: &TcpStream, buf: &[u8]) -> io::Result<usize> {
    without_waiting(tcp, |mut t| t.write(buf))
}

/// Sleeps one step (at most until `until`); `Ok(false)` once the deadline has passed. The
/// caller then simply tries again.
pub(super) fn wait(_tcp: &TcpStream, _interest: Interest, until: Deadline) -> io::Result<bool> {
    match until.left() {
        Left::Passed => Ok(false),
        Left::In(d) => {
            std::thread::sleep(d.min(STEP));
            Ok(true)
        }
        Left::Never => {
            std::thread::sleep(STEP);
            Ok(true)
        }
    }
}

/// Sleeps one step (at most until `until`) and says that everything may be ready: the caller
/// tries each without waiting.
pub(super) fn wait_readable_any(
    listener: &TcpListener,
    streams: &[&TcpStream],
    until: Deadline,
) -> io::Result<Vec<bool>> {
    let _ = listener;
    let slept = match streams.first() {
        Some(s) => wait(s, Interest::Read, until)?,
        None => match until.left() {
            Left::Passed => false,
            Left::In(d) => {
                std::thread::sleep(d.min(STEP));
                true
            }
            Left::Never => {
                std::thread::sleep(STEP);
                true
            }
        },
    };
    Ok(vec![slept; streams.len() + 1])
}
