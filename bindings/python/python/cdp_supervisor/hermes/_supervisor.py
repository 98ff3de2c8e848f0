"""``CDPSupervisor``: Hermes's synchronous supervisor API over one native supervisor (its page
methods, issue 31, are in ``_page``)."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple

from .. import _native
from ..errors import CdpError, CdpSupervisorError, ConnectionLost, NoPage, Timeout
from . import _model
from ._model import (
    DEFAULT_DIALOG_POLICY,
    DEFAULT_DIALOG_TIMEOUT_S,
    SupervisorSnapshot,
    _VALID_POLICIES,
    _config,
    _console,
    _chooser,
    _pending,
    _record,
)
from ._page import _PageMethods

# How many pages ``CDPSupervisor.start`` tries, after ``legacy_first_page()``, when the ones it
# chose go away under it.
_PAGE_ATTEMPTS = 5


def _page_went_away(e: CdpSupervisorError) -> bool:
    """The start failed because the page it chose is gone: listed by ``Target.getTargets``
    but closed before or while the supervisor attached (``NoPage``: no such target any more;
    ``Target.attachToTarget``'s "No target with given id found"; the page's session detached
    during the attach)."""
    if isinstance(e, (NoPage, ConnectionLost)):
        return True
    return isinstance(e, CdpError) and e.method == "Target.attachToTarget"


def _remaining(deadline: float, timeout: float) -> float:
    """What is left of a start's ``timeout`` (never zero: a start needs a bound > 0)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(f"CDP supervisor did not attach within {timeout}s")
    return left


# ── Supervisor ───────────────────────────────────────────────────────────────


class CDPSupervisor(_PageMethods):
    """One supervisor per ``(task_id, cdp_url)``: Hermes's sync API over the Rust supervisor.

    ``start()`` connects and attaches to a page of the task's own, like Hermes now does (a
    fresh ``about:blank`` tab, never a page the browser already holds, re-attached after a
    reconnect and closed at stop), unless ``target_id`` names one; it raises
    ``TimeoutError`` or ``RuntimeError`` like Hermes. ``snapshot()`` is a wait-free read;
    ``respond_to_dialog`` / ``evaluate_runtime`` / ``navigate_page`` / ``wait_for_download``
    return Hermes's ``{"ok": ...}`` dicts; ``stop()`` dismisses pending dialogs, closes the
    task's tab and the connection.
    """

    def __init__(
        self,
        task_id: str,
        cdp_url: str,
        *,
        dialog_policy: str = DEFAULT_DIALOG_POLICY,
        dialog_timeout_s: float = DEFAULT_DIALOG_TIMEOUT_S,
    ) -> None:
        if dialog_policy not in _VALID_POLICIES:
            raise ValueError(
                f"Invalid dialog_policy {dialog_policy!r}; "
                f"must be one of {sorted(_VALID_POLICIES)}"
            )
        self.task_id = task_id
        self.cdp_url = cdp_url
        self.dialog_policy = dialog_policy
        self.dialog_timeout_s = float(dialog_timeout_s)
        self.target_id: Optional[str] = None
        # After ``legacy_first_page()``: the registry says this task opens a page of its own.
        self._new_page = False
        self._registry: Optional[_native.SupervisorRegistry] = None
        self._native: Optional[_native.Supervisor] = None
        # (native snapshot, its Hermes form): the same Hermes object while nothing changed.
        self._cached: Optional[Tuple[_native.Snapshot, SupervisorSnapshot]] = None

    # ── Public sync API ──────────────────────────────────────────────────

    def start(self, timeout: float = 15.0) -> None:
        """Connects and attaches; raises ``TimeoutError`` when that takes longer than
        ``timeout`` and ``RuntimeError`` for any other failure (credentials redacted).

        Without a ``target_id`` the task gets a page of its own, as Hermes's supervisor does:
        a fresh ``about:blank`` tab (in a window of its own), never a page the browser already
        holds. After ``legacy_first_page()`` it attaches, like Hermes before, to the browser's
        first page (a second task on the browser opens a tab of its own); a page that goes
        away between that choice and the attach (a page just closed stays listed for a few
        hundred milliseconds) is passed over for the next one, within the same ``timeout``."""
        if self._native is not None and self._native.is_alive:
            return
        if self._registry is None:
            self._registry = _native.SupervisorRegistry(_config())
        if not timeout > 0:
            raise TimeoutError(f"CDP supervisor did not attach within {timeout}s")
        legacy = _model._LEGACY_FIRST_PAGE[0] and self.target_id is None and not self._new_page
        deadline = time.monotonic() + timeout
        tried: List[str] = []
        while True:
            attach_to = self.target_id
            if legacy:
                left = deadline - time.monotonic()
                attach_to = _native._first_page_target(self.cdp_url, max(0.0, min(left, 5.0)), tried)
            try:
                self._native = self._registry.get_or_start(
                    self.task_id,
                    self.cdp_url,
                    target_id=attach_to,
                    dialog_policy=self.dialog_policy,
                    dialog_timeout_s=self.dialog_timeout_s,
                    start_timeout_s=_remaining(deadline, timeout),
                    own_page=attach_to is None,
                )
                return
            except Timeout as e:
                raise TimeoutError(f"CDP supervisor did not attach within {timeout}s: {e}") from None
            except CdpSupervisorError as e:
                if (
                    legacy
                    and attach_to is not None
                    and _page_went_away(e)
                    and len(tried) < _PAGE_ATTEMPTS
                    and time.monotonic() < deadline
                ):
                    tried.append(attach_to)
                    continue
                raise RuntimeError(f"CDP supervisor failed to start: {e}") from None

    def stop(self, timeout: float = 5.0) -> None:
        """Dismisses pending dialogs, closes the connection, joins the threads (< 1 s)."""
        if self._native is not None:
            self._native.stop()

    def snapshot(self) -> SupervisorSnapshot:
        """An immutable snapshot of the current state (wait-free)."""
        native = self._native
        if native is None:
            return SupervisorSnapshot(
                pending_dialogs=(),
                recent_dialogs=(),
                frame_tree={"top": None, "children": [], "truncated": False},
                console_errors=(),
                active=False,
                cdp_url=self.cdp_url,
                task_id=self.task_id,
            )
        snap = native.snapshot()
        cached = self._cached
        if cached is not None and cached[0] is snap:
            return cached[1]
        prev = cached[1] if cached is not None else None
        old = cached[0] if cached is not None else None
        out = SupervisorSnapshot(
            pending_dialogs=prev.pending_dialogs
            if prev is not None
            and old is not None
            and old.pending_dialogs is snap.pending_dialogs
            and old.file_choosers is snap.file_choosers
            else tuple(_pending(d) for d in snap.pending_dialogs)
            + tuple(_chooser(c) for c in snap.file_choosers),
            recent_dialogs=prev.recent_dialogs
            if prev is not None and old is not None and old.recent_dialogs is snap.recent_dialogs
            else tuple(_record(c) for c in snap.recent_dialogs),
            frame_tree=prev.frame_tree
            if prev is not None and old is not None and old.frame_tree is snap.frame_tree
            else snap.frame_tree.to_dict(),
            console_errors=prev.console_errors
            if prev is not None and old is not None and old.console_errors is snap.console_errors
            else tuple(_console(c) for c in snap.console_errors),
            active=snap.active,
            cdp_url=snap.cdp_url,
            task_id=self.task_id,
            page_target_id=snap.page_target_id,
        )
        self._cached = (snap, out)
        return out

    def resolve_target_session(self, target_id: str) -> Optional[str]:
        """The live CDP session of a target this supervisor tracks (its page, an OOPIF), or
        ``None``."""
        native = self._native
        if not target_id or native is None:
            return None
        snap = native.snapshot()
        if target_id == snap.page_target_id:
            return snap.page_session_id
        frame = snap.find_frame(target_id)
        return frame.session_id if frame is not None else None

    def page_target_id(self) -> Optional[str]:
        """The CDP target id of the page this supervisor attached to."""
        native = self._native
        return native.page_target_id if native is not None else None

    def respond_to_dialog(
        self,
        action: str,
        *,
        prompt_text: Optional[str] = None,
        dialog_id: Optional[str] = None,
        timeout: float = 10.0,
        files: Optional[List[str]] = None,
    ) -> Dict[str, Any]:
        """Accepts or dismisses a pending dialog: ``{"ok": True, "dialog": {...}}``, or
        ``{"ok": False, "error": "..."}`` (no dialog, unknown or ambiguous ``dialog_id``,
        supervisor not active). A pending file chooser (``fc-N``, or ``files`` given) is
        answered with ``files`` (``respond_to_file_chooser``)."""
        if action not in {"accept", "dismiss"}:
            return {"ok": False, "error": f"action must be 'accept' or 'dismiss', got {action!r}"}
        native = self._native
        if native is None or not native.is_active:
            return {"ok": False, "error": "supervisor is not active"}
        snap = native.snapshot()
        chooser = (dialog_id or "").startswith("fc-") or (
            not dialog_id and not snap.pending_dialogs and bool(snap.file_choosers)
        )
        if files is not None or chooser:
            return self.respond_to_file_chooser(
                list(files or []), dialog_id=dialog_id, dismiss=action == "dismiss"
            )
        try:
            # As Hermes: accepting a prompt without text answers "".
            answered = native.respond_to_dialog(
                action, prompt_text=prompt_text or "", dialog_id=dialog_id or None
            )
        except CdpSupervisorError as e:
            return {"ok": False, "error": str(e)}
        return {"ok": True, "dialog": _pending(answered).to_dict()}

    def evaluate_runtime(
        self,
        expression: str,
        *,
        return_by_value: bool = True,
        await_promise: bool = True,
        timeout: float = 10.0,
    ) -> Dict[str, Any]:
        """Evaluates ``expression`` in the page over the supervisor's connection:
        ``{"ok": True, "result": ..., "result_type": "..."}``, or ``{"ok": False, "error":
        "..."}`` (a JavaScript exception's text included)."""
        native = self._native
        if native is None or not native.is_active:
            return {"ok": False, "error": "supervisor is not active"}

        def run(by_value: bool) -> Any:
            return native.call(
                "Runtime.evaluate",
                {
                    "expression": expression,
                    "returnByValue": by_value,
                    "awaitPromise": await_promise,
                    "userGesture": True,
                },
                timeout_s=timeout,
            )

        try:
            response = run(return_by_value)
        except CdpSupervisorError as exc:
            # Deep-serialising a live DOM object can exceed CDP's recursion guard: retry once
            # for its description instead.
            if return_by_value and "reference chain is too long" in str(exc).lower():
                try:
                    response = run(False)
                except CdpSupervisorError as exc2:
                    return {"ok": False, "error": f"{type(exc2).__name__}: {exc2}"}
            else:
                return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        payload = response if isinstance(response, dict) else {}
        details = payload.get("exceptionDetails")
        if details:
            text = details.get("text") or "JavaScript exception"
            description = (details.get("exception") or {}).get("description")
            if description:
                text = f"{text}: {description}"
            return {"ok": False, "error": text}
        result = payload.get("result") or {}
        result_type = result.get("type", "undefined")
        if "value" in result:
            value = result["value"]
        elif result_type == "undefined":
            value = None
        else:
            value = result.get("description") or result.get("unserializableValue")
        return {"ok": True, "result": value, "result_type": result_type}

    def __repr__(self) -> str:
        state = self._native.state if self._native is not None else "not started"
        return f"CDPSupervisor(task_id={self.task_id!r}, state={state!r})"

    # ── The drop-in's own ────────────────────────────────────────────────

    def _alive(self) -> bool:
        return self._native is not None and self._native.is_alive

    def _same_start(self, cdp_url: str, target_id: Optional[str], policy: str, timeout_s: float) -> bool:
        return (
            self.cdp_url == cdp_url
            and self.target_id == target_id
            and self.dialog_policy == policy
            and self.dialog_timeout_s == float(timeout_s)
        )
