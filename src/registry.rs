//! `task_id -> Supervisor`, with lock-free lookups and race-free start/stop (SPEC §3).
//!
//! Start and stop are not hot paths, so their bookkeeping is plain: one mutex over
//! `task -> Slot`, **never held across a wait**. A start marks the task's slot `starting` (with
//! a ticket, and a channel later callers for the task wait on), releases the lock, connects and
//! attaches, and takes the lock again to publish, only if its ticket is still the slot's: a
//! `stop` in the meantime removed the slot ([`SupervisorRegistry::remove_slot`], the one place
//! a slot goes away), so the start that lost stops its own supervisor instead of publishing a
//! zombie. A [`StartGuard`] owns the `starting` mark: its `Drop` clears it, so a start that
//! fails, returns early or panics never leaves its task stuck starting.
//!
//! A stop does not wait for the start it beat: every start runs with a [`CancelToken`] of its
//! slot (a child of the caller's, if any), which the stop cancels, so the start returns
//! [`Error::StartCancelled`] at once from wherever it waits (connecting to a black hole,
//! attaching to a page that never answers). [`SupervisorRegistry::close`] marks the slots
//! closed under the same lock: every start in progress is cancelled that way, and every later
//! start is refused with [`Error::RegistryClosed`].
//!
//! Reads (`get`, `snapshot`, `with_snapshot`) never lock: they go through the read side in
//! `registry/read_cache.rs`, an arc-swapped `task -> supervisor` map that only the holder of
//! the slot lock replaces, with a per-thread cache in front of it.

use crate::sync;
use rustc_hash::FxHashMap as HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::cancel::CancelToken;
use crate::config::{Config, StartOptions, check_seconds};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::redact::redact_url;
use crate::security::isolation::{self, Reach as _};
use crate::snapshot::Snapshot;
use crate::supervisor::Supervisor;

pub(crate) mod popups;
mod read_cache;

use read_cache::ReadMap;

/// One task's start/stop bookkeeping.
#[derive(Debug, Default)]
struct Slot {
    /// The published supervisor (the read map holds it too).
    current: Option<Arc<Supervisor>>,
    /// A start in progress.
    starting: Option<Starting>,
}

#[derive(Debug)]
struct Starting {
    /// Which start: the one whose [`StartGuard`] has this ticket.
    ticket: u64,
    /// Disconnects when that start ends, however it ends.
    done: Receiver<()>,
    /// The start's own token: cancelled by [`SupervisorRegistry::remove_slot`] (a stop, a
    /// close), so that the start returns at once instead of finishing for nothing.
    cancel: CancelToken,
    /// Set by [`SupervisorRegistry::remove_slot`] with `cancel`: callers waiting for this start
    /// were stopped too (`cancel` alone may be the starting caller's own cancel).
    stopped: Arc<AtomicBool>,
    /// The page it was told to attach to (`StartOptions::target_id`), which no other task may
    /// take meanwhile (`security.isolate_tasks`).
    claim: Option<String>,
}

/// Everything behind the registry's one lock.
#[derive(Debug, Default)]
struct Slots {
    tasks: HashMap<String, Slot>,
    /// The next start's ticket.
    next_ticket: u64,
    /// Set by [`SupervisorRegistry::close`]: no slot is added any more.
    closed: bool,
}

impl Slots {
    /// The slot of `task_id` if the start holding `ticket` still owns it (no stop removed it).
    fn started_by(&mut self, task_id: &str, ticket: u64) -> Option<&mut Slot> {
        self.tasks
            .get_mut(task_id)
            .filter(|s| s.starting.as_ref().is_some_and(|s| s.ticket == ticket))
    }

    /// Whether a task other than `task_id` owns `target_id` (its published snapshot reaches it:
    /// `crate::security::isolation`) or is starting on it. O(tasks), at start only.
    fn owned_elsewhere(&self, task_id: &str, target_id: &str) -> bool {
        self.others(task_id).any(|slot| {
            slot.current
                .as_ref()
                .is_some_and(|s| s.with_snapshot(|snap| snap.owns_target(target_id)))
                || slot
                    .starting
                    .as_ref()
                    .is_some_and(|s| s.claim.as_deref() == Some(target_id))
        })
    }

    /// The pages tasks other than `task_id` own or are starting on (which a start that takes
    /// the browser's first page skips).
    fn taken_pages(&self, task_id: &str) -> Vec<String> {
        let mut taken = Vec::new();
        for slot in self.others(task_id) {
            if let Some(sup) = &slot.current {
                sup.with_snapshot(|snap| {
                    taken.extend(isolation::pages_of(snap).map(str::to_string));
                });
            }
            taken.extend(slot.starting.as_ref().and_then(|s| s.claim.clone()));
        }
        taken
    }

    fn others<'a>(&'a self, task_id: &'a str) -> impl Iterator<Item = &'a Slot> {
        self.tasks
            .iter()
            .filter(move |(t, _)| t.as_str() != task_id)
            .map(|(_, slot)| slot)
    }
}

/// The error of a start on a page another task owns (`security.isolate_tasks`).
fn refused_page(target_id: &str) -> Error {
    let (option, detail) = isolation::another_tasks_target(target_id);
    Error::Refused {
        method: "Target.attachToTarget".into(),
        option: option.into(),
        detail,
    }
}

/// Owns one supervisor per task.
#[derive(Debug)]
pub struct SupervisorRegistry {
    config: Config,
    /// Start/stop bookkeeping; never held across a wait.
    slots: Mutex<Slots>,
    /// The lock-free read side, replaced only with `slots` locked.
    reads: ReadMap,
    /// One popup watcher per browser URL (`registry/popups.rs`, issue 24).
    popups: Arc<popups::Watchers>,
    /// Whether tasks get their popups from `popups` (else each turns browser-level auto-attach
    /// on itself, as before issue 24: `unversioned::registry_without_popup_watcher`).
    popup_watcher: bool,
    /// The tasks' CDP endpoint, once asked for (`crate::cdp_endpoint`).
    pub(crate) endpoint: OnceLock<Arc<dyn crate::tap::Listener>>,
}

/// A start in progress: the `starting` mark of one slot. Dropping it clears the mark (unless a
/// stop removed the slot or a newer start owns it) and forgets a slot left empty, then wakes
/// the callers waiting for this start.
struct StartGuard<'a> {
    registry: &'a SupervisorRegistry,
    task_id: &'a str,
    ticket: u64,
    /// The token the start runs with (the slot's [`Starting::cancel`]).
    cancel: CancelToken,
    /// Dropped last: waiters wake once the slot says how the start ended.
    _done: Sender<()>,
}

impl StartGuard<'_> {
    /// Publishes `sup` as the task's supervisor, unless a stop came while it was starting: then
    /// it stops it (no zombie) and says so. With `isolate` (`security.isolate_tasks`), a
    /// supervisor on a page it did not create is stopped too when another task took that page
    /// meanwhile (two starts racing for one page: the first to publish keeps it).
    fn publish(self, sup: Arc<Supervisor>, isolate: bool) -> Result<Arc<Supervisor>, Error> {
        let mut slots = self.registry.lock();
        if slots.started_by(self.task_id, self.ticket).is_none() {
            let closed = slots.closed;
            drop(slots);
            log::info!(
                "task {}: stopped while it was starting; its new supervisor stops too",
                self.task_id
            );
            sup.stop();
            return Err(stopped_start(self.task_id, "finishing", closed));
        }
        let fresh_page = sup.options().owns_page();
        if isolate && !fresh_page {
            let page = sup.snapshot().page_target_id.clone().unwrap_or_default();
            if slots.owned_elsewhere(self.task_id, &page) {
                drop(slots);
                sup.stop();
                return Err(refused_page(&page));
            }
        }
        let closed = slots.closed;
        let Some(slot) = slots.started_by(self.task_id, self.ticket) else {
            return Err(stopped_start(self.task_id, "finishing", closed));
        };
        slot.starting = None;
        slot.current = Some(Arc::clone(&sup));
        self.registry
            .reads
            .set(&mut slots, self.task_id, Some(&sup));
        Ok(sup)
    }
}

impl Drop for StartGuard<'_> {
    fn drop(&mut self) {
        let mut slots = self.registry.lock();
        if let Some(slot) = slots.started_by(self.task_id, self.ticket) {
            slot.starting = None;
            if slot.current.is_none() {
                // Nothing was published: a failed start leaves no task behind.
                self.registry.remove_slot(&mut slots, self.task_id);
            }
        }
    }
}

impl SupervisorRegistry {
    /// A registry applying `config` to every supervisor it starts.
    pub fn new(config: Config) -> Self {
        SupervisorRegistry::with_popup_watcher(config, true)
    }

    /// A registry whose tasks get their popups from one watcher per browser (`on`), or each
    /// from its own browser-level auto-attach.
    pub(crate) fn with_popup_watcher(config: Config, on: bool) -> Self {
        SupervisorRegistry {
            config,
            slots: Mutex::default(),
            reads: ReadMap::new(),
            popups: Arc::default(),
            popup_watcher: on,
            endpoint: OnceLock::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, Slots> {
        sync::lock(&self.slots)
    }

    /// Checks a task id the way every start does: 1 to 128 bytes of printable text, without
    /// control characters (C0, DEL, C1), formatting characters (bidi overrides, zero-width
    /// characters, ...) or spaces other than inner U+0020. Hosts that take task ids from
    /// elsewhere can check them up front; a start with an invalid id fails with this
    /// [`Error::InvalidArgument`] (naming `task_id`), and lookups with one find nothing.
    pub fn check_task_id(task_id: &str) -> Result<(), Error> {
        crate::task_id::check(task_id)
    }

    /// The live supervisor for `task_id`, starting (or replacing) one as needed.
    pub fn get_or_start(&self, task_id: &str, cdp_url: &str) -> Result<Arc<Supervisor>, Error> {
        self.get_or_start_with(task_id, cdp_url, StartOptions::default())
    }

    /// Like [`get_or_start`](Self::get_or_start) with per-task options. Idempotent for the same
    /// URL and options; a different URL or different options rebinds (stops the old supervisor,
    /// starts a fresh one: state is never carried across). A dead supervisor is replaced.
    /// An invalid `task_id` ([`check_task_id`](Self::check_task_id)) is an
    /// [`Error::InvalidArgument`].
    pub fn get_or_start_with(
        &self,
        task_id: &str,
        cdp_url: &str,
        options: StartOptions,
    ) -> Result<Arc<Supervisor>, Error> {
        self.start_inner(task_id, cdp_url, options, &self.config, None)
    }

    /// Like [`get_or_start_with`](Self::get_or_start_with), but a supervisor this call starts
    /// gets `start_timeout` (instead of `supervisor.start_timeout_s`) as the bound on its
    /// connect and attach: any duration but zero ([`Error::Config`]), [`Duration::MAX`] for no
    /// bound. An existing live supervisor is returned as it is.
    pub fn get_or_start_within(
        &self,
        task_id: &str,
        cdp_url: &str,
        options: StartOptions,
        start_timeout: Duration,
    ) -> Result<Arc<Supervisor>, Error> {
        // Any bound but zero: `Duration::MAX` is none.
        check_seconds("start_timeout_s", start_timeout, Duration::MAX)?;
        let config = Config {
            start_timeout,
            ..self.config.clone()
        };
        self.start_inner(task_id, cdp_url, options, &config, None)
    }

    /// [`get_or_start_with`](Self::get_or_start_with) that `cancel` calls off at once, wherever
    /// the start is: waiting for another caller's start of the task, connecting, attaching
    /// (see [`Supervisor::start_cancellable`]). A cancelled start returns
    /// [`Error::StartCancelled`] and leaves nothing behind: no supervisor in the registry, no
    /// thread of its own, no page it created. A supervisor that was already live is returned
    /// as usual, cancelled or not.
    pub fn get_or_start_cancellable(
        &self,
        task_id: &str,
        cdp_url: &str,
        options: StartOptions,
        cancel: &CancelToken,
    ) -> Result<Arc<Supervisor>, Error> {
        self.start_inner(task_id, cdp_url, options, &self.config, Some(cancel))
    }

    /// The one start path: `config` is the registry's, or a copy with another start timeout.
    fn start_inner(
        &self,
        task_id: &str,
        cdp_url: &str,
        options: StartOptions,
        config: &Config,
        cancel: Option<&CancelToken>,
    ) -> Result<Arc<Supervisor>, Error> {
        crate::task_id::check(task_id)?;
        if cancel.is_some_and(CancelToken::is_cancelled) {
            // Called off before it began: a supervisor the start would replace is kept.
            return Err(Error::StartCancelled {
                task_id: task_id.to_string(),
                during: "waiting to start".into(),
            });
        }
        options.check()?;
        // Another caller's start of the task ends within its own start timeout, which may
        // differ from this one's; twice this one and a margin bounds the wait for it.
        let wait_deadline = Deadline::after(
            config
                .start_timeout
                .saturating_mul(2)
                .saturating_add(Duration::from_secs(2)),
        );
        let isolate = config.security.isolate_tasks;
        let (guard, old, taken) = loop {
            let mut slots = self.lock();
            if slots.closed {
                return Err(Error::RegistryClosed(task_id.to_string()));
            }
            if let Some(slot) = slots.tasks.get(task_id) {
                if let Some(cur) = &slot.current
                    && cur.cdp_url_raw() == cdp_url
                    && *cur.options() == options
                    && cur.is_alive()
                {
                    return Ok(Arc::clone(cur));
                }
                if let Some(starting) = &slot.starting {
                    let done = starting.done.clone();
                    let stopped = Arc::clone(&starting.stopped);
                    drop(slots);
                    let never = crossbeam_channel::never();
                    let cancelled = cancel.map_or(&never, CancelToken::receiver);
                    const WAITING: &str = "waiting for another caller's start of the task";
                    crossbeam_channel::select! {
                        recv(done) -> _ => {}
                        recv(cancelled) -> _ => return Err(Error::StartCancelled {
                            task_id: task_id.to_string(),
                            during: WAITING.into(),
                        }),
                        recv(wait_deadline.alarm()) -> _ => return Err(Error::StartTimeout(
                            config.start_timeout,
                            "another caller's start of this task did not finish".into(),
                        )),
                    }
                    if stopped.load(Ordering::Acquire) {
                        // The stop was meant for this call too: it does not start again.
                        return Err(stopped_start(task_id, WAITING, self.lock().closed));
                    }
                    continue;
                }
            }
            if isolate
                && let Some(t) = &options.target_id
                && slots.owned_elsewhere(task_id, t)
            {
                return Err(refused_page(t));
            }
            let taken = if isolate && !options.owns_page() && options.target_id.is_none() {
                slots.taken_pages(task_id)
            } else {
                Vec::new()
            };
            // This caller starts the supervisor; the one it replaces (rebind, new options,
            // dead) is not alive from here on.
            let old = self
                .remove_slot(&mut slots, task_id)
                .and_then(|s| s.current);
            let ticket = slots.next_ticket;
            slots.next_ticket += 1;
            let (done_tx, done_rx) = bounded::<()>(0);
            // Cancelled by the caller's token, or on its own by a stop of the task.
            let token = cancel.map_or_else(CancelToken::new, CancelToken::child);
            slots.tasks.insert(
                task_id.to_string(),
                Slot {
                    current: None,
                    starting: Some(Starting {
                        ticket,
                        done: done_rx,
                        cancel: token.clone(),
                        stopped: Arc::default(),
                        claim: options.target_id.clone(),
                    }),
                },
            );
            let guard = StartGuard {
                registry: self,
                task_id,
                ticket,
                cancel: token,
                _done: done_tx,
            };
            break (guard, old, taken);
        };
        if let Some(old) = old {
            log::info!(
                "task {task_id}: replacing the supervisor for {} (rebind, new options or dead)",
                redact_url(cdp_url)
            );
            old.stop();
        }
        let served = config.follow_popups && self.popup_watcher;
        let token = Some(&guard.cancel);
        let started =
            Supervisor::start_served(task_id, cdp_url, config, options, token, served, &taken)
                .and_then(|sup| match served {
                    true => match self.popups.serve(&sup, cdp_url, config, token) {
                        Ok(()) => Ok(sup),
                        Err(e) => {
                            sup.stop();
                            Err(e)
                        }
                    },
                    false => Ok(sup),
                });
        match started {
            Ok(sup) => guard.publish(sup, isolate),
            // Called off by a stop or a close rather than by the caller: say so.
            Err(Error::StartCancelled { during, .. })
                if !cancel.is_some_and(CancelToken::is_cancelled) =>
            {
                Err(stopped_start(task_id, &during, self.lock().closed))
            }
            Err(e) => Err(e),
        }
    }

    /// Removes `task_id`'s slot, with `slots` locked: its supervisor is asked to stop (not
    /// alive from now on: no observer ever sees two live supervisors for one task) and leaves
    /// the read map; a start in progress for it has lost. The caller stops the supervisor once
    /// the lock is released.
    fn remove_slot(&self, slots: &mut Slots, task_id: &str) -> Option<Slot> {
        let slot = slots.tasks.remove(task_id)?;
        if let Some(starting) = &slot.starting {
            starting.stopped.store(true, Ordering::Release);
            starting.cancel.cancel();
        }
        if let Some(sup) = &slot.current {
            sup.request_stop();
            self.reads.set(slots, task_id, None);
        }
        Some(slot)
    }

    /// The supervisor for `task_id`, if one has been started and not stopped (it may be dead:
    /// check [`Supervisor::is_alive`]). Lock-free.
    pub fn get(&self, task_id: &str) -> Option<Arc<Supervisor>> {
        self.reads.get(task_id)
    }

    /// The latest snapshot of `task_id`. Lock-free and wait-free: the task's supervisor from the
    /// per-thread cache (or one arc-swap load of the task map and one hash lookup), then the
    /// supervisor's snapshot load and one reference-count increment; no lock, no allocation, no
    /// syscall.
    pub fn snapshot(&self, task_id: &str) -> Option<Arc<Snapshot>> {
        self.reads.with_cell(task_id, |c| c.load_full())
    }

    /// [`snapshot`](Self::snapshot) without the per-thread cache (for the benchmark).
    pub(crate) fn snapshot_uncached(&self, task_id: &str) -> Option<Arc<Snapshot>> {
        self.reads.with_cell_uncached(task_id, |c| c.load_full())
    }

    /// Calls `f` with the latest snapshot of `task_id` without touching its reference count:
    /// the fastest read, for handlers that only look (nothing shared is written, so readers on
    /// other cores never contend).
    pub fn with_snapshot<R>(&self, task_id: &str, f: impl FnOnce(&Snapshot) -> R) -> Option<R> {
        self.reads.with_cell(task_id, |c| f(&c.load()))
    }

    /// Stops `task_id`'s supervisor (dismissing pending dialogs first) and forgets it. Returns
    /// whether there was one. A start in progress for the task is cancelled: it returns
    /// [`Error::StartCancelled`] at once, wherever it was waiting, and leaves nothing behind.
    pub fn stop(&self, task_id: &str) -> bool {
        let Some(slot) = self.remove_slot(&mut self.lock(), task_id) else {
            return false;
        };
        match slot.current {
            Some(sup) => {
                sup.stop();
                true
            }
            None => slot.starting.is_some(),
        }
    }

    /// Stops every supervisor, and cancels every start in progress (as [`stop`](Self::stop)
    /// does). The registry stays open: later starts run as usual.
    pub fn stop_all(&self) {
        for t in self.tasks() {
            self.stop(&t);
        }
        self.popups.close_idle();
    }

    /// Closes the registry: every start in progress is cancelled ([`Error::StartCancelled`],
    /// at once), every supervisor stopped, the popup watchers closed, and every later start
    /// refused with [`Error::RegistryClosed`] (lookups, snapshots and `stop` still answer).
    /// Idempotent; dropping the registry closes it too.
    pub fn close(&self) {
        self.lock().closed = true;
        self.stop_all();
        self.popups.close_all();
        if let Some(endpoint) = self.endpoint.get() {
            endpoint.close();
        }
    }

    /// True once [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Task ids with a slot (live or starting).
    pub fn tasks(&self) -> Vec<String> {
        self.lock().tasks.keys().cloned().collect()
    }
}

impl Drop for SupervisorRegistry {
    fn drop(&mut self) {
        self.close();
    }
}

/// The error of a start that a stop of its task (or the registry's close) called off while it
/// was `during` something.
fn stopped_start(task_id: &str, during: &str, closed: bool) -> Error {
    let by = if closed {
        "the registry was closed"
    } else {
        "the task was stopped"
    };
    Error::StartCancelled {
        task_id: task_id.to_string(),
        during: format!("{during} ({by})"),
    }
}

#[cfg(all(test, feature = "fake-browser"))]
mod tests;
