"""A sub-agent in the Telegram chat: its steps as the tool's one progress line, /cancel
stopping it with the turn. Real PTB against the Bot API simulator, the real anthropic
SDK against the model simulator (the parent's and the sub-agent's requests alike)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.agents.kit import agent_file, answered, child_sessions, write_agents
from tests.sim.script import text_reply, tool_reply
from tests.telegram.conftest import CONV, BotHarness, Factory

WORKER = agent_file("worker", "[lookup]", "Look it up, then answer in one line.")


async def start(bot: Factory, tmp_path: Path, release: asyncio.Event) -> BotHarness:
    write_agents(tmp_path, {"worker": WORKER})
    h = await bot(progress_interval=0.2)

    @h.kernel.tools.tool
    async def lookup(query: str) -> str:
        """Look something up.

        Args:
            query: what to look up
        """
        await release.wait()
        return "the answer is 42"

    return h


def edits(h: BotHarness) -> list[str]:
    """The progress line as the chat showed it: in the draft (no placeholder while
    drafts work, issue 37), or in an edited message."""
    shown = ("sendMessageDraft", "editMessageText")
    return [str(c.params["text"]) for c in h.tg.calls if c.method in shown and c.ok]


async def test_its_steps_show_as_one_progress_line_then_the_answer(
    bot: Factory, tmp_path: Path
) -> None:
    release = asyncio.Event()
    h = await start(bot, tmp_path, release)
    h.model.enqueue(
        tool_reply("delegate_task", {"agent": "worker", "task": "what is the answer?"}),
        tool_reply("lookup", {"query": "the answer"}),
        text_reply("It is 42."),
        text_reply("The worker found it: **42**."),
    )

    reply = asyncio.create_task(h.converse("ask the worker"))
    line = "⏳ delegate_task: worker: lookup …"
    await h.tg.wait_until(lambda: line in edits(h), timeout=30)
    release.set()

    assert await asyncio.wait_for(reply, timeout=30) == "The worker found it: 42."
    # one line, in the draft: the sub-agent's words never reach the chat
    assert not any("It is 42." in text for text in h.texts())
    failed = [c for c in h.tg.calls if c.method != "getUpdates" and not c.ok]
    assert failed == []


async def test_cancel_in_the_chat_stops_the_sub_agent(bot: Factory, tmp_path: Path) -> None:
    release = asyncio.Event()  # never set: only /cancel ends the lookup
    h = await start(bot, tmp_path, release)
    h.model.enqueue(
        tool_reply("delegate_task", {"agent": "worker", "task": "what is the answer?"}),
        tool_reply("lookup", {"query": "the answer"}),
    )

    h.tg.inject_text("ask the worker")
    await h.tg.wait_until(lambda: "⏳ delegate_task: worker: lookup …" in edits(h), timeout=30)
    await h.ask("/cancel")
    await h.settle()

    assert not h.kernel.agent.sessions.is_busy(CONV)
    [child] = await child_sessions(h.kernel)
    assert answered(await h.kernel.store.load_messages(child.id))
    h.model.enqueue(text_reply("Stopped, as you asked."))
    assert await h.converse("ok?") == "Stopped, as you asked."
