//! Scale: 1,000 supervisors in one process on one fake browser.
//!
//! Custom harness (`harness = false`): `cargo bench --bench scale`.
//!
//! The fake browser runs in a child process (this bench binary re-executed with
//! `SCALE_ROLE=fake`), so the bench process's `VmRSS`, threads and CPU time are the supervisors'
//! alone; the fake's are read from `/proc/<child>` and printed separately. The baseline runs in a
//! second child (`SCALE_ROLE=raw`): the same number of plain tungstenite clients that each did the
//! same attach sequence on the same fake, and reports its RSS growth per connection.
//!
//! Measured: start time per `get_or_start` (distinct task ids, same URL), RSS and virtual size per
//! supervisor, threads, CPU used by the whole process over 10 idle seconds, `registry.snapshot`
//! of random tasks (batches of 32), and `stop_all`.
//!
//! Environment: `SCALE_TASKS` (default 1000), `SCALE_IDLE_SECS` (default 10).

mod common;

use std::hint::black_box;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cdp_supervisor::fake::FakeBrowser;
use cdp_supervisor::{Config, SupervisorRegistry};
use common::*;

const BATCH: u64 = 32;
const TARGET_RSS_KIB: f64 = 64.0;
const TARGET_IDLE_CPU_MS: f64 = 10.0;

/// User + system CPU time of the whole process (all threads), in ms, from getrusage (ns-based
/// accounting, unlike the 10 ms ticks of /proc/self/stat).
fn self_cpu_ms() -> f64 {
    // SAFETY: getrusage writes into a zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1000.0 + t.tv_usec as f64 / 1000.0;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn raise_nofile() -> u64 {
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
    lim.rlim_cur
}

/// Child: runs the fake, prints its URL, exits when stdin closes.
fn fake_child() {
    raise_nofile();
    let fake = FakeBrowser::start().expect("start the fake browser");
    println!("{}", fake.ws_url());
    let _ = std::io::stdout().flush();
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(fake);
}

/// Child: `n` plain clients that each did the attach sequence; prints RSS growth in KiB.
fn raw_child() {
    raise_nofile();
    let url = std::env::var("SCALE_URL").expect("SCALE_URL");
    let n: usize = env_or("SCALE_TASKS", 1000, |_| true);
    let rss0 = proc_status("self", "VmRSS");
    let clients: Vec<RawClient> = (0..n)
        .map(|_| {
            let mut c = RawClient::connect(&url);
            c.attach_sequence(None);
            c
        })
        .collect();
    let rss1 = proc_status("self", "VmRSS");
    println!("{}", rss1.saturating_sub(rss0));
    let _ = std::io::stdout().flush();
    drop(clients);
}

fn main() {
    match std::env::var("SCALE_ROLE").as_deref() {
        Ok("fake") => return fake_child(),
        Ok("raw") => return raw_child(),
        _ => {}
    }
    let (date, nproc) = machine();
    let tasks: usize = env_or("SCALE_TASKS", 1000, |v| *v > 0);
    let idle_secs: u64 = env_or("SCALE_IDLE_SECS", 10, |_| true);
    let started = Instant::now();
    println!("scale: {date}, nproc = {nproc}");
    let nofile = raise_nofile();
    println!(
        "RLIMIT_NOFILE raised to {nofile}; threads-max {}, pid_max {}.",
        shell("cat", &["/proc/sys/kernel/threads-max"]).unwrap_or_default(),
        shell("cat", &["/proc/sys/kernel/pid_max"]).unwrap_or_default()
    );

    let exe = std::env::current_exe().expect("current exe");
    let mut fake = Command::new(&exe)
        .env("SCALE_ROLE", "fake")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the fake child");
    let fake_pid = fake.id().to_string();
    let mut line = String::new();
    BufReader::new(fake.stdout.take().expect("child stdout"))
        .read_line(&mut line)
        .expect("the fake's URL");
    let url = line.trim().to_string();

    // Baseline child: plain clients.
    let raw_out = Command::new(&exe)
        .env("SCALE_ROLE", "raw")
        .env("SCALE_URL", &url)
        .env("SCALE_TASKS", tasks.to_string())
        .output()
        .expect("run the raw-client child");
    let raw_kib: f64 = String::from_utf8_lossy(&raw_out.stdout)
        .trim()
        .parse()
        .unwrap_or(f64::NAN);
    let raw_per = raw_kib / tasks as f64;
    // Give the fake time to reap the raw connections' threads.
    std::thread::sleep(Duration::from_millis(500));

    let registry = SupervisorRegistry::new(Config::default());
    let ids: Vec<String> = (0..tasks).map(|i| format!("task-{i:05}")).collect();
    // Warm up allocator and code paths with one start/stop.
    registry.get_or_start("warm", &url).expect("warm-up start");
    registry.stop("warm");
    let rss0 = proc_status("self", "VmRSS");
    let vm0 = proc_status("self", "VmSize");
    let thr0 = proc_status("self", "Threads");
    let fake_rss0 = proc_status(&fake_pid, "VmRSS");
    let mut h_start = new_hist();
    let mut failed: Option<(usize, String)> = None;
    let t_all = Instant::now();
    for (i, id) in ids.iter().enumerate() {
        let t0 = Instant::now();
        match registry.get_or_start(id, &url) {
            Ok(_) => record(&mut h_start, t0.elapsed()),
            Err(e) => {
                failed = Some((i, e.to_string()));
                break;
            }
        }
    }
    let all_secs = t_all.elapsed().as_secs_f64();
    let started_n = failed.as_ref().map_or(tasks, |(i, _)| *i);
    if let Some((i, e)) = &failed {
        println!("LIMIT HIT: start #{i} failed: {e}");
    }
    std::thread::sleep(Duration::from_millis(500));
    let rss1 = proc_status("self", "VmRSS");
    let vm1 = proc_status("self", "VmSize");
    let thr1 = proc_status("self", "Threads");
    let fake_rss1 = proc_status(&fake_pid, "VmRSS");
    let per_sup = (rss1.saturating_sub(rss0)) as f64 / started_n as f64;
    let vm_per_sup = (vm1.saturating_sub(vm0)) as f64 / started_n as f64;
    let fake_per = (fake_rss1.saturating_sub(fake_rss0)) as f64 / started_n as f64;

    // Idle CPU.
    let tps = ticks_per_s();
    let c0 = self_cpu_ms();
    let k0 = proc_cpu_ticks("self");
    let f0 = proc_cpu_ticks(&fake_pid);
    std::thread::sleep(Duration::from_secs(idle_secs));
    let c1 = self_cpu_ms();
    let k1 = proc_cpu_ticks("self");
    let f1 = proc_cpu_ticks(&fake_pid);
    let idle_ms = c1 - c0;
    let idle_ticks_ms = (k1 - k0) as f64 * 1000.0 / tps as f64;
    let fake_idle_ms = (f1 - f0) as f64 * 1000.0 / tps as f64;

    // Snapshot reads of random tasks.
    let mut h_read = new_hist();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let t_end = Instant::now()
        .checked_add(Duration::from_secs(1))
        .expect("a deadline within range");
    let live = &ids[..started_n];
    let mut picks = [0usize; BATCH as usize];
    while Instant::now() < t_end {
        for p in picks.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *p = (x % live.len() as u64) as usize;
        }
        let t0 = Instant::now();
        for &p in &picks {
            black_box(
                registry
                    .snapshot(black_box(&live[p]))
                    .map_or(0, |s| s.pending_dialogs.len()),
            );
        }
        let ns = t0.elapsed().as_nanos() as u64;
        h_read.saturating_record((ns / BATCH).max(1));
    }
    let alive = live
        .iter()
        .filter(|t| registry.get(t).is_some_and(|s| s.is_active()))
        .count();

    let t0 = Instant::now();
    registry.stop_all();
    let stop_secs = t0.elapsed().as_secs_f64();
    let thr2 = proc_status("self", "Threads");
    drop(fake.stdin.take());
    let _ = fake.wait();

    println!(
        "{started_n} supervisors started ({alive} still active after the idle period) in \
         {all_secs:.2} s on one fake browser (child process {fake_pid}); threads {thr0} -> {thr1} \
         (after stop_all: {thr2})."
    );
    println!();
    lat_header();
    lat_row("get_or_start (distinct task, same fake)", &h_start, None);
    println!(
        "{:<46} {:>6} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
        "registry.snapshot(random task) [ns->us]",
        h_read.len() * BATCH,
        q_us(&h_read, 0.5),
        q_us(&h_read, 0.9),
        q_us(&h_read, 0.99),
        h_read.max() as f64 / 1000.0,
        h_read.mean() / 1000.0
    );
    println!();
    println!(
        "{:<58} {:>14} {:>26}",
        "memory / CPU", "per supervisor", "baseline (same run)"
    );
    println!("{}", "-".repeat(100));
    println!(
        "{:<58} {:>10.1} KiB {:>22.1} KiB",
        "VmRSS growth, bench process (supervisors only)", per_sup, raw_per
    );
    println!(
        "{:<58} {:>10.1} KiB {:>26}",
        "VmSize growth (reserved: stacks 256+128 KiB + guards)", vm_per_sup, "-"
    );
    println!(
        "{:<58} {:>10.1} KiB {:>26}",
        "fake browser child VmRSS growth (not counted above)", fake_per, "-"
    );
    println!(
        "{:<58} {:>10.2} ms {:>23.2} ms",
        format!("CPU over {idle_secs} s idle, whole bench process (getrusage)"),
        idle_ms,
        fake_idle_ms
    );
    println!(
        "{:<58} {:>11.0} ms {:>26}",
        "  same, /proc/self/stat utime+stime (10 ms ticks)", idle_ticks_ms, "-"
    );
    println!(
        "(baseline column: plain tungstenite client that did the attach sequence, own child \
         process; CPU baseline column: the fake browser child over the same {idle_secs} s.)"
    );
    println!("stop_all: {stop_secs:.2} s for {started_n} supervisors.");
    println!(
        "Thread stacks: reader 256 KiB, watchdog 128 KiB (reserved virtual memory; only touched \
         pages are resident, see VmRSS vs VmSize above). CPU tick = {} ms.",
        1000 / tps
    );
    let rss_ok = per_sup <= TARGET_RSS_KIB;
    let cpu_ok = idle_ms < TARGET_IDLE_CPU_MS;
    let all_ok = failed.is_none();
    println!(
        "Target {tasks} supervisors: {}. Target RSS <= {TARGET_RSS_KIB} KiB per supervisor: {} \
         ({per_sup:.1} KiB, {:.2}x the plain client's {raw_per:.1} KiB). Target idle CPU < \
         {TARGET_IDLE_CPU_MS} ms over {idle_secs} s: {} ({idle_ms:.1} ms).",
        verdict(all_ok),
        verdict(rss_ok),
        per_sup / raw_per,
        verdict(cpu_ok)
    );
    println!("Total bench time: {:.1} s", started.elapsed().as_secs_f64());
    println!();
    println!(
        "README: scale ({date}, nproc={nproc}): {started_n} supervisors on one fake: start p50 \
         {:.2} ms / p99 {:.2} ms, {per_sup:.1} KiB RSS each (plain tungstenite client {raw_per:.1} \
         KiB; target 64 KiB {}), {idle_ms:.1} ms CPU in {idle_secs} s idle (target < 10 ms {}), \
         snapshot(random task) p99 {:.0} ns, stop_all {stop_secs:.2} s.",
        q_us(&h_start, 0.5) / 1000.0,
        q_us(&h_start, 0.99) / 1000.0,
        verdict(rss_ok),
        verdict(cpu_ok),
        q_us(&h_read, 0.99) * 1000.0
    );
}
