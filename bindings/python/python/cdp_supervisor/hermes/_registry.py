"""``SUPERVISOR_REGISTRY`` and the tool functions over it (Hermes's ``browser_dialog_tool`` and
``browser_cdp_tool``), returning Hermes's JSON."""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Dict, List, Optional

from .. import _native
from ..errors import BlockedByDialog, CdpError, CdpSupervisorError, NotActive, Timeout, UnknownFrame
from . import _model
from ._model import CDP_DOCS_URL, DEFAULT_DIALOG_POLICY, DEFAULT_DIALOG_TIMEOUT_S, _config, _pending
from ._supervisor import CDPSupervisor


# ── Registry ─────────────────────────────────────────────────────────────────


class _SupervisorRegistry:
    """Process-global ``task_id -> CDPSupervisor`` map with idempotent start and stop.

    Every task gets a page of its own (a fresh ``about:blank`` tab, closed again when it
    stops), as Hermes's registry now does: two tasks on one browser get two tabs, and no
    page the browser already held is touched.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_task: Dict[str, CDPSupervisor] = {}
        self._native = _native.SupervisorRegistry(_config())
        self._settings: Dict[str, Any] = dict(_model._CONFIG_KWARGS)

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
            # Hermes before its owned tab: the first task takes the browser's first page, the
            # others open one of their own.
            supervisor._new_page = _model._LEGACY_FIRST_PAGE[0] and target_id is None and any(
                s.cdp_url == cdp_url and s._alive()
                for t, s in self._by_task.items()
                if t != task_id
            )
        supervisor.target_id = target_id
        with self._lock:
            if self._settings != _model._CONFIG_KWARGS:
                # ``configure()`` changed the settings: supervisors started from now on get
                # them (those running keep theirs).
                self._settings = dict(_model._CONFIG_KWARGS)
                self._native = _native.SupervisorRegistry(_config())
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
            (supervisor._registry or self._native).stop(task_id)

    def stop_all(self) -> None:
        """Stops every supervisor."""
        with self._lock:
            registries = [s._registry for s in self._by_task.values() if s._registry is not None]
            registries.append(self._native)
            self._by_task.clear()
        for registry in {id(r): r for r in registries}.values():
            registry.stop_all()


    def _after_fork_in_child(self) -> None:
        """In a child of ``os.fork()``: the parent's supervisors (and a lock a parent thread may
        have held) stay with the parent; the child starts with an empty registry of its own."""
        self._lock = threading.Lock()
        self._by_task = {}
        self._native = _native.SupervisorRegistry(_config())


SUPERVISOR_REGISTRY = _SupervisorRegistry()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=SUPERVISOR_REGISTRY._after_fork_in_child)


# ── Tool functions (Hermes's browser_dialog_tool / browser_cdp_tool) ─────────


def browser_dialog(
    action: str,
    prompt_text: Optional[str] = None,
    dialog_id: Optional[str] = None,
    task_id: Optional[str] = None,
    files: Optional[List[str]] = None,
) -> str:
    """Responds to a pending dialog of the task's supervisor; Hermes's JSON result. A pending
    file chooser (``fc-N``) is answered with ``files`` (or dismissed)."""
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
        action=action, prompt_text=prompt_text, dialog_id=dialog_id, files=files
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
    if frame_id and native.snapshot().find_frame(frame_id) is None:
        return _tool_error(
            f"frame_id {frame_id!r} not found in supervisor state. "
            "Call browser_snapshot to see current frame_tree."
        )
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
    # Unlike Hermes's, the result names no CDP session: session ids never reach an LLM
    # (``CDPSupervisor.get_frame_session`` is the way to learn one).
    payload: Dict[str, Any] = {"success": True, "method": method}
    if frame_id:
        payload["frame_id"] = frame_id
    elif target_id:
        payload["target_id"] = target_id
    payload["result"] = result
    return json.dumps(payload, ensure_ascii=False)
