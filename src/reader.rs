//! **The reader loop**: the only writer of a supervisor's state, and its reconnect policy.
//!
//! Per connection: block until bytes arrive (no CPU, no lock), drain every complete message,
//! apply them in order to the [`Core`], carry out what it asked for (fire-and-forget commands,
//! watchdog arm/cancel), publish once per batch if the visible state changed, and only then wake
//! the callers whose replies arrived, so a caller that gets its reply already sees its effect.
//!
//! When the connection ends, every pending call fails at once, every open dialog is recorded
//! (`connection_lost`), and `state: reconnecting` (attempt n of m) is published. Unless the
//! supervisor is stopping (or the page target is gone), the reader then reconnects with a bounded
//! budget (`reconnect_attempts`, backoff 250 ms doubling to 5 s, each wait cut short by `stop`),
//! installs the new transport (refused once `stop` has begun: see [`Shared::install`]), resets
//! the per-connection state and re-attaches from a short-lived thread (never from the reader,
//! which must read the replies); the state is `active` again once the page is attached. When
//! the budget is spent the reader exits: the supervisor is `dead` and the registry replaces it.

use std::path::Path;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded, select};
use log::{debug, info, warn};
use tungstenite::Message;

use crate::attach::{Choice, attach_page};
use crate::clock::Now;
use crate::config::{BACKOFF_MAX, PageChoice};
use crate::core::{Core, Outgoing, PendingCall};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::shared::Shared;
use crate::snapshot::SupervisorState;
use crate::transport::{ConnectOptions, Readiness, Transport};
use crate::watchdog::WatchdogMsg;

/// Messages applied per batch before publishing: bounds how stale the snapshot can get during
/// a flood, and the memory a batch holds.
const MAX_BATCH: usize = 4096;

/// What the re-attach after a reconnect found; read by the reader once that connection ends.
/// Unset while it runs, and when it failed for a reason worth another attempt.
#[derive(Debug)]
enum Reattached {
    /// Attached to the task's page again.
    Attached,
    /// The task's page target (this id) does not exist on the new connection: it is gone.
    PageGone(String),
}

/// Everything the reader thread owns.
pub(crate) struct Reader {
    pub shared: Arc<Shared>,
    pub core: Core,
    pub registrations: Receiver<(u64, PendingCall)>,
    pub watchdog: Sender<WatchdogMsg>,
    /// Disconnects once `stop` has shut the connection for good (the supervisor drops its
    /// `wake_reader` end): wakes the reader out of a reconnect back-off or attempt. (What the
    /// reader checks is [`Shared::closed_for_good`].)
    pub wake_reader: Receiver<()>,
    /// How to reconnect.
    pub reconnect: ReconnectPlan,
}

/// How to reach the browser again.
#[derive(Debug, Clone)]
pub(crate) struct ReconnectPlan {
    /// The URL the user gave (re-resolved each time: an `http://` endpoint may have a new ws URL).
    pub cdp_url: String,
    /// Attempts before giving up (0: never reconnect).
    pub attempts: u32,
    /// The first back-off ([`crate::config::BACKOFF_START`] unless a test shortens it); doubles
    /// per attempt up to [`BACKOFF_MAX`].
    pub backoff: Duration,
    /// Socket settings.
    pub connect: ConnectOptions,
    /// Bound on each re-attach.
    pub attach_timeout: Duration,
    /// The task's page is its own (`StartOptions::own_page`): when it is gone after a
    /// reconnect, a new one is made (and reported) instead of the supervisor ending.
    pub own_page: bool,
}

impl Reader {
    fn stopped(&self) -> bool {
        self.shared.closed_for_good()
    }

    /// Runs until `stop`, a fatal page loss, or an exhausted reconnect budget.
    pub fn run(mut self) {
        let mut failures = 0u32;
        let mut reattach = Arc::new(OnceLock::from(Reattached::Attached));
        let mut attachers: Vec<JoinHandle<()>> = Vec::new();
        let mut last_reason;
        // Why the connection we are reconnecting after ended (a failed re-attach ends the next
        // one too, for a less telling reason).
        let mut lost_because = String::new();
        let mut page_gone = None;
        loop {
            let reason = self.read_connection();
            last_reason = reason.clone();
            self.shared.transport.load().shutdown();
            info!("connection to {} ended: {reason}", self.shared.url_redacted);
            // Calls written on this connection may still be in the channel (it is drained
            // between reads, and nothing came since they were written): they fail with it,
            // not at their deadline. Whatever registers from now on finds the connection shut
            // (its write fails) or is written on the next one.
            let now = Now::read();
            self.take_registrations(now);
            self.core.on_disconnect(&reason, now);
            if let Some(tap) = self.shared.tap.get() {
                tap.connection_lost(&reason);
            }
            if self.stopped() || self.core.fatal().is_some() {
                break;
            }
            match reattach.get() {
                Some(Reattached::Attached) => {
                    failures = 0;
                    lost_because = reason;
                }
                Some(Reattached::PageGone(target_id)) => {
                    page_gone = Some(format!(
                        "the endpoint gave a new browser on reconnecting (one per connection, \
                         as Browserless does) or the page was closed: page target {target_id} \
                         is gone, and the supervisor does not adopt another page (the \
                         connection had ended: {lost_because})"
                    ));
                    break;
                }
                None => {}
            }
            if failures >= self.reconnect.attempts {
                break;
            }
            self.core
                .reconnecting(failures + 1, self.reconnect.attempts);
            self.flush(Now::read());
            self.forward_watchdog();
            let Some(transport) = self.reconnect(&mut failures) else {
                break;
            };
            if self.shared.install(transport).is_err() {
                break; // `stop` came while connecting: it refused the new connection
            }
            let prefer = self.core.reset_for_reconnect();
            if self.shared.follows_popups_itself.load(Ordering::Acquire) {
                // Its popup watcher has gone: the re-attach turns browser-level auto-attach on
                // (written before the task is published active again).
                self.core.follow_popups_itself_from_now();
            }
            self.flush(Now::read());
            reattach = Arc::new(OnceLock::new());
            attachers.extend(self.spawn_reattach(prefer, Arc::clone(&reattach)));
        }
        // Whatever registered after the last drain fails now rather than at its deadline.
        let now = Now::read();
        self.take_registrations(now);
        let end = match (self.core.fatal(), page_gone) {
            // The page went while a stop was under way: most often the stop closed it
            // (`StartOptions::own_page`), and the supervisor stopped on purpose either way.
            (Some(_), _) if self.shared.stop_requested() => SupervisorState::Stopped,
            (Some(f), _) => SupervisorState::Dead {
                reason: f.to_string(),
            },
            (None, Some(reason)) => SupervisorState::Dead { reason },
            (None, None) => self.ended_without_fatal(last_reason),
        };
        let reason = match &end {
            SupervisorState::Dead { reason } => reason.clone(),
            _ => "the supervisor stopped".to_string(),
        };
        self.core.on_disconnect(&reason, now);
        self.core.ended(end);
        // The final state (`stopped` or `dead`) is the last publish: it is what tells everyone
        // the supervisor has ended, so whoever sees it gone also sees how it ended.
        self.flush(now);
        self.forward_watchdog();
        drop(self.registrations);
        for a in attachers {
            let _ = a.join();
        }
    }

    /// How the supervisor ends when no page loss decided it: stopped, or dead because the
    /// connection ended and could not be made again.
    fn ended_without_fatal(&self, last_reason: String) -> SupervisorState {
        if self.stopped() {
            SupervisorState::Stopped
        } else if self.reconnect.attempts == 0 {
            SupervisorState::Dead {
                reason: last_reason,
            }
        } else {
            SupervisorState::Dead {
                reason: format!(
                    "gave up after {} reconnect attempts; the connection had ended: {last_reason}",
                    self.reconnect.attempts
                ),
            }
        }
    }

    /// Between connections: hands the watchdog what the state machine asked of it (cancelling
    /// the dialogs the drop closed) and drops queued commands, whose connection is gone.
    fn forward_watchdog(&mut self) {
        for action in self.core.take_outgoing() {
            let msg = match action {
                Outgoing::Watchdog(msg) => msg,
                Outgoing::Command(c) => {
                    debug!("dropping {}: its connection has ended", c.method);
                    continue;
                }
                Outgoing::MoveDownload { guid, from, to } => {
                    self.move_download(&guid, &from, &to);
                    continue;
                }
            };
            let _ = self.watchdog.send(msg);
        }
    }

    /// Hands the core the calls registered since the last time (the channel is drained between
    /// reads, never waited on).
    fn take_registrations(&mut self, now: Now) -> bool {
        let mut any = false;
        for (id, call) in self.registrations.try_iter() {
            self.core.register(id, call, now);
            any = true;
        }
        any
    }

    /// Publishes if the visible state changed, then delivers replies. `now`: the time of the
    /// batch being flushed.
    fn flush(&mut self, now: Now) {
        if let Some(snapshot) = self.core.take_published() {
            self.shared.publish(snapshot);
            if let Some(tap) = self.shared.tap.get() {
                tap.published(&self.shared.snapshot.load());
            }
            // A caller that looked before this publish and registered after the last drain
            // may be waiting on a dialog it could not see: registering it now lets the core
            // fail it at once (see `Supervisor::send`).
            self.take_registrations(now);
        }
        for (tx, result) in self.core.take_deliveries() {
            if tx.send(result).is_err() {
                debug!("dropping a reply nobody waits for any more (time-out or cancelled)");
            }
        }
    }

    /// Reads one connection until it ends; returns why.
    fn read_connection(&mut self) -> String {
        let transport = self.shared.transport.load_full();
        let mut batch: Vec<Message> = Vec::with_capacity(64);
        // Drain before the first wait: the handshake may have left frames (or TLS plaintext)
        // buffered above the socket, where `peek` cannot see them; likewise after a capped drain.
        let mut more = true;
        let mut first = true;
        loop {
            if !more && let Readiness::Closed(reason) = transport.wait_readable() {
                return reason;
            }
            let drained = transport.drain(&mut batch, MAX_BATCH);
            more = matches!(drained, Ok(true));
            // The clock is read once per batch: every message in it arrived by now.
            let now = Now::read();
            // Whether anything reached the state machine: a batch a CDP client's tap took whole
            // (its replies and events) changed nothing there, so there is nothing to carry out
            // or publish. The first batch of a connection always looks (the attach may have
            // queued commands before it).
            let registered = self.take_registrations(now);
            let mut touched = first || registered;
            first = false;
            if let Some(tap) = self.shared.tap.get() {
                for session in tap.take_answers() {
                    self.core.client_answering(&session, now);
                    touched = true;
                }
            }
            for msg in batch.drain(..) {
                match msg {
                    Message::Text(text) => {
                        let claimed = self.shared.tap.get().is_some_and(|t| t.claims(&text));
                        if !claimed {
                            self.core.on_text(text.as_str(), now);
                            touched = true;
                        }
                    }
                    Message::Binary(b) => debug!("ignoring a binary frame of {} bytes", b.len()),
                    Message::Close(c) => info!("the browser sent a close frame: {c:?}"),
                    _ => {}
                }
            }
            // Pages the task's CDP clients created join the task (followed like popups).
            if let Some(tap) = self.shared.tap.get() {
                for target in tap.take_joined() {
                    self.core.adopt_created(&target);
                    touched = true;
                }
            }
            let watchdog = if touched {
                let watchdog = self.carry_out(now);
                self.flush(now);
                watchdog
            } else {
                Vec::new()
            };
            // The clients' replies and events go out only now, once the batch's publish is out:
            // a client that hears its dialog answer acknowledged and calls again at once must
            // find the dialog closed in the snapshot its call is judged against.
            if let Some(tap) = self.shared.tap.get() {
                tap.batch_done();
            }
            // Watchdog bookkeeping last: waking that thread must not delay the callers above.
            for msg in watchdog {
                let _ = self.watchdog.send(msg);
            }
            if let Err(reason) = drained {
                return reason;
            }
            if let Some(fatal) = self.core.fatal() {
                return fatal.to_string();
            }
        }
    }

    /// Writes the commands the state machine queued (fire-and-forget: registered with the core
    /// first, never waited for) and returns the watchdog actions, for sending once callers have
    /// been served.
    fn carry_out(&mut self, now: Now) -> Vec<WatchdogMsg> {
        let mut watchdog = Vec::new();
        for action in self.core.take_outgoing() {
            match action {
                Outgoing::Command(cmd) => {
                    let method = cmd.method.clone();
                    if let Err(e) = self.shared.send_from_reader(cmd, &mut self.core, now) {
                        debug!("automatic {method} not sent: {e}");
                    }
                }
                Outgoing::Watchdog(msg) => watchdog.push(msg),
                Outgoing::MoveDownload { guid, from, to } => self.move_download(&guid, &from, &to),
            }
        }
        watchdog
    }

    /// Moves a completed download into the task's directory (a rename, before the publish that
    /// names it: `core/downloads.rs`); a failure leaves it where the browser wrote it.
    fn move_download(&mut self, guid: &str, from: &Path, to: &Path) {
        if let Err(why) = crate::local_files::move_download(from, to) {
            self.core.download_move_failed(guid, from, &why);
        }
    }

    /// Tries to connect again within the budget; `None` when it is spent or `stop` was called.
    fn reconnect(&mut self, failures: &mut u32) -> Option<Transport> {
        let plan = self.reconnect.clone();
        while *failures < plan.attempts {
            self.core.reconnecting(*failures + 1, plan.attempts);
            self.flush(Now::read());
            let backoff = plan
                .backoff
                .saturating_mul(1u32 << (*failures).min(16))
                .min(BACKOFF_MAX);
            *failures += 1;
            match self.wake_reader.recv_timeout(backoff) {
                Err(RecvTimeoutError::Timeout) => {}
                _ => return None,
            }
            info!(
                "reconnecting to {} (attempt {}/{})",
                self.shared.url_redacted, failures, plan.attempts
            );
            // Connect on a helper thread so `stop` is never kept waiting by a slow connect.
            let (tx, rx) = bounded(1);
            let (url, opts) = (plan.cdp_url.clone(), plan.connect.clone());
            let helper = std::thread::Builder::new()
                .name("cdp-reconnect".into())
                .stack_size(256 * 1024)
                .spawn(move || {
                    // One deadline for discovery, TCP, TLS and the upgrade.
                    let deadline = Deadline::after(opts.connect_timeout);
                    let r = crate::endpoint::connect(&url, &opts, deadline);
                    let _ = tx.send(r);
                });
            if helper.is_err() {
                continue;
            }
            select! {
                recv(rx) -> r => match r {
                    Ok(Ok(t)) => {
                        info!("reconnected to {}", self.shared.url_redacted);
                        return Some(t);
                    }
                    Ok(Err(e)) => warn!("reconnect attempt {} failed: {e}", failures),
                    Err(_) => warn!("reconnect attempt {} failed", failures),
                },
                recv(self.wake_reader) -> _ => return None,
            }
        }
        warn!(
            "giving up on {} after {} reconnect attempts",
            self.shared.url_redacted, plan.attempts
        );
        None
    }

    fn spawn_reattach(
        &self,
        same_page: Option<String>,
        outcome: Arc<OnceLock<Reattached>>,
    ) -> Option<JoinHandle<()>> {
        let shared = Arc::clone(&self.shared);
        // The connection this re-attach is for: a failure shuts this one down, never a newer one.
        let transport = self.shared.transport.load_full();
        let timeout = self.reconnect.attach_timeout;
        let own_page = self.reconnect.own_page;
        let spawned = std::thread::Builder::new()
            .name("cdp-reattach".into())
            .stack_size(256 * 1024)
            .spawn(move || {
                let choice = match &same_page {
                    Some(t) if own_page => Choice::SameOrNew(t),
                    Some(t) => Choice::Same(t),
                    None if own_page => Choice::NewPage,
                    None => Choice::FirstPage {
                        taken: &[],
                        choice: PageChoice::default(),
                    },
                };
                match attach_page(&shared, choice, Deadline::after(timeout), None) {
                    Ok(t) => {
                        info!("re-attached to page {t}");
                        let _ = outcome.set(Reattached::Attached);
                    }
                    Err(Error::UnknownTarget(t)) => {
                        warn!(
                            "after the reconnect, page target {t} no longer exists: the endpoint \
                             gave a new browser; the supervisor ends"
                        );
                        let _ = outcome.set(Reattached::PageGone(t));
                        transport.shutdown();
                    }
                    Err(e) => {
                        warn!("re-attaching after a reconnect failed: {e}");
                        transport.shutdown();
                    }
                }
            });
        match spawned {
            Ok(h) => Some(h),
            Err(e) => {
                warn!("cannot spawn the re-attach thread: {e}");
                self.shared.transport.load().shutdown();
                None
            }
        }
    }
}
