# Playwright for Python on a browser (run by tests/it/e2e_cdp_clients.rs, once through the task's
# CDP endpoint and once straight to Chromium, and the two outputs compared): drive.mjs's `basic`
# scenario, with the same keys. argv: <http URL of the browser> <task page URL>
# Prints one JSON line; exits non-zero on a failure.
import json
import struct
import sys

from playwright.sync_api import Frame, Page, sync_playwright

url, top = sys.argv[1], sys.argv[2]
out: dict[str, object] = {}


def png_size(png: bytes) -> list[int]:
    return list(struct.unpack(">II", png[16:24]))


def cross(frame: Frame) -> bool:
    return "//localhost:" in frame.url


def iframe_in(page: Page) -> Frame:
    """The cross-origin iframe, once the client has it (it attaches the out-of-process iframe's
    target on its own time), awaited on its frame events within 10 s. The sync API dispatches
    events only inside its own calls, so none is missed between the look and the wait."""
    frame = next((f for f in page.frames if cross(f)), None)
    if frame is not None:
        return frame
    return page.wait_for_event("framenavigated", predicate=cross, timeout=10000)


with sync_playwright() as p:
    browser = p.chromium.connect_over_cdp(url, timeout=30000)
    ctx = browser.contexts[0]
    page = next((pg for pg in ctx.pages if pg.url == top), None)
    if page is None:
        raise SystemExit(f"the task page is not among {[pg.url for pg in ctx.pages]}")
    out["evaluate"] = page.evaluate("() => 6 * 7")
    out["iframe"] = iframe_in(page).evaluate(
        "() => location.origin + ' ' + document.body.innerText"
    )
    out["screenshot"] = png_size(page.screenshot())

    def on_dialog(dialog):  # type: ignore[no-untyped-def]
        out["dialog"] = f"{dialog.type}: {dialog.message}"
        dialog.accept()

    page.once("dialog", on_dialog)
    out["after_dialog"] = page.evaluate(
        "() => { alert('the client handles this'); return 'back'; }"
    )
    fresh = ctx.new_page()
    fresh.goto(top)
    out["new_page_title"] = fresh.title()
    out["new_page_iframe"] = iframe_in(fresh).evaluate("() => location.origin")
    out["new_page_screenshot"] = png_size(fresh.screenshot())
    fresh.goto(top + "?again")
    out["navigated"] = fresh.evaluate("() => location.search")
    fresh.close()
    out["pages_after_close"] = len([pg for pg in ctx.pages if pg.url.startswith(top)])
    browser.close()

print(json.dumps(out), flush=True)
