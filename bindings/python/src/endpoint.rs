//! `Supervisor.cdp_endpoint()` and the frozen `CdpEndpoint` it returns (issue 30, SPEC §18):
//! the task's CDP endpoint, from the Rust registry's `cdp_endpoint`.

use std::sync::{Arc, Weak};

use pyo3::prelude::*;

use cdp_supervisor::{Error, Supervisor, SupervisorRegistry};

use crate::errors::to_py_err;

/// Where CDP clients connect to a task; see `_native.pyi`.
#[pyclass(name = "CdpEndpoint", module = "cdp_supervisor", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyCdpEndpoint {
    #[pyo3(get)]
    ws_url: String,
    #[pyo3(get)]
    http_url: String,
}

#[pymethods]
impl PyCdpEndpoint {
    /// The URLs with their secret token left out (`***`).
    fn __repr__(&self) -> String {
        format!(
            "CdpEndpoint(ws_url={:?}, http_url={:?})",
            hide_token(&self.ws_url),
            hide_token(&self.http_url)
        )
    }
}

/// `scheme://host:port/<token>...` with the token as `***`.
fn hide_token(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "***".into();
    };
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let tail = path.split_once('/').map_or("", |(_, t)| t);
    match tail {
        "" => format!("{scheme}://{host}/***"),
        t => format!("{scheme}://{host}/***/{t}"),
    }
}

/// The registry a supervisor was started by, as the supervisor keeps it (weakly): implemented by
/// the Python registry's inner part, so that this module and the supervisor's need not know it.
pub trait Registry: Send + Sync {
    /// The crate's registry.
    fn registry(&self) -> &SupervisorRegistry;
}

/// The endpoint of `sup`'s task in `registry`: `NotActive` once the task stopped (or another
/// supervisor took its place).
pub fn of(
    py: Python<'_>,
    registry: &Weak<dyn Registry>,
    sup: &Arc<Supervisor>,
) -> PyResult<PyCdpEndpoint> {
    let not_active = || to_py_err(Error::NotActive(sup.task_id().to_string()));
    let inner = registry.upgrade().ok_or_else(not_active)?;
    let current = inner.registry().get(sup.task_id());
    if !current.is_some_and(|c| Arc::ptr_eq(&c, sup)) || !sup.is_alive() {
        return Err(not_active());
    }
    let task = sup.task_id().to_string();
    let ep = py
        .detach(move || inner.registry().cdp_endpoint(&task))
        .map_err(to_py_err)?;
    Ok(PyCdpEndpoint {
        ws_url: ep.ws_url,
        http_url: ep.http_url,
    })
}

#[cfg(test)]
mod tests {
    use super::hide_token;

    #[test]
    fn the_token_is_hidden() {
        assert_eq!(
            hide_token("ws://127.0.0.1:1/abc/devtools/browser/x"),
            "ws://127.0.0.1:1/***/devtools/browser/x"
        );
        assert_eq!(
            hide_token("http://127.0.0.1:1/abc"),
            "http://127.0.0.1:1/***"
        );
    }
}
