//! Configuration layering through `Config::load` (SPEC §12): the shipped `config/default.toml`,
//! then a user file (an explicit path, else `$CDP_SUPERVISOR_CONFIG`), then
//! `CDP_SUPERVISOR__SECTION__KEY` environment variables; later layers win. Every invalid value,
//! whichever layer it comes from, is an error naming the key, the value and what is allowed.
//!
//! The environment is process-global and `Config::load` reads it, so every test in this file
//! holds [`ENV_LOCK`] through an [`EnvGuard`], which clears all `CDP_SUPERVISOR*` variables
//! on entry and restores the original environment on exit (also when the test panics). They run
//! in `tests/solo`, first and on the main thread, while no other thread exists that could read
//! the environment (`tests/solo/main.rs`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use cdp_supervisor::{BridgeMode, Config, DialogPolicy};

/// Serializes every access to the process environment in this test binary.
static ENV_LOCK: Mutex<()> = Mutex::new(());

/// Exclusive use of the environment; clears the crate's variables and restores everything on drop.
struct EnvGuard {
    saved: Vec<(OsString, OsString)>,
    _lock: MutexGuard<'static, ()>,
}

fn is_ours(name: &OsString) -> bool {
    name.to_str()
        .is_some_and(|n| n.starts_with("CDP_SUPERVISOR__") || n == "CDP_SUPERVISOR_CONFIG")
}

impl EnvGuard {
    fn take() -> EnvGuard {
        let lock = ENV_LOCK.lock().unwrap_or_else(|p| p.into_inner());
        let saved: Vec<(OsString, OsString)> =
            std::env::vars_os().filter(|(k, _)| is_ours(k)).collect();
        for (k, _) in &saved {
            // SAFETY: every test of this binary that touches (or reads, through Config::load) the
            // environment holds ENV_LOCK, so no other thread accesses it concurrently.
            unsafe { std::env::remove_var(k) };
        }
        EnvGuard { saved, _lock: lock }
    }

    fn set(&self, key: &str, value: &str) {
        // SAFETY: ENV_LOCK is held (see EnvGuard::take).
        unsafe { std::env::set_var(key, value) };
    }

    fn remove(&self, key: &str) {
        // SAFETY: ENV_LOCK is held (see EnvGuard::take).
        unsafe { std::env::remove_var(key) };
    }

    /// Removes every `CDP_SUPERVISOR*` variable set so far.
    fn clear(&self) {
        let ours: Vec<OsString> = std::env::vars_os()
            .map(|(k, _)| k)
            .filter(is_ours)
            .collect();
        for k in ours {
            // SAFETY: ENV_LOCK is held (see EnvGuard::take).
            unsafe { std::env::remove_var(&k) };
        }
    }
}

impl Drop for EnvGuard {
    fn drop(&mut self) {
        self.clear();
        for (k, v) in &self.saved {
            // SAFETY: ENV_LOCK is still held (it is released after this body runs).
            unsafe { std::env::set_var(k, v) };
        }
    }
}

/// A temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "cdp-supervisor-config-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        TempDir(dir)
    }

    /// Writes `name` with `body` and returns its path.
    fn file(&self, name: &str, body: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, body).expect("write a config file");
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// True when `text` contains `value` as a whole token (not inside a longer number or word).
fn names_value(text: &str, value: &str) -> bool {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_';
    text.match_indices(value).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + value.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

fn load(path: Option<&Path>) -> Config {
    Config::load(path).unwrap_or_else(|e| panic!("Config::load({path:?}) failed: {e}"))
}

fn load_err(path: Option<&Path>) -> String {
    match Config::load(path) {
        Ok(c) => panic!("Config::load({path:?}) accepted an invalid configuration: {c:?}"),
        Err(e) => e.to_string(),
    }
}

const USER_FILE: &str = r#"
[browser]
dialog_policy = "auto_dismiss"
dialog_timeout_s = 2.5
dialog_bridge = "off"

[supervisor]
start_timeout_s = 7
reconnect_attempts = 9

[limits]
recent_dialogs_max = 9
console_errors_max = 11
"#;

pub(crate) fn defaults_alone_equal_config_default() {
    let _env = EnvGuard::take();
    let c = load(None);
    assert_eq!(c, Config::default());
    assert_eq!(c.dialog_policy, DialogPolicy::MustRespond);
    assert_eq!(c.dialog_bridge, BridgeMode::Auto);
    assert_eq!(c.dialog_timeout, Duration::from_secs(300));
    assert_eq!(c.start_timeout, Duration::from_secs(15));
    assert_eq!(c.call_timeout, Duration::from_secs(30));
    assert_eq!(c.reconnect_attempts, 5);
    assert_eq!(c.cdp_url, None);
    assert_eq!(c.limits.frame_tree_max_entries, 30);
    assert_eq!(c.limits.frame_tree_max_oopif_depth, 2);
    assert_eq!(c.limits.recent_dialogs_max, 20);
    assert_eq!(c.limits.console_errors_max, 50);
    assert_eq!(c.limits.max_message_bytes, 64 << 20);
}

pub(crate) fn user_file_overrides_defaults_and_env_overrides_the_file() {
    let env = EnvGuard::take();
    let dir = TempDir::new("layers");
    let path = dir.file("user.toml", USER_FILE);

    // default.toml < user file.
    let c = load(Some(&path));
    assert_eq!(c.dialog_policy, DialogPolicy::AutoDismiss);
    assert_eq!(c.dialog_timeout, Duration::from_millis(2500));
    assert_eq!(c.dialog_bridge, BridgeMode::Off);
    assert_eq!(c.start_timeout, Duration::from_secs(7));
    assert_eq!(c.reconnect_attempts, 9);
    assert_eq!(c.limits.recent_dialogs_max, 9);
    assert_eq!(c.limits.console_errors_max, 11);
    // Keys the file does not set keep the shipped defaults.
    assert_eq!(c.call_timeout, Duration::from_secs(30));
    assert_eq!(c.limits.frame_tree_max_entries, 30);
    assert_eq!(c.cdp_url, None);

    // user file < environment.
    env.set("CDP_SUPERVISOR__BROWSER__DIALOG_POLICY", "auto_accept");
    env.set("CDP_SUPERVISOR__SUPERVISOR__START_TIMEOUT_S", "3");
    env.set("CDP_SUPERVISOR__LIMITS__RECENT_DIALOGS_MAX", "5");
    let c = load(Some(&path));
    assert_eq!(
        c.dialog_policy,
        DialogPolicy::AutoAccept,
        "env wins over the file"
    );
    assert_eq!(
        c.start_timeout,
        Duration::from_secs(3),
        "env wins over the file"
    );
    assert_eq!(c.limits.recent_dialogs_max, 5, "env wins over the file");
    // What the environment does not set still comes from the file.
    assert_eq!(c.dialog_timeout, Duration::from_millis(2500));
    assert_eq!(c.dialog_bridge, BridgeMode::Off);
    assert_eq!(c.reconnect_attempts, 9);
    assert_eq!(c.limits.console_errors_max, 11);

    // Environment over the defaults alone (no file).
    let c = load(None);
    assert_eq!(c.dialog_policy, DialogPolicy::AutoAccept);
    assert_eq!(c.start_timeout, Duration::from_secs(3));
    assert_eq!(c.limits.recent_dialogs_max, 5);
    assert_eq!(c.dialog_bridge, BridgeMode::Auto);
    assert_eq!(c.reconnect_attempts, 5);

    // The security switches through the environment.
    env.set("CDP_SUPERVISOR__SECURITY__ALLOW_FILE_ACCESS", "true");
    env.set("CDP_SUPERVISOR__SECURITY__ALLOW_PAGE_PROTOCOL", "true");
    let c = load(Some(&path));
    assert!(c.security.allow_file_access && c.security.allow_page_protocol);
    assert!(
        !c.security.allow_file_urls,
        "a switch the environment does not set stays off"
    );
    env.remove("CDP_SUPERVISOR__SECURITY__ALLOW_FILE_ACCESS");
    env.remove("CDP_SUPERVISOR__SECURITY__ALLOW_PAGE_PROTOCOL");

    // Fractional seconds and URLs through the environment.
    env.set("CDP_SUPERVISOR__BROWSER__DIALOG_TIMEOUT_S", "0.25");
    env.set("CDP_SUPERVISOR__BROWSER__CDP_URL", "http://127.0.0.1:9222");
    let c = load(Some(&path));
    assert_eq!(c.dialog_timeout, Duration::from_millis(250));
    assert_eq!(c.cdp_url.as_deref(), Some("http://127.0.0.1:9222"));

    // Console capture and a launched browser's flags (one string, split at whitespace: a
    // flag's value may hold commas).
    env.set("CDP_SUPERVISOR__BROWSER__CAPTURE_CONSOLE", "true");
    env.set(
        "CDP_SUPERVISOR__BROWSER__CHROME_ARGS",
        "--window-size=1280,800  --lang=de",
    );
    let c = load(Some(&path));
    assert!(c.capture_console);
    assert_eq!(c.chrome_args, ["--window-size=1280,800", "--lang=de"]);
}

pub(crate) fn config_env_var_names_the_user_file() {
    let env = EnvGuard::take();
    let dir = TempDir::new("envfile");
    let from_env = dir.file("from-env.toml", USER_FILE);
    let explicit = dir.file(
        "explicit.toml",
        "[browser]\ndialog_policy = \"auto_accept\"\n[limits]\nrecent_dialogs_max = 3\n",
    );

    env.set(
        "CDP_SUPERVISOR_CONFIG",
        from_env.to_str().expect("utf-8 path"),
    );
    let c = load(None);
    assert_eq!(
        c.dialog_policy,
        DialogPolicy::AutoDismiss,
        "CDP_SUPERVISOR_CONFIG names the file when no path is given"
    );
    assert_eq!(c.limits.recent_dialogs_max, 9);
    assert_eq!(c.start_timeout, Duration::from_secs(7));

    // An explicit path (`--config FILE`) is the user file; CDP_SUPERVISOR_CONFIG is not used.
    let c = load(Some(&explicit));
    assert_eq!(c.dialog_policy, DialogPolicy::AutoAccept);
    assert_eq!(c.limits.recent_dialogs_max, 3);
    assert_eq!(
        c.start_timeout,
        Duration::from_secs(15),
        "the file named by CDP_SUPERVISOR_CONFIG is not layered in when a path is given"
    );

    // The environment still wins over the file named by CDP_SUPERVISOR_CONFIG.
    env.set("CDP_SUPERVISOR__LIMITS__RECENT_DIALOGS_MAX", "5");
    assert_eq!(load(None).limits.recent_dialogs_max, 5);

    // CDP_SUPERVISOR_CONFIG naming a missing file is an error naming it.
    let missing = dir.0.join("not-there-from-env.toml");
    env.set(
        "CDP_SUPERVISOR_CONFIG",
        missing.to_str().expect("utf-8 path"),
    );
    let e = load_err(None);
    assert!(
        e.contains(missing.to_str().unwrap()),
        "the error names the missing file: {e}"
    );
    env.remove("CDP_SUPERVISOR_CONFIG");
}

pub(crate) fn missing_file_is_an_error_naming_it() {
    let _env = EnvGuard::take();
    let dir = TempDir::new("missing");
    let missing = dir.0.join("no-such-config.toml");
    let e = load_err(Some(&missing));
    assert!(
        e.contains(missing.to_str().unwrap()),
        "the error names the missing file: {e}"
    );
}

pub(crate) fn malformed_toml_is_an_error() {
    let _env = EnvGuard::take();
    let dir = TempDir::new("malformed");
    let path = dir.file("broken.toml", "[browser\ndialog_policy = ");
    let e = load_err(Some(&path));
    assert!(!e.is_empty());
}

/// One invalid value: `(key, value as TOML, value as the error should show it, what is allowed)`.
/// The allowed-fragments must all appear in the message.
struct Bad {
    key: &'static str,
    toml: &'static str,
    shown: &'static str,
    allowed: &'static [&'static str],
}

const SECS: &[&str] = &["number"];
const INT: &[&str] = &["number"];

fn bad_values() -> Vec<Bad> {
    let mut v = vec![
        Bad {
            key: "browser.dialog_policy",
            toml: "\"sometimes\"",
            shown: "sometimes",
            allowed: &["must_respond", "auto_dismiss", "auto_accept"],
        },
        Bad {
            key: "browser.dialog_bridge",
            toml: "\"maybe\"",
            shown: "maybe",
            allowed: &["off", "auto"],
        },
        Bad {
            key: "browser.cdp_url",
            toml: "\"ftp://x\"",
            shown: "ftp://x",
            allowed: &["ws://"],
        },
    ];
    for key in [
        "security.allow_file_urls",
        "security.allow_file_access",
        "security.allow_page_protocol",
    ] {
        v.push(Bad {
            key,
            toml: "\"maybe\"",
            shown: "maybe",
            allowed: &["true or false"],
        });
    }
    for key in [
        "browser.dialog_timeout_s",
        "supervisor.start_timeout_s",
        "supervisor.call_timeout_s",
    ] {
        v.push(Bad {
            key,
            toml: "0",
            shown: "0",
            allowed: SECS,
        });
        v.push(Bad {
            key,
            toml: "-1",
            shown: "-1",
            allowed: SECS,
        });
        v.push(Bad {
            key,
            toml: "\"soon\"",
            shown: "soon",
            allowed: SECS,
        });
    }
    for key in [
        "supervisor.reconnect_attempts",
        "limits.frame_tree_max_entries",
        "limits.frame_tree_max_oopif_depth",
        "limits.recent_dialogs_max",
        "limits.console_errors_max",
        "limits.max_message_bytes",
    ] {
        v.push(Bad {
            key,
            toml: "-1",
            shown: "-1",
            allowed: INT,
        });
        v.push(Bad {
            key,
            toml: "\"many\"",
            shown: "many",
            allowed: INT,
        });
    }
    for key in [
        "limits.frame_tree_max_entries",
        "limits.recent_dialogs_max",
        "limits.console_errors_max",
        "limits.max_message_bytes",
    ] {
        v.push(Bad {
            key,
            toml: "0",
            shown: "0",
            allowed: INT,
        });
    }
    v
}

/// What is wrong with error message `e` for `bad` (empty when it names key, value and allowed).
fn check_message(bad: &Bad, source: &str, e: &str) -> Vec<String> {
    let mut out = Vec::new();
    let what = format!("{source} {} = {}", bad.key, bad.toml);
    if !e.contains(bad.key) {
        out.push(format!("{what}: the error does not name the key: {e}"));
    }
    if !names_value(e, bad.shown) {
        out.push(format!(
            "{what}: the error does not name the value {:?}: {e}",
            bad.shown
        ));
    }
    for a in bad.allowed {
        if !e.contains(a) {
            out.push(format!(
                "{what}: the error does not say what is allowed ({a:?}): {e}"
            ));
        }
    }
    out
}

pub(crate) fn invalid_values_in_the_file_name_key_value_and_allowed() {
    let _env = EnvGuard::take();
    let dir = TempDir::new("bad-file");
    let mut failures = Vec::new();
    for (i, bad) in bad_values().iter().enumerate() {
        let (section, name) = bad.key.split_once('.').unwrap();
        let path = dir.file(
            &format!("bad-{i}.toml"),
            &format!("[{section}]\n{name} = {}\n", bad.toml),
        );
        match Config::load(Some(&path)) {
            Ok(c) => failures.push(format!(
                "file {} = {} was accepted: {c:?}",
                bad.key, bad.toml
            )),
            Err(e) => failures.extend(check_message(bad, "file", &e.to_string())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

pub(crate) fn invalid_values_in_the_environment_name_key_value_and_allowed() {
    let env = EnvGuard::take();
    let dir = TempDir::new("bad-env");
    // A valid user file underneath: the env value must still be rejected, not shadowed.
    let path = dir.file("user.toml", USER_FILE);
    let mut failures = Vec::new();
    for bad in bad_values() {
        let (section, name) = bad.key.split_once('.').unwrap();
        let var = format!(
            "CDP_SUPERVISOR__{}__{}",
            section.to_ascii_uppercase(),
            name.to_ascii_uppercase()
        );
        let raw = bad.toml.trim_matches('"');
        env.set(&var, raw);
        for p in [None, Some(path.as_path())] {
            match Config::load(p) {
                Ok(c) => failures.push(format!("env {var}={raw} was accepted: {c:?}")),
                Err(e) => failures.extend(check_message(&bad, "env", &e.to_string())),
            }
        }
        env.remove(&var);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

pub(crate) fn missing_ca_file_names_the_path() {
    let env = EnvGuard::take();
    let dir = TempDir::new("ca");
    let missing = dir.0.join("no-such-ca.pem");
    let missing_s = missing.to_str().unwrap().to_string();

    let path = dir.file(
        "ca.toml",
        &format!("[browser]\nca_file = {}\n", toml_str(&missing_s)),
    );
    let e = load_err(Some(&path));
    assert!(e.contains("browser.ca_file"), "names the key: {e}");
    assert!(e.contains(&missing_s), "names the path: {e}");

    env.set("CDP_SUPERVISOR__BROWSER__CA_FILE", &missing_s);
    let e = load_err(None);
    assert!(e.contains("browser.ca_file"), "names the key: {e}");
    assert!(e.contains(&missing_s), "names the path: {e}");

    // An existing file is accepted.
    let pem = dir.file(
        "ca.pem",
        "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n",
    );
    env.set("CDP_SUPERVISOR__BROWSER__CA_FILE", pem.to_str().unwrap());
    assert_eq!(load(None).ca_file.as_deref(), Some(pem.as_path()));
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}
