//! Blocking calls from Python. Every wait releases the GIL, so other Python threads run on.
//!
//! Ctrl-C: Python runs signal handlers on the main thread only, and only when that thread is
//! back in the interpreter. So on the main thread a wait is cut into slices of [`SLICE`], and
//! between two slices the binding calls `check_signals` (which raises `KeyboardInterrupt`, or
//! whatever the handler raises). Waits that Rust cannot cut into slices (a CDP call, a start, a
//! dialog answer) run on a helper thread while the main thread waits for their result in
//! slices; when the wait is interrupted, the job's [`CancelToken`] is cancelled (a call is
//! abandoned and its late reply dropped, a start is called off and leaves nothing behind, a
//! dialog answer stops waiting for its acknowledgement), and the main thread gives the job one
//! more [`SLICE`] to end before it raises, so that the helper is free for the next call. On any
//! other thread (no signal ever reaches it) a call runs where it is, in one wait, with no
//! helper and no slices.
//!
//! After `os.fork()` the child's only thread (the one that forked) is its main thread, and the
//! helper thread is not in the child: the child records the one and starts its own other.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, unbounded};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use cdp_supervisor::CancelToken;
use cdp_supervisor::unversioned::Deadline;

/// How long the main thread waits before it looks for a signal again (Ctrl-C is handled within
/// this plus the handler's own time: the contract is 100 ms).
pub const SLICE: Duration = Duration::from_millis(20);

/// The longest wait a caller can ask for (longer ones are cut to it).
pub const MAX_WAIT: Duration = Duration::from_secs(30 * 24 * 3600);

/// `threading.main_thread().ident`, read when the module is imported.
static MAIN_THREAD: AtomicU64 = AtomicU64::new(0);

/// Records which thread is Python's main thread, in this process and in children of
/// `os.fork()` (called once, at import, after `crate::fork::init`).
pub fn init(py: Python<'_>) -> PyResult<()> {
    let ident: u64 = py
        .import("threading")?
        .call_method0("main_thread")?
        .getattr("ident")?
        .extract()?;
    MAIN_THREAD.store(ident, Ordering::Relaxed);
    crate::fork::in_every_child(&wrap_pyfunction!(after_fork_in_child, py)?)
}

/// True on the thread Python delivers signals to.
pub fn on_main_thread() -> bool {
    // SAFETY: a plain query of the calling thread's id; the caller is attached to Python.
    #[allow(unsafe_code)]
    let me = unsafe { pyo3::ffi::PyThread_get_thread_ident() } as u64;
    me == MAIN_THREAD.load(Ordering::Relaxed)
}

type Job = Box<dyn FnOnce() + Send>;

/// The helper thread of the main thread's calls (the main thread makes one call at a time),
/// started on first use in each process: a child of `os.fork()` has the parent's `Helper` but
/// not its thread, and starts its own.
struct Helper {
    jobs: Sender<Job>,
    /// Set by `dispatch`, cleared by the job itself once it has its result, before it hands
    /// the result over (so a caller that has the result finds the helper free).
    busy: Arc<AtomicBool>,
    /// The process whose thread this is.
    pid: u32,
}

/// The current process's helper. Only the main thread reads or replaces it.
static HELPER: ArcSwapOption<Helper> = ArcSwapOption::const_empty();

fn helper() -> Arc<Helper> {
    let pid = crate::fork::current_pid();
    if let Some(h) = HELPER.load_full()
        && h.pid == pid
    {
        return h;
    }
    let (tx, rx): (Sender<Job>, Receiver<Job>) = unbounded();
    let busy = Arc::new(AtomicBool::new(false));
    let spawned = std::thread::Builder::new()
        .name("cdp-py-main-calls".into())
        .spawn(move || {
            for job in rx {
                job();
            }
        });
    if let Err(e) = spawned {
        log_spawn_failure(&e);
    }
    let fresh = Arc::new(Helper {
        jobs: tx,
        busy,
        pid,
    });
    if let Some(old) = HELPER.swap(Some(Arc::clone(&fresh)))
        && old.pid != pid
    {
        // The parent's: its thread is not in this process, and waking it is not ours to do.
        std::mem::forget(old);
    }
    fresh
}

/// In the child of a fork (`crate::fork`): the thread that forked is the main thread now (as
/// Python sees it), and the parent's helper is left alone (`helper` starts this process's own).
#[pyfunction]
#[pyo3(name = "_blocking_after_fork_in_child")]
fn after_fork_in_child() {
    // SAFETY: a plain query of the calling thread's id.
    #[allow(unsafe_code)]
    let me = unsafe { pyo3::ffi::PyThread_get_thread_ident() } as u64;
    MAIN_THREAD.store(me, Ordering::Relaxed);
}

fn log_spawn_failure(e: &std::io::Error) {
    eprintln!("cdp_supervisor: cannot start the helper thread for main-thread calls: {e}");
}

/// Runs `job` on the helper, or on a thread of its own when the helper is still busy with an
/// abandoned call (or a signal handler made a call while one was in flight), and sends its
/// result to `done`.
fn dispatch<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
    done: Sender<T>,
) -> PyResult<()> {
    let h = helper();
    if h.busy
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        let busy = Arc::clone(&h.busy);
        let on_helper: Job = Box::new(move || {
            let v = job();
            busy.store(false, Ordering::Release);
            let _ = done.send(v);
        });
        if let Err(e) = h.jobs.send(on_helper) {
            // No helper thread: the job runs on its own (and clears `busy` when done).
            return spawn(e.into_inner());
        }
        return Ok(());
    }
    spawn(Box::new(move || {
        let _ = done.send(job());
    }))
}

fn spawn(job: Job) -> PyResult<()> {
    std::thread::Builder::new()
        .name("cdp-py-call".into())
        .spawn(job)
        .map(|_| ())
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))
}

/// Runs a blocking call without the GIL. `job` gets a cancel token on the main thread (where
/// Ctrl-C cancels it), `None` elsewhere.
pub fn call<T: Send + 'static>(
    py: Python<'_>,
    job: impl FnOnce(Option<&CancelToken>) -> T + Send + 'static,
) -> PyResult<T> {
    if !on_main_thread() {
        return Ok(py.detach(move || job(None)));
    }
    let cancel = CancelToken::new();
    let (tx, rx) = bounded::<T>(1);
    let token = cancel.clone();
    dispatch(move || job(Some(&token)), tx)?;
    loop {
        match py.detach(|| rx.recv_timeout(SLICE)) {
            Ok(v) => return Ok(v),
            Err(RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    cancel.cancel();
                    // A job that honours its token ends at once: its result is dropped here
                    // and the helper is free again. One that does not (a browser launch) is
                    // left to finish on its own.
                    let _ = py.detach(|| rx.recv_timeout(SLICE));
                    return Err(e);
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(PyRuntimeError::new_err(
                    "the call's thread ended without an answer",
                ));
            }
        }
    }
}

/// What one slice of a sliced wait found.
pub enum Step<T> {
    /// The wait is over, with this result.
    Done(T),
    /// Nothing yet; wait again.
    Again,
}

/// A wait that Rust can cut into slices (`Supervisor::wait_for`): `step(slice)` waits at most
/// `slice`. On the main thread slices are at most [`SLICE`] with a signal check between them;
/// elsewhere one slice covers the whole wait. `None` when `timeout` passes.
pub fn sliced<T: Send>(
    py: Python<'_>,
    timeout: Duration,
    step: impl Fn(Duration) -> Step<T> + Sync,
) -> PyResult<Option<T>> {
    let deadline = Deadline::after(timeout.min(MAX_WAIT));
    let main = on_main_thread();
    loop {
        let left = deadline.remaining().unwrap_or(MAX_WAIT);
        let slice = if main { left.min(SLICE) } else { left };
        if let Step::Done(v) = py.detach(|| step(slice)) {
            return Ok(Some(v));
        }
        if deadline.passed() {
            return Ok(None);
        }
        py.check_signals()?;
    }
}
