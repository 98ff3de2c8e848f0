//! The setters and `Config::set`: each refuses what the file refuses, with the same error;
//! and the `[endpoint]` settings.

use super::super::*;

#[test]
fn a_setter_refuses_an_invalid_value_with_the_error_the_file_gives() {
    let file = |toml: &str| Config::from_toml(toml).unwrap_err().to_string();
    let d = Config::default;
    let cases: Vec<(Error, String)> = vec![
        (
            d().with_dialog_timeout(Duration::ZERO).unwrap_err(),
            file("[browser]\ndialog_timeout_s = 0"),
        ),
        (
            d().with_call_timeout(Duration::from_secs(301)).unwrap_err(),
            file("[supervisor]\ncall_timeout_s = 301"),
        ),
        (
            d().with_reconnect_attempts(101).unwrap_err(),
            file("[supervisor]\nreconnect_attempts = 101"),
        ),
        (
            d().with_cdp_url("ftp://user:secret@h/").unwrap_err(),
            file("[browser]\ncdp_url = \"ftp://user:secret@h/\""),
        ),
        (
            d().with_chrome_args(["--lang=de", "--user-data-dir=/x"])
                .unwrap_err(),
            file("[browser]\nchrome_args = [\"--lang=de\", \"--user-data-dir=/x\"]"),
        ),
        (
            d().with_limits(Limits::default().with_pages_max(1001))
                .unwrap_err(),
            file("[limits]\npages_max = 1001"),
        ),
        (
            d().with_security(Security::default().with_cdp_deny(["Browser close"]))
                .unwrap_err(),
            file("[security]\ncdp_deny = [\"Browser close\"]"),
        ),
        (
            d().with_downloads(Downloads::default().with_dir("relative/dir"))
                .unwrap_err(),
            file("[downloads]\ndir = \"relative/dir\""),
        ),
        (
            d().with_allowed_hosts(["http://x"]).unwrap_err(),
            file("[mcp]\nallowed_hosts = [\"http://x\"]"),
        ),
        (
            d().with_http_max_listen_streams(65).unwrap_err(),
            file("[mcp]\nhttp_max_listen_streams = 65"),
        ),
    ];
    for (set, read) in cases {
        assert!(matches!(set, Error::Config { .. }), "{set:?}");
        assert_eq!(set.to_string(), read);
        assert!(!read.contains("secret"), "{read}");
    }
}

#[test]
fn set_takes_every_key_and_refuses_an_unknown_one() {
    let mut c = Config::default();
    c.set("limits.pages_max", SettingValue::Int(7)).unwrap();
    c.set(
        "browser.dialog_policy",
        SettingValue::Text("auto_accept".into()),
    )
    .unwrap();
    assert_eq!(c.limits().pages_max, 7);
    assert_eq!(c.dialog_policy(), DialogPolicy::AutoAccept);
    let before = c.clone();
    let e = c
        .set("limits.pages_max", SettingValue::Float(1.5))
        .unwrap_err();
    assert!(matches!(&e, Error::Config { key, .. } if key == "limits.pages_max"));
    assert_eq!(c, before, "a refused value changes nothing");
    let e = c.set("limits.nope", SettingValue::Int(1)).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    for key in SETTING_KEYS {
        let e = c.set(key, SettingValue::Table).unwrap_err();
        assert!(
            matches!(&e, Error::Config { key: k, .. } if k == key),
            "{e:?}"
        );
    }
}

/// Issue 30: `[endpoint]` is read, checked and set like every section: `listen` on loopback
/// only (the error names `endpoint.listen`), `all_targets` a switch, `allowed_origins` origins
/// or `*`, kept lowercase without a trailing `/`.
#[test]
fn endpoint_settings_are_read_and_a_non_loopback_listen_is_refused() {
    let d = Config::default();
    assert_eq!(d.endpoint().listen, "127.0.0.1:0");
    assert!(!d.endpoint().all_targets);
    assert!(d.endpoint().allowed_origins.is_empty());
    let c = Config::from_toml(
        "[endpoint]\nlisten = \"[::1]:9333\"\nall_targets = true\n\
         allowed_origins = [\"HTTP://LocalHost:3000/\", \"*\"]",
    )
    .unwrap();
    assert_eq!(c.endpoint().listen, "[::1]:9333");
    assert!(c.endpoint().all_targets);
    assert_eq!(c.endpoint().allowed_origins, ["http://localhost:3000", "*"]);
    let c = Config::from_toml("[endpoint]\nlisten = \"localhost:0\"").unwrap();
    assert_eq!(c.endpoint().listen, "127.0.0.1:0");
    for addr in [
        "0.0.0.0:9333",
        "10.0.0.5:9333",
        "[::]:9333",
        "example.com:80",
        "127.0.0.1",
    ] {
        let toml = format!("[endpoint]\nlisten = \"{addr}\"");
        let e = Config::from_toml(&toml).unwrap_err();
        assert!(
            matches!(&e, Error::Config { key, .. } if key == "endpoint.listen"),
            "{addr}: {e:?}"
        );
        assert!(e.to_string().contains("loopback"), "{e}");
        let e = EndpointSettings::default().with_listen(addr).unwrap_err();
        assert!(matches!(&e, Error::Config { key, .. } if key == "endpoint.listen"));
    }
    for bad in [
        "localhost:3000",
        "http://a/path",
        "http://",
        "javascript:alert(1)",
    ] {
        let toml = format!("[endpoint]\nallowed_origins = [\"*\", \"{bad}\"]");
        let e = Config::from_toml(&toml).unwrap_err();
        assert!(
            matches!(&e, Error::Config { key, .. } if key == "endpoint.allowed_origins[1]"),
            "{bad}: {e:?}"
        );
    }
    // The environment's one string is split at commas.
    let mut c = Config::default();
    c.set(
        "endpoint.allowed_origins",
        SettingValue::Text("http://a.test, https://b.test:8443".into()),
    )
    .unwrap();
    assert_eq!(
        c.endpoint().allowed_origins,
        ["http://a.test", "https://b.test:8443"]
    );
    // The setter checks as the file does.
    let e = Config::default()
        .with_endpoint(EndpointSettings {
            listen: "0.0.0.0:1".into(),
            ..EndpointSettings::default()
        })
        .unwrap_err();
    assert!(matches!(&e, Error::Config { key, .. } if key == "endpoint.listen"));
    let s = EndpointSettings::default()
        .with_all_targets(true)
        .with_allowed_origins(["http://x.test"])
        .unwrap();
    let c = Config::default().with_endpoint(s.clone()).unwrap();
    assert_eq!(c.endpoint(), &s);
}
