//! The `cdp-supervisor` binary as a subprocess (SPEC §9, §15): `demo` against real Chromium and
//! against the built-in fake browser, a bad `CHROME`, `watch` against a given endpoint and with a
//! browser of its own (clean stop on SIGINT: browser gone, profile removed), and `check`.
//!
//! Every child runs under a [`Proc`] guard that SIGKILLs and reaps it on drop (also when the test
//! panics); stdout and stderr are drained by threads into channels so every read has a deadline.
//! Tests needing Chromium skip (`SKIPPED: no Chromium`) when none is installed, unless
//! `CDP_SUPERVISOR_E2E=require`.

use crate::common;

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::common::procs::{
    Lines, alive, browsers_of, clean_config_env, group_members, kill_browsers_of, launched_pid,
    profiles_of,
};
use crate::common::{Browser, RawCdp, wait_until};
use serde_json::{Value, json};

/// Deadline for a process to stop after SIGINT or the end of its input.
const STOP: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------
// Process harness
// ---------------------------------------------------------------------------

/// A `Command` for the binary with a clean configuration environment.
fn bin(args: &[&str]) -> Command {
    let mut cmd = Command::new(crate::common::bin::bin());
    cmd.args(args);
    clean_config_env(&mut cmd);
    cmd
}

/// A running child: SIGKILLed and reaped on drop. A Chromium it launched (identified by its
/// profile directory, which carries the child's pid) is killed on drop too.
struct Proc {
    child: Child,
    out: Lines,
    err: Lines,
    status: Option<ExitStatus>,
}

impl Proc {
    fn spawn(mut cmd: Command) -> Proc {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn cdp-supervisor");
        let out = Lines::drain(child.stdout.take().unwrap(), "stdout");
        let err = Lines::drain(child.stderr.take().unwrap(), "stderr");
        Proc {
            child,
            out,
            err,
            status: None,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the exit within `timeout`.
    fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = wait_until(timeout, || self.child.try_wait().ok().flatten());
        }
        self.status
    }

    /// Waits for the exit, panicking with the output when it does not come in time.
    fn expect_exit(&mut self, timeout: Duration, what: &str) -> ExitStatus {
        let t = Instant::now();
        match self.wait(timeout) {
            Some(s) => s,
            None => panic!(
                "{what}: still running after {:?}\n{}",
                t.elapsed(),
                self.dump()
            ),
        }
    }

    fn sigint(&self) {
        // SAFETY: kill(2) on our own unreaped child.
        let rc = unsafe { libc::kill(self.pid() as libc::pid_t, libc::SIGINT) };
        assert_eq!(rc, 0, "kill(SIGINT) failed");
    }

    /// Both outputs as read so far, for failure messages.
    fn dump(&self) -> String {
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            self.out.text(),
            self.err.text()
        )
    }

    /// Final stdout and stderr after the process exited: waits (at most 5 s) for both pipes to
    /// reach their end, then returns what was read.
    fn outputs(&self) -> (String, String) {
        let deadline = Instant::now()
            .checked_add(Duration::from_secs(5))
            .expect("a deadline within range");
        self.out
            .wait_end(deadline.saturating_duration_since(Instant::now()));
        self.err
            .wait_end(deadline.saturating_duration_since(Instant::now()));
        (self.out.text(), self.err.text())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let pid = self.pid();
        if self.status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // Belt and braces: a Chromium launched by it dies through PR_SET_PDEATHSIG; kill any
        // that did not (identified by the profile directory naming our child's pid).
        kill_browsers_of(pid);
    }
}

/// Runs the binary to completion within `timeout`; returns (status, stdout, stderr).
fn run(cmd: Command, timeout: Duration, what: &str) -> (ExitStatus, String, String) {
    let mut p = Proc::spawn(cmd);
    let status = p.expect_exit(timeout, what);
    let (out, err) = p.outputs();
    (status, out, err)
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// The Chromium path for a test, or `None` (after the harness's skip rule).
fn chromium_or_skip() -> Option<PathBuf> {
    match common::chromium_path() {
        Some(p) => Some(p),
        None => {
            assert!(
                !common::e2e_required(),
                "CDP_SUPERVISOR_E2E=require but no Chromium found (set CHROME or install chromium)"
            );
            eprintln!("SKIPPED: no Chromium");
            None
        }
    }
}

fn no_panic(stderr: &str, what: &str) {
    assert!(
        !stderr.contains("panicked"),
        "{what}: the binary panicked:\n{stderr}"
    );
}

// ---------------------------------------------------------------------------
// demo
// ---------------------------------------------------------------------------

#[test]
fn demo_with_chromium_narrates_and_cleans_up() {
    let Some(chrome) = chromium_or_skip() else {
        return;
    };
    let mut cmd = bin(&["demo"]);
    cmd.env("CHROME", &chrome).env("RUST_LOG", "info");
    let mut p = Proc::spawn(cmd);
    let status = p.expect_exit(Duration::from_secs(60), "demo");
    let (out, err) = p.outputs();
    let ctx = format!("--- stdout ---\n{out}\n--- stderr ---\n{err}");
    assert!(status.success(), "demo exits 0, got {status}\n{ctx}");
    no_panic(&err, "demo");
    for needle in ["detected", "closed_by=agent", "OOPIF", "summary"] {
        assert!(out.contains(needle), "stdout mentions {needle:?}\n{ctx}");
    }
    assert!(
        out.lines()
            .any(|l| l.contains("got") && l.contains("\"Ada Lovelace ✓\"")),
        "the page reports the prompt answer \"Ada Lovelace ✓\"\n{ctx}"
    );
    assert!(
        !out.contains("fake CDP browser"),
        "with Chromium available the demo does not fall back to the fake browser\n{ctx}"
    );
    // The browser it launched is gone and its profile removed.
    let pid = err.lines().find_map(launched_pid);
    let pid =
        pid.unwrap_or_else(|| panic!("no `launched ... (pid N)` line at RUST_LOG=info\n{ctx}"));
    assert!(
        wait_until(STOP, || (!alive(pid)).then_some(())).is_some(),
        "the demo's Chromium (pid {pid}) is still running after the demo exited"
    );
    let left = profiles_of(p.pid());
    assert!(left.is_empty(), "profile directories left behind: {left:?}");
}

#[test]
fn demo_without_chromium_runs_against_the_fake_browser() {
    let empty = TempDir::new("empty-path");
    let mut cmd = bin(&["demo"]);
    cmd.env_remove("CHROME").env("PATH", &empty.0);
    let (status, out, err) = run(cmd, Duration::from_secs(30), "demo (no Chromium)");
    let ctx = format!("--- stdout ---\n{out}\n--- stderr ---\n{err}");
    assert!(status.success(), "exits 0, got {status}\n{ctx}");
    no_panic(&err, "demo (no Chromium)");
    let all = format!("{out}\n{err}").to_lowercase();
    assert!(
        all.contains("fake"),
        "says it runs against the fake browser\n{ctx}"
    );
    assert!(
        all.contains("install"),
        "says how to install a browser\n{ctx}"
    );
    assert!(out.contains("detected"), "dialogs detected\n{ctx}");
    assert!(out.contains("answered"), "dialogs answered\n{ctx}");
    assert!(
        out.contains("closed_by=agent"),
        "dialogs closed by the agent\n{ctx}"
    );
    assert!(
        out.contains("\"Ada Lovelace ✓\""),
        "the prompt answer is shown\n{ctx}"
    );
}

#[test]
fn demo_with_a_bad_chrome_path_fails_clearly() {
    let mut cmd = bin(&["demo"]);
    cmd.env("CHROME", "/no/such/chrome");
    let (status, out, err) = run(cmd, Duration::from_secs(20), "demo (bad CHROME)");
    let ctx = format!("--- stdout ---\n{out}\n--- stderr ---\n{err}");
    assert!(!status.success(), "exits non-zero\n{ctx}");
    assert!(
        status.code().is_some(),
        "exits (not killed by a signal): {status}\n{ctx}"
    );
    assert!(
        err.contains("/no/such/chrome"),
        "the error on stderr names the path\n{ctx}"
    );
    no_panic(&err, "demo (bad CHROME)");
}

// ---------------------------------------------------------------------------
// watch
// ---------------------------------------------------------------------------

/// The single page target of a fresh browser, with a raw session on it.
fn first_page(cdp: &mut RawCdp) -> (String, String) {
    let targets = cdp
        .call(
            "Target.getTargets",
            json!({}),
            None,
            common::DEFAULT_TIMEOUT,
        )
        .expect("Target.getTargets");
    let page = targets["targetInfos"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["type"] == "page"))
        .and_then(|t| t["targetId"].as_str())
        .expect("the fresh browser has a page")
        .to_string();
    let sid = cdp.attach(&page).expect("attach to the page");
    (page, sid)
}

#[test]
fn watch_given_url_prints_state_lines_and_stops_on_sigint() {
    if chromium_or_skip().is_none() {
        return;
    }
    // A browser of its own: watch attaches to the first page, and this test raises a dialog there.
    let browser = Browser::launch().expect("launch Chromium");
    let mut cmd = bin(&["watch", "--cdp-url", &browser.ws_url]);
    cmd.env("RUST_LOG", "info");
    let mut p = Proc::spawn(cmd);

    let first = p.out.find(Duration::from_secs(15), |l| {
        let v: Value = serde_json::from_str(l).ok()?;
        v.get("pending_dialogs")?.as_array()?;
        Some(v)
    });
    let first = first.unwrap_or_else(|| panic!("no JSON state line within 15 s\n{}", p.dump()));
    assert_eq!(
        first["pending_dialogs"],
        json!([]),
        "nothing pending at first"
    );

    // A state change (a dialog opening on the watched page) prints a new line.
    let mut cdp = RawCdp::connect(&browser.ws_url).expect("raw CDP client");
    let (page, sid) = first_page(&mut cdp);
    assert_eq!(
        first["page_target_id"].as_str(),
        Some(page.as_str()),
        "watch attached to the browser's page"
    );
    cdp.evaluate(
        &sid,
        "setTimeout(() => alert('watch me'), 0); 1",
        common::DEFAULT_TIMEOUT,
    )
    .expect("schedule an alert");
    let seen = p.out.find(Duration::from_secs(10), |l| {
        let v: Value = serde_json::from_str(l).ok()?;
        let d = v.get("pending_dialogs")?.as_array()?.first()?.clone();
        (d["message"] == "watch me").then_some(d)
    });
    let d = seen.unwrap_or_else(|| panic!("the pending alert never showed up\n{}", p.dump()));
    assert_eq!(d["type"], "alert");

    p.sigint();
    let status = p.expect_exit(STOP, "watch after SIGINT");
    let (out, err) = p.outputs();
    assert_eq!(
        status.code(),
        Some(0),
        "watch exits 0 on SIGINT: {status}\n{}",
        p.dump()
    );
    no_panic(&err, "watch");
    for l in out.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            serde_json::from_str::<Value>(l).is_ok(),
            "stdout carries JSON lines only; got {l:?}"
        );
    }
    // The browser was given, not launched: it is still there.
    assert!(
        alive(browser.pid),
        "watch must not kill a browser it did not launch"
    );
}

#[test]
fn watch_launching_its_own_browser_cleans_up_on_sigint() {
    let Some(chrome) = chromium_or_skip() else {
        return;
    };
    let mut cmd = bin(&["watch"]);
    cmd.env("CHROME", &chrome).env("RUST_LOG", "info");
    let mut p = Proc::spawn(cmd);

    let chromium = p
        .err
        .find(Duration::from_secs(20), launched_pid)
        .unwrap_or_else(|| panic!("no `launched ... (pid N)` line within 20 s\n{}", p.dump()));
    let line = p.out.find(Duration::from_secs(15), |l| {
        serde_json::from_str::<Value>(l)
            .ok()
            .filter(|v| v.get("pending_dialogs").is_some())
    });
    assert!(
        line.is_some(),
        "no JSON state line within 15 s\n{}",
        p.dump()
    );
    assert!(
        alive(chromium),
        "the launched Chromium (pid {chromium}) runs"
    );
    assert_eq!(
        browsers_of(p.pid()),
        vec![chromium],
        "the logged pid is the browser using the binary's profile directory"
    );
    let profiles = profiles_of(p.pid());
    assert_eq!(profiles.len(), 1, "one temporary profile: {profiles:?}");

    p.sigint();
    let status = p.expect_exit(STOP, "watch after SIGINT");
    let (_, err) = p.outputs();
    no_panic(&err, "watch");
    assert!(
        wait_until(STOP, || (!alive(chromium)).then_some(())).is_some(),
        "Chromium (pid {chromium}) still running {STOP:?} after watch exited"
    );
    assert!(
        wait_until(STOP, || group_members(chromium).is_empty().then_some(())).is_some(),
        "Chromium's process group still has members: {:?}",
        group_members(chromium)
    );
    assert!(
        wait_until(STOP, || (!profiles[0].exists()).then_some(())).is_some(),
        "the profile {} was not removed",
        profiles[0].display()
    );
    // Checked last so that a wrong exit code does not hide a leaked browser.
    assert_eq!(
        status.code(),
        Some(0),
        "watch exits 0 on SIGINT: {status}\n{}",
        p.dump()
    );
}

// ---------------------------------------------------------------------------
// check
// ---------------------------------------------------------------------------

#[test]
fn check_a_running_browser_by_ws_and_http() {
    let Some(browser) = common::shared_browser() else {
        return;
    };
    for url in [browser.ws_url.clone(), browser.http_endpoint()] {
        let (status, out, err) = run(bin(&["check", &url]), Duration::from_secs(15), "check");
        assert_eq!(
            status.code(),
            Some(0),
            "check {url} exits 0\n--- stdout ---\n{out}\n--- stderr ---\n{err}"
        );
        no_panic(&err, "check");
    }
}

#[test]
fn check_nothing_listening_exits_1_quickly() {
    let t = Instant::now();
    let (status, out, err) = run(
        bin(&["check", "ws://127.0.0.1:1"]),
        Duration::from_secs(6),
        "check",
    );
    let took = t.elapsed();
    assert_eq!(
        status.code(),
        Some(1),
        "check of a closed port exits 1\n--- stdout ---\n{out}\n--- stderr ---\n{err}"
    );
    assert!(took < Duration::from_secs(6), "took {took:?}");
    assert!(
        err.contains("127.0.0.1:1"),
        "the message names the endpoint: {err:?}"
    );
    no_panic(&err, "check");
}

#[test]
fn check_rejects_a_non_cdp_scheme() {
    let (status, _out, err) = run(
        bin(&["check", "ftp://127.0.0.1:1/"]),
        Duration::from_secs(6),
        "check",
    );
    assert_eq!(status.code(), Some(1), "check ftp:// exits 1: {err}");
    assert!(!err.trim().is_empty(), "says why");
    no_panic(&err, "check");
}

/// Issue 35: a configuration value nested in lists by mistake, 30 and 10,000 deep, is refused
/// with a short message and exit code 2 (it was 134 MB of stderr at depth 26, and an abort at
/// depth 30); a string of 1 MB is shown clipped.
#[test]
fn check_refuses_a_deeply_nested_config_value_in_a_short_message() {
    let dir = TempDir::new("nested-config");
    let nested = |depth: usize| {
        format!(
            "[security]\ncdp_deny = {}\"x\"{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        )
    };
    let huge = format!("[browser]\ndialog_policy = \"{}\"\n", "x".repeat(1_000_000));
    for (name, toml, says) in [
        ("depth-30", nested(30), "security.cdp_deny[0] is a list"),
        ("depth-10000", nested(10_000), "cannot read configuration"),
        ("huge", huge, "1000000 bytes"),
    ] {
        let path = dir.0.join(format!("{name}.toml"));
        std::fs::write(&path, toml).expect("write the config file");
        let (status, out, err) = run(
            bin(&[
                "--config",
                path.to_str().unwrap(),
                "check",
                "http://127.0.0.1:9",
            ]),
            Duration::from_secs(10),
            "check with a nested config value",
        );
        assert_eq!(status.code(), Some(2), "{name}: {status:?}\n{err}");
        assert!(
            err.len() < 1024,
            "{name}: {} bytes of stderr: {err}",
            err.len()
        );
        assert!(err.contains(says), "{name}: {err}");
        assert!(out.is_empty(), "{name}: {out}");
        no_panic(&err, name);
    }
}

#[test]
fn check_never_prints_credentials() {
    let url = "ws://user:pw@127.0.0.1:1/?token=S3CR3T";
    for log in [None, Some("trace")] {
        let mut cmd = bin(&["check", url]);
        if let Some(l) = log {
            cmd.env("RUST_LOG", l);
        }
        let (status, out, err) = run(cmd, Duration::from_secs(6), "check");
        let both = format!("{out}\n{err}");
        assert_eq!(status.code(), Some(1), "exits 1\n{both}");
        assert!(!err.trim().is_empty(), "says why");
        assert!(
            !both.contains("S3CR3T"),
            "RUST_LOG={log:?}: the token leaked:\n{both}"
        );
        assert!(
            !both.contains("pw"),
            "RUST_LOG={log:?}: the password leaked:\n{both}"
        );
    }
}

// ---------------------------------------------------------------------------
// Clean shutdown of every browser-launching subcommand (issue 12, finding 12)
// ---------------------------------------------------------------------------

/// A fresh, short `$TMPDIR` for one child (Chromium's socket path must stay under 107 bytes).
/// On drop, every process whose command line mentions it is SIGKILLed with its process group,
/// and the directory is removed.
struct ChildTmp(PathBuf);

impl ChildTmp {
    fn new(tag: &str) -> ChildTmp {
        let dir = PathBuf::from(format!("/tmp/c{tag}{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        ChildTmp(dir)
    }

    /// Live processes whose command line mentions this directory (a Chromium using a profile
    /// in it).
    fn users(&self) -> Vec<u32> {
        let needle = self.0.to_string_lossy().to_string();
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

    fn entries(&self) -> Vec<String> {
        std::fs::read_dir(&self.0)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for ChildTmp {
    fn drop(&mut self) {
        for p in self.users() {
            // SAFETY: kill(2) on processes just found using our private directory.
            unsafe {
                libc::kill(-(p as libc::pid_t), libc::SIGKILL);
                libc::kill(p as libc::pid_t, libc::SIGKILL);
            }
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// When the signal is sent.
#[derive(Debug, Clone, Copy)]
enum Moment {
    /// While the browser starts (its profile exists, its DevTools URL is not printed yet).
    Launching,
    /// Once the subcommand runs (watch printed its first state, demo attached).
    Running,
}

fn signal_name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "SIGINT",
    }
}

/// Runs `cdp-supervisor <sub>` with a fresh `$TMPDIR`, sends `sig` at `moment`, and checks that
/// it exits 0 within [`STOP`] leaving no Chromium and nothing in `$TMPDIR`.
fn stops_cleanly(sub: &str, sig: libc::c_int, moment: Moment, chrome: &std::path::Path) {
    let what = format!("{sub} on {} while {moment:?}", signal_name(sig));
    let tmp = ChildTmp::new(&format!("{}{sig}", &sub[..1]));
    let mut cmd = bin(&[sub]);
    cmd.env("CHROME", chrome)
        .env("TMPDIR", &tmp.0)
        .env("RUST_LOG", "info");
    let mut p = Proc::spawn(cmd);
    let ready = match moment {
        Moment::Launching => wait_until(Duration::from_secs(15), || {
            tmp.entries()
                .iter()
                .any(|e| e.starts_with("cdp-supervisor-profile-"))
                .then_some(())
        })
        .is_some(),
        Moment::Running => {
            let marker = if sub == "watch" {
                "pending_dialogs"
            } else {
                "supervisor attached"
            };
            p.out
                .find(Duration::from_secs(20), |l| {
                    l.contains(marker).then_some(())
                })
                .is_some()
        }
    };
    assert!(
        ready,
        "{what}: never got there
{}",
        p.dump()
    );
    let t = Instant::now();
    // SAFETY: kill(2) on our own unreaped child.
    assert_eq!(unsafe { libc::kill(p.pid() as libc::pid_t, sig) }, 0);
    let status = p.expect_exit(STOP, &what);
    let took = t.elapsed();
    let (_, err) = p.outputs();
    no_panic(&err, &what);
    let browsers_gone = wait_until(STOP, || tmp.users().is_empty().then_some(())).is_some();
    let leftovers = tmp.entries();
    eprintln!("{what}: exited {status} after {took:?}; left in $TMPDIR: {leftovers:?}");
    assert!(
        browsers_gone,
        "{what}: Chromium still running: {:?}",
        tmp.users()
    );
    assert!(
        leftovers.is_empty(),
        "{what}: left in $TMPDIR: {leftovers:?}\n{}",
        p.dump()
    );
    assert_eq!(status.code(), Some(0), "{what}: exit code\n{}", p.dump());
}

#[test]
fn watch_and_demo_stop_cleanly_on_sigterm_sighup_and_sigint() {
    let Some(chrome) = chromium_or_skip() else {
        return;
    };
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
        stops_cleanly("watch", sig, Moment::Launching, &chrome);
        stops_cleanly("watch", sig, Moment::Running, &chrome);
        stops_cleanly("demo", sig, Moment::Launching, &chrome);
        stops_cleanly("demo", sig, Moment::Running, &chrome);
    }
}

/// This process's start time (field 22 of /proc/self/stat).
fn own_start_time() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let rest = &stat[stat.rfind(')').expect("comm") + 1..];
    rest.split_whitespace()
        .nth(19)
        .and_then(|s| s.parse().ok())
        .expect("start time")
}

#[test]
fn stale_profiles_of_dead_owners_are_removed_at_start_and_live_ones_kept() {
    let tmp = ChildTmp::new("st");
    // A pid that is certainly gone: a child we ran and reaped.
    let mut gone = Command::new("true").spawn().expect("spawn true");
    let dead = gone.id();
    gone.wait().expect("reap true");
    let me = std::process::id();
    let start = own_start_time();
    let dirs = [
        (format!("cdp-supervisor-profile-{dead}-s{start:x}-1"), false),
        // Our pid, but another start time: the pid was reused, the owner is gone.
        (
            format!("cdp-supervisor-profile-{me}-s{:x}-2", start + 1),
            false,
        ),
        // Names from before start times were recorded: judged by the pid alone.
        (format!("cdp-supervisor-profile-{dead}-0-3"), false),
        (format!("cdp-supervisor-profile-{me}-0-4"), true),
        // A live owner (this test process).
        (format!("cdp-supervisor-profile-{me}-s{start:x}-5"), true),
        ("not-ours".to_string(), true),
    ];
    for (d, _) in &dirs {
        std::fs::create_dir_all(tmp.0.join(d).join("Default")).expect("create a profile");
    }
    // `watch` cleans up at start-up even when it is given an endpoint (here one that is down).
    let mut cmd = bin(&["watch", "--cdp-url", "ws://127.0.0.1:1/"]);
    cmd.env("TMPDIR", &tmp.0);
    let (status, _out, err) = run(cmd, Duration::from_secs(15), "watch");
    assert_eq!(
        status.code(),
        Some(1),
        "watch of a closed port exits 1: {err}"
    );
    for (d, kept) in &dirs {
        assert_eq!(
            tmp.0.join(d).exists(),
            *kept,
            "{d}: {}",
            if *kept {
                "must be kept"
            } else {
                "must be removed"
            }
        );
    }
}

/// A temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "cdp-supervisor-cli-test-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------------------
// proxy
// ---------------------------------------------------------------------------

/// The next `event` JSON line of `p`'s stdout (lines before it are passed over).
fn proxy_event(p: &Proc, event: &str, timeout: Duration) -> Value {
    p.out
        .find(timeout, |l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|v| v["event"] == event)
        })
        .unwrap_or_else(|| panic!("no {event} line within {timeout:?}\n{}", p.dump()))
}

/// Issue 30 point 1: `proxy --http` launches Chromium, says where it listens, makes a task of
/// each client on a page of its own (its dialogs reported, a client's answer `closed_by:
/// client`), stops it when the client leaves, serves the supervisor page, and on SIGTERM closes
/// its clients with 1001 ("the proxy is shutting down", said before their tasks stop) and ends
/// the Chromium it launched.
#[test]
fn proxy_makes_a_task_of_each_client_and_stops_cleanly_on_sigterm() {
    let Some(chrome) = chromium_or_skip() else {
        return;
    };
    let mut cmd = bin(&["proxy", "--http", "127.0.0.1:0"]);
    cmd.env("CHROME", &chrome).env("RUST_LOG", "info");
    let mut p = Proc::spawn(cmd);
    let chromium = p
        .err
        .find(Duration::from_secs(20), launched_pid)
        .unwrap_or_else(|| panic!("no `launched ... (pid N)` line within 20 s\n{}", p.dump()));
    let page_addr = p
        .err
        .find(Duration::from_secs(20), |l| {
            let rest = l.split("the supervisor page at http://").nth(1)?;
            rest.split('/').next().map(str::to_string)
        })
        .unwrap_or_else(|| panic!("no supervisor page line\n{}", p.dump()));
    let listening = proxy_event(&p, "listening", Duration::from_secs(20));
    let ws_url = listening["ws_url"].as_str().expect("ws_url").to_string();
    let http_url = listening["http_url"]
        .as_str()
        .expect("http_url")
        .to_string();
    assert!(ws_url.starts_with("ws://127.0.0.1:"), "{listening}");

    // Discovery answers before any client, naming the proxy's URL.
    let (status, body) = crate::e2e_cdp_endpoint::get(&http_url, "/json/version", &[]);
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["webSocketDebuggerUrl"], ws_url.as_str(), "{v}");
    assert!(v["Browser"].as_str().unwrap().contains("Chrome"), "{v}");

    // A client: a task of its own on a new page, its dialog reported and answered by it.
    let mut a = RawCdp::connect(&ws_url).expect("client A");
    let started = proxy_event(&p, "task_started", Duration::from_secs(20));
    assert_eq!(started["task_id"], "client-1", "{started}");
    let page = started["page_target_id"]
        .as_str()
        .expect("its page")
        .to_string();
    let targets = a.call("Target.getTargets", json!({}), None, STOP).unwrap();
    let pages: Vec<&Value> = targets["targetInfos"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["type"] == "page")
        .collect();
    assert_eq!(pages.len(), 1, "its own page only: {targets}");
    assert_eq!(pages[0]["targetId"], page.as_str());
    let s = a.attach(&page).expect("attach to its page");
    a.call("Page.enable", json!({}), Some(&s), STOP).unwrap();
    a.call(
        "Runtime.evaluate",
        json!({"expression": "setTimeout(() => alert('through the proxy'), 0); 1"}),
        Some(&s),
        STOP,
    )
    .unwrap();
    let opened = proxy_event(&p, "dialog_opened", Duration::from_secs(10));
    assert_eq!(opened["task_id"], "client-1", "{opened}");
    assert_eq!(opened["dialog"]["message"], "through the proxy", "{opened}");
    a.call(
        "Page.handleJavaScriptDialog",
        json!({"accept": true}),
        Some(&s),
        STOP,
    )
    .unwrap();
    let closed = proxy_event(&p, "dialog_closed", Duration::from_secs(10));
    assert_eq!(closed["closed_by"], "client", "{closed}");
    drop(a);
    let stopped = proxy_event(&p, "task_stopped", Duration::from_secs(10));
    assert_eq!(stopped["task_id"], "client-1", "{stopped}");

    // The supervisor page, through the same code path as `watch --http`.
    let (status, body) = crate::e2e_cdp_endpoint::get(&format!("http://{page_addr}"), "", &[]);
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("<html") || body.contains("<!doctype"),
        "{body}"
    );

    // A second client, then SIGTERM: it is closed with 1001, and Chromium ends.
    let authority = ws_url
        .strip_prefix("ws://")
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let tcp = std::net::TcpStream::connect(authority).unwrap();
    tcp.set_read_timeout(Some(STOP)).unwrap();
    let (mut b, _) = tungstenite::client(ws_url.as_str(), tcp).expect("client B");
    let started = proxy_event(&p, "task_started", Duration::from_secs(20));
    assert_eq!(started["task_id"], "client-2", "{started}");
    // SAFETY: kill(2) on our own unreaped child.
    assert_eq!(
        unsafe { libc::kill(p.pid() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let (code, reason) = close_frame(&mut b, &p);
    assert_eq!(code, 1001, "{}", p.dump());
    assert_eq!(reason, "the proxy is shutting down", "{}", p.dump());
    let status = p.expect_exit(STOP, "proxy after SIGTERM");
    let (out, err) = p.outputs();
    no_panic(&err, "proxy");
    assert!(out.contains(r#""task_id":"client-2""#), "{out}");
    assert!(
        wait_until(STOP, || (!alive(chromium)).then_some(())).is_some(),
        "Chromium (pid {chromium}) still running {STOP:?} after the proxy exited"
    );
    assert!(
        wait_until(STOP, || group_members(chromium).is_empty().then_some(())).is_some(),
        "Chromium's process group still has members"
    );
    assert_eq!(status.code(), Some(0), "{status}\n{}", p.dump());
}

/// The close frame a WebSocket client gets next (code, reason); panics on anything else.
fn close_frame(ws: &mut tungstenite::WebSocket<std::net::TcpStream>, p: &Proc) -> (u16, String) {
    loop {
        match ws.read() {
            Ok(tungstenite::Message::Close(Some(f))) => {
                return (u16::from(f.code), f.reason.to_string());
            }
            Ok(tungstenite::Message::Close(None)) => panic!("a close frame without a code"),
            Ok(_) => continue,
            Err(e) => panic!("the client read {e} before a close frame\n{}", p.dump()),
        }
    }
}

/// `proxy` without `--cdp-url` ends when the Chromium it launched dies (killed by pid): its
/// client is closed with 1001 and the reason, it says why on stderr, exits 1, and leaves no
/// Chromium process and no profile behind.
#[test]
fn proxy_ends_clearly_when_the_chromium_it_launched_dies() {
    let Some(chrome) = chromium_or_skip() else {
        return;
    };
    let mut cmd = bin(&["proxy"]);
    cmd.env("CHROME", &chrome).env("RUST_LOG", "info");
    let mut p = Proc::spawn(cmd);
    let chromium = p
        .err
        .find(Duration::from_secs(20), launched_pid)
        .unwrap_or_else(|| panic!("no `launched ... (pid N)` line within 20 s\n{}", p.dump()));
    let listening = proxy_event(&p, "listening", Duration::from_secs(20));
    let ws_url = listening["ws_url"].as_str().expect("ws_url").to_string();
    let authority = ws_url
        .strip_prefix("ws://")
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let tcp = std::net::TcpStream::connect(authority).unwrap();
    tcp.set_read_timeout(Some(STOP * 2)).unwrap();
    let (mut ws, _) = tungstenite::client(ws_url.as_str(), tcp).expect("a client");
    let started = proxy_event(&p, "task_started", Duration::from_secs(20));
    assert_eq!(started["task_id"], "client-1", "{started}");
    let cmd = json!({"id": 1, "method": "Browser.getVersion"}).to_string();
    ws.send(tungstenite::Message::text(cmd)).unwrap();
    let reply = loop {
        match ws.read().expect("the reply") {
            tungstenite::Message::Text(t) => {
                let v: Value = serde_json::from_str(&t).expect("JSON");
                if v["id"] == 1 {
                    break v;
                }
            }
            _ => continue,
        }
    };
    assert!(
        reply["result"]["product"].as_str().is_some(),
        "the task runs: {reply}"
    );

    let t = Instant::now();
    // SAFETY: kill(2) on the browser the child launched, whose pid it printed.
    assert_eq!(
        unsafe { libc::kill(chromium as libc::pid_t, libc::SIGKILL) },
        0
    );
    let (code, reason) = close_frame(&mut ws, &p);
    let closed_in = t.elapsed();
    assert_eq!(code, 1001, "{}", p.dump());
    assert_eq!(reason, "the browser exited", "{}", p.dump());
    let status = p.expect_exit(STOP, "proxy after its Chromium died");
    let exited_in = t.elapsed();
    let (out, err) = p.outputs();
    no_panic(&err, "proxy");
    assert_eq!(status.code(), Some(1), "{status}\n{}", p.dump());
    assert!(
        err.contains(&format!(
            "error: the browser the proxy launched (pid {chromium}) exited"
        )),
        "{err}"
    );
    let stopped = out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["event"] == "task_stopped")
        .unwrap_or_else(|| panic!("no task_stopped line: {out}"));
    assert_eq!(stopped["reason"], "the browser exited", "{stopped}");
    assert!(
        wait_until(STOP, || group_members(chromium).is_empty().then_some(())).is_some(),
        "Chromium's process group still has members: {:?}",
        group_members(chromium)
    );
    assert!(
        profiles_of(p.pid()).is_empty(),
        "its profile is left: {:?}",
        profiles_of(p.pid())
    );
    eprintln!(
        "Chromium killed: the client was closed after {closed_in:?}, the proxy exited after \
         {exited_in:?}"
    );
}
