//! The one outbound path: every command gets a fresh id, is registered with the connection's
//! reader (before it is written, so that its reply always finds its call), and is written with
//! a deadline; a caller then waits on its [`Reply`].
//!
//! [`Outbound`] is that path over any CDP connection that has a reader handing replies back:
//! a supervisor's ([`Shared`], whose reader is the state machine's) and the registry's popup
//! watcher (`registry/popups.rs`). Callers, the watchdog and the attach sequence go through
//! [`Outbound::start_call`], [`Outbound::round_trip`] or [`Outbound::send_command`]; a
//! supervisor's reader, which must never wait for a reply nor for its own registration
//! channel, through [`Shared::send_from_reader`].

use std::borrow::Cow;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, bounded};

use crate::cancel::CancelToken;
use crate::clock::Now;
use crate::core::{CallResult, Command, Core, PendingCall};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::protocol;
use crate::shared::Shared;
use crate::transport::SendError;

/// A CDP connection with a reader that hands each reply to the call registered under its id.
pub(crate) trait Outbound {
    /// A fresh command id (unique on the connection, across reconnects).
    fn next_id(&self) -> u64;

    /// Hands `call` to the reader, before its command is written.
    fn register(&self, id: u64, call: PendingCall) -> Result<(), Error>;

    /// Writes one command's text, giving up at `deadline` (see
    /// [`Transport::send_text_until`](crate::transport::Transport::send_text_until)).
    fn write_text(&self, text: String, deadline: Deadline) -> Result<(), SendError>;

    /// Sends `cmd` and waits for its reply until `deadline`: one raw round trip, for the
    /// crate's own commands (attaching, answering a dialog, the popup watcher's). Not
    /// [`Supervisor::call`](crate::Supervisor::call), which routes a caller's call and applies
    /// the dialog-aware rules (SPEC §8).
    fn round_trip(&self, cmd: Command, deadline: Deadline) -> CallResult {
        self.start_call(cmd, deadline)?.wait()
    }

    /// Sends `cmd`, returning its [`Reply`] to wait on (pipelined calls).
    fn start_call(&self, cmd: Command, deadline: Deadline) -> Result<Reply, Error> {
        let (tx, rx) = bounded(1);
        let method = cmd.method.clone();
        write_command(self, cmd, Some(tx), deadline, |id, call| {
            self.register(id, call)
        })
        .map_err(|e| e.into_error(deadline, &method))?;
        Ok(Reply {
            rx,
            method,
            deadline,
        })
    }

    /// The one outbound path: registers `cmd` under a fresh id with the reader (before writing
    /// it, so the reply always finds its call), then writes it, giving up at `deadline`. Its
    /// reply goes to `reply` (`None`: fire-and-forget, the reader alone reads it). A deadline
    /// that passes while the frame is being written (a peer that stopped reading) is the call's
    /// time-out, worded with the deadline's budget.
    fn send_command(
        &self,
        cmd: Command,
        reply: Option<Sender<CallResult>>,
        deadline: Deadline,
    ) -> Result<u64, Error> {
        // Free for the static names the crate itself sends.
        let method = cmd.method.clone();
        write_command(self, cmd, reply, deadline, |id, call| {
            self.register(id, call)
        })
        .map_err(|e| e.into_error(deadline, &method))
    }
}

impl Outbound for Shared {
    fn next_id(&self) -> u64 {
        self.next_command_id()
    }

    fn register(&self, id: u64, call: PendingCall) -> Result<(), Error> {
        self.registrations
            .send((id, call))
            .map_err(|_| Error::ConnectionLost("the supervisor's reader has stopped".into()))
    }

    fn write_text(&self, text: String, deadline: Deadline) -> Result<(), SendError> {
        self.transport.load().send_text_until(text, deadline)
    }
}

impl Shared {
    /// [`Outbound::send_command`] for the reader thread: it registers fire-and-forget `cmd`
    /// with its own state machine, `core`, directly (it drains the registration channel only
    /// between reads), and never waits for the reply.
    pub fn send_from_reader(&self, cmd: Command, core: &mut Core, now: Now) -> Result<u64, Error> {
        let method = cmd.method.clone();
        write_command(self, cmd, None, Deadline::NEVER, |id, call| {
            core.register(id, call, now);
            Ok(())
        })
        .map_err(|e| e.into_error(Deadline::NEVER, &method))
    }
}

/// Encodes `cmd` under a fresh id of `line`, registers it through `register`, then writes it.
fn write_command<L: Outbound + ?Sized>(
    line: &L,
    cmd: Command,
    reply: Option<Sender<CallResult>>,
    deadline: Deadline,
    register: impl FnOnce(u64, PendingCall) -> Result<(), Error>,
) -> Result<u64, NotSent> {
    let Command {
        method,
        params,
        session_id,
        kind,
    } = cmd;
    let id = line.next_id();
    let text = protocol::encode_command(id, &method, &params, session_id.as_deref());
    let call = PendingCall {
        method: method.into_owned(),
        session_id,
        kind,
        reply,
        expires: deadline,
    };
    register(id, call).map_err(NotSent::Failed)?;
    match line.write_text(text, deadline) {
        Ok(()) => Ok(id),
        Err(SendError::DeadlinePassed) => Err(NotSent::DeadlinePassed),
        Err(SendError::Lost(e)) => Err(NotSent::Failed(e)),
    }
}

/// Why [`write_command`] did not send (its callers word it with the method, which
/// the registration has taken).
enum NotSent {
    /// The deadline passed while the frame was being written.
    DeadlinePassed,
    /// The reader is gone, or the connection is.
    Failed(Error),
}

impl NotSent {
    fn into_error(self, deadline: Deadline, method: &str) -> Error {
        match self {
            NotSent::DeadlinePassed => deadline.timed_out(method),
            NotSent::Failed(e) => e,
        }
    }
}

/// How long a caller spins for its reply before parking.
const SPIN_BEFORE_PARK: Duration = Duration::from_micros(50);

/// A call that has been written and whose reply is awaited until its [`Deadline`].
#[derive(Debug)]
pub(crate) struct Reply {
    rx: Receiver<CallResult>,
    /// The CDP method, for a time-out's message.
    method: Cow<'static, str>,
    deadline: Deadline,
}

impl Reply {
    /// Waits for the reply until the call's deadline.
    pub fn wait(&self) -> CallResult {
        self.wait_until(self.deadline)
    }

    /// Waits for the reply until `until` (the call's deadline, or a step of it: see
    /// [`Deadline::within`]); a time-out is worded with `until`'s budget. A closed channel means
    /// the connection went away.
    pub fn wait_until(&self, until: Deadline) -> CallResult {
        // A reply on loopback usually lands within tens of microseconds: spin briefly before
        // parking, since a park/unpark pair costs as much again on a virtualised machine.
        let spin = until.within(SPIN_BEFORE_PARK);
        loop {
            match self.rx.try_recv() {
                Ok(r) => return r,
                Err(TryRecvError::Disconnected) => return Err(closed_before_reply()),
                Err(TryRecvError::Empty) => {}
            }
            if spin.passed() {
                break;
            }
            std::thread::yield_now();
        }
        match until.recv(&self.rx) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => Err(until.timed_out(self.method.as_ref())),
            Err(RecvTimeoutError::Disconnected) => Err(closed_before_reply()),
        }
    }

    /// [`Reply::wait_until`], returning [`Error::Cancelled`] at once when `cancel` fires.
    pub fn wait_or_cancel(&self, until: Deadline, cancel: Option<&CancelToken>) -> CallResult {
        let Some(cancel) = cancel else {
            return self.wait_until(until);
        };
        let cancelled = || Err(Error::Cancelled(self.method.to_string()));
        let Some(left) = until.remaining() else {
            return crossbeam_channel::select! {
                recv(self.rx) -> r => r.unwrap_or_else(|_| Err(closed_before_reply())),
                recv(cancel.receiver()) -> _ => cancelled(),
            };
        };
        crossbeam_channel::select! {
            recv(self.rx) -> r => r.unwrap_or_else(|_| Err(closed_before_reply())),
            recv(cancel.receiver()) -> _ => cancelled(),
            default(left) => Err(until.timed_out(self.method.as_ref())),
        }
    }

    /// The reply, if it comes by `until` (`None`: not yet; a probe's question). A closed
    /// channel is `Some(Err(ConnectionLost))`.
    pub fn reply_by(&self, until: Deadline) -> Option<CallResult> {
        match until.recv(&self.rx) {
            Ok(r) => Some(r),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(Err(closed_before_reply())),
        }
    }

    /// [`Reply::reply_by`], and `Some(Err(Error::Cancelled))` at once when `cancel` fires.
    pub fn reply_by_or_cancel(
        &self,
        until: Deadline,
        cancel: Option<&CancelToken>,
    ) -> Option<CallResult> {
        let Some(cancel) = cancel else {
            return self.reply_by(until);
        };
        crossbeam_channel::select! {
            recv(self.rx) -> r => Some(r.unwrap_or_else(|_| Err(closed_before_reply()))),
            recv(cancel.receiver()) -> _ => Some(Err(Error::Cancelled(self.method.to_string()))),
            recv(until.alarm()) -> _ => None,
        }
    }
}

fn closed_before_reply() -> Error {
    Error::ConnectionLost("the connection closed before the reply".into())
}
