//! Deadlines as values (ureq's style): when an operation must give up, and the bound it was
//! given, so that no caller does `Instant` arithmetic that can overflow or `unwrap`, and nobody
//! carries a `(deadline, timeout)` pair just to word a time-out error ("after 2s").
//!
//! Every blocking wait takes one of these, computed once from the bound that covers the whole
//! operation (a call, a start, a connect: TCP, TLS, the WebSocket upgrade, `http://` discovery,
//! a frame write, `Supervisor::wait_for`, the fake browser's waits), and re-reads the time left
//! before each wait. A bound too large to represent ([`Duration::MAX`]) is no bound at all.
//! Outside tests, the crate adds a `Duration` to an `Instant` in two places only: here
//! (checked) and in `clock::Now::after` (saturating).

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::error::Error;

/// When a blocking operation must give up, and the bound it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// `None`: no bound.
    at: Option<Instant>,
    /// The bound the operation was given, for messages ([`Duration::MAX`] for none).
    budget: Duration,
}

/// The time left until a [`Deadline`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    /// The deadline has passed.
    Passed,
    /// This much time is left (never zero).
    In(Duration),
    /// There is no deadline.
    Never,
}

impl Deadline {
    /// No bound.
    pub const NEVER: Deadline = Deadline {
        at: None,
        budget: Duration::MAX,
    };

    /// `d` from now; a duration too large to represent is [`Deadline::NEVER`].
    pub fn after(d: Duration) -> Deadline {
        Deadline::from_start(Instant::now(), d)
    }

    /// `d` after `start`; too late to represent is [`Deadline::NEVER`].
    pub fn from_start(start: Instant, d: Duration) -> Deadline {
        match start.checked_add(d) {
            Some(t) => Deadline {
                at: Some(t),
                budget: d,
            },
            None => Deadline::NEVER,
        }
    }

    /// The earlier of two deadlines (with its budget).
    pub fn earliest(self, other: Deadline) -> Deadline {
        match (self.at, other.at) {
            (None, _) => other,
            (_, None) => self,
            (Some(a), Some(b)) if b < a => other,
            _ => self,
        }
    }

    /// One step of this operation that may take at most `d`: this deadline or `d` from now,
    /// whichever is sooner. A time-out is still worded with this deadline's budget (the
    /// operation's), since the step's own bound is the caller's business; without a deadline,
    /// the step's bound is the only one.
    pub fn within(self, d: Duration) -> Deadline {
        let step = Deadline::after(d);
        match self.at {
            None => step,
            Some(_) => Deadline {
                at: self.earliest(step).at,
                budget: self.budget,
            },
        }
    }

    /// The instant, `None` for no bound.
    pub fn instant(self) -> Option<Instant> {
        self.at
    }

    /// The bound the operation was given ([`Duration::MAX`] for none).
    pub fn budget(self) -> Duration {
        self.budget
    }

    /// The time left as seen at `now`.
    pub fn left_at(self, now: Instant) -> Left {
        match self.at {
            None => Left::Never,
            Some(t) => match t.checked_duration_since(now) {
                Some(d) if !d.is_zero() => Left::In(d),
                _ => Left::Passed,
            },
        }
    }

    /// The time left now.
    pub fn left(self) -> Left {
        self.left_at(Instant::now())
    }

    /// True once the deadline has passed.
    pub fn passed(self) -> bool {
        self.left() == Left::Passed
    }

    /// The time left (zero once passed), `None` without a deadline.
    pub fn remaining(self) -> Option<Duration> {
        match self.left() {
            Left::Passed => Some(Duration::ZERO),
            Left::In(d) => Some(d),
            Left::Never => None,
        }
    }

    /// The error for a CDP call of `method` that got no reply by this deadline.
    pub fn timed_out(self, method: impl Into<String>) -> Error {
        Error::Timeout {
            method: method.into(),
            after: self.budget,
        }
    }

    /// Receives from `rx`, giving up at this deadline (never, without one).
    pub fn recv<T>(self, rx: &Receiver<T>) -> Result<T, RecvTimeoutError> {
        match self.at {
            Some(t) => rx.recv_deadline(t),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        }
    }

    /// A channel that fires at this deadline (never, without one), for `select!`.
    pub fn alarm(self) -> Receiver<Instant> {
        match self.at {
            Some(t) => crossbeam_channel::at(t),
            None => crossbeam_channel::never(),
        }
    }
}

impl Left {
    /// Milliseconds for `poll(2)`: rounded up (so a wait never ends just before the deadline
    /// and spins), `-1` for no bound, `0` when passed.
    pub fn poll_millis(self) -> i32 {
        match self {
            Left::Passed => 0,
            Left::Never => -1,
            Left::In(d) => {
                let ms = d.as_nanos().div_ceil(1_000_000);
                i32::try_from(ms).unwrap_or(i32::MAX)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_is_total() {
        assert_eq!(Deadline::after(Duration::MAX), Deadline::NEVER);
        assert_eq!(Deadline::after(Duration::ZERO).left(), Left::Passed);
        let now = Instant::now();
        let soon = Deadline {
            at: Some(now + Duration::from_millis(10)),
            budget: Duration::from_millis(10),
        };
        assert_eq!(soon.earliest(Deadline::NEVER), soon);
        assert_eq!(Deadline::NEVER.earliest(soon), soon);
        assert_eq!(soon.left_at(now), Left::In(Duration::from_millis(10)));
        assert_eq!(soon.left_at(now + Duration::from_secs(1)), Left::Passed);
        assert_eq!(Left::In(Duration::from_nanos(1)).poll_millis(), 1);
        assert_eq!(Left::Never.poll_millis(), -1);
        assert_eq!(Left::In(Duration::MAX).poll_millis(), i32::MAX);
        assert_eq!(Deadline::NEVER.remaining(), None);
        let passed = Deadline {
            at: Some(now),
            budget: Duration::ZERO,
        };
        assert_eq!(passed.remaining(), Some(Duration::ZERO));
    }

    #[test]
    fn a_step_keeps_the_operations_budget_for_its_message() {
        let call = Deadline::after(Duration::from_secs(2));
        let step = call.within(Duration::from_millis(250));
        assert!(step.instant() < call.instant());
        assert_eq!(step.budget(), Duration::from_secs(2));
        // A step longer than what is left ends with the operation.
        assert_eq!(
            call.within(Duration::from_secs(60)).instant(),
            call.instant()
        );
        match step.timed_out("Page.enable") {
            Error::Timeout { method, after } => {
                assert_eq!(method, "Page.enable");
                assert_eq!(after, Duration::from_secs(2));
            }
            other => panic!("unexpected {other:?}"),
        }
        let alone = Deadline::NEVER.within(Duration::from_secs(1));
        assert_eq!(alone.budget(), Duration::from_secs(1));
        assert!(alone.instant().is_some());
    }
}
