//! The `[security]` rules of raw CDP calls (SPEC §14): which methods, and which of their
//! parameters, each option refuses. [`check`] (public as [`Security::check`]) is the one place
//! that decides; the call path (`supervisor/calls.rs`) runs it before anything is sent, so
//! `Supervisor::call` and the `browser_cdp` tool refuse the same calls. No I/O.
//!
//! | option (when `false`) | refuses |
//! |---|---|
//! | `allow_file_urls` | a URL that may read a local file ([`crate::url_policy`]) in `Page.navigate`, `Target.createTarget`, `Network.loadNetworkResource`, `Fetch.continueRequest`, `PWA.install`, `PWA.launch`; any `downloadPath` of `Page`/`Browser.setDownloadBehavior` |
//! | `allow_file_access` | `DOM.setFileInputFiles`, `Input.dispatchDragEvent` with `data.files`, `Page.setInterceptFileChooserDialog` enabling it, `Page.handleFileChooser` and `PWA.launchFilesInApp` with files, `Extensions.loadUnpacked` |
//! | `allow_page_protocol` | `Target.exposeDevToolsProtocol`, `Target.openDevTools`, `Target.sendMessageToTarget` (see below), and the URLs above when they name a page with browser privileges (`devtools:`, `chrome:` …) |
//! | `cdp_deny` / `cdp_allow` | methods by pattern |
//!
//! `Target.sendMessageToTarget` carries a whole CDP command as a string, which Chromium runs on
//! the target of a session attached without `flatten`: the command is parsed and checked by the
//! same rules (recursively), and refused with the reason of the rule it breaks. A message that
//! cannot be read exactly as Chromium reads it (not JSON, a duplicate key, no method, nested too
//! deeply) is refused while any rule is in force: Chromium drops most of those anyway, and the
//! rest (a duplicate key: the last one wins) could hide a URL. A command that passes is still
//! refused unless `allow_page_protocol`: the session may be on any target of the browser, and a
//! harmless `Runtime.evaluate` run in a DevTools window or a `file:` tab reads local files.
//!
//! Method names are matched exactly: Chromium 156 answers `'page.navigate' wasn't found` to any
//! other case or to surrounding whitespace (measured), so no spelling of a name reaches a method.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::config::Security;
use crate::quote::{clipped, quoted, quoted_json};
use crate::url_policy::{self, Verdict};

/// A refused call: the option that refuses it, and why.
pub(crate) type Refusal = (&'static str, String);

const FILE_URLS: &str = "security.allow_file_urls";
const FILE_ACCESS: &str = "security.allow_file_access";
const PAGE_PROTOCOL: &str = "security.allow_page_protocol";

/// The parameters that name a URL Chromium loads (navigates to, fetches or installs from).
const URL_PARAMS: &[(&str, &[&str])] = &[
    ("Page.navigate", &["url"]),
    ("Target.createTarget", &["url"]),
    ("Network.loadNetworkResource", &["url"]),
    ("Fetch.continueRequest", &["url"]),
    ("PWA.install", &["manifestId", "installUrlOrBundleUrl"]),
    ("PWA.launch", &["url"]),
];

/// Methods that hand the DevTools protocol to a page: `exposeDevToolsProtocol` gives the page a
/// binding that runs CDP; `openDevTools` opens the DevTools frontend, a page with the protocol
/// and local file access (measured on Chromium 156).
const PAGE_PROTOCOL_METHODS: &[&str] = &["Target.exposeDevToolsProtocol", "Target.openDevTools"];

/// `Target.sendMessageToTarget` calls nested in one another deeper than this are refused.
const MAX_NESTING: usize = 4;

/// Checks a raw CDP call against `sec`: `Err((option, why))` when it is refused.
pub(crate) fn check(sec: &Security, method: &str, params: &Value) -> Result<(), Refusal> {
    check_at(sec, method, params, 0)
}

/// [`check`] for a call of one task: a `downloadPath` that names the task's own download
/// directory (`own_downloads`) passes (the supervisor's own `Browser.setDownloadBehavior`, or a
/// caller pointing the browser back there); any other is judged as [`check`] judges it.
pub(crate) fn check_for_task(
    sec: &Security,
    method: &str,
    params: &Value,
    own_downloads: Option<&std::path::Path>,
) -> Result<(), Refusal> {
    let own = own_downloads.is_some_and(|dir| {
        matches!(
            method,
            "Page.setDownloadBehavior" | "Browser.setDownloadBehavior"
        ) && param(params, "downloadPath").and_then(Value::as_str) == dir.to_str()
    });
    if own && let Value::Object(o) = params {
        let mut rest = o.clone();
        rest.remove("downloadPath");
        return check(sec, method, &Value::Object(rest));
    }
    check(sec, method, params)
}

/// The whole judgement of one raw call of a task: the policy's rules ([`check_for_task`]),
/// then, with `isolate_tasks`, the task's reach ([`isolation::check`]). The one function the
/// call path (`Supervisor::call`, the `browser_cdp` tool) and the task's CDP endpoint (each
/// client command) run; a refusal names its option.
pub(crate) fn judge_task_call(
    sec: &Security,
    own_downloads: Option<&std::path::Path>,
    reach: &impl isolation::Reach,
    method: &str,
    params: &Value,
) -> Result<(), crate::error::Error> {
    check_for_task(sec, method, params, own_downloads)
        .and_then(|()| {
            if sec.isolate_tasks {
                isolation::check(reach, method, params)
            } else {
                Ok(())
            }
        })
        .map_err(|(option, detail)| crate::error::Error::Refused {
            method: method.to_string(),
            option: option.to_string(),
            detail,
        })
}

impl Security {
    /// Checks a raw CDP call against this policy: `Err((option, why))` when it is refused.
    pub fn check(&self, method: &str, params: &Value) -> Result<(), (&'static str, String)> {
        check(self, method, params)
    }
}

fn check_at(sec: &Security, method: &str, params: &Value, depth: usize) -> Result<(), Refusal> {
    patterns(sec, method)?;
    if let Some((_, keys)) = URL_PARAMS.iter().find(|(m, _)| *m == method) {
        for key in *keys {
            if let Some(url) = param(params, key).and_then(Value::as_str) {
                url_allowed(sec, key, url)?;
            }
        }
    }
    if !sec.allow_file_urls
        && matches!(
            method,
            "Page.setDownloadBehavior" | "Browser.setDownloadBehavior"
        )
        && let Some(path) = param(params, "downloadPath").filter(|p| !p.is_null())
    {
        let path = quoted_json(path);
        return Err(refuse(
            FILE_URLS,
            format!("downloadPath {path} reaches the local file system"),
        ));
    }
    if !sec.allow_file_access
        && let Some(why) = hands_local_files(method, params)
    {
        return Err(refuse(FILE_ACCESS, why.to_string()));
    }
    if !sec.allow_page_protocol && PAGE_PROTOCOL_METHODS.contains(&method) {
        return Err(refuse(
            PAGE_PROTOCOL,
            "it hands the DevTools protocol to a page, which can then do anything, past every \
             other rule (read local files too)"
                .to_string(),
        ));
    }
    if method == "Target.sendMessageToTarget" {
        if let Some(message) = param(params, "message").and_then(Value::as_str) {
            nested(sec, message, depth)?;
        }
        if !sec.allow_page_protocol {
            return Err(refuse(
                PAGE_PROTOCOL,
                "it runs a CDP command on a session the supervisor does not route, on any \
                 target of the browser (a DevTools window, a browser page, a file: tab), where \
                 the policy cannot see what the command reaches"
                    .to_string(),
            ));
        }
    }
    Ok(())
}

fn patterns(sec: &Security, method: &str) -> Result<(), Refusal> {
    if let Some(p) = sec
        .cdp_deny
        .iter()
        .find(|p| Security::pattern_matches(p, method))
    {
        return Err((
            "security.cdp_deny",
            format!("it matches the denied pattern {}", quoted(p)),
        ));
    }
    if !sec.cdp_allow.is_empty()
        && !sec
            .cdp_allow
            .iter()
            .any(|p| Security::pattern_matches(p, method))
    {
        return Err((
            "security.cdp_allow",
            format!(
                "only methods matching {} are allowed",
                sec.cdp_allow.join(", ")
            ),
        ));
    }
    Ok(())
}

fn url_allowed(sec: &Security, key: &str, url: &str) -> Result<(), Refusal> {
    match url_policy::judge(url) {
        Verdict::Local(why) if !sec.allow_file_urls => Err(refuse(
            FILE_URLS,
            format!("{key} {} {why} (read as Chromium reads it)", quoted(url)),
        )),
        Verdict::Privileged(scheme) if !sec.allow_page_protocol => Err(refuse(
            PAGE_PROTOCOL,
            format!(
                "{key} {} opens a {scheme}: page, which has browser privileges (the DevTools \
                 protocol, local files)",
                quoted(url)
            ),
        )),
        _ => Ok(()),
    }
}

/// Why a call hands local files to the page (or the browser), if it does.
fn hands_local_files(method: &str, params: &Value) -> Option<&'static str> {
    // A list that is present and not empty (an empty one hands nothing; a malformed one is
    // refused: it is not ours to guess what Chromium makes of it).
    let files = |v: Option<&Value>| v.is_some_and(|v| !v.is_null() && v != &Value::Array(vec![]));
    match method {
        "DOM.setFileInputFiles" if files(param(params, "files")) => {
            Some("it gives local files to a file input of the page, which can then read them")
        }
        "Input.dispatchDragEvent" if files(param(params, "data").and_then(|d| d.get("files"))) => {
            Some("it drops local files (data.files) on the page, which can then read them")
        }
        "Page.handleFileChooser" if files(param(params, "files")) => {
            Some("it answers the page's file chooser with local files")
        }
        "PWA.launchFilesInApp" if files(param(params, "files")) => {
            Some("it opens local files in a web app, which can then read them")
        }
        "Page.setInterceptFileChooserDialog"
            if param(params, "enabled") != Some(&Value::Bool(false)) =>
        {
            Some(
                "it intercepts the page's file chooser, the path by which local files are \
                 handed to the page",
            )
        }
        "Extensions.loadUnpacked" => {
            Some("it loads a local directory as an extension, whose files pages can then load")
        }
        _ => None,
    }
}

/// Checks the command that `Target.sendMessageToTarget` carries.
fn nested(sec: &Security, message: &str, depth: usize) -> Result<(), Refusal> {
    let Some(option) = strictest(sec) else {
        return Ok(()); // No rule in force: nothing to check.
    };
    let unreadable = |why: &str| {
        (
            option,
            format!(
                "its message cannot be checked ({why}), and {option} refuses what it cannot check"
            ),
        )
    };
    if depth >= MAX_NESTING {
        return Err(unreadable("Target.sendMessageToTarget nested too deeply"));
    }
    let (method, params) = read_command(message).map_err(|why| unreadable(&why))?;
    check_at(sec, &method, &params, depth + 1)
        .map_err(|(option, why)| (option, format!("its nested {}: {why}", clipped(&method))))
}

/// The command (method, params) a `Target.sendMessageToTarget` message carries, read exactly as
/// Chromium reads it; `Err(why)` when it cannot be (not one JSON object without duplicate keys,
/// no method, params not an object).
pub(crate) fn read_command(message: &str) -> Result<(String, Value), String> {
    let Strict(command) = serde_json::from_str(message)
        .map_err(|e| format!("not one JSON object without duplicate keys: {e}"))?;
    let Some(method) = command.get("method").and_then(Value::as_str) else {
        return Err("no method".into());
    };
    let params = match command.get("params") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => return Err("params is not an object".into()),
    };
    Ok((method.to_string(), params))
}

/// The first option that refuses anything (the one a message that cannot be checked is refused
/// by); `None` when the policy allows everything.
fn strictest(sec: &Security) -> Option<&'static str> {
    if !sec.allow_file_urls {
        Some(FILE_URLS)
    } else if !sec.allow_file_access {
        Some(FILE_ACCESS)
    } else if !sec.allow_page_protocol {
        Some(PAGE_PROTOCOL)
    } else if !sec.cdp_allow.is_empty() {
        Some("security.cdp_allow")
    } else if !sec.cdp_deny.is_empty() {
        Some("security.cdp_deny")
    } else {
        None
    }
}

fn refuse(option: &'static str, why: String) -> Refusal {
    (option, format!("{why}; set {option} = true to allow it"))
}

/// A JSON value parsed like `serde_json::Value`, except that a duplicate key anywhere is an
/// error (serde_json keeps the last one, as Chromium does for parameters; refusing is simpler
/// than proving the two agree everywhere).
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key {}", quoted(&key))));
            }
            let Strict(v) = map.next_value()?;
            object.insert(key, v);
        }
        Ok(Value::Object(object))
    }
}

/// Every top-level parameter a rule of this module, of [`isolation`] or of the task endpoint
/// (`cdp_endpoint/mux/scope.rs`, `downloadPath`) reads, each through [`param`]: [`judged_params`]
/// keeps only these.
const JUDGED_KEYS: &[&str] = &[
    "targetId",
    "browserContextId",
    "message",
    "downloadPath",
    "files",
    "data",
    "enabled",
    "url",
    "manifestId",
    "installUrlOrBundleUrl",
];

/// Member `key` of a command's `params`: how every rule reads one, so that a rule reading a
/// member [`JUDGED_KEYS`] lacks (which the task endpoint would never show it) fails the tests
/// that exercise it.
pub(crate) fn param<'v>(params: &'v Value, key: &str) -> Option<&'v Value> {
    debug_assert!(
        JUDGED_KEYS.contains(&key),
        "add {key:?} to security::JUDGED_KEYS"
    );
    params.get(key)
}

/// A command's `params` (raw JSON) as the rules see them: for an object, only its
/// [`JUDGED_KEYS`] members, each parsed as `serde_json::Value` parses it (a duplicate: the last
/// one, as there), the others skipped without building them (a driver's function text, its
/// arguments); anything else whole. The task endpoint judges every client command, so this is
/// on its hot path; [`judge_task_call`] on it decides as on the whole `params`.
pub(crate) fn judged_params(raw: &str) -> serde_json::Result<Value> {
    if !raw.trim_start().starts_with('{') {
        return serde_json::from_str(raw);
    }
    serde_json::from_str::<Judged>(raw).map(|Judged(v)| v)
}

/// [`judged_params`]'s object.
struct Judged(Value);

impl<'de> Deserialize<'de> for Judged {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(JudgedVisitor).map(Judged)
    }
}

struct JudgedVisitor;

impl<'de> Visitor<'de> for JudgedVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(JudgedKey(key)) = map.next_key()? {
            match key {
                Some(k) => drop(object.insert(k.to_string(), map.next_value::<Value>()?)),
                None => drop(map.next_value::<de::IgnoredAny>()?),
            }
        }
        Ok(Value::Object(object))
    }
}

/// A key of [`JUDGED_KEYS`] (as unescaped), or `None` for any other, without copying it.
struct JudgedKey(Option<&'static str>);

impl<'de> Deserialize<'de> for JudgedKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = JudgedKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, v: &str) -> Result<JudgedKey, E> {
                Ok(JudgedKey(JUDGED_KEYS.iter().copied().find(|k| *k == v)))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

pub(crate) mod isolation;
#[cfg(test)]
mod tests;
