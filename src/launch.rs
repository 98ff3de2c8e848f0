//! Launching a local Chromium-family browser when no CDP URL is given (SPEC §9).
//!
//! The browser runs headless with a fresh temporary profile, in its own process group, with its
//! `TMPDIR` pointing into that profile: Chromium's own temporary directories
//! (`.org.chromium.Chromium.*`) then go away with the profile, and nothing is left in `$TMPDIR`.
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
//! `Drop`), then reaps the child and removes the profile.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, Sender, TryRecvError, bounded, unbounded};

use crate::error::Error;

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
/// then [`BROWSER_NAMES`] on `PATH`. A configured or `$CHROME` path that does not exist is an
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
                    "{what} names {v:?}, which is not an existing file; fix it or unset it"
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
    /// Launches `executable` headless and waits (at most [`LAUNCH_TIMEOUT`]) for its DevTools
    /// WebSocket URL.
    pub fn launch(executable: &Path) -> Result<LaunchedBrowser, Error> {
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
            "--remote-debugging-port=0",
        ]);
        cmd.arg(format!("--user-data-dir={}", profile.display()));
        // Chromium's own temporary directories go into the profile, and away with it; unless
        // that makes the path of Chromium's singleton socket too long for a Unix socket.
        let tmp = profile.join("t");
        let socket_path_len = tmp.as_os_str().len() + CHROMIUM_SOCKET_SUFFIX_LEN;
        if socket_path_len > UNIX_SOCKET_PATH_MAX {
            log::warn!(
                "$TMPDIR is too deep for a Chromium temporary directory inside the profile \
                 (a {socket_path_len}-byte socket path); Chromium's own temporary directories \
                 stay in $TMPDIR"
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
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::setpgid(0, 0);
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
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
        let deadline = std::time::Instant::now() + LAUNCH_TIMEOUT;
        let mut tail: Vec<String> = Vec::new();
        loop {
            match line_rx.recv_deadline(deadline) {
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
                Err(e) => {
                    let why = if e.is_timeout() {
                        "timed out"
                    } else {
                        "exited"
                    };
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

    /// Disconnects when the browser process has exited (to wait for it without a lock held).
    pub(crate) fn exit_signal(&self) -> Receiver<()> {
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

/// Sends `signal` to the process group `pid` leads, and to `pid` itself.
fn signal_group(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: plain syscalls on a process group we created and have not reaped.
        unsafe {
            libc::kill(-pid, signal);
            libc::kill(pid, signal);
        }
    }
}

/// Blocks until the child `pid` has exited, without reaping it (`WNOWAIT`).
fn wait_exit_unreaped(pid: u32) {
    let id: libc::id_t = pid;
    loop {
        // SAFETY: waitid writes only into `info`, which lives on this stack frame.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::waitid(libc::P_PID, id, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc == 0 {
            return;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            log::warn!(
                "waitid on the browser (pid {pid}) failed: {}",
                std::io::Error::last_os_error()
            );
            return;
        }
    }
}

fn fresh_profile_dir() -> Result<PathBuf, Error> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "cdp-supervisor-profile-{}-{}-{nanos:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir(&dir).map_err(|e| {
        Error::Io(format!(
            "cannot create a profile directory {}: {e}",
            dir.display()
        ))
    })?;
    Ok(dir)
}
