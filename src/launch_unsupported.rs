//! Launching a local browser where it is not supported (every non-Unix platform): the same
//! items as `launch.rs`, each failing with [`UNSUPPORTED`], so the crate builds everywhere its
//! dependencies do and a user who gives a CDP URL loses nothing.

use std::path::Path;
use std::time::Duration;

use crossbeam_channel::Receiver;

use crate::error::Error;

/// Why nothing here works.
pub const UNSUPPORTED: &str =
    "launching a browser is not supported on this platform; pass a cdp_url";

/// How long [`LaunchedBrowser`]'s close waits before it kills (unused here).
pub const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Always [`UNSUPPORTED`]: there is no browser this crate can launch here.
pub fn find_browser(_configured: Option<&str>) -> Result<Option<std::path::PathBuf>, Error> {
    Err(Error::Io(UNSUPPORTED.into()))
}

/// Nothing to clean up where nothing is launched.
pub fn remove_stale_profiles_once() {}

/// Uninhabited: no value exists, so [`LaunchedBrowser`] has none either.
#[derive(Debug)]
enum Never {}

/// A browser we started: none can be, on this platform.
#[derive(Debug)]
pub struct LaunchedBrowser {
    never: Never,
}

impl LaunchedBrowser {
    /// Always [`UNSUPPORTED`].
    pub fn launch(_executable: &Path) -> Result<LaunchedBrowser, Error> {
        Err(Error::Io(UNSUPPORTED.into()))
    }

    /// Always [`UNSUPPORTED`].
    pub fn launch_cancellable(
        _executable: &Path,
        _cancel: &Receiver<()>,
    ) -> Result<LaunchedBrowser, Error> {
        Err(Error::Io(UNSUPPORTED.into()))
    }

    /// Always [`UNSUPPORTED`].
    pub fn launch_with(
        _executable: &Path,
        _extra_args: &[String],
        _cancel: &Receiver<()>,
    ) -> Result<LaunchedBrowser, Error> {
        Err(Error::Io(UNSUPPORTED.into()))
    }

    /// The browser's DevTools WebSocket URL.
    pub fn ws_url(&self) -> &str {
        match self.never {}
    }

    /// The browser's process id.
    pub fn pid(&self) -> u32 {
        match self.never {}
    }

    /// The temporary profile directory.
    pub fn profile_dir(&self) -> &Path {
        match self.never {}
    }

    /// True until the browser process exits.
    pub fn is_running(&self) -> bool {
        match self.never {}
    }

    /// Disconnects when the browser process has exited.
    pub fn exit_signal(&self) -> Receiver<()> {
        match self.never {}
    }

    /// Closes the browser.
    pub fn close(self, _grace: Duration) {
        match self.never {}
    }
}

impl Drop for LaunchedBrowser {
    fn drop(&mut self) {
        match self.never {}
    }
}
