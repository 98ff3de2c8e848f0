//! The official MCP Python SDK (PyPI `mcp`, pinned in `tests/python/requirements.txt`) drives
//! `cdp-supervisor mcp` through a whole agent session: `tests/python/mcp_sdk_flow.py` (connect,
//! tools/list with schema validation, connect with a launched Chromium, a prompt answered with
//! text, disconnect, clean exit). These tests run that script on the binary Cargo just built, once
//! per way the SDK connects (`--mode`):
//! * `session`: the low-level `ClientSession.initialize()` (the legacy handshake);
//! * `legacy`: `mcp.Client(mode="legacy")`, the handshake through the high-level client (2025-11-25);
//! * `auto`: `mcp.Client(mode="auto")` probes `server/discover` and must adopt 2026-07-28 (it would
//!   fall back to the handshake if the probe failed), then also checks discover, -32022, the removed
//!   `ping`, tools/list cache hints, request-scoped logs and a `subscriptions/listen` stream;
//! * `2026-07-28`: `mcp.Client(mode="2026-07-28")` adopts the version without a probe, same checks.
//!
//! The Python it runs:
//! * `CDP_SUPERVISOR_PYTHON`, when set (it must have the pinned `mcp`; a mismatch fails);
//! * else the venv `mcp-sdk-venv` in the target directory (the one holding the built binary),
//!   created on first use (`python3 -m venv`, then `pip install -r requirements.txt`) under a file
//!   lock, each step with a deadline. The venv counts as ready when its copy of
//!   `requirements.txt` (`mcp-sdk-requirements.txt`, written last) matches the file in the repo, so
//!   bumping the pin rebuilds it. `.ci/run` pre-creates the same venv the same way.
//!
//! No Chromium, no `python3`, no venv support or no PyPI: one `SKIPPED: ...` line on stderr,
//! unless `CDP_SUPERVISOR_E2E=require`, where each of these fails the test.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, mpsc};
use std::thread;
use std::time::Duration;

use crate::common::procs::clean_config_env;
use crate::common::{chromium_path, e2e_required, wait_until};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/mcp_sdk_flow.py");
const REQUIREMENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/requirements.txt");

/// The venv's directory name in the target directory, and its copy of the requirements.
const VENV: &str = "mcp-sdk-venv";
const VENV_STAMP: &str = "mcp-sdk-requirements.txt";

/// Deadlines: `python3 -m venv`, `pip install`, waiting for another process's install, the flow.
const VENV_TIMEOUT: Duration = Duration::from_secs(120);
const PIP_TIMEOUT: Duration = Duration::from_secs(300);
const LOCK_TIMEOUT: Duration = Duration::from_secs(480);
const FLOW_TIMEOUT: Duration = Duration::from_secs(180);

/// Skips loudly (on the raw stderr handle: libtest captures `eprintln!` of passing tests), or
/// fails under `CDP_SUPERVISOR_E2E=require`.
pub(crate) fn skip(why: &str) {
    if e2e_required() {
        panic!("CDP_SUPERVISOR_E2E=require, but {why}");
    }
    let _ = writeln!(io::stderr(), "SKIPPED: {why}");
}

#[test]
fn official_python_sdk_drives_a_whole_session() {
    sdk_flow("session");
}

#[test]
fn official_python_sdk_client_legacy_mode_uses_the_handshake() {
    sdk_flow("legacy");
}

#[test]
fn official_python_sdk_client_auto_mode_negotiates_2026_07_28() {
    sdk_flow("auto");
}

#[test]
fn official_python_sdk_client_pinned_2026_07_28_runs_statelessly() {
    sdk_flow("2026-07-28");
}

/// Runs the flow script in `mode`; it must print a `PASS: ` line and exit 0.
fn sdk_flow(mode: &str) {
    if chromium_path().is_none() {
        skip("no Chromium (the MCP Python SDK test needs the browser the server launches)");
        return;
    }
    let python = match sdk_python() {
        Ok(p) => p,
        Err(why) => {
            skip(&format!("MCP Python SDK test: {why}"));
            return;
        }
    };
    let mut cmd = Command::new(&python);
    cmd.arg(SCRIPT)
        .arg(crate::common::bin::bin())
        .args(["--mode", mode]);
    clean_config_env(&mut cmd);
    cmd.env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let out = run_bounded(cmd, FLOW_TIMEOUT)
        .unwrap_or_else(|e| panic!("{} {SCRIPT} --mode {mode}: {e}", python.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.lines().any(|l| l.starts_with("PASS: ")),
        "{} {SCRIPT} {bin} --mode {mode} failed ({}):\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        python.display(),
        out.status,
        bin = crate::common::bin::bin(),
    );
    // The PASS line says which outcome the prompt had; show it even though the test passed.
    if let Some(pass) = stdout.lines().find(|l| l.starts_with("PASS: ")) {
        let _ = writeln!(io::stderr(), "{pass}");
    }
}

/// The Python to run the script with (see the module docs), or why there is none.
pub(crate) fn sdk_python() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("CDP_SUPERVISOR_PYTHON").filter(|p| !p.is_empty()) {
        // Explicitly configured: whether it has the pinned SDK is checked by the script itself,
        // which then fails with a SETUP line (a misconfiguration is no reason to skip).
        return Ok(PathBuf::from(p));
    }
    // One install per test process; other processes wait on the file lock.
    static ONCE: Mutex<()> = Mutex::new(());
    let _guard = ONCE.lock().unwrap_or_else(|e| e.into_inner());
    let target = target_dir();
    let venv = target.join(VENV);
    let python = venv.join("bin/python");
    let wanted =
        fs::read_to_string(REQUIREMENTS).map_err(|e| format!("read {REQUIREMENTS}: {e}"))?;
    let ready =
        || python.is_file() && fs::read_to_string(venv.join(VENV_STAMP)).is_ok_and(|s| s == wanted);
    if ready() {
        return Ok(python);
    }
    let _lock = FileLock::acquire(&target.join(format!("{VENV}.lock")), LOCK_TIMEOUT)?;
    if ready() {
        return Ok(python); // another process installed it while we waited
    }
    let _ = fs::remove_dir_all(&venv);
    let _ = writeln!(
        io::stderr(),
        "mcp_python_sdk: creating {} with {} (once)",
        venv.display(),
        wanted
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut cmd = Command::new("python3");
    cmd.args(["-m", "venv"]).arg(&venv);
    check(
        cmd,
        VENV_TIMEOUT,
        "python3 -m venv",
        "no python3 with venv support (Debian: apt-get install python3-venv)",
    )?;
    let mut cmd = Command::new(&python);
    cmd.args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        "-q",
        "-r",
    ])
    .arg(REQUIREMENTS);
    check(
        cmd,
        PIP_TIMEOUT,
        "pip install -r tests/python/requirements.txt",
        "PyPI unreachable?",
    )?;
    fs::write(venv.join(VENV_STAMP), &wanted).map_err(|e| format!("write the venv stamp: {e}"))?;
    Ok(python)
}

/// Runs a setup step; `Err` names it, the hint and the tail of its output.
fn check(cmd: Command, timeout: Duration, what: &str, hint: &str) -> Result<(), String> {
    let out = run_bounded(cmd, timeout).map_err(|e| format!("{what}: {e} ({hint})"))?;
    if out.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let tail: Vec<&str> = text.lines().rev().take(8).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(format!(
        "{what} failed ({}; {hint}): {}",
        out.status,
        tail.join(" | ")
    ))
}

/// The target directory (`<target>`, where the binary is `<target>/<profile>/cdp-supervisor`).
pub(crate) fn target_dir() -> PathBuf {
    // From the test binary's own place, not the CLI's: that would build the CLI (20 s and more,
    // when cargo is busy elsewhere) for tests that only look for what .ci/run installed here.
    let profile = crate::common::bin::profile_dir();
    profile.parent().expect("<target>/<profile>").to_path_buf()
}

/// Runs `cmd` (stdin closed, output captured) in its own process group; on `timeout` the group
/// is SIGKILLed and this fails.
pub(crate) fn run_bounded(mut cmd: Command, timeout: Duration) -> Result<Output, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd.spawn().map_err(|e| format!("cannot run it: {e}"))?;
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(out) => out.map_err(|e| format!("waiting for it: {e}")),
        Err(_) => {
            // SAFETY: kill has no memory preconditions; the child is not reaped yet (its
            // waiting thread has not returned), so the group id is still ours.
            unsafe { libc::killpg(pid, libc::SIGKILL) };
            let out = rx
                .recv_timeout(Duration::from_secs(10))
                .ok()
                .and_then(Result::ok);
            Err(format!(
                "still running after {timeout:?}, killed; output so far: {}{}",
                out.as_ref()
                    .map_or(String::new(), |o| String::from_utf8_lossy(&o.stdout)
                        .into_owned()),
                out.as_ref()
                    .map_or(String::new(), |o| String::from_utf8_lossy(&o.stderr)
                        .into_owned())
            ))
        }
    }
}

/// An exclusive `flock` on a file, released on drop (and by the kernel if the process dies).
struct FileLock(File);

impl FileLock {
    fn acquire(path: &Path, timeout: Duration) -> Result<FileLock, String> {
        let file = File::create(path).map_err(|e| format!("create {}: {e}", path.display()))?;
        let fd = file.as_raw_fd();
        // SAFETY: flock on a descriptor this function owns.
        let locked = wait_until(timeout, || {
            (unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0).then_some(())
        });
        match locked {
            Some(()) => Ok(FileLock(file)),
            None => Err(format!("{} stayed locked for {timeout:?}", path.display())),
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        // SAFETY: unlocking a descriptor this value owns.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}
