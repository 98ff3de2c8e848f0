//! The watchdog: one thread per supervisor that dismisses a `must_respond` dialog nobody
//! answered within `dialog_timeout_s`, probes the task's renderer about once a second while
//! popups it let go past both caps are open (`crate::supervisor::stall`), and asks once, 2 s
//! after the task follows a page, whether that page ever answered its set-up
//! ([`WatchdogMsg::CheckAnswers`]).
//!
//! It only ever blocks on its channel: with nothing armed, no probe and no check due it waits
//! without a deadline (no wake-ups); otherwise until the earliest dialog deadline, probe or
//! check. The reader thread arms and cancels over the channel, and dropping the sender (the
//! reader exiting) ends the thread. Firing writes a
//! `Page.handleJavaScriptDialog {accept: false}` tagged as the watchdog's; who really closed the
//! dialog is still decided by the reader when the answer or the close event arrives, so a dialog
//! that closed in the meantime is never recorded as the watchdog's. The probe waits for replies
//! (at most about 1 s while a renderer hangs), which the reader never does; a dismissal due
//! meanwhile goes right after it.

use std::time::{Duration, Instant};

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
    /// A popup was let go past both caps: probe the renderer every [`PROBE_EVERY`] from now on,
    /// until the probe says nothing is left to watch (again after the next such message).
    WatchRenderer,
    /// The task follows page `target_id` on `session_id`: [`ANSWER_WITHIN`] from now, whether
    /// its document answered its `Page.enable` is checked (`crate::supervisor::stall`).
    CheckAnswers {
        /// The page's session.
        session_id: String,
        /// The page.
        target_id: String,
    },
    /// Answered once every message before it has been handled: a dismissal the watchdog was
    /// writing when it came has been written (`Supervisor::hand_over` waits for it, so that no
    /// watchdog answer follows a hand-over).
    Ack(Ack),
}

/// The reply end of a [`WatchdogMsg::Ack`]. Two are equal when they reply on one channel.
#[derive(Debug, Clone)]
pub struct Ack(pub crossbeam_channel::Sender<()>);

impl PartialEq for Ack {
    fn eq(&self, other: &Ack) -> bool {
        self.0.same_channel(&other.0)
    }
}

/// How often the renderer is probed while popups the task let go are open.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);

/// How long a page the task follows has to answer its `Page.enable` (SPEC §4.5's 2 s).
pub const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// Pages waiting for their check at most (a flood of popups opened and closed within
/// [`ANSWER_WITHIN`] goes past it; those past it are not checked).
const MAX_CHECKS: usize = 1024;

/// What the watchdog does besides dismissing dialogs (the supervisor's: `stall::Ticker`).
pub trait Probes {
    /// The renderer probe, every `probe_every` after a [`WatchdogMsg::WatchRenderer`] until it
    /// returns false.
    fn tick(&mut self) -> bool;
    /// The check of a [`WatchdogMsg::CheckAnswers`], once it is due.
    fn check_answers(&mut self, session_id: &str, target_id: &str);
}

/// Runs the watchdog until `rx` disconnects. `fire(dialog_id)` is called for every dialog whose
/// deadline passes while it is armed; `probes.tick()` every `probe_every` (the supervisor's:
/// [`PROBE_EVERY`]) after a [`WatchdogMsg::WatchRenderer`], until it returns false;
/// `probes.check_answers` `answer_within` (the supervisor's: [`ANSWER_WITHIN`]) after each
/// [`WatchdogMsg::CheckAnswers`].
pub fn run(
    rx: Receiver<WatchdogMsg>,
    mut fire: impl FnMut(&str),
    probes: &mut impl Probes,
    probe_every: Duration,
    answer_within: Duration,
) {
    let mut armed: Vec<(String, Instant)> = Vec::new();
    let mut probe_at: Option<Instant> = None;
    // Pages to check, in the order they were followed (so by deadline).
    let mut checks: std::collections::VecDeque<(String, String, Instant)> = Default::default();
    loop {
        let next = (armed.iter().map(|(_, d)| *d))
            .chain(probe_at)
            .chain(checks.front().map(|c| c.2))
            .min();
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
            Ok(WatchdogMsg::WatchRenderer) => {
                probe_at.get_or_insert_with(|| Instant::now() + probe_every);
            }
            Ok(WatchdogMsg::CheckAnswers {
                session_id,
                target_id,
            }) => {
                if checks.len() < MAX_CHECKS {
                    checks.push_back((session_id, target_id, Instant::now() + answer_within));
                }
            }
            Ok(WatchdogMsg::Ack(Ack(tx))) => {
                let _ = tx.try_send(());
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        // Whatever woke it: what is due now (a stream of messages delays nothing).
        let now = Instant::now();
        if armed.iter().any(|(_, d)| *d <= now) {
            let (mut due, keep): (Vec<_>, Vec<_>) = armed.drain(..).partition(|(_, d)| *d <= now);
            armed = keep;
            // Several may be due at once (a late wake-up on a loaded machine): earliest first.
            due.sort_by_key(|(_, d)| *d);
            for (dialog_id, _) in due {
                fire(&dialog_id);
            }
        }
        if probe_at.is_some_and(|t| t <= now) {
            // Every `probe_every` from the start of a probe, however long it waited.
            probe_at = probes
                .tick()
                .then(|| (now + probe_every).max(Instant::now()));
        }
        while let Some((session_id, target_id, _)) = checks.front().filter(|c| c.2 <= now) {
            probes.check_answers(session_id, target_id);
            checks.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::unbounded;
    use std::time::Duration;

    /// [`Probes`] from a tick closure and a check closure.
    struct With<T, C>(T, C);

    impl<T: FnMut() -> bool, C: FnMut(&str, &str)> Probes for With<T, C> {
        fn tick(&mut self) -> bool {
            (self.0)()
        }
        fn check_answers(&mut self, session_id: &str, target_id: &str) {
            (self.1)(session_id, target_id)
        }
    }

    #[test]
    fn fires_only_armed_and_uncancelled_dialogs_in_deadline_order() {
        let (tx, rx) = unbounded();
        let (fired_tx, fired_rx) = unbounded();
        let t = std::thread::spawn(move || {
            run(
                rx,
                |d| fired_tx.send(d.to_string()).unwrap(),
                &mut With(|| true, |_: &str, _: &str| {}),
                PROBE_EVERY,
                ANSWER_WITHIN,
            )
        });
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

    #[test]
    fn probes_only_after_a_popup_was_let_go_and_until_told_to_stop() {
        let every = Duration::from_millis(20);
        let (tx, rx) = unbounded();
        let (probed_tx, probed_rx) = unbounded();
        let left = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(3));
        let probes_left = std::sync::Arc::clone(&left);
        let t = std::thread::spawn(move || {
            let probe = || {
                probed_tx.send(Instant::now()).unwrap();
                probes_left.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) > 1
            };
            run(
                rx,
                |_| {},
                &mut With(probe, |_: &str, _: &str| {}),
                every,
                every,
            )
        });
        // Nothing let go: a dialog armed and fired, and no probe.
        tx.send(WatchdogMsg::Arm {
            dialog_id: "d-1".into(),
            deadline: Instant::now() + every,
        })
        .unwrap();
        assert!(
            probed_rx.recv_timeout(every * 5).is_err(),
            "probed before any popup was let go"
        );
        let start = Instant::now();
        tx.send(WatchdogMsg::WatchRenderer).unwrap();
        tx.send(WatchdogMsg::WatchRenderer).unwrap(); // one schedule, not two
        let times: Vec<Instant> = (0..3)
            .map(|_| probed_rx.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        assert!(
            times[0] >= start + every,
            "the first probe one period later"
        );
        for w in times.windows(2) {
            assert!(w[1] >= w[0] + every, "probes one period apart: {times:?}");
        }
        // The third said stop: no fourth until the next popup is let go.
        assert!(
            probed_rx.recv_timeout(every * 5).is_err(),
            "probed after stop"
        );
        left.store(1, std::sync::atomic::Ordering::SeqCst);
        tx.send(WatchdogMsg::WatchRenderer).unwrap();
        probed_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("probing again after the next let-go");
        drop(tx);
        t.join().unwrap();
    }

    #[test]
    fn each_followed_page_is_checked_once_its_time_has_passed_in_the_order_followed() {
        let within = Duration::from_millis(60);
        let (tx, rx) = unbounded();
        let (checked_tx, checked_rx) = unbounded();
        let t = std::thread::spawn(move || {
            let check = |s: &str, p: &str| {
                let _ = checked_tx.send((s.to_string(), p.to_string(), Instant::now()));
            };
            run(rx, |_| {}, &mut With(|| false, check), PROBE_EVERY, within)
        });
        let start = Instant::now();
        for (s, p) in [("S-1", "P-1"), ("S-2", "P-2")] {
            tx.send(WatchdogMsg::CheckAnswers {
                session_id: s.into(),
                target_id: p.into(),
            })
            .unwrap();
        }
        let got: Vec<_> = (0..2)
            .map(|_| checked_rx.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        assert_eq!((got[0].0.as_str(), got[0].1.as_str()), ("S-1", "P-1"));
        assert_eq!((got[1].0.as_str(), got[1].1.as_str()), ("S-2", "P-2"));
        assert!(got.iter().all(|c| c.2 >= start + within), "checked early");
        assert!(
            checked_rx.recv_timeout(within * 3).is_err(),
            "a page is checked once"
        );
        drop(tx);
        t.join().unwrap();
    }
}
