//! One admitted connection's thread: its reading half (a [`Conn`] it owns; the writing half,
//! [`Out`], is shared), its loop over keep-alive requests, and how each [`Outcome`] is
//! written: at once, by a worker while the thread waits for the client, or as a listen stream.

use std::net::TcpStream;
use std::sync::Arc;

use crossbeam_channel::{Receiver, TryRecvError};

use super::Shared;
use super::out::{LIMITS, LINGER, Out, cannot_read, write_answer};
use super::route::{self, Outcome};
use crate::deadline::Deadline;
use crate::http1::{Conn, RequestHead};
use crate::mcp::pool::Key;
use crate::transport::Socket;

/// Serves connection `id` (admitted by the acceptor with its first request `head`, and
/// `leftover`, what came after that head) until the client closes it, it idles out, an answer
/// ends it, or the server shuts down.
pub(super) fn serve(
    sh: &Arc<Shared>,
    id: u64,
    tcp: TcpStream,
    head: RequestHead,
    leftover: Vec<u8>,
) {
    let (Ok(read_half), Ok(write_half)) = (tcp.try_clone(), tcp.try_clone()) else {
        return;
    };
    let out = Arc::new(Out::new(id, Socket::new(write_half, Deadline::NEVER), tcp));
    let mut conn = Conn::with_buffered(Socket::new(read_half, Deadline::NEVER), leftover);
    let opts = &sh.options;
    let mut head = head;
    loop {
        let keep_alive = head.keep_alive();
        let (go_on, unread) = match route::handle(sh, &head, &mut conn, &out, keep_alive) {
            Outcome::Now { response, close } => {
                let keep = keep_alive && !close;
                (out.send(&response.bytes(keep)) && keep, close)
            }
            Outcome::Answered { answer, modern } => (
                write_answer(&out, answer, modern, keep_alive) && keep_alive,
                false,
            ),
            Outcome::Later { key, done } => (
                wait_for_answer(sh, &mut conn, &out, &key, &done) && keep_alive,
                false,
            ),
            Outcome::Stream { channel } => {
                route::follow_stream(sh, &mut conn, channel);
                (false, false)
            }
        };
        if !go_on || sh.closing.load(std::sync::atomic::Ordering::Acquire) {
            end(&out, &mut conn, unread);
            return;
        }
        let idle = Deadline::after(opts.idle_timeout);
        head = match conn.read_request(idle, Some(opts.header_timeout), &LIMITS) {
            Ok(Some(h)) => h,
            Ok(None) => return end(&out, &mut conn, false),
            Err(e) => {
                log::debug!("MCP over HTTP: {e}");
                if e.status().is_some() {
                    out.send(&cannot_read(&e).bytes(false));
                }
                return end(&out, &mut conn, true);
            }
        };
    }
}

/// Closes the connection; `unread`: the client may still be sending a request the server did
/// not read, so what it sends is read and dropped first ([`LINGER`] at most), for the client
/// to read the answer rather than a reset.
fn end(out: &Out, conn: &mut Conn<Socket>, unread: bool) {
    if unread {
        out.close_write();
        conn.drain(Deadline::after(LINGER));
    }
    out.close();
}

/// Waits for a worker's answer while watching the client: true when the answer was written
/// and the connection may go on; false when it must close (the client left, and its call was
/// cancelled; or no answer was written). A worker whose answer ends the connection closes it
/// itself (`Responder`), which ends this wait at once.
fn wait_for_answer(
    sh: &Shared,
    conn: &mut Conn<Socket>,
    out: &Out,
    key: &Key,
    done: &Receiver<bool>,
) -> bool {
    loop {
        match done.try_recv() {
            Ok(written) => return written,
            Err(TryRecvError::Disconnected) => return false,
            Err(TryRecvError::Empty) => {}
        }
        match conn.watch(Deadline::after(sh.options.idle_timeout)) {
            // The next request (pipelined) or the client's next bytes: answer this one first.
            Ok(true) => return done.recv().unwrap_or(false),
            Ok(false) => {
                if done.try_recv().is_err() && sh.mcp.inner.pool.cancel(key) {
                    log::debug!("MCP over HTTP: the client left; its call is cancelled");
                }
                return false;
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => {
                sh.mcp.inner.pool.cancel(key);
                out.close();
                return false;
            }
        }
    }
}
