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
    List(Vec<String>),
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
        Error::StartTimeout(after, detail) => (
            "StartTimeout",
            vec![
                ("method", Attr::OptStr(None)),
                ("after_s", Attr::Float(after.as_secs_f64())),
                ("detail", Attr::Str(detail)),
            ],
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
        Error::DialogInUnfollowedPage { target_ids } => (
            "DialogInUnfollowedPage",
            vec![("target_ids", Attr::List(target_ids))],
        ),
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
        Error::InvalidConfig(_) => ("InvalidConfig", vec![]),
        Error::InvalidArgument(_) => ("InvalidArgument", vec![]),
        Error::Io(_) => ("IoError", vec![]),
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
        Error::TargetCrashed { method, what } => (
            "TargetCrashed",
            vec![("method", Attr::Str(method)), ("what", Attr::Str(what))],
        ),
        Error::UndecodableReply { method, .. } => {
            ("UndecodableReply", vec![("method", Attr::Str(method))])
        }
        Error::Cancelled(method) => ("Cancelled", vec![("method", Attr::Str(method))]),
        Error::NavigationFailed { url, error } => (
            "NavigationFailed",
            vec![("url", Attr::Str(url)), ("error", Attr::Str(error))],
        ),
        Error::NoDownload { waited } => (
            "NoDownload",
            vec![("waited_s", Attr::Float(waited.as_secs_f64()))],
        ),
        Error::StartCancelled { task_id, during } => (
            "StartCancelled",
            vec![
                ("task_id", Attr::Str(task_id)),
                ("during", Attr::Str(during)),
            ],
        ),
        Error::RegistryClosed(task) => ("RegistryClosed", vec![("task_id", Attr::Str(task))]),
        // A variant newer than this binding (`Error` is non-exhaustive):
        // `tests/test_errors.py` fails until it gets a class of its own.
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
            Attr::List(l) => l.into_pyobject(py)?.into_any(),
        };
        exc.setattr(key, value)?;
    }
    Ok(PyErr::from_value(exc))
}

/// `UsedAfterFork`: an object made in process `made_in` (a `what`: `SupervisorRegistry`,
/// `Supervisor`, `FakeBrowser`) used in process `now`, a child of that one (see `crate::fork`).
pub fn used_after_fork(what: &str, made_in: u32, now: u32) -> PyErr {
    let message = format!(
        "this {what} was made in process {made_in} and cannot be used in process {now}, a child \
         made by fork(): its connections and threads stayed with the parent, and nothing of it \
         was touched. Make a new SupervisorRegistry in the child (or start children with \
         multiprocessing's \"spawn\" or \"forkserver\" method)"
    );
    Python::attach(|py| {
        let built = class(py, "UsedAfterFork").and_then(|cls| {
            let exc = cls.call1((message,))?;
            exc.setattr("made_in_pid", made_in)?;
            exc.setattr("pid", now)?;
            Ok(PyErr::from_value(exc))
        });
        built.unwrap_or_else(|failed| failed)
    })
}

/// `InvalidArgument(message)`.
pub fn invalid_argument(message: impl Into<String>) -> PyErr {
    to_py_err(Error::InvalidArgument(message.into()))
}

/// One `Error` of every variant, with sample fields (the two that carry a dialog carry
/// `dialog`), as the exception each becomes: `(variant name, exception)`. For
/// `tests/test_errors.py`, which checks the list against `src/error.rs` so that a new variant
/// cannot go unmapped, and checks each class and attribute.
#[pyfunction]
#[pyo3(name = "_error_samples")]
pub fn error_samples(
    py: Python<'_>,
    dialog: &Bound<'_, PyPendingDialog>,
) -> Vec<(&'static str, Py<pyo3::exceptions::PyBaseException>)> {
    use std::time::Duration;

    use cdp_supervisor::ClosedBy;

    let d = || Box::new(dialog.get().inner.clone());
    let s = |v: &str| v.to_string();
    let samples = vec![
        (
            "InvalidUrl",
            Error::InvalidUrl {
                url: s("ftp://h/"),
                reason: s("unsupported scheme"),
            },
        ),
        (
            "Connect",
            Error::Connect {
                url: s("ws://127.0.0.1:9/"),
                reason: s("connection refused"),
            },
        ),
        ("ConnectionLost", Error::ConnectionLost(s("socket closed"))),
        (
            "Timeout",
            Error::Timeout {
                method: s("Page.reload"),
                after: Duration::from_millis(1500),
            },
        ),
        (
            "Cdp",
            Error::Cdp {
                method: s("Nope.nothing"),
                code: -32601,
                message: s("'Nope.nothing' wasn't found"),
            },
        ),
        (
            "StartTimeout",
            Error::StartTimeout(Duration::from_secs(2), s("Page.enable did not answer")),
        ),
        ("NoPage", Error::NoPage(s("no page target"))),
        ("NotActive", Error::NotActive(s("task-1"))),
        ("NoDialog", Error::NoDialog),
        (
            "UnknownDialog",
            Error::UnknownDialog {
                id: s("d-9"),
                known: s("d-1"),
            },
        ),
        (
            "AmbiguousDialog",
            Error::AmbiguousDialog {
                count: 2,
                pending: s("d-1, d-2"),
            },
        ),
        (
            "DialogAlreadyClosed",
            Error::DialogAlreadyClosed {
                id: s("d-1"),
                closed_by: ClosedBy::Remote,
                detail: s("No dialog is showing"),
            },
        ),
        ("OrphanedDialog", Error::OrphanedDialog),
        ("PageUnresponsive", Error::PageUnresponsive),
        (
            "DialogInUnfollowedPage",
            Error::DialogInUnfollowedPage {
                target_ids: vec![s("T1"), s("T2")],
            },
        ),
        (
            "AnswerAppliedToOtherDialog",
            Error::AnswerAppliedToOtherDialog {
                named: s("d-0"),
                received: d(),
            },
        ),
        (
            "DialogUnanswerable",
            Error::DialogUnanswerable {
                id: s("d-1"),
                frame_id: Some(s("F1")),
            },
        ),
        ("UnknownFrame", Error::UnknownFrame(s("F9"))),
        ("UnknownTarget", Error::UnknownTarget(s("T9"))),
        (
            "Config",
            Error::Config {
                key: s("browser.dialog_policy"),
                value: s("sometimes"),
                allowed: s("must_respond, auto_dismiss or auto_accept"),
            },
        ),
        (
            "InvalidConfig",
            Error::InvalidConfig(s("configuration file /x.toml does not exist")),
        ),
        ("InvalidArgument", Error::InvalidArgument(s("bad input"))),
        ("Io", Error::Io(s("cannot spawn a thread"))),
        (
            "BlockedByDialog",
            Error::BlockedByDialog {
                dialog: d(),
                method: s("Runtime.evaluate"),
            },
        ),
        (
            "Refused",
            Error::Refused {
                method: s("Browser.close"),
                option: s("security.cdp_deny"),
                detail: s("matches Browser.*"),
            },
        ),
        (
            "TargetCrashed",
            Error::TargetCrashed {
                what: s("the page"),
                method: s("Runtime.evaluate"),
            },
        ),
        (
            "UndecodableReply",
            Error::UndecodableReply {
                method: s("Runtime.evaluate"),
                reason: s("recursion limit exceeded"),
            },
        ),
        ("Cancelled", Error::Cancelled(s("Page.reload"))),
        (
            "NavigationFailed",
            Error::NavigationFailed {
                url: s("http://x.invalid/"),
                error: s("net::ERR_NAME_NOT_RESOLVED"),
            },
        ),
        (
            "NoDownload",
            Error::NoDownload {
                waited: Duration::from_secs(2),
            },
        ),
        (
            "StartCancelled",
            Error::StartCancelled {
                task_id: s("task-1"),
                during: s("connecting"),
            },
        ),
        ("RegistryClosed", Error::RegistryClosed(s("task-1"))),
    ];
    samples
        .into_iter()
        .map(|(name, e)| (name, to_py_err(e).into_value(py)))
        .collect()
}
