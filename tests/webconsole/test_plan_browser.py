"""The console's chat page draws the turn's plan (todo_write) as one list, replaced in
place at each update, in a real headless browser (see test_browser.py)."""

from __future__ import annotations

from tests.sim.script import Reply, Text, ToolUse, text_reply, tool_reply
from tests.webconsole.test_browser import (
    Opener,
    anthropic_sim,
    browser,
    console,
    expect,
    pytestmark,
    sidecar,
)

# The fixtures, shared with test_browser.py, and its module-wide event loop.
__all__ = ["anthropic_sim", "browser", "console", "pytestmark", "sidecar"]

FIRST = [
    {"content": "Find <b>flights</b>", "status": "in_progress"},
    {"content": "Book a hotel", "status": "pending"},
]
SECOND = [
    {"content": "Find <b>flights</b>", "status": "completed"},
    {"content": "Book a hotel", "status": "in_progress"},
]


async def test_the_chat_page_draws_the_plan_in_place(console: Opener) -> None:
    c = await console()
    await c.sign_in()
    page = c.page
    c.sim.enqueue(
        tool_reply("todo_write", {"items": FIRST}),
        Reply(Text("Flights found."), ToolUse("todo_write", {"items": SECOND})),
        text_reply("Hotel booked."),
    )
    await page.fill("#chat-input", "plan my trip")
    await page.click("#chat-send")
    await expect(page.locator("#chat-log .bubble.assistant").last).to_contain_text("Hotel booked.")
    plans = page.locator("#chat-log .chat-plan")
    await expect(plans).to_have_count(1)
    await expect(plans.locator(".plan-title")).to_have_text("Plan · 1/2 done")
    items = plans.locator("li.plan-item")
    await expect(items).to_have_text(["☑ Find <b>flights</b>", "▶ Book a hotel"])
    await expect(items.first).to_have_class("plan-item completed")
    await expect(items.last).to_have_class("plan-item in_progress")
    # The plan's tool draws no tool line of its own; the text is never markup.
    await expect(page.locator("#chat-log .tool-line")).to_have_count(0)
    await expect(page.locator("#chat-log .chat-plan b")).to_have_count(0)
    await c.shot("chat-plan")
    c.check()
