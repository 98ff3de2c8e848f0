//! [`CancelToken`]: lets another thread abandon a call that is waiting for its reply, or call off
//! a start ([`crate::StartRequest::with_cancel`]): an MCP client's `notifications/cancelled`, a
//! host's own time-out, a shutdown. [`recv`] is the one wait on a channel with a deadline and an
//! optional token (a CDP reply, another caller's start).

use crate::sync;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};

use crate::deadline::Deadline;

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

/// How [`recv`] ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Received<T> {
    /// A value came.
    Value(T),
    /// The sender went away without sending.
    Closed,
    /// The deadline passed first.
    TimedOut,
    /// The token was cancelled first.
    Cancelled,
}

/// The one blocking wait on a channel: until a value comes, the sender goes, `until` passes or
/// `cancel` (if any) is cancelled, whichever is first. Without a token it is one
/// `recv_deadline`; with one, a `select!` that allocates nothing.
pub(crate) fn recv<T>(
    rx: &Receiver<T>,
    until: Deadline,
    cancel: Option<&CancelToken>,
) -> Received<T> {
    let Some(cancel) = cancel else {
        return match until.recv(rx) {
            Ok(v) => Received::Value(v),
            Err(RecvTimeoutError::Timeout) => Received::TimedOut,
            Err(RecvTimeoutError::Disconnected) => Received::Closed,
        };
    };
    let got = |r: Result<T, _>| r.map_or(Received::Closed, Received::Value);
    match until.remaining() {
        None => crossbeam_channel::select! {
            recv(rx) -> r => got(r),
            recv(cancel.receiver()) -> _ => Received::Cancelled,
        },
        Some(left) => crossbeam_channel::select! {
            recv(rx) -> r => got(r),
            recv(cancel.receiver()) -> _ => Received::Cancelled,
            default(left) => Received::TimedOut,
        },
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
    fn recv_ends_on_a_value_a_close_the_deadline_or_the_token() {
        let soon = Deadline::after(std::time::Duration::from_millis(20));
        let (tx, rx) = bounded::<u8>(1);
        let token = CancelToken::new();
        assert_eq!(recv(&rx, soon, Some(&token)), Received::TimedOut);
        assert_eq!(recv(&rx, soon, None), Received::TimedOut);
        tx.send(7).unwrap();
        assert_eq!(recv(&rx, Deadline::NEVER, Some(&token)), Received::Value(7));
        token.cancel();
        assert_eq!(
            recv(&rx, Deadline::NEVER, Some(&token)),
            Received::Cancelled
        );
        drop(tx);
        assert_eq!(recv(&rx, Deadline::NEVER, None), Received::Closed);
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
