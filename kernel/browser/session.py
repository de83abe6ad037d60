"""One Chromium for the whole Kernel, one page per chat, nothing kept while unused.

Playwright is imported, its driver started and Chromium launched at the first browser
action (never at start: a Kernel whose browser is unused carries none of it). Each chat
(the tool context's conversation) gets its own browser context (cookies, storage) with
one page, its requests routed through :class:`~kernel.browser.network.Traffic`. A page
unused for ``[browser] idle_seconds`` is closed; so is the least recently used one when
``max_pages`` chats have one and another opens; when the last closes, Chromium and the
driver end too, their memory given back. :meth:`Browsers.close` ends everything (Kernel's
stop).

Public API: :class:`Browsers`, :class:`Tab`, :func:`chromium_path`,
:func:`playwright_missing`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import shutil
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from kernel.config import Config
from kernel.core.errors import ToolError
from kernel.core.i18n import t
from kernel.web.guard import Resolver

log = logging.getLogger(__name__)

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
# Headless, no background traffic of Chromium's own, no prefetching of link hosts.
ARGS = (
    "--headless=new",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--dns-prefetch-disable",
)
VIEWPORT = {"width": 1280, "height": 800}


def chromium_path(executable: str) -> str | None:
    """The Chromium to run: ``[browser] executable`` when set (a path, or a name on
    PATH), else the first of :data:`CANDIDATES` on PATH; None when there is none."""
    if executable:
        found = shutil.which(executable)
        return found or (executable if os.path.isfile(executable) else None)
    return next(filter(None, map(shutil.which, CANDIDATES)), None)


def searched(executable: str) -> str:
    """Where :func:`chromium_path` looked, for a refusal."""
    return executable or f"PATH ({', '.join(CANDIDATES)})"


def playwright_missing() -> bool:
    """Whether Playwright for Python is not installed (without importing it)."""
    return importlib.util.find_spec("playwright") is None


@dataclass
class Tab:
    """One chat's page: its context, the page, what its numbers mean, its traffic."""

    conversation: str
    context: Any  # playwright BrowserContext
    page: Any  # playwright Page
    traffic: Any  # kernel.browser.network.Traffic
    used: float = 0.0  # time.monotonic() of the last action
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Browsers:
    """The browser of one Kernel (see the module docstring). ``resolver``: the guard's
    and ``network``: the guard's seams (tests stand local pages behind made-up public
    names, as web_fetch's do); ``endpoint``: connect to a running Chromium's DevTools
    endpoint instead of launching one (tests share one Chromium per module)."""

    def __init__(
        self,
        config: Config,
        *,
        resolver: Resolver | None = None,
        network: Any = None,
        endpoint: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.resolver = resolver
        self.network = network
        self.endpoint = endpoint
        self._clock = clock
        self._driver: Any = None  # the started Playwright
        self._browser: Any = None
        self._tabs: OrderedDict[str, Tab] = OrderedDict()  # least recently used first
        self._start = asyncio.Lock()
        self._reaper: asyncio.Task[None] | None = None
        self._stopping: set[asyncio.Future[None]] = set()

    @property
    def running(self) -> bool:
        """Whether Chromium (and the driver) are up, or still ending."""
        return self._browser is not None or bool(self._stopping)

    def pages(self) -> list[str]:
        """The conversations with an open page."""
        return list(self._tabs)

    @contextlib.asynccontextmanager
    async def tab(self, conversation: str, *, create: bool) -> AsyncIterator[Tab]:
        """The chat's page, held for one action (``create``: opened when there is none;
        else ToolError: nothing is open)."""
        found = self._tabs.get(conversation)
        if found is None:
            if not create:
                raise ToolError(t("browser.no_page"))
            found = await self._open(conversation)
        async with found.lock:
            if self._tabs.get(conversation) is not found:  # closed while waiting
                raise ToolError(t("browser.no_page"))
            self._tabs.move_to_end(conversation)
            found.used = self._clock()
            try:
                yield found
            finally:
                found.used = self._clock()

    async def _open(self, conversation: str) -> Tab:
        from kernel.browser.network import Traffic

        async with self._start:
            if conversation in self._tabs:
                return self._tabs[conversation]
            browser = await self._started()
            while len(self._tabs) >= self.config.browser.max_pages:
                oldest = next(iter(self._tabs))
                log.info("browser: the least recently used page closes (max_pages)")
                await self._close_tab(oldest)
            context = await browser.new_context(
                accept_downloads=False, service_workers="block", viewport=VIEWPORT
            )
            traffic = Traffic(self.config.web, resolver=self.resolver, network=self.network)
            try:
                await traffic.attach(context)
                page = await context.new_page()
            except BaseException:
                await traffic.close()
                await context.close()
                raise
            page.set_default_timeout(self.config.browser.timeout * 1000)
            context.on("page", lambda opened: _close_popup(opened, page))
            tab = Tab(conversation, context, page, traffic, self._clock())
            self._tabs[conversation] = tab
            if self._reaper is None or self._reaper.done():
                self._reaper = asyncio.create_task(self._reap(), name="browser-idle")
            log.info("browser: a page opened (%d open)", len(self._tabs))
            return tab

    async def _started(self) -> Any:
        """The running Chromium: Playwright imported and Chromium started now if not yet."""
        if self._browser is not None and self._browser.is_connected():
            return self._browser
        await self._shutdown()  # a Chromium that died: start afresh
        if playwright_missing():
            raise ToolError(t("browser.no_playwright"))
        from playwright.async_api import Error, async_playwright

        driver = await async_playwright().start()
        try:
            if self.endpoint is not None:
                browser = await driver.chromium.connect_over_cdp(self.endpoint)
            else:
                browser = await self._launch(driver)
        except Error as exc:
            await driver.stop()
            log.warning("browser: Chromium did not start (%s)", type(exc).__name__)
            raise ToolError(
                t("browser.start_failed", error=str(exc).split("\n")[0][:200])
            ) from None
        except BaseException:
            await driver.stop()
            raise
        self._driver, self._browser = driver, browser
        log.info("browser: Chromium started")
        return browser

    async def _launch(self, driver: Any) -> Any:
        executable = chromium_path(self.config.browser.executable)
        if executable is None:
            shown = searched(self.config.browser.executable)
            raise ToolError(t("browser.no_chromium", path=shown))
        # Chromium's own sandbox (a page's renderer walled off), unless the owner turned
        # it off or Kernel runs as root, where Chromium refuses to start with it.
        root = hasattr(os, "geteuid") and os.geteuid() == 0
        return await driver.chromium.launch(
            executable_path=executable,
            args=list(ARGS),
            headless=True,
            chromium_sandbox=self.config.browser.sandbox and not root,
        )

    async def _reap(self) -> None:
        """Close pages unused for idle_seconds; end when none is left."""
        while self._tabs:
            idle = self.config.browser.idle_seconds
            now = self._clock()
            oldest = min(tab.used for tab in self._tabs.values())
            await asyncio.sleep(max(0.05, oldest + idle - now))
            async with self._start:
                now = self._clock()
                for name, tab in list(self._tabs.items()):
                    if not tab.lock.locked() and now - tab.used >= idle:
                        log.info("browser: an idle page closes")
                        await self._close_tab(name)

    async def _close_tab(self, conversation: str) -> None:
        tab = self._tabs.pop(conversation, None)
        if tab is None:
            return
        with contextlib.suppress(Exception):
            await tab.context.close()
        await tab.traffic.close()
        if not self._tabs:
            await self._shutdown()

    async def close_page(self, conversation: str) -> None:
        """Close one chat's page (its cookies and storage go with it)."""
        async with self._start:
            await self._close_tab(conversation)

    async def _shutdown(self) -> None:
        """Chromium and the driver end (their memory given back); shielded, so a
        cancelled caller (the idle reaper at Kernel's stop) never leaves them half-ended."""
        browser, driver = self._browser, self._driver
        self._browser = self._driver = None
        if browser is None and driver is None:
            return
        stopping = asyncio.ensure_future(_stop(browser, driver))
        self._stopping.add(stopping)
        stopping.add_done_callback(self._stopping.discard)
        await asyncio.shield(stopping)

    async def close(self) -> None:
        """Every page, Chromium and the driver (Kernel's stop)."""
        reaper, self._reaper = self._reaper, None
        if reaper is not None and reaper is not asyncio.current_task():
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
        for name in list(self._tabs):
            await self._close_tab(name)
        await self._shutdown()
        for stopping in list(self._stopping):
            await stopping


async def _stop(browser: Any, driver: Any) -> None:
    if browser is not None:
        with contextlib.suppress(Exception):
            await browser.close()
    if driver is not None:
        with contextlib.suppress(Exception):
            await driver.stop()
    log.info("browser: Chromium stopped")


async def _close_popup(opened: Any, page: Any) -> None:
    """A page a page opened (window.open, target=_blank): closed; one page per chat."""
    if opened is not page:
        with contextlib.suppress(Exception):
            await opened.close()
