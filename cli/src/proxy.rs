//! `cdp-supervisor proxy [--cdp-url URL] [--listen ADDR] [--http ADDR]`: the browser served to
//! CDP clients through [`SupervisorRegistry::cdp_proxy`](cdp_supervisor::SupervisorRegistry):
//! each client a task of its own, and one JSON line on stdout per event (`listening` first,
//! then `task_started`, `dialog_opened`, `dialog_closed`, `task_stopped`), until a signal, or
//! until the Chromium it launched (without `--cdp-url`) exits: then its clients are closed
//! (1001, "the browser exited"), it says so on stderr and exits 1.

use std::io::Write;
use std::sync::Arc;

use cdp_supervisor::{Config, SettingValue, redact_url};
use serde_json::{Value, json};

use crate::{Cleanup, browser_url, page_registry};

/// One JSON line on stdout, written whole and flushed.
fn emit(line: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// What the clients are told when the launched browser has exited.
const BROWSER_EXITED: &str = "the browser exited";

/// Serves until a signal, whose handler runs `cleanup`: the clients are closed with 1001 ("the
/// proxy is shutting down"), their tasks stopped (each reported), then the launched browser
/// ended. Fails when the browser it launched exits (module doc).
pub fn run(
    mut config: Config,
    cdp_url: Option<String>,
    listen: Option<String>,
    http: Option<&str>,
    cleanup: &Cleanup,
) -> Result<(), String> {
    if let Some(addr) = listen {
        config
            .set("endpoint.listen", SettingValue::Text(addr))
            .map_err(|e| format!("--listen: {e}"))?;
    }
    let url = browser_url(&config, cdp_url, cleanup)?;
    // Taken before anything else can fail: a browser that dies from here on is noticed.
    let launched = cleanup.browser_exit();
    let registry = page_registry(config, http, cleanup)?;
    cleanup.set_registry(Arc::clone(&registry));
    let proxy = registry
        .cdp_proxy(&url, |event| emit(&event.to_json()))
        .map_err(|e| e.to_string())?;
    let proxy = Arc::new(proxy);
    let ep = proxy.endpoint().clone();
    {
        // Before the registry stops the tasks: the clients hear that the proxy is shutting
        // down, not that their task stopped.
        let proxy = Arc::clone(&proxy);
        cleanup.on_cleanup_first(move || proxy.close());
    }
    emit(&json!({
        "event": "listening",
        "ws_url": ep.ws_url,
        "http_url": ep.http_url,
        "cdp_url": redact_url(&url),
    }));
    eprintln!(
        "cdp-supervisor proxy: connect CDP clients to {} (or discover it at {}); Ctrl-C to stop",
        ep.ws_url, ep.http_url
    );
    let Some((pid, exited)) = launched else {
        // Until a signal, whose handler exits the process.
        loop {
            std::thread::park();
        }
    };
    // Nothing is ever sent on it: it returns when the browser has exited.
    while exited.recv().is_ok() {}
    if crate::interrupted() {
        return Ok(()); // the signal's cleanup closed it
    }
    eprintln!(
        "cdp-supervisor proxy: the browser it launched (pid {pid}) exited; closing its clients"
    );
    proxy.close_because(BROWSER_EXITED);
    Err(format!(
        "the browser the proxy launched (pid {pid}) exited, so the proxy ends"
    ))
}
