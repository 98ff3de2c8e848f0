//! What a supervisor's threads share: the current connection, command ids, call registration, and
//! the published snapshot with its change notification.
//!
//! Ownership: the reader thread is the only one that stores a snapshot or swaps the transport
//! (after a reconnect); callers, the watchdog and the attach sequence only register calls and
//! write commands, through the outbound path in `outbound.rs`.
//!
//! # The lifecycle
//!
//! A supervisor's life is the published snapshot's [`SupervisorState`] (`active`,
//! `reconnecting`, `stopped`, `dead`), written by the reader alone; a `stopped` or `dead` state
//! is the reader's last publish. The one fact the reader cannot publish in time is that `stop`
//! has been asked for: the registry must make a supervisor not alive under its slot lock, before
//! anyone runs `stop`. That is [`StopPhase`], one atomic next to the snapshot (its last step,
//! `Closed`, is also what tells the reader to end instead of reconnecting), and
//! [`Shared::with_state`] folds the two into the state every check matches on
//! (`Supervisor::is_alive`, `is_active`, `ensure_alive`, and through it `tools::live`).

use crate::sync;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use arc_swap::ArcSwap;
use crossbeam_channel::Sender;

use crate::core::PendingCall;
use crate::deadline::{Deadline, Left};
use crate::snapshot::{Snapshot, SupervisorState};
use crate::transport::Transport;

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

/// How far `stop` has got. Only moves forward (`Running` -> `Requested` -> `Stopping` ->
/// `Closed`, possibly skipping `Requested`), so every step is a `fetch_max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum StopPhase {
    /// Nobody has asked it to stop.
    Running = 0,
    /// Not alive any more (calls fail), but nobody has begun `stop`'s work yet: the registry
    /// marks a supervisor so under its slot lock and stops it once the lock is released.
    Requested = 1,
    /// One caller of `stop` is doing its work (dismissing dialogs on the live connection);
    /// every later caller only joins threads.
    Stopping = 2,
    /// `stop` has shut the connection for good: the reader ends instead of reconnecting, and
    /// no new connection is installed.
    Closed = 3,
}

impl StopPhase {
    fn from_u8(v: u8) -> StopPhase {
        match v {
            0 => StopPhase::Running,
            1 => StopPhase::Requested,
            2 => StopPhase::Stopping,
            _ => StopPhase::Closed,
        }
    }
}

/// Run by the reader thread after each publish (see [`Shared::on_publish`]): it must not block.
pub(crate) type PublishHook = Box<dyn Fn() + Send + Sync>;

/// State shared by one supervisor's threads.
pub(crate) struct Shared {
    /// The live connection; replaced by the reader after a reconnect, through
    /// [`Shared::install`] only, never once `stop` has closed it for good.
    pub transport: ArcSwap<Transport>,
    /// Held while a new connection is installed and while `stop` shuts the current one, so the
    /// two cannot interleave: either the install happens first and `stop` shuts the new
    /// connection, or the install comes second, sees `Closed` and is refused. Without it,
    /// `stop` could shut the connection that was just replaced while the reader went on to
    /// block reading the new one, forever.
    swap_transport: Mutex<()>,
    /// A [`StopPhase`].
    stop_phase: AtomicU8,
    /// Command ids, unique across reconnects so a stale reply can never match a new call.
    next_id: AtomicU64,
    /// The CDP URL, redacted.
    pub url_redacted: String,
    /// Call registrations, drained by the reader before it applies what it read.
    pub registrations: Sender<(u64, PendingCall)>,
    /// The published state. Written only by the reader thread.
    pub snapshot: Arc<SnapshotCell>,
    /// Threads blocked in `wait_for`; the reader only touches `changed` when > 0, so nobody
    /// waiting costs nothing.
    waiters: AtomicUsize,
    /// Paired with `changed` to wake `wait_for` callers after a publish.
    change_lock: Mutex<()>,
    /// Notified after every publish while someone waits.
    changed: Condvar,
    /// Run after every publish; set once, by [`Shared::on_publish`] (the MCP server's notifier:
    /// one thread hears every task's changes instead of one `wait_for` thread per task).
    publish_hook: OnceLock<PublishHook>,
    /// Run once, after the last publish (`stopped` or `dead`); set once, by [`Shared::on_end`]
    /// (the registry's popup watcher closes when the last task it serves has ended).
    end_hook: OnceLock<PublishHook>,
    /// Set once a task served by the registry's popup watcher follows its popups itself (the
    /// watcher has gone, or could not serve it): the reader then has the core turn
    /// browser-level auto-attach on again at each re-attach (`reader.rs`).
    pub follows_popups_itself: AtomicBool,
    /// The CDP clients this task carries (`crate::cdp_endpoint`), once one has connected.
    pub tap: OnceLock<Arc<dyn crate::tap::Tap>>,
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
            swap_transport: Mutex::new(()),
            stop_phase: AtomicU8::new(StopPhase::Running as u8),
            next_id: AtomicU64::new(1),
            registrations,
            snapshot: Arc::new(SnapshotCell {
                task_id: first.task_id.clone(),
                current: ArcSwap::from_pointee(first),
            }),
            waiters: AtomicUsize::new(0),
            change_lock: Mutex::new(()),
            changed: Condvar::new(),
            publish_hook: OnceLock::new(),
            end_hook: OnceLock::new(),
            follows_popups_itself: AtomicBool::new(false),
            tap: OnceLock::new(),
        }
    }

    /// Where `stop` is.
    pub fn stop_phase(&self) -> StopPhase {
        StopPhase::from_u8(self.stop_phase.load(Ordering::Acquire))
    }

    /// Moves forward to `phase` (never back); returns the phase it was in.
    fn advance(&self, phase: StopPhase) -> StopPhase {
        StopPhase::from_u8(self.stop_phase.fetch_max(phase as u8, Ordering::AcqRel))
    }

    /// True once a stop has been asked for (whether or not its work has begun).
    pub fn stop_requested(&self) -> bool {
        self.stop_phase() != StopPhase::Running
    }

    /// True once `stop` has shut the connection for good ([`StopPhase::Closed`]).
    pub fn closed_for_good(&self) -> bool {
        self.stop_phase() == StopPhase::Closed
    }

    /// Not alive from now on; `stop` is still to be run.
    pub fn request_stop(&self) {
        self.advance(StopPhase::Requested);
    }

    /// Moves to `Stopping`; true for exactly one caller, the one that does `stop`'s work.
    pub fn begin_stop(&self) -> bool {
        self.advance(StopPhase::Stopping) < StopPhase::Stopping
    }

    /// Calls `f` with the supervisor's lifecycle state: the published one, except that a
    /// supervisor asked to stop is `Stopped` already (unless it has ended otherwise, `Dead`).
    /// No allocation, no lock.
    pub fn with_state<R>(&self, f: impl FnOnce(&SupervisorState) -> R) -> R {
        let snap = self.snapshot.load();
        match &snap.state {
            SupervisorState::Active | SupervisorState::Reconnecting { .. }
                if self.stop_requested() =>
            {
                f(&SupervisorState::Stopped)
            }
            state => f(state),
        }
    }

    /// Makes `transport` the live connection (the reader, after a reconnect), unless `stop` has
    /// shut the connection for good: then it is shut down too and `Err` says so.
    pub fn install(&self, transport: Transport) -> Result<(), ()> {
        let _swap = sync::lock(&self.swap_transport);
        if self.closed_for_good() {
            transport.shutdown();
            return Err(());
        }
        self.transport.store(Arc::new(transport));
        Ok(())
    }

    /// For `stop`: moves to [`StopPhase::Closed`] and shuts the live connection down, waking
    /// the reader and every writer; [`Shared::install`] refuses any later one. Idempotent.
    pub fn close_for_good(&self) {
        let _swap = sync::lock(&self.swap_transport);
        self.advance(StopPhase::Closed);
        self.transport.load().shutdown();
    }

    /// A fresh command id (for [`Outbound`](crate::outbound::Outbound)).
    pub fn next_command_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Publishes a snapshot (reader thread only) and wakes `wait_for` callers, if any.
    pub fn publish(&self, snapshot: Snapshot) {
        let last = snapshot.state.is_final();
        self.snapshot.store(Arc::new(snapshot));
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = sync::lock(&self.change_lock);
            self.changed.notify_all();
        }
        if let Some(hook) = self.publish_hook.get() {
            hook();
        }
        if last && let Some(hook) = self.end_hook.get() {
            hook();
        }
    }

    /// Has `hook` run after every publish from now on, on the reader thread (so it must not
    /// block: a send on an unbounded channel, a flag). False, and `hook` dropped, when one is
    /// set already.
    pub fn on_publish(&self, hook: PublishHook) -> bool {
        self.publish_hook.set(hook).is_ok()
    }

    /// Has `hook` run once the supervisor has ended: on the reader thread after its last
    /// publish, or at once (on this thread) when that publish has been made already; it must
    /// not block. False, and `hook` dropped, when one is set already.
    pub fn on_end(&self, hook: PublishHook) -> bool {
        if self.end_hook.set(hook).is_err() {
            return false;
        }
        if self.snapshot.load().state.is_final()
            && let Some(hook) = self.end_hook.get()
        {
            hook();
        }
        true
    }

    /// Blocks until a published snapshot satisfies `pred` or `deadline` passes; `None` at once
    /// when the published state is final (`stopped`, `dead`: the reader's last publish) and
    /// does not satisfy it.
    pub fn wait_for(
        &self,
        deadline: Deadline,
        pred: impl Fn(&Snapshot) -> bool,
    ) -> Option<Arc<Snapshot>> {
        loop {
            let snap = self.snapshot.load_full();
            if pred(&snap) {
                return Some(snap);
            }
            if snap.state.is_final() {
                return None;
            }
            let left = deadline.left();
            if left == Left::Passed {
                return None;
            }
            let guard = sync::lock(&self.change_lock);
            self.waiters.fetch_add(1, Ordering::SeqCst);
            // Re-check after announcing ourselves: a publish in between is not missed.
            if self.snapshot.load().version == snap.version {
                match left {
                    Left::In(d) => drop(self.changed.wait_timeout(guard, d)),
                    _ => drop(self.changed.wait(guard)),
                }
            }
            self.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }
}
