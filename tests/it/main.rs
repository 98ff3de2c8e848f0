//! The integration tests, compiled as one binary: each former test file is a module, and
//! [`common`] is compiled once for all of them. Run one module with
//! `cargo test --test it e2e_dialogs::`, one test with its full `module::name`.
//!
//! The tests share the process and run in parallel, so a test here must not depend on
//! process-wide state: it names its own task ids, counts only its own threads (supervisor
//! threads are named `cdp-reader-<task>` and `cdp-watchdog-<task>`) and counts allocations per
//! thread ([`alloc_free`] installs the binary's global allocator, which counts per thread).
//! The real-Chromium tests (`e2e_*`, and a few in [`cli`], [`mcp_stdio`], [`harness_selftest`])
//! share one Chromium ([`common::shared_browser`]) and open their own pages in it.
//!
//! The few tests that need the whole process to themselves are in `tests/solo` (its docs say
//! why each is there).
//!
//! Groups: `fake_*`, `fleet_starts`, `hardening_*`, `prop_hostile`, `scale_limits`,
//! `security_policy` and `start_cancel` drive the scripted fake browser (`fake_page` the
//! supervisor page, served by the HTTP server in this process, over raw HTTP/1.1:
//! [`common::raw_http`]); `discovery` and `wss`
//! put scripted HTTP and TLS peers in front of it; `e2e_*` drive a real Chromium
//! (`e2e_browserless` through a Browserless server each test starts); `cli`,
//! `mcp_stdio`, `mcp_modern`, `mcp_hardening`, `mcp_fleet`, `mcp_python_sdk`, `mcp_http` and
//! `tmpdir_cleanup` run the binary; `mcp_http_server` runs the MCP HTTP server in this process,
//! over raw HTTP/1.1 ([`common::raw_http`]); `measure_popups`, `measure_renderers`, `measure_browserless`,
//! `measure_fleet`, `measure_stealth` and `measure_unwatched` hold ignored measurements.

mod common;

mod alloc_free;
mod cli;
mod discovery;
mod e2e_blocked_calls;
mod e2e_bridge;
mod e2e_browserless;
mod e2e_cdp_clients;
mod e2e_cdp_endpoint;
mod e2e_cdp_endpoint_life;
mod e2e_cdp_endpoint_page;
mod e2e_cdp_flood;
mod e2e_dialog_methods;
mod e2e_dialogs;
mod e2e_downloads;
mod e2e_endpoints;
mod e2e_file_choosers;
mod e2e_frames;
mod e2e_handover;
mod e2e_hardening_dialogs;
mod e2e_hardening_frames;
mod e2e_isolation;
mod e2e_navigate;
mod e2e_orphan;
mod e2e_own_page;
mod e2e_page;
mod e2e_popups;
mod e2e_security;
mod e2e_stealth;
mod e2e_watcher;
mod fake_blocked_calls;
mod fake_bridge;
mod fake_cdp_endpoint;
mod fake_cdp_endpoint_life;
mod fake_cdp_endpoint_page;
mod fake_dialogs;
mod fake_faults;
mod fake_frames;
mod fake_isolation;
mod fake_own_page;
mod fake_page;
mod fake_popups;
mod fake_stealth;
mod fleet_starts;
mod hardening_dialogs;
mod hardening_frames;
mod hardening_reconnect;
mod hardening_transport;
mod harness_selftest;
mod idle;
mod mcp_fleet;
mod mcp_hardening;
mod mcp_http;
mod mcp_http_server;
mod mcp_modern;
mod mcp_python_sdk;
mod mcp_stdio;
mod measure_browserless;
mod measure_fleet;
mod measure_page;
mod measure_popups;
mod measure_renderers;
mod measure_stealth;
mod measure_unwatched;
mod prop_hostile;
mod read_cache;
mod registry_entry;
mod scale_limits;
mod security_policy;
mod start_cancel;
mod tmpdir_cleanup;
mod tools_everywhere;
mod wss;
