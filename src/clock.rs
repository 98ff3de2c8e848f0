//! The time as the clock-free [`crate::core::Core`] sees it: a value its callers read once and
//! pass in (ureq's `CurrentTime` is the model), so that the core's tests run on a simulated
//! clock and the reader thread reads the clock once per batch of messages.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One reading of the clock: the monotonic instant (deadlines, elapsed times) and the wall
/// clock (the Unix-epoch times the snapshot shows: `opened_at`, `closed_at`, `ts`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Now {
    /// Monotonic time.
    pub instant: Instant,
    /// Unix epoch seconds.
    pub epoch: f64,
}

impl Now {
    /// Reads the clock. Only the core's callers do this, never the core itself.
    pub fn read() -> Now {
        Now {
            instant: Instant::now(),
            epoch: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        }
    }

    /// The same clock `d` later (a simulated clock advanced by hand; saturates instead of
    /// overflowing).
    pub fn after(self, d: Duration) -> Now {
        Now {
            instant: self.instant.checked_add(d).unwrap_or(self.instant),
            epoch: self.epoch + d.as_secs_f64(),
        }
    }

    /// How long after `earlier` this is (zero if it is not after it).
    pub fn since(self, earlier: Instant) -> Duration {
        self.instant.saturating_duration_since(earlier)
    }
}
