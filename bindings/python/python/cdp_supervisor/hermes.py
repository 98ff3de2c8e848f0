"""A drop-in for Hermes Agent's ``tools/browser_supervisor.py`` and its ``browser_dialog`` /
``browser_cdp`` tool functions, on the Rust supervisor.

``from cdp_supervisor.hermes import *`` gives Hermes's public names with Hermes's signatures,
frozen dataclasses, constants and return shapes: ``SUPERVISOR_REGISTRY`` (a
``_SupervisorRegistry``), ``CDPSupervisor``, ``PendingDialog``, ``DialogRecord``, ``FrameInfo``,
``ConsoleEvent``, ``SupervisorSnapshot``, the ``DIALOG_POLICY_*`` constants, and
``browser_dialog`` / ``browser_cdp`` returning Hermes's JSON. Like Hermes, every page and child
session gets the dialog bridge (its dialogs carry a ``bridge_request_id``); our bridge host is
``cdp-dialog-bridge.invalid`` where Hermes's is ``hermes-dialog-bridge.invalid``.

What is not there: Hermes's asyncio internals (``_loop``, ``_state_lock``, ``_frames``,
``_cdp``, ...): the supervisor runs in Rust threads. The README of the repository lists every
difference.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from . import _native
from .errors import (
    BlockedByDialog,
    CdpError,
    CdpSupervisorError,
    NotActive,
    Timeout,
    UnknownFrame,
)

__all__ = [
    "CDPSupervisor",
    "ConsoleEvent",
    "DEFAULT_DIALOG_POLICY",
    "DEFAULT_DIALOG_TIMEOUT_S",
    "DIALOG_POLICY_AUTO_ACCEPT",
    "DIALOG_POLICY_AUTO_DISMISS",
    "DIALOG_POLICY_MUST_RESPOND",
    "DialogRecord",
    "FrameInfo",
    "PendingDialog",
    "SUPERVISOR_REGISTRY",
    "SupervisorSnapshot",
    "_SupervisorRegistry",
    "browser_dialog",
    "browser_cdp",
]

# ── Constants (Hermes's names and values) ────────────────────────────────────

DIALOG_POLICY_MUST_RESPOND = "must_respond"
DIALOG_POLICY_AUTO_DISMISS = "auto_dismiss"
DIALOG_POLICY_AUTO_ACCEPT = "auto_accept"

_VALID_POLICIES = frozenset(
    {DIALOG_POLICY_MUST_RESPOND, DIALOG_POLICY_AUTO_DISMISS, DIALOG_POLICY_AUTO_ACCEPT}
)

DEFAULT_DIALOG_POLICY = DIALOG_POLICY_MUST_RESPOND
DEFAULT_DIALOG_TIMEOUT_S = 300.0

FRAME_TREE_MAX_ENTRIES = 30
FRAME_TREE_MAX_OOPIF_DEPTH = 2
CONSOLE_HISTORY_MAX = 50
RECENT_DIALOGS_MAX = 20

# Ours, not Hermes's ``hermes-dialog-bridge.invalid``: the Rust supervisor's bridge script
# and Fetch patterns use this host.
DIALOG_BRIDGE_HOST: str = _native.DIALOG_BRIDGE_HOST
DIALOG_BRIDGE_URL_PATTERN = f"http://{DIALOG_BRIDGE_HOST}/*"

CDP_DOCS_URL = "https://chromedevtools.github.io/devtools-protocol/"

# The drop-in's supervisors: the bridge on every session (Hermes installs it everywhere), and
# Hermes's 10 s wait for a dialog answer's acknowledgement as the call deadline.
_CONFIG_KWARGS: Dict[str, Any] = {"dialog_bridge": "on", "call_timeout_s": 10.0}


def _config() -> _native.Config:
    return _native.Config(**_CONFIG_KWARGS)


_redactor: Optional[Callable[[str], str]] = None


def _redact_supervisor_text(value: str) -> str:
    """Page text through Hermes's redactor (``agent.redact``) when Hermes is around, as
    Hermes's own ``to_dict`` does; unchanged elsewhere."""
    global _redactor
    if _redactor is None:
        try:
            from agent.redact import redact_sensitive_text  # type: ignore[import-not-found]

            def _hermes(v: str) -> str:
                return str(redact_sensitive_text(v, force=True))

            _redactor = _hermes
        except Exception:

            def _identity(v: str) -> str:
                return v

            _redactor = _identity
    return _redactor(value)


# ── Data model (Hermes's dataclasses, frozen) ────────────────────────────────


@dataclass(frozen=True)
class PendingDialog:
    """A JS dialog currently open on some frame's session."""

    id: str
    type: str  # "alert" | "confirm" | "prompt" | "beforeunload"
    message: str
    default_prompt: str
    opened_at: float
    cdp_session_id: str
    frame_id: Optional[str] = None
    bridge_request_id: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "message": _redact_supervisor_text(self.message),
            "default_prompt": _redact_supervisor_text(self.default_prompt),
            "opened_at": self.opened_at,
            "frame_id": self.frame_id,
        }


@dataclass(frozen=True)
class DialogRecord:
    """A dialog that was opened and then closed (``recent_dialogs``)."""

    id: str
    type: str
    message: str
    opened_at: float
    closed_at: float
    closed_by: str  # "agent" | "auto_policy" | "remote" | "watchdog" | "connection_lost"
    frame_id: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "message": _redact_supervisor_text(self.message),
            "opened_at": self.opened_at,
            "closed_at": self.closed_at,
            "closed_by": self.closed_by,
            "frame_id": self.frame_id,
        }


@dataclass(frozen=True)
class FrameInfo:
    """One frame of the page's frame tree (``is_oopif``: its own CDP session)."""

    frame_id: str
    url: str
    origin: str
    parent_frame_id: Optional[str]
    is_oopif: bool
    cdp_session_id: Optional[str] = None
    name: str = ""

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {
            "frame_id": self.frame_id,
            "url": self.url,
            "origin": self.origin,
            "is_oopif": self.is_oopif,
        }
        if self.cdp_session_id:
            d["session_id"] = self.cdp_session_id
        if self.parent_frame_id:
            d["parent_frame_id"] = self.parent_frame_id
        if self.name:
            d["name"] = self.name
        return d


@dataclass(frozen=True)
class ConsoleEvent:
    """A console error/warning or uncaught exception."""

    ts: float
    level: str  # "error" | "warning" | "exception" (Hermes also keeps "log")
    text: str
    url: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return {"ts": self.ts, "level": self.level, "text": self.text, "url": self.url}


@dataclass(frozen=True)
class SupervisorSnapshot:
    """Read-only snapshot of supervisor state (the same object while nothing changed)."""

    pending_dialogs: Tuple[PendingDialog, ...]
    recent_dialogs: Tuple[DialogRecord, ...]
    frame_tree: Dict[str, Any]
    console_errors: Tuple[ConsoleEvent, ...]
    active: bool
    cdp_url: str
    task_id: str
    page_target_id: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        """Serialize for inclusion in ``browser_snapshot`` output."""
        out: Dict[str, Any] = {
            "pending_dialogs": [d.to_dict() for d in self.pending_dialogs],
            "frame_tree": self.frame_tree,
        }
        if self.recent_dialogs:
            out["recent_dialogs"] = [d.to_dict() for d in self.recent_dialogs]
        if self.page_target_id:
            out["page_target_id"] = self.page_target_id
        return out


def _pending(d: _native.PendingDialog) -> PendingDialog:
    return PendingDialog(
        id=d.id,
        type=d.type,
        message=d.message,
        default_prompt=d.default_prompt,
        opened_at=d.opened_at,
        cdp_session_id=d.session_id,
        frame_id=d.frame_id,
        bridge_request_id=d.bridge_request_id,
    )


def _record(c: _native.ClosedDialog) -> DialogRecord:
    return DialogRecord(
        id=c.id,
        type=c.type,
        message=c.message,
        opened_at=c.opened_at,
        closed_at=c.closed_at,
        closed_by=c.closed_by,
        frame_id=c.frame_id,
    )


def _console(c: _native.ConsoleEntry) -> ConsoleEvent:
    return ConsoleEvent(ts=c.ts, level=c.level, text=c.text, url=c.url or None)


def _frame_info(f: _native.FrameEntry) -> FrameInfo:
    return FrameInfo(
        frame_id=f.frame_id,
        url=f.url,
        origin=f.origin,
        parent_frame_id=f.parent_frame_id,
        is_oopif=f.is_oopif,
        cdp_session_id=f.session_id,
        name=f.name or "",
    )


# ── Supervisor ───────────────────────────────────────────────────────────────


class CDPSupervisor:
    """One supervisor per ``(task_id, cdp_url)``: Hermes's sync API over the Rust supervisor.

    ``start()`` connects and attaches (raising ``TimeoutError`` or ``RuntimeError`` like
    Hermes), ``snapshot()`` is a wait-free read, ``respond_to_dialog`` / ``evaluate_runtime`` /
    ``navigate_page`` return Hermes's ``{"ok": ...}`` dicts, ``stop()`` dismisses pending
    dialogs and closes the connection.
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
        self._new_page = False
        # The page to attach to when the caller named none (the registry's choice).
        self._attach_to: Optional[str] = None
        self._registry: Optional[_native.SupervisorRegistry] = None
        self._native: Optional[_native.Supervisor] = None
        # (native snapshot, its Hermes form): the same Hermes object while nothing changed.
        self._cached: Optional[Tuple[_native.Snapshot, SupervisorSnapshot]] = None

    # ── Public sync API ──────────────────────────────────────────────────

    def start(self, timeout: float = 15.0) -> None:
        """Connects and attaches; raises ``TimeoutError`` when that takes longer than
        ``timeout`` and ``RuntimeError`` for any other failure (credentials redacted)."""
        if self._native is not None and self._native.is_alive:
            return
        if self._registry is None:
            self._registry = _native.SupervisorRegistry(_config())
        try:
            self._native = self._registry.get_or_start(
                self.task_id,
                self.cdp_url,
                target_id=self.target_id or self._attach_to,
                dialog_policy=self.dialog_policy,
                dialog_timeout_s=self.dialog_timeout_s,
                start_timeout_s=timeout,
                new_page=self._new_page,
            )
        except Timeout as e:
            raise TimeoutError(
                f"CDP supervisor did not attach within {timeout}s: {e}"
            ) from None
        except CdpSupervisorError as e:
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
            if prev is not None and old is not None and old.pending_dialogs is snap.pending_dialogs
            else tuple(_pending(d) for d in snap.pending_dialogs),
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
    ) -> Dict[str, Any]:
        """Accepts or dismisses a pending dialog: ``{"ok": True, "dialog": {...}}``, or
        ``{"ok": False, "error": "..."}`` (no dialog, unknown or ambiguous ``dialog_id``,
        supervisor not active)."""
        if action not in {"accept", "dismiss"}:
            return {"ok": False, "error": f"action must be 'accept' or 'dismiss', got {action!r}"}
        native = self._native
        if native is None or not native.is_active:
            return {"ok": False, "error": "supervisor is not active"}
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

    def navigate_page(self, url: str, timeout: float = 30.0) -> Dict[str, Any]:
        """Navigates this supervisor's own page: ``{"ok": True, "target_id", "frame_id",
        "loader_id"}`` or ``{"ok": False, "error": ...}``."""
        native = self._native
        if native is None or not native.is_active:
            return {"ok": False, "error": "supervisor is not active"}
        target = native.page_target_id
        try:
            result = native.call("Page.navigate", {"url": url}, timeout_s=timeout)
        except CdpSupervisorError as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "target_id": target}
        if not isinstance(result, dict):
            result = {}
        if result.get("errorText"):
            return {"ok": False, "error": str(result["errorText"]), "target_id": target}
        return {
            "ok": True,
            "target_id": target,
            "frame_id": result.get("frameId"),
            "loader_id": result.get("loaderId"),
        }

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


# ── Registry ─────────────────────────────────────────────────────────────────


class _SupervisorRegistry:
    """Process-global ``task_id -> CDPSupervisor`` map with idempotent start and stop.

    Tasks that share a browser get a page each: the first takes the browser's first page,
    the others open one of their own (closed again when they stop).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_task: Dict[str, CDPSupervisor] = {}
        self._native = _native.SupervisorRegistry(_config())

    def get(self, task_id: str) -> Optional[CDPSupervisor]:
        """The supervisor of ``task_id`` if one was started, else ``None``."""
        with self._lock:
            return self._by_task.get(task_id)

    def get_or_start(
        self,
        task_id: str,
        cdp_url: str,
        *,
        target_id: Optional[str] = None,
        dialog_policy: str = DEFAULT_DIALOG_POLICY,
        dialog_timeout_s: float = DEFAULT_DIALOG_TIMEOUT_S,
        start_timeout: float = 15.0,
    ) -> CDPSupervisor:
        """The running supervisor of ``(task_id, cdp_url)``, started when there is none (or
        the task's was bound to another URL or has died)."""
        supervisor = CDPSupervisor(
            task_id, cdp_url, dialog_policy=dialog_policy, dialog_timeout_s=dialog_timeout_s
        )
        with self._lock:
            existing = self._by_task.get(task_id)
            if (
                existing is not None
                and existing._alive()
                and existing._same_start(cdp_url, target_id, dialog_policy, dialog_timeout_s)
            ):
                return existing
            supervisor._new_page = target_id is None and any(
                s.cdp_url == cdp_url and s._alive()
                for t, s in self._by_task.items()
                if t != task_id
            )
        supervisor.target_id = target_id
        if target_id is None and not supervisor._new_page:
            # Hermes attaches to the browser's first page, whatever its URL.
            supervisor._attach_to = _native._first_page_target(cdp_url, min(start_timeout, 5.0))
        supervisor._registry = self._native
        supervisor.start(timeout=start_timeout)
        with self._lock:
            already = self._by_task.get(task_id)
            if already is not None and already._native is supervisor._native:
                return already  # a concurrent caller got the same supervisor first
            self._by_task[task_id] = supervisor
        return supervisor

    def stop(self, task_id: str) -> None:
        """Stops and forgets the supervisor of ``task_id`` if there is one."""
        with self._lock:
            supervisor = self._by_task.pop(task_id, None)
        if supervisor is not None:
            self._native.stop(task_id)

    def stop_all(self) -> None:
        """Stops every supervisor."""
        with self._lock:
            self._by_task.clear()
        self._native.stop_all()


SUPERVISOR_REGISTRY = _SupervisorRegistry()


# ── Tool functions (Hermes's browser_dialog_tool / browser_cdp_tool) ─────────


def browser_dialog(
    action: str,
    prompt_text: Optional[str] = None,
    dialog_id: Optional[str] = None,
    task_id: Optional[str] = None,
) -> str:
    """Responds to a pending dialog of the task's supervisor; Hermes's JSON result."""
    effective_task_id = task_id or "default"
    supervisor = SUPERVISOR_REGISTRY.get(effective_task_id)
    if supervisor is None:
        return json.dumps(
            {
                "success": False,
                "error": (
                    "No CDP supervisor is attached to this task. Either the browser backend "
                    "doesn't expose CDP or no browser session has been started yet. Call "
                    "browser_navigate or /browser connect first."
                ),
            }
        )
    result = supervisor.respond_to_dialog(
        action=action, prompt_text=prompt_text, dialog_id=dialog_id
    )
    if result.get("ok"):
        return json.dumps({"success": True, "action": action, "dialog": result.get("dialog", {})})
    return json.dumps({"success": False, "error": result.get("error", "unknown error")})


def _tool_error(message: str, **extra: Any) -> str:
    out: Dict[str, Any] = {"error": message}
    out.update(extra)
    return json.dumps(out, ensure_ascii=False)


def browser_cdp(
    method: str,
    params: Optional[Dict[str, Any]] = None,
    target_id: Optional[str] = None,
    frame_id: Optional[str] = None,
    timeout: float = 30.0,
    task_id: Optional[str] = None,
) -> str:
    """Sends a raw CDP command over the task's supervisor: ``frame_id`` into that frame,
    ``target_id`` into a target the supervisor tracks, otherwise by the method's domain (the
    browser for ``Target.*``, ``Browser.*``, ...; the task's page for the rest). Hermes's JSON:
    ``{"success": True, "method", "result", ...}`` or ``{"error": ...}``."""
    effective_task_id = task_id or "default"
    supervisor = SUPERVISOR_REGISTRY.get(effective_task_id)
    if supervisor is None or supervisor._native is None:
        return _tool_error(
            f"No CDP supervisor is attached for task={effective_task_id!r}. Call "
            "browser_navigate or /browser connect first so the supervisor can attach. Once "
            "attached, browser_snapshot will populate frame_tree with frame_ids you can pass "
            "here."
        )
    if not method or not isinstance(method, str):
        return _tool_error("'method' is required (e.g. 'Target.getTargets')", cdp_docs=CDP_DOCS_URL)
    call_params: Dict[str, Any] = params or {}
    if not isinstance(call_params, dict):
        return _tool_error(f"'params' must be an object/dict, got {type(call_params).__name__}")
    native = supervisor._native
    session_id: Optional[str] = None
    if frame_id:
        frame = native.snapshot().find_frame(frame_id)
        if frame is None:
            return _tool_error(
                f"frame_id {frame_id!r} not found in supervisor state. "
                "Call browser_snapshot to see current frame_tree."
            )
        session_id = frame.session_id
    try:
        safe_timeout = float(timeout) if timeout else 30.0
    except (TypeError, ValueError):
        safe_timeout = 30.0
    safe_timeout = max(1.0, min(safe_timeout, 300.0))
    try:
        result = native.call(
            method,
            call_params,
            frame_id=frame_id or None,
            target_id=None if frame_id else (target_id or None),
            timeout_s=safe_timeout,
        )
    except UnknownFrame:
        return _tool_error(
            f"frame_id {frame_id!r} not found in supervisor state. "
            "Call browser_snapshot to see current frame_tree."
        )
    except BlockedByDialog as exc:
        return _tool_error(str(exc), method=method, blocked_by_dialog=_pending(exc.dialog).to_dict())
    except Timeout as exc:
        return _tool_error(f"CDP call timed out after {safe_timeout}s: {exc}", method=method)
    except CdpError as exc:
        return _tool_error(f"CDP error: {exc}", method=method)
    except NotActive as exc:
        return _tool_error(str(exc), method=method)
    except CdpSupervisorError as exc:
        return _tool_error(str(exc), method=method)
    payload: Dict[str, Any] = {"success": True, "method": method}
    if frame_id:
        payload["frame_id"] = frame_id
        if session_id:
            payload["session_id"] = session_id
    elif target_id:
        payload["target_id"] = target_id
    payload["result"] = result
    return json.dumps(payload, ensure_ascii=False)
