//! The rules every setting shares, wherever it is given (the configuration file, a task's
//! override, a tool's or the Python binding's argument): the one rule of a number of seconds,
//! and the one shape of an invalid value's error ([`Error::Config`], the value shown through
//! [`crate::quote`]: a message never grows with what it was given).

use std::time::Duration;

use crate::error::Error;
use crate::quote::{clipped, quoted};

/// The one rule of every setting in seconds, wherever it is given (the configuration file, a
/// task's override, a tool's or the Python binding's argument): more than zero and at most
/// `max`. `key` names the setting as its giver spelled it (`browser.dialog_timeout_s`,
/// `dialog_timeout_s`); the error is an [`Error::Config`] with the value as given.
pub fn seconds_setting(key: &str, secs: f64, max: Duration) -> Result<Duration, Error> {
    positive_seconds(secs, max).ok_or_else(|| {
        invalid_as(
            key,
            clipped(&secs.to_string()).to_string(),
            &seconds_allowed(max),
        )
    })
}

/// [`seconds_setting`] for a value given as a [`Duration`] ([`Duration::MAX`] as `max`: no upper
/// bound).
pub fn check_seconds(key: &str, d: Duration, max: Duration) -> Result<Duration, Error> {
    if d.is_zero() || d > max {
        let shown = clipped(&d.as_secs_f64().to_string()).to_string();
        return Err(invalid_as(key, shown, &seconds_allowed(max)));
    }
    Ok(d)
}

/// `secs` as a duration when it is more than zero and at most `max` (never for NaN).
pub(super) fn positive_seconds(secs: f64, max: Duration) -> Option<Duration> {
    if secs > 0.0 && secs <= max.as_secs_f64() {
        Duration::try_from_secs_f64(secs).ok()
    } else {
        None
    }
}

/// What [`seconds_setting`] allows, for its error.
pub(super) fn seconds_allowed(max: Duration) -> String {
    if max == Duration::MAX {
        "a number of seconds > 0".into()
    } else {
        format!("a number of seconds > 0 and <= {}", max.as_secs())
    }
}

/// The error for a setting's invalid string value (shown quoted and clipped: [`crate::quote`]).
pub(super) fn invalid(key: &str, value: &str, allowed: &str) -> Error {
    invalid_as(key, quoted(value).to_string(), allowed)
}

/// The error for a setting's invalid value, shown as `shown` (a number as written, a kind).
pub(super) fn invalid_as(key: &str, shown: String, allowed: &str) -> Error {
    let (key, allowed) = (key.to_string(), allowed.to_string());
    Error::Config {
        key,
        value: shown,
        allowed,
    }
}
