//! Turning what the user gave into a WebSocket URL (SPEC §9): `ws://`/`wss://` pass through,
//! `http://host:port[/prefix][?query]` is resolved through `GET [/prefix]/json/version[?query]`
//! (5 s bound, or less when the caller's deadline is nearer). The path prefix and the query are
//! kept because hosted endpoints (Browserless's `http://host:3000/?token=T`) authenticate the
//! discovery request too. The request itself ([`http_get`]) reads chunked, `Content-Length` and
//! until-close answers (at most 1 MiB) and follows up to 5 redirects, never to another scheme;
//! credentials go only to the host they were given for (see
//! [`http_get::get_following_redirects`] for the policy). The resolved URL gets the user's query
//! and userinfo when it has none of its own, unless discovery was redirected to another host and
//! the URL is not on the user's host.
//!
//! [`connect`] is the whole connect (discovery, TCP, TLS, the WebSocket upgrade) under one
//! [`Deadline`]; [`probe`] and [`cdp_available`] are the availability gate, and connect with the
//! same settings ([`connect_options`]: `browser.ca_file` for `wss://`) as a supervisor does.

use std::time::Duration;

use crate::config::Config;
use crate::deadline::Deadline;
use crate::error::Error;
use crate::http_get;
use crate::redact::{Secrets, redact_url};
use crate::transport::{ConnectOptions, Transport};

/// Bound on resolving an `http://` endpoint.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Bound on [`cdp_available`] (and `cdp-supervisor check`): discovery and the connect together.
pub const AVAILABLE_TIMEOUT: Duration = Duration::from_secs(5);

/// Resolves `url` to a WebSocket URL (within `RESOLVE_TIMEOUT`).
pub fn resolve(url: &str) -> Result<String, Error> {
    resolve_until(url, Deadline::after(RESOLVE_TIMEOUT))
}

/// Resolves `url` to a WebSocket URL; `http://` discovery ends by `deadline` (and within
/// [`RESOLVE_TIMEOUT`] in any case).
pub fn resolve_until(url: &str, deadline: Deadline) -> Result<String, Error> {
    let invalid = |reason: &str| Error::InvalidUrl {
        url: redact_url(url),
        reason: reason.to_string(),
    };
    let parsed = url::Url::parse(url).map_err(|e| invalid(&e.to_string()))?;
    match parsed.scheme() {
        "ws" | "wss" => Ok(url.to_string()),
        "http" => json_version(
            &parsed,
            url,
            deadline.earliest(Deadline::after(RESOLVE_TIMEOUT)),
        ),
        "https" => Err(invalid(
            "https:// endpoints are not supported; give the wss:// URL",
        )),
        other => Err(invalid(&format!(
            "unsupported scheme {}: use ws://, wss:// or http://host:port",
            crate::quote::quoted(other)
        ))),
    }
}

/// Resolves `url` and connects to it: discovery, TCP, TLS and the WebSocket upgrade all end by
/// `deadline`, and the connect part also within `opts.connect_timeout`.
pub fn connect(url: &str, opts: &ConnectOptions, deadline: Deadline) -> Result<Transport, Error> {
    let ws = resolve_until(url, deadline)?;
    Transport::connect_until(
        &ws,
        opts,
        deadline.earliest(Deadline::after(opts.connect_timeout)),
    )
}

/// The `/json/version` URL under the user's path prefix, with the user's query (and userinfo,
/// which becomes `Authorization`).
fn json_version_url(parsed: &url::Url) -> url::Url {
    let path = parsed.path().trim_end_matches('/');
    // A user who pasted the discovery URL itself gets the same request.
    let prefix = path.strip_suffix("/json/version").unwrap_or(path);
    let mut url = parsed.clone();
    url.set_path(&format!("{prefix}/json/version"));
    url.set_fragment(None);
    url
}

/// `GET /json/version` of the `http://` endpoint `parsed` (`raw` as the user gave it): its
/// JSON, and whether a redirect led to another host.
fn fetch_version(
    parsed: &url::Url,
    raw: &str,
    deadline: Deadline,
) -> Result<(serde_json::Value, bool), Error> {
    let secrets = Secrets::of(raw);
    let fail = |reason: String| Error::Connect {
        url: redact_url(raw),
        reason: secrets.scrub(&reason),
    };
    let fetched = http_get::get_following_redirects(&json_version_url(parsed), &secrets, deadline)
        .map_err(fail)?;
    let answer = fetched.answer;
    if answer.code != 200 {
        let status = &answer.status;
        let hint = if matches!(answer.code, 401 | 403) {
            " (does the endpoint want a token? keep it in the URL, e.g. http://host:3000/?token=...)"
        } else {
            ""
        };
        return Err(fail(format!("/json/version answered {status:?}{hint}")));
    }
    let json = String::from_utf8_lossy(&answer.body);
    let v: serde_json::Value = serde_json::from_str(json.trim())
        .map_err(|e| fail(format!("/json/version is not JSON: {e}")))?;
    Ok((v, fetched.left_origin))
}

/// What the browser behind `cdp_url` says of itself at `/json/version` (`Browser`,
/// `User-Agent`, ...): asked at the `http://` URL itself, or for a `ws://` URL at its host
/// (under the path before `/devtools/`, with its query). `wss://` has no plain discovery.
pub(crate) fn browser_version(
    cdp_url: &str,
    deadline: Deadline,
) -> Result<serde_json::Value, Error> {
    let invalid = |reason: &str| Error::InvalidUrl {
        url: redact_url(cdp_url),
        reason: reason.to_string(),
    };
    let mut parsed = url::Url::parse(cdp_url).map_err(|e| invalid(&e.to_string()))?;
    match parsed.scheme() {
        "http" => {}
        "ws" => {
            let path = parsed.path().to_string();
            let prefix = path.split_once("/devtools/").map_or("", |(p, _)| p);
            parsed.set_path(&format!("{prefix}/"));
            parsed
                .set_scheme("http")
                .map_err(|()| invalid("no http:// discovery for this URL"))?;
        }
        _ => return Err(invalid("no http:// discovery for this URL")),
    }
    let deadline = deadline.earliest(Deadline::after(RESOLVE_TIMEOUT));
    fetch_version(&parsed, cdp_url, deadline).map(|(v, _)| v)
}

fn json_version(parsed: &url::Url, raw: &str, deadline: Deadline) -> Result<String, Error> {
    let secrets = Secrets::of(raw);
    let fail = |reason: String| Error::Connect {
        url: redact_url(raw),
        reason: secrets.scrub(&reason),
    };
    let (v, left_origin) = fetch_version(parsed, raw, deadline)?;
    let ws = v["webSocketDebuggerUrl"]
        .as_str()
        .ok_or_else(|| fail("/json/version has no webSocketDebuggerUrl".into()))?;
    let mut resolved =
        url::Url::parse(ws).map_err(|e| fail(format!("bad webSocketDebuggerUrl: {e}")))?;
    // Keep the credentials the user gave on the resolved URL (hosted endpoints need them), as
    // long as the host they were given for named it: after a redirect to another host, only a
    // URL back on the user's own host gets them.
    let same_host = http_get::origin(&resolved) == http_get::origin(parsed);
    if !left_origin || same_host {
        if resolved.query().is_none() && parsed.query().is_some() {
            resolved.set_query(parsed.query());
        }
        if resolved.username().is_empty() && !parsed.username().is_empty() {
            let _ = resolved.set_username(parsed.username());
            let _ = resolved.set_password(parsed.password());
        }
    }
    Ok(resolved.to_string())
}

/// The connect settings `config` gives (what [`Supervisor::start`](crate::Supervisor) uses):
/// the TLS roots with `browser.ca_file`, the largest message, and a connect bound of
/// `supervisor.start_timeout_s` (at most 10 s).
pub(crate) fn connect_options(config: &Config) -> ConnectOptions {
    ConnectOptions {
        connect_timeout: config.start_timeout().min(Duration::from_secs(10)),
        max_message_bytes: config.limits().max_message_bytes,
        ca_file: config.ca_file().map(Into::into),
    }
}

/// Connects to `url` (resolution plus a WebSocket handshake) with the settings a supervisor
/// started with `config` would use (`browser.ca_file` included), and
/// disconnects again: `Ok` when a CDP endpoint answers, else why not (credentials redacted).
/// Bounded by `supervisor.start_timeout_s` and by [`AVAILABLE_TIMEOUT`], whichever is shorter.
pub fn probe(url: &str, config: &Config) -> Result<(), Error> {
    let deadline = Deadline::after(config.start_timeout().min(AVAILABLE_TIMEOUT));
    connect(url, &connect_options(config), deadline).map(|t| t.shutdown())
}

/// True when a CDP endpoint answers at `url` (resolution plus a WebSocket handshake), within
/// [`AVAILABLE_TIMEOUT`] in all. Never panics.
///
/// It connects as a supervisor would with the configuration [`Config::load`]`(None)` gives
/// (`config/default.toml`, `$CDP_SUPERVISOR_CONFIG`, the `CDP_SUPERVISOR__*` environment), so a
/// `browser.ca_file` set there is trusted for `wss://`. An invalid configuration is logged and
/// gives `false`: no connect could be made with it. [`cdp_available_with`] takes a [`Config`].
pub fn cdp_available(url: &str) -> bool {
    match Config::load(None) {
        Ok(config) => cdp_available_with(url, &config),
        Err(e) => {
            log::warn!("cdp_available: the configuration is invalid: {e}");
            false
        }
    }
}

/// [`cdp_available`] with the settings of `config` (its `browser.ca_file` and start bound).
pub fn cdp_available_with(url: &str, config: &Config) -> bool {
    probe(url, config).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_keeps_the_path_prefix_and_the_query() {
        let t = |u: &str| {
            let url = json_version_url(&url::Url::parse(u).unwrap());
            match url.query() {
                Some(q) => format!("{}?{q}", url.path()),
                None => url.path().to_string(),
            }
        };
        assert_eq!(t("http://h:9222"), "/json/version");
        assert_eq!(t("http://h:3000/?token=T"), "/json/version?token=T");
        assert_eq!(
            t("http://h/bl/?token=T&x=1"),
            "/bl/json/version?token=T&x=1"
        );
        assert_eq!(t("http://h/bl"), "/bl/json/version");
        assert_eq!(t("http://h:9222/json/version"), "/json/version");
    }
}
