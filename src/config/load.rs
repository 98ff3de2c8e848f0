//! Reading a [`Config`]: `config/default.toml` (compiled in), then an optional user file, then
//! `CDP_SUPERVISOR__SECTION__KEY` environment overrides, through the `config` crate, and every
//! value validated on the way (an invalid one is an [`Error::Config`] naming the key, the value
//! and what is allowed; a file that is missing or not TOML is an [`Error::InvalidConfig`]).
//!
//! Each key of [`SETTING_KEYS`] is handed, as a [`SettingValue`], to [`Config::set`]
//! (`settings.rs`), which reads and checks it as every other giver's value is.

use std::path::{Path, PathBuf};

use config::ValueKind;

use super::Config;
use super::rules::invalid_as;
use super::settings::{SETTING_KEYS, SettingValue};
use crate::error::Error;
use crate::quote::clipped;

/// The shipped defaults, documented line by line in the file itself.
const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

/// The sections of the configuration: each must be a table.
const SECTIONS: &[&str] = &[
    "browser",
    "supervisor",
    "limits",
    "security",
    "downloads",
    "endpoint",
    "mcp",
];

impl Config {
    /// Loads `config/default.toml`, then `path` (or `$CDP_SUPERVISOR_CONFIG`) if given, then the
    /// `CDP_SUPERVISOR__*` environment, and validates every value.
    pub fn load(path: Option<&Path>) -> Result<Config, Error> {
        let env_path = std::env::var_os("CDP_SUPERVISOR_CONFIG").map(PathBuf::from);
        let user = path.map(Path::to_path_buf).or(env_path);
        let mut builder = config::Config::builder().add_source(config::File::from_str(
            DEFAULT_TOML,
            config::FileFormat::Toml,
        ));
        if let Some(p) = &user {
            if !p.is_file() {
                return Err(Error::InvalidConfig(format!(
                    "configuration file {} does not exist",
                    p.display()
                )));
            }
            builder = builder
                .add_source(config::File::from(p.as_path()).format(config::FileFormat::Toml));
        }
        builder = builder.add_source(
            config::Environment::with_prefix("CDP_SUPERVISOR")
                .prefix_separator("__")
                .separator("__"),
        );
        let c = builder.build().map_err(unreadable)?;
        Self::from_source(&c)
    }

    /// Loads from a TOML string layered over the defaults (no file, no environment).
    pub fn from_toml(toml: &str) -> Result<Config, Error> {
        let c = config::Config::builder()
            .add_source(config::File::from_str(
                DEFAULT_TOML,
                config::FileFormat::Toml,
            ))
            .add_source(config::File::from_str(toml, config::FileFormat::Toml))
            .build()
            .map_err(unreadable)?;
        Self::from_source(&c)
    }

    fn from_source(c: &config::Config) -> Result<Config, Error> {
        for section in SECTIONS {
            if let Some(value) = get(c, section)?
                && value != SettingValue::Table
            {
                return Err(invalid_as(section, value.shown(), "a table of settings"));
            }
        }
        let mut cfg = Config::default();
        for key in SETTING_KEYS {
            if let Some(value) = get(c, key)? {
                cfg.set(key, value)?;
            }
        }
        Ok(cfg)
    }
}

/// The longest line of the `config` crate's own error (a TOML error quotes the source line)
/// that is shown whole; a longer one is clipped ([`crate::quote::clipped`]).
const ERROR_LINE_MAX: usize = 120;

/// The layers could not be read as a whole (TOML syntax, a file that cannot be read). The
/// parser's message quotes the offending source line, which may be as long as the file: every
/// line of it is kept short, and at most 8 of them.
fn unreadable(e: config::ConfigError) -> Error {
    let text = e.to_string();
    let long = |line: &str| line.chars().nth(ERROR_LINE_MAX).is_some();
    let clipping = text.lines().any(long);
    let shown: Vec<String> = text
        .lines()
        .take(8)
        .filter_map(|line| {
            if clipping && line.trim_start_matches([' ', '|']).starts_with('^') {
                // The marker under a clipped source line would point past what is shown.
                None
            } else if long(line) {
                Some(clipped(line).to_string())
            } else {
                Some(line.to_string())
            }
        })
        .collect();
    let shown = shown.join("\n");
    Error::InvalidConfig(format!("cannot read configuration: {shown}"))
}

/// One key's value as the layers give it: `None` when absent or empty.
fn get(c: &config::Config, key: &str) -> Result<Option<SettingValue>, Error> {
    match c.get::<config::Value>(key) {
        Ok(v) => Ok(setting_value(v.kind, true)),
        Err(config::ConfigError::NotFound(_)) => Ok(None),
        Err(e) => Err(Error::InvalidConfig(format!(
            "cannot read {key}: {}",
            clipped(&e.to_string())
        ))),
    }
}

/// A value of the `config` crate as a [`SettingValue`] (`None`: empty). The items of a list
/// (`top`) are converted one level deep: an item that is a list keeps none of its items,
/// which are never read (a list item must be a string).
fn setting_value(kind: ValueKind, top: bool) -> Option<SettingValue> {
    Some(match kind {
        ValueKind::Nil => return None,
        ValueKind::Boolean(b) => SettingValue::Bool(b),
        ValueKind::I64(n) => SettingValue::Int(n.into()),
        ValueKind::I128(n) => SettingValue::Int(n),
        ValueKind::U64(n) => SettingValue::Int(n.into()),
        ValueKind::U128(n) => SettingValue::Int(i128::try_from(n).unwrap_or(i128::MAX)),
        ValueKind::Float(f) => SettingValue::Float(f),
        ValueKind::String(s) => SettingValue::Text(s),
        ValueKind::Table(_) => SettingValue::Table,
        ValueKind::Array(items) if top => SettingValue::List(
            items
                .into_iter()
                .map(|v| setting_value(v.kind, false).unwrap_or(SettingValue::Text(String::new())))
                .collect(),
        ),
        ValueKind::Array(_) => SettingValue::List(Vec::new()),
    })
}
