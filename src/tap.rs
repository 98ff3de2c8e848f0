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
    /// The reader has handled a batch of messages: what it claimed for the clients is written
    /// now, with writes that never wait (one per client).
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
