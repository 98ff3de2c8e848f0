//! `task_id -> Supervisor`, with lock-free lookups and race-free start/stop (SPEC §3).
//!
//! The map of tasks is an arc-swap'd `HashMap<task, Arc<Slot>>`: `get`/`snapshot` never lock.
//! Each slot publishes its live supervisor through an `ArcSwapOption`, and serialises starts and
//! stops with a small mutex that is **never held across a wait**: a start marks the slot
//! `starting` (with a channel that later callers wait on), releases the lock, connects and
//! attaches, and takes the lock again to publish. A `stop` that happens meanwhile bumps the slot's
//! generation, so the finishing start sees that it lost and stops its own supervisor instead of
//! publishing a zombie.
//!
//! # The read path
//!
//! `snapshot`/`with_snapshot`/`get` first look in a one-entry **per-thread cache** of the last
//! `(registry, task) -> supervisor` lookup, validated by the registry's `live_generation` (bumped
//! after every change of the live map): a hit costs a thread-local access, one atomic load and a
//! string comparison instead of an arc-swap guard and a hash lookup. A miss (another task, or the
//! map changed) takes the lock-free path; the second miss in a row on the same task refills the
//! entry (without allocating), so reading tasks in no particular order costs no more than
//! before. The entry holds
//! an `Arc` of the supervisor's snapshot cell (its task id and arc-swap, nothing else), so after a
//! stop that cell and its last snapshot can stay allocated until that thread's next read through
//! any registry, or its exit; the supervisor itself (threads, socket) is not kept. (A thread's very
//! first read registers the cache's destructor with the C runtime, which may allocate once.)

use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use crossbeam_channel::{Receiver, RecvTimeoutError, bounded};

use crate::config::{BridgeMode, Config, DialogPolicy};
use crate::error::Error;
use crate::redact::redact_url;
use crate::shared::SnapshotCell;
use crate::snapshot::Snapshot;
use crate::supervisor::Supervisor;

/// Per-task choices for [`SupervisorRegistry::get_or_start_with`]; the dialog overrides are
/// applied by [`Config::with_overrides`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StartOptions {
    /// Attach to this target instead of the first page.
    pub target_id: Option<String>,
    /// Override `browser.dialog_policy` for this task.
    pub dialog_policy: Option<DialogPolicy>,
    /// Override `browser.dialog_timeout_s` for this task.
    pub dialog_timeout: Option<Duration>,
    /// Override `browser.dialog_bridge` for this task.
    pub dialog_bridge: Option<BridgeMode>,
    /// Give the task a page of its own: `Target.createTarget {url: "about:blank"}` at start
    /// (ignored when `target_id` is set), and `Target.closeTarget` when the supervisor stops.
    /// Two tasks on one browser then never share a tab (nor each other's dialogs).
    pub new_page: bool,
}

#[derive(Default)]
struct SlotState {
    /// Bumped by every stop and every start; a start that finds it changed has lost a race.
    generation: u64,
    /// A start in progress: its URL and options, and a channel that disconnects when it ends.
    starting: Option<(String, StartOptions, Receiver<()>)>,
    /// The slot was removed from the map; callers holding it must look again.
    removed: bool,
}

impl std::fmt::Debug for SlotState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotState")
            .field("generation", &self.generation)
            .field(
                "starting",
                &self.starting.as_ref().map(|(url, _, _)| redact_url(url)),
            )
            .field("removed", &self.removed)
            .finish()
    }
}

#[derive(Debug, Default)]
struct Slot {
    /// The live supervisor, read lock-free.
    current: ArcSwapOption<Supervisor>,
    /// Serialises start/stop bookkeeping; never held across a wait.
    state: Mutex<SlotState>,
    /// The options the current supervisor was started with.
    options: Mutex<StartOptions>,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Owns one supervisor per task.
#[derive(Debug)]
pub struct SupervisorRegistry {
    config: Config,
    slots: ArcSwap<HashMap<String, Arc<Slot>>>,
    /// The read side: task -> its current supervisor, one arc-swap load away. Derived from the
    /// slots (republished, copy-on-write, whenever a slot's supervisor changes), so the hot
    /// `snapshot`/`get` path is a single load, one hash and the supervisor's own snapshot load.
    live: ArcSwap<HashMap<String, Arc<Supervisor>>>,
    /// Serialises republishing `live`; always the innermost lock, never held across a wait.
    live_write: Mutex<()>,
    /// Serialises changes to the map itself (inserting/removing slots).
    map_write: Mutex<()>,
    /// Bumped (release) after every store of `live`; validates the per-thread read cache.
    live_generation: AtomicU64,
    /// Process-unique identity of this registry, for the per-thread read cache.
    uid: u64,
}

/// Source of [`SupervisorRegistry::uid`]s; 0 is never used, so an empty cache matches nothing.
static NEXT_REGISTRY_UID: AtomicU64 = AtomicU64::new(1);

/// The per-thread read cache (see the module doc).
struct LiveCache {
    registry: u64,
    generation: u64,
    cell: Option<Arc<SnapshotCell>>,
    /// Address of the cell the last miss found (identity only, never dereferenced): the entry is
    /// refilled only when two misses in a row find the same cell, so a thread reading tasks in
    /// no particular order does not pay a reference-count pair per read to churn the entry.
    last_miss: usize,
}

thread_local! {
    static LIVE_CACHE: RefCell<LiveCache> = const {
        RefCell::new(LiveCache { registry: 0, generation: 0, cell: None, last_miss: 0 })
    };
}

impl SupervisorRegistry {
    /// A registry applying `config` to every supervisor it starts.
    pub fn new(config: Config) -> Self {
        SupervisorRegistry {
            config,
            slots: ArcSwap::from_pointee(HashMap::default()),
            live: ArcSwap::from_pointee(HashMap::default()),
            live_write: Mutex::new(()),
            map_write: Mutex::new(()),
            live_generation: AtomicU64::new(0),
            uid: NEXT_REGISTRY_UID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The live supervisor for `task_id`, starting (or replacing) one as needed.
    pub fn get_or_start(&self, task_id: &str, cdp_url: &str) -> Result<Arc<Supervisor>, Error> {
        self.get_or_start_with(task_id, cdp_url, StartOptions::default())
    }

    fn slot(&self, task_id: &str) -> Arc<Slot> {
        if let Some(s) = self.slots.load().get(task_id) {
            return Arc::clone(s);
        }
        let _w = self.map_write.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = self.slots.load().get(task_id) {
            return Arc::clone(s);
        }
        let slot = Arc::new(Slot::default());
        let mut map = HashMap::clone(&self.slots.load());
        map.insert(task_id.to_string(), Arc::clone(&slot));
        self.slots.store(Arc::new(map));
        slot
    }

    /// Like [`get_or_start`](Self::get_or_start) with per-task options. Idempotent for the same
    /// URL and options; a different URL or different options rebinds (stops the old supervisor,
    /// starts a fresh one: state is never carried across). A dead supervisor is replaced.
    pub fn get_or_start_with(
        &self,
        task_id: &str,
        cdp_url: &str,
        options: StartOptions,
    ) -> Result<Arc<Supervisor>, Error> {
        if let Some(t) = options.dialog_timeout
            && t.is_zero()
        {
            return Err(Error::Config {
                key: "dialog_timeout_s".into(),
                value: "0".into(),
                allowed: "a number of seconds > 0".into(),
            });
        }
        let wait_deadline = Instant::now() + self.config.start_timeout * 2 + Duration::from_secs(2);
        loop {
            let slot = self.slot(task_id);
            let mut st = slot.lock();
            if st.removed {
                continue;
            }
            if let Some(cur) = slot.current.load_full() {
                let same_opts = *slot.options.lock().unwrap_or_else(|e| e.into_inner()) == options;
                if cur.cdp_url_raw() == cdp_url && same_opts && cur.is_alive() {
                    return Ok(cur);
                }
            }
            if let Some((_, _, done)) = &st.starting {
                let done = done.clone();
                drop(st);
                match done.recv_deadline(wait_deadline) {
                    Err(RecvTimeoutError::Timeout) => {
                        return Err(Error::StartTimeout(
                            self.config.start_timeout,
                            "another caller's start of this task did not finish".into(),
                        ));
                    }
                    _ => continue,
                }
            }
            // This caller starts the supervisor.
            st.generation += 1;
            let generation = st.generation;
            let (done_tx, done_rx) = bounded::<()>(0);
            st.starting = Some((cdp_url.to_string(), options.clone(), done_rx));
            let old = slot.current.swap(None);
            if let Some(old) = &old {
                old.mark_stopping();
                self.set_live(task_id, None);
            }
            drop(st);
            if let Some(old) = old {
                log::info!(
                    "task {task_id}: replacing the supervisor for {} (rebind, new options or dead)",
                    redact_url(cdp_url)
                );
                old.stop();
            }
            let result = Supervisor::start(task_id, cdp_url, &self.config, options.clone());
            let mut st = slot.lock();
            st.starting = None;
            drop(done_tx);
            if st.generation != generation {
                drop(st);
                if let Ok(s) = result {
                    s.stop();
                }
                return Err(Error::NotActive(format!(
                    "{task_id} (stopped while it was starting)"
                )));
            }
            let sup = match result {
                Ok(s) => s,
                Err(e) => {
                    drop(st);
                    self.remove_if_idle(task_id, &slot);
                    return Err(e);
                }
            };
            *slot.options.lock().unwrap_or_else(|e| e.into_inner()) = options;
            slot.current.store(Some(Arc::clone(&sup)));
            self.set_live(task_id, Some(&sup));
            return Ok(sup);
        }
    }

    /// Republishes the read side for one task (called with the slot's lock held).
    fn set_live(&self, task_id: &str, sup: Option<&Arc<Supervisor>>) {
        let _w = self.live_write.lock().unwrap_or_else(|e| e.into_inner());
        let mut map = HashMap::clone(&self.live.load());
        match sup {
            Some(s) => map.insert(task_id.to_string(), Arc::clone(s)),
            None => map.remove(task_id),
        };
        self.live.store(Arc::new(map));
        self.live_generation.fetch_add(1, Ordering::Release);
    }

    /// Runs `f` on the snapshot cell of `task_id`'s live supervisor, through the per-thread
    /// cache when it is valid (see the module doc). Never allocates.
    fn with_cell<R>(&self, task_id: &str, f: impl FnOnce(&SnapshotCell) -> R) -> Option<R> {
        // Read the generation before the map: an entry filled from a map at least as new as this
        // generation stays valid exactly as long as the generation does not move.
        let generation = self.live_generation.load(Ordering::Acquire);
        let mut f = Some(f);
        let cached = LIVE_CACHE.try_with(|cell| {
            // Busy: `f` of an outer read is reading again on this thread. Take the plain path.
            let mut entry = cell.try_borrow_mut().ok()?;
            let hit = entry.registry == self.uid
                && entry.generation == generation
                && entry.cell.as_ref().is_some_and(|c| c.task_id == task_id);
            if hit {
                let f = f.take()?;
                return Some(entry.cell.as_deref().map(f));
            }
            let live = self.live.load();
            let Some(sup) = live.get(task_id) else {
                return Some(None);
            };
            let found = sup.snapshot_cell();
            let address = Arc::as_ptr(found) as usize;
            if entry.last_miss == address {
                *entry = LiveCache {
                    registry: self.uid,
                    generation,
                    cell: Some(Arc::clone(found)),
                    last_miss: 0,
                };
            } else {
                entry.last_miss = address;
            }
            let f = f.take()?;
            Some(Some(f(found)))
        });
        match cached {
            Ok(Some(r)) => r,
            // No cache on this thread (busy, or being torn down): the lock-free path.
            _ => f.and_then(|f| self.live.load().get(task_id).map(|s| f(s.snapshot_cell()))),
        }
    }

    /// The supervisor for `task_id`, if one has been started and not stopped (it may be dead:
    /// check [`Supervisor::is_alive`]). Lock-free.
    pub fn get(&self, task_id: &str) -> Option<Arc<Supervisor>> {
        self.live.load().get(task_id).cloned()
    }

    /// The latest snapshot of `task_id`. Lock-free and wait-free: the task's supervisor from the
    /// per-thread cache (or one arc-swap load of the task map and one hash lookup), then the
    /// supervisor's snapshot load and one reference-count increment; no lock, no allocation, no
    /// syscall.
    pub fn snapshot(&self, task_id: &str) -> Option<Arc<Snapshot>> {
        self.with_cell(task_id, |c| c.load_full())
    }

    /// Calls `f` with the latest snapshot of `task_id` without touching its reference count:
    /// the fastest read, for handlers that only look (nothing shared is written, so readers on
    /// other cores never contend).
    pub fn with_snapshot<R>(&self, task_id: &str, f: impl FnOnce(&Snapshot) -> R) -> Option<R> {
        self.with_cell(task_id, |c| f(&c.load()))
    }

    /// Stops `task_id`'s supervisor (dismissing pending dialogs first) and forgets it. Returns
    /// whether there was one. A start in progress for the task is cancelled.
    pub fn stop(&self, task_id: &str) -> bool {
        loop {
            let Some(slot) = self.slots.load().get(task_id).cloned() else {
                return false;
            };
            let map_guard = self.map_write.lock().unwrap_or_else(|e| e.into_inner());
            let mut st = slot.lock();
            if st.removed {
                // Another stop removed this slot after we looked it up; a newer slot may exist.
                continue;
            }
            st.generation += 1;
            let cur = slot.current.swap(None);
            if let Some(c) = &cur {
                c.mark_stopping();
                self.set_live(task_id, None);
            }
            let was_starting = st.starting.is_some();
            if !was_starting {
                st.removed = true;
                let mut map = HashMap::clone(&self.slots.load());
                if map.get(task_id).is_some_and(|s| Arc::ptr_eq(s, &slot)) {
                    map.remove(task_id);
                    self.slots.store(Arc::new(map));
                }
            }
            drop(st);
            drop(map_guard);
            return match cur {
                Some(s) => {
                    s.stop();
                    true
                }
                None => was_starting,
            };
        }
    }

    /// Forgets `slot` when it holds no supervisor and no start is in progress (a failed start
    /// must not leave its task behind).
    fn remove_if_idle(&self, task_id: &str, slot: &Arc<Slot>) {
        let _w = self.map_write.lock().unwrap_or_else(|e| e.into_inner());
        let mut st = slot.lock();
        if st.removed || st.starting.is_some() || slot.current.load().is_some() {
            return;
        }
        st.removed = true;
        let mut map = HashMap::clone(&self.slots.load());
        if map.get(task_id).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            map.remove(task_id);
            self.slots.store(Arc::new(map));
        }
    }

    /// Stops every supervisor.
    pub fn stop_all(&self) {
        let tasks: Vec<String> = self.slots.load().keys().cloned().collect();
        for t in tasks {
            self.stop(&t);
        }
    }

    /// Task ids with a slot (live or starting).
    pub fn tasks(&self) -> Vec<String> {
        self.slots.load().keys().cloned().collect()
    }
}

impl Drop for SupervisorRegistry {
    fn drop(&mut self) {
        self.stop_all();
    }
}
