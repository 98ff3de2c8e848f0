//! `[downloads]` (issue 31): where each task's downloads go. Every task gets a directory of its
//! own under [`Downloads::dir`] (the system temp directory when unset), named at start, made by
//! the browser with the first download, and removed at stop unless [`Downloads::keep`]; what
//! fills it is `crate::core` (downloads) and `crate::local_files`.

use std::path::PathBuf;

/// Where each task's downloads go. Build one from `Downloads::default()` and the `with_*`
/// setters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Downloads {
    /// `downloads.dir`: the directory under which each task gets a directory of its own
    /// (`cdp-downloads-<task>-<unique>`); `None`: the system temp directory.
    pub dir: Option<PathBuf>,
    /// `downloads.keep`: keep a task's directory (and its files) when the task stops.
    pub keep: bool,
}

impl Downloads {
    /// Sets [`dir`](Downloads::dir).
    pub fn with_dir(mut self, dir: impl Into<PathBuf>) -> Downloads {
        self.dir = Some(dir.into());
        self
    }

    /// Sets [`keep`](Downloads::keep).
    pub fn with_keep(mut self, keep: bool) -> Downloads {
        self.keep = keep;
        self
    }
}
