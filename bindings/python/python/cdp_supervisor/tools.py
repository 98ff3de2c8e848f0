"""The MCP tools as functions: each returns exactly the JSON text that ``cdp-supervisor mcp``
puts in the tool result's text content, for agents that hand tool results straight to a
model.

Arguments are the tools' own (SPEC §10), ``task_id`` included (``"default"`` when omitted).
Failures are results too (``{"success": false, "error": ...}``), never exceptions; an
argument the tool does not take is reported the way the MCP server reports it::

    from cdp_supervisor import SupervisorRegistry, tools

    reg = SupervisorRegistry()
    reg.get_or_start("t", "http://127.0.0.1:9222")
    print(tools.browser_snapshot(reg, task_id="t"))
    print(tools.browser_cdp(reg, method="Runtime.evaluate",
                            params={"expression": "document.title", "returnByValue": True},
                            task_id="t"))
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ._native import SupervisorRegistry, _call_tool

__all__ = ["browser_snapshot", "browser_dialog", "browser_cdp", "call"]


def _args(given: Dict[str, Any], extra: Dict[str, Any]) -> Dict[str, Any]:
    args = {k: v for k, v in given.items() if v is not None}
    args.update(extra)
    return args


def call(registry: SupervisorRegistry, name: str, arguments: Dict[str, Any]) -> str:
    """Runs tool ``name`` (``browser_snapshot``, ``browser_dialog`` or ``browser_cdp``) with
    its JSON arguments, as an MCP ``tools/call`` would."""
    return _call_tool(registry, name, dict(arguments))


def browser_snapshot(
    registry: SupervisorRegistry,
    *,
    task_id: Optional[str] = None,
    target_id: Optional[str] = None,
    **extra: Any,
) -> str:
    """The task's dialogs, frame tree, pages and state (``target_id``: a popup's)."""
    return _call_tool(
        registry, "browser_snapshot", _args({"task_id": task_id, "target_id": target_id}, extra)
    )


def browser_dialog(
    registry: SupervisorRegistry,
    action: Optional[str] = None,
    *,
    prompt_text: Optional[str] = None,
    dialog_id: Optional[str] = None,
    task_id: Optional[str] = None,
    **extra: Any,
) -> str:
    """Answers a pending dialog: ``action`` is ``"accept"`` or ``"dismiss"``."""
    return _call_tool(
        registry,
        "browser_dialog",
        _args(
            {
                "action": action,
                "prompt_text": prompt_text,
                "dialog_id": dialog_id,
                "task_id": task_id,
            },
            extra,
        ),
    )


def browser_cdp(
    registry: SupervisorRegistry,
    method: Optional[str] = None,
    params: Optional[Dict[str, Any]] = None,
    *,
    frame_id: Optional[str] = None,
    target_id: Optional[str] = None,
    timeout_s: Optional[float] = None,
    task_id: Optional[str] = None,
    **extra: Any,
) -> str:
    """A raw CDP call, routed by ``frame_id``/``target_id`` or by the method's domain."""
    return _call_tool(
        registry,
        "browser_cdp",
        _args(
            {
                "method": method,
                "params": params,
                "frame_id": frame_id,
                "target_id": target_id,
                "timeout_s": timeout_s,
                "task_id": task_id,
            },
            extra,
        ),
    )
