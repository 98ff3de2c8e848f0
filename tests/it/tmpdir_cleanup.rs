//! Issue 20, item 8 (SPEC §15): whatever the length of `$TMPDIR`, a subcommand that launches a
//! browser leaves nothing in it. With a 60-character `$TMPDIR` the profile's own `t/` is too
//! deep for Chromium's singleton socket (107 bytes at most), so Chromium puts
//! `org.chromium.Chromium.XXXXXX/` straight into `$TMPDIR`; these tests check that it is gone
//! after `mcp` ends on end of input and on SIGTERM, after `demo` runs to its end, after `watch`
//! stops on SIGTERM, and after launches that fail (a browser that exits at once, and a fake
//! Chromium that leaves a singleton directory behind before it fails).
//!
//! Each test runs the binary with its own `$TMPDIR` (a fresh directory under /tmp), so they
//! share nothing; [`LongTmp`] kills whatever still uses it and removes it on drop.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::procs::{Lines, alive, clean_config_env};
use crate::common::{chromium_path, e2e_required, wait_until};

/// The length of every `$TMPDIR` here.
const TMPDIR_LEN: usize = 60;

/// SPEC §15: the server ends within 2 s; slack for a loaded 2-core machine on top.
const STOP: Duration = Duration::from_secs(4);

/// A fresh, empty `$TMPDIR` of exactly [`TMPDIR_LEN`] bytes under /tmp. On drop, every process
/// whose command line mentions it is SIGKILLed with its process group, and it is removed.
struct LongTmp(PathBuf);

impl LongTmp {
    fn new(tag: &str) -> LongTmp {
        let base = format!("/tmp/cdps-long-{tag}-{}-", std::process::id());
        assert!(base.len() < TMPDIR_LEN, "{base}");
        let dir = PathBuf::from(format!("{base}{}", "x".repeat(TMPDIR_LEN - base.len())));
        assert_eq!(dir.as_os_str().len(), TMPDIR_LEN);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the $TMPDIR");
        LongTmp(dir)
    }

    fn entries(&self) -> Vec<String> {
        entries(&self.0)
    }

    /// Live processes whose command line mentions this directory (a browser whose profile is
    /// in it, and its helpers).
    fn users(&self) -> Vec<u32> {
        let needle = self.0.to_string_lossy().into_owned();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
                    && alive(*p)
            })
            .collect()
    }

    /// Asserts that no process uses it any more (within [`STOP`]) and that it is empty.
    fn assert_left_clean(&self, what: &str, context: &str) {
        let gone = wait_until(STOP, || self.users().is_empty().then_some(()));
        assert!(
            gone.is_some(),
            "{what}: browser processes left: {:?}",
            self.users()
        );
        let left = self.entries();
        eprintln!("{what}: left in the 60-character $TMPDIR: {left:?}");
        assert!(
            left.is_empty(),
            "{what}: left in $TMPDIR: {left:?}\n{context}"
        );
    }
}

impl Drop for LongTmp {
    fn drop(&mut self) {
        for p in self.users() {
            // SAFETY: kill(2) on processes found using our private directory.
            unsafe {
                libc::kill(-(p as libc::pid_t), libc::SIGKILL);
                libc::kill(p as libc::pid_t, libc::SIGKILL);
            }
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Chromium's path, or `None` (the test skips) when there is none.
fn chromium_or_skip() -> Option<PathBuf> {
    let chrome = chromium_path();
    if chrome.is_none() {
        assert!(
            !e2e_required(),
            "CDP_SUPERVISOR_E2E=require but no Chromium found"
        );
        eprintln!("SKIPPED: no Chromium");
    }
    chrome
}

/// The binary running `args` with `$TMPDIR` set, stdout and stderr drained; killed on drop.
struct Run {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Lines,
    err: Lines,
}

impl Run {
    fn start(args: &[&str], tmp: &LongTmp, env: &[(&str, &Path)]) -> Run {
        let mut cmd = Command::new(crate::common::bin::bin());
        clean_config_env(&mut cmd);
        cmd.args(args)
            .env("TMPDIR", &tmp.0)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn cdp-supervisor");
        let stdin = child.stdin.take();
        let out = Lines::drain(child.stdout.take().expect("stdout"), "tmp-out");
        let err = Lines::drain(child.stderr.take().expect("stderr"), "tmp-err");
        Run {
            child,
            stdin,
            out,
            err,
        }
    }

    fn send(&mut self, v: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{v}").expect("write to the server");
        stdin.flush().expect("flush");
    }

    /// Sends a request and waits for its response.
    fn request(&mut self, id: u64, method: &str, params: Value, timeout: Duration) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.out
            .find(timeout, |l| {
                serde_json::from_str::<Value>(l)
                    .ok()
                    .filter(|v| v["id"] == id)
            })
            .unwrap_or_else(|| panic!("no answer to {method}\n{}", self.context()))
    }

    fn mcp_handshake(&mut self) {
        self.request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "tmpdir test", "version": "0"}}),
            Duration::from_secs(10),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    fn connect(&mut self, id: u64) -> Value {
        let r = self.request(
            id,
            "tools/call",
            json!({"name": "browser_connect", "arguments": {}}),
            Duration::from_secs(40),
        );
        r["result"].clone()
    }

    fn wait_exit(&mut self, bound: Duration, what: &str) -> ExitStatus {
        wait_until(bound, || self.child.try_wait().ok().flatten())
            .unwrap_or_else(|| panic!("{what}: still running after {bound:?}\n{}", self.context()))
    }

    fn context(&self) -> String {
        format!(
            "--- stdout ---\n{}--- stderr ---\n{}",
            self.out.text(),
            self.err.text()
        )
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// True when `tmp` holds Chromium's singleton directory (the situation these tests are about).
fn has_singleton_dir(tmp: &LongTmp) -> bool {
    tmp.entries()
        .iter()
        .any(|e| e.starts_with("org.chromium.Chromium."))
}

enum Stop {
    EndOfInput,
    Sigterm,
}

fn mcp_with_a_long_tmpdir(how: Stop, tag: &str) {
    let Some(chrome) = chromium_or_skip() else {
        return;
    };
    let tmp = LongTmp::new(tag);
    let mut run = Run::start(&["mcp"], &tmp, &[("CHROME", &chrome)]);
    run.mcp_handshake();
    let r = run.connect(1);
    assert_eq!(
        r["isError"],
        false,
        "browser_connect: {r}\n{}",
        run.context()
    );
    // Chromium made its singleton directory in $TMPDIR, beside the profile.
    let there = wait_until(Duration::from_secs(5), || {
        has_singleton_dir(&tmp).then_some(())
    });
    assert!(
        there.is_some(),
        "no singleton directory in $TMPDIR: {:?}",
        tmp.entries()
    );
    eprintln!("{tag}: $TMPDIR while running: {:?}", tmp.entries());
    let t = Instant::now();
    match how {
        Stop::EndOfInput => drop(run.stdin.take()),
        // SAFETY: kill(2) on our own unreaped child.
        Stop::Sigterm => unsafe {
            libc::kill(run.child.id() as libc::pid_t, libc::SIGTERM);
        },
    }
    let status = run.wait_exit(STOP, tag);
    eprintln!("{tag}: exited {status} after {:?}", t.elapsed());
    assert_eq!(status.code(), Some(0), "{tag}\n{}", run.context());
    tmp.assert_left_clean(tag, &run.context());
}

#[test]
fn mcp_end_of_input_with_a_60_character_tmpdir_leaves_it_empty() {
    mcp_with_a_long_tmpdir(Stop::EndOfInput, "eof");
}

#[test]
fn mcp_sigterm_with_a_60_character_tmpdir_leaves_it_empty() {
    mcp_with_a_long_tmpdir(Stop::Sigterm, "term");
}

#[test]
fn watch_stopped_by_sigterm_with_a_60_character_tmpdir_leaves_it_empty() {
    let Some(chrome) = chromium_or_skip() else {
        return;
    };
    let tmp = LongTmp::new("watch");
    let run = Run::start(&["watch"], &tmp, &[("CHROME", &chrome)]);
    let running = run.out.find(Duration::from_secs(30), |l| {
        l.contains("pending_dialogs").then_some(())
    });
    assert!(
        running.is_some(),
        "watch never printed a state\n{}",
        run.context()
    );
    assert!(has_singleton_dir(&tmp), "{:?}", tmp.entries());
    let mut run = run;
    // SAFETY: kill(2) on our own unreaped child.
    unsafe { libc::kill(run.child.id() as libc::pid_t, libc::SIGTERM) };
    let status = run.wait_exit(STOP, "watch");
    assert_eq!(status.code(), Some(0), "watch\n{}", run.context());
    tmp.assert_left_clean("watch on SIGTERM", &run.context());
}

#[test]
fn demo_run_to_its_end_with_a_60_character_tmpdir_leaves_it_empty() {
    let Some(chrome) = chromium_or_skip() else {
        return;
    };
    let tmp = LongTmp::new("demo");
    let mut run = Run::start(&["demo"], &tmp, &[("CHROME", &chrome)]);
    drop(run.stdin.take());
    let status = run.wait_exit(Duration::from_secs(60), "demo");
    assert!(status.success(), "demo: {status}\n{}", run.context());
    assert!(
        run.out.all().iter().any(|l| l.contains("summary")),
        "the demo ran with Chromium\n{}",
        run.context()
    );
    tmp.assert_left_clean("demo", &run.context());
}

/// A stand-in for Chromium that does what Chromium does first (a singleton directory in
/// `$TMPDIR`, linked from the profile, with the same cookie on both sides), then fails.
const FAKE_CHROME: &str = r#"#!/bin/sh
for a in "$@"; do
  case "$a" in --user-data-dir=*) profile="${a#--user-data-dir=}";; esac
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/org.chromium.Chromium.XXXXXX") || exit 2
: > "$dir/SingletonSocket"
ln -s 4242424242 "$dir/SingletonCookie"
ln -s "$dir/SingletonSocket" "$profile/SingletonSocket"
ln -s 4242424242 "$profile/SingletonCookie"
echo "fake chrome: cannot start" >&2
exit 1
"#;

#[test]
fn failed_launches_with_a_60_character_tmpdir_leave_it_empty() {
    // The script lives outside the $TMPDIR under test.
    let bin_dir = LongTmp::new("bin");
    let fake = bin_dir.0.join("fake-chrome");
    std::fs::write(&fake, FAKE_CHROME).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let exits_at_once = Path::new("/bin/false");

    // mcp: browser_connect fails (twice: the fake, then `browser.chrome_path` = /bin/false),
    // then the server ends on end of input.
    let tmp = LongTmp::new("fail-mcp");
    let mut run = Run::start(&["mcp"], &tmp, &[("CHROME", &fake)]);
    run.mcp_handshake();
    let r = run.connect(1);
    assert_eq!(r["isError"], true, "the fake cannot start: {r}");
    eprintln!("mcp, fake chrome: {}", r["content"][0]["text"]);
    drop(run.stdin.take());
    assert_eq!(
        run.wait_exit(STOP, "mcp").code(),
        Some(0),
        "{}",
        run.context()
    );
    tmp.assert_left_clean("mcp with a failing fake Chromium", &run.context());

    let tmp = LongTmp::new("fail-path");
    let mut run = Run::start(
        &["mcp"],
        &tmp,
        &[("CDP_SUPERVISOR__BROWSER__CHROME_PATH", exits_at_once)],
    );
    run.mcp_handshake();
    let r = run.connect(1);
    assert_eq!(r["isError"], true, "/bin/false cannot start: {r}");
    drop(run.stdin.take());
    assert_eq!(
        run.wait_exit(STOP, "mcp").code(),
        Some(0),
        "{}",
        run.context()
    );
    tmp.assert_left_clean("mcp with browser.chrome_path = /bin/false", &run.context());

    // watch and demo: the launch fails, the command exits 1.
    for sub in ["watch", "demo"] {
        let tmp = LongTmp::new(&format!("fail-{sub}"));
        let mut run = Run::start(&[sub], &tmp, &[("CHROME", &fake)]);
        let status = run.wait_exit(Duration::from_secs(20), sub);
        assert_eq!(status.code(), Some(1), "{sub}\n{}", run.context());
        tmp.assert_left_clean(
            &format!("{sub} with a failing fake Chromium"),
            &run.context(),
        );
    }
}
