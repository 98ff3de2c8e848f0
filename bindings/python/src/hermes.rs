//! What the Hermes drop-in (`cdp_supervisor/hermes/`) needs beyond the public API, for
//! Hermes versions before its owned tab (issue 31; the drop-in's `legacy_first_page()`): the
//! page those versions attach to. They take the first `type == "page"` target of
//! `Target.getTargets`, whatever its URL (a fresh headless Chromium's only page is its new-tab
//! page, which the Rust supervisor's own choice passes over); their tests then act on that
//! same page, so the drop-in must attach to it too.
//!
//! A page that was just closed (`Target.closeTarget` has answered) can still be listed, even
//! first, by a `Target.getTargets` that follows at once (on Chromium 156, a start right after a
//! supervisor closed its own page picked that page every time): the drop-in may pick a page
//! that is gone by the time it attaches. It then asks again, passing over the pages it already
//! tried (`skip`).

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use cdp_supervisor::unversioned::Deadline;
use pyo3::prelude::*;
use serde_json::Value;
use tungstenite::Message;

/// The first page target of the browser at `cdp_url` that is not in `skip`, asked on a
/// short-lived connection of its own within `timeout_s`; `None` when there is none, for
/// `wss://` endpoints, or on any failure (the caller then lets the supervisor choose). Never
/// says why: the URL may carry credentials.
#[pyfunction]
#[pyo3(name = "_first_page_target", signature = (cdp_url, timeout_s, skip=Vec::new()))]
pub fn first_page_target(
    py: Python<'_>,
    cdp_url: String,
    timeout_s: f64,
    skip: Vec<String>,
) -> Option<String> {
    let bound = Duration::try_from_secs_f64(timeout_s.clamp(0.0, 30.0)).ok()?;
    py.detach(|| ask(&cdp_url, Deadline::after(bound), &skip).ok().flatten())
}

fn ask(
    cdp_url: &str,
    deadline: Deadline,
    skip: &[String],
) -> Result<Option<String>, Box<dyn std::error::Error>> {
    let left = || {
        deadline
            .remaining()
            .filter(|d| !d.is_zero())
            .ok_or("deadline")
    };
    let ws_url = cdp_supervisor::unversioned::resolve(cdp_url)?;
    let parsed = url::Url::parse(&ws_url)?;
    if parsed.scheme() != "ws" {
        return Ok(None);
    }
    let host = parsed.host_str().ok_or("no host")?;
    let port = parsed.port_or_known_default().ok_or("no port")?;
    let addr = (host, port).to_socket_addrs()?.next().ok_or("no address")?;
    let stream = TcpStream::connect_timeout(&addr, left()?)?;
    stream.set_read_timeout(Some(left()?))?;
    stream.set_write_timeout(Some(left()?))?;
    let (mut ws, _) = tungstenite::client(ws_url.as_str(), stream)?;
    ws.send(Message::text(r#"{"id":1,"method":"Target.getTargets"}"#))?;
    loop {
        ws.get_ref().set_read_timeout(Some(left()?))?;
        let Message::Text(text) = ws.read()? else {
            continue;
        };
        let reply: Value = serde_json::from_str(text.as_str())?;
        if reply["id"] != 1 {
            continue;
        }
        let _ = ws.close(None);
        let first = reply["result"]["targetInfos"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["type"] == "page")
            .filter_map(|t| t["targetId"].as_str())
            .find(|id| !skip.iter().any(|s| s == id))
            .map(str::to_string);
        return Ok(first);
    }
}
