//! [`CancelToken`]: lets another thread abandon a call that is waiting for its reply (an MCP
//! client's `notifications/cancelled`, a host's own time-out).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, bounded};

/// A one-shot cancellation signal shared by clones. Cancelling wakes every call waiting with
/// this token at once; the call then returns [`crate::Error::Cancelled`] and its late reply is
/// dropped (never delivered to another caller).
#[derive(Debug, Clone)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    cancelled: AtomicBool,
    /// Dropped by `cancel`: disconnecting `wake` wakes waiters blocked on it.
    sender: Mutex<Option<Sender<()>>>,
    wake: Receiver<()>,
}

impl Default for CancelToken {
    fn default() -> Self {
        CancelToken::new()
    }
}

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> CancelToken {
        let (tx, rx) = bounded(0);
        CancelToken {
            inner: Arc::new(Inner {
                cancelled: AtomicBool::new(false),
                sender: Mutex::new(Some(tx)),
                wake: rx,
            }),
        }
    }

    /// Cancels: every call waiting with this token (now or later) returns at once. Idempotent.
    pub fn cancel(&self) {
        self.inner.cancelled.store(true, Ordering::Release);
        drop(
            self.inner
                .sender
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
    }

    /// True once [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// Disconnects when cancelled (for `select!` in waits).
    pub(crate) fn receiver(&self) -> &Receiver<()> {
        &self.inner.wake
    }
}
