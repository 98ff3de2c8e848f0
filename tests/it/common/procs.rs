//! Helpers for tests that run the `cdp-supervisor` binary (`tests/it/cli.rs`,
//! `tests/it/mcp_stdio.rs`): its output streams, and `/proc` checks of the processes and profile
//! directories it leaves behind; [`connections_to`] counts this process's connections to a
//! port and [`connections_of`] another process's (`tests/it/e2e_watcher.rs`,
//! `tests/it/e2e_browserless.rs`).

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// One output stream of a child process, read by a thread of its own: the lines as they come
/// (`rx`), every line so far, and the end of the stream.
pub struct Lines {
    /// Each line, without its line ending, as it is read.
    pub rx: Receiver<String>,
    all: Arc<Mutex<Vec<String>>>,
    /// Disconnects when the reading thread reached the end of the stream.
    ended: Receiver<()>,
}

impl Lines {
    /// Starts the thread (`name` names it) that reads `r` to its end.
    pub fn drain(r: impl Read + Send + 'static, name: &str) -> Lines {
        let (tx, rx) = mpsc::channel();
        let (ended_tx, ended) = mpsc::channel::<()>();
        let all = Arc::new(Mutex::new(Vec::new()));
        let all2 = Arc::clone(&all);
        thread::Builder::new()
            .name(format!("drain-{name}"))
            .spawn(move || {
                let _ended = ended_tx;
                let mut r = BufReader::new(r);
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    match r.read_until(b'\n', &mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    let line = String::from_utf8_lossy(&buf)
                        .trim_end_matches(['\n', '\r'])
                        .to_string();
                    all2.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(line.clone());
                    let _ = tx.send(line);
                }
            })
            .expect("spawn a drain thread");
        Lines { rx, all, ended }
    }

    /// Every line read so far.
    pub fn all(&self) -> Vec<String> {
        self.all.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Every line read so far, each ended by `\n`.
    pub fn text(&self) -> String {
        self.all().iter().map(|l| format!("{l}\n")).collect()
    }

    /// The first line (from now) for which `f` returns `Some`, within `timeout`.
    pub fn find<T>(&self, timeout: Duration, mut f: impl FnMut(&str) -> Option<T>) -> Option<T> {
        let deadline = Instant::now()
            .checked_add(timeout)
            .expect("a deadline within range");
        loop {
            let line = self
                .rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .ok()?;
            if let Some(v) = f(&line) {
                return Some(v);
            }
        }
    }

    /// Waits up to `timeout` for the end of the stream; true when it came.
    pub fn wait_end(&self, timeout: Duration) -> bool {
        matches!(
            self.ended.recv_timeout(timeout),
            Err(mpsc::RecvTimeoutError::Disconnected)
        )
    }
}

/// A numeric field of `/proc/self/status` (e.g. `Threads`, `VmRSS` in KiB).
pub fn self_status(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| {
        l.strip_prefix(key)
            .is_some_and(|rest| rest.starts_with(':'))
    })?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Removes every variable that configures `cdp-supervisor` (`CDP_SUPERVISOR__*`,
/// `CDP_SUPERVISOR_CONFIG`) and `RUST_LOG` from `cmd`'s environment, so the test's own
/// environment cannot change what the binary does.
pub fn clean_config_env(cmd: &mut Command) {
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(|k| {
            k.starts_with("CDP_SUPERVISOR__") || k == "CDP_SUPERVISOR_CONFIG" || k == "RUST_LOG"
        }) {
            cmd.env_remove(k);
        }
    }
}

/// The process state letter of `pid` (`R`, `S`, `Z`, ...), `None` when it does not exist.
pub fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ..." - comm may contain spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.trim_start().chars().next()
}

/// Alive = exists and is not a zombie (`Z`) or dead (`X`).
pub fn alive(pid: u32) -> bool {
    proc_state(pid).is_some_and(|s| s != 'Z' && s != 'X')
}

/// The process group of `pid`, `None` when it does not exist.
pub fn pgid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after comm: state ppid pgrp ...
    let f: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    f.get(2)?.parse().ok()
}

/// Live (non-zombie) processes whose process group is `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let Some(close) = stat.rfind(')') else {
                return false;
            };
            let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
            // Fields after comm: state ppid pgrp ...
            f.len() > 2 && f[0] != "Z" && f[0] != "X" && f[2] == pgid.to_string()
        })
        .collect()
}

/// The profile-directory prefix a `cdp-supervisor` process with pid `pid` uses.
pub fn profile_prefix(pid: u32) -> String {
    format!("cdp-supervisor-profile-{pid}-")
}

/// Profile directories (under the temp dir) created by the process `pid`.
pub fn profiles_of(pid: u32) -> Vec<PathBuf> {
    let prefix = profile_prefix(pid);
    std::fs::read_dir(std::env::temp_dir())
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.starts_with(&prefix))
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Pids of live browser *leaders* launched by process `pid`: processes whose command line has
/// `--user-data-dir=<tmp>/cdp-supervisor-profile-<pid>-...`, that are [`alive`] and that lead
/// their process group.
pub fn browsers_of(pid: u32) -> Vec<u32> {
    let needle = format!(
        "--user-data-dir={}",
        std::env::temp_dir().join(profile_prefix(pid)).display()
    );
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| {
                    c.split(|b| *b == 0)
                        .any(|a| a.starts_with(needle.as_bytes()))
                })
                .unwrap_or(false)
                && alive(*p)
                && pgid(*p) == Some(*p)
        })
        .collect()
}

/// SIGKILLs every live browser leader launched by process `pid` (see [`browsers_of`]) and its
/// process group.
pub fn kill_browsers_of(pid: u32) {
    for b in browsers_of(pid) {
        // SAFETY: kill(2) on a process group whose identity was just checked.
        unsafe {
            libc::kill(-(b as libc::pid_t), libc::SIGKILL);
            libc::kill(b as libc::pid_t, libc::SIGKILL);
        }
    }
}

/// Parses `launched <path> (pid N)` from a log line.
pub fn launched_pid(line: &str) -> Option<u32> {
    let rest = &line[line.find("launched ")?..];
    let j = rest.find("(pid ")? + "(pid ".len();
    let digits: String = rest[j..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// This process's established TCP connections to `port` on loopback ([`connections_of`]).
pub fn connections_to(port: u16) -> usize {
    connections_of("self", port)
}

/// The established TCP connections of process `pid` (`"self"`, or a pid) to `port` on
/// loopback: its sockets, found by inode in `/proc/<pid>/fd`, matched against
/// `/proc/<pid>/net/tcp` and `tcp6`.
pub fn connections_of(pid: &str, port: u16) -> usize {
    let ours: std::collections::HashSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    let inode = l.strip_prefix("socket:[")?.strip_suffix(']')?;
                    Some(inode.to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    let mut n = 0;
    for table in ["tcp", "tcp6"] {
        for line in std::fs::read_to_string(format!("/proc/{pid}/net/{table}"))
            .unwrap_or_default()
            .lines()
            .skip(1)
        {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
            let (Some(rem), Some(st), Some(inode)) = (f.get(2), f.get(3), f.get(9)) else {
                continue;
            };
            let rem_port = rem
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if rem_port == Some(port) && *st == "01" && ours.contains(*inode) {
                n += 1;
            }
        }
    }
    n
}
