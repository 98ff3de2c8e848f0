//! The timer thread: a deadline-ordered queue of delayed answers ([`Rule::Delay`]), so a delay
//! never blocks a connection's reader.
//!
//! It knows nothing of what it delays: the caller passes in `fire`, the function that applies
//! an item when it is due (as `crate::watchdog::run` takes its `fire`), so this module imports
//! nothing of the fake.
//!
//! [`Rule::Delay`]: super::Rule::Delay

use std::collections::BTreeMap;
use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::deadline::Deadline;

/// Messages to the timer thread.
pub(super) enum TimerMsg<T> {
    /// Fire `item` at `due` (never, when `due` has no bound).
    Schedule { due: Deadline, item: Box<T> },
    /// Exit.
    Stop,
}

/// The timer thread: calls `fire` with each scheduled item once it is due, in deadline order,
/// until told to stop or its channel disconnects.
pub(super) fn run_timer<T>(rx: &Receiver<TimerMsg<T>>, mut fire: impl FnMut(T)) {
    let mut queue: BTreeMap<(Instant, u64), T> = BTreeMap::new();
    let mut seq = 0u64;
    loop {
        let next_due = queue.keys().next().map(|(due, _)| *due);
        let msg = match next_due {
            Some(due) => match rx.recv_deadline(due) {
                Ok(msg) => Some(msg),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            },
            None => match rx.recv() {
                Ok(msg) => Some(msg),
                Err(_) => return,
            },
        };
        match msg {
            Some(TimerMsg::Stop) => return,
            Some(TimerMsg::Schedule { due, item }) => {
                // An item due never is never fired: it need not be kept.
                if let Some(at) = due.instant() {
                    seq += 1;
                    queue.insert((at, seq), *item);
                }
            }
            None => fire_due(&mut queue, &mut fire),
        }
    }
}

/// Fires every queued item whose deadline has passed.
fn fire_due<T>(queue: &mut BTreeMap<(Instant, u64), T>, fire: &mut impl FnMut(T)) {
    let now = Instant::now();
    while let Some(entry) = queue.first_entry() {
        if entry.key().0 > now {
            return;
        }
        fire(entry.remove());
    }
}
