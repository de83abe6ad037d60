"""``kernel console``'s link in a real headless browser: opened once it signs in and
leaves the address bar; opened again it is refused in words (skipped, like the other
browser tests, without chromium or Playwright)."""

from __future__ import annotations

from tests.webconsole.test_browser import Opener, expect

# The fixtures, shared with test_browser.py, and its module-wide event loop.
from tests.webconsole.test_browser import anthropic_sim as anthropic_sim  # noqa: F401
from tests.webconsole.test_browser import browser as browser  # noqa: F401
from tests.webconsole.test_browser import console as console  # noqa: F401
from tests.webconsole.test_browser import pytestmark as pytestmark  # noqa: F401
from tests.webconsole.test_browser import sidecar as sidecar  # noqa: F401


async def test_the_link_signs_in_once_and_leaves_the_address_bar(console: Opener) -> None:  # noqa: F811
    c = await console()
    status, data, _ = await c.sc.call("POST", "/console/link")
    assert status == 200
    token = data["link"]
    page = c.page
    await page.goto(f"{c.url}#signin={token}")
    await expect(page.locator("#nav a")).to_have_count(10)
    await expect(page).to_have_url(c.url)
    seen = await page.evaluate("() => [location.href, history.length, document.body.outerHTML]")
    assert all(token not in str(part) for part in seen)
    # The same link again (a stale tab, a shared screen): refused, saying what to do.
    await page.goto(f"{c.url}#signin={token}")
    await expect(page).to_have_url(c.sc.url + "/console/login")
    await expect(page.locator("#error")).to_contain_text("run kernel console again")
    assert token not in page.url
    c.check()
