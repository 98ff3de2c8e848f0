//! The published snapshot as frozen, typed Python objects (`cdp_supervisor.Snapshot` and its
//! parts). Every attribute is a Python object made once, when the snapshot is converted, so
//! reading one allocates nothing; a collection the reader thread did not change since the
//! previous snapshot (the Rust snapshot shares it by `Arc`) is shared too.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyString, PyTuple};
use serde_json::{Value, json};

use cdp_supervisor::unversioned::{bridge_request, dialog_session};
use cdp_supervisor::{
    Blocked, ClosedDialog, ConsoleEntry, FrameEntry, FrameRecord, FrameTree, PageInfo,
    PendingDialog, Snapshot, SupervisorState,
};

use crate::convert::to_py;

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

/// A dialog waiting for an answer (`pending_dialogs`).
#[pyclass(name = "PendingDialog", module = "cdp_supervisor", frozen)]
pub struct PyPendingDialog {
    /// `d-1`, `d-2`, ... per supervisor.
    #[pyo3(get)]
    id: Py<PyString>,
    /// `alert`, `confirm`, `prompt`, `beforeunload` (or the browser's word).
    #[pyo3(get, name = "type")]
    kind: Py<PyString>,
    #[pyo3(get)]
    message: Py<PyString>,
    #[pyo3(get)]
    default_prompt: Py<PyString>,
    /// Unix epoch seconds.
    #[pyo3(get)]
    opened_at: Py<PyFloat>,
    #[pyo3(get)]
    frame_id: Option<Py<PyString>>,
    #[pyo3(get)]
    url: Py<PyString>,
    #[pyo3(get)]
    origin: Py<PyString>,
    #[pyo3(get)]
    target_id: Py<PyString>,
    /// The CDP session the dialog arrived on (its answer goes there).
    #[pyo3(get)]
    session_id: Py<PyString>,
    /// Set for a dialog caught by the dialog bridge: the paused request it waits on.
    #[pyo3(get)]
    bridge_request_id: Option<Py<PyString>>,
    pub(crate) inner: PendingDialog,
}

impl PyPendingDialog {
    pub fn new(py: Python<'_>, d: &PendingDialog) -> PyResult<PyPendingDialog> {
        Ok(PyPendingDialog {
            id: s(py, &d.id),
            kind: s(py, d.kind.as_str()),
            message: s(py, &d.message),
            default_prompt: s(py, &d.default_prompt),
            opened_at: float(py, d.opened_at),
            frame_id: opt(py, d.frame_id.as_deref()),
            url: s(py, &d.url),
            origin: s(py, &d.origin),
            target_id: s(py, &d.target_id),
            session_id: s(py, dialog_session(d)),
            bridge_request_id: opt(py, bridge_request(d)),
            inner: d.clone(),
        })
    }
}

#[pymethods]
impl PyPendingDialog {
    /// The dialog as `browser_snapshot` shows it (SPEC §10).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.to_json())
    }

    fn __repr__(&self) -> String {
        format!(
            "PendingDialog(id={:?}, type={:?}, message={:?})",
            self.inner.id,
            self.inner.kind.as_str(),
            self.inner.message
        )
    }
}

/// A closed dialog (`recent_dialogs`), with who closed it.
#[pyclass(name = "ClosedDialog", module = "cdp_supervisor", frozen)]
pub struct PyClosedDialog {
    #[pyo3(get)]
    id: Py<PyString>,
    #[pyo3(get, name = "type")]
    kind: Py<PyString>,
    #[pyo3(get)]
    message: Py<PyString>,
    #[pyo3(get)]
    default_prompt: Py<PyString>,
    #[pyo3(get)]
    opened_at: Py<PyFloat>,
    #[pyo3(get)]
    closed_at: Py<PyFloat>,
    /// `agent`, `auto_policy`, `watchdog`, `remote` or `connection_lost`.
    #[pyo3(get)]
    closed_by: Py<PyString>,
    #[pyo3(get)]
    frame_id: Option<Py<PyString>>,
    #[pyo3(get)]
    origin: Py<PyString>,
    #[pyo3(get)]
    target_id: Py<PyString>,
    /// Whether it was accepted, when the browser said so.
    #[pyo3(get)]
    accepted: Option<bool>,
    /// What a prompt returned, when the browser said so.
    #[pyo3(get)]
    user_input: Option<Py<PyString>>,
    inner: Arc<ClosedDialog>,
}

impl PyClosedDialog {
    fn new(py: Python<'_>, c: &Arc<ClosedDialog>) -> PyResult<PyClosedDialog> {
        let d = &c.dialog;
        Ok(PyClosedDialog {
            id: s(py, &d.id),
            kind: s(py, d.kind.as_str()),
            message: s(py, &d.message),
            default_prompt: s(py, &d.default_prompt),
            opened_at: float(py, d.opened_at),
            closed_at: float(py, c.closed_at),
            closed_by: PyString::intern(py, c.closed_by.as_str()).unbind(),
            frame_id: opt(py, d.frame_id.as_deref()),
            origin: s(py, &d.origin),
            target_id: s(py, &d.target_id),
            accepted: c.accepted,
            user_input: opt(py, c.user_input.as_deref()),
            inner: Arc::clone(c),
        })
    }
}

#[pymethods]
impl PyClosedDialog {
    /// The record as `browser_snapshot` shows it (SPEC §10).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.to_json())
    }

    fn __repr__(&self) -> String {
        let d = &self.inner.dialog;
        format!(
            "ClosedDialog(id={:?}, type={:?}, message={:?}, closed_by={:?})",
            d.id,
            d.kind.as_str(),
            d.message,
            self.inner.closed_by.as_str()
        )
    }
}

/// One frame of `frame_tree` (or of the full frame map: `Snapshot.find_frame`).
#[pyclass(name = "FrameEntry", module = "cdp_supervisor", frozen)]
pub struct PyFrameEntry {
    #[pyo3(get)]
    frame_id: Py<PyString>,
    #[pyo3(get)]
    url: Py<PyString>,
    #[pyo3(get)]
    origin: Py<PyString>,
    /// An out-of-process iframe, with a CDP session of its own (`session_id`).
    #[pyo3(get)]
    is_oopif: bool,
    #[pyo3(get)]
    session_id: Option<Py<PyString>>,
    #[pyo3(get)]
    parent_frame_id: Option<Py<PyString>>,
    #[pyo3(get)]
    name: Option<Py<PyString>>,
    /// Its renderer crashed.
    #[pyo3(get)]
    crashed: bool,
    json: Value,
}

impl PyFrameEntry {
    fn new(py: Python<'_>, f: &FrameEntry) -> PyFrameEntry {
        PyFrameEntry {
            frame_id: s(py, &f.frame_id),
            url: s(py, &f.url),
            origin: s(py, &f.origin),
            is_oopif: f.is_oopif,
            session_id: opt(py, f.session_id.as_deref()),
            parent_frame_id: opt(py, f.parent_frame_id.as_deref()),
            name: opt(py, f.name.as_deref()),
            crashed: f.crashed,
            json: f.to_json(),
        }
    }

    /// A frame of the full map, in the same shape as a `frame_tree` entry.
    fn from_record(py: Python<'_>, r: &FrameRecord) -> PyFrameEntry {
        let name = r.name.as_deref().filter(|n| !n.is_empty());
        let mut json = json!({
            "frame_id": r.frame_id, "url": r.url, "origin": r.origin, "is_oopif": r.is_oopif,
        });
        if let Some(sid) = &r.session_id {
            json["session_id"] = json!(sid);
        }
        if let Some(p) = &r.parent_frame_id {
            json["parent_frame_id"] = json!(p);
        }
        if let Some(n) = name {
            json["name"] = json!(n);
        }
        if r.crashed {
            json["crashed"] = json!(true);
        }
        PyFrameEntry {
            frame_id: s(py, &r.frame_id),
            url: s(py, &r.url),
            origin: s(py, &r.origin),
            is_oopif: r.is_oopif,
            session_id: opt(py, r.session_id.as_deref()),
            parent_frame_id: opt(py, r.parent_frame_id.as_deref()),
            name: opt(py, name),
            crashed: r.crashed,
            json,
        }
    }
}

#[pymethods]
impl PyFrameEntry {
    /// The entry as `browser_snapshot` shows it (SPEC §10).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.json)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "FrameEntry(frame_id={:?}, url={:?}, is_oopif={})",
            self.frame_id.bind(py).to_string(),
            self.url.bind(py).to_string(),
            if self.is_oopif { "True" } else { "False" }
        )
    }
}

/// `frame_tree`: the page's main frame and the other frames breadth-first, capped (SPEC §7).
#[pyclass(name = "FrameTree", module = "cdp_supervisor", frozen)]
pub struct PyFrameTree {
    #[pyo3(get)]
    top: Option<Py<PyFrameEntry>>,
    #[pyo3(get)]
    children: Py<PyTuple>,
    /// Frames were left out (the cap, or OOPIFs nested too deep).
    #[pyo3(get)]
    truncated: bool,
    inner: Arc<FrameTree>,
}

impl PyFrameTree {
    fn new(py: Python<'_>, t: &Arc<FrameTree>) -> PyResult<PyFrameTree> {
        Ok(PyFrameTree {
            top: t
                .top
                .as_ref()
                .map(|f| Py::new(py, PyFrameEntry::new(py, f)))
                .transpose()?,
            children: tuple(py, t.children.iter().map(|f| Ok(PyFrameEntry::new(py, f))))?,
            truncated: t.truncated,
            inner: Arc::clone(t),
        })
    }
}

#[pymethods]
impl PyFrameTree {
    /// `{"top": ..., "children": [...], "truncated": ...}` as `browser_snapshot` shows it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.to_json())
    }

    fn __repr__(&self) -> String {
        format!(
            "FrameTree(top={:?}, children={}, truncated={})",
            self.inner.top.as_ref().map(|f| f.frame_id.as_str()),
            self.inner.children.len(),
            if self.inner.truncated {
                "True"
            } else {
                "False"
            }
        )
    }
}

/// A console error/warning or uncaught exception (`console_errors`).
#[pyclass(name = "ConsoleEntry", module = "cdp_supervisor", frozen)]
pub struct PyConsoleEntry {
    /// Unix epoch seconds.
    #[pyo3(get)]
    ts: Py<PyFloat>,
    /// `error`, `assert`, `warning` or `exception`.
    #[pyo3(get)]
    level: Py<PyString>,
    #[pyo3(get)]
    text: Py<PyString>,
    #[pyo3(get)]
    url: Py<PyString>,
    #[pyo3(get)]
    frame_id: Option<Py<PyString>>,
    inner: Arc<ConsoleEntry>,
}

impl PyConsoleEntry {
    fn new(py: Python<'_>, c: &Arc<ConsoleEntry>) -> PyConsoleEntry {
        PyConsoleEntry {
            ts: float(py, c.ts),
            level: PyString::intern(py, &c.level).unbind(),
            text: s(py, &c.text),
            url: s(py, &c.url),
            frame_id: opt(py, c.frame_id.as_deref()),
            inner: Arc::clone(c),
        }
    }
}

#[pymethods]
impl PyConsoleEntry {
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.to_json())
    }

    fn __repr__(&self) -> String {
        format!(
            "ConsoleEntry(level={:?}, text={:?})",
            self.inner.level, self.inner.text
        )
    }
}

/// Why the page (or one of its frames) cannot be used (`blocked`, SPEC §4.5).
#[pyclass(name = "Blocked", module = "cdp_supervisor", frozen)]
pub struct PyBlocked {
    /// `orphaned_dialog`, `unresponsive` or `unanswerable_dialog`.
    #[pyo3(get)]
    reason: Py<PyString>,
    /// What to do about it.
    #[pyo3(get)]
    hint: Py<PyString>,
    /// The out-of-process iframe that does not answer; `None` for the page itself.
    #[pyo3(get)]
    frame_id: Option<Py<PyString>>,
    inner: Blocked,
}

#[pymethods]
impl PyBlocked {
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.to_json())
    }

    fn __repr__(&self) -> String {
        format!("Blocked(reason={:?})", self.inner.reason.as_str())
    }
}

/// A page the task follows: its own page first, then popups it opened (`pages`).
#[pyclass(name = "PageInfo", module = "cdp_supervisor", frozen)]
pub struct PyPageInfo {
    #[pyo3(get)]
    target_id: Py<PyString>,
    #[pyo3(get)]
    url: Py<PyString>,
    #[pyo3(get)]
    title: Py<PyString>,
    #[pyo3(get)]
    opener_target_id: Option<Py<PyString>>,
    inner: PageInfo,
}

#[pymethods]
impl PyPageInfo {
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.to_json())
    }

    fn __repr__(&self) -> String {
        format!(
            "PageInfo(target_id={:?}, url={:?})",
            self.inner.target_id, self.inner.url
        )
    }
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
        let pending_dialogs = match old {
            Some((o, p)) if Arc::ptr_eq(&o.pending_dialogs, &snap.pending_dialogs) => {
                p.pending_dialogs.clone_ref(py)
            }
            _ => tuple(
                py,
                snap.pending_dialogs
                    .iter()
                    .map(|d| PyPendingDialog::new(py, d)),
            )?,
        };
        let recent_dialogs = match old {
            Some((o, p)) if Arc::ptr_eq(&o.recent_dialogs, &snap.recent_dialogs) => {
                p.recent_dialogs.clone_ref(py)
            }
            _ => tuple(
                py,
                snap.recent_dialogs
                    .iter()
                    .map(|c| PyClosedDialog::new(py, c)),
            )?,
        };
        let frame_tree = match old {
            Some((o, p)) if Arc::ptr_eq(&o.frame_tree, &snap.frame_tree) => {
                p.frame_tree.clone_ref(py)
            }
            _ => Py::new(py, PyFrameTree::new(py, &snap.frame_tree)?)?,
        };
        let console_errors = match old {
            Some((o, p)) if Arc::ptr_eq(&o.console_errors, &snap.console_errors) => {
                p.console_errors.clone_ref(py)
            }
            _ => tuple(
                py,
                snap.console_errors
                    .iter()
                    .map(|c| Ok(PyConsoleEntry::new(py, c))),
            )?,
        };
        let pages = match old {
            Some((o, p)) if Arc::ptr_eq(&o.pages, &snap.pages) => p.pages.clone_ref(py),
            _ => tuple(
                py,
                snap.pages.iter().map(|pg| {
                    Ok(PyPageInfo {
                        target_id: s(py, &pg.target_id),
                        url: s(py, &pg.url),
                        title: s(py, &pg.title),
                        opener_target_id: opt(py, pg.opener_target_id.as_deref()),
                        inner: pg.clone(),
                    })
                }),
            )?,
        };
        let blocked = snap
            .blocked
            .as_ref()
            .map(|b| {
                Py::new(
                    py,
                    PyBlocked {
                        reason: PyString::intern(py, b.reason.as_str()).unbind(),
                        hint: s(py, &b.hint),
                        frame_id: opt(py, b.frame_id.as_deref()),
                        inner: b.clone(),
                    },
                )
            })
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

    /// The same as compact JSON text.
    fn to_json(&self) -> String {
        self.inner.to_json().to_string()
    }

    /// Any frame the supervisor knows (the full map, not only the capped `frame_tree`).
    fn find_frame(&self, py: Python<'_>, frame_id: &str) -> Option<PyFrameEntry> {
        self.inner
            .frames
            .get(frame_id)
            .map(|r| PyFrameEntry::from_record(py, r))
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
