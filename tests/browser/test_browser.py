"""The browser tools in a real Chromium (issue 38 item 4) against a local site: a page
read as text with numbered items, a click and a fill by number, find, one page per
chat, idle pages closed (Chromium with the last), and the guard: a redirect to a
loopback address, a loopback sub-resource, a private name and a download are refused.

The site listens on 127.0.0.1, which the guard refuses as it should; it is reached the
way web_fetch's own SSRF tests reach theirs (tests/web/site.py): the guard's resolver is
given ``site.example`` → a public address and its network backend carries that address
to the local site (``Nat``). Nothing in Kernel's guard knows about tests: a request for
127.0.0.1 itself is judged as loopback and refused. Chromium makes no connection of its
own (every request is fetched through the guard), so it needs no name mapping.

One Chromium serves the whole module (:func:`tests.browser.site.chromium`); each test's
``Browsers`` connects to it. Skipped, saying why, where chromium or Playwright is absent.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kernel.browser.session import Browsers
from kernel.config import Config, load_config
from kernel.tools.registry import ToolContext, ToolOutcome, ToolRegistry
from tests.conftest import write_config
from tests.web.site import PUBLIC_IP, Names, Nat
from tests.webconsole.chromium import CHROMIUM

if not Path(CHROMIUM).is_file():
    pytest.skip(
        f"no chromium at {CHROMIUM} (apt-get install chromium, or set KERNEL_CHROMIUM)",
        allow_module_level=True,
    )
pytest.importorskip("playwright.async_api", reason="Playwright is not installed (uv sync --dev)")

from kernel import browser  # noqa: E402
from tests.browser.site import Site, chromium  # noqa: E402

pytestmark = pytest.mark.timeout(240)  # a loaded two-core machine is slow with Chromium

CHAT = ToolContext(conversation="telegram:1")


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with chromium() as ws:
        yield ws


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    async with Site() as running:
        yield running


def load(tmp_path: Path, **settings: Any) -> Config:
    path = write_config(tmp_path, "http://127.0.0.1:9/v1", "openai_compat")
    lines = ["", "[browser]", "enabled = true"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    path.write_text(path.read_text() + "\n".join(lines) + "\n", encoding="utf-8")
    return load_config(path, env={}, require_telegram=False)


class Harness:
    def __init__(self, config: Config, browsers: Browsers, site: Site, nat: Nat) -> None:
        self.config, self.browsers, self.site, self.nat = config, browsers, site, nat
        self.tools = ToolRegistry()
        browser.register(self.tools, config, browsers=browsers)

    def url(self, path: str) -> str:
        return f"http://site.example:{self.site.port}{path}"

    async def call(self, name: str, context: ToolContext = CHAT, **args: Any) -> ToolOutcome:
        return await self.tools.call(name, args, context)

    async def read(self, name: str, context: ToolContext = CHAT, **args: Any) -> dict[str, Any]:
        outcome = await self.call(name, context, **args)
        assert outcome.ok, outcome.content
        found: dict[str, Any] = json.loads(outcome.content)
        return found


@pytest.fixture
async def harness(tmp_path: Path, endpoint: str, site: Site) -> AsyncIterator[Any]:
    made: list[Browsers] = []

    async def make(clock: Callable[[], float] = time.monotonic, **settings: Any) -> Harness:
        config = load(tmp_path, **settings)
        nat = Nat()
        names = Names({"site.example": [PUBLIC_IP], "intranet.example": ["10.0.0.7"]})
        browsers = Browsers(config, resolver=names, network=nat, endpoint=endpoint, clock=clock)
        made.append(browsers)
        return Harness(config, browsers, site, nat)

    yield make
    for browsers in made:
        await browsers.close()


def number_of(items: str, label: str) -> int:
    """The number the page reading gave the item whose label is ``label``."""
    for line in items.splitlines():
        if f'"{label}"' in line:
            return int(line.split("]", 1)[0].lstrip("["))
    raise AssertionError(f"{label!r} not among {items}")


async def test_open_click_fill_and_find(harness: Any) -> None:
    h: Harness = await harness()
    page = await h.read("browser_open", url=h.url("/"))
    assert page["url"] == h.url("/")
    text, items = page["text"], page["items"]
    assert text.startswith(f'<untrusted_content source="{h.url("/")}">')
    assert "Tide pools" in text and items.startswith(f'<untrusted_content source="{h.url("/")}">')
    assert "rocky pockets on the shore" in text
    assert "Written by a script: visitors welcome." in text  # the page's JavaScript ran
    assert f'link "About us" -> {h.url("/about")}' in items
    assert 'input "Search the site"' in items and 'button "Go"' in items

    about = await h.read("browser_click", number=number_of(items, "About us"))
    assert about["url"] == h.url("/about") and "A small page about the shore." in about["text"]

    page = await h.read("browser_open", url=h.url("/"))
    shown = await h.read("browser_click", number=number_of(page["items"], "Show times"))
    assert "Low tide at 6" in shown["text"]
    search = number_of(shown["items"], "Search the site")
    found = await h.read("browser_fill", number=search, text="sea stars", submit=True)
    assert found["url"] == h.url("/search?q=sea+stars")
    assert "Results for sea stars" in found["text"]

    finds = await h.read("browser_find", text="RESULTS for")
    assert finds["count"] == 2 and "Results for sea stars" in finds["matches"]
    none = await h.read("browser_find", text="whale")
    assert none == {"url": found["url"], "count": 0, "matches": '页面上没有找到 "whale"'}

    missing = await h.call("browser_click", number=99)
    assert missing.content == (
        "error: 这个页面上没有编号 [99] 的元素：用 browser_open 或页面最新的编号重新看一遍"
    )
    # everything went to the public name only, carried to the site by the test's Nat
    assert {address for address, _ in h.nat.connects} == {PUBLIC_IP}


async def test_loopback_private_and_downloads_are_refused(harness: Any) -> None:
    h: Harness = await harness()
    # the page loads; its loopback image (through a redirect) and fetch() do not
    page = await h.read("browser_open", url=h.url("/"))
    assert "rocky pockets" in page["text"]
    # a link that redirects to a loopback address
    bounce = await h.call("browser_click", number=number_of(page["items"], "Members area"))
    assert not bounce.ok
    port = h.site.port
    refused = (
        "error: 浏览器拒绝访问 127.0.0.1：它不是公网地址（loopback）；浏览器只访问公网地址，"
        "如需访问请设置 [web] allow_private = true"
    )
    assert bounce.content == refused
    # the same redirect opened directly, and the address itself
    redirect = await h.call("browser_open", url=h.url(f"/to?url=http://127.0.0.1:{port}/secret"))
    direct = await h.call("browser_open", url=f"http://127.0.0.1:{port}/secret")
    assert redirect.content == refused and direct.content == refused
    private = await h.call("browser_open", url="http://intranet.example/")
    assert not private.ok and "intranet.example" in private.content and "private" in private.content
    download = await h.call("browser_open", url=h.url("/dl"))
    assert download.content == "error: 浏览器不下载文件：这个页面触发了一次下载，已拒绝"
    assert "/secret" not in h.site.hits and "/dl" in h.site.hits
    assert {address for address, _ in h.nat.connects} == {PUBLIC_IP}
    assert "/img.png" in h.site.hits  # the page's own image came through


async def test_one_page_per_chat_closed_when_idle(harness: Any) -> None:
    # Time stands still for the pages until the test moves it: a loaded machine's slow
    # steps never make a page idle early.
    now = [0.0]
    h: Harness = await harness(max_pages=2, idle_seconds=1.0, clock=lambda: now[0])
    other = ToolContext(conversation="telegram:2")
    await h.read("browser_open", url=h.url("/cookie"))
    mine = await h.read("browser_open", url=h.url("/whoami"))
    theirs = await h.read("browser_open", other, url=h.url("/whoami"))
    assert "visitor is v42" in mine["text"]  # the chat's own cookies…
    assert "visitor is nobody" in theirs["text"]  # …are not another chat's
    assert sorted(h.browsers.pages()) == ["telegram:1", "telegram:2"]
    # a third chat: the least recently used page (telegram:1) closes
    await h.read("browser_open", ToolContext(conversation="console:default"), url=h.url("/"))
    assert sorted(h.browsers.pages()) == ["console:default", "telegram:2"]
    closed = await h.call("browser_find", text="tide")
    assert closed.content.startswith("error: 这个对话还没有打开网页")
    # unused, every page closes, and Chromium with the last
    now[0] += 5.0
    await h.site.wait_until(lambda: not h.browsers.pages() and not h.browsers.running, 60)
