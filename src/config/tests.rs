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
        own_page: true,
        new_page: false,
        page_choice: PageChoice::FirstListed,
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
fn downloads_and_upload_dirs_are_read_and_checked() {
    let d = Config::default();
    assert_eq!(d.downloads, Downloads::default());
    assert!(d.downloads.dir.is_none() && !d.downloads.keep);
    assert!(d.security.upload_dirs.is_empty());
    let c = Config::from_toml(
        "[downloads]\ndir = \"/srv/dl\"\nkeep = true\n[security]\nupload_dirs = [\"/srv/up\", \"/tmp/x\"]\n",
    )
    .unwrap();
    assert_eq!(
        c.downloads.dir.as_deref(),
        Some(std::path::Path::new("/srv/dl"))
    );
    assert!(c.downloads.keep);
    assert_eq!(
        c.security.upload_dirs,
        [PathBuf::from("/srv/up"), PathBuf::from("/tmp/x")]
    );
    let e = Config::from_toml("[downloads]\ndir = \"relative/dir\"\n").unwrap_err();
    assert!(
        matches!(&e, Error::Config { key, .. } if key == "downloads.dir"),
        "{e}"
    );
    assert!(e.to_string().contains("absolute"), "{e}");
    let e = Config::from_toml("[security]\nupload_dirs = [\"/ok\", \"up\"]\n").unwrap_err();
    assert!(
        matches!(&e, Error::Config { key, .. } if key == "security.upload_dirs[1]"),
        "{e}"
    );
    let e = Config::from_toml("downloads = 3\n").unwrap_err();
    assert!(e.to_string().contains("downloads"), "{e}");
    let o = StartOptions::default().with_new_page(true);
    assert!(
        o.own_page && o.owns_page(),
        "new_page is own_page's old name"
    );
    assert!(!o.with_target_id("T").owns_page(), "a named target wins");
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
        .unwrap()
        .with_reconnect_attempts(0)
        .unwrap()
        .with_cdp_url("ws://127.0.0.1:9222/devtools/browser/x")
        .unwrap()
        .with_limits(Limits::default().with_frames_max(3))
        .unwrap()
        .with_security(Security::default().with_cdp_deny(["Browser.close"]))
        .unwrap();
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
    assert!(o.own_page && o.dialog_policy.is_none() && o.dialog_bridge.is_none());
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
            .unwrap()
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
            .unwrap()
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

/// Every key of the shipped `config/default.toml`, as `section.name`.
fn shipped_keys() -> Vec<String> {
    let c = config::Config::builder()
        .add_source(config::File::from_str(
            include_str!("../../config/default.toml"),
            config::FileFormat::Toml,
        ))
        .build()
        .unwrap();
    let root: config::Map<String, config::Value> = c.try_deserialize().unwrap();
    let mut keys = Vec::new();
    for (section, table) in root {
        for name in table.into_table().unwrap().into_keys() {
            keys.push(format!("{section}.{name}"));
        }
    }
    keys.sort();
    keys
}

/// Issue 35: a value of the wrong kind (a list in a list, a table, a number where a string or
/// a list belongs) is refused by its kind and named by its key (and its position in a list),
/// for every key the configuration has, in a short message that never shows its contents.
#[test]
fn every_key_refuses_a_nested_list_a_table_and_a_number_by_name() {
    let keys = shipped_keys();
    assert!(keys.len() >= 24, "{keys:?}");
    let mut failures = Vec::new();
    for key in &keys {
        let (section, name) = key.split_once('.').unwrap();
        for (value, kind) in [
            (r#"[["qxq"]]"#, "a list"),
            (r#"{ a = ["qyq"] }"#, "a table"),
            ("-1", "-1"),
        ] {
            let toml = format!("[{section}]\n{name} = {value}\n");
            let e = match Config::from_toml(&toml) {
                Ok(_) => {
                    failures.push(format!("{key} = {value} was accepted"));
                    continue;
                }
                Err(e) => e,
            };
            let text = e.to_string();
            let Error::Config { key: named, .. } = &e else {
                failures.push(format!("{key} = {value}: not Error::Config: {e:?}"));
                continue;
            };
            // A list setting names the item, any other the setting itself.
            let ok = (named == key || named == &format!("{key}[0]"))
                && text.contains(&format!("{named} is "))
                && text.len() < 300
                && !text.contains("qxq")
                && !text.contains("qyq")
                && (kind == "-1" || named != key || text.contains(&format!("is {kind};")))
                && (kind != "a list" || named == key || text.contains("[0] is a list;"));
            if !ok {
                failures.push(format!("{key} = {value}: {text}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Issue 35: the cases of the report. A list nested 30 deep is named by its kind in a short
/// message (the old message doubled with each level: 512 MiB at depth 28); 10,000 deep, the
/// TOML parser refuses it, and its message (which quotes the source line) stays short too.
#[test]
fn a_deeply_nested_or_huge_value_gets_a_short_message() {
    for key in [
        "security.cdp_deny",
        "security.cdp_allow",
        "mcp.allowed_hosts",
    ] {
        let (section, name) = key.split_once('.').unwrap();
        let nested = |depth: usize| {
            format!(
                "[{section}]\n{name} = {}\"x\"{}\n",
                "[".repeat(depth),
                "]".repeat(depth)
            )
        };
        let e = Config::from_toml(&nested(30)).unwrap_err();
        assert!(
            matches!(&e, Error::Config { key: k, value, .. } if *k == format!("{key}[0]") && value == "a list"),
            "{e:?}"
        );
        assert!(e.to_string().len() < 300, "{e}");
        let e = Config::from_toml(&nested(10_000)).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
        let text = e.to_string();
        assert!(text.len() < 1024, "{} bytes: {text}", text.len());
        assert!(text.contains("line 2"), "{text}");
    }
    let huge = "x".repeat(1_000_000);
    for toml in [
        format!("[browser]\ndialog_policy = \"{huge}\""),
        format!("[security]\ncdp_deny = [\"Browser.close\", \"{huge}\"]"),
        format!("[browser]\ndialog_policy = \"{huge}"),
    ] {
        let text = Config::from_toml(&toml).unwrap_err().to_string();
        assert!(text.len() < 1024, "{} bytes: {text}", text.len());
        assert!(
            text.contains("1000000 bytes") || text.contains("bytes)"),
            "{text}"
        );
    }
    let e = Config::from_toml("[security]\ncdp_deny = [\"Browser.close\", \"x\"]").unwrap_err();
    assert!(
        e.to_string().starts_with(
            "invalid configuration: security.cdp_deny[1] is \"x\"; expected a CDP method pattern"
        ),
        "{e}"
    );
}

/// A section that is no table is refused by its kind; a number where text belongs is refused
/// (it was taken as the text "5").
#[test]
fn sections_are_tables_and_text_settings_take_text() {
    for (toml, named) in [
        ("browser = 5", "browser"),
        ("security = [[1]]", "security"),
        ("[browser]\nchrome_path = 5", "browser.chrome_path"),
        ("[browser]\ncdp_url = true", "browser.cdp_url"),
        ("[limits]\npages_max = 2.5", "limits.pages_max"),
        ("[limits]\npages_max = 1e300", "limits.pages_max"),
    ] {
        let e = Config::from_toml(toml).unwrap_err();
        assert!(
            matches!(&e, Error::Config { key, .. } if key == named),
            "{toml}: {e:?}"
        );
        assert!(e.to_string().len() < 200, "{e}");
    }
    // Strings that read as numbers and switches still do (the environment gives only strings).
    let c = Config::from_toml(
        "[limits]\npages_max = \"7\"\n[browser]\nfollow_popups = \"false\"\ndialog_timeout_s = \"2.5\"",
    )
    .unwrap();
    assert_eq!(c.limits.pages_max, 7);
    assert!(!c.follow_popups);
    assert_eq!(c.dialog_timeout, Duration::from_millis(2500));
}

#[test]
fn mcp_http_limits_are_read_and_checked() {
    let c = Config::from_toml(
        "[mcp]\nhttp_head_timeout_s = 1.5\nhttp_max_new_connections = 8\nhttp_max_listen_streams = 2",
    )
    .unwrap();
    assert_eq!(c.http_head_timeout, Duration::from_millis(1500));
    assert_eq!(
        (c.http_max_new_connections, c.http_max_listen_streams),
        (8, 2)
    );
    for (bad, key) in [
        ("http_head_timeout_s = 0", "mcp.http_head_timeout_s"),
        ("http_head_timeout_s = 61", "mcp.http_head_timeout_s"),
        (
            "http_max_new_connections = 0",
            "mcp.http_max_new_connections",
        ),
        (
            "http_max_listen_streams = 65",
            "mcp.http_max_listen_streams",
        ),
    ] {
        let e = Config::from_toml(&format!("[mcp]\n{bad}")).unwrap_err();
        assert!(e.to_string().contains(key), "{bad}: {e}");
    }
}

mod setters;
