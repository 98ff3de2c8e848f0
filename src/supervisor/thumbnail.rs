//! A small picture of the task's page for people watching it (SPEC §20): a JPEG
//! [`Thumbnail`] made with `Page.captureScreenshot` on the caller's thread (never the
//! reader's), at most once a second per task (a caller within that second gets the same
//! picture, or the same reason it could not be taken), one capture at a time.
//!
//! Measured on Chromium 148 (`tests/it/e2e_handover.rs`,
//! `screenshot_during_a_dialog_waits_for_the_dialog`): `Page.captureScreenshot` sent while the
//! page shows a native alert gets no reply (no error, no picture) for as long as the alert is
//! open (none within 3 s in the test, none within 15 s in a longer run); the picture comes once
//! the alert is answered (163 ms after the answer in one run). The README's table of methods
//! measured with a dialog open lists it among those that hang. So a capture is never tried while
//! a dialog blocks the page's renderer: [`Supervisor::thumbnail`] says "a dialog is open" at
//! once (in 14 µs in that run), and the last picture still shows the page; a dialog that opens during a capture ends it at once through the dialog-aware call path
//! (SPEC §8). A page that paints no frame (a hidden tab, a page busy in a script) ends the
//! capture at [`CAPTURE_WAIT`], and the error says why.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

use super::Supervisor;
use crate::clock::Now;
use crate::core::policy;
use crate::deadline::Deadline;
use crate::error::Error;
use crate::sync;

/// The width of a thumbnail, in pixels (a narrower page is not scaled up).
pub const THUMBNAIL_WIDTH: f64 = 320.0;
/// JPEG quality (0-100): small, still legible at thumbnail size.
const JPEG_QUALITY: u32 = 50;
/// At most one capture per task in this time; callers within it get the last result.
pub const THUMBNAIL_EVERY: Duration = Duration::from_secs(1);
/// How long a capture may wait for the page (both of its calls together).
pub const CAPTURE_WAIT: Duration = Duration::from_secs(3);

/// A JPEG picture of the task's page, scaled to at most 320 pixels wide.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Thumbnail {
    /// The JPEG bytes.
    pub jpeg: Vec<u8>,
    /// Its width in pixels.
    pub width: u32,
    /// Its height in pixels.
    pub height: u32,
    /// When it was taken (Unix epoch seconds).
    pub taken_at: f64,
    /// The page it shows.
    pub target_id: String,
}

/// The last capture of a task and whether one is under way (callers' state, not the reader's).
#[derive(Debug, Default)]
pub(super) struct ThumbnailCache {
    /// When the last capture was tried, and what it gave.
    last: Option<(Instant, Result<Arc<Thumbnail>, String>)>,
    /// A caller is capturing now (the lock is never held across the capture).
    capturing: bool,
}

/// Resets `capturing` however the capture ends.
struct Capturing<'a>(&'a Mutex<ThumbnailCache>);

impl Drop for Capturing<'_> {
    fn drop(&mut self) {
        sync::lock(self.0).capturing = false;
    }
}

impl Supervisor {
    /// A small JPEG of the task's page (module doc): a fresh capture at most once a second,
    /// else the last one (or the reason it failed). Works while a person holds the task.
    /// [`Error::CannotCapture`] says why there is none: a dialog is open (Chromium paints
    /// nothing until it closes), the page crashed or is blocked, it painted no frame within
    /// 3 s, or another caller's capture is under way and none was taken before.
    pub fn thumbnail(&self) -> Result<Arc<Thumbnail>, Error> {
        let cache = &self.thumbnail;
        {
            let mut c = sync::lock(cache);
            let recent = c.last.as_ref().filter(|(at, result)| {
                at.elapsed() < THUMBNAIL_EVERY || (c.capturing && result.is_ok())
            });
            if let Some((_, result)) = recent {
                return result.clone().map_err(Error::CannotCapture);
            }
            if c.capturing {
                return Err(Error::CannotCapture(
                    "another capture of this page is under way".into(),
                ));
            }
            c.capturing = true;
        }
        let _capturing = Capturing(cache);
        let result = self.capture().map(Arc::new);
        let stored = match &result {
            Ok(t) => Ok(Arc::clone(t)),
            Err(Error::CannotCapture(why)) => Err(why.clone()),
            Err(e) => Err(e.to_string()),
        };
        sync::lock(cache).last = Some((Instant::now(), stored.clone()));
        stored.map_err(Error::CannotCapture)
    }

    fn capture(&self) -> Result<Thumbnail, Error> {
        self.ensure_alive()?;
        let snap = self.snapshot();
        let cannot = |why: String| Err(Error::CannotCapture(why));
        let Some(sid) = snap.page_session_id.clone() else {
            return cannot("the supervisor is not attached to a page yet".into());
        };
        let target_id = snap.page_target_id.clone().unwrap_or_default();
        if snap.crashed {
            return cannot("the page's renderer has crashed (reload it)".into());
        }
        let method = "Page.captureScreenshot";
        if let Some(d) = (snap.pending_dialogs.iter())
            .chain(snap.unanswerable.iter())
            .find(|d| policy::within_dialogs_reach(&*snap, d, &sid, method))
        {
            return cannot(format!(
                "a dialog is open ({} {}): Chromium paints no frame until it is answered",
                d.kind, d.id
            ));
        }
        if let Some(b) = &snap.blocked {
            return cannot(format!("the page is blocked ({}): {}", b.reason, b.hint));
        }
        drop(snap);
        let deadline = Deadline::after(CAPTURE_WAIT);
        let during = |e: Error| match e {
            Error::BlockedByDialog { dialog, .. } => Error::CannotCapture(format!(
                "a dialog opened during the capture ({} {})",
                dialog.kind, dialog.id
            )),
            Error::Timeout { .. } => Error::CannotCapture(format!(
                "the page painted no frame within {CAPTURE_WAIT:?} (a hidden tab, or a page \
                 busy in a script)"
            )),
            Error::Cdp { message, .. } => Error::CannotCapture(message),
            other => other,
        };
        let (metrics, _) = self
            .call_on_session(
                sid.clone(),
                "Page.getLayoutMetrics",
                json!({}),
                deadline,
                None,
                None,
            )
            .map_err(during)?;
        let (x, y, w, h) = viewport(&metrics).ok_or_else(|| {
            Error::CannotCapture("the page has no viewport (Page.getLayoutMetrics)".into())
        })?;
        let scale = (THUMBNAIL_WIDTH / w).min(1.0);
        let params = json!({
            "format": "jpeg",
            "quality": JPEG_QUALITY,
            "clip": {"x": x, "y": y, "width": w, "height": h, "scale": scale},
            "captureBeyondViewport": false,
        });
        let (shot, _) = self
            .call_on_session(sid, method, params, deadline, None, None)
            .map_err(during)?;
        let jpeg = shot
            .get("data")
            .and_then(Value::as_str)
            .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
            .ok_or_else(|| Error::CannotCapture("the browser sent no image data".into()))?;
        let (width, height) = jpeg_size(&jpeg)
            .ok_or_else(|| Error::CannotCapture("the browser's image is not a JPEG".into()))?;
        Ok(Thumbnail {
            jpeg,
            width,
            height,
            taken_at: Now::read().epoch,
            target_id,
        })
    }
}

/// The visible part of the page in CSS pixels, `(x, y, width, height)`, from
/// `Page.getLayoutMetrics`' `cssVisualViewport`.
fn viewport(metrics: &Value) -> Option<(f64, f64, f64, f64)> {
    let v = metrics.get("cssVisualViewport")?;
    let num = |k: &str| v.get(k).and_then(Value::as_f64);
    let (w, h) = (num("clientWidth")?, num("clientHeight")?);
    (w >= 1.0 && h >= 1.0).then(|| {
        (
            num("pageX").unwrap_or(0.0),
            num("pageY").unwrap_or(0.0),
            w,
            h,
        )
    })
}

/// The pixel size in a JPEG's start-of-frame header.
pub(crate) fn jpeg_size(jpeg: &[u8]) -> Option<(u32, u32)> {
    if jpeg.get(..2)? != [0xFF, 0xD8] {
        return None;
    }
    let mut i = 2;
    while i + 4 <= jpeg.len() {
        if jpeg[i] != 0xFF {
            return None;
        }
        let marker = jpeg[i + 1];
        let len = usize::from(u16::from_be_bytes([jpeg[i + 2], jpeg[i + 3]]));
        // SOF0..SOF15, except DHT (C4), JPG (C8) and DAC (CC).
        if (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker) {
            let h = u16::from_be_bytes([*jpeg.get(i + 5)?, *jpeg.get(i + 6)?]);
            let w = u16::from_be_bytes([*jpeg.get(i + 7)?, *jpeg.get(i + 8)?]);
            return Some((u32::from(w), u32::from(h)));
        }
        i += 2 + len;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jpeg_size_reads_the_frame_header_and_refuses_other_bytes() {
        // SOI, an APP0 segment of 4 bytes, then SOF0 for 320 x 240.
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00,
            0xF0, 0x01, 0x40, 0x03,
        ];
        assert_eq!(jpeg_size(&jpeg), Some((320, 240)));
        assert_eq!(jpeg_size(b"\x89PNG\r\n"), None);
        assert_eq!(jpeg_size(&jpeg[..10]), None);
        assert_eq!(jpeg_size(&[]), None);
    }

    #[test]
    fn viewport_needs_a_size() {
        let m = json!({"cssVisualViewport": {"pageX": 0, "pageY": 10, "clientWidth": 800, "clientHeight": 600}});
        assert_eq!(viewport(&m), Some((0.0, 10.0, 800.0, 600.0)));
        assert_eq!(
            viewport(&json!({"cssVisualViewport": {"clientWidth": 0, "clientHeight": 600}})),
            None
        );
        assert_eq!(viewport(&json!({})), None);
    }
}
