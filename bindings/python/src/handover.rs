//! `Supervisor.hand_over`, `take_back`, `respond_as_human` and `thumbnail` (SPEC §20): thin
//! calls of the Rust methods, the GIL released while they wait.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use cdp_supervisor::{DialogAction, Supervisor};

use crate::blocking;
use crate::convert::to_py;
use crate::errors::{invalid_argument, to_py_err};
use crate::snapshot::PyPendingDialog;

/// `hand_over` (`hold`) or `take_back`: the hand-over state it leaves, as a dict.
pub fn change_holder<'py>(
    py: Python<'py>,
    sup: &Arc<Supervisor>,
    hold: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let sup = Arc::clone(sup);
    let state = blocking::call(py, move |_| {
        if hold {
            sup.hand_over()
        } else {
            sup.take_back()
        }
    })?
    .map_err(to_py_err)?;
    // `{"held", "held_since"?, "ended_holds_s", "holds"}`, as `Snapshot.handover` has it.
    to_py(py, &state.to_json())
}

/// `Supervisor.respond_as_human`.
pub fn respond_as_human(
    py: Python<'_>,
    sup: &Arc<Supervisor>,
    action: &str,
    prompt_text: Option<String>,
    dialog_id: Option<String>,
) -> PyResult<PyPendingDialog> {
    let action = DialogAction::parse(action).map_err(|e| invalid_argument(e.to_string()))?;
    let sup = Arc::clone(sup);
    let answered = blocking::call(py, move |_| {
        sup.respond_as_human(action, prompt_text.as_deref(), dialog_id.as_deref())
    })?;
    PyPendingDialog::new(py, &answered.map_err(to_py_err)?)
}

/// `Supervisor.thumbnail`: `{"jpeg": bytes, "width", "height", "taken_at", "target_id"}`.
pub fn thumbnail<'py>(py: Python<'py>, sup: &Arc<Supervisor>) -> PyResult<Bound<'py, PyDict>> {
    let sup = Arc::clone(sup);
    let t = blocking::call(py, move |_| sup.thumbnail())?.map_err(to_py_err)?;
    let d = PyDict::new(py);
    d.set_item("jpeg", PyBytes::new(py, &t.jpeg))?;
    d.set_item("width", t.width)?;
    d.set_item("height", t.height)?;
    d.set_item("taken_at", t.taken_at)?;
    d.set_item("target_id", &t.target_id)?;
    Ok(d)
}
