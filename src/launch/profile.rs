//! The browser's temporary profile directories: their names, the directory Chromium makes for
//! its singleton socket outside the profile, and the removal of profiles whose owner is gone.
//!
//! # Chromium's singleton directory
//!
//! Chromium makes `$TMPDIR/org.chromium.Chromium.XXXXXX/` for its singleton socket, points the
//! profile's `SingletonSocket` symlink at the socket in it, and leaves the directory behind when
//! it exits (measured on Chromium 156: after SIGTERM and after SIGKILL alike). A socket path
//! is at most 107 bytes, so when `$TMPDIR` is long (macOS's is about 49 bytes) the profile's
//! `t/` is too deep for it; Chromium then gets our own `$TMPDIR`, and after it exits
//! [`remove_singleton_dir`] removes that directory through the profile's symlink, but only when
//! it is certainly the one Chromium made for this profile: the same `SingletonCookie` as the
//! profile's, nothing else in it, and ours. The same runs before a stale profile is removed.
//!
//! # Stale profiles
//!
//! A profile directory is named `cdp-supervisor-profile-<pid>-s<start>-<n>`, where `<start>` is
//! the owner's start time (field 22 of `/proc/<pid>/stat`, in hex): together they identify
//! the owning process even after its pid is reused. The first launch of a process removes the
//! directories of owners that are gone (a `kill -9`, a power cut), never one whose owner lives,
//! and only directories of our own user ([`remove_stale_profiles`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Error;

/// The two entries of Chromium's singleton directory (and the profile's symlinks to them).
const SINGLETON_SOCKET: &str = "SingletonSocket";
const SINGLETON_COOKIE: &str = "SingletonCookie";

/// Removes the directory Chromium made for `profile`'s singleton socket outside the profile
/// (see the module doc), if there is one and it is certainly Chromium's for this profile:
///
/// * the profile's `SingletonSocket` is a symlink to `<dir>/SingletonSocket`, `<dir>` outside
///   the profile (one inside goes with it);
/// * `<dir>` is a real directory (not a symlink) owned by us, holding nothing but
///   `SingletonSocket` and `SingletonCookie`;
/// * `<dir>/SingletonCookie` names the same cookie as the profile's `SingletonCookie`: Chromium
///   writes one random cookie to both, so another profile's directory never matches.
///
/// Only those two entries are unlinked, then the directory is removed with `rmdir`, which
/// fails rather than remove anything that appeared meanwhile. Anything else is left alone
/// (logged when it looked like ours but did not pass). Returns whether it removed a directory.
pub(super) fn remove_singleton_dir(profile: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(socket) = std::fs::read_link(profile.join(SINGLETON_SOCKET)) else {
        return false; // no singleton (the browser never got that far), or not a symlink
    };
    let Some(dir) = socket.parent().filter(|d| {
        socket.file_name() == Some(std::ffi::OsStr::new(SINGLETON_SOCKET))
            && d.is_absolute()
            && !d.starts_with(profile)
    }) else {
        return false;
    };
    let refuse = |why: &str| {
        log::warn!(
            "left Chromium's singleton directory {} in place: {why}",
            dir.display()
        );
        false
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() && m.uid() == me => {}
        Ok(_) => return refuse("not a directory of ours"),
        Err(_) => return false, // already gone
    }
    let cookie = |p: &Path| std::fs::read_link(p.join(SINGLETON_COOKIE)).ok();
    match (cookie(profile), cookie(dir)) {
        (Some(a), Some(b)) if a == b => {}
        _ => return refuse("its SingletonCookie is not this profile's"),
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return refuse("cannot list it");
    };
    let names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
    if names
        .iter()
        .any(|n| n != SINGLETON_SOCKET && n != SINGLETON_COOKIE)
    {
        return refuse("it holds more than Chromium's singleton");
    }
    for name in names {
        let _ = std::fs::remove_file(dir.join(name));
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => true,
        Err(e) => refuse(&format!("cannot remove it: {e}")),
    }
}

/// The prefix of every profile directory we create.
const PROFILE_PREFIX: &str = "cdp-supervisor-profile-";

/// The start time of process `pid` in clock ticks since boot (field 22 of `/proc/<pid>/stat`),
/// `None` when the process does not exist (or `/proc` cannot tell).
fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces and ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // Fields 3.. follow; the start time is field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A new profile directory `cdp-supervisor-profile-<pid>-s<start, hex>-<n>` in the temp dir.
/// Short on purpose: Chromium's singleton socket lives below it (see
/// [`UNIX_SOCKET_PATH_MAX`](super::UNIX_SOCKET_PATH_MAX)). Pid and start time name this
/// process; `n` counts within it.
pub(super) fn fresh_profile_dir() -> Result<PathBuf, Error> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let pid = std::process::id();
    let start = process_start_time(pid).unwrap_or(0);
    loop {
        let dir = std::env::temp_dir().join(format!(
            "{PROFILE_PREFIX}{pid}-s{start:x}-{}",
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            // Left by an earlier boot's process with our pid and start time: take the next.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(Error::Io(format!(
                    "cannot create a profile directory {}: {e}",
                    dir.display()
                )));
            }
        }
    }
}

/// The owner a profile directory's name records: its pid, and its start time when the name has
/// one (names from before start times were recorded have none).
fn profile_owner(name: &str) -> Option<(u32, Option<u64>)> {
    let mut parts = name.strip_prefix(PROFILE_PREFIX)?.split('-');
    let pid = parts.next()?.parse().ok()?;
    let start = parts
        .next()?
        .strip_prefix('s')
        .and_then(|s| u64::from_str_radix(s, 16).ok());
    Some((pid, start))
}

/// True when the owner a profile directory names is certainly gone: no such process, or a
/// process with that pid that started at another time (the pid was reused).
fn owner_is_gone(pid: u32, start: Option<u64>) -> bool {
    match (process_start_time(pid), start) {
        (None, _) => {
            // /proc says nothing: make sure it is absence, not a /proc we cannot read.
            process_start_time(std::process::id()).is_some()
        }
        (Some(now), Some(then)) => now != then,
        (Some(_), None) => false,
    }
}

/// Removes, under `dir`, the profile directories of ours whose owning process is gone (see the
/// module doc). Returns the directories removed. Never removes a live owner's directory, nor
/// another user's.
pub fn remove_stale_profiles(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, start)) = name.to_str().and_then(profile_owner) else {
            continue;
        };
        let ours = entry.metadata().is_ok_and(|m| m.is_dir() && m.uid() == me);
        if !ours || !owner_is_gone(pid, start) {
            continue;
        }
        let path = entry.path();
        remove_singleton_dir(&path);
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {
                log::info!(
                    "removed the stale browser profile {} (its owner, pid {pid}, is gone)",
                    path.display()
                );
                removed.push(path);
            }
            Err(e) => log::warn!(
                "cannot remove the stale browser profile {}: {e}",
                path.display()
            ),
        }
    }
    removed
}

/// `remove_stale_profiles` in the temp dir, once per process.
pub fn remove_stale_profiles_once() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        remove_stale_profiles(&std::env::temp_dir());
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A scratch directory under the temp dir, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            static N: AtomicU64 = AtomicU64::new(0);
            let dir = std::env::temp_dir().join(format!(
                "cdps-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// What Chromium leaves: `root/profile` with its singleton symlinks, and the singleton
    /// directory `root/org.chromium.Chromium.XyZ123` with a real socket and a cookie symlink
    /// naming `dir_cookie`.
    fn chromium_leftovers(
        root: &Path,
        profile_cookie: &str,
        dir_cookie: &str,
    ) -> (PathBuf, PathBuf) {
        leftovers_of(&root.join("profile"), root, profile_cookie, dir_cookie)
    }

    /// [`chromium_leftovers`] for the profile `profile`, the singleton directory in `tmp`.
    fn leftovers_of(
        profile: &Path,
        tmp: &Path,
        profile_cookie: &str,
        dir_cookie: &str,
    ) -> (PathBuf, PathBuf) {
        let profile = profile.to_path_buf();
        let dir = tmp.join("org.chromium.Chromium.XyZ123");
        std::fs::create_dir_all(&profile).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join(SINGLETON_SOCKET);
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        drop(listener); // the socket file stays, as Chromium's does
        symlink(dir_cookie, dir.join(SINGLETON_COOKIE)).unwrap();
        symlink(&socket, profile.join(SINGLETON_SOCKET)).unwrap();
        symlink(profile_cookie, profile.join(SINGLETON_COOKIE)).unwrap();
        symlink("host-1234", profile.join("SingletonLock")).unwrap();
        (profile, dir)
    }

    #[test]
    fn the_singleton_directory_of_this_profile_is_removed() {
        let root = Scratch::new("sg");
        let (profile, dir) =
            chromium_leftovers(&root.0, "6955449298093361911", "6955449298093361911");
        assert!(remove_singleton_dir(&profile));
        assert!(!dir.exists(), "the singleton directory is gone");
        assert!(
            profile.join("SingletonLock").symlink_metadata().is_ok(),
            "the profile is untouched"
        );
        // Twice is fine: nothing left to do.
        assert!(!remove_singleton_dir(&profile));
    }

    #[test]
    fn a_stale_profile_goes_with_its_singleton_directory() {
        let root = Scratch::new("st");
        // A pid that is certainly gone: a child we ran and reaped.
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        let profile = root.0.join(format!("{PROFILE_PREFIX}{dead}-s1-0"));
        let (profile, dir) = leftovers_of(&profile, &root.0, "77", "77");
        assert_eq!(remove_stale_profiles(&root.0), vec![profile.clone()]);
        assert!(
            !profile.exists() && !dir.exists(),
            "{:?}",
            std::fs::read_dir(&root.0)
        );
    }

    #[test]
    fn a_singleton_directory_that_is_not_certainly_this_profiles_is_left_alone() {
        // Another profile's cookie.
        let root = Scratch::new("sg");
        let (profile, dir) = chromium_leftovers(&root.0, "111", "222");
        assert!(!remove_singleton_dir(&profile));
        assert!(dir.join(SINGLETON_SOCKET).exists());
        // Something else in it.
        let root = Scratch::new("sg");
        let (profile, dir) = chromium_leftovers(&root.0, "333", "333");
        std::fs::write(dir.join("precious"), "x").unwrap();
        assert!(!remove_singleton_dir(&profile));
        assert!(dir.join("precious").exists() && dir.join(SINGLETON_SOCKET).exists());
        // The directory is a symlink to a directory.
        let root = Scratch::new("sg");
        let (profile, dir) = chromium_leftovers(&root.0, "444", "444");
        let elsewhere = root.0.join("elsewhere");
        std::fs::rename(&dir, &elsewhere).unwrap();
        symlink(&elsewhere, &dir).unwrap();
        assert!(!remove_singleton_dir(&profile));
        assert!(elsewhere.join(SINGLETON_SOCKET).exists());
        // No singleton at all, or a socket inside the profile (it goes with the profile).
        let root = Scratch::new("sg");
        let profile = root.0.join("profile");
        std::fs::create_dir_all(profile.join("t/org.chromium.Chromium.a")).unwrap();
        assert!(!remove_singleton_dir(&profile));
        symlink(
            profile
                .join("t/org.chromium.Chromium.a")
                .join(SINGLETON_SOCKET),
            profile.join(SINGLETON_SOCKET),
        )
        .unwrap();
        assert!(!remove_singleton_dir(&profile));
        assert!(profile.join("t/org.chromium.Chromium.a").exists());
    }

    #[test]
    fn profile_names_record_the_owner_and_its_start_time() {
        assert_eq!(
            profile_owner("cdp-supervisor-profile-42-s1a2b-0"),
            Some((42, Some(0x1a2b)))
        );
        assert_eq!(
            profile_owner("cdp-supervisor-profile-42-0-abc"),
            Some((42, None))
        );
        assert_eq!(profile_owner("cdp-supervisor-profile-x-0"), None);
        assert_eq!(profile_owner("something-else"), None);
        let me = std::process::id();
        assert!(process_start_time(me).is_some());
        assert!(!owner_is_gone(me, process_start_time(me)));
        assert!(
            !owner_is_gone(me, None),
            "a live pid without a start time is kept"
        );
        assert!(owner_is_gone(me, process_start_time(me).map(|s| s + 1)));
    }
}
