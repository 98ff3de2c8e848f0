//! The MCP server's workers: at most `max` tool calls in flight, each holding a [`Slot`] keyed
//! by its request id within its scope ([`Key`]), run on threads spawned as needed (never more
//! than `max`). Every transport shares the one pool of its server, so the limit is the same on
//! stdio and over HTTP.
//!
//! Nothing a handler does can shrink the pool for good:
//! * a request's slot is freed by [`Slot::release`] when its answer is ready, and by the
//!   slot's `Drop` on every other way out: the handler panicked, the answer could not be
//!   written, the job never ran (the queue refused it);
//! * a panicking handler is caught on the worker (`catch_unwind`), logged, and its request gets
//!   an answer all the same (the `done` callback of [`Pool::run`] receives the panic);
//! * the worker loop catches whatever else a job throws, so a worker thread never dies of a job,
//!   and a worker that ends anyway gives its place back (`workers` is decremented by a guard), so
//!   the next call spawns a new one.

use crate::sync::lock;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, bounded};

use crate::cancel::CancelToken;
use crate::mcp::rpc::IdKey;

type Job = Box<dyn FnOnce() + Send>;

/// A request in flight: the channel its id belongs to (`Engine::channel`), and the id's key.
/// Ids are the client's, so they are unique only within one client: stdio has a channel, a
/// legacy HTTP session has one of its own, and each stateless HTTP request a fresh one.
pub(crate) type Key = (u64, IdKey);

/// Requests in flight by their key, each with its cancel token.
type InFlight = Arc<Mutex<HashMap<Key, CancelToken>>>;

/// Why [`Pool::admit`] refused a request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A request with an equal id is still in flight.
    Duplicate,
    /// `max` requests are in flight.
    Full,
}

/// The worker pool (module doc).
pub(crate) struct Pool {
    max: usize,
    stack_size: usize,
    /// Requests admitted and not yet released. Inserted by [`Pool::admit`] (the reading
    /// thread), removed by their [`Slot`] (a worker, or whoever drops it).
    in_flight: InFlight,
    /// Jobs for the workers; at most `max` are ever queued or running.
    jobs: Sender<Job>,
    jobs_rx: Receiver<Job>,
    /// Worker threads alive: incremented by [`Pool::run`] before it spawns one, decremented
    /// when a worker thread ends (or could not be spawned).
    workers: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("max", &self.max)
            .field("in_flight", &self.in_flight())
            .field("workers", &self.workers())
            .finish()
    }
}

/// One admitted request's place in the pool: freed exactly once, by [`Slot::release`] or on drop.
#[derive(Debug)]
pub(crate) struct Slot {
    in_flight: InFlight,
    key: Key,
    token: CancelToken,
    freed: bool,
}

impl Slot {
    /// The request's cancel token (cancelled by [`Pool::cancel`]).
    pub(crate) fn token(&self) -> &CancelToken {
        &self.token
    }

    /// Frees the slot; true when the request was cancelled before that (it then gets no
    /// response). Deciding both under one lock means a cancel either comes first (no answer)
    /// or finds nothing (the answer goes out).
    pub(crate) fn release(mut self) -> bool {
        self.free()
    }

    fn free(&mut self) -> bool {
        let mut map = lock(&self.in_flight);
        if !self.freed {
            self.freed = true;
            // Only our own entry: never one a later request with an equal id put there.
            if map.get(&self.key).is_some_and(|t| t.same_as(&self.token)) {
                map.remove(&self.key);
            }
        }
        self.token.is_cancelled()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if !self.freed {
            self.free();
        }
    }
}

/// Decrements the live worker count when its thread ends, however it ends.
struct WorkerAlive(Arc<AtomicUsize>);

impl Drop for WorkerAlive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The text of a panic's payload (a `&str` or a `String`; anything else is unnamed).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

impl Pool {
    /// A pool of at most `max` calls in flight, on threads of `stack_size` bytes.
    pub(crate) fn new(max: usize, stack_size: usize) -> Pool {
        let (jobs, jobs_rx) = bounded(max);
        Pool {
            max,
            stack_size,
            in_flight: Arc::default(),
            jobs,
            jobs_rx,
            workers: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Requests in flight.
    pub(crate) fn in_flight(&self) -> usize {
        lock(&self.in_flight).len()
    }

    /// Worker threads alive.
    pub(crate) fn workers(&self) -> usize {
        self.workers.load(Ordering::Acquire)
    }

    /// Takes a place for the request `key`, with a fresh cancel token.
    pub(crate) fn admit(&self, key: Key) -> Result<Slot, Refused> {
        let token = CancelToken::new();
        let mut map = lock(&self.in_flight);
        if map.contains_key(&key) {
            return Err(Refused::Duplicate);
        }
        if map.len() >= self.max {
            return Err(Refused::Full);
        }
        map.insert(key.clone(), token.clone());
        Ok(Slot {
            in_flight: Arc::clone(&self.in_flight),
            key,
            token,
            freed: false,
        })
    }

    /// Whether the request `key` is in flight.
    pub(crate) fn contains(&self, key: &Key) -> bool {
        lock(&self.in_flight).contains_key(key)
    }

    /// Cancels the request `key` if it is in flight; true when it was.
    pub(crate) fn cancel(&self, key: &Key) -> bool {
        let map = lock(&self.in_flight);
        match map.get(key) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Cancels every request in flight of `channel` (an HTTP session that ended).
    pub(crate) fn cancel_channel(&self, channel: u64) {
        for ((c, _), token) in lock(&self.in_flight).iter() {
            if *c == channel {
                token.cancel();
            }
        }
    }

    /// Cancels every request in flight.
    pub(crate) fn cancel_all(&self) {
        for token in lock(&self.in_flight).values() {
            token.cancel();
        }
    }

    /// Runs `work` (with the slot's cancel token) on a worker, then `done` with its result (or
    /// the panic's message when it panicked) and the slot, to release when the answer is
    /// ready. `Err` when no worker can run it (no thread could be spawned, or the queue is
    /// full): the slot is freed, and the caller answers the request itself.
    pub(crate) fn run<R: 'static>(
        &self,
        slot: Slot,
        work: impl FnOnce(&CancelToken) -> R + Send + 'static,
        done: impl FnOnce(Result<R, String>, Slot) + Send + 'static,
    ) -> Result<(), String> {
        let running = self.in_flight();
        if self.workers() < running.max(1)
            && let Err(e) = self.spawn_worker()
        {
            if self.workers() == 0 {
                return Err(e);
            }
            log::warn!("{e}; the calls wait for a running worker");
        }
        let job: Job = Box::new(move || {
            let token = slot.token().clone();
            let outcome =
                catch_unwind(AssertUnwindSafe(|| work(&token))).map_err(|p| panic_message(&*p));
            done(outcome, slot);
        });
        self.jobs
            .try_send(job)
            .map_err(|e| format!("the MCP worker queue refused a job: {e}"))
    }

    fn spawn_worker(&self) -> Result<(), String> {
        let n = self.workers.fetch_add(1, Ordering::AcqRel);
        if n >= self.max {
            self.workers.fetch_sub(1, Ordering::AcqRel);
            return Ok(());
        }
        let alive = WorkerAlive(Arc::clone(&self.workers));
        let jobs = self.jobs_rx.clone();
        std::thread::Builder::new()
            .name(format!("mcp-worker-{n}"))
            .stack_size(self.stack_size)
            .spawn(move || {
                let _alive = alive;
                for job in jobs.iter() {
                    if let Err(p) = catch_unwind(AssertUnwindSafe(job)) {
                        log::error!(
                            "an MCP worker job panicked after its handler: {:?}",
                            panic_message(&*p)
                        );
                    }
                }
            })
            .map(drop)
            // The closure, and `alive` with it, is dropped when the spawn fails.
            .map_err(|e| format!("cannot start an MCP worker thread: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::unbounded;
    use std::time::Duration;

    const WAIT: Duration = Duration::from_secs(5);

    /// The channel of the test's one client.
    const STDIO: u64 = 0;

    fn key(n: u32) -> Key {
        (STDIO, IdKey::Num(format!("{n}e0")))
    }

    #[test]
    fn a_panicking_handler_frees_its_slot_and_its_request_is_answered() {
        let pool = Pool::new(2, 256 * 1024);
        let (answers, got) = unbounded();
        // Many more panicking calls than the pool has places and workers.
        for i in 0..50 {
            let slot = pool.admit(key(i)).expect("a free place");
            let answers = answers.clone();
            pool.run(
                slot,
                move |_| -> u32 { panic!("handler {i} fails") },
                move |outcome, slot| {
                    assert!(!slot.release(), "not cancelled");
                    answers.send((i, outcome)).unwrap();
                },
            )
            .expect("a worker runs it");
            let (n, outcome) = got.recv_timeout(WAIT).expect("an answer");
            assert_eq!(n, i);
            assert_eq!(outcome, Err(format!("handler {i} fails")));
            assert_eq!(pool.in_flight(), 0, "call {i} freed its place");
        }
        assert!(pool.workers() >= 1 && pool.workers() <= 2, "{pool:?}");
        // Both places work afterwards: two calls that each wait for the other's signal both
        // see it, so they ran at the same time.
        let (a_tx, a_rx) = bounded::<()>(1);
        let (b_tx, b_rx) = bounded::<()>(1);
        let (ends_tx, ends) = unbounded();
        for (mine, theirs) in [(a_tx, b_rx), (b_tx, a_rx)] {
            let ends_tx = ends_tx.clone();
            let slot = pool.admit(key(100 + pool.in_flight() as u32)).unwrap();
            pool.run(
                slot,
                move |_| mine.send(()).is_ok() && theirs.recv_timeout(WAIT).is_ok(),
                move |outcome, slot| {
                    slot.release();
                    ends_tx.send(outcome).unwrap();
                },
            )
            .unwrap();
        }
        for _ in 0..2 {
            assert_eq!(ends.recv_timeout(WAIT).unwrap(), Ok(true));
        }
        assert_eq!(pool.workers(), 2);
    }

    #[test]
    fn a_panic_after_the_handler_frees_the_slot_and_keeps_the_worker() {
        let pool = Pool::new(1, 256 * 1024);
        for i in 0..20 {
            let slot = pool.admit(key(i)).unwrap();
            pool.run(
                slot,
                |_| 1,
                |_, _slot| panic!("the answer cannot be written"),
            )
            .unwrap();
            // The slot is freed while the panic unwinds through `done`.
            let deadline = crate::deadline::Deadline::after(WAIT);
            while pool.in_flight() > 0 {
                assert!(!deadline.passed(), "slot {i} never freed");
                std::thread::yield_now();
            }
        }
        assert_eq!(pool.workers(), 1, "the worker survived every panic");
        let (tx, rx) = bounded(1);
        let slot = pool.admit(key(99)).unwrap();
        pool.run(
            slot,
            |_| 7,
            move |r, slot| {
                slot.release();
                tx.send(r).unwrap();
            },
        )
        .unwrap();
        assert_eq!(rx.recv_timeout(WAIT).unwrap(), Ok(7));
    }

    #[test]
    fn duplicates_and_a_full_pool_are_refused_and_places_come_back() {
        let pool = Pool::new(2, 256 * 1024);
        let one = pool.admit(key(1)).unwrap();
        assert_eq!(pool.admit(key(1)).unwrap_err(), Refused::Duplicate);
        let two = pool.admit(key(2)).unwrap();
        assert_eq!(pool.admit(key(3)).unwrap_err(), Refused::Full);
        drop(one); // e.g. a job the queue refused: its place comes back
        let three = pool.admit(key(3)).unwrap();
        assert!(pool.cancel(&key(2)));
        assert!(two.release(), "cancelled before its answer");
        assert!(!pool.cancel(&key(2)), "a released request is not in flight");
        assert!(!three.release());
        assert_eq!(pool.in_flight(), 0);
    }

    #[test]
    fn equal_ids_of_different_clients_are_different_requests() {
        let pool = Pool::new(4, 256 * 1024);
        let id = IdKey::Num("1e0".into());
        let stdio = pool.admit((STDIO, id.clone())).unwrap();
        let session = pool
            .admit((7, id.clone()))
            .expect("another scope, another request");
        assert_eq!(pool.admit((7, id.clone())).unwrap_err(), Refused::Duplicate);
        assert!(pool.cancel(&(7, id.clone())));
        assert!(session.release(), "the scope's own request was cancelled");
        assert!(!stdio.release(), "the other scope's request was not");
    }

    #[test]
    fn a_slot_never_frees_a_later_request_with_an_equal_id() {
        let pool = Pool::new(4, 256 * 1024);
        let first = pool.admit(key(1)).unwrap();
        first.release();
        let second = pool.admit(key(1)).unwrap();
        // A stale clone of the first slot's state cannot remove the second's entry.
        let stale = Slot {
            in_flight: Arc::clone(&pool.in_flight),
            key: key(1),
            token: CancelToken::new(),
            freed: false,
        };
        drop(stale);
        assert_eq!(pool.in_flight(), 1);
        drop(second);
        assert_eq!(pool.in_flight(), 0);
    }
}
