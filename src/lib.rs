//! cdp-supervisor: one persistent Chrome DevTools Protocol connection per browser task that
//! catches native JS dialogs the moment they block a page, tracks the frame tree (including
//! out-of-process iframes), routes CDP calls into any frame, and publishes it all through a
//! lock-free [`Snapshot`] that synchronous tool handlers read in nanoseconds.
//!
//! No async runtime: blocking sockets, threads, crossbeam channels and arc-swap.
//!
//! Layout: [`transport`] (socket, framing), [`protocol`] (envelopes and the events we decode),
//! [`core`] (the I/O-free single-writer state machine), [`frames`], [`state`] (the published
//! snapshot), [`watchdog`], [`supervisor`] (the reader loop that ties them together),
//! [`registry`], [`tools`] (JSON handlers), [`config`].
#![deny(missing_docs, missing_debug_implementations, unsafe_code)]

mod attach;
pub mod bridge;
mod cancel;
pub mod config;
pub mod core;
pub mod deadline;
pub mod endpoint;
pub mod error;
#[cfg(feature = "fake-browser")]
pub mod fake;
pub mod frames;
// Syscalls (process groups, signals, waitid): each `unsafe` block has a SAFETY comment and
// checks its return value.
#[allow(unsafe_code)]
pub mod launch;
mod link;
pub mod mcp;
mod measured;
pub mod protocol;
mod reader;
pub mod redact;
pub mod registry;
pub mod state;
pub mod supervisor;
pub mod tools;
// Syscalls (recv/send without blocking, poll with the time left to a deadline): each `unsafe`
// block has a SAFETY comment and checks its return value.
#[allow(unsafe_code)]
pub mod transport;
pub mod watchdog;

pub use cancel::CancelToken;
pub use config::{BridgeMode, Config, DialogAction, DialogPolicy, Limits, Security};
pub use endpoint::cdp_available;
pub use error::Error;
pub use registry::{StartOptions, SupervisorRegistry};
pub use state::{
    ClosedBy, ClosedDialog, ConsoleEntry, FrameTree, PageInfo, PendingDialog, Snapshot,
    SupervisorState,
};
pub use supervisor::{Route, Supervisor};
