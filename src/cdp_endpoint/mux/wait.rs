//! Dialogs and client calls (issue 30 point 4).
//!
//! A command on a client session runs in a target; the supervisor's own session on that target
//! gives it a renderer, and `core/policy.rs` decides as for the supervisor's own calls: refused
//! at once with an error naming the dialog (`policy::admit`), or failed when a dialog opens
//! while it is in flight (on each publish, [`Tap::published`](crate::tap::Tap::published)).
//!
//! One kind of call waits: one sent on a session whose client enabled `Page` before the dialog
//! opened. Its client is shown the dialog (`Page.javascriptDialogOpening`) and may answer it, so
//! the call waits for that answer as on a connection of its own (Puppeteer's
//! `page.evaluate(() => alert())` with a dialog handler). But a client that enabled `Page` and
//! does not answer (Puppeteer with no `dialog` handler) would wait forever: so it waits at most
//! [`CLIENT_DIALOG_WAIT`]. An answer within it gives the call its real result; after it, the
//! call fails with the error naming the dialog, as the others did, and the dialog stays pending
//! (for the client, the agent, or the task's dialog policy).
//!
//! # The clock
//!
//! One thread per task (`cdp-dialog-wait`), there only while such a call waits: started by the
//! first, it blocks on a channel until the earliest deadline (`recv_deadline`: no sleep, no
//! polling), fails the calls that are due, and ends when none waits any more (its reply came,
//! its dialog closed, it failed, the connection ended, the task ended). An idle task has no
//! clock to wake.

use std::sync::Weak;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use log::warn;

use super::{Mux, Out, State, deliver};
use crate::cdp_endpoint::wire::{client_wording, error_reply_on};
use crate::core::policy;
use crate::snapshot::Snapshot;

/// How long a call waits for the answer of a client that was shown the dialog blocking it.
pub(crate) const CLIENT_DIALOG_WAIT: Duration = Duration::from_secs(1);

/// The calls waiting for a dialog their client was shown, and their clock.
#[derive(Debug, Default)]
pub(super) struct Waits {
    /// `(deadline, upstream id, dialog id)`, in the order they began (so by deadline).
    calls: Vec<(Instant, u64, String)>,
    /// While `calls` is not empty: the clock's wake-up channel and thread.
    clock: Option<(Sender<()>, JoinHandle<()>)>,
}

impl Mux {
    /// Call `id` begins waiting for `dialog` (the clock starts with the first).
    pub(super) fn wait_for_client(&self, st: &mut State, id: u64, dialog: &str) {
        if st.waits.calls.iter().any(|(_, i, _)| *i == id) {
            return;
        }
        let until = Instant::now() + CLIENT_DIALOG_WAIT;
        st.waits.calls.push((until, id, dialog.to_string()));
        if st.waits.clock.is_some() {
            return; // it wakes for an earlier deadline, and looks again then
        }
        let (tx, rx) = bounded(1);
        let me = self.me.clone();
        let spawned = std::thread::Builder::new()
            .name("cdp-dialog-wait".into())
            .stack_size(128 * 1024)
            .spawn(move || tick(&me, &rx));
        match spawned {
            Ok(h) => st.waits.clock = Some((tx, h)),
            Err(e) => warn!(
                "task {}: no clock for a call waiting on a dialog ({e}): it waits for its \
                 client's answer",
                self.task_id
            ),
        }
    }

    /// Drops the waits that are over: the call was answered or failed, or (given `snap`) its
    /// dialog closed. The clock is woken to end when none is left.
    pub(super) fn settle(&self, st: &mut State, snap: Option<&Snapshot>) {
        if st.waits.calls.is_empty() {
            return;
        }
        let pending = &st.pending;
        st.waits.calls.retain(|(_, id, dialog)| {
            matches!(pending.get(id), Some(Some(_)))
                && snap.is_none_or(|s| s.pending_dialogs.iter().any(|d| d.id == *dialog))
        });
        if st.waits.calls.is_empty()
            && let Some((wake, _)) = &st.waits.clock
        {
            let _ = wake.try_send(());
        }
    }

    /// Ends the clock (the task ended: every client is gone), waiting for its thread.
    pub(super) fn stop_clock(&self) {
        let clock = {
            let mut st = self.lock();
            st.waits.calls.clear();
            st.waits.clock.take()
        };
        if let Some((wake, thread)) = clock {
            drop(wake);
            let _ = thread.join();
        }
    }

    /// Fails the calls whose wait is over; the next deadline, or `None` when none waits (the
    /// clock is then let go, under the lock, so that the next wait starts another).
    fn expire(&self) -> Option<Instant> {
        let snap = self.shared.upgrade().map(|s| s.snapshot.load_full());
        let mut guard = self.lock();
        let st = &mut *guard;
        let now = Instant::now();
        let due = st
            .waits
            .calls
            .partition_point(|(until, _, _)| *until <= now);
        let due: Vec<_> = st.waits.calls.drain(..due).collect();
        for (_, id, dialog) in due {
            let Some(Some(p)) = st.pending.get(&id) else {
                continue;
            };
            let Some(d) = snap
                .as_ref()
                .and_then(|s| s.pending_dialogs.iter().find(|d| d.id == dialog))
            else {
                continue;
            };
            let e = client_wording(&policy::dialog_error(d, false, &p.method));
            let on = (!p.browser_level).then_some(p.session.as_str());
            let reply = error_reply_on(Some(&p.orig_id), on, -32000, &e);
            let client = p.client;
            // Its reply, if it ever comes, is swallowed.
            st.pending.insert(id, None);
            deliver(st, client, Out::Text(reply));
        }
        match st.waits.calls.first() {
            Some((until, _, _)) => Some(*until),
            None => {
                st.waits.clock = None; // its thread ends now (detached)
                None
            }
        }
    }
}

/// The clock's thread (module doc).
fn tick(me: &Weak<Mux>, wake: &Receiver<()>) {
    loop {
        let Some(next) = me.upgrade().and_then(|m| {
            let next = m.expire();
            m.send_due(); // the failed calls' replies
            next
        }) else {
            return;
        };
        if let Err(RecvTimeoutError::Disconnected) = wake.recv_deadline(next) {
            return;
        }
    }
}
