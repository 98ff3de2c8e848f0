//! The Python binding of cdp-supervisor: the extension module `cdp_supervisor._native`, wrapped
//! by the Python package in `bindings/python/python/cdp_supervisor/` (SPEC §17).
//!
//! Thin by design: every behaviour is the Rust crate's, reached through its public API
//! (`SupervisorRegistry`, `Supervisor`, `Config`, `tools`, `fake`). What is Python's own:
//! * `registry`, `supervisor`: one Python object per Rust supervisor, and its snapshot converted
//!   once per published version (`snapshot`: frozen, typed objects).
//! * `blocking`: every wait releases the GIL; on the main thread Ctrl-C ends it.
//! * `fork`: after `os.fork()`, objects of the parent refuse every call in the child and are
//!   never dropped there (`UsedAfterFork`).
//! * `errors`: `cdp_supervisor::Error` as exception classes with attributes.
//! * `config`: keyword arguments to `Config` through `Config::set`.
//! * `convert`: JSON values to Python and back.
//! * `testing`, `tools`, `bench`: the fake browser, the JSON tools, the bench's Rust side.
//! * `endpoint`: the task's CDP endpoint (`Supervisor.cdp_endpoint()`, issue 30).
#![deny(unsafe_code)]

use std::time::Duration;

use pyo3::prelude::*;

mod bench;
mod blocking;
mod config;
mod convert;
mod endpoint;
mod errors;
mod fork;
mod registry;
mod snapshot;
mod supervisor;
mod testing;
mod tools;

/// A caller's number of seconds: finite and >= 0 (longer than [`blocking::MAX_WAIT`] is cut to
/// it).
pub(crate) fn seconds(name: &str, value: f64) -> PyResult<Duration> {
    if value.is_finite() && value >= 0.0 {
        Ok(Duration::from_secs_f64(
            value.min(blocking::MAX_WAIT.as_secs_f64()),
        ))
    } else {
        Err(errors::invalid_argument(format!(
            "{name} must be a finite number of seconds >= 0, got {value}"
        )))
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    fork::init(m.py())?;
    blocking::init(m.py())?;
    m.add_class::<config::PyConfig>()?;
    m.add_class::<registry::PySupervisorRegistry>()?;
    m.add_class::<supervisor::PySupervisor>()?;
    m.add_class::<endpoint::PyCdpEndpoint>()?;
    m.add_class::<snapshot::PySnapshot>()?;
    m.add_class::<snapshot::PyPendingDialog>()?;
    m.add_class::<snapshot::PyClosedDialog>()?;
    m.add_class::<snapshot::PyFrameTree>()?;
    m.add_class::<snapshot::PyFrameEntry>()?;
    m.add_class::<snapshot::PyConsoleEntry>()?;
    m.add_class::<snapshot::PyBlocked>()?;
    m.add_class::<snapshot::PyPageInfo>()?;
    m.add_class::<snapshot::PyDownload>()?;
    m.add_class::<snapshot::PyFileChooser>()?;
    m.add_class::<testing::PyFakeBrowser>()?;
    m.add_function(wrap_pyfunction!(tools::call_tool, m)?)?;
    m.add_function(wrap_pyfunction!(bench::detect_rust, m)?)?;
    m.add_function(wrap_pyfunction!(errors::error_samples, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "DIALOG_BRIDGE_HOST",
        cdp_supervisor::unversioned::bridge::BRIDGE_HOST,
    )?;
    m.add("CONFIG_KEYWORDS", config::keywords())?;
    Ok(())
}
