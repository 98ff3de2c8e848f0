//! Frames in a snapshot: `frame_tree` (`FrameTree`, capped) and its entries (`FrameEntry`,
//! also what `Snapshot.find_frame` returns from the full frame map).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};
use serde_json::Value;

use cdp_supervisor::{FrameEntry, FrameTree};

use super::{opt, s, tuple};
use crate::convert::to_py;

/// One frame of `frame_tree` (or of the full frame map: `Snapshot.find_frame`).
#[pyclass(name = "FrameEntry", module = "cdp_supervisor", frozen)]
pub struct PyFrameEntry {
    #[pyo3(get)]
    frame_id: Py<PyString>,
    #[pyo3(get)]
    url: Py<PyString>,
    #[pyo3(get)]
    origin: Py<PyString>,
    /// An out-of-process iframe, with a CDP session of its own (`session_id`, which
    /// `to_dict()` leaves out: session ids are routing details, never LLM-visible).
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
    pub(super) fn new(py: Python<'_>, f: &FrameEntry) -> PyFrameEntry {
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
    pub(super) fn new(py: Python<'_>, t: &Arc<FrameTree>) -> PyResult<PyFrameTree> {
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

part_methods!(PyFrameTree, |t| format!(
    "FrameTree(top={:?}, children={}, truncated={})",
    t.top.as_ref().map(|f| f.frame_id.as_str()),
    t.children.len(),
    if t.truncated { "True" } else { "False" }
));
