//! One client: a browser session of its own on the task's connection, then two threads, a
//! reader (this connection's thread: frames in, commands to the [`Mux`]) and a writer (its
//! [`Outlet`]'s, which writes what did not go out at once: `outlet.rs`), which ends when the
//! client leaves, is closed or is cut.

use std::io::{BufReader, Cursor, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use log::{debug, info};
use serde_json::json;

use super::frame::{self, FrameReader, Incoming, ReadError};
use super::mux::{Mux, Policy};
use super::outlet::Outlet;
use crate::config::DialogPolicy;
use crate::core::Command;
use crate::deadline::Deadline;
use crate::outbound::Outbound;
use crate::supervisor::Supervisor;
use crate::tap::Tap;

/// The largest message a client may send (Chromium's own cap is 256 MiB; 64 MiB is plenty for
/// a command).
const MAX_MESSAGE: usize = 64 << 20;

/// What one `recv` of a client's frames may take.
const READ_BUFFER: usize = 64 << 10;

/// How long opening the client's browser session may take.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(10);

/// The mux of `sup`'s task, if a client has connected.
pub(super) fn mux_of(sup: &Supervisor) -> Option<Arc<Mux>> {
    let tap: Arc<dyn Tap> = Arc::clone(sup.shared().tap.get()?);
    tap.into_any().downcast::<Mux>().ok()
}

/// The mux of `sup`'s task, installed on its reader with the first client.
pub(super) fn mux_for(sup: &Supervisor) -> Option<Arc<Mux>> {
    if let Some(m) = mux_of(sup) {
        return Some(m);
    }
    let policy = Policy {
        must_respond: sup.config().dialog_policy() == DialogPolicy::MustRespond,
        security: sup.config().security().clone(),
        own_downloads: sup.download_dir().map(std::path::Path::to_path_buf),
        all_targets: sup.config().endpoint().all_targets,
    };
    let mux = Mux::new(sup.shared(), sup.task_id(), policy);
    let _ = sup.shared().tap.set(mux as Arc<dyn Tap>);
    mux_of(sup)
}

/// Serves one client whose upgrade was answered, until it or the task goes: on the browser,
/// or on the page `page` names (a page client: `mux/page.rs`).
pub(super) fn run(
    sup: &Arc<Supervisor>,
    tcp: TcpStream,
    leftover: Vec<u8>,
    peer: SocketAddr,
    page: Option<String>,
) {
    let Ok(mut out) = tcp.try_clone() else { return };
    let _ = out.set_write_timeout(Some(ATTACH_TIMEOUT));
    let refuse = |out: &mut TcpStream, why: &str| {
        let _ = out.write_all(&frame::close_frame(1011, why));
        let _ = out.shutdown(Shutdown::Both);
    };
    let Some(mux) = mux_for(sup) else {
        return refuse(&mut out, "the task is not running");
    };
    // Every client was closed already (the task or the proxy ended): this one too, the same way.
    let closed = |out: &mut TcpStream| {
        let Some((code, why)) = mux.closed() else {
            return false;
        };
        let _ = out.write_all(&frame::close_frame(code, &why));
        let _ = out.shutdown(Shutdown::Both);
        true
    };
    if closed(&mut out) {
        return;
    }
    let cmd = Command::new("Target.attachToBrowserTarget", json!({}));
    let session = match sup
        .shared()
        .round_trip(cmd, Deadline::after(ATTACH_TIMEOUT))
    {
        Ok(v) => v
            .get("sessionId")
            .and_then(|s| s.as_str())
            .map(str::to_string),
        Err(_) if closed(&mut out) => return,
        Err(e) => return refuse(&mut out, &format!("the browser session failed: {e}")),
    };
    let Some(session) = session else {
        return refuse(&mut out, "the browser gave no session");
    };
    let label = format!("task {}: CDP client {peer}", sup.task_id());
    let Ok((outlet, sock)) = Outlet::new(&tcp, label) else {
        return refuse(&mut out, "the client's socket failed");
    };
    let outlet = Arc::new(outlet);
    let id = mux.join(session.clone(), Arc::clone(&outlet), page.clone());
    info!(
        "task {}: CDP client {peer} connected ({} now)",
        sup.task_id(),
        mux.client_count()
    );
    let writes = Arc::clone(&outlet);
    let writer = std::thread::Builder::new()
        .name(format!(
            "cdp-out-{}",
            tcp.local_addr().map_or(0, |a| a.port())
        ))
        .stack_size(256 * 1024)
        .spawn(move || writes.run(sock));
    let Ok(writer) = writer else {
        mux.leave(id);
        return;
    };
    if let Some(target) = &page
        && let Err(why) = attach_page(sup, &mux, id, &session, target)
    {
        debug!("CDP client {peer}: {why}");
        mux.close_one(id, 1011, &why);
        mux.leave(id);
        let _ = writer.join();
        let _ = tcp.shutdown(Shutdown::Both);
        return;
    }
    let mut reader = FrameReader::new(MAX_MESSAGE);
    // Buffered: a frame's head, mask and payload come in one `recv`, not three.
    let mut input = Cursor::new(leftover).chain(BufReader::with_capacity(READ_BUFFER, &tcp));
    loop {
        match reader.read(&mut input) {
            Ok(Incoming::Text(t)) => mux.forward(id, &t),
            Ok(Incoming::Ping(p)) => mux.pong(id, p),
            Ok(Incoming::Ignored) => {}
            Ok(Incoming::Close) => {
                mux.close_one(id, 1000, "");
                break;
            }
            Err(ReadError::Protocol(code, why)) => {
                debug!("CDP client {peer}: {why}");
                mux.close_one(id, code, why);
                break;
            }
            Err(ReadError::Io(e)) => {
                debug!("CDP client {peer}: {e}");
                break;
            }
        }
    }
    mux.leave(id);
    outlet.end();
    let _ = writer.join();
    let _ = tcp.shutdown(Shutdown::Both);
    info!("task {}: CDP client {peer} left", sup.task_id());
}

/// Opens page client `id`'s root: a flat session on `target` under its browser session.
fn attach_page(
    sup: &Supervisor,
    mux: &Mux,
    id: u64,
    browser_session: &str,
    target: &str,
) -> Result<(), String> {
    let params = json!({ "targetId": target, "flatten": true });
    let cmd = Command::new("Target.attachToTarget", params).on(browser_session);
    let reply = sup
        .shared()
        .round_trip(cmd, Deadline::after(ATTACH_TIMEOUT))
        .map_err(|e| format!("the page could not be attached: {e}"))?;
    let session = reply.get("sessionId").and_then(|s| s.as_str());
    match session {
        Some(s) if mux.page_attached(id, s) => Ok(()),
        _ => Err("the page could not be attached: the browser gave no session".into()),
    }
}
