"""Exceptions of cdp_supervisor: one class per kind of failure, with the failure's fields as
attributes, so callers catch a class and never parse a message.

Raised by the native module (its Rust errors become these); every class derives from
:class:`CdpSupervisorError`. Some also derive from the builtin they resemble
(:class:`Timeout` is a :class:`TimeoutError`, :class:`InvalidArgument` a :class:`ValueError`,
:class:`ConnectError` a :class:`ConnectionError`), so generic handlers catch them too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

if TYPE_CHECKING:
    from ._native import PendingDialog

__all__ = [
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
    "UsedAfterFork",
    "IoError",
]


class CdpSupervisorError(Exception):
    """Base class of every error this package raises."""


class InvalidArgument(CdpSupervisorError, ValueError):
    """Something about the caller's input is wrong (the message says what)."""


class ConfigError(InvalidArgument):
    """A configuration value is invalid."""

    key: str
    """The setting, e.g. ``browser.dialog_policy``; an item of a list names its position, e.g.
    ``security.cdp_deny[2]``."""
    value: str
    """The value given, as the message shows it: a string quoted (at most 64 characters of it,
    then its length), a number as written, or the kind of a value of the wrong kind
    (``a list``, ``a table``), never its contents."""
    allowed: str
    """What is allowed."""


class InvalidConfig(InvalidArgument):
    """A configuration that cannot be read as a whole: its file does not exist, or it is not
    TOML (a readable one with an invalid value is a :class:`ConfigError`)."""


class InvalidUrl(InvalidArgument):
    """The CDP URL cannot be parsed or has a scheme this package does not speak."""

    url: str
    """The URL, credentials redacted."""


class UnknownFrame(InvalidArgument):
    """A frame id the supervisor does not know (read ``frame_tree`` for the current ones)."""

    frame_id: str


class UnknownTarget(InvalidArgument):
    """A target id the supervisor does not track."""

    target_id: str


class ConnectError(CdpSupervisorError, ConnectionError):
    """TCP connect, TLS or the WebSocket handshake failed."""

    url: str
    """The URL, credentials redacted."""


class ConnectionLost(CdpSupervisorError, ConnectionError):
    """The connection dropped (the supervisor reconnects; calls fail meanwhile)."""


class NotActive(CdpSupervisorError):
    """The supervisor has stopped or given up; start it again with ``get_or_start``."""

    task_id: str


class NoPage(CdpSupervisorError):
    """No page target to attach to (or the one named does not exist), or no browser to launch."""


class Timeout(CdpSupervisorError, TimeoutError):
    """A CDP call got no reply before its deadline."""

    method: Optional[str]
    """The CDP method (``None`` for a :class:`StartTimeout`: see its ``detail``)."""
    after_s: float
    """The deadline that passed, in seconds."""


class StartTimeout(Timeout):
    """Attaching to the page did not finish within ``start_timeout_s``."""

    detail: str
    """What did not finish, e.g. ``Target.attachToTarget got no answer (...)``."""


class CdpError(CdpSupervisorError):
    """The browser answered a call with a CDP error."""

    method: str
    code: int
    """The CDP error code, e.g. -32601."""
    cdp_message: str
    """The browser's message."""


class BlockedByDialog(CdpSupervisorError):
    """A JavaScript dialog blocks the page this call needs: answer it, then retry."""

    dialog: PendingDialog
    """The dialog that blocks the call (as in ``pending_dialogs``)."""
    method: str


class DialogError(CdpSupervisorError):
    """``respond_to_dialog`` could not answer."""


class NoDialog(DialogError):
    """No dialog is pending."""


class UnknownDialog(DialogError):
    """``dialog_id`` names no pending dialog."""

    dialog_id: str


class AmbiguousDialog(DialogError):
    """Several dialogs are pending: pass ``dialog_id``."""

    count: int


class DialogAlreadyClosed(DialogError):
    """The dialog had already closed (see ``recent_dialogs``)."""

    dialog_id: str
    closed_by: str


class AnswerAppliedToOtherDialog(DialogError):
    """The browser applied the answer to another dialog than the one named."""

    named: str
    received: PendingDialog


class DialogUnanswerable(DialogError):
    """The dialog can no longer be answered over CDP but still blocks its frame: reload."""

    dialog_id: str
    frame_id: Optional[str]


class PageBlocked(CdpSupervisorError):
    """The page does not answer CDP (see ``Snapshot.blocked``)."""


class OrphanedDialog(PageBlocked):
    """A dialog left by a client that went away wedges the page: reload it."""


class PageUnresponsive(PageBlocked):
    """The page does not answer: a busy script, or a dialog nobody owns. Wait, then reload."""


class DialogInUnfollowedPage(PageBlocked):
    """A dialog in a page the supervisor does not watch (a popup past ``limits.pages_max`` +
    ``limits.watched_pages_max``) freezes the page's renderer: close the page that shows it."""

    target_ids: List[str]
    """The pages the task opened and no longer watches, one of which shows the dialog."""


class SecurityPolicy(CdpSupervisorError):
    """The ``[security]`` configuration refuses this call."""

    method: str
    option: str
    """The option that refused it, e.g. ``security.cdp_deny``."""
    detail: str


class TargetCrashed(CdpSupervisorError):
    """The renderer of the page or frame crashed; reload (``Page.reload``) to recover."""

    method: str
    what: str
    """``the page`` or ``frame <frame id>``."""


class UndecodableReply(CdpSupervisorError):
    """The reply could not be decoded (nested deeper than 128 levels); the call did run."""

    method: str


class Cancelled(CdpSupervisorError):
    """The call was cancelled; its late reply is dropped."""

    method: str


class StartCancelled(CdpSupervisorError):
    """A start was called off where it was; nothing of it was kept (no supervisor, no page
    it created)."""

    task_id: str
    during: str
    """What the start was doing: ``connecting``, ``attaching to the page``, ..."""


class NavigationFailed(CdpSupervisorError):
    """A navigation of the task's page failed: the browser's network error
    (``net::ERR_NAME_NOT_RESOLVED``, ...) or why the page stayed."""

    url: str
    error: str
    """What the browser said, e.g. ``net::ERR_CONNECTION_REFUSED``."""


class NoDownload(CdpSupervisorError):
    """``wait_for_download``: no download was under way and none began within the grace."""

    waited_s: float


class RegistryClosed(CdpSupervisorError):
    """The registry was closed (``close()``, or the end of its ``with`` block): it starts no
    supervisor any more. Make a new registry."""

    task_id: str
    """The task whose start was refused."""


class UsedAfterFork(CdpSupervisorError, RuntimeError):
    """An object made before ``os.fork()`` (a :class:`~cdp_supervisor.SupervisorRegistry`, its
    supervisors, a :class:`~cdp_supervisor.testing.FakeBrowser`) was used in the child. Its
    connections and threads stayed with the parent, so in the child it refuses every call at
    once and touches nothing of the parent's. Make a new ``SupervisorRegistry`` in the child
    (its plain values still read: ``reg.config``, ``fake.ws_url``), or start children with
    ``multiprocessing``'s ``spawn`` or ``forkserver`` method."""

    made_in_pid: int
    """The process the object was made in (the parent)."""
    pid: int
    """The process it was used in (the child)."""


class IoError(CdpSupervisorError, OSError):
    """An I/O error outside the CDP connection (launching a browser, reading a file)."""
