//! One setting by its key: [`Config::set`] takes a [`SettingValue`] (what a configuration file,
//! the environment or the Python binding gave) for a key of the file (`browser.dialog_policy`)
//! and validates it. It is the one validation path: `load.rs` reads each key of the layers
//! through it, the Python binding its keyword arguments, and the typed `with_*` setters
//! (`setters.rs`) the values they are given, so one value gives one message wherever it came
//! from.
//!
//! Each setting is read by the kind it must have, and a value of another kind is refused by its
//! kind first: a text setting takes a string; a number takes a number (or, from the
//! environment, a string that reads as one); a switch takes a boolean (or `"true"`/`"false"`);
//! a list takes a list of strings (or a comma-separated string), each item checked in turn. A
//! list or table where it does not belong is named by its kind and position, never shown
//! (`security.cdp_deny[0] is a list; expected a CDP method pattern such as "Browser.close", …`),
//! so a value nested 10,000 deep costs what a flat one costs, and a value that is shown is
//! shown through [`crate::quote`]: no message grows with what it was given.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::rules::{invalid, invalid_as, positive_seconds, seconds_allowed};
use super::{
    BridgeMode, Config, DialogPolicy, MAX_CALL_TIMEOUT, MAX_DIALOG_TIMEOUT, MAX_HTTP_HEAD_TIMEOUT,
    MAX_START_TIMEOUT, endpoint,
};
use crate::error::Error;
use crate::quote::{clipped, quoted};

/// A setting's value as its giver wrote it, before it is checked. A list holds its items; an
/// item that is itself a list or a table is refused by its kind alone, so a giver may leave
/// such an item's contents out (`List(vec![])`, `Table`) and should: they are never read.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SettingValue {
    /// A string (from the environment, also a number or switch written as text).
    Text(String),
    /// A whole number.
    Int(i128),
    /// A floating-point number.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A list.
    List(Vec<SettingValue>),
    /// A table (never a setting's value: refused by its kind).
    Table,
}

impl SettingValue {
    /// The value as an error shows it: a string quoted and clipped, a number or boolean as
    /// written, a list or table by its kind alone (never its contents, which may nest without
    /// end).
    pub(super) fn shown(&self) -> String {
        match self {
            SettingValue::Bool(b) => b.to_string(),
            SettingValue::Int(n) => n.to_string(),
            SettingValue::Float(f) => clipped(&format!("{f:?}")).to_string(),
            SettingValue::Text(s) => quoted(s).to_string(),
            SettingValue::Table => "a table".into(),
            SettingValue::List(_) => "a list".into(),
        }
    }
}

/// Every key [`Config::set`] takes, in the order a configuration is read (the first invalid
/// one is the one reported).
pub const SETTING_KEYS: &[&str] = &[
    "browser.dialog_policy",
    "browser.dialog_timeout_s",
    "browser.dialog_bridge",
    "browser.cdp_url",
    "browser.chrome_path",
    "browser.follow_popups",
    "browser.capture_console",
    "browser.chrome_args",
    "browser.ca_file",
    "supervisor.start_timeout_s",
    "supervisor.call_timeout_s",
    "supervisor.reconnect_attempts",
    "limits.frame_tree_max_entries",
    "limits.frame_tree_max_oopif_depth",
    "limits.recent_dialogs_max",
    "limits.console_errors_max",
    "limits.max_message_bytes",
    "limits.pending_dialogs_max",
    "limits.pages_max",
    "limits.watched_pages_max",
    "security.allow_file_urls",
    "security.allow_file_access",
    "security.allow_page_protocol",
    "security.isolate_tasks",
    "security.cdp_deny",
    "security.cdp_allow",
    "security.upload_dirs",
    "downloads.dir",
    "downloads.keep",
    "endpoint.listen",
    "endpoint.all_targets",
    "endpoint.allowed_origins",
    "mcp.allowed_hosts",
    "mcp.http_head_timeout_s",
    "mcp.http_max_new_connections",
    "mcp.http_max_listen_streams",
];

/// What `browser.cdp_url` takes.
const CDP_URL: &str = "empty (launch a local browser) or a ws://, wss:// or http:// URL";
/// What `browser.ca_file` takes.
const CA_FILE: &str = "empty, or the path of an existing PEM file of CA certificates";
/// What `browser.chrome_path` takes.
const CHROME_PATH: &str = "empty, or the path of a Chrome or Chromium executable";
/// What a switch takes.
const SWITCH: &str = "true or false";
/// What `downloads.dir` takes.
const DOWNLOADS_DIR: &str = "empty (the system temp directory) or an absolute directory path";

/// The bounds of a whole-number setting (both ends allowed), by key.
pub(super) fn uint_bounds(key: &str) -> Option<(u64, u64)> {
    Some(match key {
        "supervisor.reconnect_attempts" => (0, 100),
        "limits.frame_tree_max_entries" => (1, 10_000),
        "limits.frame_tree_max_oopif_depth" => (0, 64),
        "limits.recent_dialogs_max" => (1, 10_000),
        "limits.console_errors_max" => (1, 100_000),
        "limits.max_message_bytes" => (1024, 1 << 30),
        "limits.pending_dialogs_max" => (1, 1_000),
        "limits.pages_max" => (0, 1_000),
        "limits.watched_pages_max" => (0, 10_000),
        "mcp.http_max_new_connections" => (1, 4096),
        // 64: the server's cap on listen streams over every transport (`mcp/engine/listen.rs`).
        "mcp.http_max_listen_streams" => (1, 64),
        _ => return None,
    })
}

/// The longest value of a setting in seconds, by key.
pub(super) fn seconds_max(key: &str) -> Option<Duration> {
    Some(match key {
        "browser.dialog_timeout_s" => MAX_DIALOG_TIMEOUT,
        "supervisor.start_timeout_s" => MAX_START_TIMEOUT,
        "supervisor.call_timeout_s" => MAX_CALL_TIMEOUT,
        "mcp.http_head_timeout_s" => MAX_HTTP_HEAD_TIMEOUT,
        _ => return None,
    })
}

impl Config {
    /// Sets the setting `key` (as the configuration file names it: `limits.pages_max`) to
    /// `value`, checked as the file's value would be: an invalid one is an [`Error::Config`]
    /// naming the key, the value and what is allowed, and changes nothing. An unknown key is an
    /// [`Error::InvalidArgument`]. [`SETTING_KEYS`] lists the keys.
    pub fn set(&mut self, key: &str, value: SettingValue) -> Result<(), Error> {
        if let Some(max) = seconds_max(key) {
            let d = seconds(key, &value, max)?;
            self.set_seconds(key, d);
            return Ok(());
        }
        if let Some((min, max)) = uint_bounds(key) {
            let n = uint(key, &value, min, max)?;
            self.set_uint(key, n);
            return Ok(());
        }
        match key {
            "browser.dialog_policy" => {
                let s = text(key, value, DialogPolicy::ALLOWED)?;
                self.dialog_policy = DialogPolicy::parse(s.trim())?;
            }
            "browser.dialog_bridge" => {
                let s = text(key, value, BridgeMode::ALLOWED)?;
                self.dialog_bridge = BridgeMode::parse(s.trim())?;
            }
            "browser.cdp_url" => self.cdp_url = checked_cdp_url(text(key, value, CDP_URL)?)?,
            "browser.chrome_path" => self.chrome_path = non_empty(text(key, value, CHROME_PATH)?),
            "browser.follow_popups" => self.follow_popups = switch(key, &value)?,
            "browser.capture_console" => self.capture_console = switch(key, &value)?,
            "browser.chrome_args" => self.chrome_args = chrome_args(key, value)?,
            "browser.ca_file" => {
                let p = non_empty(text(key, value, CA_FILE)?).map(PathBuf::from);
                self.ca_file = checked_ca_file(p)?;
            }
            "security.allow_file_urls" => self.security.allow_file_urls = switch(key, &value)?,
            "security.allow_file_access" => self.security.allow_file_access = switch(key, &value)?,
            "security.allow_page_protocol" => {
                self.security.allow_page_protocol = switch(key, &value)?
            }
            "security.isolate_tasks" => self.security.isolate_tasks = switch(key, &value)?,
            "security.cdp_deny" => self.security.cdp_deny = patterns(key, value)?,
            "security.cdp_allow" => self.security.cdp_allow = patterns(key, value)?,
            "security.upload_dirs" => self.security.upload_dirs = dirs(key, value)?,
            "downloads.dir" => {
                let d = non_empty(text(key, value, DOWNLOADS_DIR)?).map(PathBuf::from);
                self.downloads.dir = checked_downloads_dir(d)?;
            }
            "downloads.keep" => self.downloads.keep = switch(key, &value)?,
            "endpoint.listen" => {
                let s = text(key, value, endpoint::LISTEN)?;
                self.endpoint.listen = endpoint::checked_listen(&s)?;
            }
            "endpoint.all_targets" => self.endpoint.all_targets = switch(key, &value)?,
            "endpoint.allowed_origins" => {
                let rule = ListRule {
                    list: endpoint::ORIGINS,
                    item: endpoint::ORIGIN,
                    env_words: false,
                };
                self.endpoint.allowed_origins = list(key, value, &rule, endpoint::checked_origin)?;
            }
            "mcp.allowed_hosts" => self.allowed_hosts = hosts(key, value)?,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "unknown setting {}",
                    quoted(key)
                )));
            }
        }
        Ok(())
    }

    /// Stores a checked number of seconds for `key` (one of [`seconds_max`]'s).
    fn set_seconds(&mut self, key: &str, d: Duration) {
        match key {
            "browser.dialog_timeout_s" => self.dialog_timeout = d,
            "supervisor.start_timeout_s" => self.start_timeout = d,
            "supervisor.call_timeout_s" => self.call_timeout = d,
            _ => self.http_head_timeout = d,
        }
    }

    /// Stores a checked whole number for `key` (one of [`uint_bounds`]'s).
    fn set_uint(&mut self, key: &str, n: u64) {
        // Every bound fits a u32.
        let n = n as usize;
        let l = &mut self.limits;
        match key {
            "supervisor.reconnect_attempts" => self.reconnect_attempts = n as u32,
            "limits.frame_tree_max_entries" => l.frame_tree_max_entries = n,
            "limits.frame_tree_max_oopif_depth" => l.frame_tree_max_oopif_depth = n,
            "limits.recent_dialogs_max" => l.recent_dialogs_max = n,
            "limits.console_errors_max" => l.console_errors_max = n,
            "limits.max_message_bytes" => l.max_message_bytes = n,
            "limits.pending_dialogs_max" => l.pending_dialogs_max = n,
            "limits.pages_max" => l.pages_max = n,
            "limits.watched_pages_max" => l.watched_pages_max = n,
            "mcp.http_max_new_connections" => self.http_max_new_connections = n,
            _ => self.http_max_listen_streams = n,
        }
    }
}

/// The error for `key` holding a value of a kind it does not take.
fn wrong_kind(key: &str, value: &SettingValue, expected: &str) -> Error {
    invalid_as(key, value.shown(), expected)
}

/// A text setting: a string; any other kind is refused (`expected` says what it takes).
fn text(key: &str, value: SettingValue, expected: &str) -> Result<String, Error> {
    match value {
        SettingValue::Text(s) => Ok(s),
        other => Err(wrong_kind(key, &other, expected)),
    }
}

/// A number of seconds, under the one rule of such settings (see [`super::seconds_setting`]);
/// an error shows the value as it was written.
fn seconds(key: &str, value: &SettingValue, max: Duration) -> Result<Duration, Error> {
    let secs = match value {
        SettingValue::Text(s) => s.trim().parse::<f64>().ok(),
        SettingValue::Int(n) => Some(*n as f64),
        SettingValue::Float(f) => Some(*f),
        _ => None,
    };
    secs.and_then(|v| positive_seconds(v, max))
        .ok_or_else(|| invalid_as(key, value.shown(), &seconds_allowed(max)))
}

/// A whole number from `min` to `max`; an error shows the value as it was written.
fn uint(key: &str, value: &SettingValue, min: u64, max: u64) -> Result<u64, Error> {
    let n = match value {
        SettingValue::Text(s) => s.trim().parse::<u64>().ok(),
        SettingValue::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    };
    n.filter(|n| (min..=max).contains(n)).ok_or_else(|| {
        let allowed = format!("a whole number from {min} to {max}");
        invalid_as(key, value.shown(), &allowed)
    })
}

/// A switch: a boolean, or `"true"`/`"false"` (from the environment).
fn switch(key: &str, value: &SettingValue) -> Result<bool, Error> {
    match value {
        SettingValue::Bool(b) => Ok(*b),
        SettingValue::Text(s) => match s.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(invalid(key, s, SWITCH)),
        },
        other => Err(wrong_kind(key, other, SWITCH)),
    }
}

/// `browser.cdp_url`: empty, or a URL of a scheme the crate speaks (credentials redacted in
/// the error).
pub(super) fn checked_cdp_url(url: String) -> Result<Option<String>, Error> {
    let Some(u) = non_empty(url) else {
        return Ok(None);
    };
    let ok = ["ws://", "wss://", "http://", "https://"]
        .iter()
        .any(|p| u.starts_with(p));
    if !ok {
        let u = crate::redact::redact_url(&u);
        return Err(invalid("browser.cdp_url", &u, CDP_URL));
    }
    Ok(Some(u))
}

/// `browser.ca_file`: absent, or an existing file.
pub(super) fn checked_ca_file(p: Option<PathBuf>) -> Result<Option<PathBuf>, Error> {
    match p {
        Some(p) if !p.is_file() => Err(invalid(
            "browser.ca_file",
            &p.display().to_string(),
            CA_FILE,
        )),
        p => Ok(p),
    }
}

/// `downloads.dir`: absent, or an absolute path (surrounding blanks dropped).
pub(super) fn checked_downloads_dir(d: Option<PathBuf>) -> Result<Option<PathBuf>, Error> {
    d.map(|d| {
        let shown = d.display().to_string();
        let p = PathBuf::from(shown.trim());
        if p.is_absolute() {
            Ok(p)
        } else {
            Err(invalid("downloads.dir", &shown, DOWNLOADS_DIR))
        }
    })
    .transpose()
}

/// What a list setting takes: the whole list (`list`) and each of its items (`item`).
struct ListRule {
    list: &'static str,
    item: &'static str,
    /// The environment's one string is split at whitespace (`true`) or at commas.
    env_words: bool,
}

/// A list setting: a list, or (from the environment) a string split at commas (or whitespace:
/// [`ListRule::env_words`]). Each item's kind is checked first (a string, or `key[i]` is
/// refused by its kind alone), then it goes through `check` (its value kept, or `None`:
/// refused).
fn list(
    key: &str,
    value: SettingValue,
    rule: &ListRule,
    check: impl Fn(&str) -> Option<String>,
) -> Result<Vec<String>, Error> {
    let items: Vec<SettingValue> = match value {
        SettingValue::List(items) => items,
        SettingValue::Text(s) => {
            let parts: Vec<&str> = if rule.env_words {
                s.split_whitespace().collect()
            } else {
                s.split(',').map(str::trim).collect()
            };
            parts
                .into_iter()
                .filter(|p| !p.is_empty())
                .map(|p| SettingValue::Text(p.to_string()))
                .collect()
        }
        other => return Err(wrong_kind(key, &other, rule.list)),
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let at = || format!("{key}[{i}]");
            match item {
                SettingValue::Text(s) => check(&s).ok_or_else(|| invalid(&at(), &s, rule.item)),
                other => Err(wrong_kind(&at(), &other, rule.item)),
            }
        })
        .collect()
}

/// The extra flags of a launched browser: `--switch[=value]` strings, or (from the
/// environment) one string split at whitespace (a flag may hold a comma:
/// `--window-size=1280,800`). The flags the launch sets itself and relies on
/// (`--remote-debugging-*`, `--user-data-dir`) are refused.
fn chrome_args(key: &str, value: SettingValue) -> Result<Vec<String>, Error> {
    let rule = ListRule {
        list: r#"a list of command-line switches such as ["--window-size=1280,800", "--lang=de"]"#,
        item: "a command-line switch such as \"--lang=de\" (starting with --; not \
               --remote-debugging-* or --user-data-dir, which the launch sets)",
        env_words: true,
    };
    list(key, value, &rule, |a| {
        let name = a.split('=').next().unwrap_or_default();
        let ours = name.starts_with("--remote-debugging-") || name == "--user-data-dir";
        let ok = a.starts_with("--") && name.len() > 2 && !ours && !a.chars().any(char::is_control);
        ok.then(|| a.to_string())
    })
}

/// A list of CDP method patterns (`Domain.method`, `Domain.*` or `*`).
fn patterns(key: &str, value: SettingValue) -> Result<Vec<String>, Error> {
    let rule = ListRule {
        list: r#"a list of CDP method patterns such as ["Browser.close", "Storage.*", "*"]"#,
        item: r#"a CDP method pattern such as "Browser.close", "Storage.*" or "*""#,
        env_words: false,
    };
    list(key, value, &rule, |s| {
        let ok = s == "*"
            || s.split_once('.').is_some_and(|(d, m)| {
                !d.is_empty()
                    && d.chars().all(|c| c.is_ascii_alphanumeric())
                    && (m == "*" || (!m.is_empty() && m.chars().all(|c| c.is_ascii_alphanumeric())))
            });
        ok.then(|| s.to_string())
    })
}

/// A list of host names for `Host`/`Origin` checks: `name` or `name:port`, an IPv6 address in
/// brackets (`[fd00::1]:8737`); kept lowercase.
fn hosts(key: &str, value: SettingValue) -> Result<Vec<String>, Error> {
    let rule = ListRule {
        list: r#"a list of host names such as ["mcp.example.com", "10.0.0.5:8737"] (no scheme, no path)"#,
        item: r#"a host name such as "mcp.example.com" or "10.0.0.5:8737" (no scheme, no path)"#,
        env_words: false,
    };
    list(key, value, &rule, |s| {
        let s = s.trim().to_ascii_lowercase();
        host_name_ok(&s).then_some(s)
    })
}

/// A list of absolute directory paths (`security.upload_dirs`).
fn dirs(key: &str, value: SettingValue) -> Result<Vec<PathBuf>, Error> {
    let rule = ListRule {
        list: r#"a list of absolute directory paths such as ["/home/me/uploads"]"#,
        item: r#"an absolute directory path such as "/home/me/uploads""#,
        env_words: false,
    };
    let dirs = list(key, value, &rule, |s| {
        let s = s.trim();
        Path::new(s).is_absolute().then(|| s.to_string())
    })?;
    Ok(dirs.into_iter().map(PathBuf::from).collect())
}

/// `s`, unless it is empty or blank.
fn non_empty(s: String) -> Option<String> {
    Some(s).filter(|s| !s.trim().is_empty())
}

/// Whether `s` may be an entry of `mcp.allowed_hosts`: `name` or `name:port` as a `Host`
/// header carries it (letters, digits, `-`, `.`, `_`, or an IPv6 address in brackets), with no
/// scheme, path or user.
fn host_name_ok(s: &str) -> bool {
    let (host, port) = match s.strip_prefix('[') {
        Some(rest) => {
            let Some((ip, tail)) = rest.split_once(']') else {
                return false;
            };
            let ip_ok = !ip.is_empty()
                && ip
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.');
            match (ip_ok, tail) {
                (false, _) => return false,
                (true, "") => (ip, None),
                (true, t) => match t.strip_prefix(':') {
                    Some(p) => (ip, Some(p)),
                    None => return false,
                },
            }
        }
        None => {
            let (h, p) = match s.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (s, None),
            };
            let name_ok = !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
            if !name_ok {
                return false;
            }
            (h, p)
        }
    };
    !host.is_empty() && port.is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0))
}
