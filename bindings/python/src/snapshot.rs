//! The published snapshot as frozen, typed Python objects (`cdp_supervisor.Snapshot` and its
//! parts). Every attribute is a Python object made once, when the snapshot is converted, so
//! reading one allocates nothing; a collection the reader thread did not change since the
//! previous snapshot (the Rust snapshot shares it by `Arc`) is shared too.
//!
//! The parts live in `dialogs` (pending and closed dialogs), `frames` (the frame tree and its
//! entries) and `page` (console errors, `blocked`, the pages); this file has the helpers that
//! make their attributes and `Snapshot` itself, which puts them together.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyString, PyTuple};

use cdp_supervisor::{FrameEntry, Snapshot, SupervisorState};

use crate::convert::to_py;

/// The `#[pymethods]` of a part that keeps its Rust value in `inner`: `to_dict` (the value
/// as `browser_snapshot` shows it, SPEC §10, as a new dict), `__repr__` (of `inner`, named
/// by the closure) and any further methods.
macro_rules! part_methods {
    ($ty:ident, |$inner:ident| $repr:expr $(, $($more:tt)+)?) => {
        #[pymethods]
        impl $ty {
            /// As `browser_snapshot` shows it (SPEC §10), as a new dict.
            fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                crate::convert::to_py(py, &self.inner.to_json())
            }

            fn __repr__(&self) -> String {
                let $inner = &self.inner;
                $repr
            }

            $($($more)+)?
        }
    };
}

mod dialogs;
mod files;
mod frames;
mod page;

pub use dialogs::{PyClosedDialog, PyPendingDialog};
pub use files::{PyDownload, PyFileChooser};
pub use frames::{PyFrameEntry, PyFrameTree};
pub use page::{PyBlocked, PyConsoleEntry, PyPageInfo};

fn s(py: Python<'_>, v: &str) -> Py<PyString> {
    PyString::new(py, v).unbind()
}

fn opt(py: Python<'_>, v: Option<&str>) -> Option<Py<PyString>> {
    v.map(|v| s(py, v))
}

fn float(py: Python<'_>, v: f64) -> Py<PyFloat> {
    PyFloat::new(py, v).unbind()
}

fn tuple<T: pyo3::PyClass + Into<PyClassInitializer<T>>>(
    py: Python<'_>,
    items: impl IntoIterator<Item = PyResult<T>>,
) -> PyResult<Py<PyTuple>> {
    let objects = items
        .into_iter()
        .map(|item| Bound::new(py, item?))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(PyTuple::new(py, objects)?.unbind())
}

/// One published state of a supervisor: immutable, and the same object for as long as the
/// supervisor publishes nothing new (`Supervisor.snapshot()`).
#[pyclass(name = "Snapshot", module = "cdp_supervisor", frozen)]
pub struct PySnapshot {
    #[pyo3(get)]
    task_id: Py<PyString>,
    /// The CDP URL, credentials redacted.
    #[pyo3(get)]
    cdp_url: Py<PyString>,
    /// Connected and attached (exactly when `state == "active"`).
    #[pyo3(get)]
    active: bool,
    /// `active`, `reconnecting`, `stopped` or `dead`.
    #[pyo3(get)]
    state: Py<PyString>,
    /// While reconnecting: the attempt under way (1-based) and how many there may be.
    #[pyo3(get)]
    attempt: Option<u32>,
    #[pyo3(get)]
    of: Option<u32>,
    /// Why the connection is down (reconnecting) or why the supervisor ended (dead).
    #[pyo3(get)]
    reason: Option<Py<PyString>>,
    #[pyo3(get)]
    page_target_id: Option<Py<PyString>>,
    /// The page target's CDP session.
    #[pyo3(get)]
    page_session_id: Option<Py<PyString>>,
    /// `tuple[PendingDialog, ...]`, oldest first.
    #[pyo3(get)]
    pending_dialogs: Py<PyTuple>,
    /// `tuple[ClosedDialog, ...]`, newest last.
    #[pyo3(get)]
    recent_dialogs: Py<PyTuple>,
    #[pyo3(get)]
    frame_tree: Py<PyFrameTree>,
    /// `tuple[PageInfo, ...]`, the task's page first.
    #[pyo3(get)]
    pages: Py<PyTuple>,
    #[pyo3(get)]
    pages_truncated: bool,
    /// `tuple[ConsoleEntry, ...]`, newest last.
    #[pyo3(get)]
    console_errors: Py<PyTuple>,
    #[pyo3(get)]
    blocked: Option<Py<PyBlocked>>,
    /// The page's renderer crashed.
    #[pyo3(get)]
    crashed: bool,
    /// `tuple[Download, ...]`, newest last.
    #[pyo3(get)]
    downloads: Py<PyTuple>,
    /// `tuple[FileChooser, ...]`: choosers waiting for files.
    #[pyo3(get)]
    file_choosers: Py<PyTuple>,
    /// The last file chooser the policy kept from the agent (a dict), or `None`.
    #[pyo3(get)]
    file_chooser_refused: Option<Py<PyAny>>,
    /// The task's own page that was gone after a reconnect (a new one was made), or `None`.
    #[pyo3(get)]
    page_replaced: Option<Py<PyString>>,
    /// Increases with every publish.
    #[pyo3(get)]
    pub(crate) version: u64,
    pub(crate) inner: Arc<Snapshot>,
}

impl PySnapshot {
    /// Converts `snap`, sharing every collection that `prev` (the previous conversion of the
    /// same supervisor's snapshots) already holds unchanged.
    pub fn build(
        py: Python<'_>,
        snap: &Arc<Snapshot>,
        prev: Option<&PySnapshot>,
    ) -> PyResult<Self> {
        let old = prev.map(|p| (&*p.inner, p));
        // A collection the reader thread did not change (the same `Arc`) keeps its tuple; a new
        // one is converted item by item with `$each`.
        macro_rules! part {
            ($field:ident, $each:expr) => {
                match old {
                    Some((o, p)) if Arc::ptr_eq(&o.$field, &snap.$field) => p.$field.clone_ref(py),
                    _ => tuple(py, snap.$field.iter().map($each))?,
                }
            };
        }
        let pending_dialogs = part!(pending_dialogs, |d| PyPendingDialog::new(py, d));
        let recent_dialogs = part!(recent_dialogs, |c| PyClosedDialog::new(py, c));
        let console_errors = part!(console_errors, |c| Ok(PyConsoleEntry::new(py, c)));
        let pages = part!(pages, |pg| Ok(PyPageInfo::new(py, pg)));
        let downloads = part!(downloads, |d| Ok(PyDownload::new(py, d)));
        let file_choosers = part!(file_choosers, |c| Ok(PyFileChooser::new(py, c)));
        let frame_tree = match old {
            Some((o, p)) if Arc::ptr_eq(&o.frame_tree, &snap.frame_tree) => {
                p.frame_tree.clone_ref(py)
            }
            _ => Py::new(py, PyFrameTree::new(py, &snap.frame_tree)?)?,
        };
        let file_chooser_refused = snap
            .file_chooser_refused
            .as_ref()
            .map(|r| to_py(py, &r.to_json()).map(Bound::unbind))
            .transpose()?;
        let blocked = snap
            .blocked
            .as_ref()
            .map(|b| Py::new(py, PyBlocked::new(py, b)))
            .transpose()?;
        let (attempt, of, reason) = match &snap.state {
            SupervisorState::Reconnecting { attempt, of } => {
                (Some(*attempt), Some(*of), snap.disconnect_reason.as_deref())
            }
            SupervisorState::Dead { reason } => (None, None, Some(reason.as_str())),
            _ => (None, None, None),
        };
        Ok(PySnapshot {
            task_id: match old {
                Some((_, p)) => p.task_id.clone_ref(py),
                None => s(py, &snap.task_id),
            },
            cdp_url: match old {
                Some((_, p)) => p.cdp_url.clone_ref(py),
                None => s(py, &snap.cdp_url),
            },
            active: snap.is_active(),
            state: PyString::intern(py, snap.state.as_str()).unbind(),
            attempt,
            of,
            reason: opt(py, reason),
            page_target_id: opt(py, snap.page_target_id.as_deref()),
            page_session_id: opt(py, snap.page_session_id.as_deref()),
            pending_dialogs,
            recent_dialogs,
            frame_tree,
            pages,
            pages_truncated: snap.pages_truncated,
            console_errors,
            blocked,
            crashed: snap.crashed,
            downloads,
            file_choosers,
            file_chooser_refused,
            page_replaced: opt(py, snap.page_replaced.as_deref()),
            version: snap.version,
            inner: Arc::clone(snap),
        })
    }
}

#[pymethods]
impl PySnapshot {
    /// The snapshot as `browser_snapshot` shows it (SPEC §10), as a new dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.to_json())
    }

    /// Whether a person holds the task, since when and for how long it was held before
    /// (`{"held", "held_since"?, "ended_holds_s", "holds"}`, SPEC §20); `None` until it is
    /// first handed over.
    #[getter]
    fn handover<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let h = &self.inner.handover;
        (h.holds > 0).then(|| to_py(py, &h.to_json())).transpose()
    }

    /// The same as compact JSON text.
    fn to_json(&self) -> String {
        self.inner.to_json().to_string()
    }

    /// Any frame the supervisor knows (the full map, not only the capped `frame_tree`).
    fn find_frame(&self, py: Python<'_>, frame_id: &str) -> Option<PyFrameEntry> {
        self.inner
            .frames
            .get(frame_id)
            .map(|r| PyFrameEntry::new(py, &FrameEntry::from_record(r)))
    }

    fn __repr__(&self) -> String {
        format!(
            "Snapshot(task_id={:?}, state={:?}, version={}, pending_dialogs={}, frames={})",
            self.inner.task_id,
            self.inner.state.as_str(),
            self.inner.version,
            self.inner.pending_dialogs.len(),
            self.inner.frames.len()
        )
    }
}
