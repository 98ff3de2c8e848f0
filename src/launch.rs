//! Launching a local Chromium-family browser when no CDP URL is given (SPEC §9).
//!
//! The browser runs headless with a fresh temporary profile, in its own process group, with its
//! `TMPDIR` pointing into that profile: Chromium's own temporary directories
//! (`org.chromium.Chromium.*`) then go away with the profile, and nothing is left in `$TMPDIR`.
//! The profile directories (their names, Chromium's singleton directory, stale profiles) are
//! `launch/profile.rs`.
//!
//! It is started from a small keeper thread that lives as long as the [`LaunchedBrowser`]: the
//! child gets `PR_SET_PDEATHSIG(SIGKILL)`, which Linux ties to the *thread* that forked it, so the
//! browser dies with our process even when it is killed outright, and never with an unrelated
//! caller thread that happened to launch it. The keeper waits for the browser's exit with
//! `waitid(WNOWAIT)`: it learns of the exit at once (so [`LaunchedBrowser::is_running`] is a
//! channel check, not a poll) but leaves the child unreaped until the owner is done with it, so
//! its pid, which is also its process group id, can never be reused by another process while we
//! may still signal it.
//!
//! [`LaunchedBrowser::close`] (and `Drop`, also on panic and from the binary's signal handler)
//! closes gracefully: SIGTERM to the whole process group, SIGKILL after a grace period (1 s for
//! `Drop`), then reaps the child and removes the profile. A launch still waiting for the
//! DevTools URL can be cancelled ([`LaunchedBrowser::launch_cancellable`], the binary's signal
//! handler does) and cleans up the same way.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded, unbounded};

use crate::error::Error;

mod profile;

pub use profile::remove_stale_profiles_once;
use profile::{fresh_profile_dir, remove_singleton_dir};

/// Executable names tried on `PATH`, in order.
pub const BROWSER_NAMES: &[&str] = &[
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "brave-browser",
    "microsoft-edge",
];

/// How long the browser may take to print its DevTools URL.
pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(15);

/// Finds the browser to launch: `configured` (config `browser.chrome_path`), then `$CHROME`,
/// then `BROWSER_NAMES` on `PATH`. A configured or `$CHROME` path that does not exist is an
/// error (never a silent fallback); nothing found is `Ok(None)`.
pub fn find_browser(configured: Option<&str>) -> Result<Option<PathBuf>, Error> {
    let env = std::env::var("CHROME")
        .ok()
        .filter(|s| !s.trim().is_empty());
    for (what, value) in [
        ("browser.chrome_path", configured.map(str::to_string)),
        ("CHROME", env),
    ] {
        if let Some(v) = value {
            let p = PathBuf::from(&v);
            let resolved = if p.components().count() == 1 {
                which(&v)
            } else {
                Some(p.clone())
            };
            return match resolved.filter(|p| p.is_file()) {
                Some(p) => Ok(Some(p)),
                None => Err(Error::Io(format!(
                    "{what} names {}, which is not an existing file; fix it or unset it",
                    crate::quote::quoted(&v)
                ))),
            };
        }
    }
    Ok(BROWSER_NAMES.iter().find_map(|n| which(n)))
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// What Chromium appends to its `TMPDIR` for its singleton socket:
/// `/org.chromium.Chromium.XXXXXX/SingletonSocket`.
const CHROMIUM_SOCKET_SUFFIX_LEN: usize = 45;
/// Longest Unix socket path (`sun_path` is 108 bytes with its NUL).
const UNIX_SOCKET_PATH_MAX: usize = 107;

/// How long [`LaunchedBrowser`]'s `Drop` waits after SIGTERM before it SIGKILLs.
pub const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// A browser we started; closed (SIGTERM, then SIGKILL, to its whole process group) and its
/// profile removed on [`LaunchedBrowser::close`] or drop.
#[derive(Debug)]
pub struct LaunchedBrowser {
    ws_url: String,
    pid: u32,
    profile: PathBuf,
    /// Disconnects when the browser process has exited (written by the keeper thread, which
    /// drops the sender; read by any thread through [`LaunchedBrowser::is_running`]).
    exited: Receiver<()>,
    /// Dropping it tells the keeper thread to kill what is left of the group and reap the child.
    stop: Option<Sender<()>>,
    keeper: Option<std::thread::JoinHandle<()>>,
}

impl LaunchedBrowser {
    /// Launches `executable` headless and waits (at most `LAUNCH_TIMEOUT`) for its DevTools
    /// WebSocket URL.
    pub fn launch(executable: &Path) -> Result<LaunchedBrowser, Error> {
        LaunchedBrowser::launch_cancellable(executable, &crossbeam_channel::never())
    }

    /// [`LaunchedBrowser::launch`], given up as soon as `cancel` receives or disconnects: the
    /// browser started so far is closed and its profile removed before this returns.
    pub fn launch_cancellable(
        executable: &Path,
        cancel: &Receiver<()>,
    ) -> Result<LaunchedBrowser, Error> {
        LaunchedBrowser::launch_with(executable, &[], cancel)
    }

    /// [`LaunchedBrowser::launch_cancellable`] with `extra_args` (`browser.chrome_args`) after
    /// the launch's own flags: a later switch of the same name wins in Chromium, so they may
    /// change the window size, the language or the user agent, say. The flags the launch
    /// relies on (`--remote-debugging-*`, `--user-data-dir`) are refused when the
    /// configuration is read.
    pub fn launch_with(
        executable: &Path,
        extra_args: &[String],
        cancel: &Receiver<()>,
    ) -> Result<LaunchedBrowser, Error> {
        remove_stale_profiles_once();
        let profile = fresh_profile_dir()?;
        let mut cmd = Command::new(executable);
        cmd.args([
            "--headless",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            // The dialog bridge's host never resolves; without a DNS lookup, its XHR fails at
            // once when nothing intercepts it (bridge off), and the page falls back to the
            // native dialog without waiting for a resolver (up to 5 s seen).
            "--host-resolver-rules=MAP cdp-dialog-bridge.invalid ~NOTFOUND",
            "--remote-debugging-port=0",
        ]);
        cmd.args(extra_args);
        cmd.arg(format!("--user-data-dir={}", profile.display()));
        // Chromium's own temporary directories go into the profile, and away with it; unless
        // that makes the path of Chromium's singleton socket too long for a Unix socket: then
        // they go into $TMPDIR, and the singleton directory is removed after Chromium exits
        // (see the module doc).
        let tmp = profile.join("t");
        let socket_path_len = tmp.as_os_str().len() + CHROMIUM_SOCKET_SUFFIX_LEN;
        if socket_path_len > UNIX_SOCKET_PATH_MAX {
            log::debug!(
                "$TMPDIR is too deep for Chromium's singleton socket inside the profile (a \
                 {socket_path_len}-byte path); its directory goes into $TMPDIR and is removed \
                 when the browser has exited"
            );
        } else if let Err(e) = std::fs::create_dir(&tmp) {
            let _ = std::fs::remove_dir_all(&profile);
            return Err(Error::Io(format!(
                "cannot create {} for the browser: {e}",
                tmp.display()
            )));
        } else {
            cmd.env("TMPDIR", &tmp);
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.arg("--no-sandbox");
        }
        cmd.arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // Its own process group (std does the setpgid and checks it), so that closing it
        // reaches every Chromium helper process.
        cmd.process_group(0);
        // Dies with the thread that launched it (Linux only: other Unixes have no
        // PR_SET_PDEATHSIG, and there a browser outlives a process killed outright).
        #[cfg(target_os = "linux")]
        {
            // SAFETY: getpid has no preconditions.
            let parent = unsafe { libc::getpid() };
            // SAFETY: only async-signal-safe calls (prctl, getppid) between fork and exec; both
            // return values are checked.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // We died between fork and prctl: no signal will come, so do not start.
                    if libc::getppid() != parent {
                        return Err(std::io::Error::other("the launching process has exited"));
                    }
                    Ok(())
                });
            }
        }
        let (started_tx, started_rx) =
            bounded::<std::io::Result<(u32, Option<std::process::ChildStderr>)>>(1);
        let (stop_tx, stop_rx) = bounded::<()>(0);
        let (exited_tx, exited_rx) = bounded::<()>(0);
        let keeper = std::thread::Builder::new()
            .name("browser-keeper".into())
            .stack_size(128 * 1024)
            .spawn(move || {
                let mut child: Child = match cmd.spawn() {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = started_tx.send(Err(e));
                        return;
                    }
                };
                let _ = started_tx.send(Ok((child.id(), child.stderr.take())));
                wait_exit_unreaped(child.id());
                drop(exited_tx);
                let _ = stop_rx.recv();
                // The leader is gone but not reaped: its group id is still ours to signal.
                signal_group(child.id(), libc::SIGKILL);
                let _ = child.wait();
            })
            .map_err(|e| Error::Io(format!("cannot spawn the browser keeper thread: {e}")))?;
        let cleanup_profile = |e: Error| {
            let _ = std::fs::remove_dir_all(&profile);
            e
        };
        let (pid, stderr) = match started_rx.recv() {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => {
                let _ = keeper.join();
                return Err(cleanup_profile(Error::Io(format!(
                    "cannot start {}: {e}",
                    executable.display()
                ))));
            }
            Err(_) => {
                return Err(cleanup_profile(Error::Io(
                    "the browser keeper thread died".into(),
                )));
            }
        };
        let mut browser = LaunchedBrowser {
            ws_url: String::new(),
            pid,
            profile,
            exited: exited_rx,
            stop: Some(stop_tx),
            keeper: Some(keeper),
        };
        let (line_tx, line_rx) = unbounded::<String>();
        if let Some(stderr) = stderr {
            let _ = std::thread::Builder::new()
                .name("browser-stderr".into())
                .stack_size(64 * 1024)
                .spawn(move || {
                    // Keep draining after the URL so the browser never blocks on a full pipe.
                    let mut announced = false;
                    for line in BufReader::new(stderr).lines() {
                        let Ok(line) = line else { break };
                        if announced {
                            log::debug!("browser: {line}");
                        } else {
                            announced = line.starts_with("DevTools listening on ");
                            let _ = line_tx.send(line);
                        }
                    }
                });
        }
        let timed_out = crate::deadline::Deadline::after(LAUNCH_TIMEOUT).alarm();
        let mut tail: Vec<String> = Vec::new();
        loop {
            let next = crossbeam_channel::select! {
                recv(line_rx) -> line => line.map_err(|_| "exited"),
                recv(cancel) -> _ => Err("was cancelled"),
                recv(timed_out) -> _ => Err("timed out"),
            };
            match next {
                Ok(line) => {
                    if let Some(url) = line.strip_prefix("DevTools listening on ") {
                        browser.ws_url = url.trim().to_string();
                        log::info!("launched {} (pid {})", executable.display(), browser.pid);
                        return Ok(browser);
                    }
                    log::debug!("browser: {line}");
                    tail.push(line);
                    if tail.len() > 10 {
                        tail.remove(0);
                    }
                }
                Err(why) => {
                    // Dropping `browser` closes what was started and removes the profile.
                    return Err(Error::Io(format!(
                        "{} {why} before printing its DevTools URL; last output: {}",
                        executable.display(),
                        tail.join(" | ")
                    )));
                }
            }
        }
    }

    /// The browser's DevTools WebSocket URL.
    pub fn ws_url(&self) -> &str {
        &self.ws_url
    }

    /// The browser's process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The temporary profile directory (removed on drop).
    pub fn profile_dir(&self) -> &Path {
        &self.profile
    }
}

impl LaunchedBrowser {
    /// True until the browser process exits (closed by `Browser.close`, crashed, killed).
    pub fn is_running(&self) -> bool {
        matches!(self.exited.try_recv(), Err(TryRecvError::Empty))
    }

    /// Disconnects when the browser process has exited (to wait for it without a lock held,
    /// e.g. in a `select!` beside other channels). Nothing is ever sent on it.
    pub fn exit_signal(&self) -> Receiver<()> {
        self.exited.clone()
    }

    /// Closes the browser: SIGTERM to its process group, SIGKILL to what is left after `grace`,
    /// then reaps it and removes its profile (with Chromium's temporary directories in it).
    /// Returns within about `grace` plus the time the kernel takes to deliver SIGKILL.
    pub fn close(mut self, grace: Duration) {
        self.close_inner(grace);
    }

    fn close_inner(&mut self, grace: Duration) {
        let Some(stop) = self.stop.take() else {
            return;
        };
        if self.is_running() {
            // The child is unreaped until `stop` is dropped, so this pid is still ours.
            signal_group(self.pid, libc::SIGTERM);
            let _ = self.exited.recv_timeout(grace);
        }
        drop(stop);
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
        // The browser and its process group are gone: nothing uses the singleton any more.
        remove_singleton_dir(&self.profile);
        if let Err(e) = std::fs::remove_dir_all(&self.profile)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            log::warn!(
                "cannot remove the browser profile {}: {e}",
                self.profile.display()
            );
        }
    }
}

impl Drop for LaunchedBrowser {
    fn drop(&mut self) {
        self.close_inner(CLOSE_GRACE);
    }
}

/// Sends `signal` to the process group `pid` leads, and to `pid` itself. A group or process
/// that is already gone (`ESRCH`) is fine; anything else is logged.
fn signal_group(pid: u32, signal: libc::c_int) {
    let Ok(pid) = i32::try_from(pid) else {
        return;
    };
    for target in [-pid, pid] {
        // SAFETY: a plain syscall on a process group we created and have not reaped.
        if unsafe { libc::kill(target, signal) } == -1 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                log::warn!("kill({target}, {signal}) failed: {e}");
            }
        }
    }
}

/// Blocks until the child `pid` has exited, without reaping it (`WNOWAIT`).
fn wait_exit_unreaped(pid: u32) {
    let id: libc::id_t = pid;
    loop {
        // SAFETY: siginfo_t is plain data (integers, pointers, unions of them), for which all
        // zero bytes is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid writes only into `info`, which lives on this stack frame.
        let rc = unsafe { libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc == 0 {
            return;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            log::warn!("waitid on the browser (pid {pid}) failed: {e}");
            return;
        }
    }
}
