"""Test helpers: :class:`FakeBrowser`, the crate's scripted fake CDP browser, so agents are
tested without Chromium::

    from cdp_supervisor import SupervisorRegistry
    from cdp_supervisor.testing import FakeBrowser

    with FakeBrowser() as fb, SupervisorRegistry() as reg:
        sup = reg.get_or_start("t", fb.ws_url)
        fb.open_dialog("prompt", "Name?", "default")
        d = sup.wait_for_dialog(5.0)
        sup.respond_to_dialog("accept", prompt_text="Ada", dialog_id=d.id)
"""

from __future__ import annotations

from ._native import FakeBrowser

__all__ = ["FakeBrowser"]
