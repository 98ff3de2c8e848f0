//! `wss://` against a fake browser behind TLS (a self-signed CA passed through `browser.ca_file`):
//! a dialog detected and answered over TLS; a certificate we do not trust is refused clearly;
//! `cdp-supervisor check` and `cdp_available_with` trust the configured CA as a connect does
//! (issue 20, item 10).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{
    ClosedBy, Config, DialogAction, Error, SupervisorRegistry, cdp_available_with,
};

use crate::common::procs::clean_config_env;

use crate::common::tls::{TlsProxy, pki};

fn fake_port(fake: &FakeBrowser) -> u16 {
    fake.http_url().rsplit(':').next().unwrap().parse().unwrap()
}

#[test]
fn dialog_is_detected_and_answered_over_wss_with_an_extra_ca() {
    let pki = pki();
    let fake = FakeBrowser::start().unwrap();
    let proxy = TlsProxy::start(&pki, fake_port(&fake));
    let dir = std::env::temp_dir().join(format!("cdp-sup-wss-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &pki.ca_pem).unwrap();
    let config = Config::from_toml(&format!(
        "[browser]\nca_file = {:?}\n",
        ca_file.display().to_string()
    ))
    .unwrap();
    let reg = SupervisorRegistry::new(config);
    let url = format!("wss://localhost:{}/devtools/browser/fake", proxy.port);
    let sup = reg.get_or_start("tls", &url).expect("attach over wss");
    assert!(sup.snapshot().is_active());
    fake.open_dialog("prompt", "over TLS?", "no");
    let d = sup
        .wait_for_dialog(Duration::from_secs(5))
        .expect("detected over TLS");
    assert_eq!(d.message, "over TLS?");
    sup.respond_to_dialog(DialogAction::Accept, Some("yes ✓"), None)
        .unwrap();
    let s = sup
        .wait_for(Duration::from_secs(5), |s| !s.recent_dialogs.is_empty())
        .unwrap();
    assert_eq!(s.recent_dialogs[0].closed_by, ClosedBy::Agent);
    assert_eq!(s.recent_dialogs[0].user_input.as_deref(), Some("yes ✓"));
    assert!(reg.stop("tls"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_untrusted_certificate_is_refused_with_a_clear_error() {
    let pki = pki();
    let fake = FakeBrowser::start().unwrap();
    let proxy = TlsProxy::start(&pki, fake_port(&fake));
    let reg = SupervisorRegistry::new(Config::default());
    let url = format!(
        "wss://localhost:{}/devtools/browser/fake?token=S3CR3T",
        proxy.port
    );
    let err = reg.get_or_start("tls", &url).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Connect { .. }), "{text}");
    assert!(text.contains("TLS handshake failed"), "{text}");
    assert!(text.to_lowercase().contains("certificate"), "{text}");
    assert!(!text.contains("S3CR3T"), "credential leaked: {text}");
    assert_eq!(fake.accepted_count(), 0, "nothing reached the browser");
}

#[test]
fn a_missing_ca_file_is_a_config_error_naming_the_key() {
    let err = Config::from_toml("[browser]\nca_file = \"/no/such/ca.pem\"\n").unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("browser.ca_file") && text.contains("/no/such/ca.pem"),
        "{text}"
    );
}

/// Runs `cdp-supervisor [--config FILE] check URL` with `env` set; returns the exit code and
/// stderr.
fn check(
    url: &str,
    config: Option<&std::path::Path>,
    env: &[(&str, &std::path::Path)],
) -> (Option<i32>, String) {
    let mut cmd = Command::new(crate::common::bin::bin());
    clean_config_env(&mut cmd);
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    cmd.args(["check", url])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let t = Instant::now();
    let out = cmd.output().expect("run check");
    assert!(
        t.elapsed() < Duration::from_secs(8),
        "check took {:?}",
        t.elapsed()
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_and_cdp_available_trust_the_configured_ca_file() {
    let pki = pki();
    let fake = FakeBrowser::start().unwrap();
    let proxy = TlsProxy::start(&pki, fake_port(&fake));
    let dir = std::env::temp_dir().join(format!("cdp-sup-wss-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &pki.ca_pem).unwrap();
    let toml = format!("[browser]\nca_file = {:?}\n", ca_file.display().to_string());
    let config_file = dir.join("config.toml");
    std::fs::write(&config_file, &toml).unwrap();
    let with_ca = Config::from_toml(&toml).unwrap();
    let url = format!(
        "wss://localhost:{}/devtools/browser/fake?token=S3CR3T",
        proxy.port
    );

    // The library: the same TLS settings as a connect.
    assert!(
        cdp_available_with(&url, &with_ca),
        "trusted through browser.ca_file"
    );
    assert!(
        !cdp_available_with(&url, &Config::default()),
        "not trusted without it"
    );
    let reg = SupervisorRegistry::new(with_ca);
    assert!(
        reg.get_or_start("tls-check", &url).is_ok(),
        "a connect agrees"
    );
    reg.stop_all();

    // The binary: the CA from a --config file, or from the environment.
    let (code, err) = check(&url, Some(&config_file), &[]);
    assert_eq!(code, Some(0), "check --config with ca_file: {err}");
    let (code, err) = check(
        &url,
        None,
        &[("CDP_SUPERVISOR__BROWSER__CA_FILE", &ca_file)],
    );
    assert_eq!(
        code,
        Some(0),
        "check with CDP_SUPERVISOR__BROWSER__CA_FILE: {err}"
    );
    let (code, err) = check(&url, None, &[]);
    assert_eq!(code, Some(1), "check without the CA: {err}");
    assert!(
        err.to_lowercase().contains("certificate"),
        "says why: {err}"
    );
    assert!(!err.contains("S3CR3T"), "credential leaked: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}
