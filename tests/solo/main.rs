//! The tests that need the whole process to themselves: each runs alone, on the main thread, one
//! after another (`harness = false` in Cargo.toml; [`main`] is a minimal stand-in for libtest).
//! Every other integration test is a module of `tests/it`, one binary whose tests share the
//! process and run in parallel. A test is here only for a reason the shared binary cannot
//! accommodate:
//!
//! * [`config_layers`] sets environment variables, which `Config::load` reads. `set_var` is sound
//!   only while no other thread reads the environment, and in `tests/it` the tests that spawn the
//!   binary or Chromium read it at any moment (a variable set there would also reach those
//!   children). These tests run first, while the process has no other thread.
//! * [`available_env`] sets `CDP_SUPERVISOR__BROWSER__CA_FILE` for `cdp_available`, which reads
//!   the configuration (and so the environment); it runs right after them, for the same reason.
//! * [`cycles`], [`registry_race`] and [`start_cancel`] check that no thread and no file
//!   descriptor of the whole process is left behind. Only threads named after a task could be told apart in a shared
//!   process; the `cdp-stop`/`cdp-reconnect` threads, the fake's connection threads and every
//!   descriptor could not.
//! * [`reconnect_stop_race`] counts the process's threads too, and aims 1,000 `stop` calls within
//!   ±200 µs of a reconnect handshake; tests running beside it would scatter them.
//! * [`redaction`] installs the process's one global `log` logger, at `Trace` for every crate, and
//!   checks every record it captures: records of other tests could not be told apart, and the
//!   capture would slow them all. It runs last, so the logger it leaves installed sees nothing
//!   else.
//!
//! Run one module with `cargo test --test solo cycles`; a filter selects the tests whose
//! `module::name` contains it (`--exact`, `--skip`, `--list` and `--include-ignored` work as in
//! libtest; the other libtest options are accepted and ignored).

mod available_env;
mod config_layers;
mod cycles;
mod reconnect_stop_race;
mod redaction;
mod registry_race;
mod start_cancel;

use std::io::Write;
use std::panic::catch_unwind;
use std::time::Instant;

/// `module::function` of each test, in the order they run.
macro_rules! tests {
    ($($module:ident :: $test:ident),* $(,)?) => {
        &[$((concat!(stringify!($module), "::", stringify!($test)), $module::$test as fn())),*]
    };
}

const TESTS: &[(&str, fn())] = tests![
    // First: while the process has no other thread (see the module docs).
    config_layers::defaults_alone_equal_config_default,
    config_layers::user_file_overrides_defaults_and_env_overrides_the_file,
    config_layers::config_env_var_names_the_user_file,
    config_layers::missing_file_is_an_error_naming_it,
    config_layers::malformed_toml_is_an_error,
    config_layers::invalid_values_in_the_file_name_key_value_and_allowed,
    config_layers::invalid_values_in_the_environment_name_key_value_and_allowed,
    config_layers::missing_ca_file_names_the_path,
    // Sets one variable before it starts any thread.
    available_env::cdp_available_trusts_the_ca_file_named_in_the_environment,
    cycles::a_thousand_start_stop_cycles_leak_no_threads_sockets_or_slots,
    registry_race::racing_get_or_start_and_stop_never_leaves_two_live_supervisors_or_threads,
    start_cancel::cancelled_starts_leave_no_threads_sockets_or_slots,
    start_cancel::starts_cancelled_while_connecting_leave_nothing_once_their_deadline_passes,
    start_cancel::starts_cut_short_by_stop_or_close_leave_no_threads_sockets_or_slots,
    reconnect_stop_race::stop_during_a_reconnect_returns_within_a_second_in_a_thousand_races,
    // Last: the logger it installs stays.
    redaction::the_scenario_really_ran,
    redaction::no_credentials_in_errors_debug_output_snapshots_or_tool_results,
    redaction::no_credentials_in_the_crates_own_log_lines,
    redaction::no_credentials_in_dependency_log_lines,
];

/// A numeric field of `/proc/self/status` (e.g. `Threads`).
fn self_status(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| {
        l.strip_prefix(key)
            .is_some_and(|rest| rest.starts_with(':'))
    })?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let mut filters: Vec<String> = Vec::new();
    let mut skips: Vec<String> = Vec::new();
    let (mut exact, mut list, mut only_ignored, mut terse) = (false, false, false, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--exact" => exact = true,
            "--list" => list = true,
            // None of these tests is ignored.
            "--ignored" => only_ignored = true,
            "--skip" => skips.extend(args.next()),
            "--format" => terse = args.next().as_deref() == Some("terse"),
            "--format=terse" => terse = true,
            // libtest options that take a value, accepted and ignored.
            "--test-threads" | "--color" | "--logfile" | "--shuffle-seed" | "-Z" => {
                let _ = args.next();
            }
            other if other.starts_with('-') => {}
            filter => filters.push(filter.to_string()),
        }
    }
    let matches = |name: &str, pattern: &str| {
        if exact {
            name == pattern
        } else {
            name.contains(pattern)
        }
    };
    let selected: Vec<&(&str, fn())> = TESTS
        .iter()
        .filter(|(name, _)| {
            !only_ignored
                && (filters.is_empty() || filters.iter().any(|f| matches(name, f)))
                && !skips.iter().any(|s| matches(name, s))
        })
        .collect();
    if list {
        for (name, _) in &selected {
            println!("{name}: test");
        }
        if !terse {
            println!("\n{} tests, 0 benchmarks", selected.len());
        }
        return;
    }

    let started = Instant::now();
    println!("\nrunning {} tests (one at a time)", selected.len());
    let mut failed = Vec::new();
    for (name, test) in &selected {
        print!("test {name} ... ");
        let _ = std::io::stdout().flush();
        let t = Instant::now();
        match catch_unwind(test) {
            Ok(()) => println!("ok ({:.1?})", t.elapsed()),
            Err(_) => {
                println!("FAILED ({:.1?})", t.elapsed());
                failed.push(*name);
            }
        }
    }
    if !failed.is_empty() {
        println!("\nfailures:");
        for name in &failed {
            println!("    {name}");
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed; 0 ignored; 0 measured; {} filtered out; \
         finished in {:.2}s\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failed.len(),
        failed.len(),
        TESTS.len() - selected.len(),
        started.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        std::process::exit(101);
    }
}
