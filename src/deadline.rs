//! Deadlines as values (ureq's style): a point in time or "never", and the time left until it
//! as a total enum, so that no caller does `Instant` arithmetic that can overflow or `unwrap`.
//!
//! Every blocking wait on the network (TCP connect, TLS, the WebSocket upgrade, `http://`
//! discovery, a frame write) takes one of these, computed once from the bound that covers the
//! whole operation, and re-reads the time left before each wait.

use std::time::{Duration, Instant};

/// When a blocking operation must give up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// No bound.
    Never,
    /// Give up at this instant.
    At(Instant),
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
    /// `d` from now; a duration too large to represent is [`Deadline::Never`].
    pub fn after(d: Duration) -> Deadline {
        Instant::now()
            .checked_add(d)
            .map_or(Deadline::Never, Deadline::At)
    }

    /// `Some(t)` is [`Deadline::At`], `None` is [`Deadline::Never`].
    pub fn from_instant(t: Option<Instant>) -> Deadline {
        t.map_or(Deadline::Never, Deadline::At)
    }

    /// The earlier of two deadlines.
    pub fn earliest(self, other: Deadline) -> Deadline {
        match (self, other) {
            (Deadline::Never, d) | (d, Deadline::Never) => d,
            (Deadline::At(a), Deadline::At(b)) => Deadline::At(a.min(b)),
        }
    }

    /// The time left as seen at `now`.
    pub fn left_at(self, now: Instant) -> Left {
        match self {
            Deadline::Never => Left::Never,
            Deadline::At(t) => match t.checked_duration_since(now) {
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

    /// The time left, for APIs that take an optional time-out (`None`: no bound); `Err(())`
    /// when it has passed.
    #[allow(clippy::result_unit_err)]
    pub fn timeout(self) -> Result<Option<Duration>, ()> {
        match self.left() {
            Left::Passed => Err(()),
            Left::In(d) => Ok(Some(d)),
            Left::Never => Ok(None),
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
        assert_eq!(Deadline::after(Duration::MAX), Deadline::Never);
        assert_eq!(Deadline::after(Duration::ZERO).left(), Left::Passed);
        let now = Instant::now();
        let soon = Deadline::At(now + Duration::from_millis(10));
        assert_eq!(soon.earliest(Deadline::Never), soon);
        assert_eq!(Deadline::Never.earliest(soon), soon);
        assert_eq!(soon.left_at(now), Left::In(Duration::from_millis(10)));
        assert_eq!(soon.left_at(now + Duration::from_secs(1)), Left::Passed);
        assert_eq!(Left::In(Duration::from_nanos(1)).poll_millis(), 1);
        assert_eq!(Left::Never.poll_millis(), -1);
        assert_eq!(Left::In(Duration::MAX).poll_millis(), i32::MAX);
        assert_eq!(Deadline::Never.timeout(), Ok(None));
        assert_eq!(Deadline::At(now).timeout(), Err(()));
    }
}
