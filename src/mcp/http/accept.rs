//! The acceptor: every new connection is held here, without a thread of its own, until its
//! first request head is whole; then the access rules decide whether it gets a thread and a
//! place (module doc of `http`, "Threads and limits").
//!
//! One thread waits in one `poll(2)` on the listener and every connection it holds (blocking in
//! `accept` when it holds none, so an idle server never wakes up), reads what arrived without
//! waiting, and parses a head only when an empty line may have ended it. A connection it holds
//! is closed when its head does not arrive by the header timeout (408 when part of one came),
//! or when more connections than `max_new_connections` wait and it is the oldest. A refusal
//! (the access rules' 400/401/403, 503 when every place is taken, 400/431 for a head `http1`
//! refuses) is written here, then the write side is shut and what the client still sends is
//! read and dropped until it closes (at most [`LINGER`]): closing a socket with unread bytes
//! resets the connection, and a client still sending its request then sees the reset instead
//! of the answer.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Shared;
use super::conn::{self, LIMITS, LINGER, cannot_read};
use crate::deadline::Deadline;
use crate::http1::{self, HttpError, RequestHead, Response};
use crate::mcp::rpc;
use crate::transport::{Mode, Socket, wait_readable_any};

/// Stack size of connection threads (they parse request heads and bodies, nothing deep).
const CONN_STACK: usize = 512 * 1024;

/// Connections taken from the listener per wake-up, so that the ones held are read in turn.
const ACCEPT_BURST: usize = 64;

/// A connection held until its first head is whole, or until its refusal is read.
struct Held {
    /// Its socket, read and written without waiting (`Mode::Drain`).
    socket: Socket,
    /// What it sent so far (a refused one: nothing is kept).
    buf: Vec<u8>,
    /// When it was taken (the oldest is closed first).
    since: Instant,
    /// When its head must be whole, or, once refused, when it is closed anyway.
    deadline: Deadline,
    /// Refused: its answer is written and its write side shut.
    refused: bool,
}

/// What became of a held connection after a step.
enum Step {
    Hold(Held),
    Drop,
    Admit(Held, RequestHead, usize),
}

/// The acceptor's loop, until shutdown (module doc).
pub(super) fn run(sh: &Arc<Shared>, listener: &TcpListener) {
    let mut held: Vec<Held> = Vec::new();
    loop {
        if sh.closing.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        if held.is_empty() {
            let _ = listener.set_nonblocking(false);
            let taken = listener.accept();
            let _ = listener.set_nonblocking(true);
            match taken {
                Ok((tcp, _)) => take(sh, &mut held, tcp),
                Err(e) => pause(&e),
            }
            continue;
        }
        let until = held
            .iter()
            .map(|h| h.deadline)
            .reduce(Deadline::earliest)
            .unwrap_or(Deadline::NEVER);
        let ready = {
            let streams: Vec<&TcpStream> = held.iter().map(|h| h.socket.tcp()).collect();
            match wait_readable_any(listener, &streams, until) {
                Ok(r) => r,
                Err(e) => {
                    pause(&e);
                    continue;
                }
            }
        };
        if sh.closing.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let mut kept = Vec::with_capacity(held.len());
        for (h, ready) in held.drain(..).zip(ready.iter().skip(1)) {
            match step(h, *ready) {
                Step::Hold(h) => kept.push(h),
                Step::Drop => {}
                Step::Admit(h, head, len) => admit(sh, h, head, len, &mut kept),
            }
        }
        held = kept;
        if ready.first().copied().unwrap_or(false) {
            for _ in 0..ACCEPT_BURST {
                match listener.accept() {
                    Ok((tcp, _)) => take(sh, &mut held, tcp),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        pause(&e);
                        break;
                    }
                }
            }
        }
    }
}

/// After a failed `accept` or `poll` (out of descriptors and the like): say so, and give the
/// system a moment.
fn pause(e: &io::Error) {
    if e.kind() != io::ErrorKind::WouldBlock {
        log::warn!("MCP over HTTP: accept failed: {e}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Takes a new connection: reads what it sent with its connect (a client usually sends its
/// request at once, so that one is admitted here and never held), else holds it, closing one
/// held connection first when there are too many: a refused one, else the oldest that sent
/// nothing, else the oldest.
fn take(sh: &Arc<Shared>, held: &mut Vec<Held>, tcp: TcpStream) {
    // Where an accepted socket inherits the listener's non-blocking mode (BSDs), undo it:
    // `Socket` says per call whether it waits.
    let _ = tcp.set_nonblocking(false);
    let _ = tcp.set_nodelay(true);
    let mut socket = Socket::new(tcp, Deadline::NEVER);
    socket.set_mode(Mode::Drain);
    let h = Held {
        socket,
        buf: Vec::new(),
        since: Instant::now(),
        deadline: Deadline::after(sh.options.header_timeout),
        refused: false,
    };
    let h = match step(h, true) {
        Step::Hold(h) => h,
        Step::Drop => return,
        Step::Admit(h, head, len) => return admit(sh, h, head, len, held),
    };
    make_room(sh, held);
    held.push(h);
}

/// Closes held connections until one more fits: a refused one first, else the oldest that sent
/// nothing (looked at once more first: a request that arrived since is served, and the next
/// one is chosen), else the oldest.
fn make_room(sh: &Arc<Shared>, held: &mut Vec<Held>) {
    while held.len() >= sh.options.max_new_connections {
        let Some(i) = held
            .iter()
            .enumerate()
            .min_by_key(|(_, h)| (!h.refused, !h.buf.is_empty(), h.since))
            .map(|(i, _)| i)
        else {
            return;
        };
        let victim = held.swap_remove(i);
        if victim.refused || !victim.buf.is_empty() {
            log::debug!("MCP over HTTP: too many new connections; the oldest is closed");
            continue;
        }
        match step(victim, true) {
            Step::Hold(h) if h.buf.is_empty() && !h.refused => {
                log::debug!("MCP over HTTP: too many new connections; a silent one is closed");
            }
            Step::Hold(h) => held.push(h),
            Step::Drop => {}
            Step::Admit(h, head, len) => admit(sh, h, head, len, held),
        }
    }
}

/// Reads what a held connection sent (when `ready`), and decides what becomes of it.
fn step(mut h: Held, ready: bool) -> Step {
    if ready {
        let mut chunk = [0u8; 16 * 1024];
        let before = h.buf.len();
        match h.socket.read(&mut chunk) {
            Ok(0) => return Step::Drop,
            Ok(n) if !h.refused => h.buf.extend_from_slice(&chunk[..n]),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return Step::Drop,
        }
        let grew = h.buf.len() > before;
        let look = before == 0 || h.buf.len() > LIMITS.head || http1::may_end_head(&h.buf, before);
        if grew && look {
            match http1::parse_request(&h.buf, &LIMITS) {
                Ok(Some((head, len))) => return Step::Admit(h, head, len),
                Ok(None) => {}
                Err(e) => {
                    log::debug!("MCP over HTTP: {e}");
                    let response = cannot_read(&e);
                    refuse(&mut h, &response);
                    return Step::Hold(h);
                }
            }
        }
    }
    if h.deadline.passed() {
        if h.refused || h.buf.is_empty() {
            return Step::Drop;
        }
        let timed_out = HttpError::TimedOut {
            part: http1::Part::Head,
            read: h.buf.len(),
        };
        refuse(&mut h, &cannot_read(&timed_out));
    }
    Step::Hold(h)
}

/// Writes `response` (it fits in a fresh socket's buffer), shuts the write side, and keeps the
/// connection to read what it still sends until it closes or [`LINGER`] passes.
fn refuse(h: &mut Held, response: &Response) {
    let _ = h.socket.write(&response.bytes(false));
    let _ = h.socket.tcp().shutdown(Shutdown::Write);
    h.buf = Vec::new();
    h.refused = true;
    h.deadline = Deadline::after(LINGER);
}

/// A whole first head: refused by the access rules, or given a place and a thread, or refused
/// with 503 when every place is taken.
fn admit(sh: &Arc<Shared>, mut h: Held, head: RequestHead, len: usize, held: &mut Vec<Held>) {
    if let Some(response) = sh.access.refusal(&head) {
        refuse(&mut h, &response);
        held.push(h);
        return;
    }
    let Some(n) = sh.places.admit(h.socket.tcp()) else {
        log::debug!(
            "MCP over HTTP: all {} connection places are taken; 503",
            sh.options.max_connections
        );
        let busy = Response::json(
            503,
            rpc::error(
                None,
                -32000,
                format!(
                    "too many connections ({}); retry later",
                    sh.options.max_connections
                ),
            ),
        )
        .with("Retry-After", "1");
        refuse(&mut h, &busy);
        held.push(h);
        return;
    };
    let leftover = h.buf[len..].to_vec();
    let tcp = h.socket.into_tcp();
    let shared = Arc::clone(sh);
    let spawned = std::thread::Builder::new()
        .name("mcp-http-conn".into())
        .stack_size(CONN_STACK)
        .spawn(move || {
            conn::serve(&shared, n, tcp, head, leftover);
            shared.places.release(n);
        });
    if let Err(e) = spawned {
        log::warn!("MCP over HTTP: cannot start a connection thread: {e}");
        sh.places.release(n);
    }
}
