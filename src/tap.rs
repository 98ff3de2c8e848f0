//! The seam between a supervisor's reader and the CDP clients it carries (`crate::cdp_endpoint`):
//! the reader offers each message to a [`Tap`] before its own state machine sees it, and tells it
//! about every publish and every lost connection. Defined here, beside neither, so that the
//! reader does not depend on the endpoint (no import circle).
//!
//! Every method runs on the reader thread: it must not block (a short lock, a `try_send`).
//!
//! Also the registry's handle on the endpoint's listener ([`Listener`]), for the same reason.

use std::any::Any;
use std::sync::Arc;

use crate::snapshot::Snapshot;

/// What the reader hands the clients of its task.
pub(crate) trait Tap: Send + Sync {
    /// `text` arrived on the connection. True when it belongs to a client (a reply to a client's
    /// command, an event of a session a client owns): the supervisor's state machine then never
    /// sees it.
    fn claims(&self, text: &str) -> bool;
    /// The reader has handled a batch of messages and published what they did to the task:
    /// what it claimed for the clients is written now, with writes that never wait (one per
    /// client). Never before that publish: a client must not hear of something (its answer to
    /// a dialog acknowledged) before the snapshot its next call is judged against shows it.
    fn batch_done(&self);
    /// A snapshot was published (calls in flight that a dialog now blocks fail; a final state
    /// disconnects every client).
    fn published(&self, snapshot: &Snapshot);
    /// The pages clients created since the last call (`Target.createTarget`, answered): the
    /// reader has its state machine follow them as the task's.
    fn take_joined(&self) -> Vec<String>;
    /// The supervisor's sessions into whose renderer clients sent `Page.handleJavaScriptDialog`
    /// since the last call (the reader asks before each batch it reads).
    fn take_answers(&self) -> Vec<String>;
    /// The connection ended: every session it carried is gone.
    fn connection_lost(&self, reason: &str);
    /// Itself, for its owner to find its own type again.
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

/// The registry's CDP endpoint listener, as the registry sees it (it closes it).
pub(crate) trait Listener: Send + Sync + std::fmt::Debug {
    /// Stops accepting, disconnects every client, joins every thread.
    fn close(&self);
    /// Itself, for its owner to find its own type again.
    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Mutex, Weak};
    use std::time::Duration;

    use super::*;
    use crate::fake::FakeBrowser;
    use crate::shared::Shared;
    use crate::{Config, SupervisorRegistry};

    /// A tap that claims nothing and, at each `batch_done`, checks that the published snapshot
    /// already shows the dialogs the reader was handed so far.
    struct Recorder {
        shared: Mutex<Weak<Shared>>,
        opened: AtomicUsize,
        closed: AtomicUsize,
        /// `(pending in the snapshot, opened - closed handed over)` at each stale `batch_done`.
        stale: Mutex<Vec<(usize, usize)>>,
    }

    impl Tap for Recorder {
        fn claims(&self, text: &str) -> bool {
            if text.contains("Page.javascriptDialogOpening") {
                self.opened.fetch_add(1, Ordering::SeqCst);
            } else if text.contains("Page.javascriptDialogClosed") {
                self.closed.fetch_add(1, Ordering::SeqCst);
            }
            false
        }
        fn batch_done(&self) {
            let Some(shared) = self.shared.lock().unwrap().upgrade() else {
                return;
            };
            let pending = shared.snapshot.load().pending_dialogs.len();
            let open = self.opened.load(Ordering::SeqCst) - self.closed.load(Ordering::SeqCst);
            if pending != open {
                self.stale.lock().unwrap().push((pending, open));
            }
        }
        fn published(&self, _: &Snapshot) {}
        fn take_joined(&self) -> Vec<String> {
            Vec::new()
        }
        fn take_answers(&self) -> Vec<String> {
            Vec::new()
        }
        fn connection_lost(&self, _: &str) {}
        fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
            self
        }
    }

    /// The race behind a CDP client's call refused for a dialog it had just answered (seen
    /// under load in `the_dialog_scenarios_...`: Puppeteer's call after its answer was
    /// "blocked by an alert dialog d-1"): the reader wrote a batch's replies to the clients
    /// before it published what the same batch did to the task (the dialog closed), so a
    /// client quick enough sent its next call against the old snapshot. The snapshot must be
    /// published before the clients are written to.
    #[test]
    fn clients_are_written_to_only_once_the_batch_they_come_from_is_published() {
        let fake = FakeBrowser::start().unwrap();
        let reg = SupervisorRegistry::new(Config::default());
        let sup = reg.get_or_start("t", &fake.ws_url()).unwrap();
        let tap = Arc::new(Recorder {
            shared: Mutex::new(Weak::new()),
            opened: AtomicUsize::new(0),
            closed: AtomicUsize::new(0),
            stale: Mutex::new(Vec::new()),
        });
        *tap.shared.lock().unwrap() = Arc::downgrade(sup.shared());
        assert!(
            sup.shared()
                .tap
                .set(Arc::clone(&tap) as Arc<dyn Tap>)
                .is_ok()
        );
        let wait = Duration::from_secs(5);
        fake.open_dialog("alert", "hi", "");
        assert!(
            sup.wait_for(wait, |s| !s.pending_dialogs.is_empty())
                .is_some()
        );
        fake.close_dialog_remotely();
        assert!(
            sup.wait_for(wait, |s| s.pending_dialogs.is_empty())
                .is_some()
        );
        assert_eq!(tap.closed.load(Ordering::SeqCst), 1);
        assert_eq!(
            *tap.stale.lock().unwrap(),
            [],
            "(pending, open) when clients were written"
        );
        reg.stop("t");
    }
}
