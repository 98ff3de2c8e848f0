//! One popup watcher per browser (issue 24): the registry's tasks follow their popups without
//! each turning on browser-level auto-attach.
//!
//! Browser-level `Target.setAutoAttach {waitForDebuggerOnStart: true}` is the only way Chromium
//! offers to catch a new page before its first script (`crate::core::pages`), and it hands the
//! connection every page the browser holds at once, then every new page, paused until that
//! connection resumes it. One per task made each connect cost O(pages) and held every new tab
//! until each of N tasks had resumed it. Measured on Chromium 156 (`tests/it/measure_fleet.rs`):
//! * `Target.autoAttachRelated {targetId: <the task's page>, waitForDebuggerOnStart}` never
//!   reports a popup (0 of 20: `window.open` with and without `noopener`, `target=_blank` with
//!   and without `rel=noopener`, a written `about:blank`); page-level `setAutoAttach` with a
//!   `page` filter does not either (issue 14), and a browser-level filter only narrows by type:
//!   every page is still attached;
//! * a page held paused by one connection can be attached by another, which then sends
//!   `Page.enable` and the rest; once a browser-level round trip on that second connection has
//!   come back (the browser handles one connection's messages in order, so the set-up has been
//!   dispatched), the first resumes and detaches, and the page's first script is seen by the
//!   second (20 of 20, the five kinds above; the hand-off held the page 22–36 ms).
//!
//! So one [`Watcher`] per browser URL, with a connection and a thread of its own, has
//! browser-level auto-attach. A new page whose opener (`openerId`, else the page owning
//! `openerFrameId`) is a page of one of its tasks (that task's page or a page it follows, by its
//! published snapshot) is handed to that task: a short-lived thread has the task's connection
//! attach to it (its reader sets the page up exactly as if its own auto-attach had handed it
//! over: `Core::browser_target_attached`), waits for a browser-level round trip on the task's
//! connection, then resumes the page and detaches the watcher. Every other new page is resumed
//! and let go as soon as its event is read. Pages that exist when the watcher connects are only
//! detached; a task the watcher starts serving takes over itself the popups its page opened
//! before (`adopt_earlier_popups`), as a task that follows its popups itself is handed them.
//!
//! # Which endpoints get a watcher, and for how long (issue 28)
//!
//! A watcher is one more connection to the endpoint, so it is opened only where that costs the
//! endpoint nothing a task needs: the browser's own DevTools endpoint, a URL of the shape
//! `ws://host:port[/prefix]/devtools/browser/<id>` that the same host's `/json/version` names
//! ([`own_browser_url`]). Chromium's endpoint is one; a service in front of browsers is not:
//! Browserless's `/json/version` names its root URL (`ws://host:port`), where every connection
//! starts a browser, and a `/devtools/browser/<id>` it serves (joining a browser it runs) takes
//! a concurrency slot per connection like every other WebSocket there (measured on
//! Browserless 2.42: `tests/it/e2e_browserless.rs`), so its tasks follow their popups
//! themselves and it never sees a watcher. That is decided before connecting; a URL found not
//! to be one, or whose host does not answer `/json/version` within 2 s, gets none again.
//! `wss://` endpoints get no watcher either (no `https://` discovery to ask).
//!
//! A watcher serves the tasks that start while it is open and closes [`IDLE_GRACE`] (250 ms)
//! after the last of them has ended (stopped, rebound, or dead: each served supervisor's end
//! runs [`Watchers::task_ended`]) unless a task has started on it meanwhile; the next task of
//! that browser after that opens another. So no connection of ours outlives the tasks of a
//! browser by more than the grace (issue 28 asks for 1 s: a hosted browser is released when its
//! last client leaves). The grace spares a task that follows at once (a disconnect, then a
//! connect) a new watcher, whose browser-level auto-attach costs the browser time in the pages
//! it holds (it hands over every page at once; on Chromium 148 with 100 pages: its connect and
//! `Target.setAutoAttach` 55 ms, letting the pages go 64 ms more; a task's connect with a
//! watcher opened for it against one with a watcher open, `measure_fleet`'s "reopened" and
//! "after": 0 to 180 ms more, median of 7 on a loaded 2-core machine).
//!
//! A task whose page the watcher's browser does not hold after all (a proxy that gives each
//! connection its own browser) follows its popups itself, and its URL gets no watcher again;
//! so do tasks when the watcher cannot connect or its connection ends.

use crate::sync::lock;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crossbeam_channel::{Receiver, bounded};

use crate::cancel::CancelToken;
use crate::config::Config;
use crate::deadline::Deadline;
use crate::error::Error;
use crate::redact::redact_url;
use crate::supervisor::Supervisor;

mod watcher;

use watcher::Holds;
pub(crate) use watcher::Watcher;

/// How long a watcher whose last task has ended stays open for the next (issue 28: closed
/// within 1 s of the last task). The rest of that second is for a loaded machine: on 2 cores at
/// load 23-30 the close came 150-540 ms after the grace (`tests/it/e2e_watcher.rs`), and a
/// 500 ms grace once took 1.05 s.
pub(crate) const IDLE_GRACE: Duration = Duration::from_millis(250);

/// How long asking an endpoint whether it is a browser's own ([`own_browser_url`]) may take.
const DISCOVERY_WAIT: Duration = Duration::from_secs(2);

/// Has `sup` follow the popups its page opened before it started, and theirs: the watcher
/// hands a task only the pages opened once it serves it (the ones it saw before were let go),
/// where a task that follows its popups itself is handed every page the browser holds by its
/// own auto-attach, and follows those its page opened. The watcher knows them
/// ([`Watcher::opened_by`]: no call to the browser, so a start whose page opened none costs
/// nothing more); each is taken over as the watcher does ([`Supervisor::adopt_page`]), running
/// rather than paused: one frozen by a dialog meanwhile is then reported by the followed-page
/// check (`watchdog::ANSWER_WITHIN`).
fn adopt_earlier_popups(sup: &Supervisor, watcher: &Watcher, page: &str, deadline: Deadline) {
    let snap = sup.snapshot();
    // Pages it follows already are among `own`, which `opened_by` never returns.
    let own: Vec<&str> = std::iter::once(page)
        .chain(snap.pages.iter().map(|p| p.target_id.as_str()))
        .chain(snap.frames.keys().map(String::as_str))
        .collect();
    for target in watcher.opened_by(&own) {
        // A page that has closed since is not found: nothing to follow.
        if let Err(e) = sup.adopt_page(&target, deadline) {
            log::debug!(
                "task {}: popup {target}, opened before it started, not taken over: {e}",
                sup.task_id()
            );
        }
    }
}

/// The watchers of one registry, by CDP URL.
#[derive(Default)]
pub(crate) struct Watchers {
    /// By the raw URL (credentials included: never shown, see the `Debug` impl).
    by_url: Mutex<HashMap<String, Arc<Watcher>>>,
    /// URLs a watcher is being connected to, each with a channel that disconnects when that
    /// connect ends: concurrent first starts on one browser wait for it (never under the lock)
    /// instead of each connecting a watcher.
    connecting: Mutex<HashMap<String, Receiver<()>>>,
    /// URLs that get no watcher: not a browser's own endpoint, or one whose watcher found
    /// itself in another browser than its task's.
    no_watcher: Mutex<HashSet<String>>,
    /// Set by [`Watchers::close_all`]: a connect that ends later closes its watcher at once.
    closed: AtomicBool,
}

/// The start a watcher is opened for.
struct Start<'a> {
    sup: &'a Supervisor,
    /// The task's page.
    page: &'a str,
    cdp_url: &'a str,
    config: &'a Config,
    deadline: Deadline,
    cancel: Option<&'a CancelToken>,
}

/// A watcher connect on a helper thread, so that a start's cancel does not wait for it.
struct Connecting {
    done: Receiver<Result<Arc<Watcher>, Error>>,
    /// Set when the start it was for has ended otherwise: the watcher, once connected, closes
    /// if no task uses it.
    abandoned: Arc<AtomicBool>,
    cdp_url: String,
}

impl Connecting {
    /// The start it was for was cancelled: its watcher closes unless a task uses it (now, or
    /// once connected).
    fn abandon(self, watchers: &Arc<Watchers>) {
        self.abandoned.store(true, Ordering::SeqCst);
        watchers.task_ended(&self.cdp_url);
    }
}

impl std::fmt::Debug for Watchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let watchers: Vec<Arc<Watcher>> = lock(&self.by_url).values().cloned().collect();
        f.debug_list().entries(watchers).finish()
    }
}

impl Watchers {
    /// Has the popup watcher of `sup`'s browser hand it its popups: the open one, or one opened
    /// now for the first task of a browser that can hand pages over; otherwise `sup` follows
    /// them itself. `Err` only when `cancel` calls the start off meanwhile.
    pub(crate) fn serve(
        self: &Arc<Self>,
        sup: &Arc<Supervisor>,
        cdp_url: &str,
        config: &Config,
        cancel: Option<&CancelToken>,
    ) -> Result<(), Error> {
        let deadline = Deadline::after(config.start_timeout());
        let page = sup.snapshot().page_target_id.clone().unwrap_or_default();
        let me = Arc::downgrade(self);
        let url = cdp_url.to_string();
        sup.on_end(Box::new(move || {
            if let Some(watchers) = Weak::upgrade(&me) {
                watchers.task_ended(&url);
            }
        }));
        // A start that finds the watcher closing (its last task ended meanwhile) opens another.
        for _ in 0..2 {
            let watcher = match self.get(cdp_url) {
                Some(w) => w,
                None => {
                    let start = Start {
                        sup,
                        page: &page,
                        cdp_url,
                        config,
                        deadline,
                        cancel,
                    };
                    match self.open(&start)? {
                        Some(w) => w,
                        None => break,
                    }
                }
            };
            match watcher.holds(&page, deadline) {
                Holds::Yes if watcher.add(sup) => {
                    if !sup.options().new_page {
                        adopt_earlier_popups(sup, &watcher, &page, deadline);
                    }
                    return Ok(());
                }
                Holds::Yes | Holds::Unknown => continue,
                Holds::No => {
                    log::info!(
                        "task {}: the popup watcher's browser does not hold its page (a browser \
                         per connection?): its tasks follow their popups themselves",
                        sup.task_id()
                    );
                    self.not_shared(cdp_url, &watcher);
                    break;
                }
            }
        }
        // A watcher this start opened and could not use closes unless another task uses it.
        self.task_ended(cdp_url);
        sup.follow_popups_itself();
        Ok(())
    }

    /// The open watcher of `cdp_url`, if there is one.
    fn get(&self, cdp_url: &str) -> Option<Arc<Watcher>> {
        lock(&self.by_url)
            .get(cdp_url)
            .filter(|w| w.is_open())
            .cloned()
    }

    /// [`Watchers::get_or_connect`] on a helper thread.
    fn connect_in_background(
        self: &Arc<Self>,
        cdp_url: &str,
        ws: &str,
        config: &Config,
        deadline: Deadline,
    ) -> Option<Connecting> {
        let (tx, done) = bounded(1);
        let abandoned = Arc::new(AtomicBool::new(false));
        let (watchers, url, ws, cfg, gone) = (
            Arc::clone(self),
            cdp_url.to_string(),
            ws.to_string(),
            config.clone(),
            Arc::clone(&abandoned),
        );
        std::thread::Builder::new()
            .name("cdp-popups-connect".into())
            .stack_size(128 * 1024)
            .spawn(move || {
                let _ = tx.send(watchers.get_or_connect(&url, &ws, &cfg, deadline));
                if gone.load(Ordering::SeqCst) {
                    watchers.task_ended(&url);
                }
            })
            .ok()?;
        Some(Connecting {
            done,
            abandoned,
            cdp_url: cdp_url.to_string(),
        })
    }

    /// A watcher for `cdp_url` opened now (or by a concurrent start), when
    /// that URL is the browser's own endpoint and the browser can say which pages it holds
    /// (the scripted fake cannot, unless told to hand pages over); `None` (the task follows
    /// its popups itself) otherwise or when it cannot connect. `Err` only when `cancel` calls
    /// the start off.
    fn open(self: &Arc<Self>, start: &Start<'_>) -> Result<Option<Arc<Watcher>>, Error> {
        let Start {
            sup,
            cdp_url,
            config,
            deadline,
            cancel,
            ..
        } = *start;
        let Some(ws) = self.browser_url(start) else {
            return Ok(None);
        };
        let connected = match cancel {
            None => self.get_or_connect(cdp_url, &ws, config, deadline),
            // On a helper thread, so that `cancel` ends the wait at once.
            Some(_) => match self.connect_in_background(cdp_url, &ws, config, deadline) {
                Some(pending) => return self.wait_for(pending, start),
                None => Err(Error::Io(
                    "no thread for the popup watcher's connect".into(),
                )),
            },
        };
        Ok(connected_or_logged(sup, cdp_url, connected))
    }

    /// Waits for `pending`, or for the start's cancel (then `Err`, and `pending` is abandoned).
    fn wait_for(
        self: &Arc<Self>,
        pending: Connecting,
        start: &Start<'_>,
    ) -> Result<Option<Arc<Watcher>>, Error> {
        let never = crossbeam_channel::never();
        let cancelled = start.cancel.map_or(&never, CancelToken::receiver);
        crossbeam_channel::select! {
            recv(pending.done) -> r => {
                let r = r.unwrap_or_else(|_| Err(Error::Io("no watcher".into())));
                Ok(connected_or_logged(start.sup, start.cdp_url, r))
            }
            recv(cancelled) -> _ => {
                pending.abandon(self);
                Err(Error::StartCancelled {
                    task_id: start.sup.task_id().to_string(),
                    during: "connecting".into(),
                })
            }
        }
    }

    /// The URL to connect the watcher of the start's URL to, when it gets one: a browser that
    /// can say whether it holds the task's page, at its own endpoint (decided once per URL).
    fn browser_url(&self, start: &Start<'_>) -> Option<String> {
        let cdp_url = start.cdp_url;
        if lock(&self.no_watcher).contains(cdp_url) {
            return None;
        }
        if !start.sup.browser_knows(start.page, start.deadline) {
            // It could not say which browser holds a popup (the scripted fake cannot).
            lock(&self.no_watcher).insert(cdp_url.to_string());
            return None;
        }
        // Chromium answers at once; an endpoint that does not answer plain HTTP is no browser's.
        let asked = start.deadline.earliest(Deadline::after(DISCOVERY_WAIT));
        let ws = match own_browser_url(cdp_url, asked) {
            Ok(Some(ws)) => ws,
            verdict => {
                let why = match verdict {
                    Err(e) => format!("its /json/version: {e}"),
                    _ => "it is not a browser's own DevTools endpoint".into(),
                };
                log::info!(
                    "{}: no popup watcher connects to it ({why}): its tasks follow their popups \
                     themselves",
                    redact_url(cdp_url)
                );
                lock(&self.no_watcher).insert(cdp_url.to_string());
                return None;
            }
        };
        Some(ws)
    }

    /// The open watcher of `cdp_url`, connecting one to `ws` (by `deadline`) when there is
    /// none.
    fn get_or_connect(
        &self,
        cdp_url: &str,
        ws: &str,
        config: &Config,
        deadline: Deadline,
    ) -> Result<Arc<Watcher>, Error> {
        loop {
            if let Some(w) = self.get(cdp_url) {
                return Ok(w);
            }
            let mut connecting = lock(&self.connecting);
            let Some(done) = connecting.get(cdp_url).cloned() else {
                let (tx, rx) = bounded::<()>(0);
                connecting.insert(cdp_url.to_string(), rx);
                drop(connecting);
                let opts = crate::endpoint::connect_options(config);
                let fresh = crate::transport::Transport::connect_until(
                    ws,
                    &opts,
                    deadline.earliest(Deadline::after(opts.connect_timeout)),
                )
                .and_then(|t| Watcher::start(t, deadline));
                if let Ok(w) = &fresh {
                    let mut map = lock(&self.by_url);
                    if self.closed.load(Ordering::SeqCst) {
                        w.close(); // the registry has gone meanwhile
                    } else if let Some(old) = map.insert(cdp_url.to_string(), Arc::clone(w)) {
                        old.close();
                    }
                }
                lock(&self.connecting).remove(cdp_url);
                drop(tx);
                return fresh;
            };
            drop(connecting);
            crossbeam_channel::select! {
                recv(done) -> _ => {}
                recv(deadline.alarm()) -> _ => {
                    return Err(Error::Io("another start is still connecting the popup watcher".into()));
                }
            }
            if self.get(cdp_url).is_none() {
                // That connect failed: so would this one, most likely.
                return Err(Error::Io("the popup watcher could not connect".into()));
            }
        }
    }

    /// `w`, the watcher of `cdp_url`, is in another browser than a task of that URL: the
    /// endpoint starts a browser per connection. It is closed (it would hold a browser of the
    /// endpoint's for nothing), and no watcher is connected to that URL again.
    fn not_shared(&self, cdp_url: &str, w: &Arc<Watcher>) {
        lock(&self.no_watcher).insert(cdp_url.to_string());
        self.forget(cdp_url, w);
        w.close();
    }

    /// Removes `w` from the map if it is still the watcher of `cdp_url`.
    fn forget(&self, cdp_url: &str, w: &Arc<Watcher>) {
        let mut map = lock(&self.by_url);
        if map.get(cdp_url).is_some_and(|m| Arc::ptr_eq(m, w)) {
            map.remove(cdp_url);
        }
    }

    /// A task served through `cdp_url` has ended: if it was its watcher's last live task, the
    /// watcher closes [`IDLE_GRACE`] later unless a task has started on it meanwhile. Run on
    /// the task's reader thread (its end hook): takes two locks briefly, waits for nothing (a
    /// helper thread waits out the grace).
    pub(crate) fn task_ended(self: &Arc<Self>, cdp_url: &str) {
        let Some(w) = lock(&self.by_url).get(cdp_url).cloned() else {
            return;
        };
        if w.is_busy() || !w.start_idle_timer() {
            return;
        }
        let (me, url) = (Arc::clone(self), cdp_url.to_string());
        let closed = w.closed_signal();
        let timer = std::thread::Builder::new()
            .name("cdp-popups-idle".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                // Ends at once when the watcher closes otherwise (its connection, the registry).
                let _ = closed.recv_timeout(IDLE_GRACE);
                w.idle_timer_done();
                if w.close_if_idle() {
                    me.forget(&url, &w);
                }
            });
        if timer.is_err()
            && let Some(w) = lock(&self.by_url).get(cdp_url).cloned()
            && w.close_if_idle()
        {
            self.forget(cdp_url, &w);
        }
    }

    /// Closes the watchers no live task uses any more.
    pub(crate) fn close_idle(&self) {
        let all: Vec<(String, Arc<Watcher>)> = lock(&self.by_url)
            .iter()
            .map(|(u, w)| (u.clone(), Arc::clone(w)))
            .collect();
        for (url, w) in all {
            if w.close_if_idle() {
                self.forget(&url, &w);
            }
        }
    }

    /// Closes every watcher, and any a connect still under way opens.
    pub(crate) fn close_all(&self) {
        let all: Vec<Arc<Watcher>> = {
            let mut map = lock(&self.by_url);
            self.closed.store(true, Ordering::SeqCst);
            map.drain().map(|(_, w)| w).collect()
        };
        for w in all {
            w.close();
        }
    }
}

/// What a watcher connect gave, logged when it failed.
fn connected_or_logged(
    sup: &Supervisor,
    cdp_url: &str,
    connected: Result<Arc<Watcher>, Error>,
) -> Option<Arc<Watcher>> {
    connected
        .map_err(|e| {
            log::info!(
                "task {}: no popup watcher for {} ({e}): the task follows its popups itself",
                sup.task_id(),
                redact_url(cdp_url)
            );
        })
        .ok()
}

/// The browser-level URL to connect a watcher to, when `cdp_url` leads to a browser's own
/// DevTools endpoint (module doc): a `/devtools/browser/<id>` URL named by its host's
/// `/json/version`. `Ok(None)`: it does not (the endpoint answered otherwise); `Err`: it could
/// not be asked.
fn own_browser_url(cdp_url: &str, deadline: Deadline) -> Result<Option<String>, Error> {
    let ws = crate::endpoint::resolve_until(cdp_url, deadline)?;
    let parsed = url::Url::parse(&ws).map_err(|e| Error::InvalidUrl {
        url: redact_url(&ws),
        reason: e.to_string(),
    })?;
    let Some((prefix, id)) = browser_path(parsed.path()) else {
        return Ok(None);
    };
    match url::Url::parse(cdp_url)
        .map(|u| u.scheme().to_string())
        .as_deref()
    {
        // Discovery named this URL: it is the browser's own.
        Ok("http") => return Ok(Some(ws)),
        Ok("ws") => {}
        _ => return Ok(None),
    }
    let mut discovery = parsed.clone();
    let _ = discovery.set_scheme("http");
    discovery.set_path(&format!("{prefix}/"));
    let named = crate::endpoint::resolve_until(discovery.as_str(), deadline)?;
    let same = url::Url::parse(&named)
        .ok()
        .and_then(|u| browser_path(u.path()).map(|(_, i)| i.to_string()))
        .is_some_and(|i| i == id);
    Ok(same.then_some(ws))
}

/// `(prefix, id)` of a path `<prefix>/devtools/browser/<id>` (`id` not empty).
fn browser_path(path: &str) -> Option<(&str, &str)> {
    let (rest, id) = path.rsplit_once('/')?;
    let prefix = rest.strip_suffix("/devtools/browser")?;
    (!id.is_empty()).then_some((prefix, id))
}

#[cfg(all(test, feature = "fake-browser"))]
mod tests;
