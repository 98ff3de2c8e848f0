"""Hermes's ``tools/browser_supervisor.py``, served by ``cdp_supervisor.hermes``."""

from cdp_supervisor.hermes import *  # noqa: F401,F403
from cdp_supervisor.hermes import (  # noqa: F401
    CONSOLE_HISTORY_MAX,
    DIALOG_BRIDGE_HOST,
    DIALOG_BRIDGE_URL_PATTERN,
    FRAME_TREE_MAX_ENTRIES,
    FRAME_TREE_MAX_OOPIF_DEPTH,
    RECENT_DIALOGS_MAX,
    _VALID_POLICIES,
    _SupervisorRegistry,
)
