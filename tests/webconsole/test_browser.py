"""The web console in a real headless browser (issue 21): Debian's chromium driven by
Playwright for Python (nothing downloaded: ``executable_path`` is the system browser),
against an in-process sidecar with the Anthropic simulator behind it.

Each scenario writes a screenshot of its page to ``build/console-screenshots/``
(``KERNEL_CONSOLE_SCREENSHOTS`` overrides) so a person can look. The whole module is
skipped, saying why, where chromium or Playwright is absent (``.ci/run`` installs
chromium where apt-get is available)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import zipfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from kernel.gateway.console.auth import cookie_name
from tests.agents.kit import agent_file, write_agents
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory, sidecars
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Text, text_reply, tool_reply
from tests.waiting import wait_until
from tests.webconsole.chromium import ARGS, CHROMIUM

if not Path(CHROMIUM).is_file():
    pytest.skip(
        f"no chromium at {CHROMIUM} (apt-get install chromium, or set KERNEL_CHROMIUM)",
        allow_module_level=True,
    )
playwright = pytest.importorskip(
    "playwright.async_api", reason="Playwright for Python is not installed (uv sync --dev)"
)
from playwright.async_api import (  # noqa: E402 - only once it is known to be there
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    Request,
    Route,
    async_playwright,
    expect,
)

# A loaded two-core machine starts chromium slowly. The module's tests (and those of the
# modules that use its ``console``) share one event loop: Playwright's driver and one
# chromium are started once per module and worker (0.75 s of CPU each time), and every
# test opens its own browser context (its own cookies, storage and cache) in it.
pytestmark = [pytest.mark.timeout(240), pytest.mark.asyncio(loop_scope="module")]

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(
    os.environ.get("KERNEL_CONSOLE_SCREENSHOTS") or ROOT / "build" / "console-screenshots"
)
WAIT = 30_000  # ms: playwright's waits (never a bound the test asserts)
APPROVAL = "\n[tools.memory_add]\napproval = true\napproval_timeout = 60\n"
expect.set_options(timeout=WAIT)


@dataclass
class Console:
    sc: Sidecar
    sim: AnthropicSim
    page: Page
    problems: list[str] = field(default_factory=list)  # CSP violations, uncaught errors
    foreign: list[str] = field(default_factory=list)  # requests to another origin

    @property
    def url(self) -> str:
        return self.sc.url + "/console/"

    async def sign_in(self, key: str = API_KEY) -> None:
        await self.page.goto(self.url)
        await expect(self.page).to_have_url(self.sc.url + "/console/login")
        await self.page.fill("#key", key)
        await self.page.click("#go")
        await expect(self.page.locator("#nav a")).to_have_count(10)

    async def show(self, name: str) -> None:
        """Open a page through the navigation, as a person would."""
        await self.page.click(f'#nav a[data-page="{name}"]')
        await expect(self.page.locator(f'#nav a[data-page="{name}"]')).to_have_class("active")

    async def shot(self, name: str) -> None:
        await asyncio.to_thread(SCREENSHOTS.mkdir, parents=True, exist_ok=True)
        await self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)

    def check(self) -> None:
        """Nothing the CSP refused, no uncaught error, nothing fetched from elsewhere."""
        assert self.problems == [] and self.foreign == []


Opener = Callable[..., Awaitable[Console]]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Browser]:
    """One chromium for the module's tests (each in a context of its own)."""
    downloads = tmp_path_factory.mktemp("dl")
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(
            executable_path=CHROMIUM, args=ARGS, downloads_path=str(downloads)
        )
        try:
            yield browser
        finally:
            await browser.close()


@pytest_asyncio.fixture(loop_scope="module")
async def anthropic_sim() -> AsyncIterator[AnthropicSim]:
    """tests/conftest.py's, in the module's loop."""
    sim = AnthropicSim()
    await sim.start()
    yield sim
    await sim.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def sidecar(tmp_path: Path) -> AsyncIterator[SidecarFactory]:
    """tests/gateway/conftest.py's, in the module's loop."""
    async with sidecars(tmp_path) as start:
        yield start


@pytest_asyncio.fixture(loop_scope="module")
async def console(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, browser: Browser
) -> AsyncIterator[Opener]:
    contexts: list[BrowserContext] = []

    async def open_console(extra: str = "", zone: str | None = None, **general: Any) -> Console:
        """``zone``: the browser's own time zone (the machine's, for the page)."""
        sc = await sidecar(anthropic_sim, api_key=API_KEY, extra=extra, **general)
        context = await browser.new_context(
            viewport={"width": 1100, "height": 800}, timezone_id=zone
        )
        contexts.append(context)
        page = await context.new_page()
        page.set_default_timeout(WAIT)
        found = Console(sc, anthropic_sim, page)

        def on_console(message: ConsoleMessage) -> None:
            if "Content Security Policy" in message.text:
                found.problems.append(message.text)

        def on_request(request: Request) -> None:
            if not request.url.startswith(sc.url + "/") and not request.url.startswith("data:"):
                found.foreign.append(request.url)

        page.on("console", on_console)
        page.on("pageerror", lambda error: found.problems.append(str(error)))
        page.on("request", on_request)
        return found

    try:
        yield open_console
    finally:
        for context in contexts:
            await context.close()


async def test_sign_in(console: Opener) -> None:
    c = await console()
    page = c.page
    await page.goto(c.url)
    await expect(page).to_have_url(c.sc.url + "/console/login")
    await expect(page.locator("#go")).to_have_text("Sign in")
    await c.shot("login")
    await page.fill("#key", "not-the-key")
    await page.click("#go")
    await expect(page.locator("#error")).to_contain_text("API key is wrong")
    await expect(page).to_have_url(c.sc.url + "/console/login")
    await page.fill("#key", API_KEY)
    await page.click("#go")
    await expect(page.locator("#nav a")).to_have_count(10)
    await expect(page).to_have_url(c.url)
    # The key is nowhere in the page; the sign-in cookie is out of the page's reach.
    stored = await page.evaluate(
        "() => [document.cookie, localStorage.length, sessionStorage.length,"
        " document.documentElement.outerHTML]"
    )
    # sessionStorage holds the CSRF token only (this tab, this origin).
    assert stored[:3] == ["", 0, 1] and API_KEY not in stored[3]
    kept = await page.evaluate("() => JSON.stringify(Object.entries(sessionStorage))")
    assert API_KEY not in kept
    name = cookie_name(c.sc.gateway.port)
    [cookie] = [k for k in await page.context.cookies() if k["name"] == name]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    await c.shot("signed-in")
    c.check()


async def test_chat_streams_the_reply_with_one_line_per_tool(console: Opener) -> None:
    c = await console()
    await c.sign_in()
    page = c.page
    c.sim.enqueue(
        tool_reply("memory_add", {"text": "likes jazz"}),
        Reply(Text("Noted: you like jazz.", chunks=["Noted: ", "you like ", "jazz."])),
    )
    await expect(page.locator("#chat-cancel")).to_be_disabled()
    await page.fill("#chat-input", "remember that I like jazz")
    await page.click("#chat-send")
    await expect(page.locator("#chat-log .bubble.owner").last).to_contain_text("I like jazz")
    await expect(page.locator("#chat-log .bubble.assistant").last).to_contain_text(
        "Noted: you like jazz."
    )
    lines = page.locator("#chat-log .tool-line")
    await expect(lines).to_have_count(1)
    await expect(lines.first).to_contain_text("memory_add")
    await expect(page.locator("#chat-cancel")).to_be_disabled()
    assert [m.text for m in await c.sc.kernel.store.list_memories()] == ["likes jazz"]
    await c.shot("chat")
    c.check()


async def test_cancel_a_slow_reply(console: Opener) -> None:
    c = await console()
    await c.sign_in()
    page = c.page
    # "Half way " arrives, then the model goes silent for an hour.
    c.sim.enqueue(Reply(Text("Half way there", chunks=["Half way ", "there"]), stall_after=3))
    await page.fill("#chat-input", "tell me slowly")
    await page.click("#chat-send")
    reply = page.locator("#chat-log .bubble.assistant").last
    await expect(reply).to_contain_text("Half way")  # streamed: shown before the end
    cancel = page.locator("#chat-cancel")
    await expect(cancel).to_be_enabled()
    await cancel.click()
    await expect(cancel).to_be_disabled()
    await expect(reply).not_to_contain_text("there")
    await c.shot("chat-cancelled")
    # The turn really ended: the next message is answered.
    c.sim.enqueue(text_reply("Back again."))
    await page.fill("#chat-input", "still there?")
    await page.click("#chat-send")
    await expect(page.locator("#chat-log .bubble.assistant").last).to_contain_text("Back again.")
    c.check()


async def test_open_a_session(console: Opener) -> None:
    c = await console()
    c.sim.enqueue(text_reply("Paris is lovely in spring."))
    status, _ = await c.sc.process("where should I travel?", session_id="trip")
    assert status == 200
    _, chats, _ = await c.sc.call("GET", "/chats")
    [chat] = [chat for chat in chats["chats"] if chat["session_id"] == "trip"]
    await c.sign_in()
    await c.show("sessions")
    row = c.page.locator(f'#sessions tr[data-chat-id="{chat["id"]}"]')
    await row.locator("[data-action=open]").click()
    view = c.page.locator("#session-view")
    await expect(view).to_contain_text("where should I travel?")
    await expect(view).to_contain_text("Paris is lovely in spring.")
    await c.shot("sessions")

    # Branches (issue 38): /undo's cut and the live answer are siblings after the first
    # answer; ‹ makes the older one live again, and › goes back.
    c.sim.enqueue(text_reply("Rome, then."), text_reply("Lisbon, then."))
    await c.sc.process("and in winter?", session_id="trip")
    _, got, _ = await c.sc.call("GET", f"/chats/{chat['id']}?rounds=100")
    paris = next(m["sequence"] for m in got["messages"] if m["role"] == "assistant")
    status, _, _ = await c.sc.call("POST", f"/chats/{chat['id']}/rewind", {"after_sequence": paris})
    assert status == 200
    await c.sc.process("and in autumn?", session_id="trip")
    await row.locator("[data-action=open]").click()
    nav = view.locator(f'.branch-nav[data-fork="{paris}"]')
    await expect(nav).to_contain_text("2/2")
    await nav.locator("[data-action=branch-prev]").click()
    await expect(view.locator(f'.branch-nav[data-fork="{paris}"]')).to_contain_text("1/2")
    await c.shot("sessions-branches")
    _, got, _ = await c.sc.call("GET", f"/chats/{chat['id']}?rounds=100")
    assert got["active_branch"] == 1
    live = [m["content"][0]["text"] for m in got["messages"] if not m.get("cut")]
    assert live == [
        "where should I travel?",
        "Paris is lovely in spring.",
        "and in winter?",
        "Rome, then.",
    ]
    await c.page.locator(f'.branch-nav[data-fork="{paris}"] [data-action=branch-next]').click()
    await expect(view.locator(f'.branch-nav[data-fork="{paris}"]')).to_contain_text("2/2")
    c.check()


async def test_times_are_the_owners_zone_not_the_browsers(console: Opener) -> None:
    """general.timezone is Asia/Shanghai; the browser runs in New York. A chat active
    and a memory saved at 17:30 UTC on March 1 read 2026-03-02 (01:30) on the page."""
    c = await console(zone="America/New_York")
    c.sim.enqueue(text_reply("Noted."))
    status, _ = await c.sc.process("hello", session_id="zone")
    assert status == 200
    _, chats, _ = await c.sc.call("GET", "/chats")
    [chat] = [chat for chat in chats["chats"] if chat["session_id"] == "zone"]
    memory, _ = await c.sc.kernel.store.add_memory("drinks oolong", category="user")
    at = "2026-03-01T17:30:00+00:00"  # as Kernel stores a time: UTC
    with closing(sqlite3.connect(c.sc.kernel.config.data_dir / "kernel.db")) as db, db:
        db.execute("UPDATE sessions SET updated_at = ?", (at,))
        db.execute("UPDATE memories SET created_at = ? WHERE id = ?", (at, memory.id))
    await c.sign_in()
    await c.show("sessions")
    row = c.page.locator(f'#sessions tr[data-chat-id="{chat["id"]}"]')
    await expect(row).to_contain_text("2026-03-02 01:30")  # Shanghai, not 03-01 12:30
    await c.show("memories")
    memory_row = c.page.locator(f'tr[data-memory-id="{memory.id}"]')
    await expect(memory_row).to_contain_text("2026-03-02")  # the UTC day would be 03-01
    c.check()


async def test_a_zone_the_browser_does_not_know_reads_utc_and_says_so(console: Opener) -> None:
    """The configured zone is one this browser's ICU lacks (an older browser than the
    server's tz database): the pages still render, times in UTC marked "UTC"."""
    c = await console()
    c.sim.enqueue(text_reply("Noted."))
    status, _ = await c.sc.process("hello", session_id="zone")
    assert status == 200
    _, chats, _ = await c.sc.call("GET", "/chats")
    [chat] = [chat for chat in chats["chats"] if chat["session_id"] == "zone"]
    at = "2026-03-01T17:30:00+00:00"
    with closing(sqlite3.connect(c.sc.kernel.config.data_dir / "kernel.db")) as db, db:
        db.execute("UPDATE sessions SET updated_at = ?", (at,))

    async def unknown_zone(route: Route) -> None:
        response = await route.fetch()
        words = await response.json()
        await route.fulfill(response=response, json=words | {"timezone": "Mars/Olympus_Mons"})

    await c.page.route("**/console/strings", unknown_zone)
    await c.sign_in()
    await c.show("sessions")
    row = c.page.locator(f'#sessions tr[data-chat-id="{chat["id"]}"]')
    await expect(row).to_contain_text("2026-03-01 17:30 UTC")
    c.check()


async def test_edit_and_delete_a_memory_then_undo(console: Opener) -> None:
    c = await console()
    store = c.sc.kernel.store
    await store.add_memory("drinks green tea", category="user")
    await c.sign_in()
    await c.show("memories")
    page = c.page
    page.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))
    row = page.locator("tr[data-memory-id]").filter(has_text="green tea")
    await expect(row).to_have_count(1)
    await row.locator("[data-action=edit]").click()
    await row.locator("textarea").fill("drinks jasmine tea")
    await row.locator("input.memory-scope").fill("project:kernel")  # moved as well
    await row.locator("[data-action=save]").click()
    edited = page.locator("tr[data-memory-id]").filter(has_text="jasmine tea")
    await expect(edited).to_have_count(1)
    await expect(edited).to_contain_text("project kernel")

    async def texts() -> list[str]:
        return [m.text for m in await store.list_memories()]

    assert await texts() == ["drinks jasmine tea"]
    await edited.locator("[data-action=history]").click()  # the text before the edit
    await expect(edited.locator(".memory-versions")).to_contain_text("drinks green tea (edited)")
    await c.shot("memories")
    await edited.locator("[data-action=delete]").click()
    await expect(page.locator("tr[data-memory-id]")).to_have_count(0)
    await until_async(lambda: texts(), [])
    undo = page.locator("#memory-undo")
    await expect(undo).to_be_visible()
    await c.shot("memories-deleted")
    await undo.click()
    await expect(page.locator("tr[data-memory-id]").filter(has_text="jasmine tea")).to_have_count(1)
    await until_async(lambda: texts(), ["drinks jasmine tea"])
    [restored] = await store.list_memories()
    assert restored.category == "user"
    await c.sc.kernel.audit.settled()  # the console's changes are the owner's, audited
    rows = await c.sc.kernel.audit.rows.events(limit=50, kinds=("memory.changed",))
    assert [(r.actor, r.data and r.data["action"]) for r in rows] == [
        ("owner", "moved"),
        ("owner", "edited"),
        ("owner", "forgotten"),
    ]
    c.check()


async def until_async(read: Callable[[], Awaitable[Any]], wanted: Any) -> None:
    """Wait (30 s at most) until ``await read()`` is ``wanted``."""

    async def matches() -> bool:
        return bool(await read() == wanted)

    await wait_until(matches, what=f"{wanted!r} read")


async def test_pause_and_run_a_job(console: Opener) -> None:
    c = await console()
    body = {
        "name": "morning note",
        "schedule": "every 1d",
        "text": "say good morning",
        "dispatch": {"channel": "console"},
    }
    status, job, _ = await c.sc.call("POST", "/cron/jobs", body)
    assert status == 201, job

    async def state() -> dict[str, Any]:
        _, data, _ = await c.sc.call("GET", f"/cron/jobs/{job['id']}/state")
        return dict(data)

    await c.sign_in()
    await c.show("jobs")
    page = c.page
    row = page.locator(f'#jobs tr[data-job-id="{job["id"]}"]')
    await expect(row).to_contain_text("morning note")
    await row.locator("[data-action=pause]").click()
    await until_async(lambda: _paused(state), True)
    await expect(row.locator("[data-action=resume]")).to_be_visible()
    c.sim.enqueue(text_reply("Good morning!"))
    await row.locator("[data-action=run]").click()
    await until_async(lambda: _runs(state), 1)
    await row.locator("[data-action=history]").click()
    runs = page.locator("#job-runs")
    await expect(runs).to_be_visible()
    await expect(runs).to_contain_text("Good morning!")  # the run's result
    await c.shot("jobs")
    await row.locator("[data-action=resume]").click()
    await until_async(lambda: _paused(state), False)
    c.check()


async def _paused(state: Callable[[], Awaitable[dict[str, Any]]]) -> bool:
    return bool((await state())["paused"])


async def _runs(state: Callable[[], Awaitable[dict[str, Any]]]) -> int:
    now = await state()
    return int(now["run_count"]) if not now["running"] else -1


async def test_answer_a_pending_approval(console: Opener) -> None:
    c = await console(extra=APPROVAL)
    c.sim.enqueue(tool_reply("memory_add", {"text": "likes jazz"}), text_reply("Saved."))
    turn = asyncio.ensure_future(c.sc.process("remember jazz"))
    try:
        await c.sign_in()
        await c.show("asks")
        page = c.page
        ask = page.locator("div.ask[data-ask-id]")
        await expect(ask).to_have_count(1)
        await expect(ask).to_contain_text("likes jazz")
        await c.shot("asks")
        await ask.locator('button[data-option="0"]').click()  # ✅ Approve
        status, data = await asyncio.wait_for(turn, 30)
        assert status == 200 and "Saved." in str(data)
        assert [m.text for m in await c.sc.kernel.store.list_memories()] == ["likes jazz"]
        await page.reload()
        await expect(page.locator("#asks-empty")).to_be_visible()
    finally:
        if not turn.done():
            turn.cancel()
    c.check()


async def test_every_page_shows(console: Opener) -> None:
    """Each page opens with its hooks, nothing refused by the CSP, nothing fetched from
    elsewhere; a screenshot of each (also on a phone-sized screen); settings' export
    downloads."""
    c = await console()
    await c.sign_in()
    hooks = {
        "chat": "#chat-input",
        "sessions": "table#sessions",
        "memories": "#memory-search",
        "jobs": "table#jobs",
        "tasks": "#tasks-empty",
        "usage": "#usage-chart, #usage-by-model",
        "asks": "#asks-empty",
        "skills": "table#skills",
        "settings": "div#settings",
        "audit": "table#audit-events",
    }
    for name, hook in hooks.items():
        await c.show(name)
        await expect(c.page.locator(hook).first).to_be_visible()
        await c.shot(f"page-{name}")
    # Settings offers the owner's data as one download (issue 40): the same zip as
    # GET /agent/export, fetched with the page's sign-in.
    await c.show("settings")
    async with c.page.expect_download() as fetched:
        await c.page.click("#export-download")
    download = await fetched.value
    assert download.suggested_filename.startswith("kernel-export-")
    with zipfile.ZipFile(await download.path()) as archive:
        assert {"memories.jsonl", "sessions.jsonl", "usage.csv"} <= set(archive.namelist())
    await c.page.set_viewport_size({"width": 390, "height": 844})
    for name in ("chat", "memories"):
        await c.show(name)
        await expect(c.page.locator(hooks[name]).first).to_be_visible()
        await c.shot(f"phone-{name}")
    text = await c.page.content()
    assert API_KEY not in text
    c.check()


async def test_chinese_by_default(console: Opener) -> None:
    c = await console(language="zh")
    await c.page.goto(c.url)
    await expect(c.page.locator("#go")).to_have_text("登录")
    await c.sign_in()
    await expect(c.page.locator('#nav a[data-page="chat"]')).to_have_text("对话")
    await expect(c.page.locator("html")).to_have_attribute("lang", "zh")
    await c.shot("zh")
    c.check()


async def test_sign_out(console: Opener) -> None:
    c = await console()
    await c.sign_in()
    page = c.page
    name = cookie_name(c.sc.gateway.port)
    [cookie] = [k for k in await page.context.cookies() if k["name"] == name]
    csrf = await page.evaluate("sessionStorage.getItem('kernel.console.csrf')")
    # What the page sends (its cookie and CSRF token) reads the chats while signed in.
    session = {"Cookie": f"{name}={cookie['value']}", "X-CSRF-Token": csrf}
    assert (await c.sc.call("GET", "/chats", headers=session))[0] == 200
    await page.click("#sign-out")
    await expect(page).to_have_url(c.sc.url + "/console/login")
    await c.shot("signed-out")
    assert [k for k in await page.context.cookies() if k["name"] == name] == []
    await page.goto(c.url)
    await expect(page).to_have_url(c.sc.url + "/console/login")
    # The old cookie is dead on the server too, not just forgotten by the browser.
    status, _, _ = await c.sc.call("GET", "/chats", headers=session)
    assert status == 401
    c.check()


async def test_a_failed_answer_can_be_given_again(console: Opener) -> None:
    """The answer's request fails once (503): the buttons come back, the second press
    answers the turn (final review: they stayed disabled)."""
    c = await console(extra=APPROVAL)
    c.sim.enqueue(tool_reply("memory_add", {"text": "likes blues"}), text_reply("Saved."))
    turn = asyncio.ensure_future(c.sc.process("remember blues"))
    failures = [0]

    async def fail_once(route: Route) -> None:
        if failures[0] == 0:
            failures[0] += 1
            await route.fulfill(status=503, content_type="application/json", body="{}")
        else:
            await route.continue_()

    try:
        await c.sign_in()
        await c.page.route("**/agent/asks/*/answer", fail_once)
        await c.show("asks")
        button = c.page.locator('div.ask button[data-option="0"]')
        await button.click()
        await expect(button).to_be_enabled()
        await button.click()
        status, _ = await asyncio.wait_for(turn, 30)
        assert status == 200 and failures == [1]
    finally:
        if not turn.done():
            turn.cancel()


async def test_a_page_chosen_later_wins_and_a_left_page_stops_polling(console: Opener) -> None:
    """A page whose script or first answer arrives late is never drawn over, or polled
    behind, the page chosen after it (final review)."""
    c = await console()
    await c.sign_in()
    page = c.page
    release = asyncio.Event()

    async def slow(route: Route) -> None:
        await release.wait()
        await route.continue_()

    await page.route("**/console/static/page-usage.js", slow)
    await page.route("**/agent/asks", slow)
    await page.click('#nav a[data-page="usage"]')
    await page.click('#nav a[data-page="asks"]')
    await c.show("skills")
    await expect(page.locator("table#skills")).to_be_visible()
    release.set()
    await page.unroute("**/agent/asks")
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if r.url.endswith("/agent/asks") else None)
    await asyncio.sleep(4)  # past the pending page's 3 s interval: nothing may poll now
    assert asked == []
    assert await page.locator("#usage-chart, #asks").count() == 0
    await expect(page.locator("main#main h1, main#main h2")).to_have_count(1)


async def test_the_audit_page_shows_events_in_words_and_a_broken_chain(console: Opener) -> None:
    """A session's events in words, newest first, with a green badge; after a row is
    edited in the SQLite file the badge names the first broken row (issue 23)."""
    c = await console()
    status, made, _ = await c.sc.call(
        "POST", "/chats", {"session_id": "audited", "name": "Audited"}
    )
    assert status == 201
    n = int(made["id"].removeprefix("chat-"))
    audit = c.sc.kernel.audit
    await audit.record(
        "tool.call", session_id=n, actor="model", tool="memory_search", ok=True, ms=120
    )
    await audit.record("turn.answered", session_id=n, outcome="answered")
    await audit.record("cron.missed", job_id="daily-news", reason="down")
    await c.sign_in()
    await c.page.goto(c.url + f"#audit/{made['id']}")
    page = c.page
    rows = page.locator("table#audit-events tbody tr")
    await expect(rows).to_have_count(2)
    await expect(rows.first).to_contain_text("💬 turn answered")
    await expect(rows.nth(1)).to_contain_text("🔧 tool memory_search ✓ 120 ms")
    await expect(page.locator("#audit-verdict")).to_have_text("✅ record whole: 2 events")
    await expect(page.locator("#audit-verdict")).to_have_class("badge ok")
    await c.shot("audit")
    # The global chain holds the cron event too.
    await page.select_option("#audit-session", "")
    await expect(page.locator("table#audit-events tbody tr").first).to_contain_text(
        "⏰ cron job daily-news missed: Kernel was down"
    )
    edit = "UPDATE audit_events SET data = replace(data, '120', '99') WHERE session_id = ?"
    with closing(sqlite3.connect(c.sc.kernel.store.path)) as conn:
        conn.execute(edit, (n,))
        conn.commit()
    await page.select_option("#audit-session", made["id"])
    await expect(page.locator("#audit-verdict")).to_have_text(
        "⚠️ record broken at #1: the row was changed after it was written"
    )
    await expect(page.locator("#audit-verdict")).to_have_class("badge broken")
    await c.shot("audit-broken")
    c.check()


async def test_a_running_task_shows_and_stops(console: Opener, tmp_path: Path) -> None:
    """Issue 38: the tasks page lists a background task as it runs; Stop stops it."""
    write_agents(tmp_path, {"worker": agent_file("worker", "[lookup]")})
    c = await console()
    release = asyncio.Event()  # never set: the task runs until stopped

    @c.sc.kernel.tools.tool
    async def lookup(query: str) -> str:
        """Look something up.

        Args:
            query: what to look up
        """
        await release.wait()
        return "found"

    c.sim.enqueue(tool_reply("lookup", {"query": "x"}))
    body = {"kind": "agent", "agent": "worker", "task": "dig", "title": "Dig deep"}
    status, task, _ = await c.sc.call("POST", "/agent/tasks", body)
    assert status == 201, task
    await c.sign_in()
    await c.show("tasks")
    row = c.page.locator(f'#tasks tr[data-task-id="{task["id"]}"]')
    await expect(row).to_contain_text("worker: Dig deep")
    await expect(row).to_contain_text("running")
    await c.shot("tasks")
    await row.locator("[data-action=stop]").click()
    await expect(row).to_have_attribute("data-status", "stopped")
    await expect(row.locator("[data-action=stop]")).to_have_count(0)
    assert not c.sc.kernel.agent.tasks.running(task["id"])
    c.check()
