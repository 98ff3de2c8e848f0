"""The Hermes drop-in's constants, configuration and frozen dataclasses (Hermes's names, fields
and ``to_dict`` shapes), and the conversions from the native snapshot's objects to them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from .. import _native

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

# The drop-in's supervisors: the bridge on every session (Hermes installs it everywhere), the
# console captured (Hermes enables the Runtime domain for its console history), and Hermes's
# 10 s wait for a dialog answer's acknowledgement as the call deadline. Both opt-ins are visible
# to a page (README "Invisible supervision").
_CONFIG_KWARGS: Dict[str, Any] = {
    "dialog_bridge": "on",
    "capture_console": True,
    "call_timeout_s": 10.0,
}


def _config() -> _native.Config:
    return _native.Config(**_CONFIG_KWARGS)


def configure(**settings: Any) -> None:
    """Settings of ``cdp_supervisor.Config`` for the drop-in's supervisors started from now on
    (Hermes has no such call: its supervisor has no settings), over the drop-in's own (the
    bridge on, a 10 s call deadline). For instance, to let the agent answer file choosers::

        cdp_supervisor.hermes.configure(allow_file_access=True, upload_dirs=["/srv/uploads"])

    Invalid settings raise ``ConfigError`` here, not at the next start."""
    merged = dict(_CONFIG_KWARGS)
    merged.update(settings)
    _native.Config(**merged)
    _CONFIG_KWARGS.clear()
    _CONFIG_KWARGS.update(merged)


# Hermes before its owned tab (``legacy_first_page``): [attach to the browser's first page].
_LEGACY_FIRST_PAGE = [False]


def legacy_first_page(enabled: bool = True) -> None:
    """Makes the drop-in's supervisors started from now on choose their page as Hermes did
    before its owned tab (#69727, PR #75597): the browser's first page target, whatever its
    URL, and a tab of its own only for a second task on the same browser (closed at its stop).
    Hermes's own tests at those versions (4e898ab, 099e64b) act on that first page with a
    client of their own. The default (``enabled=False``) is Hermes as it is today: a fresh
    ``about:blank`` tab per task, never a page the browser already holds."""
    _LEGACY_FIRST_PAGE[0] = bool(enabled)


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
        # No session id: it is a routing detail that never reaches an LLM (Hermes now keeps
        # it out too; ``CDPSupervisor.get_frame_session`` is the way to learn it).
        d: Dict[str, Any] = {
            "frame_id": self.frame_id,
            "url": self.url,
            "origin": self.origin,
            "is_oopif": self.is_oopif,
        }
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


def _chooser(c: _native.FileChooser) -> PendingDialog:
    """A pending file chooser as Hermes's ``PendingDialog`` (``type == "file_chooser"``;
    answered with ``respond_to_file_chooser``)."""
    return PendingDialog(
        id=c.id,
        type="file_chooser",
        message=f"the page asks for {'one file' if c.mode == 'single' else 'files'}",
        default_prompt="",
        opened_at=c.opened_at,
        cdp_session_id="",
        frame_id=c.frame_id,
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
