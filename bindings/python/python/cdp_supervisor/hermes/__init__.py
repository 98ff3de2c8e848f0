"""A drop-in for Hermes Agent's browser supervisor (``tools/browser/browser_supervisor.py``,
formerly ``tools/browser_supervisor.py``) and its ``browser_dialog`` / ``browser_cdp`` tool
functions, on the Rust supervisor.

Run a Hermes checkout on it with one call before Hermes imports its browser code::

    import cdp_supervisor.hermes
    cdp_supervisor.hermes.install()   # tools.browser.browser_supervisor is now the drop-in

``from cdp_supervisor.hermes import *`` gives Hermes's public names with Hermes's signatures,
frozen dataclasses, constants and return shapes: ``SUPERVISOR_REGISTRY`` (a
``_SupervisorRegistry``), ``CDPSupervisor``, ``PendingDialog``, ``DialogRecord``, ``FrameInfo``,
``ConsoleEvent``, ``SupervisorSnapshot``, the ``DIALOG_POLICY_*`` constants, and
``browser_dialog`` / ``browser_cdp`` returning Hermes's JSON. As Hermes does now, every task
gets a tab of its own (a fresh ``about:blank`` page, never one the browser already holds), and
``CDPSupervisor`` has ``navigate_page`` (never waiting on a dialog), ``page_target_tab_ref``,
``get_frame_session`` (no ``to_dict()`` shows a session id) and ``wait_for_download``, plus file
choosers (``respond_to_file_chooser``). ``legacy_first_page()`` brings back the page choice of
Hermes before its owned tab (the browser's first page), for code and tests of those versions. Like Hermes, every page and child session gets the
dialog bridge (its dialogs carry a ``bridge_request_id``); our bridge host is
``cdp-dialog-bridge.invalid`` where Hermes's is ``hermes-dialog-bridge.invalid``.

What is not there: Hermes's asyncio internals (``_loop``, ``_state_lock``, ``_frames``,
``_cdp``, ...): the supervisor runs in Rust threads. The README of the repository lists every
difference.

Inside: ``_model`` (the constants and dataclasses), ``_supervisor`` (``CDPSupervisor``),
``_page`` (its page methods), ``_registry`` (``SUPERVISOR_REGISTRY`` and the tool functions),
``_install`` (``install``); everything is imported from here.
"""

from __future__ import annotations

from ._model import (
    CDP_DOCS_URL as CDP_DOCS_URL,
    CONSOLE_HISTORY_MAX as CONSOLE_HISTORY_MAX,
    DEFAULT_DIALOG_POLICY as DEFAULT_DIALOG_POLICY,
    DEFAULT_DIALOG_TIMEOUT_S as DEFAULT_DIALOG_TIMEOUT_S,
    DIALOG_BRIDGE_HOST as DIALOG_BRIDGE_HOST,
    DIALOG_BRIDGE_URL_PATTERN as DIALOG_BRIDGE_URL_PATTERN,
    DIALOG_POLICY_AUTO_ACCEPT as DIALOG_POLICY_AUTO_ACCEPT,
    DIALOG_POLICY_AUTO_DISMISS as DIALOG_POLICY_AUTO_DISMISS,
    DIALOG_POLICY_MUST_RESPOND as DIALOG_POLICY_MUST_RESPOND,
    FRAME_TREE_MAX_ENTRIES as FRAME_TREE_MAX_ENTRIES,
    FRAME_TREE_MAX_OOPIF_DEPTH as FRAME_TREE_MAX_OOPIF_DEPTH,
    RECENT_DIALOGS_MAX as RECENT_DIALOGS_MAX,
    ConsoleEvent as ConsoleEvent,
    DialogRecord as DialogRecord,
    FrameInfo as FrameInfo,
    PendingDialog as PendingDialog,
    SupervisorSnapshot as SupervisorSnapshot,
    _VALID_POLICIES as _VALID_POLICIES,
    configure as configure,
    legacy_first_page as legacy_first_page,
)
from ._registry import (
    SUPERVISOR_REGISTRY as SUPERVISOR_REGISTRY,
    _SupervisorRegistry as _SupervisorRegistry,
    browser_cdp as browser_cdp,
    browser_dialog as browser_dialog,
)
from ._install import install as install
from ._supervisor import CDPSupervisor as CDPSupervisor

__all__ = [
    "CDP_DOCS_URL",
    "CONSOLE_HISTORY_MAX",
    "CDPSupervisor",
    "ConsoleEvent",
    "DEFAULT_DIALOG_POLICY",
    "DEFAULT_DIALOG_TIMEOUT_S",
    "DIALOG_POLICY_AUTO_ACCEPT",
    "DIALOG_POLICY_AUTO_DISMISS",
    "DIALOG_BRIDGE_HOST",
    "DIALOG_BRIDGE_URL_PATTERN",
    "DIALOG_POLICY_MUST_RESPOND",
    "DialogRecord",
    "FRAME_TREE_MAX_ENTRIES",
    "FRAME_TREE_MAX_OOPIF_DEPTH",
    "FrameInfo",
    "PendingDialog",
    "RECENT_DIALOGS_MAX",
    "SUPERVISOR_REGISTRY",
    "SupervisorSnapshot",
    "_SupervisorRegistry",
    "browser_dialog",
    "browser_cdp",
    "configure",
    "install",
    "legacy_first_page",
]
