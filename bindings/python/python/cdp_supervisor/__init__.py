"""cdp_supervisor: one persistent Chrome DevTools Protocol connection per browser task,
in-process.

It catches native JavaScript dialogs (``alert``, ``confirm``, ``prompt``, ``beforeunload``)
the moment they block a page and lets you answer them, tracks the frame tree (cross-origin
out-of-process iframes included), routes CDP calls into any frame, and publishes all of it as
an immutable snapshot that any thread reads without a lock::

    from cdp_supervisor import SupervisorRegistry, Config

    reg = SupervisorRegistry(Config(dialog_policy="must_respond"))
    sup = reg.get_or_start("task-1", "http://127.0.0.1:9222")
    if (d := sup.wait_for_dialog(5.0)) is not None:
        sup.respond_to_dialog("accept", prompt_text="yes", dialog_id=d.id)
    print(sup.snapshot().frame_tree)
    reg.stop_all()

The work is done by the Rust crate ``cdp-supervisor`` (no Python thread, no asyncio): every
blocking call releases the GIL, and Ctrl-C ends a wait on the main thread.
:mod:`cdp_supervisor.tools` returns the MCP tools' JSON, :mod:`cdp_supervisor.testing` has a
fake browser, and :mod:`cdp_supervisor.hermes` is a drop-in for Hermes Agent's
``tools/browser_supervisor.py``.
"""

from __future__ import annotations

from . import errors
from ._native import (
    Blocked,
    CdpEndpoint,
    ClosedDialog,
    Config,
    ConsoleEntry,
    Download,
    FileChooser,
    FrameEntry,
    FrameTree,
    PageInfo,
    PendingDialog,
    Snapshot,
    Supervisor,
    SupervisorRegistry,
    __version__,
)
from .errors import (
    CdpSupervisorError,
    InvalidArgument,
    ConfigError,
    InvalidConfig,
    InvalidUrl,
    UnknownFrame,
    UnknownTarget,
    ConnectError,
    ConnectionLost,
    NotActive,
    NoPage,
    Timeout,
    StartTimeout,
    CdpError,
    BlockedByDialog,
    DialogError,
    NoDialog,
    UnknownDialog,
    AmbiguousDialog,
    DialogAlreadyClosed,
    AnswerAppliedToOtherDialog,
    DialogUnanswerable,
    PageBlocked,
    OrphanedDialog,
    PageUnresponsive,
    DialogInUnfollowedPage,
    SecurityPolicy,
    TargetCrashed,
    UndecodableReply,
    Cancelled,
    StartCancelled,
    NavigationFailed,
    NoDownload,
    RegistryClosed,
    HeldByHuman,
    CannotCapture,
    UsedAfterFork,
    IoError,
)

__all__ = [
    "Blocked",
    "CdpEndpoint",
    "ClosedDialog",
    "Config",
    "ConsoleEntry",
    "Download",
    "FileChooser",
    "FrameEntry",
    "FrameTree",
    "PageInfo",
    "PendingDialog",
    "Snapshot",
    "Supervisor",
    "SupervisorRegistry",
    "__version__",
    "errors",
    "CdpSupervisorError",
    "InvalidArgument",
    "ConfigError",
    "InvalidConfig",
    "InvalidUrl",
    "UnknownFrame",
    "UnknownTarget",
    "ConnectError",
    "ConnectionLost",
    "NotActive",
    "NoPage",
    "Timeout",
    "StartTimeout",
    "CdpError",
    "BlockedByDialog",
    "DialogError",
    "NoDialog",
    "UnknownDialog",
    "AmbiguousDialog",
    "DialogAlreadyClosed",
    "AnswerAppliedToOtherDialog",
    "DialogUnanswerable",
    "PageBlocked",
    "OrphanedDialog",
    "PageUnresponsive",
    "DialogInUnfollowedPage",
    "SecurityPolicy",
    "TargetCrashed",
    "UndecodableReply",
    "Cancelled",
    "StartCancelled",
    "NavigationFailed",
    "NoDownload",
    "RegistryClosed",
    "HeldByHuman",
    "CannotCapture",
    "UsedAfterFork",
    "IoError",
]
