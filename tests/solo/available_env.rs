//! Issue 20, item 10 (SPEC §9): `cdp_available(url)` connects with the configuration
//! `Config::load(None)` gives, so a `browser.ca_file` set in the environment
//! (`CDP_SUPERVISOR__BROWSER__CA_FILE`) is trusted for `wss://`, as a connect trusts it.
//!
//! It sets an environment variable, which `Config::load` reads: it runs in `tests/solo` right
//! after `config_layers`, before any thread exists that could read the environment, and the
//! threads it starts (the fake browser, the TLS proxy) never read it.

#[path = "../it/common/tls.rs"]
mod tls;

use cdp_supervisor::cdp_available;
use cdp_supervisor::fake::FakeBrowser;

const KEY: &str = "CDP_SUPERVISOR__BROWSER__CA_FILE";

/// Removes the variable on drop, also when the test panics.
struct Unset;

impl Drop for Unset {
    fn drop(&mut self) {
        // SAFETY: see the module doc: no thread of this process reads the environment now.
        unsafe { std::env::remove_var(KEY) };
    }
}

pub(crate) fn cdp_available_trusts_the_ca_file_named_in_the_environment() {
    let pki = tls::pki();
    let dir = std::env::temp_dir().join(format!("cdp-sup-avail-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &pki.ca_pem).unwrap();
    let _unset = Unset;
    // SAFETY: no other thread exists yet (see the module doc).
    unsafe { std::env::set_var(KEY, &ca_file) };
    let fake = FakeBrowser::start().unwrap();
    let port: u16 = fake.http_url().rsplit(':').next().unwrap().parse().unwrap();
    let proxy = tls::TlsProxy::start(&pki, port);
    let url = format!("wss://localhost:{}/devtools/browser/fake", proxy.port);
    assert!(cdp_available(&url), "the CA named in {KEY} is trusted");
    drop(_unset);
    assert!(
        !cdp_available(&url),
        "without it the certificate is not trusted"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
