//! The command-line tool the tests run. It is package `cdp-supervisor-cli` of this workspace (so
//! that the library's users never build its dependencies), which cargo does not build for this
//! package's tests: the first test that asks builds it, once per test process, into the same
//! target directory and profile as the tests. A `cargo build` with nothing to do takes well under
//! a second, and a filtered run (`cargo test --test it cli::`) never runs a stale binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `<target>/<profile>`, where this test binary's `deps/` directory lies.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("a test binary lies in <target>/<profile>/deps/")
        .to_path_buf()
}

/// The path of the `cdp-supervisor` binary, built for this profile on first use.
pub fn bin() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        let dir = profile_dir();
        let profile = dir.file_name().and_then(|n| n.to_str()).unwrap_or("debug");
        let target = dir.parent().expect("<target>/<profile>");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "--quiet", "--package", "cdp-supervisor-cli"])
            .arg("--manifest-path")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
            .env("CARGO_TARGET_DIR", target);
        if profile != "debug" {
            cmd.args(["--profile", profile]);
        }
        let status = cmd.status().expect("cargo runs");
        assert!(
            status.success(),
            "building cdp-supervisor-cli failed: {status}"
        );
        dir.join("cdp-supervisor").to_string_lossy().into_owned()
    })
}
