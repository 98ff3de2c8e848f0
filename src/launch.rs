//! Launching a local Chromium-family browser when no CDP URL is given (SPEC §9).
//!
//! The browser runs headless with a fresh temporary profile, in its own process group. It is
//! started from a small keeper thread that lives as long as the [`LaunchedBrowser`]: the child
//! gets `PR_SET_PDEATHSIG(SIGKILL)`, which Linux ties to the *thread* that forked it, so the
//! browser dies with our process even when it is killed outright, and never with an unrelated
//! caller thread that happened to launch it. `Drop` (also on panic, and from the binary's Ctrl-C
//! handler) kills the whole process group, reaps the child and removes the profile.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Sender, bounded, unbounded};

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

/// A browser we started; killed (whole process group) and its profile removed on drop.
#[derive(Debug)]
pub struct LaunchedBrowser {
    ws_url: String,
    pid: u32,
    profile: PathBuf,
    /// Dropping it tells the keeper thread to kill and reap the browser.
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
                let _ = stop_rx.recv();
                kill_group(child.id());
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

impl Drop for LaunchedBrowser {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(k) = self.keeper.take() {
            let _ = k.join();
        }
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

fn kill_group(pid: u32) {
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: plain syscalls on a process group we created.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
            libc::kill(pid, libc::SIGKILL);
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
        "cdp-supervisor-profile-{}-{}-{nanos}",
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
