//! Configuration (SPEC §12): `config/default.toml` (compiled in), then an optional user file, then
//! `CDP_SUPERVISOR__SECTION__KEY` environment overrides, through the `config` crate.
//!
//! Every value is validated; an invalid one is an [`Error::Config`] naming the key, the value and
//! what is allowed. There is no silent fallback.

use std::path::Path;
use std::time::Duration;

use crate::error::Error;
use crate::registry::StartOptions;

/// The shipped defaults, documented line by line in the file itself.
pub const DEFAULT_TOML: &str = include_str!("../config/default.toml");

/// What happens when a native dialog opens (SPEC §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DialogPolicy {
    /// Capture it and wait for the caller's answer; the watchdog dismisses it after the timeout.
    #[default]
    MustRespond,
    /// Record and dismiss at once (a prompt gets no text).
    AutoDismiss,
    /// Record and accept at once (a prompt gets its default text).
    AutoAccept,
}

impl DialogPolicy {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DialogPolicy::MustRespond => "must_respond",
            DialogPolicy::AutoDismiss => "auto_dismiss",
            DialogPolicy::AutoAccept => "auto_accept",
        }
    }
    /// Parses the config spelling.
    pub fn parse(s: &str) -> Result<Self, Error> {
        match s {
            "must_respond" => Ok(DialogPolicy::MustRespond),
            "auto_dismiss" => Ok(DialogPolicy::AutoDismiss),
            "auto_accept" => Ok(DialogPolicy::AutoAccept),
            _ => Err(invalid(
                "browser.dialog_policy",
                s,
                "one of must_respond, auto_dismiss, auto_accept",
            )),
        }
    }
}

/// Whether dialogs go through the injected XHR bridge (SPEC §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BridgeMode {
    /// Native dialogs only.
    Off,
    /// Always install the bridge.
    On,
    /// Native; switch to the bridge when a proxy is seen closing dialogs.
    #[default]
    Auto,
}

impl BridgeMode {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            BridgeMode::Off => "off",
            BridgeMode::On => "on",
            BridgeMode::Auto => "auto",
        }
    }
    /// Parses the config spelling.
    pub fn parse(s: &str) -> Result<Self, Error> {
        match s {
            "off" => Ok(BridgeMode::Off),
            "on" => Ok(BridgeMode::On),
            "auto" => Ok(BridgeMode::Auto),
            _ => Err(invalid("browser.dialog_bridge", s, "one of off, on, auto")),
        }
    }
}

/// How the caller answers a dialog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DialogAction {
    /// OK / accept.
    Accept,
    /// Cancel / dismiss.
    Dismiss,
}

impl DialogAction {
    /// `accept` or `dismiss`.
    pub fn as_str(self) -> &'static str {
        match self {
            DialogAction::Accept => "accept",
            DialogAction::Dismiss => "dismiss",
        }
    }
}

/// Caps on everything that grows with what the page does (SPEC §12, §14).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Entries in `frame_tree.children`.
    pub frame_tree_max_entries: usize,
    /// OOPIF nesting depth shown in `frame_tree`.
    pub frame_tree_max_oopif_depth: usize,
    /// Size of the `recent_dialogs` ring.
    pub recent_dialogs_max: usize,
    /// Size of the console ring.
    pub console_errors_max: usize,
    /// Largest WebSocket message accepted.
    pub max_message_bytes: usize,
    /// Frames tracked per supervisor (the full map; beyond it new frames are ignored).
    pub frames_max: usize,
    /// Dialogs pending at once; bridge requests past it fail (SPEC §14).
    pub pending_dialogs_max: usize,
    /// Pages followed at once besides the task's own page (popups, new tabs: issue 14); past
    /// it, new ones are resumed and left alone and the snapshot says `pages_truncated`.
    pub pages_max: usize,
    /// Popups past `pages_max` still watched for their dialogs only (a hard cap: SPEC §8 "No
    /// silent wedge"); past it, new ones are resumed and let go.
    pub watched_pages_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            frame_tree_max_entries: 30,
            frame_tree_max_oopif_depth: 2,
            recent_dialogs_max: 20,
            console_errors_max: 50,
            max_message_bytes: 64 << 20,
            frames_max: 10_000,
            pending_dialogs_max: 16,
            pages_max: 20,
            watched_pages_max: 200,
        }
    }
}

/// Everything a registry needs to know. `Default` equals the shipped `config/default.toml`.
/// `Debug` redacts credentials in `cdp_url`.
#[derive(Clone, PartialEq)]
pub struct Config {
    /// `browser.dialog_policy`.
    pub dialog_policy: DialogPolicy,
    /// `browser.dialog_timeout_s`: the `must_respond` watchdog.
    pub dialog_timeout: Duration,
    /// `browser.dialog_bridge`.
    pub dialog_bridge: BridgeMode,
    /// `browser.cdp_url`: empty means "launch a local browser".
    pub cdp_url: Option<String>,
    /// `browser.chrome_path`.
    pub chrome_path: Option<String>,
    /// `browser.follow_popups`: follow the pages the task's page opens (popups, new tabs).
    pub follow_popups: bool,
    /// `browser.ca_file`: extra CA certificates (PEM) trusted for `wss://`.
    pub ca_file: Option<std::path::PathBuf>,
    /// `supervisor.start_timeout_s`.
    pub start_timeout: Duration,
    /// `supervisor.call_timeout_s`: default for calls that do not give one.
    pub call_timeout: Duration,
    /// `supervisor.reconnect_attempts`.
    pub reconnect_attempts: u32,
    /// The first reconnect back-off, doubling per attempt up to 5 s (SPEC §3: 250 ms). Not read
    /// from the configuration file: only tests that race a reconnect shorten it.
    pub reconnect_backoff: Duration,
    /// `limits.*`.
    pub limits: Limits,
    /// `security.*`: what `browser_cdp` may do (SPEC §14).
    pub security: Security,
}

/// What raw CDP calls through `browser_cdp` may do (SPEC §14). A page that prompt-injects an
/// agent could ask it for anything; these narrow it. The rules themselves are in
/// `src/security.rs`. Build one from `Security::default()` (every field is a setting of the
/// `[security]` section; more may come).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Security {
    /// `security.allow_file_urls`: URLs that may read a local file (`file:`, `filesystem:`, a
    /// path, in any spelling Chromium normalises) in navigations, new targets and the other
    /// methods that load a URL, and download paths, are refused unless true.
    pub allow_file_urls: bool,
    /// `security.allow_file_access`: methods that hand local files to the page
    /// (`DOM.setFileInputFiles`, `Input.dispatchDragEvent` with files, the file-chooser
    /// interception path, …) are refused unless true.
    pub allow_file_access: bool,
    /// `security.allow_page_protocol`: handing the DevTools protocol to a page
    /// (`Target.exposeDevToolsProtocol`, the DevTools frontend, the browser's own pages) and
    /// commands for targets the supervisor does not route (`Target.sendMessageToTarget`) are
    /// refused unless true.
    pub allow_page_protocol: bool,
    /// `security.cdp_deny`: method patterns (`Browser.close`, `Browser.*`, `*`) always refused.
    pub cdp_deny: Vec<String>,
    /// `security.cdp_allow`: when not empty, only methods matching one of these patterns pass.
    pub cdp_allow: Vec<String>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("dialog_policy", &self.dialog_policy)
            .field("dialog_timeout", &self.dialog_timeout)
            .field("dialog_bridge", &self.dialog_bridge)
            .field(
                "cdp_url",
                &self.cdp_url.as_deref().map(crate::redact::redact_url),
            )
            .field("chrome_path", &self.chrome_path)
            .field("follow_popups", &self.follow_popups)
            .field("ca_file", &self.ca_file)
            .field("start_timeout", &self.start_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("reconnect_attempts", &self.reconnect_attempts)
            .field("reconnect_backoff", &self.reconnect_backoff)
            .field("limits", &self.limits)
            .field("security", &self.security)
            .finish()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            dialog_policy: DialogPolicy::MustRespond,
            dialog_timeout: Duration::from_secs(300),
            dialog_bridge: BridgeMode::Auto,
            cdp_url: None,
            chrome_path: None,
            follow_popups: true,
            ca_file: None,
            start_timeout: Duration::from_secs(15),
            call_timeout: Duration::from_secs(30),
            reconnect_attempts: 5,
            reconnect_backoff: crate::reader::BACKOFF_START,
            limits: Limits::default(),
            security: Security::default(),
        }
    }
}

fn invalid(key: &str, value: &str, allowed: &str) -> Error {
    Error::Config {
        key: key.to_string(),
        value: value.to_string(),
        allowed: allowed.to_string(),
    }
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

fn get_secs(c: &config::Config, key: &str, min: f64, max: f64) -> Result<Option<Duration>, Error> {
    let Some(s) = get_str(c, key)? else {
        return Ok(None);
    };
    let allowed = format!("a number of seconds > {min} and <= {max}");
    let v: f64 = s.trim().parse().map_err(|_| invalid(key, &s, &allowed))?;
    if !(v > min && v <= max && v.is_finite()) {
        return Err(invalid(key, &s, &allowed));
    }
    Ok(Some(Duration::from_secs_f64(v)))
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

impl Security {
    /// Whether `pattern` (`*`, `Domain.*` or `Domain.method`) matches `method`.
    pub fn pattern_matches(pattern: &str, method: &str) -> bool {
        match pattern.strip_suffix(".*") {
            _ if pattern == "*" => true,
            Some(domain) => method
                .strip_prefix(domain)
                .is_some_and(|rest| rest.starts_with('.')),
            None => pattern == method,
        }
    }
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

/// Reads a list of CDP method patterns (`Domain.method`, `Domain.*` or `*`).
fn get_patterns(c: &config::Config, key: &str) -> Result<Vec<String>, Error> {
    let allowed = "a list of CDP method patterns such as [\"Browser.close\", \"Storage.*\", \"*\"]";
    let list = match c.get::<config::Value>(key) {
        Ok(v) => match v.kind {
            config::ValueKind::Nil => return Ok(Vec::new()),
            config::ValueKind::Array(items) => items,
            // From the environment: a comma-separated string.
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
    let mut out = Vec::new();
    for item in list {
        let s = item.to_string();
        let ok = s == "*"
            || s.split_once('.').is_some_and(|(d, m)| {
                !d.is_empty()
                    && d.chars().all(|c| c.is_ascii_alphanumeric())
                    && (m == "*" || (!m.is_empty() && m.chars().all(|c| c.is_ascii_alphanumeric())))
            });
        if !ok {
            return Err(invalid(key, &s, allowed));
        }
        out.push(s);
    }
    Ok(out)
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.trim().is_empty())
}

impl Config {
    /// The configuration of one task: this one with the task's overrides
    /// (`StartOptions::{dialog_policy, dialog_timeout, dialog_bridge}`) applied. The only place
    /// per-task settings are made; a supervisor keeps the result (`Supervisor::config`).
    pub fn with_overrides(&self, options: &StartOptions) -> Config {
        Config {
            dialog_policy: options.dialog_policy.unwrap_or(self.dialog_policy),
            dialog_timeout: options.dialog_timeout.unwrap_or(self.dialog_timeout),
            dialog_bridge: options.dialog_bridge.unwrap_or(self.dialog_bridge),
            ..self.clone()
        }
    }

    /// Loads `config/default.toml`, then `path` (or `$CDP_SUPERVISOR_CONFIG`) if given, then the
    /// `CDP_SUPERVISOR__*` environment, and validates every value.
    pub fn load(path: Option<&Path>) -> Result<Config, Error> {
        let env_path = std::env::var_os("CDP_SUPERVISOR_CONFIG").map(std::path::PathBuf::from);
        let user = path.map(Path::to_path_buf).or(env_path);
        let mut builder = config::Config::builder().add_source(config::File::from_str(
            DEFAULT_TOML,
            config::FileFormat::Toml,
        ));
        if let Some(p) = &user {
            if !p.is_file() {
                return Err(Error::Io(format!(
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
        let c = builder
            .build()
            .map_err(|e| Error::Io(format!("cannot read configuration: {e}")))?;
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
            .map_err(|e| Error::Io(format!("cannot read configuration: {e}")))?;
        Self::from_source(&c)
    }

    fn from_source(c: &config::Config) -> Result<Config, Error> {
        let mut cfg = Config::default();
        if let Some(s) = get_str(c, "browser.dialog_policy")? {
            cfg.dialog_policy = DialogPolicy::parse(s.trim())?;
        }
        if let Some(d) = get_secs(c, "browser.dialog_timeout_s", 0.0, 86_400.0)? {
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
        cfg.ca_file = non_empty(get_str(c, "browser.ca_file")?).map(std::path::PathBuf::from);
        if let Some(p) = &cfg.ca_file
            && !p.is_file()
        {
            return Err(invalid(
                "browser.ca_file",
                &p.display().to_string(),
                "empty, or the path of an existing PEM file of CA certificates",
            ));
        }
        if let Some(d) = get_secs(c, "supervisor.start_timeout_s", 0.0, 600.0)? {
            cfg.start_timeout = d;
        }
        if let Some(d) = get_secs(c, "supervisor.call_timeout_s", 0.0, 300.0)? {
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
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_file_equals_default() {
        assert_eq!(Config::from_toml("").unwrap(), Config::default());
    }

    #[test]
    fn invalid_values_name_key_value_and_allowed() {
        let e = Config::from_toml("[browser]\ndialog_policy = \"sometimes\"").unwrap_err();
        let t = e.to_string();
        assert!(
            t.contains("browser.dialog_policy") && t.contains("sometimes"),
            "{t}"
        );
        assert!(t.contains("must_respond"), "{t}");
        let e = Config::from_toml("[browser]\ndialog_timeout_s = 0").unwrap_err();
        assert!(e.to_string().contains("browser.dialog_timeout_s"), "{e}");
        let e = Config::from_toml("[browser]\ndialog_timeout_s = \"soon\"").unwrap_err();
        assert!(e.to_string().contains("soon"), "{e}");
        let e = Config::from_toml("[browser]\ndialog_bridge = \"maybe\"").unwrap_err();
        assert!(e.to_string().contains("off, on, auto"), "{e}");
        let e = Config::from_toml("[limits]\nrecent_dialogs_max = -3").unwrap_err();
        assert!(e.to_string().contains("limits.recent_dialogs_max"), "{e}");
    }

    #[test]
    fn task_overrides_replace_only_what_they_name() {
        let base = Config {
            call_timeout: Duration::from_secs(7),
            ..Config::default()
        };
        assert_eq!(base.with_overrides(&StartOptions::default()), base);
        let task = base.with_overrides(&StartOptions {
            dialog_policy: Some(DialogPolicy::AutoAccept),
            dialog_timeout: Some(Duration::from_millis(300)),
            dialog_bridge: Some(BridgeMode::On),
            target_id: Some("T".into()),
            new_page: true,
        });
        assert_eq!(task.dialog_policy, DialogPolicy::AutoAccept);
        assert_eq!(task.dialog_timeout, Duration::from_millis(300));
        assert_eq!(task.dialog_bridge, BridgeMode::On);
        assert_eq!(
            Config {
                dialog_policy: base.dialog_policy,
                dialog_timeout: base.dialog_timeout,
                dialog_bridge: base.dialog_bridge,
                ..task
            },
            base
        );
    }

    #[test]
    fn security_switches_are_booleans_off_by_default() {
        let d = Config::default().security;
        assert!(!d.allow_file_urls && !d.allow_file_access && !d.allow_page_protocol);
        let c =
            Config::from_toml("[security]\nallow_file_access = true\nallow_page_protocol = true\n")
                .unwrap();
        assert!(c.security.allow_file_access && c.security.allow_page_protocol);
        assert!(!c.security.allow_file_urls);
        for key in [
            "allow_file_urls",
            "allow_file_access",
            "allow_page_protocol",
        ] {
            let e = Config::from_toml(&format!("[security]\n{key} = \"yes\"\n"))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("security.{key}")) && e.contains("yes"),
                "{e}"
            );
            assert!(e.contains("true or false"), "{e}");
        }
    }

    #[test]
    fn valid_values_apply() {
        let c = Config::from_toml(
            "[browser]\ndialog_policy = \"auto_accept\"\ndialog_timeout_s = 0.25\n",
        )
        .unwrap();
        assert_eq!(c.dialog_policy, DialogPolicy::AutoAccept);
        assert_eq!(c.dialog_timeout, Duration::from_millis(250));
    }
}
