//! `SupervisorRegistry` for Python: a thin wrapper of the Rust type. The one thing it adds is
//! identity: the same Rust supervisor is always the same Python object (`supervisor.rs`).
//!
//! It remembers the process it was made in (`crate::fork`): in a child of `os.fork()` it raises
//! `UsedAfterFork` and is never dropped for real.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use pyo3::prelude::*;

use cdp_supervisor::unversioned::{
    BrowserSlot, LaunchRefused, MAX_DIALOG_TIMEOUT, MAX_START_TIMEOUT, seconds_setting, sync,
};
use cdp_supervisor::{
    BridgeMode, CancelToken, DialogPolicy, Error, PageChoice, StartOptions, StartRequest,
    Supervisor, SupervisorRegistry,
};

use crate::blocking;
use crate::config::PyConfig;
use crate::errors::to_py_err;
use crate::fork::Home;
use crate::snapshot::PySnapshot;
use crate::supervisor::PySupervisor;

/// What a Python registry owns, shared with the calls it runs on other threads.
pub struct Inner {
    /// Dropped first: every supervisor stops before the launched browser closes.
    pub registry: SupervisorRegistry,
    /// The browser launched for tasks started without a CDP URL (none configured either): the
    /// crate's one launch slot, which never holds its lock across a launch.
    browser: BrowserSlot,
}

impl crate::endpoint::Registry for Inner {
    fn registry(&self) -> &SupervisorRegistry {
        &self.registry
    }
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
        let inner: Arc<dyn crate::endpoint::Registry> = self.inner.clone();
        let registry = Arc::downgrade(&inner);
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
