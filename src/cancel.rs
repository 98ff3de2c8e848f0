//! [`CancelToken`]: lets another thread abandon a call that is waiting for its reply, or call off
//! a start ([`crate::SupervisorRegistry::get_or_start_cancellable`]): an MCP client's
//! `notifications/cancelled`, a host's own time-out, a shutdown.

use crate::sync;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crossbeam_channel::{Receiver, Sender, bounded};

/// A one-shot cancellation signal shared by clones. Cancelling wakes every call waiting with
/// this token at once; the call then returns [`crate::Error::Cancelled`] and its late reply is
/// dropped (never delivered to another caller). A start returns
/// [`crate::Error::StartCancelled`].
#[derive(Debug, Clone)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    cancelled: AtomicBool,
    /// Taken by `cancel`, under this lock so that a child linked concurrently is either in
    /// `children` when `cancel` takes them or sees the token cancelled.
    state: Mutex<Links>,
    wake: Receiver<()>,
}

#[derive(Debug)]
struct Links {
    /// Dropped by `cancel`: disconnecting `wake` wakes waiters blocked on it.
    sender: Option<Sender<()>>,
    /// Tokens that `cancel` cancels too ([`CancelToken::child`]).
    children: Vec<Weak<Inner>>,
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
                state: Mutex::new(Links {
                    sender: Some(tx),
                    children: Vec::new(),
                }),
                wake: rx,
            }),
        }
    }

    fn links(&self) -> std::sync::MutexGuard<'_, Links> {
        sync::lock(&self.inner.state)
    }

    /// Cancels: every call waiting with this token (now or later) returns at once, and so do
    /// those waiting with the tokens linked to it inside this crate. Idempotent.
    pub fn cancel(&self) {
        let (sender, children) = {
            let mut links = self.links();
            self.inner.cancelled.store(true, Ordering::Release);
            (links.sender.take(), std::mem::take(&mut links.children))
        };
        drop(sender);
        for child in children.iter().filter_map(Weak::upgrade) {
            CancelToken { inner: child }.cancel();
        }
    }

    /// A new token that this one's [`cancel`](CancelToken::cancel) cancels too (at once when
    /// this one is cancelled already), and that can also be cancelled on its own without
    /// touching this one: one operation that two parties may call off (a caller, and a
    /// shutdown).
    pub(crate) fn child(&self) -> CancelToken {
        let child = CancelToken::new();
        {
            let mut links = self.links();
            if links.sender.is_some() {
                links.children.retain(|c| c.strong_count() > 0);
                links.children.push(Arc::downgrade(&child.inner));
                return child;
            }
        }
        child.cancel();
        child
    }

    /// True once [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancelled.load(Ordering::Acquire)
    }

    /// True when `other` is a clone of this token.
    pub(crate) fn same_as(&self, other: &CancelToken) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Disconnects when cancelled (for `select!` in waits).
    pub(crate) fn receiver(&self) -> &Receiver<()> {
        &self.inner.wake
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancelling_a_parent_cancels_its_children_and_not_the_reverse() {
        let parent = CancelToken::new();
        let (a, b) = (parent.child(), parent.child());
        b.cancel();
        assert!(b.is_cancelled() && !parent.is_cancelled() && !a.is_cancelled());
        parent.cancel();
        assert!(a.is_cancelled());
        assert!(a.receiver().recv().is_err(), "its waiters wake");
        let late = parent.child();
        assert!(
            late.is_cancelled(),
            "a child of a cancelled token starts cancelled"
        );
    }

    #[test]
    fn dropped_children_are_not_kept() {
        let parent = CancelToken::new();
        for _ in 0..1000 {
            drop(parent.child());
        }
        assert!(parent.links().children.len() <= 1);
    }
}
