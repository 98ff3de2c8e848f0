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
//! This module depends on nothing of the crate but [`crate::error`], [`crate::quote`] and
//! [`crate::redact`]; the `[security]` rules themselves ([`Security::check`]) live on the call path, in `security.rs`.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::Error;

mod access;
mod downloads;
mod endpoint;
mod limits;
mod load;
mod rules;
mod security;
mod settings;
#[cfg(test)]
mod tests;

pub use downloads::Downloads;
pub use endpoint::EndpointSettings;
use rules::invalid;
pub use rules::{check_seconds, seconds_setting};
pub use security::Security;
pub use settings::{SETTING_KEYS, SettingValue};

/// The first reconnect back-off (SPEC §3); doubles per attempt up to [`BACKOFF_MAX`].
pub const BACKOFF_START: Duration = Duration::from_millis(250);
/// The longest reconnect back-off.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// The longest deadline a single CDP call may have (SPEC §8): `supervisor.call_timeout_s` is at
/// most this, and a call's own timeout is clamped to it.
pub const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest `browser.dialog_timeout_s`, and a task's dialog timeout (one day).
pub const MAX_DIALOG_TIMEOUT: Duration = Duration::from_secs(86_400);
/// The longest `mcp.http_head_timeout_s`.
pub const MAX_HTTP_HEAD_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest `supervisor.start_timeout_s` in the configuration file (and the Python binding's
/// `start_timeout_s`). A start given its own bound in code
/// ([`crate::StartRequest::with_timeout`]) has no cap: only zero is refused.
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
    /// What [`DialogPolicy::parse`] takes, for an error.
    pub(crate) const ALLOWED: &str = "one of must_respond, auto_dismiss, auto_accept";

    /// Parses the config spelling.
    pub fn parse(s: &str) -> Result<Self, Error> {
        match s {
            "must_respond" => Ok(DialogPolicy::MustRespond),
            "auto_dismiss" => Ok(DialogPolicy::AutoDismiss),
            "auto_accept" => Ok(DialogPolicy::AutoAccept),
            _ => Err(invalid("browser.dialog_policy", s, Self::ALLOWED)),
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
    /// What [`BridgeMode::parse`] takes, for an error.
    pub(crate) const ALLOWED: &str = "one of off, on, auto";

    /// Parses the config spelling.
    pub fn parse(s: &str) -> Result<Self, Error> {
        match s {
            "off" => Ok(BridgeMode::Off),
            "on" => Ok(BridgeMode::On),
            "auto" => Ok(BridgeMode::Auto),
            _ => Err(invalid("browser.dialog_bridge", s, Self::ALLOWED)),
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

impl DialogAction {
    /// Reads the action a caller names (`browser_dialog`'s `action`): `accept` or `dismiss`,
    /// exactly, for [`Supervisor::respond_to_dialog`](crate::Supervisor::respond_to_dialog). Anything else is
    /// [`Error::InvalidArgument`], naming both.
    pub fn parse(action: &str) -> Result<DialogAction, Error> {
        match action {
            "accept" => Ok(DialogAction::Accept),
            "dismiss" => Ok(DialogAction::Dismiss),
            _ => Err(invalid_action(crate::quote::quoted(action))),
        }
    }
}

/// The error for an action that is neither, `shown` through [`crate::quote`] (it may be huge).
pub(crate) fn invalid_action(shown: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!(
        "invalid action {shown}: use \"accept\" or \"dismiss\""
    ))
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
    dialog_policy: DialogPolicy,
    /// `browser.dialog_timeout_s`: the `must_respond` watchdog.
    dialog_timeout: Duration,
    /// `browser.dialog_bridge`.
    dialog_bridge: BridgeMode,
    /// `browser.cdp_url`: empty means "launch a local browser".
    cdp_url: Option<String>,
    /// `browser.chrome_path`.
    chrome_path: Option<String>,
    /// `browser.follow_popups`: follow the pages the task's page opens (popups, new tabs).
    follow_popups: bool,
    /// `browser.capture_console`: send `Runtime.enable` on every page, frame and worker session
    /// so that console errors and uncaught exceptions reach `console_errors` (SPEC §13). Off by
    /// default: a page can detect it (SPEC §19; the README says how).
    capture_console: bool,
    /// `browser.chrome_args`: extra command-line flags for a browser the supervisor launches.
    chrome_args: Vec<String>,
    /// `browser.ca_file`: extra CA certificates (PEM) trusted for `wss://`.
    ca_file: Option<PathBuf>,
    /// `supervisor.start_timeout_s`.
    start_timeout: Duration,
    /// `supervisor.call_timeout_s`: default for calls that do not give one.
    call_timeout: Duration,
    /// `supervisor.reconnect_attempts`.
    reconnect_attempts: u32,
    /// The first reconnect back-off, doubling per attempt up to 5 s (SPEC §3: 250 ms). Not read
    /// from the configuration file: only tests that race a reconnect shorten it.
    reconnect_backoff: Duration,
    /// `limits.*`.
    limits: Limits,
    /// `security.*`: what `browser_cdp` may do (SPEC §14).
    security: Security,
    /// `downloads.*`: where each task's downloads go (issue 31).
    downloads: Downloads,
    /// `endpoint.*`: the tasks' CDP endpoint (issue 30).
    endpoint: EndpointSettings,
    /// `mcp.allowed_hosts`: host names (`name` or `name:port`) the MCP server over HTTP accepts
    /// in `Host` and `Origin` besides the loopback names of its address (SPEC §15).
    allowed_hosts: Vec<String>,
    /// `mcp.http_head_timeout_s`: how long a request's head may take over HTTP (a connection's
    /// first from the moment it opens, a later one from its first byte); then it is closed.
    http_head_timeout: Duration,
    /// `mcp.http_max_new_connections`: HTTP connections that have not yet sent a request the
    /// access rules let in, at most this many at once (past it the oldest is closed).
    http_max_new_connections: usize,
    /// `mcp.http_max_listen_streams`: `subscriptions/listen` streams open over HTTP at once
    /// (their connections count here, not toward the connection limit).
    http_max_listen_streams: usize,
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
            .field("downloads", &self.downloads)
            .field("endpoint", &self.endpoint)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("http_head_timeout", &self.http_head_timeout)
            .field("http_max_new_connections", &self.http_max_new_connections)
            .field("http_max_listen_streams", &self.http_max_listen_streams)
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
            downloads: Downloads::default(),
            endpoint: EndpointSettings::default(),
            allowed_hosts: Vec::new(),
            http_head_timeout: Duration::from_secs(5),
            http_max_new_connections: 128,
            http_max_listen_streams: 16,
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
}

/// Per-task choices for a start ([`StartRequest::with_options`]); the dialog overrides are
/// applied by [`Config::with_overrides`]. Build one from `StartOptions::default()` and the
/// `with_*` setters.
///
/// [`StartRequest::with_options`]: crate::StartRequest::with_options
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct StartOptions {
    /// Attach to this target instead of the first page (refused, with
    /// `security.isolate_tasks`, when another task of the registry owns it).
    pub target_id: Option<String>,
    /// Override `browser.dialog_policy` for this task.
    pub dialog_policy: Option<DialogPolicy>,
    /// Override `browser.dialog_timeout_s` for this task: more than zero and at most a day, as
    /// in the configuration file (a start with another is an [`Error::Config`]).
    pub dialog_timeout: Option<Duration>,
    /// Override `browser.dialog_bridge` for this task.
    pub dialog_bridge: Option<BridgeMode>,
    /// Give the task a page of its own (SPEC §4 `own_page`): a fresh `about:blank`
    /// (`Target.createTarget`) in a window of its own at start, never an existing page (ignored
    /// when `target_id` is set); re-attached after a reconnect while it exists, and only when it
    /// is gone a new one is made (logged, and the snapshot's `page_replaced` says so); closed
    /// when the supervisor stops. Two tasks on one browser then never share a tab (nor each
    /// other's dialogs), and each task's page stays visible: it draws, runs
    /// `requestAnimationFrame` and routes clicks into its out-of-process iframes while other
    /// tasks open theirs.
    pub own_page: bool,
    /// Deprecated: the old name of [`own_page`](StartOptions::own_page); either one set means
    /// the same.
    pub new_page: bool,
    /// Which page of the browser the task takes when it names none (`target_id`) and owns
    /// none (`own_page`).
    pub page_choice: PageChoice,
}

/// Which existing page a start takes when it names no target and owns no page
/// ([`StartOptions::page_choice`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PageChoice {
    /// The first page with a web URL (not `chrome://`, `devtools://` or an extension's page);
    /// a new `about:blank` when there is none.
    #[default]
    FirstUsable,
    /// The first `type == "page"` target `Target.getTargets` lists, whatever its URL (a fresh
    /// headless Chromium's only page is its new-tab page): what Hermes took before its owned
    /// tab, for its drop-in. A listed page that `Target.attachToTarget` no longer finds (a page
    /// just closed stays listed for a moment) is passed over for the next; a new `about:blank`
    /// when there is none.
    FirstListed,
}

impl PageChoice {
    /// `first_usable` or `first_listed`.
    pub fn as_str(self) -> &'static str {
        match self {
            PageChoice::FirstUsable => "first_usable",
            PageChoice::FirstListed => "first_listed",
        }
    }

    /// Reads [`PageChoice::as_str`]'s spelling; anything else is [`Error::InvalidArgument`].
    pub fn parse(s: &str) -> Result<Self, Error> {
        match s {
            "first_usable" => Ok(PageChoice::FirstUsable),
            "first_listed" => Ok(PageChoice::FirstListed),
            _ => Err(Error::InvalidArgument(format!(
                "invalid page choice {}: use \"first_usable\" or \"first_listed\"",
                crate::quote::quoted(s)
            ))),
        }
    }
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

    /// Sets [`own_page`](StartOptions::own_page).
    pub fn with_own_page(mut self, own_page: bool) -> StartOptions {
        self.own_page = own_page;
        self
    }

    /// Sets [`page_choice`](StartOptions::page_choice).
    pub fn with_page_choice(mut self, choice: PageChoice) -> StartOptions {
        self.page_choice = choice;
        self
    }

    /// Deprecated: [`with_own_page`](StartOptions::with_own_page), its old name.
    pub fn with_new_page(self, new_page: bool) -> StartOptions {
        self.with_own_page(new_page)
    }

    /// Whether the task's page is its own: created at start, re-attached (or replaced when
    /// gone) after a reconnect, closed at stop. A named `target_id` wins.
    pub(crate) fn owns_page(&self) -> bool {
        (self.own_page || self.new_page) && self.target_id.is_none()
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
