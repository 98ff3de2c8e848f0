//! One admitted connection: its thread's loop over keep-alive requests (the reading half, a
//! [`Conn`] it owns), its writing half ([`Out`], shared by everyone who writes to it: its
//! thread, the worker that answers its call, the notifier that feeds its listen stream), and
//! how each of `route`'s [`Plan`]s is carried out: a response now, the engine's answer now or
//! from a worker while the thread waits for the client, or a listen stream that holds the
//! connection until it ends. An answer goes out as a JSON body, or as an SSE stream when
//! notifications precede it; a 2026-07-28 answer's status follows its error code
//! (`route::status_of`).

use crate::sync;
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded};

use super::route::{self, Plan};
use super::{ENDPOINT, Shared};
use crate::deadline::Deadline;
use crate::http1::{self, Conn, HttpError, Limits, RequestHead, Response};
use crate::mcp::MAX_LINE;
use crate::mcp::engine::{Answer, Client, Key, Request, Served, Sink};
use crate::mcp::rpc;
use crate::page;
use crate::transport::Socket;

/// How long a connection that is closed with a request possibly unread (a refusal) is read,
/// what it sends dropped, before the close: closing a socket with unread bytes resets the
/// connection, and a client still sending its request then sees the reset instead of the
/// answer.
pub(super) const LINGER: Duration = Duration::from_secs(2);

/// The caps on a request: a head of 64 KiB and 64 lines (431 past them), a body of the stdio
/// line cap (413 past it).
pub(super) const LIMITS: Limits = Limits {
    head: 64 * 1024,
    headers: 64,
    body: MAX_LINE,
};

/// How long a write of an answer may find the client reading nothing before the connection
/// is given up.
const WRITE_STALL: Duration = Duration::from_secs(10);

/// The same for a frame of an event stream (written under the lock of every stream, so
/// shorter: a client that stops reading loses its stream instead of holding the others).
const STREAM_WRITE_STALL: Duration = Duration::from_secs(2);

/// The writing half of a connection, shared by its thread, the worker answering its call and
/// the notifier writing to its event stream; and its number among the server's connections.
struct Out {
    /// The connection's number (`access::Places::admit`).
    id: u64,
    socket: Mutex<Socket>,
    /// To shut the connection down without the write lock (a writer may hold it while the
    /// client reads nothing).
    tcp: TcpStream,
}

impl Out {
    /// The writing half of connection `id`: `socket` to write on, `tcp` to shut it down.
    fn new(id: u64, socket: Socket, tcp: TcpStream) -> Out {
        Out {
            id,
            socket: Mutex::new(socket),
            tcp,
        }
    }

    /// Writes `bytes` whole (an answer): false when the client read nothing for
    /// [`WRITE_STALL`], or the connection failed.
    fn send(&self, bytes: &[u8]) -> bool {
        self.send_within(bytes, WRITE_STALL, Deadline::NEVER)
    }

    /// Writes `bytes` whole, each write waiting at most `stall`, none past `by`.
    fn send_within(&self, bytes: &[u8], stall: Duration, by: Deadline) -> bool {
        let mut socket = sync::lock(&self.socket);
        http1::write_all(&mut *socket, bytes, stall, by).is_ok()
    }

    /// Ends the connection in both directions: its thread, waiting for the client, wakes and
    /// ends (an answer that says `close` is out, a stream ended, a write failed).
    fn close(&self) {
        let _ = self.tcp.shutdown(Shutdown::Both);
    }

    /// Shuts the write side only: the client reads what was written, then the end.
    fn close_write(&self) {
        let _ = self.tcp.shutdown(Shutdown::Write);
    }
}

/// The answer to a request that could not be read (`http1` says which status).
pub(super) fn cannot_read(e: &HttpError) -> Response {
    let status = e.status().unwrap_or(400);
    let what = match status {
        408 => "request timeout",
        413 => "content too large",
        431 => "request header fields too large",
        _ => "bad request",
    };
    Response::json(
        status,
        rpc::error(None, rpc::code::INVALID_REQUEST, format!("{what}: {e}")),
    )
}

/// The head of a Server-Sent Events answer (chunked, so the connection can be kept).
fn sse_head(keep_alive: bool) -> Vec<u8> {
    http1::chunked_head(
        "text/event-stream",
        &[
            ("Cache-Control", "no-cache, no-store".into()),
            ("X-Accel-Buffering", "no".into()),
        ],
        keep_alive,
    )
}

/// One SSE `message` event carrying the JSON text `json`, as one chunk.
fn sse_event(json: &str) -> Vec<u8> {
    http1::chunk(format!("event: message\ndata: {json}\n\n").as_bytes())
}

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
        let (go_on, unread) = if head.path() != ENDPOINT || !sh.options.mcp_endpoint {
            page_request(sh, &head, &mut conn, &out, keep_alive)
        } else {
            match route::head(sh, &head) {
                Plan::ReadBody => match read_body(sh, &head, &mut conn, &out, MAX_LINE) {
                    Ok(body) => {
                        let plan = route::post(sh, &head, &body);
                        carry_out(sh, plan, &mut conn, &out, keep_alive)
                    }
                    Err(e) => {
                        log::debug!("MCP over HTTP: {e}");
                        respond(&out, cannot_read(&e), true, keep_alive)
                    }
                },
                plan => carry_out(sh, plan, &mut conn, &out, keep_alive),
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

/// A request of the supervisor page (`crate::page`), once the access rules let it in: whether
/// the connection goes on, and whether a body may be left unread.
fn page_request(
    sh: &Shared,
    head: &RequestHead,
    conn: &mut Conn<Socket>,
    out: &Out,
    keep_alive: bool,
) -> (bool, bool) {
    if let Some(refusal) = sh.access.refusal(head) {
        return respond(out, refusal, head.has_body(), keep_alive);
    }
    let response = match page::head(head, sh.access.login_cookie(head)) {
        page::PagePlan::Respond(response) => {
            return respond(out, response, head.has_body(), keep_alive);
        }
        page::PagePlan::Events => return events(sh, out),
        page::PagePlan::ReadBody => match read_body(sh, head, conn, out, page::BODY_MAX) {
            Ok(body) => page::post(sh.mcp.registry(), head, &body),
            Err(e) => {
                log::debug!("supervisor page: {e}");
                return respond(out, cannot_read(&e), true, keep_alive);
            }
        },
    };
    respond(out, response, false, keep_alive)
}

/// The supervisor page's event stream on this connection (`page::Hub::stream`), in a listen
/// stream's place (none free: 503), each event written within [`STREAM_WRITE_STALL`]. The
/// connection then closes.
fn events(sh: &Shared, out: &Out) -> (bool, bool) {
    if !sh.places.start_listening(out.id) {
        let busy = Response::typed(
            503,
            "text/plain; charset=utf-8",
            "too many open event streams; retry later".into(),
        )
        .with("Retry-After", "1");
        out.send(&busy.bytes(false));
        return (false, false);
    }
    let Ok(tcp) = out.tcp.try_clone() else {
        return (false, false);
    };
    let send = |bytes: &[u8]| out.send_within(bytes, STREAM_WRITE_STALL, Deadline::NEVER);
    if send(&sse_head(false)) {
        sh.hub.stream(tcp, send);
    }
    (false, false)
}

/// A POST's body, within the body timeout and `max` bytes (`100 Continue` first when the client
/// waits for it).
fn read_body(
    sh: &Shared,
    head: &RequestHead,
    conn: &mut Conn<Socket>,
    out: &Out,
    max: usize,
) -> Result<Vec<u8>, HttpError> {
    let deadline = Deadline::after(sh.options.body_timeout);
    let framing = head.framing()?;
    if head.expects_continue() {
        out.send(&Response::empty(100).bytes(true));
    }
    conn.read_body(framing, max, &LIMITS, deadline)
}

/// Writes `response`: whether the connection goes on, and whether a body may be left unread
/// (`close`: the response ends the connection).
fn respond(out: &Out, response: Response, close: bool, keep_alive: bool) -> (bool, bool) {
    let keep = keep_alive && !close;
    (out.send(&response.bytes(keep)) && keep, close)
}

/// Carries out `plan` (never [`Plan::ReadBody`]): whether the connection goes on, and whether
/// a body may be left unread.
fn carry_out(
    sh: &Shared,
    plan: Plan,
    conn: &mut Conn<Socket>,
    out: &Arc<Out>,
    keep_alive: bool,
) -> (bool, bool) {
    match plan {
        Plan::Respond { response, close } => respond(out, response, close, keep_alive),
        Plan::ReadBody => (false, true),
        Plan::Serve { request, client } => {
            (answer(sh, request, &client, conn, out, keep_alive), false)
        }
        Plan::Listen { request, client } => listen(sh, request, client, conn, out, keep_alive),
    }
}

/// Has the engine answer `request`, and writes the answer, or waits while a worker writes it;
/// true when the connection may go on.
fn answer(
    sh: &Shared,
    request: Request,
    client: &Client,
    conn: &mut Conn<Socket>,
    out: &Arc<Out>,
    keep_alive: bool,
) -> bool {
    let stateless = request.stateless();
    let (done, written) = bounded(1);
    let responder = Responder {
        out: Arc::clone(out),
        keep_alive,
        stateless,
        done,
    };
    match sh
        .mcp
        .engine
        .serve(request, client, move |a| responder.answer(a))
    {
        Served::Now(answer) => write_answer(out, answer, stateless, keep_alive) && keep_alive,
        Served::Later(key) => wait_for_answer(sh, conn, out, &key, &written) && keep_alive,
    }
}

/// Opens a `subscriptions/listen` stream on this POST's connection, which moves to a listen
/// stream's place (none free: 503) and closes when the stream ends: its client leaves or sends
/// more (a next request cannot be answered behind an endless one), or the stream's response
/// is written (shutdown).
fn listen(
    sh: &Shared,
    request: Request,
    mut client: Client,
    conn: &mut Conn<Socket>,
    out: &Arc<Out>,
    keep_alive: bool,
) -> (bool, bool) {
    if !sh.places.start_listening(out.id) {
        let max = sh.options.max_listen_streams;
        let busy = Response::json(
            503,
            rpc::error(
                Some(&request.id),
                -32000,
                format!("too many subscriptions/listen streams over HTTP ({max}); retry later"),
            ),
        )
        .with("Retry-After", "1");
        return respond(out, busy, false, keep_alive);
    }
    client.stream = Some(Arc::new(StreamSink {
        out: Arc::clone(out),
        state: Mutex::default(),
    }));
    let answer = sh.mcp.engine.answer(&request, &client);
    if answer.line.is_some() {
        // Refused (a bad filter, too many streams): a plain answer, nothing was streamed.
        sh.places.stop_listening(out.id);
        return (
            write_answer(out, answer, true, keep_alive) && keep_alive,
            false,
        );
    }
    // Waits, without a deadline (no wake-ups), for the client to go or the stream to end (its
    // sink closes the connection); then the stream is dropped, if it is still open.
    let _ = conn.watch(Deadline::NEVER);
    sh.mcp.engine.forget(client.channel);
    (false, false)
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
                if done.try_recv().is_err() && sh.mcp.engine.cancel(key) {
                    log::debug!("MCP over HTTP: the client left; its call is cancelled");
                }
                return false;
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => {
                sh.mcp.engine.cancel(key);
                out.close();
                return false;
            }
        }
    }
}

/// Writes a worker's answer on the request's connection.
struct Responder {
    out: Arc<Out>,
    keep_alive: bool,
    stateless: bool,
    /// Sent `true` once written (`false`: the write failed); dropped unsent when the call was
    /// cancelled.
    done: Sender<bool>,
}

impl Responder {
    /// Writes the answer; when it ends the connection (`Connection: close`, HTTP/1.0, a failed
    /// write), closes it right after, which also ends the connection thread's wait.
    fn answer(self, answer: Answer) {
        let written = write_answer(&self.out, answer, self.stateless, self.keep_alive);
        let _ = self.done.send(written);
        if !written || !self.keep_alive {
            self.out.close();
        }
    }
}

/// Writes an answer of the engine: a JSON body when nothing precedes the response, else an SSE
/// stream of the notifications then the response. The status of a stateless (2026-07-28) JSON
/// answer follows its error code (`route::status_of`). False when the write failed.
fn write_answer(out: &Out, answer: Answer, stateless: bool, keep_alive: bool) -> bool {
    let Some(line) = answer.line else {
        // Only an open listen stream has no line, and it never comes here.
        return false;
    };
    if answer.before.is_empty() {
        let status = if stateless {
            route::status_of(answer.error)
        } else {
            200
        };
        return out.send(&Response::json(status, line).bytes(keep_alive));
    }
    let mut bytes = sse_head(keep_alive);
    for n in &answer.before {
        bytes.extend(sse_event(n));
    }
    bytes.extend(sse_event(&line));
    bytes.extend_from_slice(http1::LAST_CHUNK);
    out.send(&bytes)
}

/// Where a listen stream is.
#[derive(Debug, Default)]
struct StreamState {
    /// The answer's head is out (it goes with the first frame, the acknowledgement).
    started: bool,
    /// The stream ended: its response was written, or a write failed.
    ended: bool,
}

/// The SSE stream of one `subscriptions/listen` POST: its head goes out with the first frame
/// (the acknowledgement); its end ([`Sink::end`]: the response, then the last chunk) or a
/// failed write closes its connection.
struct StreamSink {
    out: Arc<Out>,
    state: Mutex<StreamState>,
}

impl Sink for StreamSink {
    fn send_line(&self, line: String) -> bool {
        self.send(line, Deadline::NEVER, false)
    }

    fn end(&self, line: String, by: Deadline) -> bool {
        self.send(line, by, true)
    }
}

impl StreamSink {
    /// Writes one frame (the head first, if it is not out yet; the last chunk after it when it
    /// is the `last`), each write waiting at most [`STREAM_WRITE_STALL`] for the client, none
    /// past `by`.
    fn send(&self, line: String, by: Deadline, last: bool) -> bool {
        let mut state = sync::lock(&self.state);
        if state.ended {
            return false;
        }
        let mut bytes = Vec::new();
        if !state.started {
            bytes = sse_head(false);
            state.started = true;
        }
        bytes.extend(sse_event(&line));
        if last {
            bytes.extend_from_slice(http1::LAST_CHUNK);
        }
        let written = !by.passed() && self.out.send_within(&bytes, STREAM_WRITE_STALL, by);
        if last || !written {
            state.ended = true;
            self.out.close();
        }
        written
    }
}
