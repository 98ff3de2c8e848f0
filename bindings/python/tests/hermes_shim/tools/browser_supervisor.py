"""Hermes's ``tools/browser_supervisor.py``, served by ``cdp_supervisor.hermes``. With
``CDP_SUPERVISOR_HERMES_LEGACY_PAGE=1`` (``test_hermes_upstream.py`` sets it for the pinned
versions, which predate Hermes's owned tab) the drop-in chooses its page as those versions did."""

import os

import cdp_supervisor.hermes

if os.environ.get("CDP_SUPERVISOR_HERMES_LEGACY_PAGE") == "1":
    cdp_supervisor.hermes.legacy_first_page()

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
