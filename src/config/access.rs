//! Reading and building a [`Config`]: a getter per setting, and the `with_*` setters. A setter
//! whose type admits a value the setting refuses (a number out of bounds, a malformed list
//! item, a URL of another scheme) checks it as [`Config::set`] checks the configuration file's
//! value and returns `Result<Config, Error>`: an invalid value is the [`Error::Config`] that
//! `from_toml` gives for it, naming the key. A setter whose type admits only valid values (an
//! enum, a switch) returns the `Config`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::rules::check_seconds;
use super::settings::{SettingValue, checked_ca_file, checked_cdp_url, checked_downloads_dir};
use super::{BridgeMode, Config, DialogPolicy, Downloads, EndpointSettings, Limits, Security};
use crate::error::Error;

/// Strings as a list [`SettingValue`].
fn text_list(items: impl IntoIterator<Item = impl Into<String>>) -> SettingValue {
    SettingValue::List(
        items
            .into_iter()
            .map(|s| SettingValue::Text(s.into()))
            .collect(),
    )
}

impl Config {
    /// `browser.dialog_policy`.
    pub fn dialog_policy(&self) -> DialogPolicy {
        self.dialog_policy
    }
    /// `browser.dialog_timeout_s`: the `must_respond` watchdog.
    pub fn dialog_timeout(&self) -> Duration {
        self.dialog_timeout
    }
    /// `browser.dialog_bridge`.
    pub fn dialog_bridge(&self) -> BridgeMode {
        self.dialog_bridge
    }
    /// `browser.cdp_url`: `None` means "launch a local browser". It may hold credentials:
    /// show it through [`crate::redact_url`].
    pub fn cdp_url(&self) -> Option<&str> {
        self.cdp_url.as_deref()
    }
    /// `browser.chrome_path`.
    pub fn chrome_path(&self) -> Option<&str> {
        self.chrome_path.as_deref()
    }
    /// `browser.follow_popups`: follow the pages the task's page opens (popups, new tabs).
    pub fn follow_popups(&self) -> bool {
        self.follow_popups
    }
    /// `browser.capture_console`: `Runtime.enable` on every session (SPEC §13; off by default).
    pub fn capture_console(&self) -> bool {
        self.capture_console
    }
    /// `browser.chrome_args`: extra command-line flags for a browser the supervisor launches.
    pub fn chrome_args(&self) -> &[String] {
        &self.chrome_args
    }
    /// `browser.ca_file`: extra CA certificates (PEM) trusted for `wss://`.
    pub fn ca_file(&self) -> Option<&Path> {
        self.ca_file.as_deref()
    }
    /// `supervisor.start_timeout_s`.
    pub fn start_timeout(&self) -> Duration {
        self.start_timeout
    }
    /// `supervisor.call_timeout_s`: default for calls that do not give one.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }
    /// `supervisor.reconnect_attempts`.
    pub fn reconnect_attempts(&self) -> u32 {
        self.reconnect_attempts
    }
    /// The first reconnect back-off (SPEC §3: 250 ms; not a setting of the file).
    pub fn reconnect_backoff(&self) -> Duration {
        self.reconnect_backoff
    }
    /// `limits.*`.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
    /// `security.*`: what `browser_cdp` may do (SPEC §14).
    pub fn security(&self) -> &Security {
        &self.security
    }
    /// `downloads.*`: where each task's downloads go (issue 31).
    pub fn downloads(&self) -> &Downloads {
        &self.downloads
    }
    /// `endpoint.*`: the tasks' CDP endpoint (issue 30).
    pub fn endpoint(&self) -> &EndpointSettings {
        &self.endpoint
    }
    /// `mcp.allowed_hosts` (lowercase).
    pub fn allowed_hosts(&self) -> &[String] {
        &self.allowed_hosts
    }
    /// `mcp.http_head_timeout_s`.
    pub fn http_head_timeout(&self) -> Duration {
        self.http_head_timeout
    }
    /// `mcp.http_max_new_connections`.
    pub fn http_max_new_connections(&self) -> usize {
        self.http_max_new_connections
    }
    /// `mcp.http_max_listen_streams`.
    pub fn http_max_listen_streams(&self) -> usize {
        self.http_max_listen_streams
    }

    /// Sets [`dialog_policy`](Config::dialog_policy).
    pub fn with_dialog_policy(mut self, policy: DialogPolicy) -> Config {
        self.dialog_policy = policy;
        self
    }

    /// Sets [`dialog_timeout`](Config::dialog_timeout): more than zero, at most a day.
    pub fn with_dialog_timeout(mut self, timeout: Duration) -> Result<Config, Error> {
        self.dialog_timeout = seconds("browser.dialog_timeout_s", timeout)?;
        Ok(self)
    }

    /// Sets [`dialog_bridge`](Config::dialog_bridge).
    pub fn with_dialog_bridge(mut self, bridge: BridgeMode) -> Config {
        self.dialog_bridge = bridge;
        self
    }

    /// Sets [`cdp_url`](Config::cdp_url): a `ws://`, `wss://`, `http://` or `https://` URL
    /// (empty: launch a local browser).
    pub fn with_cdp_url(mut self, url: impl Into<String>) -> Result<Config, Error> {
        self.cdp_url = checked_cdp_url(url.into())?;
        Ok(self)
    }

    /// Sets [`chrome_path`](Config::chrome_path) (empty: find one).
    pub fn with_chrome_path(mut self, path: impl Into<String>) -> Config {
        self.chrome_path = Some(path.into()).filter(|p| !p.trim().is_empty());
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

    /// Sets [`chrome_args`](Config::chrome_args): `--switch[=value]` flags, not the ones the
    /// launch sets itself.
    pub fn with_chrome_args(
        mut self,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Config, Error> {
        self.set("browser.chrome_args", text_list(args))?;
        Ok(self)
    }

    /// Sets [`ca_file`](Config::ca_file): an existing file.
    pub fn with_ca_file(mut self, path: impl Into<PathBuf>) -> Result<Config, Error> {
        self.ca_file = checked_ca_file(Some(path.into()))?;
        Ok(self)
    }

    /// Sets [`start_timeout`](Config::start_timeout): more than zero, at most 600 s.
    pub fn with_start_timeout(mut self, timeout: Duration) -> Result<Config, Error> {
        self.start_timeout = seconds("supervisor.start_timeout_s", timeout)?;
        Ok(self)
    }

    /// A start's own bound given in code (a [`crate::StartRequest`]'s timeout):
    /// unlike the setting, it has no cap; the caller has refused zero.
    pub(crate) fn with_start_bound(mut self, timeout: Duration) -> Config {
        self.start_timeout = timeout;
        self
    }

    /// Sets [`call_timeout`](Config::call_timeout): more than zero, at most 300 s.
    pub fn with_call_timeout(mut self, timeout: Duration) -> Result<Config, Error> {
        self.call_timeout = seconds("supervisor.call_timeout_s", timeout)?;
        Ok(self)
    }

    /// Sets [`reconnect_attempts`](Config::reconnect_attempts): at most 100.
    pub fn with_reconnect_attempts(mut self, attempts: u32) -> Result<Config, Error> {
        self.set("supervisor.reconnect_attempts", attempts.into())?;
        Ok(self)
    }

    /// Sets [`reconnect_backoff`](Config::reconnect_backoff) (only tests that race a reconnect
    /// shorten it).
    pub fn with_reconnect_backoff(mut self, backoff: Duration) -> Config {
        self.reconnect_backoff = backoff;
        self
    }

    /// Sets [`limits`](Config::limits), each within the bounds of its `limits.*` setting
    /// (`frames_max`, no setting of the file, as given).
    pub fn with_limits(mut self, limits: Limits) -> Result<Config, Error> {
        let l = &limits;
        for (key, n) in [
            ("limits.frame_tree_max_entries", l.frame_tree_max_entries),
            (
                "limits.frame_tree_max_oopif_depth",
                l.frame_tree_max_oopif_depth,
            ),
            ("limits.recent_dialogs_max", l.recent_dialogs_max),
            ("limits.console_errors_max", l.console_errors_max),
            ("limits.max_message_bytes", l.max_message_bytes),
            ("limits.pending_dialogs_max", l.pending_dialogs_max),
            ("limits.pages_max", l.pages_max),
            ("limits.watched_pages_max", l.watched_pages_max),
        ] {
            self.set(key, n.into())?;
        }
        self.limits = limits;
        Ok(self)
    }

    /// Sets [`allowed_hosts`](Config::allowed_hosts): `name` or `name:port` (kept lowercase).
    pub fn with_allowed_hosts(
        mut self,
        hosts: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Config, Error> {
        self.set("mcp.allowed_hosts", text_list(hosts))?;
        Ok(self)
    }

    /// Sets [`security`](Config::security): its patterns and directories checked as the
    /// `[security]` section's are.
    pub fn with_security(mut self, security: Security) -> Result<Config, Error> {
        self.set("security.cdp_deny", text_list(security.cdp_deny.clone()))?;
        self.set("security.cdp_allow", text_list(security.cdp_allow.clone()))?;
        let dirs = security
            .upload_dirs
            .iter()
            .map(|d| d.to_string_lossy().into_owned());
        self.set("security.upload_dirs", text_list(dirs))?;
        self.security = security;
        Ok(self)
    }

    /// Sets [`downloads`](Config::downloads): its `dir` absolute.
    pub fn with_downloads(mut self, downloads: Downloads) -> Result<Config, Error> {
        checked_downloads_dir(downloads.dir.clone())?;
        self.downloads = downloads;
        Ok(self)
    }

    /// Sets [`endpoint`](Config::endpoint): its `listen` on loopback, its origins checked as
    /// the `[endpoint]` section's are.
    pub fn with_endpoint(mut self, endpoint: EndpointSettings) -> Result<Config, Error> {
        self.set(
            "endpoint.listen",
            SettingValue::Text(endpoint.listen.clone()),
        )?;
        let origins = text_list(endpoint.allowed_origins.clone());
        self.set("endpoint.allowed_origins", origins)?;
        self.endpoint.all_targets = endpoint.all_targets;
        Ok(self)
    }

    /// Sets [`http_head_timeout`](Config::http_head_timeout): more than zero, at most 60 s.
    pub fn with_http_head_timeout(mut self, timeout: Duration) -> Result<Config, Error> {
        self.http_head_timeout = seconds("mcp.http_head_timeout_s", timeout)?;
        Ok(self)
    }

    /// Sets [`http_max_new_connections`](Config::http_max_new_connections): 1 to 4096.
    pub fn with_http_max_new_connections(mut self, n: usize) -> Result<Config, Error> {
        self.set("mcp.http_max_new_connections", n.into())?;
        Ok(self)
    }

    /// Sets [`http_max_listen_streams`](Config::http_max_listen_streams): 1 to 64.
    pub fn with_http_max_listen_streams(mut self, n: usize) -> Result<Config, Error> {
        self.set("mcp.http_max_listen_streams", n.into())?;
        Ok(self)
    }
}

/// A duration for the seconds setting `key`, under that setting's bound.
fn seconds(key: &str, d: Duration) -> Result<Duration, Error> {
    let max = super::settings::seconds_max(key).unwrap_or(Duration::MAX);
    check_seconds(key, d, max)
}

impl From<u32> for SettingValue {
    fn from(n: u32) -> SettingValue {
        SettingValue::Int(n.into())
    }
}

impl From<usize> for SettingValue {
    fn from(n: usize) -> SettingValue {
        SettingValue::Int(n as i128)
    }
}
