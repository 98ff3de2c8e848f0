//! The `[security]` settings (SPEC §14): what raw CDP calls may do. The rules that apply them
//! are the call path's (`src/security.rs`, `src/security/isolation.rs`).

use std::path::PathBuf;

/// What raw CDP calls through `browser_cdp` may do (SPEC §14). A page that prompt-injects an
/// agent could ask it for anything; these narrow it. The rules themselves are in
/// `src/security.rs` (and `src/security/isolation.rs` for `isolate_tasks`). Build one from
/// `Security::default()` and the `with_*` setters (every field is a setting of the
/// `[security]` section; more may come).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Security {
    /// `security.allow_file_urls`: URLs that may read a local file (`file:`, `filesystem:`, a
    /// path, in any spelling Chromium normalises) in navigations, new targets and the other
    /// methods that load a URL, and download paths, are refused unless true.
    pub allow_file_urls: bool,
    /// `security.allow_file_access`: methods that hand local files to the page
    /// (`DOM.setFileInputFiles`, `Input.dispatchDragEvent` with files, the file-chooser
    /// interception path, …) are refused unless true.
    pub allow_file_access: bool,
    /// `security.allow_page_protocol`: handing the DevTools protocol to a page
    /// (`Target.exposeDevToolsProtocol`, the DevTools frontend, the browser's own pages) and
    /// commands for targets the supervisor does not route (`Target.sendMessageToTarget`) are
    /// refused unless true.
    pub allow_page_protocol: bool,
    /// `security.cdp_deny`: method patterns (`Browser.close`, `Browser.*`, `*`) always refused.
    pub cdp_deny: Vec<String>,
    /// `security.cdp_allow`: when not empty, only methods matching one of these patterns pass.
    pub cdp_allow: Vec<String>,
    /// `security.isolate_tasks` (default true): a task reaches only its own targets (its page,
    /// the popups it follows, the pages and browser contexts it created, their frames). A
    /// `target_id` that another task owns is refused at start, and raw `Target.*` calls list
    /// only the task's targets and refuse any other (`src/security/isolation.rs`). False: a
    /// single trusted client that wants the whole browser.
    pub isolate_tasks: bool,
    /// `security.upload_dirs`: the directories whose files may answer a page's file chooser
    /// (with `allow_file_access`); a file is judged by its real path (symlinks resolved).
    /// Empty: no file may.
    pub upload_dirs: Vec<PathBuf>,
}

impl Default for Security {
    fn default() -> Self {
        Security {
            allow_file_urls: false,
            allow_file_access: false,
            allow_page_protocol: false,
            cdp_deny: Vec::new(),
            cdp_allow: Vec::new(),
            isolate_tasks: true,
            upload_dirs: Vec::new(),
        }
    }
}

impl Security {
    /// Whether `pattern` (`*`, `Domain.*` or `Domain.method`) matches `method`.
    pub fn pattern_matches(pattern: &str, method: &str) -> bool {
        match pattern.strip_suffix(".*") {
            _ if pattern == "*" => true,
            Some(domain) => method
                .strip_prefix(domain)
                .is_some_and(|rest| rest.starts_with('.')),
            None => pattern == method,
        }
    }

    /// Sets [`allow_file_urls`](Security::allow_file_urls).
    pub fn with_allow_file_urls(mut self, allow: bool) -> Security {
        self.allow_file_urls = allow;
        self
    }

    /// Sets [`allow_file_access`](Security::allow_file_access).
    pub fn with_allow_file_access(mut self, allow: bool) -> Security {
        self.allow_file_access = allow;
        self
    }

    /// Sets [`allow_page_protocol`](Security::allow_page_protocol).
    pub fn with_allow_page_protocol(mut self, allow: bool) -> Security {
        self.allow_page_protocol = allow;
        self
    }

    /// Sets [`isolate_tasks`](Security::isolate_tasks).
    pub fn with_isolate_tasks(mut self, isolate: bool) -> Security {
        self.isolate_tasks = isolate;
        self
    }

    /// Sets [`cdp_deny`](Security::cdp_deny).
    pub fn with_cdp_deny(
        mut self,
        patterns: impl IntoIterator<Item = impl Into<String>>,
    ) -> Security {
        self.cdp_deny = patterns.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`cdp_allow`](Security::cdp_allow).
    pub fn with_cdp_allow(
        mut self,
        patterns: impl IntoIterator<Item = impl Into<String>>,
    ) -> Security {
        self.cdp_allow = patterns.into_iter().map(Into::into).collect();
        self
    }

    /// Sets [`upload_dirs`](Security::upload_dirs).
    pub fn with_upload_dirs(
        mut self,
        dirs: impl IntoIterator<Item = impl Into<PathBuf>>,
    ) -> Security {
        self.upload_dirs = dirs.into_iter().map(Into::into).collect();
        self
    }
}
