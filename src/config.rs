//! Configuration (SPEC §12): [`Config`], what a registry applies to every supervisor, and the
//! per-task overrides next to it, [`StartOptions`] (as ureq keeps its `RequestLevelConfig` in its
//! `config.rs`), with the bounds their settings share.
//!
//! A `Config` is read by `config/load.rs` ([`Config::load`], [`Config::from_toml`]): the shipped
//! `config/default.toml`, then an optional user file, then `CDP_SUPERVISOR__SECTION__KEY`
//! environment overrides. Every value is validated; an invalid one is an [`Error::Config`]
//! naming the key, the value and what is allowed. There is no silent fallback. In code, start
//! from `Default` and the `with_*` setters (every struct here is `#[non_exhaustive]`, so new
//! settings can come without breaking anyone; its fields stay readable).
//!
//! This module depends on nothing of the crate but [`crate::error`] and [`crate::redact`]; the
//! `[security]` rules themselves ([`Security::check`]) live on the call path, in `security.rs`.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::Error;

mod limits;
mod load;
#[cfg(test)]
mod tests;

/// The first reconnect back-off (SPEC §3); doubles per attempt up to [`BACKOFF_MAX`].
pub const BACKOFF_START: Duration = Duration::from_millis(250);
/// The longest reconnect back-off.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// The longest deadline a single CDP call may have (SPEC §8): `supervisor.call_timeout_s` is at
/// most this, and a call's own timeout is clamped to it.
pub const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest `browser.dialog_timeout_s`, and a task's dialog timeout (one day).
pub const MAX_DIALOG_TIMEOUT: Duration = Duration::from_secs(86_400);
/// The longest `supervisor.start_timeout_s` in the configuration file (and the Python binding's
/// `start_timeout_s`). A start given its own bound in code
/// ([`crate::SupervisorRegistry::get_or_start_within`]) has no cap: only zero is refused.
pub const MAX_START_TIMEOUT: Duration = Duration::from_secs(600);

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

/// Caps on everything that grows with what the page does (SPEC §12, §14). Build one from
/// `Limits::default()` and the `with_*` setters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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

/// Everything a registry needs to know. `Default` equals the shipped `config/default.toml`;
/// build one from it and the `with_*` setters, or read one ([`Config::load`],
/// [`Config::from_toml`]). `Debug` redacts credentials in `cdp_url`.
#[derive(Clone, PartialEq)]
#[non_exhaustive]
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
    /// `browser.capture_console`: send `Runtime.enable` on every page, frame and worker session
    /// so that console errors and uncaught exceptions reach `console_errors` (SPEC §13). Off by
    /// default: a page can detect it (SPEC §19; the README says how).
    pub capture_console: bool,
    /// `browser.chrome_args`: extra command-line flags for a browser the supervisor launches.
    pub chrome_args: Vec<String>,
    /// `browser.ca_file`: extra CA certificates (PEM) trusted for `wss://`.
    pub ca_file: Option<PathBuf>,
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
    /// `mcp.allowed_hosts`: host names (`name` or `name:port`) the MCP server over HTTP accepts
    /// in `Host` and `Origin` besides the loopback names of its address (SPEC §15).
    pub allowed_hosts: Vec<String>,
}

/// What raw CDP calls through `browser_cdp` may do (SPEC §14). A page that prompt-injects an
/// agent could ask it for anything; these narrow it. The rules themselves are in
/// `src/security.rs`. Build one from `Security::default()` and the `with_*` setters (every
/// field is a setting of the `[security]` section; more may come).
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
            .field("capture_console", &self.capture_console)
            .field("chrome_args", &self.chrome_args)
            .field("ca_file", &self.ca_file)
            .field("start_timeout", &self.start_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("reconnect_attempts", &self.reconnect_attempts)
            .field("reconnect_backoff", &self.reconnect_backoff)
            .field("limits", &self.limits)
            .field("security", &self.security)
            .field("allowed_hosts", &self.allowed_hosts)
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
            capture_console: false,
            chrome_args: Vec::new(),
            ca_file: None,
            start_timeout: Duration::from_secs(15),
            call_timeout: Duration::from_secs(30),
            reconnect_attempts: 5,
            reconnect_backoff: BACKOFF_START,
            limits: Limits::default(),
            security: Security::default(),
            allowed_hosts: Vec::new(),
        }
    }
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

    /// Sets [`dialog_policy`](Config::dialog_policy).
    pub fn with_dialog_policy(mut self, policy: DialogPolicy) -> Config {
        self.dialog_policy = policy;
        self
    }

    /// Sets [`dialog_timeout`](Config::dialog_timeout).
    pub fn with_dialog_timeout(mut self, timeout: Duration) -> Config {
        self.dialog_timeout = timeout;
        self
    }

    /// Sets [`dialog_bridge`](Config::dialog_bridge).
    pub fn with_dialog_bridge(mut self, bridge: BridgeMode) -> Config {
        self.dialog_bridge = bridge;
        self
    }

    /// Sets [`cdp_url`](Config::cdp_url).
    pub fn with_cdp_url(mut self, url: impl Into<String>) -> Config {
        self.cdp_url = Some(url.into());
        self
    }

    /// Sets [`chrome_path`](Config::chrome_path).
    pub fn with_chrome_path(mut self, path: impl Into<String>) -> Config {
        self.chrome_path = Some(path.into());
        self
    }

    /// Sets [`follow_popups`](Config::follow_popups).
    pub fn with_follow_popups(mut self, follow: bool) -> Config {
        self.follow_popups = follow;
        self
    }

    /// Sets [`capture_console`](Config::capture_console).
    pub fn with_capture_console(mut self, capture: bool) -> Config {
        self.capture_console = capture;
        self
    }

    /// Sets [`chrome_args`](Config::chrome_args).
    pub fn with_chrome_args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Config {
        self.chrome_args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`ca_file`](Config::ca_file).
    pub fn with_ca_file(mut self, path: impl Into<PathBuf>) -> Config {
        self.ca_file = Some(path.into());
        self
    }

    /// Sets [`start_timeout`](Config::start_timeout).
    pub fn with_start_timeout(mut self, timeout: Duration) -> Config {
        self.start_timeout = timeout;
        self
    }

    /// Sets [`call_timeout`](Config::call_timeout).
    pub fn with_call_timeout(mut self, timeout: Duration) -> Config {
        self.call_timeout = timeout;
        self
    }

    /// Sets [`reconnect_attempts`](Config::reconnect_attempts).
    pub fn with_reconnect_attempts(mut self, attempts: u32) -> Config {
        self.reconnect_attempts = attempts;
        self
    }

    /// Sets [`reconnect_backoff`](Config::reconnect_backoff).
    pub fn with_reconnect_backoff(mut self, backoff: Duration) -> Config {
        self.reconnect_backoff = backoff;
        self
    }

    /// Sets [`limits`](Config::limits).
    pub fn with_limits(mut self, limits: Limits) -> Config {
        self.limits = limits;
        self
    }

    /// Sets [`allowed_hosts`](Config::allowed_hosts) (`mcp.allowed_hosts`).
    pub fn with_allowed_hosts(
        mut self,
        hosts: impl IntoIterator<Item = impl Into<String>>,
    ) -> Config {
        self.allowed_hosts = hosts.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`security`](Config::security).
    pub fn with_security(mut self, security: Security) -> Config {
        self.security = security;
        self
    }
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

    /// Sets [`allow_file_urls`](Security::allow_file_urls).
    pub fn with_allow_file_urls(mut self, allow: bool) -> Security {
        self.allow_file_urls = allow;
        self
    }

    /// Sets [`allow_file_access`](Security::allow_file_access).
    pub fn with_allow_file_access(mut self, allow: bool) -> Security {
        self.allow_file_access = allow;
        self
    }

    /// Sets [`allow_page_protocol`](Security::allow_page_protocol).
    pub fn with_allow_page_protocol(mut self, allow: bool) -> Security {
        self.allow_page_protocol = allow;
        self
    }

    /// Sets [`cdp_deny`](Security::cdp_deny).
    pub fn with_cdp_deny(
        mut self,
        patterns: impl IntoIterator<Item = impl Into<String>>,
    ) -> Security {
        self.cdp_deny = patterns.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`cdp_allow`](Security::cdp_allow).
    pub fn with_cdp_allow(
        mut self,
        patterns: impl IntoIterator<Item = impl Into<String>>,
    ) -> Security {
        self.cdp_allow = patterns.into_iter().map(Into::into).collect();
        self
    }
}

/// Per-task choices for [`SupervisorRegistry::get_or_start_with`]; the dialog overrides are
/// applied by [`Config::with_overrides`]. Build one from `StartOptions::default()` and the
/// `with_*` setters.
///
/// [`SupervisorRegistry::get_or_start_with`]: crate::SupervisorRegistry::get_or_start_with
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct StartOptions {
    /// Attach to this target instead of the first page.
    pub target_id: Option<String>,
    /// Override `browser.dialog_policy` for this task.
    pub dialog_policy: Option<DialogPolicy>,
    /// Override `browser.dialog_timeout_s` for this task: more than zero and at most a day, as
    /// in the configuration file (a start with another is an [`Error::Config`]).
    pub dialog_timeout: Option<Duration>,
    /// Override `browser.dialog_bridge` for this task.
    pub dialog_bridge: Option<BridgeMode>,
    /// Give the task a page of its own: `Target.createTarget {url: "about:blank"}` in a window
    /// of its own at start (ignored when `target_id` is set), and `Target.closeTarget` when the
    /// supervisor stops. Two tasks on one browser then never share a tab (nor each other's
    /// dialogs), and each task's page stays visible: it draws, runs `requestAnimationFrame` and
    /// routes clicks into its out-of-process iframes while other tasks open theirs.
    pub new_page: bool,
}

impl StartOptions {
    /// Sets [`target_id`](StartOptions::target_id).
    pub fn with_target_id(mut self, target_id: impl Into<String>) -> StartOptions {
        self.target_id = Some(target_id.into());
        self
    }

    /// Sets [`dialog_policy`](StartOptions::dialog_policy).
    pub fn with_dialog_policy(mut self, policy: DialogPolicy) -> StartOptions {
        self.dialog_policy = Some(policy);
        self
    }

    /// Sets [`dialog_timeout`](StartOptions::dialog_timeout).
    pub fn with_dialog_timeout(mut self, timeout: Duration) -> StartOptions {
        self.dialog_timeout = Some(timeout);
        self
    }

    /// Sets [`dialog_bridge`](StartOptions::dialog_bridge).
    pub fn with_dialog_bridge(mut self, bridge: BridgeMode) -> StartOptions {
        self.dialog_bridge = Some(bridge);
        self
    }

    /// Sets [`new_page`](StartOptions::new_page).
    pub fn with_new_page(mut self, new_page: bool) -> StartOptions {
        self.new_page = new_page;
        self
    }

    /// `Ok` when the overrides are within their settings' bounds (the one rule of
    /// [`check_seconds`]); every start checks this first.
    pub(crate) fn check(&self) -> Result<(), Error> {
        if let Some(t) = self.dialog_timeout {
            check_seconds("dialog_timeout_s", t, MAX_DIALOG_TIMEOUT)?;
        }
        Ok(())
    }
}

/// The one rule of every setting in seconds, wherever it is given (the configuration file, a
/// task's override, a tool's or the Python binding's argument): more than zero and at most
/// `max`. `key` names the setting as its giver spelled it (`browser.dialog_timeout_s`,
/// `dialog_timeout_s`); the error is an [`Error::Config`] with the value as given.
pub fn seconds_setting(key: &str, secs: f64, max: Duration) -> Result<Duration, Error> {
    positive_seconds(secs, max)
        .ok_or_else(|| invalid(key, &secs.to_string(), &seconds_allowed(max)))
}

/// [`seconds_setting`] for a value given as a [`Duration`] ([`Duration::MAX`] as `max`: no upper
/// bound).
pub fn check_seconds(key: &str, d: Duration, max: Duration) -> Result<Duration, Error> {
    if d.is_zero() || d > max {
        return Err(invalid(
            key,
            &d.as_secs_f64().to_string(),
            &seconds_allowed(max),
        ));
    }
    Ok(d)
}

/// `secs` as a duration when it is more than zero and at most `max` (never for NaN).
fn positive_seconds(secs: f64, max: Duration) -> Option<Duration> {
    if secs > 0.0 && secs <= max.as_secs_f64() {
        Duration::try_from_secs_f64(secs).ok()
    } else {
        None
    }
}

/// What [`seconds_setting`] allows, for its error.
fn seconds_allowed(max: Duration) -> String {
    if max == Duration::MAX {
        "a number of seconds > 0".into()
    } else {
        format!("a number of seconds > 0 and <= {}", max.as_secs())
    }
}

/// The error for a setting's invalid value.
fn invalid(key: &str, value: &str, allowed: &str) -> Error {
    Error::Config {
        key: key.to_string(),
        value: value.to_string(),
        allowed: allowed.to_string(),
    }
}
