//! A supervisor's navigation, downloads and file choosers for Python (issue 31): the bodies of
//! `Supervisor.navigate`, `wait_for_navigation`, `tab_ref`, `wait_for_download`,
//! `respond_to_file_chooser` and `dismiss_file_chooser` (`registry.rs` declares them). Every
//! wait releases the GIL (`blocking`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use serde_json::json;

use cdp_supervisor::{Navigation, Supervisor, WaitUntil};

use crate::blocking;
use crate::convert::to_py;
use crate::errors::to_py_err;
use crate::snapshot::{PyDownload, PyFileChooser};

/// A navigation as a dict: `{url, frame_id, loader_id}`.
fn navigation<'py>(py: Python<'py>, nav: &Navigation) -> PyResult<Bound<'py, PyAny>> {
    to_py(
        py,
        &json!({"url": nav.url, "frame_id": nav.frame_id, "loader_id": nav.loader_id}),
    )
}

/// `Supervisor.navigate`.
pub fn navigate<'py>(
    py: Python<'py>,
    sup: &Arc<Supervisor>,
    url: String,
    wait_until: &str,
    timeout: Duration,
) -> PyResult<Bound<'py, PyAny>> {
    let wait_until = WaitUntil::parse(wait_until).map_err(to_py_err)?;
    let sup = Arc::clone(sup);
    let nav = blocking::call(py, move |_| sup.navigate(&url, wait_until, timeout))?;
    navigation(py, &nav.map_err(to_py_err)?)
}

/// `Supervisor.wait_for_navigation`.
pub fn wait_for_navigation<'py>(
    py: Python<'py>,
    sup: &Arc<Supervisor>,
    wait_until: &str,
    timeout: Duration,
) -> PyResult<Bound<'py, PyAny>> {
    let wait_until = WaitUntil::parse(wait_until).map_err(to_py_err)?;
    let sup = Arc::clone(sup);
    let nav = blocking::call(py, move |_| sup.wait_for_navigation(wait_until, timeout))?;
    navigation(py, &nav.map_err(to_py_err)?)
}

/// `Supervisor.tab_ref`.
pub fn tab_ref(py: Python<'_>, sup: &Arc<Supervisor>, timeout: Duration) -> PyResult<String> {
    let sup = Arc::clone(sup);
    blocking::call(py, move |_| sup.tab_ref(timeout))?.map_err(to_py_err)
}

/// `Supervisor.wait_for_download`.
pub fn wait_for_download(
    py: Python<'_>,
    sup: &Arc<Supervisor>,
    timeout: Duration,
) -> PyResult<PyDownload> {
    let sup = Arc::clone(sup);
    let d = blocking::call(py, move |_| sup.wait_for_download(timeout))?;
    Ok(PyDownload::new(py, &Arc::new(d.map_err(to_py_err)?)))
}

/// `Supervisor.respond_to_file_chooser`.
pub fn respond_to_file_chooser(
    py: Python<'_>,
    sup: &Arc<Supervisor>,
    files: Vec<PathBuf>,
    chooser_id: Option<String>,
) -> PyResult<PyFileChooser> {
    let sup = Arc::clone(sup);
    let c = blocking::call(py, move |_| {
        sup.respond_to_file_chooser(&files, chooser_id.as_deref())
    })?;
    Ok(PyFileChooser::new(py, &c.map_err(to_py_err)?))
}

/// `Supervisor.dismiss_file_chooser`.
pub fn dismiss_file_chooser(
    py: Python<'_>,
    sup: &Arc<Supervisor>,
    chooser_id: Option<String>,
) -> PyResult<PyFileChooser> {
    let sup = Arc::clone(sup);
    let c = blocking::call(py, move |_| sup.dismiss_file_chooser(chooser_id.as_deref()))?;
    Ok(PyFileChooser::new(py, &c.map_err(to_py_err)?))
}
