//! Dialogs in a snapshot: `pending_dialogs` (`PendingDialog`, which exceptions carry too) and
//! `recent_dialogs` (`ClosedDialog`).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyString};

use cdp_supervisor::unversioned::{bridge_request, dialog_session};
use cdp_supervisor::{ClosedDialog, PendingDialog};

use super::{float, opt, s};

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

part_methods!(PyPendingDialog, |d| format!(
    "PendingDialog(id={:?}, type={:?}, message={:?})",
    d.id,
    d.kind.as_str(),
    d.message
));

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
    /// `agent`, `auto_policy`, `watchdog`, `remote`, `connection_lost`, `client` or `human`.
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
    pub(super) fn new(py: Python<'_>, c: &Arc<ClosedDialog>) -> PyResult<PyClosedDialog> {
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

part_methods!(PyClosedDialog, |c| format!(
    "ClosedDialog(id={:?}, type={:?}, message={:?}, closed_by={:?})",
    c.dialog.id,
    c.dialog.kind.as_str(),
    c.dialog.message,
    c.closed_by.as_str()
));
