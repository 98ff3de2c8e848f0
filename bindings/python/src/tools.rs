//! `cdp_supervisor.tools`: the JSON tool handlers, returning the text an MCP client gets as the
//! tool result of `browser_snapshot`, `browser_dialog` and `browser_cdp`, for agents that hand
//! tool results straight to a model. The calls run through the crate's tool table
//! (`cdp_supervisor::unversioned::tools::call`), as the MCP server's do: the same `task_id` rule,
//! the same results, the dialog status included.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use cdp_supervisor::unversioned::tools;

use crate::blocking;
use crate::convert::from_py;
use crate::registry::PySupervisorRegistry;

/// Runs tool `name` with `arguments` (the tool's JSON arguments, `task_id` included) and returns
/// the JSON text of its result.
#[pyfunction]
#[pyo3(name = "_call_tool")]
pub fn call_tool(
    py: Python<'_>,
    registry: &Bound<'_, PySupervisorRegistry>,
    name: String,
    arguments: &Bound<'_, PyDict>,
) -> PyResult<String> {
    registry.get().check_home()?;
    let args = from_py(arguments.as_any())?;
    let inner = Arc::clone(&registry.get().inner);
    let out = blocking::call(py, move |cancel| {
        tools::call(&inner.registry, &name, &args, cancel)
    })?;
    Ok(out.to_string())
}
