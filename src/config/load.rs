//! Reading a [`Config`]: `config/default.toml` (compiled in), then an optional user file, then
//! `CDP_SUPERVISOR__SECTION__KEY` environment overrides, through the `config` crate, and every
//! value validated on the way (an invalid one is an [`Error::Config`] naming the key, the value
//! and what is allowed; a file that is missing or not TOML is an [`Error::InvalidConfig`]).
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

use config::ValueKind;

use super::rules::{invalid, invalid_as, positive_seconds, seconds_allowed};
use super::{
    BridgeMode, Config, DialogPolicy, MAX_CALL_TIMEOUT, MAX_DIALOG_TIMEOUT, MAX_HTTP_HEAD_TIMEOUT,
    MAX_START_TIMEOUT,
};
use crate::error::Error;
use crate::quote::{clipped, quoted};

/// The shipped defaults, documented line by line in the file itself.
const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

/// What `browser.cdp_url` takes.
const CDP_URL: &str = "empty (launch a local browser) or a ws://, wss:// or http:// URL";
/// What `browser.ca_file` takes.
const CA_FILE: &str = "empty, or the path of an existing PEM file of CA certificates";
/// What a switch takes.
const SWITCH: &str = "true or false";

/// The sections of the configuration: each must be a table.
const SECTIONS: &[&str] = &[
    "browser",
    "supervisor",
    "limits",
    "security",
    "downloads",
    "mcp",
];

/// What `downloads.dir` takes.
const DOWNLOADS_DIR: &str = "empty (the system temp directory) or an absolute directory path";

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
            if let Some(kind) = get(c, section)?
                && !matches!(kind, ValueKind::Table(_))
            {
                return Err(wrong_kind(section, &kind, "a table of settings"));
            }
        }
        let mut cfg = Config::default();
        if let Some(s) = get_text(c, "browser.dialog_policy", DialogPolicy::ALLOWED)? {
            cfg.dialog_policy = DialogPolicy::parse(s.trim())?;
        }
        if let Some(d) = get_secs(c, "browser.dialog_timeout_s", MAX_DIALOG_TIMEOUT)? {
            cfg.dialog_timeout = d;
        }
        if let Some(s) = get_text(c, "browser.dialog_bridge", BridgeMode::ALLOWED)? {
            cfg.dialog_bridge = BridgeMode::parse(s.trim())?;
        }
        cfg.cdp_url = non_empty(get_text(c, "browser.cdp_url", CDP_URL)?);
        if let Some(u) = &cfg.cdp_url {
            let ok = ["ws://", "wss://", "http://", "https://"]
                .iter()
                .any(|p| u.starts_with(p));
            if !ok {
                let u = crate::redact::redact_url(u);
                return Err(invalid("browser.cdp_url", &u, CDP_URL));
            }
        }
        let chrome = "empty, or the path of a Chrome or Chromium executable";
        cfg.chrome_path = non_empty(get_text(c, "browser.chrome_path", chrome)?);
        if let Some(b) = get_bool(c, "browser.follow_popups")? {
            cfg.follow_popups = b;
        }
        if let Some(b) = get_bool(c, "browser.capture_console")? {
            cfg.capture_console = b;
        }
        cfg.chrome_args = get_chrome_args(c, "browser.chrome_args")?;
        cfg.ca_file = non_empty(get_text(c, "browser.ca_file", CA_FILE)?).map(PathBuf::from);
        if let Some(p) = &cfg.ca_file
            && !p.is_file()
        {
            return Err(invalid(
                "browser.ca_file",
                &p.display().to_string(),
                CA_FILE,
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
            ("security.isolate_tasks", &mut sec.isolate_tasks),
        ] {
            if let Some(b) = get_bool(c, key)? {
                *value = b;
            }
        }
        cfg.security.cdp_deny = get_patterns(c, "security.cdp_deny")?;
        cfg.security.cdp_allow = get_patterns(c, "security.cdp_allow")?;
        cfg.security.upload_dirs = get_dirs(c, "security.upload_dirs")?;
        cfg.downloads.dir = non_empty(get_text(c, "downloads.dir", DOWNLOADS_DIR)?)
            .map(|d| {
                let p = PathBuf::from(d.trim());
                if p.is_absolute() {
                    Ok(p)
                } else {
                    Err(invalid("downloads.dir", &d, DOWNLOADS_DIR))
                }
            })
            .transpose()?;
        if let Some(b) = get_bool(c, "downloads.keep")? {
            cfg.downloads.keep = b;
        }
        cfg.allowed_hosts = get_hosts(c, "mcp.allowed_hosts")?;
        if let Some(d) = get_secs(c, "mcp.http_head_timeout_s", MAX_HTTP_HEAD_TIMEOUT)? {
            cfg.http_head_timeout = d;
        }
        if let Some(n) = get_uint(c, "mcp.http_max_new_connections", 1, 4096)? {
            cfg.http_max_new_connections = n as usize;
        }
        // 64: the server's cap on listen streams over every transport (`mcp/engine/listen.rs`).
        if let Some(n) = get_uint(c, "mcp.http_max_listen_streams", 1, 64)? {
            cfg.http_max_listen_streams = n as usize;
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
fn get(c: &config::Config, key: &str) -> Result<Option<ValueKind>, Error> {
    match c.get::<config::Value>(key) {
        Ok(v) => Ok(Some(v.kind).filter(|k| !matches!(k, ValueKind::Nil))),
        Err(config::ConfigError::NotFound(_)) => Ok(None),
        Err(e) => Err(Error::InvalidConfig(format!(
            "cannot read {key}: {}",
            clipped(&e.to_string())
        ))),
    }
}

/// A value as an error shows it: a string quoted and clipped, a number or boolean as written,
/// a list or table by its kind alone (never its contents, which may nest without end).
fn shown(kind: &ValueKind) -> String {
    match kind {
        ValueKind::Nil => "empty".into(),
        ValueKind::Boolean(b) => b.to_string(),
        ValueKind::I64(n) => n.to_string(),
        ValueKind::I128(n) => n.to_string(),
        ValueKind::U64(n) => n.to_string(),
        ValueKind::U128(n) => n.to_string(),
        ValueKind::Float(f) => clipped(&format!("{f:?}")).to_string(),
        ValueKind::String(s) => quoted(s).to_string(),
        ValueKind::Table(_) => "a table".into(),
        ValueKind::Array(_) => "a list".into(),
    }
}

/// The error for `key` holding a value of a kind it does not take.
fn wrong_kind(key: &str, kind: &ValueKind, expected: &str) -> Error {
    invalid_as(key, shown(kind), expected)
}

/// Reads a text setting: a string; any other kind is refused (`expected` says what it takes).
fn get_text(c: &config::Config, key: &str, expected: &str) -> Result<Option<String>, Error> {
    match get(c, key)? {
        None => Ok(None),
        Some(ValueKind::String(s)) => Ok(Some(s)),
        Some(other) => Err(wrong_kind(key, &other, expected)),
    }
}

/// A number setting's value: a number (`from`), or a string (from the environment) that reads
/// as one (`parse`).
fn number<T>(
    kind: &ValueKind,
    parse: impl Fn(&str) -> Option<T>,
    from: impl Fn(&ValueKind) -> Option<T>,
) -> Option<T> {
    match kind {
        ValueKind::String(s) => parse(s.trim()),
        other => from(other),
    }
}

/// Reads a number of seconds, under the one rule of such settings (see
/// [`super::seconds_setting`]); an error shows the value as it was written.
fn get_secs(c: &config::Config, key: &str, max: Duration) -> Result<Option<Duration>, Error> {
    let Some(kind) = get(c, key)? else {
        return Ok(None);
    };
    let secs = number(
        &kind,
        |s| s.parse::<f64>().ok(),
        |k| match k {
            ValueKind::I64(n) => Some(*n as f64),
            ValueKind::U64(n) => Some(*n as f64),
            ValueKind::Float(f) => Some(*f),
            _ => None,
        },
    );
    match secs.and_then(|v| positive_seconds(v, max)) {
        Some(d) => Ok(Some(d)),
        None => Err(invalid_as(key, shown(&kind), &seconds_allowed(max))),
    }
}

/// Reads a whole number from `min` to `max`; an error shows the value as it was written.
fn get_uint(c: &config::Config, key: &str, min: u64, max: u64) -> Result<Option<u64>, Error> {
    let Some(kind) = get(c, key)? else {
        return Ok(None);
    };
    let n = number(
        &kind,
        |s| s.parse::<u64>().ok(),
        |k| match k {
            ValueKind::I64(n) => u64::try_from(*n).ok(),
            ValueKind::U64(n) => Some(*n),
            _ => None,
        },
    );
    match n.filter(|n| (min..=max).contains(n)) {
        Some(n) => Ok(Some(n)),
        None => {
            let allowed = format!("a whole number from {min} to {max}");
            Err(invalid_as(key, shown(&kind), &allowed))
        }
    }
}

/// Reads a switch: a boolean, or `"true"`/`"false"` (from the environment).
fn get_bool(c: &config::Config, key: &str) -> Result<Option<bool>, Error> {
    match get(c, key)? {
        None => Ok(None),
        Some(ValueKind::Boolean(b)) => Ok(Some(b)),
        Some(ValueKind::String(s)) => match s.trim() {
            "true" => Ok(Some(true)),
            "false" => Ok(Some(false)),
            _ => Err(invalid(key, &s, SWITCH)),
        },
        Some(other) => Err(wrong_kind(key, &other, SWITCH)),
    }
}

/// What a list setting takes: the whole list (`list`) and each of its items (`item`).
struct ListRule {
    list: &'static str,
    item: &'static str,
    /// The environment's one string is split at whitespace (`true`) or at commas.
    env_words: bool,
}

/// Reads a list setting: a TOML array, or (from the environment) a string split at commas (or
/// whitespace: [`ListRule::env_words`]).
/// Each item's kind is checked first (a string, or `key[i]` is refused by its kind alone), then
/// it goes through `check` (its value kept, or `None`: refused). Absent: empty.
fn get_list(
    c: &config::Config,
    key: &str,
    rule: &ListRule,
    check: impl Fn(&str) -> Option<String>,
) -> Result<Vec<String>, Error> {
    let items: Vec<ValueKind> = match get(c, key)? {
        None => return Ok(Vec::new()),
        Some(ValueKind::Array(items)) => items.into_iter().map(|v| v.kind).collect(),
        Some(ValueKind::String(s)) => {
            let parts: Vec<&str> = if rule.env_words {
                s.split_whitespace().collect()
            } else {
                s.split(',').map(str::trim).collect()
            };
            parts
                .into_iter()
                .filter(|p| !p.is_empty())
                .map(|p| ValueKind::String(p.to_string()))
                .collect()
        }
        Some(other) => return Err(wrong_kind(key, &other, rule.list)),
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, kind)| {
            let at = || format!("{key}[{i}]");
            match kind {
                ValueKind::String(s) => check(&s).ok_or_else(|| invalid(&at(), &s, rule.item)),
                other => Err(wrong_kind(&at(), &other, rule.item)),
            }
        })
        .collect()
}

/// Reads the extra flags of a launched browser: a TOML array of `--switch[=value]` strings, or
/// (from the environment) one string split at whitespace (a flag may hold a comma:
/// `--window-size=1280,800`). The flags the launch sets itself and relies on
/// (`--remote-debugging-*`, `--user-data-dir`) are refused.
fn get_chrome_args(c: &config::Config, key: &str) -> Result<Vec<String>, Error> {
    let rule = ListRule {
        list: r#"a list of command-line switches such as ["--window-size=1280,800", "--lang=de"]"#,
        item: "a command-line switch such as \"--lang=de\" (starting with --; not \
               --remote-debugging-* or --user-data-dir, which the launch sets)",
        env_words: true,
    };
    get_list(c, key, &rule, |a| {
        let name = a.split('=').next().unwrap_or_default();
        let ours = name.starts_with("--remote-debugging-") || name == "--user-data-dir";
        let ok = a.starts_with("--") && name.len() > 2 && !ours && !a.chars().any(char::is_control);
        ok.then(|| a.to_string())
    })
}

/// Reads a list of CDP method patterns (`Domain.method`, `Domain.*` or `*`).
fn get_patterns(c: &config::Config, key: &str) -> Result<Vec<String>, Error> {
    let rule = ListRule {
        list: r#"a list of CDP method patterns such as ["Browser.close", "Storage.*", "*"]"#,
        item: r#"a CDP method pattern such as "Browser.close", "Storage.*" or "*""#,
        env_words: false,
    };
    get_list(c, key, &rule, |s| {
        let ok = s == "*"
            || s.split_once('.').is_some_and(|(d, m)| {
                !d.is_empty()
                    && d.chars().all(|c| c.is_ascii_alphanumeric())
                    && (m == "*" || (!m.is_empty() && m.chars().all(|c| c.is_ascii_alphanumeric())))
            });
        ok.then(|| s.to_string())
    })
}

/// Reads a list of host names for `Host`/`Origin` checks: `name` or `name:port`, an IPv6
/// address in brackets (`[fd00::1]:8737`); kept lowercase.
fn get_hosts(c: &config::Config, key: &str) -> Result<Vec<String>, Error> {
    let rule = ListRule {
        list: r#"a list of host names such as ["mcp.example.com", "10.0.0.5:8737"] (no scheme, no path)"#,
        item: r#"a host name such as "mcp.example.com" or "10.0.0.5:8737" (no scheme, no path)"#,
        env_words: false,
    };
    get_list(c, key, &rule, |s| {
        let s = s.trim().to_ascii_lowercase();
        host_name_ok(&s).then_some(s)
    })
}

/// Reads a list of absolute directory paths (`security.upload_dirs`).
fn get_dirs(c: &config::Config, key: &str) -> Result<Vec<PathBuf>, Error> {
    let rule = ListRule {
        list: r#"a list of absolute directory paths such as ["/home/me/uploads"]"#,
        item: r#"an absolute directory path such as "/home/me/uploads""#,
        env_words: false,
    };
    let dirs = get_list(c, key, &rule, |s| {
        let s = s.trim();
        Path::new(s).is_absolute().then(|| s.to_string())
    })?;
    Ok(dirs.into_iter().map(PathBuf::from).collect())
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
