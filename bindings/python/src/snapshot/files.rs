//! What a snapshot says about files (issue 31): `downloads` (`Download`) and `file_choosers`
//! (`FileChooser`).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyString};

use cdp_supervisor::{Download, FileChooser};

use super::{float, opt, s};

/// One download of the task's (`downloads`, newest last).
#[pyclass(name = "Download", module = "cdp_supervisor", frozen)]
pub struct PyDownload {
    #[pyo3(get)]
    guid: Py<PyString>,
    #[pyo3(get)]
    url: Py<PyString>,
    #[pyo3(get)]
    suggested_filename: Py<PyString>,
    /// `in_progress`, `completed` or `canceled` (a failed download is `canceled`).
    #[pyo3(get)]
    state: Py<PyString>,
    #[pyo3(get)]
    received_bytes: u64,
    #[pyo3(get)]
    total_bytes: Option<u64>,
    /// Once completed: the file, in the task's download directory.
    #[pyo3(get)]
    path: Option<Py<PyString>>,
    #[pyo3(get)]
    frame_id: Option<Py<PyString>>,
    inner: Arc<Download>,
}

impl PyDownload {
    pub fn new(py: Python<'_>, d: &Arc<Download>) -> PyDownload {
        let path = d.path.as_ref().map(|p| p.display().to_string());
        PyDownload {
            guid: s(py, &d.guid),
            url: s(py, &d.url),
            suggested_filename: s(py, &d.suggested_filename),
            state: PyString::intern(py, d.state.as_str()).unbind(),
            received_bytes: d.received_bytes,
            total_bytes: d.total_bytes,
            path: opt(py, path.as_deref()),
            frame_id: opt(py, d.frame_id.as_deref()),
            inner: Arc::clone(d),
        }
    }
}

part_methods!(PyDownload, |d| format!(
    "Download(suggested_filename={:?}, state={:?})",
    d.suggested_filename,
    d.state.as_str()
));

/// A file chooser a page opened, waiting for files (`file_choosers`; with
/// `allow_file_access`). Answer it with `Supervisor.respond_to_file_chooser`.
#[pyclass(name = "FileChooser", module = "cdp_supervisor", frozen)]
pub struct PyFileChooser {
    /// `fc-1`, `fc-2`, ...
    #[pyo3(get)]
    id: Py<PyString>,
    /// `single` or `multiple`.
    #[pyo3(get)]
    mode: Py<PyString>,
    #[pyo3(get)]
    frame_id: Option<Py<PyString>>,
    /// The `<input type=file>` element (`DOM.BackendNodeId`).
    #[pyo3(get)]
    backend_node_id: i64,
    #[pyo3(get)]
    opened_at: Py<PyFloat>,
    #[pyo3(get)]
    target_id: Py<PyString>,
    inner: FileChooser,
}

impl PyFileChooser {
    pub fn new(py: Python<'_>, c: &FileChooser) -> PyFileChooser {
        PyFileChooser {
            id: s(py, &c.id),
            mode: PyString::intern(py, c.mode.as_str()).unbind(),
            frame_id: opt(py, c.frame_id.as_deref()),
            backend_node_id: c.backend_node_id,
            opened_at: float(py, c.opened_at),
            target_id: s(py, &c.target_id),
            inner: c.clone(),
        }
    }
}

part_methods!(PyFileChooser, |c| format!(
    "FileChooser(id={:?}, mode={:?})",
    c.id,
    c.mode.as_str()
));
