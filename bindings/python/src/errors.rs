//! [`cdp_supervisor::Error`] as Python exceptions: one class per kind of failure, defined once
//! in `cdp_supervisor/errors.py` (so they can also derive from `ValueError`, `TimeoutError`,
//! ..., and carry their documentation), each known to Rust as a type ([`class`], imported once
//! per process), with the error's fields as attributes; [`PyError`] is the one mapping
//! (`From<PyError> for PyErr`). Callers catch a class; they never parse a message.

use pyo3::prelude::*;
use pyo3::types::PyType;
use pyo3::{IntoPyObjectExt, PyTypeInfo};

use cdp_supervisor::Error;

use crate::snapshot::PyPendingDialog;

/// The exception classes of `cdp_supervisor.errors`, as Rust types.
pub mod class {
    /// One type per class, imported with `cdp_supervisor.errors` at first use.
    macro_rules! classes {
        ($($name:ident),*) => { $(pyo3::import_exception!(cdp_supervisor.errors, $name);)* };
    }
    classes! {
        CdpSupervisorError, InvalidUrl, ConnectError, ConnectionLost, Timeout, StartTimeout,
        CdpError, NoPage, NotActive, NoDialog, UnknownDialog, AmbiguousDialog, DialogAlreadyClosed,
        OrphanedDialog, PageUnresponsive, DialogInUnfollowedPage, AnswerAppliedToOtherDialog,
        DialogUnanswerable, UnknownFrame, UnknownTarget, ConfigError, InvalidConfig,
        InvalidArgument, IoError, BlockedByDialog, SecurityPolicy, TargetCrashed, UndecodableReply,
        Cancelled, NavigationFailed, NoDownload, StartCancelled, RegistryClosed, UsedAfterFork, HeldByHuman, CannotCapture
    }
}

/// A crate error on its way to Python (`From<cdp_supervisor::Error> for PyErr` cannot be
/// written here: both are foreign types). `PyErr::from(PyError(e))`, or [`to_py_err`].
pub struct PyError(pub Error);

impl From<Error> for PyError {
    fn from(e: Error) -> PyError {
        PyError(e)
    }
}

impl From<PyError> for PyErr {
    fn from(PyError(e): PyError) -> PyErr {
        Python::attach(|py| build(py, e).unwrap_or_else(|failed| failed))
    }
}

/// How [`build`] names a class: [`of`] for one of them.
type ClassOf = for<'py> fn(Python<'py>) -> Bound<'py, PyType>;

/// The class `T` as a Python type.
fn of<T: PyTypeInfo>(py: Python<'_>) -> Bound<'_, PyType> {
    T::type_object(py)
}

/// A field of an error as an attribute value.
fn v<'py>(py: Python<'py>, value: impl IntoPyObject<'py>) -> PyResult<Bound<'py, PyAny>> {
    value.into_bound_py_any(py)
}

/// The Python exception for `e`: its class, its message (the Rust error's), its fields.
pub fn to_py_err(e: Error) -> PyErr {
    PyError(e).into()
}

fn build(py: Python<'_>, e: Error) -> PyResult<PyErr> {
    let message = e.to_string();
    use class::*;
    let (class, attrs): (ClassOf, Vec<(&str, Bound<'_, PyAny>)>) = match e {
        Error::InvalidUrl { url, .. } => (of::<InvalidUrl>, vec![("url", v(py, url)?)]),
        Error::Connect { url, .. } => (of::<ConnectError>, vec![("url", v(py, url)?)]),
        Error::ConnectionLost(_) => (of::<ConnectionLost>, vec![]),
        Error::Timeout { method, after } => (
            of::<Timeout>,
            vec![
                ("method", v(py, method)?),
                ("after_s", v(py, after.as_secs_f64())?),
            ],
        ),
        Error::StartTimeout(after, detail) => (
            of::<StartTimeout>,
            vec![
                ("method", v(py, None::<String>)?),
                ("after_s", v(py, after.as_secs_f64())?),
                ("detail", v(py, detail)?),
            ],
        ),
        Error::Cdp {
            method,
            code,
            message,
        } => (
            of::<CdpError>,
            vec![
                ("method", v(py, method)?),
                ("code", v(py, code)?),
                ("cdp_message", v(py, message)?),
            ],
        ),
        Error::NoPage(_) => (of::<NoPage>, vec![]),
        Error::NotActive(task) => (of::<NotActive>, vec![("task_id", v(py, task)?)]),
        Error::NoDialog => (of::<NoDialog>, vec![]),
        Error::UnknownDialog { id, .. } => (of::<UnknownDialog>, vec![("dialog_id", v(py, id)?)]),
        Error::AmbiguousDialog { count, .. } => {
            (of::<AmbiguousDialog>, vec![("count", v(py, count)?)])
        }
        Error::DialogAlreadyClosed { id, closed_by, .. } => (
            of::<DialogAlreadyClosed>,
            vec![
                ("dialog_id", v(py, id)?),
                ("closed_by", v(py, closed_by.as_str())?),
            ],
        ),
        Error::OrphanedDialog => (of::<OrphanedDialog>, vec![]),
        Error::PageUnresponsive => (of::<PageUnresponsive>, vec![]),
        Error::DialogInUnfollowedPage { target_ids } => (
            of::<DialogInUnfollowedPage>,
            vec![("target_ids", v(py, target_ids)?)],
        ),
        Error::AnswerAppliedToOtherDialog { named, received } => (
            of::<AnswerAppliedToOtherDialog>,
            vec![
                ("named", v(py, named)?),
                ("received", v(py, PyPendingDialog::new(py, &received)?)?),
            ],
        ),
        Error::DialogUnanswerable { id, frame_id } => (
            of::<DialogUnanswerable>,
            vec![("dialog_id", v(py, id)?), ("frame_id", v(py, frame_id)?)],
        ),
        Error::UnknownFrame(f) => (of::<UnknownFrame>, vec![("frame_id", v(py, f)?)]),
        Error::UnknownTarget(t) => (of::<UnknownTarget>, vec![("target_id", v(py, t)?)]),
        Error::Config {
            key,
            value,
            allowed,
        } => (
            of::<ConfigError>,
            vec![
                ("key", v(py, key)?),
                ("value", v(py, value)?),
                ("allowed", v(py, allowed)?),
            ],
        ),
        Error::InvalidConfig(_) => (of::<InvalidConfig>, vec![]),
        Error::InvalidArgument(_) => (of::<InvalidArgument>, vec![]),
        Error::Io(_) => (of::<IoError>, vec![]),
        Error::BlockedByDialog { dialog, method } => (
            of::<BlockedByDialog>,
            vec![
                ("dialog", v(py, PyPendingDialog::new(py, &dialog)?)?),
                ("method", v(py, method)?),
            ],
        ),
        Error::Refused {
            method,
            option,
            detail,
        } => (
            of::<SecurityPolicy>,
            vec![
                ("method", v(py, method)?),
                ("option", v(py, option)?),
                ("detail", v(py, detail)?),
            ],
        ),
        Error::TargetCrashed { method, what } => (
            of::<TargetCrashed>,
            vec![("method", v(py, method)?), ("what", v(py, what)?)],
        ),
        Error::UndecodableReply { method, .. } => {
            (of::<UndecodableReply>, vec![("method", v(py, method)?)])
        }
        Error::Cancelled(method) => (of::<Cancelled>, vec![("method", v(py, method)?)]),
        Error::NavigationFailed { url, error } => (
            of::<NavigationFailed>,
            vec![("url", v(py, url)?), ("error", v(py, error)?)],
        ),
        Error::NoDownload { waited } => (
            of::<NoDownload>,
            vec![("waited_s", v(py, waited.as_secs_f64())?)],
        ),
        Error::StartCancelled { task_id, during } => (
            of::<StartCancelled>,
            vec![("task_id", v(py, task_id)?), ("during", v(py, during)?)],
        ),
        Error::RegistryClosed(task) => (of::<RegistryClosed>, vec![("task_id", v(py, task)?)]),
        Error::HeldByHuman { task_id, since } => (
            of::<HeldByHuman>,
            vec![("task_id", v(py, task_id)?), ("since", v(py, since)?)],
        ),
        Error::CannotCapture(_) => (of::<CannotCapture>, vec![]),
        // A variant newer than this binding (`Error` is non-exhaustive):
        // `tests/test_errors.py` fails until it gets a class of its own.
        _ => (of::<CdpSupervisorError>, vec![]),
    };
    let exc = class(py).call1((message,))?;
    for (key, value) in attrs {
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
        let built = || -> PyResult<PyErr> {
            let exc = of::<class::UsedAfterFork>(py).call1((message,))?;
            exc.setattr("made_in_pid", made_in)?;
            exc.setattr("pid", now)?;
            Ok(PyErr::from_value(exc))
        };
        built().unwrap_or_else(|failed| failed)
    })
}

/// `InvalidArgument(message)`.
pub fn invalid_argument(message: impl Into<String>) -> PyErr {
    to_py_err(Error::InvalidArgument(message.into()))
}

/// The name of `e`'s variant, as its (derived) `Debug` begins.
fn variant_name(e: &Error) -> String {
    let debug = format!("{e:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_string()
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
) -> Vec<(String, Py<pyo3::exceptions::PyBaseException>)> {
    use std::time::Duration;

    use cdp_supervisor::ClosedBy;

    let d = || Box::new(dialog.get().inner.clone());
    let s = |v: &str| v.to_string();
    let samples = vec![
        Error::InvalidUrl {
            url: s("ftp://h/"),
            reason: s("unsupported scheme"),
        },
        Error::Connect {
            url: s("ws://127.0.0.1:9/"),
            reason: s("connection refused"),
        },
        Error::ConnectionLost(s("socket closed")),
        Error::Timeout {
            method: s("Page.reload"),
            after: Duration::from_millis(1500),
        },
        Error::Cdp {
            method: s("Nope.nothing"),
            code: -32601,
            message: s("'Nope.nothing' wasn't found"),
        },
        Error::StartTimeout(Duration::from_secs(2), s("Page.enable did not answer")),
        Error::NoPage(s("no page target")),
        Error::NotActive(s("task-1")),
        Error::NoDialog,
        Error::UnknownDialog {
            id: s("d-9"),
            known: s("d-1"),
        },
        Error::AmbiguousDialog {
            count: 2,
            pending: s("d-1, d-2"),
        },
        Error::DialogAlreadyClosed {
            id: s("d-1"),
            closed_by: ClosedBy::Remote,
            detail: s("No dialog is showing"),
        },
        Error::OrphanedDialog,
        Error::PageUnresponsive,
        Error::DialogInUnfollowedPage {
            target_ids: vec![s("T1"), s("T2")],
        },
        Error::AnswerAppliedToOtherDialog {
            named: s("d-0"),
            received: d(),
        },
        Error::DialogUnanswerable {
            id: s("d-1"),
            frame_id: Some(s("F1")),
        },
        Error::UnknownFrame(s("F9")),
        Error::UnknownTarget(s("T9")),
        Error::Config {
            key: s("browser.dialog_policy"),
            value: s("sometimes"),
            allowed: s("must_respond, auto_dismiss or auto_accept"),
        },
        Error::InvalidConfig(s("configuration file /x.toml does not exist")),
        Error::InvalidArgument(s("bad input")),
        Error::Io(s("cannot spawn a thread")),
        Error::BlockedByDialog {
            dialog: d(),
            method: s("Runtime.evaluate"),
        },
        Error::Refused {
            method: s("Browser.close"),
            option: s("security.cdp_deny"),
            detail: s("matches Browser.*"),
        },
        Error::TargetCrashed {
            what: s("the page"),
            method: s("Runtime.evaluate"),
        },
        Error::UndecodableReply {
            method: s("Runtime.evaluate"),
            reason: s("recursion limit exceeded"),
        },
        Error::Cancelled(s("Page.reload")),
        Error::NavigationFailed {
            url: s("http://x.invalid/"),
            error: s("net::ERR_NAME_NOT_RESOLVED"),
        },
        Error::NoDownload {
            waited: Duration::from_secs(2),
        },
        Error::StartCancelled {
            task_id: s("task-1"),
            during: s("connecting"),
        },
        Error::RegistryClosed(s("task-1")),
        Error::HeldByHuman {
            task_id: s("task-1"),
            since: 1_700_000_000.5,
        },
        Error::CannotCapture(s("a dialog is open (alert d-1)")),
    ];
    samples
        .into_iter()
        .map(|e| (variant_name(&e), to_py_err(e).into_value(py)))
        .collect()
}
