//! How a supervisor starts: the [`StartRequest`] a caller fills in (task, URL, per-task
//! options with the page choice, a bound, a cancel token), and the one start path that runs it
//! (connect, threads, attach), which [`Supervisor::start`] and the registry's
//! [`SupervisorRegistry::start`](crate::SupervisorRegistry::start) both take.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, bounded, unbounded};
use log::{debug, info, warn};

use super::{READER_STACK, Supervisor, WATCHDOG_STACK, files, stall};
use crate::attach::{Choice, attach_page};
use crate::cancel::{self, CancelToken, Received};
use crate::config::{Config, StartOptions, check_seconds};
use crate::core::{Core, CoreSettings, answer_command};
use crate::deadline::Deadline;
use crate::error::Error;
use crate::outbound::Outbound;
use crate::reader::{Reader, ReconnectPlan};
use crate::redact::redact_url;
use crate::shared::Shared;
use crate::snapshot::{ClosedBy, Snapshot};
use crate::task_id::thread_label;
use crate::transport::ConnectOptions;
use crate::watchdog::{self, WatchdogMsg};

/// One start, as a value: which task, which browser (a `ws://`, `wss://` or `http://`
/// debugging URL), the task's [`StartOptions`] (its page choice among them: a named target, a
/// page of its own, or the browser's first page), the bound on connect and attach, and a token
/// that calls it off. Built with [`StartRequest::new`] and the `with_*` setters; run by
/// [`SupervisorRegistry::start`](crate::SupervisorRegistry::start) (what
/// [`get_or_start`](crate::SupervisorRegistry::get_or_start) does with the defaults) or, outside
/// a registry, [`Supervisor::start`].
#[derive(Clone)]
pub struct StartRequest<'a> {
    task_id: &'a str,
    /// May carry credentials: never printed (`Debug` shows it redacted).
    cdp_url: &'a str,
    options: StartOptions,
    /// `None`: the configuration's `supervisor.start_timeout_s`.
    timeout: Option<Duration>,
    cancel: Option<&'a CancelToken>,
}

impl std::fmt::Debug for StartRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartRequest")
            .field("task_id", &self.task_id)
            .field("cdp_url", &redact_url(self.cdp_url))
            .field("options", &self.options)
            .field("timeout", &self.timeout)
            .field("cancelled", &self.cancel.map(CancelToken::is_cancelled))
            .finish()
    }
}

impl<'a> StartRequest<'a> {
    /// A start of `task_id` on `cdp_url` with the default options, the configuration's start
    /// timeout and no cancel token.
    pub fn new(task_id: &'a str, cdp_url: &'a str) -> StartRequest<'a> {
        StartRequest {
            task_id,
            cdp_url,
            options: StartOptions::default(),
            timeout: None,
            cancel: None,
        }
    }

    /// The task's own options (dialog policy, page choice, ...): see [`StartOptions`].
    pub fn with_options(mut self, options: StartOptions) -> StartRequest<'a> {
        self.options = options;
        self
    }

    /// Bounds the connect and attach of the supervisor this start makes (and its reattaches
    /// after a reconnect) by `timeout` instead of `supervisor.start_timeout_s`: any duration
    /// but zero ([`Error::Config`] at start), [`Duration::MAX`] for no bound (`None`: the
    /// configuration's again).
    pub fn with_timeout(mut self, timeout: impl Into<Option<Duration>>) -> StartRequest<'a> {
        self.timeout = timeout.into();
        self
    }

    /// Has `cancel` call the start off at once, wherever it is: waiting for another caller's
    /// start of the task, connecting (discovery, TCP, TLS, the WebSocket upgrade) or attaching.
    /// A cancelled start returns [`Error::StartCancelled`] and leaves nothing behind: no
    /// supervisor in the registry, no thread of its own, no page it created. Two waits are not
    /// cut short: a `Target.createTarget` in flight is waited for (at most 1 s) so that the new
    /// page can be closed, and a connect blocked in system calls cannot be interrupted: the
    /// start returns at once, and the connect ends on its helper thread by its own deadline,
    /// closing what it opened. Takes a token or an `Option` of one (`None`: no token).
    pub fn with_cancel(mut self, cancel: impl Into<Option<&'a CancelToken>>) -> StartRequest<'a> {
        self.cancel = cancel.into();
        self
    }

    /// The task it starts.
    pub fn task_id(&self) -> &'a str {
        self.task_id
    }

    /// The task's options.
    pub fn options(&self) -> &StartOptions {
        &self.options
    }

    pub(crate) fn cdp_url(&self) -> &'a str {
        self.cdp_url
    }

    /// The caller's token, if any.
    pub(crate) fn cancel(&self) -> Option<&'a CancelToken> {
        self.cancel
    }

    /// `config` with this start's bound applied (a copy only when it has its own).
    pub(crate) fn config<'c>(&self, config: &'c Config) -> Result<Cow<'c, Config>, Error> {
        with_timeout(config, self.timeout)
    }

    /// True when the caller's token is cancelled already.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancel.is_some_and(CancelToken::is_cancelled)
    }
}

/// `config` with its start timeout replaced by `timeout` (checked: any bound but zero).
fn with_timeout(config: &Config, timeout: Option<Duration>) -> Result<Cow<'_, Config>, Error> {
    match timeout {
        None => Ok(Cow::Borrowed(config)),
        Some(t) => {
            // Any bound but zero: `Duration::MAX` is none.
            check_seconds("start_timeout_s", t, Duration::MAX)?;
            Ok(Cow::Owned(config.clone().with_start_bound(t)))
        }
    }
}

impl Supervisor {
    /// Runs `request` outside any registry: connects, starts the reader and watchdog threads
    /// and attaches to the page (SPEC §4), all within the start timeout (the request's, else
    /// `config.start_timeout()`). The task's settings are
    /// [`config.with_overrides(options)`](Config::with_overrides). On any failure every thread
    /// is stopped again. An invalid task id (see
    /// [`SupervisorRegistry::check_task_id`](crate::SupervisorRegistry::check_task_id)) is an
    /// [`Error::InvalidArgument`]; a cancelled start, [`Error::StartCancelled`].
    pub fn start(request: StartRequest<'_>, config: &Config) -> Result<Arc<Supervisor>, Error> {
        Supervisor::start_served(request, config, false, &[])
    }

    /// The one start path ([`Supervisor::start`], and the registry's). With `popups_elsewhere`
    /// the supervisor does not turn browser-level auto-attach on: the registry then has its
    /// popup watcher hand it its popups, or calls [`Supervisor::follow_popups_itself`]
    /// (`crate::registry::popups`). A start that takes the browser's first page skips the pages
    /// in `taken` (other tasks' pages, with `security.isolate_tasks`).
    pub(crate) fn start_served(
        request: StartRequest<'_>,
        config: &Config,
        popups_elsewhere: bool,
        taken: &[String],
    ) -> Result<Arc<Supervisor>, Error> {
        let StartRequest {
            task_id,
            cdp_url,
            options,
            timeout,
            cancel,
        } = request;
        crate::task_id::check(task_id)?;
        let cancelled = |during: &str| Error::StartCancelled {
            task_id: task_id.to_string(),
            during: during.to_string(),
        };
        if cancel.is_some_and(CancelToken::is_cancelled) {
            return Err(cancelled("waiting to start"));
        }
        let config = with_timeout(config, timeout)?.with_overrides(&options);
        let started = Instant::now();
        let deadline = Deadline::after(config.start_timeout());
        let opts = crate::endpoint::connect_options(&config);
        let transport = match cancel {
            None => crate::endpoint::connect(cdp_url, &opts, deadline)?,
            Some(c) => match connect_cancellable(cdp_url, &opts, deadline, c) {
                Err(Error::Cancelled(_)) => return Err(cancelled("connecting")),
                other => other?,
            },
        };
        let (download_dir, files) = files::files_settings(task_id, &config);
        let (reg_tx, reg_rx) = unbounded();
        let (wd_tx, wd_rx) = unbounded();
        let (wake_reader_tx, wake_reader) = bounded::<()>(0);
        let mut core = Core::new(
            task_id,
            &transport.url_redacted,
            CoreSettings {
                policy: config.dialog_policy(),
                dialog_timeout: config.dialog_timeout(),
                limits: config.limits().clone(),
                bridge: config.dialog_bridge(),
                follow_popups: config.follow_popups(),
                browser_auto_attach: !popups_elsewhere,
                capture_console: config.capture_console(),
            },
        );
        core.set_files(files);
        let first = Snapshot::empty(task_id, &transport.url_redacted);
        let shared = Arc::new(Shared::new(transport, reg_tx, first));
        let reader = Reader {
            shared: Arc::clone(&shared),
            core,
            registrations: reg_rx,
            watchdog: wd_tx,
            wake_reader,
            reconnect: ReconnectPlan {
                cdp_url: cdp_url.to_string(),
                attempts: config.reconnect_attempts(),
                backoff: config.reconnect_backoff(),
                connect: opts,
                attach_timeout: config.start_timeout(),
                own_page: options.owns_page(),
            },
        };
        let sup = Arc::new(Supervisor {
            task_id: task_id.to_string(),
            cdp_url: cdp_url.to_string(),
            config,
            options,
            shared,
            threads: Mutex::new(Vec::new()),
            wake_reader: Mutex::new(Some(wake_reader_tx)),
            download_dir,
            last_navigation: Mutex::new(None),
            downloads_taken: Mutex::new(Default::default()),
            thumbnail: Mutex::new(Default::default()),
        });
        let spawned = sup.spawn_threads(reader, wd_rx);
        let choice = match &sup.options.target_id {
            Some(t) => Choice::Exactly(t),
            None if sup.options.owns_page() => Choice::NewPage,
            None => Choice::FirstPage {
                taken,
                choice: sup.options.page_choice,
            },
        };
        let attached = spawned.and_then(|_| attach_page(&sup.shared, choice, deadline, cancel));
        if let Err(e) = attached {
            sup.stop();
            return Err(match e {
                Error::Cancelled(_) => cancelled("attaching to the page"),
                Error::Timeout { method, .. } => Error::StartTimeout(
                    sup.config.start_timeout(),
                    format!("{method} got no answer (is the endpoint a live, responsive browser?)"),
                ),
                other => other,
            });
        }
        info!(
            "task {}: attached to {} on {} in {:?}",
            sup.task_id,
            sup.snapshot().page_target_id.as_deref().unwrap_or("?"),
            sup.shared.url_redacted,
            started.elapsed()
        );
        Ok(sup)
    }

    fn spawn_threads(&self, reader: Reader, wd_rx: Receiver<WatchdogMsg>) -> Result<(), Error> {
        let spawn_err = |e: std::io::Error| Error::Io(format!("cannot spawn a thread: {e}"));
        let handle = std::thread::Builder::new()
            .name(format!("cdp-reader-{}", thread_label(&self.task_id)))
            .stack_size(READER_STACK)
            .spawn(move || reader.run())
            .map_err(spawn_err)?;
        self.lock_threads().push(handle);
        let shared = Arc::clone(&self.shared);
        let task = self.task_id.clone();
        let mut ticker = stall::Ticker::new(Arc::clone(&self.shared), self.task_id.clone());
        let dog = std::thread::Builder::new()
            .name(format!("cdp-watchdog-{}", thread_label(&self.task_id)))
            .stack_size(WATCHDOG_STACK)
            .spawn(move || {
                let fire = |dialog_id: &str| fire_watchdog(&shared, &task, dialog_id);
                watchdog::run(
                    wd_rx,
                    fire,
                    &mut ticker,
                    watchdog::PROBE_EVERY,
                    watchdog::ANSWER_WITHIN,
                )
            })
            .map_err(spawn_err)?;
        self.lock_threads().push(dog);
        Ok(())
    }
}

/// [`crate::endpoint::connect`] on a helper thread, so that `cancel` ends the wait at once
/// (the connect's system calls cannot be interrupted). A connection that completes after the
/// cancel is shut down by the helper; the helper ends by the connect's own deadline.
fn connect_cancellable(
    cdp_url: &str,
    opts: &ConnectOptions,
    deadline: Deadline,
    cancel: &CancelToken,
) -> Result<crate::transport::Transport, Error> {
    let (tx, rx) = bounded(1);
    let (url, opts) = (cdp_url.to_string(), opts.clone());
    std::thread::Builder::new()
        .name("cdp-connect".into())
        .stack_size(READER_STACK)
        .spawn(move || {
            let result = crate::endpoint::connect(&url, &opts, deadline);
            if let Err(crossbeam_channel::SendError(Ok(transport))) = tx.send(result) {
                transport.shutdown();
            }
        })
        .map_err(|e| Error::Io(format!("cannot spawn a thread: {e}")))?;
    // The connect ends by its own deadline: only the token can end this wait sooner.
    match cancel::recv(&rx, Deadline::NEVER, Some(cancel)) {
        Received::Value(r) => r,
        Received::Cancelled => Err(Error::Cancelled("connect".into())),
        Received::Closed | Received::TimedOut => Err(Error::Io(
            "the connect thread ended without an answer".into(),
        )),
    }
}

fn fire_watchdog(shared: &Shared, task_id: &str, dialog_id: &str) {
    let snap = shared.snapshot.load_full();
    let Some(dialog) = snap.pending_dialogs.iter().find(|d| d.id == dialog_id) else {
        return; // closed in the meantime: never fire for a closed dialog
    };
    if snap.handover.is_held() {
        return; // a person holds the task (`supervisor/handover.rs`): the dialog waits for them
    }
    warn!("task {task_id}: dialog {dialog_id} was not answered in time; the watchdog dismisses it");
    let c = answer_command(dialog, false, None, ClosedBy::Watchdog);
    if let Err(e) = shared.send_command(c, None, Deadline::NEVER) {
        debug!("task {task_id}: watchdog dismissal not sent: {e}");
    }
}
