//! Fleet: what connecting one more task costs while the browser holds N pages (issue 24), on the
//! fake browser, and many starts at once.
//!
//! Custom harness (`harness = false`): `cargo bench --bench fleet`.
//!
//! The fake runs in a child process (this bench re-executed with `FLEET_ROLE=fake`), so the bench
//! process's threads are the supervisors' alone. It behaves like Chromium on a browser-level
//! `Target.setAutoAttach`: every page it holds is attached to that connection at once
//! (`FakeBrowser::set_auto_attach_pages`).
//!
//! For each N in `FLEET_SIZES` (default 1, 10, 100, 1000), on a fresh fake: N tasks connect one
//! after another, each on a page of its own (`new_page`: `Target.createTarget`), so the k-th
//! connect finds k pages in the browser (fleets under 100 are connected 100 / N times over, up
//! to 20). Printed per N:
//! * per-task connect time: the mean of the last tenth of the starts (the browser holds ~N pages;
//!   median over the rounds), and the time all N connects took: with popups followed through the
//!   registry's popup watcher (the default: "after" issue 24), by each task's own browser-level
//!   auto-attach (`registry_without_popup_watcher`: "before"), and not followed
//!   (`browser.follow_popups = false`);
//! * a bare client's attach sequence (connect, `Target.getTargets`, `Target.attachToTarget`,
//!   `Page.enable`, `Runtime.enable` (which a task no longer sends since issue 32),
//!   `Page.getFrameTree`, `Target.setAutoAttach`) on the same
//!   fake while it holds the N pages (median of 21);
//! * the bench process's threads with the N tasks connected (a supervisor runs two: reader,
//!   watchdog).
//!
//! Then many starts at once (point 4): `FLEET_BURST` (default 100) `get_or_start` calls from as
//! many threads on one fresh fake against the same number one after another, and the ratio of
//! the concurrent wall time to (sequential / cores): at most 1.5 means starts do not serialize
//! (median of `FLEET_BURST_ROUNDS`, default 5). The fake shares the cores with the bench.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::unversioned::registry_without_popup_watcher;
use cdp_supervisor::{Config, StartOptions, SupervisorRegistry};
use common::*;

/// Child: runs the fake (auto-attaching every page like Chromium), prints its URL, exits when
/// stdin closes.
fn fake_child() {
    raise_nofile();
    let fake = FakeBrowser::start().expect("start the fake browser");
    fake.set_auto_attach_pages(true);
    println!("{}", fake.ws_url());
    let _ = std::io::stdout().flush();
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(fake);
}

fn raise_nofile() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a stack value.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}

/// A fresh fake in a child process: (child, ws URL).
fn spawn_fake() -> (Child, String) {
    let exe = std::env::current_exe().expect("current exe");
    let mut child = Command::new(exe)
        .env("FLEET_ROLE", "fake")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the fake child");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("child stdout"))
        .read_line(&mut line)
        .expect("the fake's URL");
    (child, line.trim().to_string())
}

fn end_fake(mut child: Child) {
    drop(child.stdin.take());
    let _ = child.wait();
}

/// Builds the registry of one way to follow popups.
type MakeRegistry = fn() -> SupervisorRegistry;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn own_page() -> StartOptions {
    StartOptions::default().with_new_page(true)
}

/// N tasks connect one after another: (mean ms of the last tenth, total s).
fn connect_fleet(reg: &SupervisorRegistry, url: &str, n: usize, tag: &str) -> (f64, f64) {
    let t_all = Instant::now();
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let t0 = Instant::now();
        reg.get_or_start_with(&format!("{tag}-{i:05}"), url, own_page())
            .unwrap_or_else(|e| panic!("start {i} of {n}: {e}"));
        times.push(ms(t0.elapsed()));
    }
    let tail = &times[n - n.div_ceil(10)..];
    (
        tail.iter().sum::<f64>() / tail.len() as f64,
        t_all.elapsed().as_secs_f64(),
    )
}

fn bare_attach(url: &str) -> f64 {
    let t0 = Instant::now();
    let mut c = RawClient::connect(url);
    c.attach_sequence(None);
    let took = ms(t0.elapsed());
    drop(c);
    took
}

fn main() {
    if std::env::var("FLEET_ROLE").as_deref() == Ok("fake") {
        return fake_child();
    }
    raise_nofile();
    let (date, nproc) = machine();
    let cores: f64 = nproc.trim().parse().unwrap_or(1.0);
    let sizes: Vec<usize> = std::env::var("FLEET_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .filter(|v: &Vec<usize>| !v.is_empty() && v.iter().all(|n| *n > 0))
        .unwrap_or_else(|| vec![1, 10, 100, 1000]);
    let burst: usize = env_or("FLEET_BURST", 100, |v| *v > 0);
    println!("fleet: {date}, nproc = {nproc}");
    println!(
        "per-task connect on the fake, browser holding ~N pages (mean of the last tenth of N \
         starts, ms):"
    );
    println!(
        "{:>6} | {:>24} | {:>24} | {:>24} | {:>7} | {:>22}",
        "N",
        "after (popup watcher)",
        "before (own auto-attach)",
        "follow_popups=false",
        "bare",
        "threads, after (N tasks)"
    );
    let ways: [(&str, MakeRegistry); 3] = [
        ("after", || SupervisorRegistry::new(Config::default())),
        ("before", || {
            registry_without_popup_watcher(Config::default())
        }),
        ("off", || {
            SupervisorRegistry::new(Config::default().with_follow_popups(false))
        }),
    ];
    let mut first: Option<Vec<f64>> = None;
    for &n in &sizes {
        // Small fleets are connected several times over (the fake back to one page in between:
        // `stop_all` closes the tasks' pages), so each figure averages ~100 starts at least.
        let rounds = (100 / n).clamp(1, 20);
        let mut cols = Vec::new();
        let mut figs = Vec::new();
        let mut bare = Vec::new();
        let (mut thr0, mut thr_after) = (0, 0);
        for (way, make) in ways {
            let (child, url) = spawn_fake();
            let reg = make();
            let mut fig = (Vec::new(), 0.0);
            for r in 0..rounds {
                if way == "after" && r == 0 {
                    thr0 = proc_status("self", "Threads");
                }
                let (m, s) = connect_fleet(&reg, &url, n, &format!("{way}{r}"));
                fig.0.push(m);
                fig.1 += s;
                if way == "after" {
                    thr_after = proc_status("self", "Threads");
                }
                if way == "off" {
                    bare.extend((0..21usize.div_ceil(rounds)).map(|_| bare_attach(&url)));
                }
                // Task by task: `stop_all` would also close the popup watcher, which the next
                // round would then connect again.
                for t in reg.tasks() {
                    reg.stop(&t);
                }
            }
            drop(reg);
            end_fake(child);
            let m = median(fig.0);
            figs.push(m);
            cols.push((m, fig.1 / rounds as f64));
        }
        let one = first.get_or_insert_with(|| figs.clone()).clone();
        let cells: Vec<String> = cols
            .iter()
            .zip(&one)
            .map(|((m, s), m1)| format!("{m:>7.2} ({:>5.2}x N=1) {s:>6.2} s", m / m1))
            .collect();
        println!(
            "{n:>6} | {} | {:>7.2} | {thr0:>5} -> {thr_after:>5} ({:.2}/task)",
            cells.join(" | "),
            median(bare),
            (thr_after.saturating_sub(thr0)) as f64 / n as f64,
        );
    }
    println!("(the s figures: all N connects one after another)");

    // Many starts at once (point 4): median of `FLEET_BURST_ROUNDS` rounds, each on fresh fakes.
    let rounds: usize = env_or("FLEET_BURST_ROUNDS", 5, |v| *v > 0);
    let mut figs = Vec::new();
    let mut failures = Vec::new();
    for _ in 0..rounds {
        let (sequential, concurrent, failed) = burst_round(burst);
        failures.extend(failed);
        figs.push((sequential, concurrent));
    }
    figs.sort_by(|a, b| (a.1 / a.0).total_cmp(&(b.1 / b.0)));
    let (sequential, concurrent) = figs[figs.len() / 2];
    let ratio = concurrent / (sequential / cores);
    println!(
        "{burst} starts on one fake (median of {rounds} rounds): one after another {sequential:.3} \
         s; all at once {concurrent:.3} s = {ratio:.2}x (sequential / {cores} cores); failures: \
         {}. Target <= 1.5x, none failed: {}.",
        failures.len(),
        verdict(ratio <= 1.5 && failures.is_empty())
    );
    if let Some(f) = failures.first() {
        println!("first failure: {f}");
    }
}

/// `burst` starts one after another on a fresh fake, then `burst` at once on another: the two
/// wall times (s) and the failures.
fn burst_round(burst: usize) -> (f64, f64, Vec<String>) {
    let (child, url) = spawn_fake();
    let reg = SupervisorRegistry::new(Config::default());
    let t0 = Instant::now();
    for i in 0..burst {
        reg.get_or_start_with(&format!("seq-{i:05}"), &url, own_page())
            .expect("sequential start");
    }
    let sequential = t0.elapsed().as_secs_f64();
    reg.stop_all();
    end_fake(child);
    let (child, url) = spawn_fake();
    let reg = Arc::new(SupervisorRegistry::new(Config::default()));
    let gate = Arc::new(Barrier::new(burst + 1));
    let threads: Vec<_> = (0..burst)
        .map(|i| {
            let (reg, gate, url) = (Arc::clone(&reg), Arc::clone(&gate), url.clone());
            std::thread::spawn(move || {
                gate.wait();
                reg.get_or_start_with(&format!("par-{i:05}"), &url, own_page())
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
        })
        .collect();
    gate.wait();
    let t0 = Instant::now();
    let failures: Vec<String> = threads
        .into_iter()
        .filter_map(|t| t.join().expect("start thread").err())
        .collect();
    let concurrent = t0.elapsed().as_secs_f64();
    reg.stop_all();
    end_fake(child);
    (sequential, concurrent, failures)
}
