//! Reading a [`Config`]: `config/default.toml` (compiled in), then an optional user file, then
//! `CDP_SUPERVISOR__SECTION__KEY` environment overrides, through the `config` crate, and every
//! value validated on the way (an invalid one is an [`Error::Config`] naming the key, the value
//! and what is allowed; a file that is missing or not TOML is an [`Error::InvalidConfig`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{
    BridgeMode, Config, DialogPolicy, MAX_CALL_TIMEOUT, MAX_DIALOG_TIMEOUT, MAX_START_TIMEOUT,
    invalid, positive_seconds, seconds_allowed,
};
use crate::error::Error;

/// The shipped defaults, documented line by line in the file itself.
const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

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
        let mut cfg = Config::default();
        if let Some(s) = get_str(c, "browser.dialog_policy")? {
            cfg.dialog_policy = DialogPolicy::parse(s.trim())?;
        }
        if let Some(d) = get_secs(c, "browser.dialog_timeout_s", MAX_DIALOG_TIMEOUT)? {
            cfg.dialog_timeout = d;
        }
        if let Some(s) = get_str(c, "browser.dialog_bridge")? {
            cfg.dialog_bridge = BridgeMode::parse(s.trim())?;
        }
        cfg.cdp_url = non_empty(get_str(c, "browser.cdp_url")?);
        if let Some(u) = &cfg.cdp_url {
            let ok = ["ws://", "wss://", "http://", "https://"]
                .iter()
                .any(|p| u.starts_with(p));
            if !ok {
                return Err(invalid(
                    "browser.cdp_url",
                    &crate::redact::redact_url(u),
                    "empty (launch a local browser) or a ws://, wss:// or http:// URL",
                ));
            }
        }
        cfg.chrome_path = non_empty(get_str(c, "browser.chrome_path")?);
        if let Some(s) = get_str(c, "browser.follow_popups")? {
            cfg.follow_popups = match s.trim() {
                "true" => true,
                "false" => false,
                other => return Err(invalid("browser.follow_popups", other, "true or false")),
            };
        }
        if let Some(b) = get_bool(c, "browser.capture_console")? {
            cfg.capture_console = b;
        }
        cfg.chrome_args = get_chrome_args(c, "browser.chrome_args")?;
        cfg.ca_file = non_empty(get_str(c, "browser.ca_file")?).map(PathBuf::from);
        if let Some(p) = &cfg.ca_file
            && !p.is_file()
        {
            return Err(invalid(
                "browser.ca_file",
                &p.display().to_string(),
                "empty, or the path of an existing PEM file of CA certificates",
            ));
        }
        if let Some(d) = get_secs(c, "supervisor.start_timeout_s", MAX_START_TIMEOUT)? {
            cfg.start_timeout = d;
        }
        if let Some(d) = get_secs(c, "supervisor.call_timeout_s", MAX_CALL_TIMEOUT)? {
            cfg.call_timeout = d;
        }
        if let Some(n) = get_uint(c, "supervisor.reconnect_attempts", 0, 100)? {
            cfg.reconnect_attempts = n as u32;
        }
        let l = &mut cfg.limits;
        if let Some(n) = get_uint(c, "limits.frame_tree_max_entries", 1, 10_000)? {
            l.frame_tree_max_entries = n as usize;
        }
        if let Some(n) = get_uint(c, "limits.frame_tree_max_oopif_depth", 0, 64)? {
            l.frame_tree_max_oopif_depth = n as usize;
        }
        if let Some(n) = get_uint(c, "limits.recent_dialogs_max", 1, 10_000)? {
            l.recent_dialogs_max = n as usize;
        }
        if let Some(n) = get_uint(c, "limits.console_errors_max", 1, 100_000)? {
            l.console_errors_max = n as usize;
        }
        if let Some(n) = get_uint(c, "limits.max_message_bytes", 1024, 1 << 30)? {
            l.max_message_bytes = n as usize;
        }
        if let Some(n) = get_uint(c, "limits.pending_dialogs_max", 1, 1_000)? {
            l.pending_dialogs_max = n as usize;
        }
        if let Some(n) = get_uint(c, "limits.pages_max", 0, 1_000)? {
            l.pages_max = n as usize;
        }
        if let Some(n) = get_uint(c, "limits.watched_pages_max", 0, 10_000)? {
            l.watched_pages_max = n as usize;
        }
        let sec = &mut cfg.security;
        for (key, value) in [
            ("security.allow_file_urls", &mut sec.allow_file_urls),
            ("security.allow_file_access", &mut sec.allow_file_access),
            ("security.allow_page_protocol", &mut sec.allow_page_protocol),
        ] {
            if let Some(b) = get_bool(c, key)? {
                *value = b;
            }
        }
        cfg.security.cdp_deny = get_patterns(c, "security.cdp_deny")?;
        cfg.security.cdp_allow = get_patterns(c, "security.cdp_allow")?;
        cfg.allowed_hosts = get_hosts(c, "mcp.allowed_hosts")?;
        Ok(cfg)
    }
}

/// The layers could not be read as a whole (TOML syntax, a file that cannot be read).
fn unreadable(e: config::ConfigError) -> Error {
    Error::InvalidConfig(format!("cannot read configuration: {e}"))
}

/// Reads one key as a string, whatever type the source gave it.
fn get_str(c: &config::Config, key: &str) -> Result<Option<String>, Error> {
    match c.get::<config::Value>(key) {
        Ok(v) => match v.kind {
            config::ValueKind::Nil => Ok(None),
            config::ValueKind::Table(_) | config::ValueKind::Array(_) => Err(invalid(
                key,
                &v.to_string(),
                "a single value, not a table or list",
            )),
            _ => Ok(Some(v.to_string())),
        },
        Err(config::ConfigError::NotFound(_)) => Ok(None),
        Err(e) => Err(invalid(key, "?", &e.to_string())),
    }
}

/// Reads a number of seconds, under the one rule of such settings (see
/// [`super::seconds_setting`]); an error shows the value as it was written.
fn get_secs(c: &config::Config, key: &str, max: Duration) -> Result<Option<Duration>, Error> {
    let Some(s) = get_str(c, key)? else {
        return Ok(None);
    };
    let wrong = || invalid(key, &s, &seconds_allowed(max));
    let v: f64 = s.trim().parse().map_err(|_| wrong())?;
    positive_seconds(v, max).map(Some).ok_or_else(wrong)
}

fn get_uint(c: &config::Config, key: &str, min: u64, max: u64) -> Result<Option<u64>, Error> {
    let Some(s) = get_str(c, key)? else {
        return Ok(None);
    };
    let allowed = format!("a whole number from {min} to {max}");
    let v: u64 = s.trim().parse().map_err(|_| invalid(key, &s, &allowed))?;
    if v < min || v > max {
        return Err(invalid(key, &s, &allowed));
    }
    Ok(Some(v))
}

fn get_bool(c: &config::Config, key: &str) -> Result<Option<bool>, Error> {
    let Some(s) = get_str(c, key)? else {
        return Ok(None);
    };
    match s.trim() {
        "true" => Ok(Some(true)),
        "false" => Ok(Some(false)),
        _ => Err(invalid(key, &s, "true or false")),
    }
}

/// Reads a list setting: a TOML array, or (from the environment) a comma-separated string;
/// each item goes through `item` (its value kept, or `None`: refused). Absent: empty.
fn get_list(
    c: &config::Config,
    key: &str,
    allowed: &str,
    item: impl Fn(String) -> Option<String>,
) -> Result<Vec<String>, Error> {
    let list = match c.get::<config::Value>(key) {
        Ok(v) => match v.kind {
            config::ValueKind::Nil => return Ok(Vec::new()),
            config::ValueKind::Array(items) => items,
            config::ValueKind::String(s) => s
                .split(',')
                .filter(|p| !p.trim().is_empty())
                .map(|p| config::Value::new(None, p.trim()))
                .collect(),
            _ => return Err(invalid(key, &v.to_string(), allowed)),
        },
        Err(config::ConfigError::NotFound(_)) => return Ok(Vec::new()),
        Err(e) => return Err(invalid(key, "?", &e.to_string())),
    };
    list.into_iter()
        .map(|v| {
            let s = v.to_string();
            item(s.clone()).ok_or_else(|| invalid(key, &s, allowed))
        })
        .collect()
}

/// Reads the extra flags of a launched browser: a TOML array of `--switch[=value]` strings, or
/// (from the environment) one string split at whitespace. The flags the launch sets itself and
/// relies on (`--remote-debugging-*`, `--user-data-dir`) are refused.
fn get_chrome_args(c: &config::Config, key: &str) -> Result<Vec<String>, Error> {
    let allowed = "a list of command-line switches such as [\"--window-size=1280,800\", \"--lang=de\"] \
                   (each starting with --; not --remote-debugging-* or --user-data-dir, which the \
                   launch sets)";
    let items: Vec<String> = match c.get::<config::Value>(key) {
        Ok(v) => match v.kind {
            config::ValueKind::Nil => return Ok(Vec::new()),
            config::ValueKind::Array(items) => items.into_iter().map(|v| v.to_string()).collect(),
            config::ValueKind::String(s) => s.split_whitespace().map(str::to_string).collect(),
            _ => return Err(invalid(key, &v.to_string(), allowed)),
        },
        Err(config::ConfigError::NotFound(_)) => return Ok(Vec::new()),
        Err(e) => return Err(invalid(key, "?", &e.to_string())),
    };
    for a in &items {
        let name = a.split('=').next().unwrap_or_default();
        let ours = name.starts_with("--remote-debugging-") || name == "--user-data-dir";
        if !a.starts_with("--") || name.len() < 3 || ours || a.chars().any(char::is_control) {
            return Err(invalid(key, a, allowed));
        }
    }
    Ok(items)
}

/// Reads a list of CDP method patterns (`Domain.method`, `Domain.*` or `*`).
fn get_patterns(c: &config::Config, key: &str) -> Result<Vec<String>, Error> {
    let allowed = "a list of CDP method patterns such as [\"Browser.close\", \"Storage.*\", \"*\"]";
    get_list(c, key, allowed, |s| {
        let ok = s == "*"
            || s.split_once('.').is_some_and(|(d, m)| {
                !d.is_empty()
                    && d.chars().all(|c| c.is_ascii_alphanumeric())
                    && (m == "*" || (!m.is_empty() && m.chars().all(|c| c.is_ascii_alphanumeric())))
            });
        ok.then_some(s)
    })
}

/// Reads a list of host names for `Host`/`Origin` checks: `name` or `name:port`, an IPv6
/// address in brackets (`[fd00::1]:8737`); kept lowercase.
fn get_hosts(c: &config::Config, key: &str) -> Result<Vec<String>, Error> {
    let allowed = "a list of host names such as [\"mcp.example.com\", \"10.0.0.5:8737\"] (no scheme, no path)";
    get_list(c, key, allowed, |s| {
        let s = s.trim().to_ascii_lowercase();
        host_name_ok(&s).then_some(s)
    })
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.trim().is_empty())
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
