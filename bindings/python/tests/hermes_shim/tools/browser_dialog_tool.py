"""Hermes's ``tools/browser_dialog_tool.py``: its ``browser_dialog`` function."""

from cdp_supervisor.hermes import browser_dialog  # noqa: F401
