//! `Config` for Python: built from keyword arguments through the very path a TOML file takes
//! (`Config::from_toml` of a generated document), so validation and its messages are the
//! Rust crate's own, and every setting of `config/default.toml` is a keyword.

use std::fmt::Write as _;
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use cdp_supervisor::Config;
use cdp_supervisor::unversioned::quote::quoted;

use crate::convert::type_name;
use crate::errors::{invalid_argument, to_py_err};

/// Every keyword: (name, its `[section]` in `config/default.toml`).
pub const KEYS: &[(&str, &str)] = &[
    ("dialog_policy", "browser"),
    ("dialog_timeout_s", "browser"),
    ("dialog_bridge", "browser"),
    ("cdp_url", "browser"),
    ("chrome_path", "browser"),
    ("follow_popups", "browser"),
    ("capture_console", "browser"),
    ("chrome_args", "browser"),
    ("ca_file", "browser"),
    ("start_timeout_s", "supervisor"),
    ("call_timeout_s", "supervisor"),
    ("reconnect_attempts", "supervisor"),
    ("frame_tree_max_entries", "limits"),
    ("frame_tree_max_oopif_depth", "limits"),
    ("recent_dialogs_max", "limits"),
    ("console_errors_max", "limits"),
    ("max_message_bytes", "limits"),
    ("pending_dialogs_max", "limits"),
    ("pages_max", "limits"),
    ("watched_pages_max", "limits"),
    ("allow_file_urls", "security"),
    ("allow_file_access", "security"),
    ("allow_page_protocol", "security"),
    ("cdp_deny", "security"),
    ("cdp_allow", "security"),
    ("upload_dirs", "security"),
    ("dir", "downloads"),
    ("keep", "downloads"),
    ("isolate_tasks", "security"),
];

/// A TOML basic string.
fn toml_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A Python value as a TOML value: what a user would have written in the file, except inside a
/// list: an item that is itself a list (or a tuple, or a dict) is written empty (`[]`, `{}`).
/// Every list setting takes strings, and the crate refuses such an item by its kind alone
/// (`security.cdp_deny[0] is a list; expected ...`) without looking inside, so nothing is lost,
/// and the document costs what the top level costs: a value nested 100,000 deep (or a list
/// that contains itself) is never walked.
fn toml_value(out: &mut String, key: &str, v: &Bound<'_, PyAny>) -> PyResult<()> {
    let items: Vec<Bound<'_, PyAny>> = if let Ok(l) = v.cast::<PyList>() {
        l.iter().collect()
    } else if let Ok(t) = v.cast::<PyTuple>() {
        t.iter().collect()
    } else {
        return toml_scalar(out, key, v, true);
    };
    out.push('[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        toml_scalar(out, &format!("{key}[{i}]"), item, false)?;
    }
    out.push(']');
    Ok(())
}

/// A value that is no list (or, when `top` is false, a list item) as TOML; a list, tuple or dict
/// is written empty (see [`toml_value`]).
fn toml_scalar(out: &mut String, key: &str, v: &Bound<'_, PyAny>, top: bool) -> PyResult<()> {
    if let Ok(b) = v.cast::<PyBool>() {
        out.push_str(if b.is_true() { "true" } else { "false" });
    } else if v.cast::<PyInt>().is_ok() {
        let i: i64 = v
            .extract()
            .map_err(|_| invalid_argument(format!("{key}: the integer does not fit in 64 bits")))?;
        let _ = write!(out, "{i}");
    } else if let Ok(f) = v.cast::<PyFloat>() {
        let f = f.value();
        if f.is_nan() {
            out.push_str("nan");
        } else if f.is_infinite() {
            out.push_str(if f > 0.0 { "inf" } else { "-inf" });
        } else {
            let _ = write!(out, "{f:?}");
        }
    } else if let Ok(s) = v.cast::<PyString>() {
        toml_str(out, &s.to_cow()?);
    } else if !top && (v.cast::<PyList>().is_ok() || v.cast::<PyTuple>().is_ok()) {
        out.push_str("[]");
    } else if v.cast::<PyDict>().is_ok() {
        out.push_str("{}");
    } else if let Ok(p) = v.extract::<PathBuf>() {
        toml_str(out, &p.to_string_lossy());
    } else {
        return Err(invalid_argument(format!(
            "{key}: a {} cannot be a configuration value (use str, int, float, bool or a list of str)",
            type_name(v)
        )));
    }
    Ok(())
}

/// The TOML document that sets what `kwargs` names.
pub fn toml_of(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<String> {
    let mut sections: Vec<(&str, String)> = Vec::new();
    if let Some(kwargs) = kwargs {
        for (k, v) in kwargs.iter() {
            let key: String = k.extract()?;
            let Some((name, section)) = KEYS.iter().find(|(n, _)| *n == key) else {
                return Err(invalid_argument(format!(
                    "unknown configuration keyword {}: allowed are {}",
                    quoted(&key),
                    KEYS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                )));
            };
            if v.is_none() {
                continue;
            }
            let mut line = String::new();
            let _ = write!(line, "{name} = ");
            toml_value(&mut line, name, &v)?;
            line.push('\n');
            match sections.iter_mut().find(|(s, _)| s == section) {
                Some((_, body)) => body.push_str(&line),
                None => sections.push((section, line)),
            }
        }
    }
    let mut doc = String::new();
    for (section, body) in sections {
        let _ = writeln!(doc, "[{section}]\n{body}");
    }
    Ok(doc)
}

/// Settings for a registry; see `_native.pyi`.
#[pyclass(name = "Config", module = "cdp_supervisor", frozen)]
#[derive(Clone)]
pub struct PyConfig {
    pub inner: Config,
}

#[pymethods]
impl PyConfig {
    /// The shipped defaults with the settings named by keyword (`Config(dialog_policy=...)`).
    #[new]
    #[pyo3(signature = (**kwargs))]
    fn new(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let doc = toml_of(kwargs)?;
        Config::from_toml(&doc)
            .map(|inner| PyConfig { inner })
            .map_err(to_py_err)
    }

    /// The defaults, then `path` (or `$CDP_SUPERVISOR_CONFIG`), then the `CDP_SUPERVISOR__*`
    /// environment: what the command-line tool reads.
    #[staticmethod]
    #[pyo3(signature = (path=None))]
    fn load(path: Option<PathBuf>) -> PyResult<Self> {
        Config::load(path.as_deref())
            .map(|inner| PyConfig { inner })
            .map_err(to_py_err)
    }

    /// The defaults with a TOML document over them.
    #[staticmethod]
    fn from_toml(toml: String) -> PyResult<Self> {
        Config::from_toml(&toml)
            .map(|inner| PyConfig { inner })
            .map_err(to_py_err)
    }

    #[getter]
    fn dialog_policy(&self) -> &'static str {
        self.inner.dialog_policy.as_str()
    }

    #[getter]
    fn dialog_timeout_s(&self) -> f64 {
        self.inner.dialog_timeout.as_secs_f64()
    }

    #[getter]
    fn dialog_bridge(&self) -> &'static str {
        self.inner.dialog_bridge.as_str()
    }

    #[getter]
    fn cdp_url(&self) -> Option<String> {
        self.inner
            .cdp_url
            .as_deref()
            .map(cdp_supervisor::redact_url)
    }

    #[getter]
    fn follow_popups(&self) -> bool {
        self.inner.follow_popups
    }

    #[getter]
    fn capture_console(&self) -> bool {
        self.inner.capture_console
    }

    #[getter]
    fn chrome_args(&self) -> Vec<String> {
        self.inner.chrome_args.clone()
    }

    #[getter]
    fn start_timeout_s(&self) -> f64 {
        self.inner.start_timeout.as_secs_f64()
    }

    #[getter]
    fn call_timeout_s(&self) -> f64 {
        self.inner.call_timeout.as_secs_f64()
    }

    #[getter]
    fn reconnect_attempts(&self) -> u32 {
        self.inner.reconnect_attempts
    }

    #[getter]
    fn allow_file_urls(&self) -> bool {
        self.inner.security.allow_file_urls
    }

    #[getter]
    fn allow_file_access(&self) -> bool {
        self.inner.security.allow_file_access
    }

    #[getter]
    fn allow_page_protocol(&self) -> bool {
        self.inner.security.allow_page_protocol
    }

    #[getter]
    fn cdp_deny(&self) -> Vec<String> {
        self.inner.security.cdp_deny.clone()
    }

    #[getter]
    fn cdp_allow(&self) -> Vec<String> {
        self.inner.security.cdp_allow.clone()
    }

    /// `security.upload_dirs`.
    #[getter]
    fn upload_dirs(&self) -> Vec<PathBuf> {
        self.inner.security.upload_dirs.clone()
    }

    /// `downloads.dir` (`None`: the system temp directory).
    #[getter]
    fn downloads_dir(&self) -> Option<PathBuf> {
        self.inner.downloads.dir.clone()
    }

    /// `downloads.keep`.
    #[getter]
    fn keep_downloads(&self) -> bool {
        self.inner.downloads.keep
    }

    /// `security.isolate_tasks`.
    #[getter]
    fn isolate_tasks(&self) -> bool {
        self.inner.security.isolate_tasks
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyConfig>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __repr__(&self) -> String {
        format!(
            "Config(dialog_policy={:?}, dialog_timeout_s={}, dialog_bridge={:?}, start_timeout_s={}, call_timeout_s={})",
            self.inner.dialog_policy.as_str(),
            self.inner.dialog_timeout.as_secs_f64(),
            self.inner.dialog_bridge.as_str(),
            self.inner.start_timeout.as_secs_f64(),
            self.inner.call_timeout.as_secs_f64()
        )
    }
}
