//! `[endpoint]` (issue 30, SPEC §18): the tasks' CDP endpoint (`crate::cdp_endpoint`): where
//! its one listener binds, what its clients see, and which web origins may connect.

use std::net::{IpAddr, SocketAddr};

use super::rules::invalid;
use crate::error::Error;

/// What `endpoint.listen` takes.
pub(super) const LISTEN: &str = "a loopback address with a port, such as \"127.0.0.1:0\" \
     (any free port), \"127.0.0.1:9333\", \"[::1]:9333\" or \"localhost:9333\"";

/// What an item of `endpoint.allowed_origins` takes.
pub(super) const ORIGIN: &str = "an origin such as \"http://localhost:3000\" (scheme://host[:port], \
     no path), or \"*\" for any";

/// What `endpoint.allowed_origins` takes.
pub(super) const ORIGINS: &str =
    r#"a list of origins such as ["http://localhost:3000"], or ["*"] for any"#;

/// The tasks' CDP endpoint. Build one from `EndpointSettings::default()` and the `with_*`
/// setters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EndpointSettings {
    /// `endpoint.listen`: where the registry's one listener binds (loopback only; port 0: any
    /// free port), as `ip:port`.
    pub listen: String,
    /// `endpoint.all_targets`: a client sees every target of the browser, not only its task's.
    pub all_targets: bool,
    /// `endpoint.allowed_origins`: a WebSocket upgrade that carries an `Origin` (a web page) is
    /// refused (403) unless its origin is listed here, or `*` is (Chromium's
    /// `--remote-allow-origins` rule). Kept lowercase, without a trailing `/`.
    pub allowed_origins: Vec<String>,
}

impl Default for EndpointSettings {
    fn default() -> Self {
        EndpointSettings {
            listen: "127.0.0.1:0".into(),
            all_targets: false,
            allowed_origins: Vec::new(),
        }
    }
}

impl EndpointSettings {
    /// Sets [`listen`](EndpointSettings::listen): a loopback address with a port (else the
    /// [`Error::Config`] naming `endpoint.listen`).
    pub fn with_listen(mut self, addr: impl Into<String>) -> Result<EndpointSettings, Error> {
        self.listen = checked_listen(&addr.into())?;
        Ok(self)
    }

    /// Sets [`all_targets`](EndpointSettings::all_targets).
    pub fn with_all_targets(mut self, all: bool) -> EndpointSettings {
        self.all_targets = all;
        self
    }

    /// Sets [`allowed_origins`](EndpointSettings::allowed_origins): each an origin
    /// (`scheme://host[:port]`) or `*` (else the [`Error::Config`] naming the item).
    pub fn with_allowed_origins(
        mut self,
        origins: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<EndpointSettings, Error> {
        let mut checked = Vec::new();
        for (i, o) in origins.into_iter().enumerate() {
            let o = o.into();
            let key = format!("endpoint.allowed_origins[{i}]");
            checked.push(checked_origin(&o).ok_or_else(|| invalid(&key, &o, ORIGIN))?);
        }
        self.allowed_origins = checked;
        Ok(self)
    }

    /// Whether a WebSocket upgrade carrying `Origin: origin` may connect: only when the origin
    /// is listed, or `*` is (compared without case and without a trailing `/`).
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
        self.allowed_origins
            .iter()
            .any(|o| o == "*" || *o == origin)
    }
}

/// `endpoint.listen`: `ip:port` (or `localhost:port`) on loopback; kept as `ip:port`.
pub(super) fn checked_listen(s: &str) -> Result<String, Error> {
    let t = s.trim();
    let addr = match t.strip_prefix("localhost:") {
        Some(port) => port
            .parse::<u16>()
            .ok()
            .map(|p| SocketAddr::from(([127, 0, 0, 1], p))),
        None => t.parse::<SocketAddr>().ok(),
    };
    match addr {
        Some(a) if loopback(a.ip()) => Ok(a.to_string()),
        _ => Err(invalid("endpoint.listen", s, LISTEN)),
    }
}

fn loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v| v.is_loopback()),
    }
}

/// An item of `endpoint.allowed_origins`: `*`, or `scheme://host[:port]` (no path, query,
/// user or blank), kept lowercase without a trailing `/`.
pub(super) fn checked_origin(s: &str) -> Option<String> {
    let s = s.trim();
    if s == "*" {
        return Some(s.to_string());
    }
    let o = s.trim_end_matches('/').to_ascii_lowercase();
    let (scheme, rest) = o.split_once("://")?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    let rest_ok = !rest.is_empty()
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':' | '[' | ']'));
    (scheme_ok && rest_ok).then_some(o)
}
