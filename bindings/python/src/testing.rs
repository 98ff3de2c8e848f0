//! `cdp_supervisor.testing.FakeBrowser`: the crate's scripted fake CDP browser, so Python users
//! test their agents without Chromium. Same names as the Rust `cdp_supervisor::fake`.

use cdp_supervisor::unversioned::sync;
use std::sync::RwLock;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use cdp_supervisor::fake::{FakeBrowser, Rule};

use crate::convert::{from_py, to_py};
use crate::errors::{invalid_argument, to_py_err};
use crate::fork::Home;

/// A fake CDP browser on loopback (see `_native.pyi`).
#[pyclass(name = "FakeBrowser", module = "cdp_supervisor.testing", frozen)]
pub struct PyFakeBrowser {
    /// `None` once closed.
    inner: RwLock<Option<FakeBrowser>>,
    ws_url: String,
    http_url: String,
    page_target_id: String,
    /// The process it was made in (`crate::fork`): in a child of `os.fork()` it refuses every
    /// call (its threads are the parent's) and is never dropped for real.
    home: Home,
}

impl Drop for PyFakeBrowser {
    fn drop(&mut self) {
        if self.home.is_elsewhere() {
            let fake = self
                .inner
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            std::mem::forget(fake);
        }
    }
}

impl PyFakeBrowser {
    /// Runs `f` with the fake (`UsedAfterFork` in a child of `os.fork()`, `InvalidArgument`
    /// once it is closed); the bench harness's way in too.
    pub fn with<R>(&self, f: impl FnOnce(&FakeBrowser) -> R) -> PyResult<R> {
        self.home.check("FakeBrowser")?;
        match sync::read(&self.inner).as_ref() {
            Some(fake) => Ok(f(fake)),
            None => Err(invalid_argument("this FakeBrowser is closed")),
        }
    }
}

#[pymethods]
impl PyFakeBrowser {
    /// Starts the fake on `127.0.0.1` with an ephemeral port.
    #[new]
    fn new(py: Python<'_>) -> PyResult<Self> {
        let fake = py.detach(FakeBrowser::start).map_err(|e| {
            to_py_err(cdp_supervisor::Error::Io(format!(
                "cannot start the fake browser: {e}"
            )))
        })?;
        Ok(PyFakeBrowser {
            ws_url: fake.ws_url(),
            http_url: fake.http_url(),
            page_target_id: fake.page_target_id(),
            inner: RwLock::new(Some(fake)),
            home: Home::here(),
        })
    }

    /// Its browser WebSocket URL (`ws://127.0.0.1:PORT/devtools/browser/...`).
    #[getter]
    fn ws_url(&self) -> &str {
        &self.ws_url
    }

    /// Its `http://127.0.0.1:PORT` (answers `GET /json/version`).
    #[getter]
    fn http_url(&self) -> &str {
        &self.http_url
    }

    /// The id of its default page target.
    #[getter]
    fn page_target_id(&self) -> &str {
        &self.page_target_id
    }

    /// The page opens a dialog (`alert`, `confirm`, `prompt`, `beforeunload`): the fake sends
    /// `Page.javascriptDialogOpening` on every attached page session.
    #[pyo3(signature = (kind, message, default_prompt=String::new()), text_signature = "($self, kind, message, default_prompt='')")]
    fn open_dialog(
        &self,
        py: Python<'_>,
        kind: String,
        message: String,
        default_prompt: String,
    ) -> PyResult<()> {
        py.detach(|| self.with(|f| f.open_dialog(&kind, &message, &default_prompt)))
    }

    /// Whether a dialog is open in the fake page.
    fn dialog_open(&self) -> PyResult<bool> {
        self.with(FakeBrowser::dialog_open)
    }

    /// Something else closes the open dialog (`Page.javascriptDialogClosed` without an answer
    /// from the supervisor).
    fn close_dialog_remotely(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.with(FakeBrowser::close_dialog_remotely))
    }

    /// Sends an event with `params` on every attached page session.
    #[pyo3(signature = (method, params=None))]
    fn emit_on_page(
        &self,
        py: Python<'_>,
        method: String,
        params: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let params = match params {
            Some(p) => from_py(p.as_any())?,
            None => serde_json::json!({}),
        };
        py.detach(|| self.with(|f| f.emit_on_page(&method, params)))
    }

    /// From now on the fake never answers `method` (a browser that hangs).
    fn ignore(&self, method: String) -> PyResult<()> {
        self.with(|f| f.set_rule(&method, Rule::Ignore))
    }

    /// From now on the fake answers `method` with `result`.
    fn set_reply(&self, method: String, result: &Bound<'_, PyDict>) -> PyResult<()> {
        let result = from_py(result.as_any())?;
        self.with(|f| f.set_rule(&method, Rule::Reply(result)))
    }

    /// From now on the fake answers `method` with a CDP error.
    fn set_error(&self, method: String, code: i64, message: String) -> PyResult<()> {
        self.with(|f| f.set_rule(&method, Rule::Error { code, message }))
    }

    /// `method` gets the fake's built-in answer again.
    fn clear_rule(&self, method: String) -> PyResult<()> {
        self.with(|f| f.clear_rule(&method))
    }

    /// Every command the fake received, oldest first, as dicts.
    fn received<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let all = self.with(FakeBrowser::received)?;
        all.iter().map(|v| to_py(py, v)).collect()
    }

    /// Stops the fake: every connection closes. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.home.check("FakeBrowser")?;
        let fake = sync::write(&self.inner).take();
        py.detach(|| drop(fake));
        Ok(())
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
        if let Some(r) = self.home.repr_elsewhere("FakeBrowser") {
            return r;
        }
        format!("FakeBrowser(ws_url={:?})", self.ws_url)
    }
}
