//! `SupervisorRegistry` and `Supervisor` for Python: thin wrappers of the Rust types. The one
//! thing they add is identity: the same Rust supervisor is always the same Python object, and
//! that object keeps the Python form of its latest snapshot, converted once per published
//! version ([`PySupervisor::snapshot`]).
//!
//! Both remember the process they were made in (`crate::fork`): in a child of `os.fork()` they
//! raise `UsedAfterFork` and are never dropped for real.

use cdp_supervisor::unversioned::sync;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use pyo3::prelude::*;
use pyo3::types::PyString;
use serde_json::Value;

use cdp_supervisor::unversioned::{
    BrowserSlot, LaunchRefused, MAX_DIALOG_TIMEOUT, MAX_START_TIMEOUT, seconds_setting,
};
use cdp_supervisor::{
    BridgeMode, CallRequest, CancelToken, DialogAction, DialogAnswer, DialogPolicy, Error,
    PageChoice, Route, StartOptions, StartRequest, Supervisor, SupervisorRegistry, SupervisorState,
};

use crate::blocking::{self, Step};
use crate::config::PyConfig;
use crate::convert::{from_py, to_py};
use crate::errors::{invalid_argument, to_py_err};
use crate::fork::Home;
use crate::seconds;
use crate::snapshot::{PyDownload, PyFileChooser, PyPendingDialog, PySnapshot};

/// What a Python registry owns, shared with the calls it runs on other threads.
pub struct Inner {
    /// Dropped first: every supervisor stops before the launched browser closes.
    pub registry: SupervisorRegistry,
    /// The browser launched for tasks started without a CDP URL (none configured either): the
    /// crate's one launch slot, which never holds its lock across a launch.
    browser: BrowserSlot,
}

impl Inner {
    fn new(config: cdp_supervisor::Config) -> Inner {
        Inner {
            registry: SupervisorRegistry::new(config),
            browser: BrowserSlot::default(),
        }
    }

    /// Closes the registry (every start in progress cancelled, a launch in progress given up,
    /// every task stopped, later starts refused) and the browser it launched.
    fn close(&self) {
        self.registry.close();
        // A launch in progress is not awaited: it closes what it started itself.
        self.browser.close(Duration::ZERO);
    }

    /// The launched browser's URL, launching it (again, when it has exited) as needed, for the
    /// start of `task_id`. One launch at a time (callers wait for it); a close gives it up.
    fn launched_url(&self, task_id: &str) -> Result<String, Error> {
        if self.registry.is_closed() {
            return Err(Error::RegistryClosed(task_id.to_string()));
        }
        let cut_short = || Error::StartCancelled {
            task_id: task_id.to_string(),
            during: "launching the browser (the registry was closed)".into(),
        };
        match self
            .browser
            .get_or_launch(self.registry.config(), &CancelToken::new())
        {
            Ok(launched) => Ok(launched.ws_url),
            Err(LaunchRefused::NoBrowser) => Err(Error::NoPage(
                "no cdp_url given (nor browser.cdp_url configured) and no Chromium-family \
                 browser found to launch (install chromium, set CHROME, or configure \
                 browser.chrome_path)"
                    .into(),
            )),
            Err(LaunchRefused::Failed(e)) if !self.registry.is_closed() => Err(e),
            Err(_) => Err(cut_short()),
        }
    }
}

/// Owns one supervisor per task (SPEC §3); see the Python docstrings in `_native.pyi`.
#[pyclass(name = "SupervisorRegistry", module = "cdp_supervisor", frozen)]
pub struct PySupervisorRegistry {
    pub inner: Arc<Inner>,
    /// The process it was made in.
    pub home: Home,
    /// The Python object of each task's supervisor, so that the same supervisor is always the
    /// same object. Never held while Python code runs or a supervisor stops.
    wrappers: Mutex<HashMap<String, Py<PySupervisor>>>,
}

impl PySupervisorRegistry {
    fn lock_wrappers(&self) -> MutexGuard<'_, HashMap<String, Py<PySupervisor>>> {
        sync::lock(&self.wrappers)
    }

    /// The Python object of `sup` (task `task_id`): the one made before, or a new one.
    fn wrap(
        &self,
        py: Python<'_>,
        task_id: &str,
        sup: Arc<Supervisor>,
    ) -> PyResult<Py<PySupervisor>> {
        if let Some(w) = self.lock_wrappers().get(task_id)
            && Arc::ptr_eq(&w.get().sup, &sup)
        {
            return Ok(w.clone_ref(py));
        }
        let registry = Arc::downgrade(&self.inner);
        let fresh = Py::new(py, PySupervisor::new(py, sup, registry))?;
        let replaced = {
            let mut map = self.lock_wrappers();
            match map.get(task_id) {
                Some(w) if Arc::ptr_eq(&w.get().sup, &fresh.get().sup) => {
                    return Ok(w.clone_ref(py));
                }
                _ => map.insert(task_id.to_string(), fresh.clone_ref(py)),
            }
        };
        drop(replaced);
        Ok(fresh)
    }

    fn forget_all(&self) {
        let old = std::mem::take(&mut *self.lock_wrappers());
        drop(old);
    }

    fn forget(&self, task_id: &str) {
        let old = self.lock_wrappers().remove(task_id);
        drop(old);
    }

    /// `UsedAfterFork` in a child of the process that made it.
    pub fn check_home(&self) -> PyResult<()> {
        self.home.check("SupervisorRegistry")
    }
}

impl Drop for PySupervisorRegistry {
    /// In a child of `os.fork()`: the registry, its supervisors and its browser are the
    /// parent's, and are left alone (`crate::fork`).
    fn drop(&mut self) {
        self.home.leak_elsewhere(&self.inner);
    }
}

#[pymethods]
impl PySupervisorRegistry {
    #[new]
    #[pyo3(signature = (config=None))]
    fn new(config: Option<&Bound<'_, PyConfig>>) -> Self {
        let config = config.map(|c| c.get().inner.clone()).unwrap_or_default();
        PySupervisorRegistry {
            inner: Arc::new(Inner::new(config)),
            home: Home::here(),
            wrappers: Mutex::new(HashMap::new()),
        }
    }

    /// The configuration every supervisor of this registry starts with.
    #[getter]
    fn config(&self) -> PyConfig {
        PyConfig {
            inner: self.inner.registry.config().clone(),
        }
    }

    #[pyo3(signature = (task_id, cdp_url=None, *, target_id=None, dialog_policy=None,
                        dialog_timeout_s=None, dialog_bridge=None, start_timeout_s=None,
                        own_page=false, new_page=false, page_choice=None))]
    #[allow(clippy::too_many_arguments)]
    fn get_or_start(
        &self,
        py: Python<'_>,
        task_id: String,
        cdp_url: Option<String>,
        target_id: Option<String>,
        dialog_policy: Option<String>,
        dialog_timeout_s: Option<f64>,
        dialog_bridge: Option<String>,
        start_timeout_s: Option<f64>,
        own_page: bool,
        new_page: bool,
        page_choice: Option<String>,
    ) -> PyResult<Py<PySupervisor>> {
        self.check_home()?;
        // `new_page` is `own_page`'s old name.
        let mut options = StartOptions::default().with_own_page(own_page || new_page);
        options.target_id = target_id;
        if let Some(c) = page_choice {
            options.page_choice = PageChoice::parse(&c).map_err(to_py_err)?;
        }
        if let Some(p) = dialog_policy {
            options.dialog_policy = Some(DialogPolicy::parse(&p).map_err(to_py_err)?);
        }
        if let Some(b) = dialog_bridge {
            options.dialog_bridge = Some(BridgeMode::parse(&b).map_err(to_py_err)?);
        }
        if let Some(t) = dialog_timeout_s {
            options.dialog_timeout =
                Some(config_seconds("dialog_timeout_s", t, MAX_DIALOG_TIMEOUT)?);
        }
        let start_timeout = start_timeout_s
            .map(|t| config_seconds("start_timeout_s", t, MAX_START_TIMEOUT))
            .transpose()?;
        let url = cdp_url
            .filter(|u| !u.trim().is_empty())
            .or_else(|| self.inner.registry.config().cdp_url().map(str::to_string));
        let inner = Arc::clone(&self.inner);
        let task = task_id.clone();
        // On the main thread Ctrl-C cancels the start (`blocking::call`): it then leaves
        // nothing behind.
        let started = blocking::call(py, move |cancel| {
            let url = match url {
                Some(u) => u,
                None => {
                    // A launched browser: each task gets a page of its own, like the MCP
                    // server's tasks, unless it names one.
                    options.own_page |= options.target_id.is_none();
                    inner.launched_url(&task)?
                }
            };
            let request = StartRequest::new(&task, &url)
                .with_options(options)
                .with_timeout(start_timeout)
                .with_cancel(cancel);
            inner.registry.start(request)
        })?;
        let sup = started.map_err(to_py_err)?;
        self.wrap(py, &task_id, sup)
    }

    /// The task's supervisor, if one was started and not stopped (it may have died: see
    /// `is_alive`).
    fn get(&self, py: Python<'_>, task_id: String) -> PyResult<Option<Py<PySupervisor>>> {
        self.check_home()?;
        match self.inner.registry.get(&task_id) {
            Some(sup) => self.wrap(py, &task_id, sup).map(Some),
            None => Ok(None),
        }
    }

    /// The task's latest snapshot (`None` without a supervisor).
    fn snapshot(&self, py: Python<'_>, task_id: String) -> PyResult<Option<Py<PySnapshot>>> {
        self.check_home()?;
        match self.get(py, task_id)? {
            Some(w) => w.get().snapshot(py).map(Some),
            None => Ok(None),
        }
    }

    /// Stops the task's supervisor (pending dialogs dismissed first), or cuts its start in
    /// progress short (`StartCancelled`); whether there was either.
    fn stop(&self, py: Python<'_>, task_id: String) -> PyResult<bool> {
        self.check_home()?;
        let stopped = py.detach(|| self.inner.registry.stop(&task_id));
        self.forget(&task_id);
        Ok(stopped)
    }

    /// Stops every supervisor and cuts every start in progress short.
    fn stop_all(&self, py: Python<'_>) -> PyResult<()> {
        self.check_home()?;
        py.detach(|| self.inner.registry.stop_all());
        self.forget_all();
        Ok(())
    }

    /// Closes the registry: starts in progress are cut short (`StartCancelled`), every
    /// supervisor stops, the browser it launched closes, and later starts raise
    /// `RegistryClosed`. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.check_home()?;
        py.detach(|| self.inner.close());
        self.forget_all();
        Ok(())
    }

    /// Task ids with a supervisor (live or starting).
    fn tasks(&self) -> PyResult<Vec<String>> {
        self.check_home()?;
        Ok(self.inner.registry.tasks())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        if let Some(r) = self.home.repr_elsewhere("SupervisorRegistry") {
            return r;
        }
        format!(
            "SupervisorRegistry(tasks={:?})",
            self.inner.registry.tasks()
        )
    }
}

/// A number of seconds for a setting, under the crate's one rule of such settings (> 0, at most
/// `max`): otherwise the same error (`ConfigError`) a bad configuration value gets.
fn config_seconds(key: &str, value: f64, max: Duration) -> PyResult<Duration> {
    seconds_setting(key, value, max).map_err(to_py_err)
}

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
    registry: std::sync::Weak<Inner>,
}

impl Drop for PySupervisor {
    /// In a child of `os.fork()`: the supervisor is the parent's, and is left alone.
    fn drop(&mut self) {
        self.home.leak_elsewhere(&self.sup);
    }
}

impl PySupervisor {
    /// A call's timeout: `timeout_s`, or the supervisor's `call_timeout_s`.
    fn timeout(&self, timeout_s: Option<f64>) -> PyResult<Duration> {
        match timeout_s {
            Some(t) => seconds("timeout_s", t),
            None => Ok(self.sup.config().call_timeout()),
        }
    }

    pub fn new(
        py: Python<'_>,
        sup: Arc<Supervisor>,
        registry: std::sync::Weak<Inner>,
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

    /// The Rust supervisor, once [`PySupervisor::check_home`] passed.
    fn at_home(&self) -> PyResult<&Arc<Supervisor>> {
        self.check_home().map(|()| &self.sup)
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

#[pymethods]
impl PySupervisor {
    #[pyo3(name = "snapshot")]
    fn py_snapshot(&self, py: Python<'_>) -> PyResult<Py<PySnapshot>> {
        self.snapshot(py)
    }

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
        let sup = Arc::clone(&self.sup);
        // On the main thread Ctrl-C abandons the wait for the browser's acknowledgement.
        let answered = blocking::call(py, move |cancel| {
            let answer = DialogAnswer::new(action)
                .with_prompt_text(prompt_text.as_deref())
                .with_dialog_id(dialog_id.as_deref())
                .with_cancel(cancel);
            sup.answer_dialog(answer)
        })?;
        PyPendingDialog::new(py, &answered.map_err(to_py_err)?)
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
        let timeout = match timeout_s {
            Some(t) => seconds("timeout_s", t)?,
            None => self.sup.config().call_timeout(),
        };
        let sup = Arc::clone(&self.sup);
        let result = blocking::call(py, move |cancel| {
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
        to_py(py, &result.map_err(to_py_err)?)
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
        crate::files::navigate(py, self.at_home()?, url, wait_until, timeout)
    }

    #[pyo3(signature = (wait_until="load", timeout_s=None))]
    fn wait_for_navigation<'py>(
        &self,
        py: Python<'py>,
        wait_until: &str,
        timeout_s: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let timeout = self.timeout(timeout_s)?;
        crate::files::wait_for_navigation(py, self.at_home()?, wait_until, timeout)
    }

    #[pyo3(signature = (timeout_s=None))]
    fn tab_ref(&self, py: Python<'_>, timeout_s: Option<f64>) -> PyResult<String> {
        let timeout = self.timeout(timeout_s)?;
        crate::files::tab_ref(py, self.at_home()?, timeout)
    }

    #[pyo3(signature = (timeout_s=30.0))]
    fn wait_for_download(&self, py: Python<'_>, timeout_s: f64) -> PyResult<PyDownload> {
        let timeout = seconds("timeout_s", timeout_s)?;
        crate::files::wait_for_download(py, self.at_home()?, timeout)
    }

    #[pyo3(signature = (files, chooser_id=None))]
    fn respond_to_file_chooser(
        &self,
        py: Python<'_>,
        files: Vec<std::path::PathBuf>,
        chooser_id: Option<String>,
    ) -> PyResult<PyFileChooser> {
        crate::files::respond_to_file_chooser(py, self.at_home()?, files, chooser_id)
    }

    #[pyo3(signature = (chooser_id=None))]
    fn dismiss_file_chooser(
        &self,
        py: Python<'_>,
        chooser_id: Option<String>,
    ) -> PyResult<PyFileChooser> {
        crate::files::dismiss_file_chooser(py, self.at_home()?, chooser_id)
    }

    /// Hands the task over to a person (SPEC §20); see `_native.pyi`.
    fn hand_over<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::handover::change_holder(py, self.at_home()?, true)
    }

    /// Gives the task back to the agent; see `_native.pyi`.
    fn take_back<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::handover::change_holder(py, self.at_home()?, false)
    }

    /// A person holds the task.
    #[getter]
    fn is_held(&self) -> PyResult<bool> {
        Ok(self.at_home()?.is_held())
    }

    #[pyo3(signature = (action, prompt_text=None, dialog_id=None))]
    fn respond_as_human(
        &self,
        py: Python<'_>,
        action: &str,
        prompt_text: Option<String>,
        dialog_id: Option<String>,
    ) -> PyResult<PyPendingDialog> {
        crate::handover::respond_as_human(py, self.at_home()?, action, prompt_text, dialog_id)
    }

    /// A small JPEG of the task's page; see `_native.pyi`.
    fn thumbnail<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        crate::handover::thumbnail(py, self.at_home()?)
    }

    /// The task's CDP endpoint; see `_native.pyi`.
    fn cdp_endpoint(&self, py: Python<'_>) -> PyResult<crate::endpoint::PyCdpEndpoint> {
        crate::endpoint::of(py, &self.registry, self.at_home()?)
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
        let state: SupervisorState = self.sup.state();
        Ok(PyString::intern(py, state.as_str()))
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
