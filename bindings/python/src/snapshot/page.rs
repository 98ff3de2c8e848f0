//! The rest of what a snapshot says about the page: `console_errors` (`ConsoleEntry`),
//! `blocked` (`Blocked`) and `pages` (`PageInfo`).

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyString};

use cdp_supervisor::{Blocked, ConsoleEntry, PageInfo};

use super::{float, opt, s};

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
    pub(super) fn new(py: Python<'_>, c: &Arc<ConsoleEntry>) -> PyConsoleEntry {
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

part_methods!(PyConsoleEntry, |c| format!(
    "ConsoleEntry(level={:?}, text={:?})",
    c.level, c.text
));

/// Why the page (or one of its frames) cannot be used (`blocked`, SPEC §4.5).
#[pyclass(name = "Blocked", module = "cdp_supervisor", frozen)]
pub struct PyBlocked {
    /// `orphaned_dialog`, `unresponsive`, `unanswerable_dialog` or
    /// `dialog_in_unfollowed_page`.
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

impl PyBlocked {
    pub(super) fn new(py: Python<'_>, b: &Blocked) -> PyBlocked {
        PyBlocked {
            reason: PyString::intern(py, b.reason.as_str()).unbind(),
            hint: s(py, &b.hint),
            frame_id: opt(py, b.frame_id.as_deref()),
            inner: b.clone(),
        }
    }
}

part_methods!(
    PyBlocked,
    |b| format!("Blocked(reason={:?})", b.reason.as_str()),
    /// For `dialog_in_unfollowed_page`: the pages to close (one shows the dialog); for
    /// `unresponsive`, a page the task follows that has not answered since it was attached; for
    /// `orphaned_dialog` on the page, the pages it opened (one may show the dialog).
    #[getter]
    fn target_ids(&self) -> Vec<String> {
        self.inner.target_ids.clone()
    }
);

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

impl PyPageInfo {
    pub(super) fn new(py: Python<'_>, pg: &PageInfo) -> PyPageInfo {
        PyPageInfo {
            target_id: s(py, &pg.target_id),
            url: s(py, &pg.url),
            title: s(py, &pg.title),
            opener_target_id: opt(py, pg.opener_target_id.as_deref()),
            inner: pg.clone(),
        }
    }
}

part_methods!(PyPageInfo, |p| format!(
    "PageInfo(target_id={:?}, url={:?})",
    p.target_id, p.url
));
