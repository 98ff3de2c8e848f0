"""Hermes's ``tools/browser_cdp_tool.py``: its ``browser_cdp`` function."""

from cdp_supervisor.hermes import CDP_DOCS_URL, browser_cdp  # noqa: F401
