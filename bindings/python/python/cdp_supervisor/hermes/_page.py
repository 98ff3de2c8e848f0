"""What Hermes's supervisor does with its task's own tab (issue 31): ``navigate_page``,
``page_target_tab_ref``, ``get_frame_session``, ``wait_for_download`` and answering file
choosers, with Hermes's return shapes, over the native supervisor (``CDPSupervisor`` takes them
from here)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .._native import FrameEntry as _FrameEntry
from .._native import Supervisor as _Supervisor
from ..errors import (
    BlockedByDialog,
    CdpSupervisorError,
    NavigationFailed,
    NoDownload,
    NoPage,
)
from ._model import FrameInfo, _frame_info, _pending

# How long ``wait_for_download`` waits for a download to begin (Hermes's grace; the native
# supervisor's own is the same 2 s).
DOWNLOAD_BEGIN_GRACE_S = 2.0


class _PageMethods:
    """The page methods of ``CDPSupervisor``."""

    task_id: str
    _native: Optional[_Supervisor]

    def _live(self) -> Optional[_Supervisor]:
        native = self._native
        return native if native is not None and native.is_active else None

    def navigate_page(self, url: str, timeout: float = 30.0) -> Dict[str, Any]:
        """Brings the task's tab to the front (``Target.activateTarget``) and navigates it on
        its own session: ``{"ok": True, "target_id", "frame_id", "loader_id"}`` once the new
        document has loaded. It never waits on a dialog: one that opens before then (the
        ``beforeunload`` of the page being left, an alert or prompt while the new page loads)
        returns at once ``{"ok": False, "error", "dialog", "target_id"}``; answer it, then
        ``wait_for_navigation`` completes the same navigation. A network error is
        ``{"ok": False, "error": "net::ERR_...", "target_id"}``."""
        native = self._live()
        if native is None:
            return {"ok": False, "error": "supervisor is not active"}
        target = native.page_target_id
        try:
            nav = native.navigate(url, "load", timeout_s=max(0.001, float(timeout)))
        except BlockedByDialog as exc:
            return {
                "ok": False,
                "error": str(exc),
                "dialog": _pending(exc.dialog).to_dict(),
                "target_id": target,
            }
        except NavigationFailed as exc:
            return {"ok": False, "error": exc.error, "target_id": target}
        except CdpSupervisorError as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "target_id": target}
        return {
            "ok": True,
            "target_id": target,
            "frame_id": nav.get("frame_id"),
            "loader_id": nav.get("loader_id"),
        }

    def wait_for_navigation(self, timeout: float = 30.0, wait_until: str = "load") -> Dict[str, Any]:
        """Waits for the latest ``navigate_page`` (after the dialog that stopped it was
        answered): ``{"ok": True, "target_id", "frame_id", "loader_id"}`` or ``{"ok": False,
        "error", "dialog"?}``. Not in Hermes: the drop-in's own."""
        native = self._live()
        if native is None:
            return {"ok": False, "error": "supervisor is not active"}
        target = native.page_target_id
        try:
            nav = native.wait_for_navigation(wait_until, timeout_s=max(0.001, float(timeout)))
        except BlockedByDialog as exc:
            return {"ok": False, "error": str(exc), "dialog": _pending(exc.dialog).to_dict()}
        except NavigationFailed as exc:
            return {"ok": False, "error": exc.error, "target_id": target}
        except CdpSupervisorError as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "target_id": target}
        return {
            "ok": True,
            "target_id": target,
            "frame_id": nav.get("frame_id"),
            "loader_id": nav.get("loader_id"),
        }

    def page_target_tab_ref(self) -> Dict[str, Any]:
        """``{"ok": True, "target_id", "tab_ref": "tN"}``: N is the task's tab's 1-based
        position among the browser's page targets in ``Target.getTargets`` order, ``devtools://``
        pages not counted (agent-browser's tab numbering)."""
        native = self._live()
        if native is None:
            return {"ok": False, "error": "supervisor is not active"}
        target = native.page_target_id
        try:
            tab = native.tab_ref()
        except NoPage as exc:
            return {"ok": False, "error": str(exc), "target_id": target}
        except CdpSupervisorError as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "target_id": target}
        return {"ok": True, "target_id": target, "tab_ref": tab}

    def get_frame_session(self, frame_id: str) -> Optional[Tuple[FrameInfo, str]]:
        """The frame ``frame_id`` and the CDP session that serves it (an out-of-process
        iframe's own, else the one of the document it lives in): the one way to learn a frame's
        session, since no ``to_dict()`` shows one. ``None`` for a frame the supervisor does not
        know."""
        native = self._native
        if native is None or not frame_id:
            return None
        snap = native.snapshot()
        frame = snap.find_frame(frame_id)
        if frame is None:
            return None
        at: Optional[_FrameEntry] = frame
        for _ in range(64):  # a bounded walk up to the session's root
            if at is None:
                break
            if at.is_oopif and at.session_id:
                return _frame_info(frame), at.session_id
            if at.parent_frame_id is None:
                break
            at = snap.find_frame(at.parent_frame_id)
        session = snap.page_session_id
        return (_frame_info(frame), session) if session else None

    def wait_for_download(self, timeout: float = 30.0) -> Dict[str, Any]:
        """The next download of the task's, once it has begun and completed:
        ``{"ok": True, "filename", "guid", "path"}`` (``filename``: the name the page
        suggested; ``path``: the file, in the task's download directory). When none is under
        way it waits about 2 s for a late ``downloadWillBegin``, then returns
        ``{"ok": False, "error": "... no pending download ..."}``; a cancelled or failed one is
        ``{"ok": False, "error", "guid", "filename"}``."""
        native = self._live()
        if native is None:
            return {"ok": False, "error": "supervisor is not active"}
        try:
            d = native.wait_for_download(max(0.001, float(timeout)))
        except NoDownload as exc:
            return {"ok": False, "error": f"CDP supervisor: {exc}"}
        except CdpSupervisorError as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        if d.state != "completed":
            return {
                "ok": False,
                "error": f"the download {d.suggested_filename!r} was {d.state}",
                "guid": d.guid,
                "filename": d.suggested_filename,
            }
        return {"ok": True, "filename": d.suggested_filename, "guid": d.guid, "path": d.path}

    def respond_to_file_chooser(
        self, files: List[str], dialog_id: Optional[str] = None, dismiss: bool = False
    ) -> Dict[str, Any]:
        """Answers a pending file chooser (``fc-N``; may be left out when one is pending) with
        ``files`` (paths inside ``security.upload_dirs``; needs ``security.allow_file_access``),
        or dismisses it: ``{"ok": True, "dialog": {...}}`` or ``{"ok": False, "error"}``."""
        native = self._live()
        if native is None:
            return {"ok": False, "error": "supervisor is not active"}
        try:
            if dismiss:
                c = native.dismiss_file_chooser(dialog_id or None)
            elif not files:
                return {"ok": False, "error": "accepting a file chooser needs files"}
            else:
                c = native.respond_to_file_chooser(files, dialog_id or None)
        except CdpSupervisorError as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": True, "dialog": c.to_dict()}
