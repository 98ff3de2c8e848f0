"""Catches a JavaScript prompt and answers it.

On headless Chromium when one is installed (the registry launches it: no URL given), else on
the built-in fake browser; ``--fake`` forces the fake::

    python bindings/python/examples/answer_dialog.py [--fake]
"""

from __future__ import annotations

import sys
from urllib.parse import quote

from cdp_supervisor import NoPage, SupervisorRegistry
from cdp_supervisor.testing import FakeBrowser

PAGE = (
    "<title>waiting</title><script>setTimeout(() => {"
    " document.title = 'answered: ' + prompt('Your name?', 'Bob'); }, 50)</script>"
)


def on_chromium(reg: SupervisorRegistry) -> None:
    sup = reg.get_or_start("demo")  # launches headless Chromium; the task gets its own page
    print(f"attached to {sup.page_target_id} on {sup.cdp_url}")
    sup.call("Page.navigate", {"url": "data:text/html," + quote(PAGE)})
    dialog = sup.wait_for_dialog(10.0)
    assert dialog is not None, "the page's prompt() was not caught"
    print(f"caught a {dialog.type} dialog: {dialog.message!r} (default {dialog.default_prompt!r})")
    sup.respond_to_dialog("accept", prompt_text="Ada", dialog_id=dialog.id)
    out = sup.call("Runtime.evaluate", {"expression": "document.title", "returnByValue": True})
    print(f"the page now says: {out['result']['value']!r}")


def on_fake(reg: SupervisorRegistry) -> None:
    with FakeBrowser() as fb:
        sup = reg.get_or_start("demo", fb.ws_url)
        print(f"attached to the fake browser's page {sup.page_target_id}")
        fb.open_dialog("prompt", "Your name?", "Bob")  # the page calls prompt()
        dialog = sup.wait_for_dialog(5.0)
        assert dialog is not None, "the prompt was not caught"
        print(f"caught a {dialog.type} dialog: {dialog.message!r} (default {dialog.default_prompt!r})")
        sup.respond_to_dialog("accept", prompt_text="Ada", dialog_id=dialog.id)
        closed = sup.snapshot().recent_dialogs[-1]
        print(f"answered: {closed.id} closed by {closed.closed_by}; dialog still open: {fb.dialog_open()}")
        reg.stop_all()


def main() -> int:
    with SupervisorRegistry() as reg:
        if "--fake" not in sys.argv[1:]:
            try:
                on_chromium(reg)
                return 0
            except NoPage as e:
                print(f"no Chromium to launch ({e}); using the fake browser")
        on_fake(reg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
