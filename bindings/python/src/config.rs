//! `Config` for Python: each keyword argument becomes a [`SettingValue`] and goes through
//! [`Config::set`], the path every value of a configuration file takes, so validation and its
//! messages are the Rust crate's own, and every setting of `config/default.toml` is a keyword.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString};

use cdp_supervisor::unversioned::quote::quoted;
use cdp_supervisor::{Config, SETTING_KEYS, SettingValue};

use crate::convert::{items, type_name};
use crate::errors::{invalid_argument, to_py_err};

/// Every setting that is a keyword: each of [`SETTING_KEYS`] but the `[mcp]` ones (the MCP
/// server's, which the binding does not have). The keyword is the part after the dot.
fn keys() -> impl Iterator<Item = &'static str> {
    SETTING_KEYS
        .iter()
        .copied()
        .filter(|k| !k.starts_with("mcp."))
}

/// The keyword of a key (`limits.pages_max` -> `pages_max`).
fn keyword(key: &str) -> &str {
    key.rsplit('.').next().unwrap_or(key)
}

/// The keywords, in the order of [`keys`].
pub fn keywords() -> Vec<&'static str> {
    keys().map(keyword).collect()
}

/// A Python value as a [`SettingValue`]. A list (or tuple) holds its items, each converted with
/// `top` false: an item that is itself a list, tuple or dict keeps nothing of its contents.
/// Every list setting takes strings, and the crate refuses such an item by its kind alone
/// (`security.cdp_deny[0] is a list; expected ...`) without looking inside, so nothing is lost,
/// and a value nested 100,000 deep (or a list that contains itself) is never walked.
fn setting_value(key: &str, v: &Bound<'_, PyAny>, top: bool) -> PyResult<SettingValue> {
    Ok(if let Some(items) = items(v) {
        if !top {
            return Ok(SettingValue::List(Vec::new()));
        }
        let items = items
            .iter()
            .enumerate()
            .map(|(i, item)| setting_value(&format!("{key}[{i}]"), item, false))
            .collect::<PyResult<_>>()?;
        SettingValue::List(items)
    } else if let Ok(b) = v.cast::<PyBool>() {
        SettingValue::Bool(b.is_true())
    } else if v.cast::<PyInt>().is_ok() {
        let i: i64 = v
            .extract()
            .map_err(|_| invalid_argument(format!("{key}: the integer does not fit in 64 bits")))?;
        SettingValue::Int(i.into())
    } else if let Ok(f) = v.cast::<PyFloat>() {
        SettingValue::Float(f.value())
    } else if let Ok(s) = v.cast::<PyString>() {
        SettingValue::Text(s.to_cow()?.into_owned())
    } else if v.cast::<PyDict>().is_ok() {
        SettingValue::Table
    } else if let Ok(p) = v.extract::<PathBuf>() {
        SettingValue::Text(p.to_string_lossy().into_owned())
    } else {
        return Err(invalid_argument(format!(
            "{key}: a {} cannot be a configuration value (use str, int, float, bool or a list of str)",
            type_name(v)
        )));
    })
}

/// The shipped defaults with the settings `kwargs` names. Every keyword is converted first (an
/// unknown one, or a value of no configuration kind, is an `InvalidArgument`); then the
/// settings are set in the order a configuration file is read, so the first invalid one is the
/// one a file would report.
fn config_of(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Config> {
    let mut given: Vec<(&str, SettingValue)> = Vec::new();
    for (k, v) in kwargs.into_iter().flat_map(|d| d.iter()) {
        let name: String = k.extract()?;
        let Some(key) = keys().find(|key| keyword(key) == name) else {
            return Err(invalid_argument(format!(
                "unknown configuration keyword {}: allowed are {}",
                quoted(&name),
                keywords().join(", ")
            )));
        };
        if !v.is_none() {
            given.push((key, setting_value(keyword(key), &v, true)?));
        }
    }
    given.sort_by_key(|(key, _)| SETTING_KEYS.iter().position(|k| k == key));
    let mut config = Config::default();
    for (key, value) in given {
        config.set(key, value).map_err(to_py_err)?;
    }
    Ok(config)
}

/// Settings for a registry; see `_native.pyi`.
#[pyclass(name = "Config", module = "cdp_supervisor", frozen)]
#[derive(Clone)]
pub struct PyConfig {
    pub inner: Config,
}

/// `Config`'s methods: each getter `name -> Type: |c| value` reads the inner [`Config`] `c`;
/// the methods in braces are written out.
macro_rules! config_methods {
    ($class:ident: $($(#[doc = $doc:literal])* $name:ident -> $ty:ty: |$c:ident| $value:expr;)* { $($methods:tt)* }) => {
        #[pymethods]
        impl $class {
            $(
                $(#[doc = $doc])*
                #[getter]
                fn $name(&self) -> $ty {
                    let $c = &self.inner;
                    $value
                }
            )*
            $($methods)*
        }
    };
}

config_methods! {
    PyConfig:
    dialog_policy -> &'static str: |c| c.dialog_policy().as_str();
    dialog_timeout_s -> f64: |c| c.dialog_timeout().as_secs_f64();
    dialog_bridge -> &'static str: |c| c.dialog_bridge().as_str();
    cdp_url -> Option<String>: |c| c.cdp_url().map(cdp_supervisor::redact_url);
    follow_popups -> bool: |c| c.follow_popups();
    capture_console -> bool: |c| c.capture_console();
    chrome_args -> Vec<String>: |c| c.chrome_args().to_vec();
    start_timeout_s -> f64: |c| c.start_timeout().as_secs_f64();
    call_timeout_s -> f64: |c| c.call_timeout().as_secs_f64();
    reconnect_attempts -> u32: |c| c.reconnect_attempts();
    allow_file_urls -> bool: |c| c.security().allow_file_urls;
    allow_file_access -> bool: |c| c.security().allow_file_access;
    allow_page_protocol -> bool: |c| c.security().allow_page_protocol;
    cdp_deny -> Vec<String>: |c| c.security().cdp_deny.clone();
    cdp_allow -> Vec<String>: |c| c.security().cdp_allow.clone();
    /// `security.upload_dirs`.
    upload_dirs -> Vec<PathBuf>: |c| c.security().upload_dirs.clone();
    /// `downloads.dir` (`None`: the system temp directory).
    downloads_dir -> Option<PathBuf>: |c| c.downloads().dir.clone();
    /// `downloads.keep`.
    keep_downloads -> bool: |c| c.downloads().keep;
    /// `security.isolate_tasks`.
    isolate_tasks -> bool: |c| c.security().isolate_tasks;
    {
        /// The shipped defaults with the settings named by keyword (`Config(dialog_policy=...)`).
        #[new]
        #[pyo3(signature = (**kwargs))]
        fn new(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
            config_of(kwargs).map(|inner| PyConfig { inner })
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

        fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
            other
                .cast::<PyConfig>()
                .is_ok_and(|o| o.get().inner == self.inner)
        }

        fn __repr__(&self) -> String {
            format!(
                "Config(dialog_policy={:?}, dialog_timeout_s={}, dialog_bridge={:?}, start_timeout_s={}, call_timeout_s={})",
                self.inner.dialog_policy().as_str(),
                self.inner.dialog_timeout().as_secs_f64(),
                self.inner.dialog_bridge().as_str(),
                self.inner.start_timeout().as_secs_f64(),
                self.inner.call_timeout().as_secs_f64()
            )
        }
    }
}
