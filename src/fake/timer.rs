//! The timer thread: a deadline-ordered queue of delayed answers
//! ([`Rule::Delay`]), so a delay never blocks a connection's reader.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde_json::Value;

use super::Rule;
use super::script::apply_rule;
use super::shared::{Conn, Shared};

/// A delayed answer waiting in the timer queue.
pub(super) struct Delayed {
    pub(super) due: Instant,
    pub(super) conn: Arc<Conn>,
    pub(super) cmd: Value,
    pub(super) rule: Rule,
}

/// Messages to the timer thread.
pub(super) enum TimerMsg {
    /// Queue a delayed answer.
    Schedule(Box<Delayed>),
    /// Exit.
    Stop,
}

/// The timer thread: fires delayed answers in deadline order.
pub(super) fn run_timer(shared: &Shared, rx: &Receiver<TimerMsg>) {
    let mut queue: BTreeMap<(Instant, u64), Delayed> = BTreeMap::new();
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
            Some(TimerMsg::Schedule(delayed)) => {
                seq += 1;
                queue.insert((delayed.due, seq), *delayed);
            }
            None => fire_due(shared, &mut queue),
        }
    }
}

/// Applies every queued answer whose deadline has passed.
fn fire_due(shared: &Shared, queue: &mut BTreeMap<(Instant, u64), Delayed>) {
    let now = Instant::now();
    while let Some(entry) = queue.first_entry() {
        if entry.key().0 > now {
            return;
        }
        let delayed = entry.remove();
        if !delayed.conn.is_closed() {
            apply_rule(shared, &delayed.conn, &delayed.cmd, delayed.rule);
        }
    }
}
