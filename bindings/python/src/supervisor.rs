//! `Supervisor` for Python: one task's supervisor, a thin wrapper of the Rust type. What it adds
//! is its latest snapshot's Python form, converted once per published version
//! ([`PySupervisor::snapshot`]). Every method that waits runs through [`PySupervisor::run`]:
//! the GIL released, Ctrl-C honoured on the main thread (`blocking`).
//!
//! It remembers the process it was made in (`crate::fork`): in a child of `os.fork()` it raises
//! `UsedAfterFork` and is never dropped for real.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use serde_json::{Value, json};

use cdp_supervisor::{
    CallRequest, CancelToken, DialogAction, DialogAnswer, Error, Navigation, Route, Supervisor,
    WaitUntil,
};

use crate::blocking::{self, Step};
use crate::convert::{from_py, to_py};
use crate::errors::{invalid_argument, to_py_err};
use crate::fork::Home;
use crate::seconds;
use crate::snapshot::{PyDownload, PyFileChooser, PyPendingDialog, PySnapshot};

/// One task's supervisor.
#[pyclass(name = "Supervisor", module = "cdp_supervisor", frozen)]
pub struct PySupervisor {
    pub sup: Arc<Supervisor>,
    /// The Python form of the latest snapshot read (it holds the Rust snapshot it was made
    /// from), replaced when a newer version is read; written by whichever thread reads first.
    cache: ArcSwapOption<Py<PySnapshot>>,
    task_id: Py<PyString>,
    /// The process it was made in.
    home: Home,
    /// Its registry (for `cdp_endpoint`).
    registry: std::sync::Weak<dyn crate::endpoint::Registry>,
}

impl Drop for PySupervisor {
    /// In a child of `os.fork()`: the supervisor is the parent's, and is left alone.
    fn drop(&mut self) {
        self.home.leak_elsewhere(&self.sup);
    }
}

impl PySupervisor {
    pub fn new(
        py: Python<'_>,
        sup: Arc<Supervisor>,
        registry: std::sync::Weak<dyn crate::endpoint::Registry>,
    ) -> PySupervisor {
        let task_id = PyString::new(py, sup.task_id()).unbind();
        PySupervisor {
            sup,
            cache: ArcSwapOption::empty(),
            task_id,
            home: Home::here(),
            registry,
        }
    }

    /// `UsedAfterFork` in a child of the process that made it.
    pub fn check_home(&self) -> PyResult<()> {
        self.home.check("Supervisor")
    }

    /// A call's timeout: `timeout_s`, or the supervisor's `call_timeout_s`.
    fn timeout(&self, timeout_s: Option<f64>) -> PyResult<Duration> {
        match timeout_s {
            Some(t) => seconds("timeout_s", t),
            None => Ok(self.sup.config().call_timeout()),
        }
    }

    /// Runs `job` on the supervisor without the GIL (`blocking::call`: on the main thread it
    /// gets the token that Ctrl-C cancels), its error as the exception of its kind.
    fn run<T: Send + 'static>(
        &self,
        py: Python<'_>,
        job: impl FnOnce(&Supervisor, Option<&CancelToken>) -> Result<T, Error> + Send + 'static,
    ) -> PyResult<T> {
        self.check_home()?;
        let sup = Arc::clone(&self.sup);
        blocking::call(py, move |cancel| job(&sup, cancel))?.map_err(to_py_err)
    }

    /// The latest snapshot as a Python object: the cached one while the published version is
    /// unchanged (two wait-free loads and a reference count: no allocation, no lock), else a
    /// new conversion that shares what did not change.
    pub fn snapshot(&self, py: Python<'_>) -> PyResult<Py<PySnapshot>> {
        self.check_home()?;
        let version = self.sup.with_snapshot(|s| s.version);
        if let Some(cached) = &*self.cache.load()
            && cached.get().version == version
        {
            return Ok(cached.clone_ref(py));
        }
        let snap = self.sup.snapshot();
        let prev = self.cache.load_full();
        let fresh = Py::new(
            py,
            PySnapshot::build(py, &snap, prev.as_deref().map(|p| p.get()))?,
        )?;
        self.cache.store(Some(Arc::new(fresh.clone_ref(py))));
        Ok(fresh)
    }
}

/// A navigation as a dict: `{url, frame_id, loader_id}`.
fn navigation<'py>(py: Python<'py>, nav: &Navigation) -> PyResult<Bound<'py, PyAny>> {
    to_py(
        py,
        &json!({"url": nav.url, "frame_id": nav.frame_id, "loader_id": nav.loader_id}),
    )
}

#[pymethods]
impl PySupervisor {
    #[pyo3(name = "snapshot")]
    fn py_snapshot(&self, py: Python<'_>) -> PyResult<Py<PySnapshot>> {
        self.snapshot(py)
    }

    /// Answers a pending dialog; on the main thread Ctrl-C abandons the wait for the browser's
    /// acknowledgement.
    #[pyo3(signature = (action, prompt_text=None, dialog_id=None))]
    fn respond_to_dialog(
        &self,
        py: Python<'_>,
        action: String,
        prompt_text: Option<String>,
        dialog_id: Option<String>,
    ) -> PyResult<PyPendingDialog> {
        self.check_home()?;
        let action = DialogAction::parse(&action).map_err(to_py_err)?;
        let answered = self.run(py, move |sup, cancel| {
            let answer = DialogAnswer::new(action)
                .with_prompt_text(prompt_text.as_deref())
                .with_dialog_id(dialog_id.as_deref())
                .with_cancel(cancel);
            sup.answer_dialog(answer)
        })?;
        PyPendingDialog::new(py, &answered)
    }

    #[pyo3(signature = (method, params=None, *, target_id=None, frame_id=None, timeout_s=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        method: String,
        params: Option<&Bound<'py, PyAny>>,
        target_id: Option<String>,
        frame_id: Option<String>,
        timeout_s: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.check_home()?;
        let params = match params {
            Some(p) => from_py(p)?,
            None => Value::Null,
        };
        if !(params.is_null() || params.is_object()) {
            return Err(invalid_argument("params must be a dict (or None)"));
        }
        if target_id.is_some() && frame_id.is_some() {
            return Err(invalid_argument("give frame_id or target_id, not both"));
        }
        let timeout = self.timeout(timeout_s)?;
        let result = self.run(py, move |sup, cancel| {
            let route = match (&frame_id, &target_id) {
                (Some(f), _) => Route::Frame(f),
                (None, Some(t)) => Route::Target(t),
                (None, None) => Route::by_domain(&method),
            };
            let request = CallRequest::new(&method, params)
                .with_route(route)
                .with_timeout(timeout)
                .with_cancel(cancel);
            sup.send(request).map(|(v, _)| v)
        })?;
        to_py(py, &result)
    }

    /// The first pending dialog once there is one, or `None` after `timeout_s` (or when the
    /// supervisor has ended).
    #[pyo3(signature = (timeout_s))]
    fn wait_for_dialog(&self, py: Python<'_>, timeout_s: f64) -> PyResult<Option<PyPendingDialog>> {
        self.check_home()?;
        let timeout = seconds("timeout_s", timeout_s)?;
        let sup = &self.sup;
        let found = blocking::sliced(py, timeout, |slice| match sup.wait_for_dialog(slice) {
            Some(d) => Step::Done(Some(d)),
            None if !sup.is_alive() => Step::Done(None),
            None => Step::Again,
        })?;
        found
            .flatten()
            .map(|d| PyPendingDialog::new(py, &d))
            .transpose()
    }

    /// Navigates the task's page; see `_native.pyi` (issue 31).
    #[pyo3(signature = (url, wait_until="load", timeout_s=None))]
    fn navigate<'py>(
        &self,
        py: Python<'py>,
        url: String,
        wait_until: &str,
        timeout_s: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let timeout = self.timeout(timeout_s)?;
        let wait_until = WaitUntil::parse(wait_until).map_err(to_py_err)?;
        let nav = self.run(py, move |sup, _| sup.navigate(&url, wait_until, timeout))?;
        navigation(py, &nav)
    }

    #[pyo3(signature = (wait_until="load", timeout_s=None))]
    fn wait_for_navigation<'py>(
        &self,
        py: Python<'py>,
        wait_until: &str,
        timeout_s: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let timeout = self.timeout(timeout_s)?;
        let wait_until = WaitUntil::parse(wait_until).map_err(to_py_err)?;
        let nav = self.run(py, move |sup, _| {
            sup.wait_for_navigation(wait_until, timeout)
        })?;
        navigation(py, &nav)
    }

    #[pyo3(signature = (timeout_s=None))]
    fn tab_ref(&self, py: Python<'_>, timeout_s: Option<f64>) -> PyResult<String> {
        let timeout = self.timeout(timeout_s)?;
        self.run(py, move |sup, _| sup.tab_ref(timeout))
    }

    #[pyo3(signature = (timeout_s=30.0))]
    fn wait_for_download(&self, py: Python<'_>, timeout_s: f64) -> PyResult<PyDownload> {
        let timeout = seconds("timeout_s", timeout_s)?;
        let d = self.run(py, move |sup, _| sup.wait_for_download(timeout))?;
        Ok(PyDownload::new(py, &Arc::new(d)))
    }

    #[pyo3(signature = (files, chooser_id=None))]
    fn respond_to_file_chooser(
        &self,
        py: Python<'_>,
        files: Vec<PathBuf>,
        chooser_id: Option<String>,
    ) -> PyResult<PyFileChooser> {
        let c = self.run(py, move |sup, _| {
            sup.respond_to_file_chooser(&files, chooser_id.as_deref())
        })?;
        Ok(PyFileChooser::new(py, &c))
    }

    #[pyo3(signature = (chooser_id=None))]
    fn dismiss_file_chooser(
        &self,
        py: Python<'_>,
        chooser_id: Option<String>,
    ) -> PyResult<PyFileChooser> {
        let c = self.run(py, move |sup, _| {
            sup.dismiss_file_chooser(chooser_id.as_deref())
        })?;
        Ok(PyFileChooser::new(py, &c))
    }

    /// Hands the task over to a person (SPEC §20); the hand-over state it leaves, as
    /// `Snapshot.handover` has it (`{"held", "held_since"?, "ended_holds_s", "holds"}`).
    fn hand_over<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = self.run(py, |sup, _| sup.hand_over())?;
        to_py(py, &state.to_json())
    }

    /// Gives the task back to the agent; the hand-over state, as `hand_over`.
    fn take_back<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = self.run(py, |sup, _| sup.take_back())?;
        to_py(py, &state.to_json())
    }

    /// A person holds the task.
    #[getter]
    fn is_held(&self) -> PyResult<bool> {
        self.check_home()?;
        Ok(self.sup.is_held())
    }

    #[pyo3(signature = (action, prompt_text=None, dialog_id=None))]
    fn respond_as_human(
        &self,
        py: Python<'_>,
        action: &str,
        prompt_text: Option<String>,
        dialog_id: Option<String>,
    ) -> PyResult<PyPendingDialog> {
        self.check_home()?;
        let action = DialogAction::parse(action).map_err(to_py_err)?;
        let answered = self.run(py, move |sup, _| {
            sup.respond_as_human(action, prompt_text.as_deref(), dialog_id.as_deref())
        })?;
        PyPendingDialog::new(py, &answered)
    }

    /// The task's CDP endpoint; see `_native.pyi`.
    fn cdp_endpoint(&self, py: Python<'_>) -> PyResult<crate::endpoint::PyCdpEndpoint> {
        self.check_home()?;
        crate::endpoint::of(py, &self.registry, &self.sup)
    }

    /// A small JPEG of the task's page: `{"jpeg": bytes, "width", "height", "taken_at",
    /// "target_id"}`.
    fn thumbnail<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t = self.run(py, |sup, _| sup.thumbnail())?;
        let d = PyDict::new(py);
        d.set_item("jpeg", PyBytes::new(py, &t.jpeg))?;
        d.set_item("width", t.width)?;
        d.set_item("height", t.height)?;
        d.set_item("taken_at", t.taken_at)?;
        d.set_item("target_id", &t.target_id)?;
        Ok(d)
    }

    /// The task's download directory (`[downloads] dir`).
    #[getter]
    fn download_dir(&self) -> Option<String> {
        self.sup.download_dir().map(|d| d.display().to_string())
    }

    /// Stops the supervisor (pending dialogs dismissed first); returns within about 1 s.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        self.check_home()?;
        py.detach(|| self.sup.stop());
        Ok(())
    }

    /// `active`, `reconnecting`, `stopped` or `dead`.
    #[getter]
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyString>> {
        self.check_home()?;
        Ok(PyString::intern(py, self.sup.state().as_str()))
    }

    /// Not stopped and not given up (it may be reconnecting).
    #[getter]
    fn is_alive(&self) -> PyResult<bool> {
        self.check_home()?;
        Ok(self.sup.is_alive())
    }

    /// Connected and attached to its page.
    #[getter]
    fn is_active(&self) -> PyResult<bool> {
        self.check_home()?;
        Ok(self.sup.is_active())
    }

    #[getter]
    fn task_id(&self, py: Python<'_>) -> Py<PyString> {
        self.task_id.clone_ref(py)
    }

    /// The CDP URL, credentials redacted.
    #[getter]
    fn cdp_url(&self) -> String {
        self.sup.cdp_url_redacted().to_string()
    }

    /// The page target it attached to.
    #[getter]
    fn page_target_id(&self) -> PyResult<Option<String>> {
        self.check_home()?;
        Ok(self.sup.with_snapshot(|s| s.page_target_id.clone()))
    }

    fn __repr__(&self) -> String {
        if let Some(r) = self.home.repr_elsewhere("Supervisor") {
            return r;
        }
        format!(
            "Supervisor(task_id={:?}, cdp_url={:?}, state={:?})",
            self.sup.task_id(),
            self.sup.cdp_url_redacted(),
            self.sup.state().as_str()
        )
    }
}
