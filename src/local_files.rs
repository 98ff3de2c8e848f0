//! The local file system, for what crosses between the page and the machine (issue 31): each
//! task's download directory (named at start, made by the browser when the first download lands
//! there, removed at stop unless `downloads.keep`), moving a
//! completed download into it (the reader, before it publishes: `core/downloads.rs` says why),
//! and which files may answer a file chooser (`security.upload_dirs`, judged by real paths).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::Downloads;
use crate::error::Error;
use crate::quote::quoted;

/// How every task's download directory is named: `cdp-downloads-<task>-<pid>-<n>`.
const PREFIX: &str = "cdp-downloads-";

/// Names task `task_id`'s download directory under `downloads.dir` (the system temp directory
/// when unset), a name nothing has yet. Nothing is made: the browser makes the directory when
/// the first download lands there (measured on Chromium 148, nested directories included), so a
/// task that downloads nothing leaves no trace. The task id is reduced to letters, digits, `-`
/// and `_` (at most 32).
pub(crate) fn task_dir(downloads: &Downloads, task_id: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let parent = downloads.dir.clone().unwrap_or_else(std::env::temp_dir);
    let label: String = task_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .take(32)
        .collect();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("{PREFIX}{label}-{}-{n}", std::process::id()));
        if std::fs::symlink_metadata(&dir).is_err() {
            return dir;
        }
    }
}

/// Removes what the task put in its download directory (`files`: its downloads' files, and the
/// browser's own names for them, their guids), then the directory if that left it empty. Nothing
/// else is removed: the browser's download directory is one per browser context, so a file of
/// another task, or of a person using the same browser, may have landed there meanwhile; it stays
/// (and so does the directory, logged).
pub(crate) fn remove_task_dir<'a>(dir: &Path, files: impl IntoIterator<Item = &'a Path>) {
    for f in files {
        if f.parent() == Some(dir)
            && let Err(e) = std::fs::remove_file(f)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            log::debug!("cannot remove the download {}: {e}", f.display());
        }
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => log::warn!(
            "the task's download directory {} is left in place: {e} (files the task did not \
             download are in it)",
            dir.display()
        ),
    }
}

/// Moves a completed download from where the browser wrote it (`from`) to `to`, never over an
/// existing file. When `from` was in another task's download directory (that task set the
/// browser's download directory last) and that directory is now empty, it is removed: the
/// browser makes it again when it needs it (measured on Chromium 148), and otherwise it would
/// outlive its task.
pub(crate) fn move_download(from: &Path, to: &Path) -> Result<(), String> {
    if to.exists() {
        return Err(format!("{} exists already", to.display()));
    }
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::rename(from, to).map_err(|e| e.to_string())?;
    let foreign = from.parent().filter(|p| Some(*p) != to.parent());
    if let Some(dir) = foreign
        && dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(PREFIX))
    {
        // Fails unless empty, which is all it should do.
        let _ = std::fs::remove_dir(dir);
    }
    Ok(())
}

/// The files a file chooser may be answered with: each one's real path (symlinks resolved)
/// must be a file inside one of `upload_dirs` (themselves resolved). The error names
/// `security.upload_dirs` and the first file that is not.
pub(crate) fn upload_files(
    files: &[PathBuf],
    upload_dirs: &[PathBuf],
) -> Result<Vec<PathBuf>, Error> {
    const OPTION: &str = "security.upload_dirs";
    let refuse = |detail: String| Error::Refused {
        method: "DOM.setFileInputFiles".into(),
        option: OPTION.into(),
        detail,
    };
    if files.is_empty() {
        return Err(Error::InvalidArgument(
            "files must name at least one file".into(),
        ));
    }
    let dirs: Vec<PathBuf> = upload_dirs
        .iter()
        .filter_map(|d| d.canonicalize().ok())
        .collect();
    if dirs.is_empty() {
        return Err(refuse(format!(
            "no upload directory is configured (or none exists); list the directories whose \
             files may answer a file chooser in {OPTION}"
        )));
    }
    files
        .iter()
        .map(|f| {
            let shown = quoted(&f.display().to_string()).to_string();
            let real = f
                .canonicalize()
                .map_err(|e| Error::InvalidArgument(format!("file {shown}: {e}")))?;
            if !real.is_file() {
                return Err(Error::InvalidArgument(format!("{shown} is not a file")));
            }
            if !dirs.iter().any(|d| real.starts_with(d)) {
                return Err(refuse(format!(
                    "{shown} (really {}) is outside every directory of {OPTION}; add its \
                     directory there to allow it",
                    quoted(&real.display().to_string())
                )));
            }
            Ok(real)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = task_dir(&Downloads::default(), name);
        assert!(!d.exists(), "named, not made");
        std::fs::create_dir(&d).unwrap();
        assert_ne!(
            task_dir(&Downloads::default(), name),
            d,
            "a name nothing has"
        );
        d
    }

    #[test]
    fn upload_files_are_judged_by_their_real_paths() {
        let root = scratch("uploads-test");
        let allowed = root.join("allowed");
        let outside = root.join("outside");
        std::fs::create_dir_all(&allowed).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(allowed.join("a.txt"), b"a").unwrap();
        std::fs::write(outside.join("secret.txt"), b"s").unwrap();
        let dirs = [allowed.clone()];
        let ok = upload_files(&[allowed.join("a.txt")], &dirs).unwrap();
        assert_eq!(ok, [allowed.join("a.txt").canonicalize().unwrap()]);
        // A path that walks out, and a symlink inside that points out: both refused by name.
        for sneaky in [
            allowed.join("../outside/secret.txt"),
            allowed.join("link.txt"),
        ] {
            #[cfg(unix)]
            if sneaky.ends_with("link.txt") {
                std::os::unix::fs::symlink(outside.join("secret.txt"), &sneaky).unwrap();
            }
            if !sneaky.exists() {
                continue;
            }
            let e = upload_files(std::slice::from_ref(&sneaky), &dirs).unwrap_err();
            assert!(
                matches!(&e, Error::Refused { option, .. } if option == "security.upload_dirs"),
                "{e}"
            );
            assert!(e.to_string().contains("secret.txt"), "{e}");
        }
        let e = upload_files(&[allowed.join("a.txt")], &[]).unwrap_err();
        assert!(e.to_string().contains("security.upload_dirs"), "{e}");
        let e = upload_files(&[allowed.join("missing.txt")], &dirs).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_download_moves_without_overwriting_and_an_empty_foreign_directory_goes() {
        let mine = scratch("mine");
        let theirs = scratch("theirs");
        std::fs::write(theirs.join("guid-1"), b"one").unwrap();
        std::fs::write(mine.join("report.txt"), b"kept").unwrap();
        let e = move_download(&theirs.join("guid-1"), &mine.join("report.txt")).unwrap_err();
        assert!(e.contains("exists"), "{e}");
        assert_eq!(std::fs::read(mine.join("report.txt")).unwrap(), b"kept");
        move_download(&theirs.join("guid-1"), &mine.join("report (1).txt")).unwrap();
        assert_eq!(std::fs::read(mine.join("report (1).txt")).unwrap(), b"one");
        assert!(!theirs.exists(), "the other task's empty directory is gone");
        // The stop removes the task's own files, and the directory once empty; never another's.
        std::fs::write(mine.join("not-mine.bin"), b"other").unwrap();
        let own = [mine.join("report.txt"), mine.join("report (1).txt")];
        remove_task_dir(&mine, own.iter().map(PathBuf::as_path));
        assert!(!own[0].exists() && !own[1].exists());
        assert_eq!(std::fs::read(mine.join("not-mine.bin")).unwrap(), b"other");
        remove_task_dir(&mine, [mine.join("not-mine.bin").as_path()]);
        assert!(!mine.exists(), "empty: removed");
    }
}
