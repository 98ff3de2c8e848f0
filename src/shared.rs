//! What a supervisor's threads share: the current connection, command ids, call registration, and
//! the published snapshot with its change notification.
//!
//! Ownership: the reader thread is the only one that stores a snapshot or swaps the transport
//! (after a reconnect); callers, the watchdog and the attach sequence only register calls and
//! write commands.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use serde_json::Value;

use crate::core::{CallKind, CallResult, PendingCall};
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

    /// Registers and writes one command. `reply`: where its reply goes.
    pub fn send(
        &self,
        method: &str,
        params: Value,
        session_id: Option<&str>,
        kind: CallKind,
        reply: Option<Sender<CallResult>>,
        expires: Option<Instant>,
    ) -> Result<u64, Error> {
        let id = self.next_id();
        let text = protocol::encode_command(id, method, &params, session_id);
        let call = PendingCall {
            method: method.to_string(),
            session_id: session_id.map(str::to_string),
            kind,
            reply,
            expires,
        };
        self.registrations
            .send((id, call))
            .map_err(|_| Error::ConnectionLost("the supervisor's reader has stopped".into()))?;
        let started = Instant::now();
        match self
            .transport
            .load()
            .send_text_until(text, Deadline::from_instant(expires))
        {
            Ok(()) => Ok(id),
            // The call's own deadline passed while its frame was being written (a peer that
            // stopped reading): the caller gets the time-out it asked for.
            Err(SendError::DeadlinePassed) => Err(Error::Timeout {
                method: method.to_string(),
                after: expires.map_or(Duration::ZERO, |t| t.saturating_duration_since(started)),
            }),
            Err(SendError::Lost(e)) => Err(e),
        }
    }

    /// Sends and waits for the reply until `timeout`.
    pub fn call(
        &self,
        method: &str,
        params: Value,
        session_id: Option<&str>,
        kind: CallKind,
        timeout: Duration,
    ) -> CallResult {
        let (rx, deadline) = self.start_call(method, params, session_id, kind, timeout)?;
        wait_reply(&rx, method, deadline, timeout)
    }

    /// Sends, returning the reply channel and the deadline, for pipelined calls.
    pub fn start_call(
        &self,
        method: &str,
        params: Value,
        session_id: Option<&str>,
        kind: CallKind,
        timeout: Duration,
    ) -> Result<(Receiver<CallResult>, Instant), Error> {
        let deadline = Instant::now() + timeout;
        let (tx, rx) = bounded(1);
        match self.send(method, params, session_id, kind, Some(tx), Some(deadline)) {
            Ok(_) => Ok((rx, deadline)),
            Err(Error::Timeout { method, .. }) => Err(Error::Timeout {
                method,
                after: timeout,
            }),
            Err(e) => Err(e),
        }
    }
}

/// How long a caller spins for its reply before parking.
const SPIN_BEFORE_PARK: Duration = Duration::from_micros(50);

/// Waits for one reply until `deadline`; a closed channel means the connection went away.
pub fn wait_reply(
    rx: &Receiver<CallResult>,
    method: &str,
    deadline: Instant,
    timeout: Duration,
) -> CallResult {
    // A reply on loopback usually lands within tens of microseconds: spin briefly before
    // parking, since a park/unpark pair costs as much again on a virtualised machine.
    let spin_until = Instant::now() + SPIN_BEFORE_PARK;
    loop {
        match rx.try_recv() {
            Ok(r) => return r,
            Err(crossbeam_channel::TryRecvError::Disconnected) => {
                return Err(Error::ConnectionLost(
                    "the connection closed before the reply".into(),
                ));
            }
            Err(crossbeam_channel::TryRecvError::Empty) => {}
        }
        if Instant::now() >= spin_until.min(deadline) {
            break;
        }
        std::thread::yield_now();
    }
    match rx.recv_deadline(deadline) {
        Ok(r) => r,
        Err(RecvTimeoutError::Timeout) => Err(Error::Timeout {
            method: method.to_string(),
            after: timeout,
        }),
        Err(RecvTimeoutError::Disconnected) => Err(Error::ConnectionLost(
            "the connection closed before the reply".into(),
        )),
    }
}
