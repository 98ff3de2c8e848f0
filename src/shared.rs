//! What a supervisor's threads share: the current connection, command ids, call registration, and
//! the published snapshot with its change notification.
//!
//! Ownership: the reader thread is the only one that stores a snapshot or swaps the transport
//! (after a reconnect); callers, the watchdog and the attach sequence only register calls and
//! write commands.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, bounded};

use crate::cancel::CancelToken;
use crate::clock::Now;
use crate::core::{CallResult, Command, Core, PendingCall};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::protocol;
use crate::snapshot::Snapshot;
use crate::transport::{SendError, Transport};

/// Where a supervisor publishes its snapshot: the arc-swap plus the task it belongs to. Its own
/// allocation, so a reader's per-thread cache (see `registry`) can keep it without keeping the
/// supervisor's socket or anything else alive.
#[derive(Debug)]
pub(crate) struct SnapshotCell {
    /// The task whose state this is.
    pub task_id: String,
    /// The latest snapshot.
    pub current: ArcSwap<Snapshot>,
}

impl std::ops::Deref for SnapshotCell {
    type Target = ArcSwap<Snapshot>;

    fn deref(&self) -> &ArcSwap<Snapshot> {
        &self.current
    }
}

/// State shared by one supervisor's threads.
pub(crate) struct Shared {
    /// The live connection; replaced by the reader after a reconnect, through
    /// [`Shared::install`] only, never after [`Shared::close_for_good`].
    pub transport: ArcSwap<Transport>,
    /// True once `stop` has shut the connection for good. Held while a new connection is
    /// installed and while `stop` shuts the current one, so the two cannot interleave: either
    /// the install happens first and `stop` shuts the new connection, or `stop` happens first
    /// and the install is refused. Without it, `stop` could shut the connection that was just
    /// replaced while the reader went on to block reading the new one, forever.
    closed_for_good: Mutex<bool>,
    /// Command ids, unique across reconnects so a stale reply can never match a new call.
    next_id: AtomicU64,
    /// The CDP URL, redacted.
    pub url_redacted: String,
    /// Call registrations, drained by the reader before it applies what it read.
    pub registrations: Sender<(u64, PendingCall)>,
    /// The published state. Written only by the reader thread.
    pub snapshot: Arc<SnapshotCell>,
    /// Set by the reader thread as it exits for good.
    pub reader_done: AtomicBool,
    /// Threads blocked in `wait_for`; the reader only touches `changed` when > 0, so nobody
    /// waiting costs nothing.
    waiters: AtomicUsize,
    /// Paired with `changed` to wake `wait_for` callers after a publish.
    change_lock: Mutex<()>,
    /// Notified after every publish while someone waits.
    changed: Condvar,
}

impl Shared {
    pub fn new(
        transport: Transport,
        registrations: Sender<(u64, PendingCall)>,
        first: Snapshot,
    ) -> Shared {
        Shared {
            url_redacted: transport.url_redacted.clone(),
            transport: ArcSwap::from_pointee(transport),
            closed_for_good: Mutex::new(false),
            next_id: AtomicU64::new(1),
            registrations,
            snapshot: Arc::new(SnapshotCell {
                task_id: first.task_id.clone(),
                current: ArcSwap::from_pointee(first),
            }),
            reader_done: AtomicBool::new(false),
            waiters: AtomicUsize::new(0),
            change_lock: Mutex::new(()),
            changed: Condvar::new(),
        }
    }

    /// Makes `transport` the live connection (the reader, after a reconnect), unless `stop`
    /// has already shut the connection for good: then it is shut down too and `Err` says so.
    pub fn install(&self, transport: Transport) -> Result<(), ()> {
        let closed = self
            .closed_for_good
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if *closed {
            transport.shutdown();
            return Err(());
        }
        self.transport.store(Arc::new(transport));
        Ok(())
    }

    /// For `stop`: shuts the live connection down (waking the reader and every writer) and
    /// refuses any connection installed from now on. Idempotent.
    pub fn close_for_good(&self) {
        let mut closed = self
            .closed_for_good
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *closed = true;
        self.transport.load().shutdown();
    }

    /// A fresh command id.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Publishes a snapshot (reader thread only) and wakes `wait_for` callers, if any.
    pub fn publish(&self, snapshot: Snapshot) {
        self.snapshot.store(Arc::new(snapshot));
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.change_lock.lock().unwrap_or_else(|e| e.into_inner());
            self.changed.notify_all();
        }
    }

    /// Marks the reader as gone for good (after its last publish, so whoever sees it gone also
    /// sees its final state) and wakes `wait_for` callers.
    pub fn finish(&self) {
        self.reader_done.store(true, Ordering::Release);
        let _g = self.change_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.changed.notify_all();
    }

    /// Blocks until a published snapshot satisfies `pred` or `deadline` passes.
    pub fn wait_for(
        &self,
        deadline: Instant,
        pred: impl Fn(&Snapshot) -> bool,
    ) -> Option<Arc<Snapshot>> {
        loop {
            let snap = self.snapshot.load_full();
            if pred(&snap) {
                return Some(snap);
            }
            if self.reader_done.load(Ordering::Acquire)
                && self.snapshot.load().version == snap.version
            {
                return None;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let guard = self.change_lock.lock().unwrap_or_else(|e| e.into_inner());
            self.waiters.fetch_add(1, Ordering::SeqCst);
            // Re-check after announcing ourselves: a publish (or the end) in between is not
            // missed.
            if self.snapshot.load().version == snap.version
                && !self.reader_done.load(Ordering::Acquire)
            {
                let _unused = self.changed.wait_timeout(guard, left);
            }
            self.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Sends `cmd` and waits for its reply until `deadline`.
    pub fn call(&self, cmd: Command, deadline: Deadline) -> CallResult {
        self.start_call(cmd, deadline)?.wait()
    }

    /// Sends `cmd`, returning its [`Reply`] to wait on (pipelined calls).
    pub fn start_call(&self, cmd: Command, deadline: Deadline) -> Result<Reply, Error> {
        let (tx, rx) = bounded(1);
        let method = cmd.method.clone();
        self.write_command(cmd, Some(tx), deadline, |id, call| self.register(id, call))
            .map_err(|e| e.into_error(deadline, &method))?;
        Ok(Reply {
            rx,
            method,
            deadline,
        })
    }

    /// The one outbound path: registers `cmd` under a fresh id with the reader (before writing
    /// it, so the reply always finds its call), then writes it, giving up at `deadline`. Its
    /// reply goes to `reply` (`None`: fire-and-forget, the state machine alone reads it). A
    /// deadline that passes while the frame is being written (a peer that stopped reading) is
    /// the call's time-out, worded with the deadline's budget.
    pub fn send_command(
        &self,
        cmd: Command,
        reply: Option<Sender<CallResult>>,
        deadline: Deadline,
    ) -> Result<u64, Error> {
        // Free for the static names the crate itself sends.
        let method = cmd.method.clone();
        self.write_command(cmd, reply, deadline, |id, call| self.register(id, call))
            .map_err(|e| e.into_error(deadline, &method))
    }

    /// Hands a call to the reader.
    fn register(&self, id: u64, call: PendingCall) -> Result<(), Error> {
        self.registrations
            .send((id, call))
            .map_err(|_| Error::ConnectionLost("the supervisor's reader has stopped".into()))
    }

    /// [`Shared::send_command`] for the reader thread: it registers fire-and-forget `cmd` with
    /// its own state machine, `core`, directly (it drains the registration channel only between
    /// reads), and never waits for the reply.
    pub fn send_from_reader(&self, cmd: Command, core: &mut Core, now: Now) -> Result<u64, Error> {
        let method = cmd.method.clone();
        self.write_command(cmd, None, Deadline::NEVER, |id, call| {
            core.register(id, call, now);
            Ok(())
        })
        .map_err(|e| e.into_error(Deadline::NEVER, &method))
    }

    /// Encodes, registers through `register`, then writes.
    fn write_command(
        &self,
        cmd: Command,
        reply: Option<Sender<CallResult>>,
        deadline: Deadline,
        register: impl FnOnce(u64, PendingCall) -> Result<(), Error>,
    ) -> Result<u64, NotSent> {
        let Command {
            method,
            params,
            session_id,
            kind,
        } = cmd;
        let id = self.next_id();
        let text = protocol::encode_command(id, &method, &params, session_id.as_deref());
        let call = PendingCall {
            method: method.into_owned(),
            session_id,
            kind,
            reply,
            expires: deadline.instant(),
        };
        register(id, call).map_err(NotSent::Failed)?;
        match self.transport.load().send_text_until(text, deadline) {
            Ok(()) => Ok(id),
            Err(SendError::DeadlinePassed) => Err(NotSent::DeadlinePassed),
            Err(SendError::Lost(e)) => Err(NotSent::Failed(e)),
        }
    }
}

/// Why [`Shared::write_command`] did not send (its callers word it with the method, which
/// the registration has taken).
enum NotSent {
    /// The deadline passed while the frame was being written.
    DeadlinePassed,
    /// The reader is gone, or the connection is.
    Failed(Error),
}

impl NotSent {
    fn into_error(self, deadline: Deadline, method: &str) -> Error {
        match self {
            NotSent::DeadlinePassed => deadline.timed_out(method),
            NotSent::Failed(e) => e,
        }
    }
}

/// How long a caller spins for its reply before parking.
const SPIN_BEFORE_PARK: Duration = Duration::from_micros(50);

/// A call that has been written and whose reply is awaited until its [`Deadline`].
#[derive(Debug)]
pub(crate) struct Reply {
    rx: Receiver<CallResult>,
    /// The CDP method, for a time-out's message.
    method: Cow<'static, str>,
    deadline: Deadline,
}

impl Reply {
    /// Waits for the reply until the call's deadline.
    pub fn wait(&self) -> CallResult {
        self.wait_until(self.deadline)
    }

    /// Waits for the reply until `until` (the call's deadline, or a step of it: see
    /// [`Deadline::within`]); a time-out is worded with `until`'s budget. A closed channel means
    /// the connection went away.
    pub fn wait_until(&self, until: Deadline) -> CallResult {
        // A reply on loopback usually lands within tens of microseconds: spin briefly before
        // parking, since a park/unpark pair costs as much again on a virtualised machine.
        let spin = until.within(SPIN_BEFORE_PARK);
        loop {
            match self.rx.try_recv() {
                Ok(r) => return r,
                Err(TryRecvError::Disconnected) => return Err(closed_before_reply()),
                Err(TryRecvError::Empty) => {}
            }
            if spin.passed() {
                break;
            }
            std::thread::yield_now();
        }
        match until.recv(&self.rx) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => Err(until.timed_out(self.method.as_ref())),
            Err(RecvTimeoutError::Disconnected) => Err(closed_before_reply()),
        }
    }

    /// [`Reply::wait_until`], returning [`Error::Cancelled`] at once when `cancel` fires.
    pub fn wait_or_cancel(&self, until: Deadline, cancel: Option<&CancelToken>) -> CallResult {
        let Some(cancel) = cancel else {
            return self.wait_until(until);
        };
        let cancelled = || Err(Error::Cancelled(self.method.to_string()));
        let Some(left) = until.remaining() else {
            return crossbeam_channel::select! {
                recv(self.rx) -> r => r.unwrap_or_else(|_| Err(closed_before_reply())),
                recv(cancel.receiver()) -> _ => cancelled(),
            };
        };
        crossbeam_channel::select! {
            recv(self.rx) -> r => r.unwrap_or_else(|_| Err(closed_before_reply())),
            recv(cancel.receiver()) -> _ => cancelled(),
            default(left) => Err(until.timed_out(self.method.as_ref())),
        }
    }

    /// The reply, if it comes by `until` (`None`: not yet; a probe's question). A closed
    /// channel is `Some(Err(ConnectionLost))`.
    pub fn reply_by(&self, until: Deadline) -> Option<CallResult> {
        match until.recv(&self.rx) {
            Ok(r) => Some(r),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(Err(closed_before_reply())),
        }
    }
}

fn closed_before_reply() -> Error {
    Error::ConnectionLost("the connection closed before the reply".into())
}
