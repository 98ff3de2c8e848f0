//! The one local browser an MCP server launches for tasks connected without a `cdp_url`:
//! launched on first use, relaunched when it has died (an agent's `Browser.close`, a crash),
//! closed at shutdown.
//!
//! The slot's lock is never held while a browser launches (that can take seconds), so shutdown
//! is never stuck behind a launch: concurrent callers wait on the launch's completion channel,
//! and shutdown cancels a launch in progress, which then closes what it started (profile included).

use crate::sync;
use std::sync::Mutex;
use std::time::Duration;

use crossbeam_channel::{Receiver, bounded};

use crate::cancel::CancelToken;
use crate::config::Config;
use crate::launch::{CLOSE_GRACE, LaunchedBrowser, find_browser};

#[derive(Debug, Default)]
struct State {
    browser: Option<LaunchedBrowser>,
    /// Disconnects when the launch in progress ends (it is held by the launching thread).
    launching: Option<Receiver<()>>,
    /// Cancelled by `close` to call off the launch in progress (it then closes what it
    /// started); a child of the launching caller's token, which calls it off too.
    cancel_launch: Option<CancelToken>,
    /// Set by `close`: no more launches.
    closed: bool,
}

/// What a cancelled launch (or wait for one) says.
const CANCELLED: &str = "the launch was cancelled";

/// The server's launched browser (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct BrowserSlot {
    /// Written by `browser_connect` workers and by shutdown, each for a short moment.
    state: Mutex<State>,
}

/// The launched browser's URL, and a signal of its exit.
pub(crate) struct Launched {
    pub(crate) ws_url: String,
    /// Disconnects when that browser process has exited.
    pub(crate) exited: Receiver<()>,
}

impl BrowserSlot {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        sync::lock(&self.state)
    }

    /// The launched browser, if there is one (running or not), without launching.
    pub(crate) fn current(&self) -> Option<Launched> {
        self.lock().browser.as_ref().map(|b| Launched {
            ws_url: b.ws_url().to_string(),
            exited: b.exit_signal(),
        })
    }

    /// The running launched browser, launching one (again) when there is none or it has exited.
    /// `cancel` gives up at once: waiting for another caller's launch, or its own launch, which
    /// then closes what it started (the next caller launches again).
    pub(crate) fn get_or_launch(
        &self,
        config: &Config,
        cancel: &CancelToken,
    ) -> Result<Launched, String> {
        loop {
            if cancel.is_cancelled() {
                return Err(CANCELLED.into());
            }
            let mut st = self.lock();
            if st.closed {
                return Err("the server is shutting down".into());
            }
            let dead = match &st.browser {
                Some(b) if b.is_running() => {
                    return Ok(Launched {
                        ws_url: b.ws_url().to_string(),
                        exited: b.exit_signal(),
                    });
                }
                Some(b) => {
                    log::warn!(
                        "the browser this server started (pid {}) has exited; starting a new one",
                        b.pid()
                    );
                    st.browser.take()
                }
                None => None,
            };
            if let Some(wait) = st.launching.clone() {
                drop(st);
                drop(dead);
                crossbeam_channel::select! {
                    recv(wait) -> _ => continue,
                    recv(cancel.receiver()) -> _ => return Err(CANCELLED.into()),
                }
            }
            let (done_tx, done_rx) = bounded::<()>(0);
            let launch_cancel = cancel.child();
            st.launching = Some(done_rx);
            st.cancel_launch = Some(launch_cancel.clone());
            drop(st);
            // Reaps the dead one and removes its profile (it has exited: no grace needed).
            if let Some(d) = dead {
                d.close(Duration::ZERO);
            }
            let launched = find_browser(config.chrome_path.as_deref())
                .map_err(|e| e.to_string())
                .and_then(|exe| {
                    exe.ok_or_else(|| {
                        "no cdp_url given and no Chromium-family browser found (install chromium, set CHROME, or configure browser.chrome_path)".to_string()
                    })
                })
                .and_then(|exe| {
                    LaunchedBrowser::launch_with(&exe, &config.chrome_args, launch_cancel.receiver())
                        .map_err(|e| e.to_string())
                });
            let mut st = self.lock();
            st.launching = None;
            st.cancel_launch = None;
            let result = match launched {
                Ok(b) if st.closed => {
                    drop(st);
                    b.close(CLOSE_GRACE);
                    Err("the server is shutting down".into())
                }
                Ok(b) => {
                    let l = Launched {
                        ws_url: b.ws_url().to_string(),
                        exited: b.exit_signal(),
                    };
                    st.browser = Some(b);
                    Ok(l)
                }
                Err(e) => Err(e),
            };
            drop(done_tx);
            return result;
        }
    }

    /// No more launches; closes the browser (gracefully, see [`LaunchedBrowser::close`]). A
    /// launch in progress is awaited for at most `launch_wait`; it closes its browser itself.
    pub(crate) fn close(&self, launch_wait: Duration) {
        let (browser, launching) = {
            let mut st = self.lock();
            st.closed = true;
            // A launch in progress gives up and closes what it started.
            if let Some(c) = st.cancel_launch.take() {
                c.cancel();
            }
            (st.browser.take(), st.launching.clone())
        };
        if let Some(b) = browser {
            b.close(CLOSE_GRACE);
        }
        if let Some(wait) = launching {
            let _ = wait.recv_timeout(launch_wait);
        }
    }
}
