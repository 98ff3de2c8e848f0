//! [`cdp_supervisor::Error`] as Python exceptions: one class per kind of failure, defined in
//! `cdp_supervisor/errors.py` (so they can also derive from `ValueError`, `TimeoutError`, ...),
//! with the error's fields as attributes. Callers catch a class; they never parse a message.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

use cdp_supervisor::Error;

use crate::snapshot::PyPendingDialog;

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The exception class `name` of `cdp_supervisor.errors`.
fn class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let module = ERRORS.get_or_try_init(py, || {
        PyModule::import(py, "cdp_supervisor.errors").map(Bound::unbind)
    })?;
    module.bind(py).getattr(name)
}

/// An attribute value for an exception.
enum Attr {
    Str(String),
    OptStr(Option<String>),
    Int(i64),
    Float(f64),
    Dialog(Box<cdp_supervisor::PendingDialog>),
}

/// The Python exception for `e`: its class, its message (the Rust error's), its fields.
pub fn to_py_err(e: Error) -> PyErr {
    Python::attach(|py| build(py, e).unwrap_or_else(|failed| failed))
}

fn build(py: Python<'_>, e: Error) -> PyResult<PyErr> {
    let message = e.to_string();
    let (name, attrs): (&str, Vec<(&str, Attr)>) = match e {
        Error::InvalidUrl { url, .. } => ("InvalidUrl", vec![("url", Attr::Str(url))]),
        Error::Connect { url, .. } => ("ConnectError", vec![("url", Attr::Str(url))]),
        Error::ConnectionLost(_) => ("ConnectionLost", vec![]),
        Error::Timeout { method, after } => (
            "Timeout",
            vec![
                ("method", Attr::Str(method)),
                ("after_s", Attr::Float(after.as_secs_f64())),
            ],
        ),
        Error::StartTimeout(after, _) => (
            "StartTimeout",
            vec![("after_s", Attr::Float(after.as_secs_f64()))],
        ),
        Error::Cdp {
            method,
            code,
            message,
        } => (
            "CdpError",
            vec![
                ("method", Attr::Str(method)),
                ("code", Attr::Int(code)),
                ("cdp_message", Attr::Str(message)),
            ],
        ),
        Error::NoPage(_) => ("NoPage", vec![]),
        Error::NotActive(task) => ("NotActive", vec![("task_id", Attr::Str(task))]),
        Error::NoDialog => ("NoDialog", vec![]),
        Error::UnknownDialog { id, .. } => ("UnknownDialog", vec![("dialog_id", Attr::Str(id))]),
        Error::AmbiguousDialog { count, .. } => {
            ("AmbiguousDialog", vec![("count", Attr::Int(count as i64))])
        }
        Error::DialogAlreadyClosed { id, closed_by, .. } => (
            "DialogAlreadyClosed",
            vec![
                ("dialog_id", Attr::Str(id)),
                ("closed_by", Attr::Str(closed_by.as_str().into())),
            ],
        ),
        Error::OrphanedDialog => ("OrphanedDialog", vec![]),
        Error::PageUnresponsive => ("PageUnresponsive", vec![]),
        Error::AnswerAppliedToOtherDialog { named, received } => (
            "AnswerAppliedToOtherDialog",
            vec![
                ("named", Attr::Str(named)),
                ("received", Attr::Dialog(received)),
            ],
        ),
        Error::DialogUnanswerable { id, frame_id } => (
            "DialogUnanswerable",
            vec![
                ("dialog_id", Attr::Str(id)),
                ("frame_id", Attr::OptStr(frame_id)),
            ],
        ),
        Error::UnknownFrame(f) => ("UnknownFrame", vec![("frame_id", Attr::Str(f))]),
        Error::UnknownTarget(t) => ("UnknownTarget", vec![("target_id", Attr::Str(t))]),
        Error::Config {
            key,
            value,
            allowed,
        } => (
            "ConfigError",
            vec![
                ("key", Attr::Str(key)),
                ("value", Attr::Str(value)),
                ("allowed", Attr::Str(allowed)),
            ],
        ),
        Error::InvalidArgument(_) => ("InvalidArgument", vec![]),
        // A configuration that cannot be read (a missing file, text that is not TOML): an
        // `OSError`, as it was when the crate reported it as `Error::Io`.
        Error::Io(_) | Error::InvalidConfig(_) => ("IoError", vec![]),
        Error::BlockedByDialog { dialog, method } => (
            "BlockedByDialog",
            vec![
                ("dialog", Attr::Dialog(dialog)),
                ("method", Attr::Str(method)),
            ],
        ),
        Error::Refused {
            method,
            option,
            detail,
        } => (
            "SecurityPolicy",
            vec![
                ("method", Attr::Str(method)),
                ("option", Attr::Str(option)),
                ("detail", Attr::Str(detail)),
            ],
        ),
        Error::TargetCrashed { method, .. } => {
            ("TargetCrashed", vec![("method", Attr::Str(method))])
        }
        Error::UndecodableReply { method, .. } => {
            ("UndecodableReply", vec![("method", Attr::Str(method))])
        }
        Error::Cancelled(method) => ("Cancelled", vec![("method", Attr::Str(method))]),
        _ => ("CdpSupervisorError", vec![]),
    };
    let exc = class(py, name)?.call1((message,))?;
    for (key, value) in attrs {
        let value: Bound<'_, PyAny> = match value {
            Attr::Str(s) => s.into_pyobject(py)?.into_any(),
            Attr::OptStr(s) => s.into_pyobject(py)?.into_any(),
            Attr::Int(i) => i.into_pyobject(py)?.into_any(),
            Attr::Float(f) => f.into_pyobject(py)?.into_any(),
            Attr::Dialog(d) => Bound::new(py, PyPendingDialog::new(py, &d)?)?.into_any(),
        };
        exc.setattr(key, value)?;
    }
    Ok(PyErr::from_value(exc))
}

/// `InvalidArgument(message)`.
pub fn invalid_argument(message: impl Into<String>) -> PyErr {
    to_py_err(Error::InvalidArgument(message.into()))
}
