//! `cdp-supervisor proxy [--cdp-url URL] [--listen ADDR] [--http ADDR]`: the browser served to
//! CDP clients through [`SupervisorRegistry::cdp_proxy`](cdp_supervisor::SupervisorRegistry):
//! each client a task of its own, and one JSON line on stdout per event (`listening` first,
//! then `task_started`, `dialog_opened`, `dialog_closed`, `task_stopped`), until a signal.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use cdp_supervisor::{Config, SettingValue, redact_url};
use crossbeam_channel::{RecvTimeoutError, bounded};
use serde_json::{Value, json};

use crate::{Cleanup, browser_url, page_registry};

/// One JSON line on stdout, written whole and flushed.
fn emit(line: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Serves until a signal, whose handler runs `cleanup`: the clients are closed with 1001 ("the
/// proxy is shutting down"), their tasks stopped (each reported), then the launched browser
/// ended.
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
    let registry = page_registry(config, http, cleanup)?;
    cleanup.set_registry(Arc::clone(&registry));
    let proxy = registry
        .cdp_proxy(&url, |event| emit(&event.to_json()))
        .map_err(|e| e.to_string())?;
    let ep = proxy.endpoint().clone();
    let (done, ended) = bounded::<()>(0);
    // Before the registry stops the tasks: the clients hear that the proxy is shutting down, not
    // that their task stopped.
    cleanup.on_cleanup_first(move || {
        proxy.close();
        drop(done);
    });
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
    loop {
        match ended.recv_timeout(Duration::from_secs(3600)) {
            Err(RecvTimeoutError::Timeout) => continue,
            _ => return Ok(()),
        }
    }
}
