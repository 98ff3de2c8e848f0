//! The `must_respond` watchdog: one thread per supervisor that dismisses a dialog nobody answered
//! within `dialog_timeout_s`.
//!
//! It only ever blocks on its channel: with nothing armed it waits without a deadline (no
//! wake-ups); with dialogs armed it waits until the earliest deadline. The reader thread arms and
//! cancels over the channel, and dropping the sender (the reader exiting) ends the thread. Firing
//! writes a `Page.handleJavaScriptDialog {accept: false}` tagged as the watchdog's; who really
//! closed the dialog is still decided by the reader when the answer or the close event arrives,
//! so a dialog that closed in the meantime is never recorded as the watchdog's.

use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError};

/// A message from the reader thread (what the state machine queues as
/// `crate::core::Outgoing::Watchdog`).
#[derive(Debug, Clone, PartialEq)]
pub enum WatchdogMsg {
    /// Dismiss `dialog_id` at `deadline` unless cancelled first.
    Arm {
        /// `d-N`.
        dialog_id: String,
        /// When to dismiss it.
        deadline: Instant,
    },
    /// The dialog closed.
    Cancel {
        /// `d-N`.
        dialog_id: String,
    },
}

/// Runs the watchdog until `rx` disconnects. `fire(dialog_id)` is called for every dialog whose
/// deadline passes while it is armed.
pub fn run(rx: Receiver<WatchdogMsg>, mut fire: impl FnMut(&str)) {
    let mut armed: Vec<(String, Instant)> = Vec::new();
    loop {
        let next = armed.iter().map(|(_, d)| *d).min();
        let msg = match next {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(deadline) => rx.recv_deadline(deadline),
        };
        match msg {
            Ok(WatchdogMsg::Arm {
                dialog_id,
                deadline,
            }) => {
                armed.retain(|(id, _)| *id != dialog_id);
                armed.push((dialog_id, deadline));
            }
            Ok(WatchdogMsg::Cancel { dialog_id }) => armed.retain(|(id, _)| *id != dialog_id),
            Err(RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                let (mut due, keep): (Vec<_>, Vec<_>) =
                    armed.drain(..).partition(|(_, d)| *d <= now);
                armed = keep;
                // Several may be due at once (a late wake-up on a loaded machine): earliest first.
                due.sort_by_key(|(_, d)| *d);
                for (dialog_id, _) in due {
                    fire(&dialog_id);
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::unbounded;
    use std::time::Duration;

    #[test]
    fn fires_only_armed_and_uncancelled_dialogs_in_deadline_order() {
        let (tx, rx) = unbounded();
        let (fired_tx, fired_rx) = unbounded();
        let t = std::thread::spawn(move || run(rx, |d| fired_tx.send(d.to_string()).unwrap()));
        let now = Instant::now();
        let arm = |id: &str, ms| WatchdogMsg::Arm {
            dialog_id: id.into(),
            deadline: now + Duration::from_millis(ms),
        };
        tx.send(arm("d-2", 60)).unwrap();
        tx.send(arm("d-1", 30)).unwrap();
        tx.send(arm("d-3", 40)).unwrap();
        tx.send(WatchdogMsg::Cancel {
            dialog_id: "d-3".into(),
        })
        .unwrap();
        let first = fired_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        let second = fired_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!((first.as_str(), second.as_str()), ("d-1", "d-2"));
        drop(tx);
        t.join().unwrap();
        assert!(
            fired_rx.try_recv().is_err(),
            "d-3 was cancelled and must not fire"
        );
    }
}
