"""The plan of a turn (todo_write) in the chat: a silent message of its own (no
placeholder stands while drafts show the progress, issue 37), edited in place at each
update (never an older list after a newer), keeps the tool line below it
while tools run, and stays above the reply when the turn ends or is cancelled."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from kernel.core.i18n import set_language
from kernel.telegram.plan import LIMIT, render_plan
from kernel.telegram.split import utf16_len
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply, tool_reply
from tests.sim.telegram_html import parse_html
from tests.sim.telegram_sim import OWNER
from tests.telegram.conftest import BotHarness, Factory

FIRST = [
    {"content": "Read the config", "status": "in_progress"},
    {"content": "Fix <the> parser & tests", "status": "pending"},
]
SECOND = [
    {"content": "Read the config", "status": "completed"},
    {"content": "Fix <the> parser & tests", "status": "in_progress"},
]
SHOWN_FIRST = "📋 Plan · 0/2 done\n▶ Read the config\n☐ Fix <the> parser & tests"
SHOWN_SECOND = "📋 Plan · 1/2 done\n☑ Read the config\n▶ Fix <the> parser & tests"
NOTE = "\n\n⚙ Running memory_add…"


class GatedSim(AnthropicSim):
    """The model simulator where request ``n`` (from 0) waits for ``gates[n]``, if set:
    the test decides when the model answers, so each update is seen before the next."""

    def __init__(self, gated: tuple[int, ...]) -> None:
        super().__init__()
        self.gates = {n: asyncio.Event() for n in gated}
        self.arrived = 0

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        index, self.arrived = self.arrived, self.arrived + 1
        if index in self.gates:
            await self.gates[index].wait()
        return await super()._messages(request)


async def start(bot: Factory, gated: tuple[int, ...], *replies: Any) -> tuple[BotHarness, GatedSim]:
    model = await GatedSim(gated).start()
    model.enqueue(*replies)
    h = await bot(model=model, extra="progress_interval = 0.05\n")
    return h, model


async def shown(h: BotHarness, message_id: int, text: str) -> None:
    def showing() -> bool:
        message = h.tg.message(OWNER, message_id)
        return message is not None and message.text == text

    await h.tg.wait_until(showing)


def edits_of(h: BotHarness, message_id: int) -> list[str]:
    calls = h.tg.calls_to("editMessageText")
    return [
        parse_html(str(c.params["text"]))[0]
        for c in calls
        if c.ok and int(c.params["message_id"]) == message_id
    ]


async def test_the_plan_is_edited_in_place_and_stays_above_the_reply(bot: Factory) -> None:
    h, model = await start(
        bot,
        (1, 2, 3),
        tool_reply("todo_write", {"items": FIRST}),
        tool_reply("memory_add", {"text": "likes plans"}),
        tool_reply("todo_write", {"items": SECOND}),
        text_reply("All **done**."),
    )
    h.tg.inject_text("fix the parser")
    sent = await h.tg.wait_for(lambda c: c.method == "sendMessage")
    pid = int(sent.result["message_id"])
    assert parse_html(str(sent.params["text"]))[0] == SHOWN_FIRST  # the turn's first message
    assert sent.params["disable_notification"] is True  # silent: the answer notifies

    await shown(h, pid, SHOWN_FIRST)
    model.gates[1].set()
    await shown(h, pid, SHOWN_FIRST + NOTE)  # another tool runs: its line below the plan
    model.gates[2].set()
    await shown(h, pid, SHOWN_SECOND + NOTE)
    model.gates[3].set()
    await h.settle()

    # One message edited in place, each state once and in order; the last one (through
    # the outbox) without the tool line.
    assert edits_of(h, pid) == [SHOWN_FIRST + NOTE, SHOWN_SECOND + NOTE, SHOWN_SECOND]
    messages = h.bot_messages()
    assert [m.text for m in messages] == [SHOWN_SECOND, "All done."]
    plan = messages[0]
    assert plan.message_id == pid and plan.parse_mode == "HTML"
    struck = [e for e in plan.entities if e["type"] == "strikethrough"]
    units = plan.text.encode("utf-16-le")  # entity offsets count UTF-16 units
    spans = [units[2 * e["offset"] : 2 * (e["offset"] + e["length"])] for e in struck]
    assert [span.decode("utf-16-le") for span in spans] == ["Read the config"]
    assert not [c for c in h.tg.calls_to("editMessageText") if "todo_write" in str(c.params)]


async def test_a_cancelled_turn_leaves_its_plan_as_it_stood(bot: Factory) -> None:
    h, model = await start(bot, (1,), tool_reply("todo_write", {"items": FIRST}))
    h.tg.inject_text("fix the parser")
    sent = (await h.tg.wait_for(lambda c: c.method == "sendMessage")).result
    pid = int(sent["message_id"])
    await shown(h, pid, SHOWN_FIRST)
    await h.tg.wait_until(lambda: model.arrived == 2)  # the turn waits for the model

    assert await h.ask("/cancel") == "Cancelled"
    await h.settle()

    assert h.tg.calls_to("deleteMessage") == []  # the plan stays
    assert h.texts() == [SHOWN_FIRST, "Cancelled"]
    model.gates[1].set()


async def test_a_plan_whose_message_failed_still_shows_above_the_reply(bot: Factory) -> None:
    h, model = await start(bot, (1,), tool_reply("todo_write", {"items": FIRST}), text_reply("ok"))
    h.tg.fail("sendMessage", times=1)  # the plan's own message fails: it comes at the end
    h.tg.inject_text("fix the parser")
    await h.tg.wait_until(lambda: SHOWN_FIRST in h.texts())
    model.gates[1].set()
    await h.settle()
    assert h.texts() == [SHOWN_FIRST, "ok"]


def test_a_plan_at_its_longest_fits_one_message() -> None:
    set_language("en")  # as the bot() factory's config sets it (reset after each test)
    items = [{"content": "&<>" * 100, "status": "completed"} for _ in range(30)]
    text = render_plan(items, "⚙ Running " + "x" * 500)
    assert utf16_len(text) <= LIMIT
    plain, _ = parse_html(text)
    assert plain.count("☑") == 30 and "&lt;" not in plain
    assert render_plan([]) == "📋 Plan cleared"
