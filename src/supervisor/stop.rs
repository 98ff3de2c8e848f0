//! Stopping a supervisor: dialogs still pending are dismissed, the page it opened is closed
//! (for good: see [`close_own_page`]), the connection shut, both threads joined; all within
//! about 1 s. Then, unless `downloads.keep`, the files the task downloaded are removed, and its
//! download directory once empty.

use crate::sync;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::bounded;
use log::{debug, warn};
use serde_json::json;

use super::{READER_STACK, Supervisor};
use crate::core::{CallKind, Command, answer_command};
use crate::deadline::Deadline;
use crate::outbound::Outbound;
use crate::shared::Shared;
use crate::snapshot::{ClosedBy, PendingDialog};

impl Supervisor {
    /// Asks the supervisor to stop ([`StopPhase::Requested`](crate::shared::StopPhase)): from
    /// now on it is not alive, and calls fail. The registry does this while it still holds the
    /// task's slot, so no observer ever sees two live supervisors for one task;
    /// [`Supervisor::stop`] does the work.
    pub(crate) fn request_stop(&self) {
        self.shared.request_stop();
    }

    /// Stops the supervisor: dismisses dialogs still pending (so the page is not left wedged),
    /// closes the socket and joins both threads. Returns within about 1 s even when the peer has
    /// stopped answering. Idempotent.
    pub fn stop(&self) {
        if self.shared.begin_stop() {
            let budget = Deadline::after(Duration::from_millis(700));
            let polite_done_by = Deadline::after(Duration::from_millis(800));
            let shared = Arc::clone(&self.shared);
            let pending = self.snapshot().pending_dialogs.clone();
            let own_page = if self.owns_page() {
                self.snapshot().page_target_id.clone()
            } else {
                None
            };
            let (done_tx, done_rx) = bounded::<()>(1);
            let polite = std::thread::Builder::new()
                .name("cdp-stop".into())
                .stack_size(READER_STACK)
                .spawn(move || {
                    dismiss_all(&shared, &pending, budget);
                    if let Some(target) = own_page {
                        close_own_page(&shared, &target, budget);
                    }
                    shared.transport.load().close();
                    let _ = done_tx.send(());
                });
            let _ = polite_done_by.recv(&done_rx);
            // Shut the connection before waking the reader; a reconnect that completes from
            // now on is refused, so the reader can never go back to reading a live socket.
            self.shared.close_for_good();
            drop(sync::lock(&self.wake_reader).take());
            if let Ok(t) = polite {
                let _ = t.join();
            }
        }
        let threads: Vec<_> = self.lock_threads().drain(..).collect();
        for t in threads {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
        if let Some(dir) = &self.download_dir
            && !self.config.downloads.keep
        {
            let snap = self.snapshot();
            let guids: Vec<std::path::PathBuf> =
                snap.downloads.iter().map(|d| dir.join(&d.guid)).collect();
            let files = (snap.downloads.iter())
                .filter_map(|d| d.path.as_deref())
                .chain(guids.iter().map(std::path::PathBuf::as_path));
            crate::local_files::remove_task_dir(dir, files);
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop();
    }
}

fn dismiss_all(shared: &Shared, pending: &[PendingDialog], budget: Deadline) {
    let mut waits = Vec::new();
    for d in pending {
        let c = answer_command(d, false, None, ClosedBy::AutoPolicy);
        if let Ok(reply) = shared.start_call(c, budget) {
            waits.push(reply);
        }
    }
    for reply in waits {
        let _ = reply.wait();
    }
}

/// How long [`close_own_page`] waits for the page to go after a `Target.closeTarget` before it
/// sends another. A close that works takes the page away 2 to 170 ms after its reply (measured
/// on Chromium 156, a loaded 2-core machine); one more `Target.closeTarget` to a page that is
/// closing anyway is harmless.
const CLOSE_RETRY_AFTER: Duration = Duration::from_millis(100);

/// Closes the page the supervisor created for its task (`StartOptions::own_page`) and checks
/// that it went, all by `budget`.
///
/// Chromium 156 answers `{success: true}` to a `Target.closeTarget` that reaches it while the
/// page's first navigation (from the new tab's `about:blank` to a site) is about to commit, and
/// then keeps the page open for good (still listed 10 s later). Measured with a loopback server
/// answering at once: 11 of 48 closes sent 18 to 40 ms after `Page.navigate` were lost;
/// `Page.stopLoading` first (4 of 28) or `Page.close` instead (5 of 28) do not help; a
/// navigation from one site to another (28 closes) or a close while the response is still held
/// back never lost the page; a second `Target.closeTarget` 300 ms later closed every page left
/// open (16 of 16). So the close is sent again every [`CLOSE_RETRY_AFTER`] until the
/// page is gone, which the reader shows by ending (the page's session detached:
/// `Core::page_gone`). `tests/it/e2e_own_page.rs` stops supervisors in that window.
fn close_own_page(shared: &Shared, target_id: &str, budget: Deadline) {
    for attempt in 1.. {
        let c = Command::new("Target.closeTarget", json!({ "targetId": target_id }))
            .kind(CallKind::Automatic);
        let Ok(reply) = shared.start_call(c, budget) else {
            return; // no connection: nothing more can be done
        };
        if let Err(e) = reply.wait() {
            // "No target with given id found": gone already. Anything else: nothing to retry.
            debug!("Target.closeTarget for the task's own page {target_id}: {e}");
            return;
        }
        let within = budget.within(CLOSE_RETRY_AFTER);
        if shared.wait_for(within, |s| s.state.is_final()).is_some() {
            return;
        }
        if budget.passed() {
            warn!(
                "the page {target_id} this supervisor opened is still open after {attempt} \
                 Target.closeTarget within {:?}",
                budget.budget()
            );
            return;
        }
        debug!("the page {target_id} is still open after Target.closeTarget; sending it again");
    }
}
