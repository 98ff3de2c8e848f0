//! After `os.fork()`: the child gets a copy of every object of the parent, but only the thread
//! that forked. A registry's supervisors live in reader and watchdog threads the child does not
//! have, on sockets it shares with the parent: a call would wait for a reader that is not there,
//! a stop would join threads that do not exist and shut down the parent's connections (a
//! `shutdown` acts on the socket itself, not on the child's copy of its descriptor), and a
//! launched browser dropped in the child would be killed under the parent.
//!
//! So every object that owns connections or threads (registry, supervisor, fake browser)
//! remembers the process it was made in ([`Home`]) and, anywhere else:
//! * raises `UsedAfterFork` from every method that acts or reads live state, at once, without
//!   touching anything (its plain values, such as a URL or the configuration, still read);
//! * is never dropped for real: its `Drop` leaks what it owns ([`Home::leak_elsewhere`]), so no
//!   Rust `Drop` of the crate runs in the child: nothing joined, shut down, killed or written,
//!   and the parent's sockets are only closed by the child's exit, which leaves them to the
//!   parent.
//!
//! The process a method runs in is read from [`PID`], which `os.register_at_fork` keeps current
//! (one atomic load per call: the snapshot read stays a few loads); a `Drop` asks the kernel
//! (`getpid`), so that a fork Python did not see (C code's) cannot make it run either.

use std::sync::atomic::{AtomicU32, Ordering};

use pyo3::prelude::*;

/// This process's id, as of the last fork Python saw: set at import and by the child hook.
static PID: AtomicU32 = AtomicU32::new(0);

/// Records this process's id and has Python keep it current in children of `os.fork()`
/// (`multiprocessing`'s fork start method included). Called once, at import.
pub fn init(py: Python<'_>) -> PyResult<()> {
    PID.store(std::process::id(), Ordering::Relaxed);
    in_every_child(&wrap_pyfunction!(after_fork_in_child, py)?)
}

/// Has Python run `hook` in the child after every `os.fork()`, on the thread that forked (the
/// child's only thread, and its main thread from then on), hooks in the order registered.
pub fn in_every_child(hook: &Bound<'_, pyo3::types::PyCFunction>) -> PyResult<()> {
    let py = hook.py();
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("after_in_child", hook)?;
    py.import("os")?
        .getattr("register_at_fork")?
        .call((), Some(&kwargs))?;
    Ok(())
}

#[pyfunction]
#[pyo3(name = "_after_fork_in_child")]
fn after_fork_in_child() {
    PID.store(std::process::id(), Ordering::Relaxed);
}

/// The process id Python code runs in now.
pub fn current_pid() -> u32 {
    PID.load(Ordering::Relaxed)
}

/// The process an object was made in.
#[derive(Debug, Clone, Copy)]
pub struct Home {
    pid: u32,
}

impl Home {
    /// This process.
    pub fn here() -> Home {
        Home { pid: current_pid() }
    }

    /// `Ok` in the process that made the object; `UsedAfterFork` (naming `what`, e.g.
    /// `SupervisorRegistry`) in a child of it.
    pub fn check(self, what: &str) -> PyResult<()> {
        let now = current_pid();
        if now == self.pid {
            return Ok(());
        }
        Err(crate::errors::used_after_fork(what, self.pid, now))
    }

    /// True outside the process that made the object (asks the kernel: for `Drop`).
    pub fn is_elsewhere(self) -> bool {
        std::process::id() != self.pid
    }

    /// For a `Drop`: outside the object's process, leaks `owned` (an extra strong count that is
    /// never given back), so that what it holds is never dropped here; at home, does nothing.
    pub fn leak_elsewhere<T>(self, owned: &std::sync::Arc<T>) {
        if self.is_elsewhere() {
            std::mem::forget(std::sync::Arc::clone(owned));
        }
    }

    /// The object's repr outside its process (`None` at home): nothing of the object is read.
    pub fn repr_elsewhere(self, what: &str) -> Option<String> {
        (current_pid() != self.pid).then(|| {
            format!(
                "<{what} made in process {} before a fork: unusable in process {}>",
                self.pid,
                current_pid()
            )
        })
    }
}
