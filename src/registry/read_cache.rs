//! The registry's read side: the published `task -> supervisor` map, read lock-free, and a
//! one-entry per-thread cache in front of it.
//!
//! Without the cache a read is one arc-swap load of the map (a guard: a thread-local debt slot
//! taken and given back), one hash lookup, then the supervisor's own snapshot load. The cache
//! replaces the first two with a thread-local access, one atomic load and a string comparison
//! while a thread keeps reading the same task (what a tool handler does). `benches/
//! snapshot_read.rs` prints both paths, and the worst case (two tasks read in turn), in the
//! same run.
//!
//! # Invariants
//!
//! 1. The map is replaced (copy-on-write) only by the holder of the registry's slot lock
//!    ([`ReadMap::set`] takes the locked slots as proof), and every replacement is followed by
//!    a `generation` bump (release).
//! 2. A cache entry is `(registry uid, generation, snapshot cell)`. It is served only when the
//!    uid is this registry's (uids are process-unique and never 0, the empty entry's), the
//!    generation equals the one this read loaded (acquire) *before* anything else, and the
//!    cell's task id is the one asked for. An entry is filled with the generation loaded before
//!    the map, so it describes that map or a newer one: it can only miss too often, never
//!    serve a supervisor that a map at least as new as its generation no longer holds. A read
//!    served from the cache is ordered at its generation load, like a read of the map then.
//! 3. The entry holds an `Arc` of the supervisor's snapshot cell only (its task id and
//!    arc-swap), never the supervisor: a stopped supervisor's threads and socket are not kept
//!    alive by a cache. Its cell and last snapshot may be, until that thread's next refill or
//!    its exit.
//! 4. Reads never allocate. (A thread's very first read registers the cache's destructor with
//!    the C runtime, which may allocate once.)
//! 5. A read made inside `f` of another read on the same thread finds the entry borrowed and
//!    takes the map path; so does a read while the thread-local is being torn down.
//! 6. Refill policy: a miss refills the entry only when this thread's previous miss was for
//!    the same task, so a thread reading tasks in no particular order does not pay a
//!    reference-count pair per read to churn it. "The same task" is compared by a hash of the
//!    task id: a collision only costs a needless refill, never a wrong answer (2 decides what
//!    is served).

use std::cell::RefCell;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use rustc_hash::{FxBuildHasher, FxHashMap as HashMap};

use super::Slots;
use crate::shared::{Observer, SnapshotCell};
use crate::supervisor::Supervisor;

/// The published map and what validates the per-thread cache against it.
pub(super) struct ReadMap {
    map: ArcSwap<HashMap<String, Arc<Supervisor>>>,
    /// Bumped (release) after every store of `map`.
    generation: AtomicU64,
    /// Process-unique identity of this registry.
    uid: u64,
    /// Run after every store of `map` (a task published or removed), by the holder of the
    /// slot lock: they must not block (the supervisor page's hub puts a flag and a wake-up).
    observers: ArcSwap<Vec<Observer>>,
}

impl std::fmt::Debug for ReadMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadMap")
            .field("map", &self.map)
            .field("generation", &self.generation)
            .field("uid", &self.uid)
            .field("observers", &self.observers.load().len())
            .finish()
    }
}

/// Source of [`ReadMap::uid`]s; 0 is never used, so an empty entry matches no registry.
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// The per-thread cache entry.
struct Entry {
    registry: u64,
    generation: u64,
    cell: Option<Arc<SnapshotCell>>,
    /// Hash of the task id of this thread's last miss (invariant 6).
    last_miss: u64,
}

thread_local! {
    static ENTRY: RefCell<Entry> = const {
        RefCell::new(Entry { registry: 0, generation: 0, cell: None, last_miss: 0 })
    };
}

impl ReadMap {
    pub fn new() -> ReadMap {
        ReadMap {
            map: ArcSwap::from_pointee(HashMap::default()),
            generation: AtomicU64::new(0),
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
            observers: ArcSwap::default(),
        }
    }

    /// Publishes `task_id -> sup` (or removes the task). `_locked` is the registry's locked
    /// slots: only their holder writes (invariant 1).
    pub fn set(&self, _locked: &mut Slots, task_id: &str, sup: Option<&Arc<Supervisor>>) {
        let mut map = HashMap::clone(&self.map.load());
        match sup {
            Some(s) => map.insert(task_id.to_string(), Arc::clone(s)),
            None => map.remove(task_id),
        };
        self.map.store(Arc::new(map));
        self.generation.fetch_add(1, Ordering::Release);
        for observer in self.observers.load().iter() {
            observer();
        }
    }

    /// Has `observer` run after every change of the map from now on.
    pub fn observe(&self, observer: Observer) {
        self.observers.rcu(|list| {
            let mut list = Vec::clone(list);
            list.push(Arc::clone(&observer));
            list
        });
    }

    /// Every published task and its supervisor. Lock-free.
    pub fn all(&self) -> Arc<HashMap<String, Arc<Supervisor>>> {
        self.map.load_full()
    }

    /// The task's supervisor. Lock-free.
    pub fn get(&self, task_id: &str) -> Option<Arc<Supervisor>> {
        self.map.load().get(task_id).cloned()
    }

    /// Runs `f` on the snapshot cell of the task's supervisor, from the map. Lock-free, never
    /// allocates.
    pub fn with_cell_uncached<R>(
        &self,
        task_id: &str,
        f: impl FnOnce(&SnapshotCell) -> R,
    ) -> Option<R> {
        self.map.load().get(task_id).map(|s| f(s.snapshot_cell()))
    }

    /// Runs `f` on the snapshot cell of the task's supervisor, through this thread's cache
    /// entry when it is valid (see the module doc). Lock-free, never allocates.
    pub fn with_cell<R>(&self, task_id: &str, f: impl FnOnce(&SnapshotCell) -> R) -> Option<R> {
        // Before the map (invariant 2).
        let generation = self.generation.load(Ordering::Acquire);
        let mut f = Some(f);
        let cached = ENTRY.try_with(|entry| {
            let mut entry = entry.try_borrow_mut().ok()?;
            if entry.registry == self.uid
                && entry.generation == generation
                && let Some(cell) = &entry.cell
                && cell.task_id == task_id
            {
                return Some(f.take().map(|f| f(cell)));
            }
            let map = self.map.load();
            let Some(sup) = map.get(task_id) else {
                return Some(None);
            };
            let found = sup.snapshot_cell();
            let hash = FxBuildHasher.hash_one(task_id);
            if entry.last_miss == hash {
                *entry = Entry {
                    registry: self.uid,
                    generation,
                    cell: Some(Arc::clone(found)),
                    last_miss: 0,
                };
            } else {
                entry.last_miss = hash;
            }
            Some(f.take().map(|f| f(found)))
        });
        match cached {
            Ok(Some(r)) => r,
            // The entry is busy (a nested read) or gone (thread teardown): the map path.
            _ => f.and_then(|f| self.with_cell_uncached(task_id, f)),
        }
    }
}
