//! The configuration: layering, validation, the per-task overrides, the setters.

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
    let c = Config::from_toml("[security]\nallow_file_access = true\nallow_page_protocol = true\n")
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
    let c =
        Config::from_toml("[browser]\ndialog_policy = \"auto_accept\"\ndialog_timeout_s = 0.25\n")
            .unwrap();
    assert_eq!(c.dialog_policy, DialogPolicy::AutoAccept);
    assert_eq!(c.dialog_timeout, Duration::from_millis(250));
}

#[test]
fn setters_set_what_they_name_and_nothing_else() {
    let c = Config::default()
        .with_call_timeout(Duration::from_secs(7))
        .with_reconnect_attempts(0)
        .with_cdp_url("ws://127.0.0.1:9222/devtools/browser/x")
        .with_limits(Limits::default().with_frames_max(3))
        .with_security(Security::default().with_cdp_deny(["Browser.close"]));
    assert_eq!(
        c,
        Config {
            call_timeout: Duration::from_secs(7),
            reconnect_attempts: 0,
            cdp_url: Some("ws://127.0.0.1:9222/devtools/browser/x".into()),
            limits: Limits {
                frames_max: 3,
                ..Limits::default()
            },
            security: Security {
                cdp_deny: vec!["Browser.close".into()],
                ..Security::default()
            },
            ..Config::default()
        }
    );
    let o = StartOptions::default()
        .with_target_id("T")
        .with_dialog_timeout(Duration::from_secs(1))
        .with_new_page(true);
    assert_eq!(o.target_id.as_deref(), Some("T"));
    assert_eq!(o.dialog_timeout, Some(Duration::from_secs(1)));
    assert!(o.new_page && o.dialog_policy.is_none() && o.dialog_bridge.is_none());
}

/// One rule for a setting in seconds, whoever gives it: the file, a task's override in code, an
/// argument (a tool's, the Python binding's); each error names the setting as it was given.
#[test]
fn a_setting_in_seconds_has_one_rule_wherever_it_is_given() {
    let allowed = "a number of seconds > 0 and <= 86400";
    for text in ["0", "-1", "86401", "nan", "inf"] {
        let e = Config::from_toml(&format!("[browser]\ndialog_timeout_s = \"{text}\""))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("browser.dialog_timeout_s") && e.contains(allowed),
            "{e}"
        );
    }
    for secs in [0.0, -1.0, 86_401.0, f64::NAN, f64::INFINITY] {
        let e = seconds_setting("dialog_timeout_s", secs, MAX_DIALOG_TIMEOUT).unwrap_err();
        assert!(
            matches!(&e, Error::Config { key, .. } if key == "dialog_timeout_s"),
            "{e}"
        );
        assert!(e.to_string().contains(allowed), "{e}");
    }
    for d in [
        Duration::ZERO,
        MAX_DIALOG_TIMEOUT + Duration::from_nanos(1),
        Duration::MAX,
    ] {
        let options = StartOptions::default().with_dialog_timeout(d);
        let e = options.check().unwrap_err();
        assert!(
            matches!(&e, Error::Config { key, .. } if key == "dialog_timeout_s"),
            "{e}"
        );
        assert!(e.to_string().contains(allowed), "{e}");
    }
    assert_eq!(
        seconds_setting("dialog_timeout_s", 0.25, MAX_DIALOG_TIMEOUT).unwrap(),
        Duration::from_millis(250)
    );
    assert!(
        StartOptions::default()
            .with_dialog_timeout(MAX_DIALOG_TIMEOUT)
            .check()
            .is_ok()
    );
    // Without an upper bound (a start's own timeout in code), only zero is refused.
    assert_eq!(
        check_seconds("start_timeout_s", Duration::MAX, Duration::MAX).unwrap(),
        Duration::MAX
    );
    let e = check_seconds("start_timeout_s", Duration::ZERO, Duration::MAX).unwrap_err();
    assert!(e.to_string().ends_with("a number of seconds > 0"), "{e}");
    // The call timeout's cap is the 300 s every call is clamped to.
    assert!(Config::from_toml("[supervisor]\ncall_timeout_s = 300").is_ok());
    let e = Config::from_toml("[supervisor]\ncall_timeout_s = 301").unwrap_err();
    assert!(e.to_string().contains("<= 300"), "{e}");
}

#[test]
fn an_unreadable_configuration_is_invalid_config() {
    let e = Config::from_toml("[browser\n").unwrap_err();
    assert!(
        matches!(&e, Error::InvalidConfig(m) if m.starts_with("cannot read configuration")),
        "{e}"
    );
    let missing = std::path::Path::new("/nonexistent/cdp-supervisor.toml");
    let e = Config::load(Some(missing)).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidConfig(m) if m.contains("does not exist")),
        "{e}"
    );
}

#[test]
fn mcp_allowed_hosts_are_host_names_kept_lowercase() {
    assert!(Config::default().allowed_hosts.is_empty());
    let c = Config::from_toml(
        "[mcp]\nallowed_hosts = [\"MCP.example.com\", \"10.0.0.5:8737\", \"[FD00::1]:9000\"]",
    )
    .unwrap();
    assert_eq!(
        c.allowed_hosts,
        ["mcp.example.com", "10.0.0.5:8737", "[fd00::1]:9000"]
    );
    for bad in [
        "http://evil.example",
        "host/path",
        "user@host",
        "host:0",
        "host:99999",
        "",
        "[::1",
        "a b",
    ] {
        let e = Config::from_toml(&format!("[mcp]\nallowed_hosts = [{bad:?}]")).unwrap_err();
        assert!(e.to_string().contains("mcp.allowed_hosts"), "{bad}: {e}");
    }
    assert_eq!(
        Config::default()
            .with_allowed_hosts(["a.example"])
            .allowed_hosts,
        ["a.example"]
    );
}

/// `browser.capture_console` is off unless asked for (SPEC §19); `browser.chrome_args` are
/// switches, never the ones the launch sets itself.
#[test]
fn console_capture_is_opt_in_and_chrome_args_are_switches() {
    let d = Config::default();
    assert!(!d.capture_console && d.chrome_args.is_empty());
    let c = Config::from_toml(
        "[browser]\ncapture_console = true\nchrome_args = [\"--window-size=1280,800\", \"--lang=de\"]\n",
    )
    .unwrap();
    assert!(c.capture_console);
    assert_eq!(c.chrome_args, ["--window-size=1280,800", "--lang=de"]);
    assert_eq!(
        c,
        Config::default()
            .with_capture_console(true)
            .with_chrome_args(["--window-size=1280,800", "--lang=de"])
    );
    let e = Config::from_toml("[browser]\ncapture_console = \"yes\"\n").unwrap_err();
    assert!(
        e.to_string().contains("browser.capture_console")
            && e.to_string().contains("true or false"),
        "{e}"
    );
    for bad in [
        "window-size=1,1",
        "--remote-debugging-port=9222",
        "--remote-debugging-pipe",
        "--user-data-dir=/tmp/x",
        "--",
        "--a\nb",
    ] {
        let e = Config::from_toml(&format!("[browser]\nchrome_args = [{bad:?}]\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("browser.chrome_args") && e.contains("--user-data-dir"),
            "{bad}: {e}"
        );
    }
    let e = Config::from_toml("[browser]\nchrome_args = 3\n").unwrap_err();
    assert!(e.to_string().contains("browser.chrome_args"), "{e}");
}
