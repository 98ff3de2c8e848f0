//! The socket's syscalls on Unix: `recv`/`send` with `MSG_DONTWAIT`, and `poll(2)` with the time
//! left to a deadline.
//!
//! `MSG_DONTWAIT` never waits whatever the socket's mode, so the socket stays blocking and the
//! reader's `peek` on its clone keeps blocking (see the transport's module doc). The same three
//! functions, without `unsafe`, are in `sys_portable.rs` for every other platform.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;

use super::Interest;
use crate::deadline::{Deadline, Left};

/// `Err(last_os_error)` when a libc call returned -1 (jobserver-rs' `cvt`).
fn cvt(rc: isize) -> io::Result<usize> {
    usize::try_from(rc).map_err(|_| io::Error::last_os_error())
}

#[cfg(target_os = "linux")]
const SEND_FLAGS: libc::c_int = libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL;
#[cfg(not(target_os = "linux"))]
const SEND_FLAGS: libc::c_int = libc::MSG_DONTWAIT;

/// Reads what is there without waiting (`WouldBlock` when nothing is).
pub(super) fn try_recv(tcp: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the duration of the
        // call; the return value is checked by `cvt`.
        let rc = unsafe {
            libc::recv(
                tcp.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        match cvt(rc) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Writes what fits without waiting (`WouldBlock` when nothing does).
pub(super) fn try_send(tcp: &TcpStream, buf: &[u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the duration of the
        // call; the return value is checked by `cvt`.
        let rc = unsafe { libc::send(tcp.as_raw_fd(), buf.as_ptr().cast(), buf.len(), SEND_FLAGS) };
        match cvt(rc) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// Waits until `interest` or an error/hang-up is reported, or `until` passes. `Ok(false)`:
/// the deadline passed.
pub(super) fn wait(tcp: &TcpStream, interest: Interest, until: Deadline) -> io::Result<bool> {
    let events = match interest {
        Interest::Read => libc::POLLIN,
        Interest::Write => libc::POLLOUT,
    };
    loop {
        let left = until.left();
        if left == Left::Passed {
            return Ok(false);
        }
        let mut pfd = libc::pollfd {
            fd: tcp.as_raw_fd(),
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd, on this stack frame, and a count of 1; the return value
        // is checked by `cvt`.
        let rc = unsafe { libc::poll(&mut pfd, 1, left.poll_millis()) };
        match cvt(rc as isize) {
            Ok(0) => {} // time-out: the loop re-reads the deadline
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Waits until `listener` has a connection waiting or one of `streams` has bytes (or reports an
/// error or hang-up), or `until` passes: which are ready, the listener first (all false: the
/// deadline passed).
pub(super) fn wait_readable_any(
    listener: &TcpListener,
    streams: &[&TcpStream],
    until: Deadline,
) -> io::Result<Vec<bool>> {
    let mut pfds: Vec<libc::pollfd> = std::iter::once(listener.as_raw_fd())
        .chain(streams.iter().map(|s| s.as_raw_fd()))
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let count = libc::nfds_t::try_from(pfds.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many sockets to poll"))?;
    loop {
        let left = until.left();
        if left == Left::Passed {
            return Ok(vec![false; pfds.len()]);
        }
        // SAFETY: `pfds` is a valid array of `count` pollfds, alive for the call; the return
        // value is checked by `cvt`.
        let rc = unsafe { libc::poll(pfds.as_mut_ptr(), count, left.poll_millis()) };
        match cvt(rc as isize) {
            Ok(0) => {} // time-out: the loop re-reads the deadline
            Ok(_) => return Ok(pfds.iter().map(|p| p.revents != 0).collect()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
