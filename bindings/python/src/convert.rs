//! JSON values between Rust (`serde_json::Value`) and Python (`dict`, `list`, `str`, `int`,
//! `float`, `bool`, `None`), for CDP parameters and results. Both ways are recursive, and both
//! stop at a depth bound with a `ValueError` (issue 28 item 7): a caller's value nested 100,000
//! deep, or a list that contains itself, never overflows the stack.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

use cdp_supervisor::unversioned::quote::clipped;

/// Deeper Python values are refused (CDP replies nest at most 128 levels too).
const MAX_DEPTH: usize = 128;

/// Deeper JSON values are not turned into Python objects. The crate's values are at most 128
/// deep (its JSON decoder's limit, [`from_py`]'s) plus the few levels of a tool result around a
/// reply: this bound is never reached by them, only by a value built to overflow.
const MAX_DEPTH_TO_PY: usize = 2 * MAX_DEPTH;

/// A JSON value as a new Python object.
pub fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    to_py_at(py, v, 0)
}

fn to_py_at<'py>(py: Python<'py>, v: &Value, depth: usize) -> PyResult<Bound<'py, PyAny>> {
    if depth > MAX_DEPTH_TO_PY {
        return Err(PyValueError::new_err(format!(
            "the value nests deeper than {MAX_DEPTH_TO_PY} levels"
        )));
    }
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py_at(py, item, depth + 1)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, item) in map {
                dict.set_item(k, to_py_at(py, item, depth + 1)?)?;
            }
            dict.into_any()
        }
    })
}

/// A Python value as JSON: `None`, `bool`, `int` (64-bit), finite `float`, `str`, `list` or
/// `tuple`, and `dict` with `str` keys; anything else is a `TypeError` naming what it got.
pub fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    from_py_at(obj, 0)
}

fn from_py_at(obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "the value nests deeper than {MAX_DEPTH} levels"
        )));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.cast::<PyInt>().is_ok() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Err(PyValueError::new_err(
            "an integer does not fit in 64 bits (JSON numbers here are 64-bit)",
        ));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let f = f.value();
        return Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err(format!("{f} is not a JSON number")));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            let Ok(key) = k.cast::<PyString>() else {
                return Err(PyTypeError::new_err(format!(
                    "JSON object keys must be str, got {}",
                    type_name(&k)
                )));
            };
            map.insert(key.to_cow()?.into_owned(), from_py_at(&v, depth + 1)?);
        }
        return Ok(Value::Object(map));
    }
    if let Some(items) = items(obj) {
        return items
            .iter()
            .map(|v| from_py_at(v, depth + 1))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array);
    }
    Err(PyTypeError::new_err(format!(
        "{} cannot be sent as JSON (use dict, list, str, int, float, bool or None)",
        type_name(obj)
    )))
}

/// The items of a `list` or `tuple` (`None` for anything else).
pub fn items<'py>(obj: &Bound<'py, PyAny>) -> Option<Vec<Bound<'py, PyAny>>> {
    if let Ok(l) = obj.cast::<PyList>() {
        Some(l.iter().collect())
    } else {
        obj.cast::<PyTuple>().ok().map(|t| t.iter().collect())
    }
}

/// The Python type name of `obj`, for error messages (a class may have any name: clipped as
/// every value a message shows, [`cdp_supervisor::unversioned::quote`]).
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| clipped(&n.to_cow().unwrap_or_default()).to_string())
        .unwrap_or_else(|_| "?".into())
}
