//! The writer side of one client: the bytes waiting for it, bounded in bytes and in time, and
//! who writes them.
//!
//! # Who writes
//!
//! Whoever has a message for the client appends its frame ([`Outlet::push`], never waiting:
//! the supervisor's reader thread does it for every reply and event it hands on). Then
//! [`Outlet::send`] (the reader calls it once per batch it read, a client thread at once)
//! writes what waits in one non-blocking write from that same thread when nothing is queued
//! ahead of it: a reply reaches the client without waking another thread. What does not fit
//! (`WouldBlock`, or part of it) is handed to the client's writer thread
//! ([`Outlet::run`]), which from then on is the only one to write, each time all that waits
//! in one write, until it finds nothing left and hands the socket back. Order is kept: the
//! direct write happens under the queue's lock, and only while the writer holds nothing.
//!
//! # Slow clients
//!
//! A client is disconnected (logged, its socket shut, which ends its reader and so detaches
//! its sessions) when
//! * more than [`SLOW_BYTES`] wait and nothing has been written for [`SLOW_FOR`];
//! * more than [`MAX_BYTES`] wait;
//! * one write makes no progress for [`WRITE_TIMEOUT`] (5 s).
//!
//! The first two are checked on every push and, while the writer is blocked, every [`TICK`];
//! the third by the writer's socket ([`Mode::Write`]). Nothing else ever waits on the client:
//! the reader thread's part is a short lock and a `send(MSG_DONTWAIT)`. While nothing waits,
//! the writer sleeps on its condition variable without a deadline (no wake-ups).

use std::io::{ErrorKind, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use log::{debug, warn};

use super::frame;
use crate::deadline::Deadline;
use crate::transport::{Mode, Socket, WRITE_TIMEOUT};

/// Bytes that may wait while nothing is written for [`SLOW_FOR`].
pub(super) const SLOW_BYTES: usize = 1 << 20;

/// How long more than [`SLOW_BYTES`] may wait with nothing written.
pub(super) const SLOW_FOR: Duration = Duration::from_secs(2);

/// Bytes that may wait at all.
pub(super) const MAX_BYTES: usize = 64 << 20;

/// How often a blocked writer looks at the rules above.
const TICK: Duration = Duration::from_millis(250);

/// Where the outlet is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Life {
    Open,
    /// A close frame is queued: nothing more is taken; the writer ends once it is written.
    Closing,
    /// The client left: the writer ends.
    Ended,
    /// Disconnected as too slow (or its socket failed): nothing more is written.
    Cut,
}

/// What a client's writer sends.
#[derive(Debug)]
pub(super) enum Out {
    /// A text message.
    Text(String),
    /// A pong with this payload.
    Pong(Vec<u8>),
    /// A close frame, then the end.
    Close(u16, String),
}

/// What [`Outlet::push`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pushed {
    /// Queued; [`Outlet::send`] is due (nothing was waiting to be sent before it).
    First,
    /// Queued behind others (a send is already due, or the writer has them).
    Behind,
    /// Not queued: the outlet is closing, ended or cut (cut by this push, perhaps).
    Dropped,
}

/// The queue, under [`Outlet::queue`]'s lock.
#[derive(Debug)]
struct Queue {
    /// Encoded frames waiting, in order.
    waiting: Vec<u8>,
    /// Bytes of the writer's current batch not written yet.
    in_flight: usize,
    /// The writer has been handed the queue: only it writes until it finds nothing left.
    /// Written by [`Outlet::send`] (set) and the writer (cleared).
    writer_busy: bool,
    /// When bytes were last written, or the writer was handed the queue.
    progress: Instant,
    life: Life,
    /// The client's socket for writes that never wait ([`Mode::Drain`]), used under the lock.
    direct: Socket,
}

impl Queue {
    fn backlog(&self) -> usize {
        self.waiting.len() + self.in_flight
    }

    /// Why the client must go now, if it must (the byte and time rules).
    fn too_slow(&self, now: Instant) -> Option<String> {
        let backlog = self.backlog();
        if backlog > MAX_BYTES {
            return Some(format!("more than {} MiB waited for it", MAX_BYTES >> 20));
        }
        let idle = now.saturating_duration_since(self.progress);
        (backlog > SLOW_BYTES && self.writer_busy && idle >= SLOW_FOR).then(|| {
            format!(
                "{} KiB waited for it and nothing was written for {idle:.1?}",
                backlog >> 10
            )
        })
    }
}

/// One client's outgoing bytes (see the module doc).
#[derive(Debug)]
pub(super) struct Outlet {
    /// For the logs: `task T: CDP client ADDR`.
    label: String,
    /// The client's socket, to shut it down.
    tcp: TcpStream,
    queue: Mutex<Queue>,
    /// The writer waits here to be handed the queue, or for the end.
    wake: Condvar,
}

impl Outlet {
    /// An outlet on `tcp` (a clone of it is kept) and the socket its writer thread writes with.
    pub(super) fn new(tcp: &TcpStream, label: String) -> std::io::Result<(Outlet, Socket)> {
        let mut direct = Socket::new(tcp.try_clone()?, Deadline::NEVER);
        direct.set_mode(Mode::Drain);
        let writer = Socket::new(tcp.try_clone()?, Deadline::NEVER);
        let outlet = Outlet {
            label,
            tcp: tcp.try_clone()?,
            queue: Mutex::new(Queue {
                waiting: Vec::new(),
                in_flight: 0,
                writer_busy: false,
                progress: Instant::now(),
                life: Life::Open,
                direct,
            }),
            wake: Condvar::new(),
        };
        Ok((outlet, writer))
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `out` without waiting; a close frame is handed to the writer at once. A push past
    /// the bounds disconnects the client.
    pub(super) fn push(&self, out: Out) -> Pushed {
        let mut q = self.lock();
        if q.life != Life::Open {
            return Pushed::Dropped;
        }
        let due = q.waiting.is_empty() && !q.writer_busy;
        match out {
            Out::Text(t) => frame::encode_into(&mut q.waiting, 0x1, t.as_bytes()),
            Out::Pong(p) => frame::encode_into(&mut q.waiting, 0xA, &p),
            Out::Close(code, reason) => {
                q.waiting
                    .extend_from_slice(&frame::close_frame(code, &reason));
                q.life = Life::Closing;
                self.hand_to_writer(&mut q);
                return Pushed::Behind;
            }
        }
        if q.backlog() > SLOW_BYTES
            && let Some(why) = q.too_slow(Instant::now())
        {
            self.cut(&mut q, &why);
            return Pushed::Dropped;
        }
        if due { Pushed::First } else { Pushed::Behind }
    }

    /// Writes what waits from this thread, without waiting, unless the writer has the queue;
    /// what does not fit goes to the writer.
    pub(super) fn send(&self) {
        let mut q = self.lock();
        if q.writer_busy || q.waiting.is_empty() || q.life == Life::Cut {
            return;
        }
        let q = &mut *q;
        match q.direct.write(&q.waiting) {
            Ok(n) if n == q.waiting.len() => {
                q.waiting.clear();
                q.progress = Instant::now();
            }
            Ok(n) => {
                q.waiting.drain(..n);
                self.hand_to_writer(q);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => self.hand_to_writer(q),
            Err(e) => self.gone(q, &e.to_string()),
        }
    }

    /// The client left: the writer ends (without writing what waits).
    pub(super) fn end(&self) {
        let mut q = self.lock();
        if q.life == Life::Open {
            q.life = Life::Ended;
        }
        self.wake.notify_one();
    }

    /// Whether the outlet cut the client (too slow, or its socket failed).
    #[cfg(test)]
    fn is_cut(&self) -> bool {
        self.lock().life == Life::Cut
    }

    fn hand_to_writer(&self, q: &mut Queue) {
        if !q.writer_busy {
            q.writer_busy = true;
            q.progress = Instant::now();
            self.wake.notify_one();
        }
    }

    /// Disconnects the client as too slow (logged).
    fn cut(&self, q: &mut Queue, why: &str) {
        warn!("{}: disconnected, too slow: {why}", self.label);
        self.gone(q, why);
    }

    /// Nothing more is written: the socket is shut (its reader, then its writer, end).
    fn gone(&self, q: &mut Queue, why: &str) {
        debug!("{}: its socket is shut ({why})", self.label);
        q.life = Life::Cut;
        q.waiting = Vec::new();
        q.in_flight = 0;
        let _ = self.tcp.shutdown(Shutdown::Both);
        self.wake.notify_one();
    }

    /// The writer thread: writes what it is handed, all that waits in one write each time,
    /// until the client leaves, its close frame is written or it is cut.
    pub(super) fn run(&self, mut sock: Socket) {
        let mut batch = Vec::new();
        loop {
            {
                let mut q = self.lock();
                loop {
                    match q.life {
                        Life::Cut | Life::Ended => return,
                        Life::Closing if q.waiting.is_empty() => {
                            let _ = self.tcp.shutdown(Shutdown::Both);
                            return;
                        }
                        _ => {}
                    }
                    if q.writer_busy && !q.waiting.is_empty() {
                        break;
                    }
                    // Nothing left: the direct path may write again.
                    q.writer_busy = false;
                    q = self.wake.wait(q).unwrap_or_else(|e| e.into_inner());
                }
                std::mem::swap(&mut batch, &mut q.waiting);
                q.in_flight = batch.len();
            }
            let mut done = 0;
            while done < batch.len() {
                sock.set_mode(Mode::Write(Deadline::after(TICK)));
                let wrote = sock.write(&batch[done..]);
                let mut q = self.lock();
                if q.life == Life::Cut {
                    return;
                }
                match wrote {
                    Ok(0) => return self.gone(&mut q, "wrote nothing"),
                    Ok(n) => {
                        done += n;
                        q.in_flight -= n;
                        q.progress = Instant::now();
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        if let Some(why) = q.too_slow(Instant::now()) {
                            return self.cut(&mut q, &why);
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::TimedOut => {
                        let why = format!("one write made no progress for {WRITE_TIMEOUT:?}");
                        return self.cut(&mut q, &why);
                    }
                    Err(e) => return self.gone(&mut q, &e.to_string()),
                }
            }
            batch.clear();
            // A flood's buffer is not kept for the client's whole life.
            batch.shrink_to(SLOW_BYTES);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::TcpListener;
    use std::sync::Arc;

    use super::*;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn a_reader_gets_every_frame_in_order_and_a_reader_that_stops_is_cut_past_the_cap() {
        let (ours, mut theirs) = pair();
        let (outlet, sock) = Outlet::new(&ours, "test".into()).unwrap();
        let outlet = Arc::new(outlet);
        let o = Arc::clone(&outlet);
        let writer = std::thread::spawn(move || o.run(sock));
        // A reader that keeps up: everything, in order.
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = theirs.read_to_end(&mut all);
            all
        });
        let n = 20_000;
        for i in 0..n {
            assert_ne!(outlet.push(Out::Text(format!("{i:08}"))), Pushed::Dropped);
            if i % 64 == 0 {
                outlet.send();
            }
        }
        outlet.send();
        outlet.push(Out::Close(1000, String::new()));
        writer.join().unwrap();
        let all = reader.join().unwrap();
        let mut want = Vec::new();
        for i in 0..n {
            frame::encode_into(&mut want, 0x1, format!("{i:08}").as_bytes());
        }
        want.extend_from_slice(&frame::close_frame(1000, ""));
        assert_eq!(all.len(), want.len());
        assert!(all == want, "the frames came in order");

        // A reader that never reads: cut once more than the cap waits, never blocking a push.
        let (ours, _theirs) = pair();
        let (outlet, sock) = Outlet::new(&ours, "test".into()).unwrap();
        let outlet = Arc::new(outlet);
        let o = Arc::clone(&outlet);
        let writer = std::thread::spawn(move || o.run(sock));
        let big = "x".repeat(1 << 20);
        let t = Instant::now();
        let mut pushed = 0;
        while outlet.push(Out::Text(big.clone())) != Pushed::Dropped {
            outlet.send();
            pushed += 1;
            assert!(pushed < 1000, "never cut");
        }
        assert!(outlet.is_cut());
        assert!(t.elapsed() < SLOW_FOR, "cut by its size: {:?}", t.elapsed());
        writer.join().unwrap();
    }

    #[test]
    fn a_backlog_over_a_mib_with_nothing_written_is_cut_after_its_time() {
        let (ours, _theirs) = pair();
        let (outlet, sock) = Outlet::new(&ours, "test".into()).unwrap();
        let outlet = Arc::new(outlet);
        let o = Arc::clone(&outlet);
        let writer = std::thread::spawn(move || o.run(sock));
        // Enough to fill the kernel's buffers and leave more than a MiB waiting.
        let big = "y".repeat(256 << 10);
        let t = Instant::now();
        for _ in 0..160 {
            outlet.push(Out::Text(big.clone()));
            outlet.send();
        }
        writer.join().unwrap();
        let took = t.elapsed();
        assert!(outlet.is_cut());
        assert!(took >= SLOW_FOR && took < WRITE_TIMEOUT, "{took:?}");
    }

    #[test]
    fn an_idle_outlet_ends_when_its_client_leaves() {
        let (ours, _theirs) = pair();
        let (outlet, sock) = Outlet::new(&ours, "test".into()).unwrap();
        let outlet = Arc::new(outlet);
        let o = Arc::clone(&outlet);
        let writer = std::thread::spawn(move || o.run(sock));
        assert_eq!(outlet.push(Out::Text("hi".into())), Pushed::First);
        outlet.send();
        outlet.end();
        writer.join().unwrap();
        assert_eq!(outlet.push(Out::Text("late".into())), Pushed::Dropped);
    }
}
