"""Background tasks in the owner's chat (issue 38 item 2): a sub-agent's job started by
``task_create`` runs beside the chat (which answers other messages meanwhile), reports
its result once through the outbox, is listed by /tasks with a ⏹ that stops it, and a
restart that cuts it is offered again with one 🔁 button. Real PTB against the Bot API
simulator, the real anthropic SDK against the model simulator, SQLite on disk; the
sub-agent's requests are told from the chat's by their first message (``TASK``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from kernel.agent.background import NewTask
from kernel.tools.registry import ToolContext
from tests.agents.kit import agent_file, write_agents
from tests.sim.script import text_reply, tool_reply
from tests.sim.telegram_sim import ChatMessage
from tests.telegram.conftest import BotHarness, Factory, asking

WORKER = agent_file("worker", "[lookup]", "Look it up, then answer in one line.")
TASK = "TASK-7 find the answer to everything"
CREATE = tool_reply("task_create", {"kind": "agent", "agent": "worker", "task": TASK})


async def start(bot: Factory, tmp_path: Path, release: asyncio.Event, **kw: Any) -> BotHarness:
    write_agents(tmp_path, {"worker": WORKER})
    h = await bot(**kw)

    @h.kernel.tools.tool
    async def lookup(query: str) -> str:
        """Look something up.

        Args:
            query: what to look up
        """
        await release.wait()
        return "the answer is 42"

    return h


def script_worker(h: BotHarness) -> None:
    h.model.enqueue_for(
        TASK, tool_reply("lookup", {"query": "everything"}), text_reply("It is 42.")
    )


def reports(h: BotHarness) -> list[ChatMessage]:
    return [m for m in h.bot_messages() if m.text.startswith("✅ Background task #1 done")]


def buttons(message: ChatMessage) -> list[dict[str, Any]]:
    markup = message.reply_markup
    if isinstance(markup, str):
        markup = json.loads(markup)
    return [b for row in (markup or {}).get("inline_keyboard", []) for b in row]


async def status(h: BotHarness, task_id: int = 1) -> str:
    row = await h.kernel.agent.tasks.rows.get(task_id)
    assert row is not None
    return row.status


async def started(h: BotHarness) -> None:
    """The chat's turn started task #1 and answered; the sub-agent waits in lookup."""
    script_worker(h)
    h.model.enqueue(CREATE, text_reply("Started it in the background."))
    assert await h.converse("find it in the background") == "Started it in the background."
    await h.tg.wait_until(lambda: len(h.model.requests) >= 3, timeout=30)  # the worker's


async def test_a_task_outlives_its_turn_and_reports_once(bot: Factory, tmp_path: Path) -> None:
    release = asyncio.Event()
    h = await start(bot, tmp_path, release)
    await started(h)

    # the chat is free while the task runs
    h.model.enqueue(text_reply("Hello again."))
    assert await h.converse("hi") == "Hello again."
    assert await status(h) == "running"

    release.set()
    await h.tg.wait_until(lambda: bool(reports(h)), timeout=30)
    await h.settle()
    [report] = reports(h)
    assert "worker: TASK-7 find the answer to everything" in report.text
    assert report.text.endswith("It is 42.")
    row = await h.kernel.agent.tasks.rows.get(1)
    assert row is not None and row.status == "done" and row.reported_at is not None
    assert row.result == "It is 42."
    # told once: attaching the teller again (as a restart would) tells nothing more
    h.kernel.agent.tasks.attach(h.channel._teller)  # type: ignore[arg-type]
    await h.settle()
    assert len(reports(h)) == 1
    # plan mode and read_only hold back starting and stopping work, never the list
    tools = h.kernel.tools
    for mode in ("plan", "read_only"):
        held = {
            n
            for n in ("task_create", "task_list", "task_stop", "task_update", "send_message")
            if not tools.allowed_in(n, mode)
        }
        assert held == {"task_create", "task_stop", "send_message"}


async def test_tasks_lists_it_and_its_stop_button_stops_it(bot: Factory, tmp_path: Path) -> None:
    release = asyncio.Event()  # never set: only ⏹ ends the task
    h = await start(bot, tmp_path, release)
    await started(h)

    listing = await h.ask("/tasks")
    assert "#1 ⏳ running · worker: TASK-7" in listing
    [message] = [m for m in h.bot_messages() if m.text.startswith("🧵 Background tasks")]
    [stop] = buttons(message)
    assert stop == {"text": "⏹ Stop #1", "callback_data": "taskstop:1"}

    h.tg.inject_callback(stop["callback_data"], message_id=message.message_id)
    await h.tg.wait_until(lambda: "Stopped background task #1" in message_now(h, message))
    assert await status(h) == "stopped"
    assert not h.kernel.agent.tasks.running(1)
    await h.settle()
    assert reports(h) == []  # a stopped task is not reported as done


def message_now(h: BotHarness, message: ChatMessage) -> str:
    [now] = [m for m in h.bot_messages() if m.message_id == message.message_id]
    return now.text


async def test_a_restart_marks_it_interrupted_and_offers_it_again_once(
    bot: Factory, tmp_path: Path
) -> None:
    release = asyncio.Event()
    h = await start(bot, tmp_path, release)
    await started(h)
    await h.channel.stop()
    await h.kernel.stop()

    again = await start(bot, tmp_path, release, tg=h.tg, model=h.model)
    offer = "⚠️ A restart cut these background tasks:"
    await again.tg.wait_until(lambda: any(m.text.startswith(offer) for m in again.bot_messages()))
    [message] = [m for m in again.bot_messages() if m.text.startswith(offer)]
    assert "#1 worker: TASK-7" in message.text
    assert buttons(message) == [{"text": "🔁 Run again", "callback_data": "taskrun:1"}]
    assert await status(again) == "interrupted"

    release.set()
    script_worker(again)
    again.tg.inject_callback("taskrun:1", message_id=message.message_id)
    await again.tg.wait_until(lambda: bool(reports(again)), timeout=30)
    await again.settle()
    assert "Background task #1 started again" in message_now(again, message)
    assert len(reports(again)) == 1
    offers = [
        c for c in again.tg.calls_to("sendMessage") if str(c.params["text"]).startswith(offer)
    ]
    assert len(offers) == 1
    assert await status(again) == "done"


async def test_a_tasks_approval_is_asked_in_the_chat_under_its_name(
    bot: Factory, tmp_path: Path
) -> None:
    """Approvals apply as in a turn: with delegate_task approval-gated, the task's call
    waits for the owner, asked in the chat under the task's name, after its turn ended."""
    release = asyncio.Event()
    release.set()
    gated = "\n[tools.delegate_task]\napproval = true\napproval_timeout = 60\n"
    h = await start(bot, tmp_path, release, extra=gated)
    script_worker(h)
    h.model.enqueue(CREATE, text_reply("Started it in the background."))
    assert await h.converse("find it in the background") == "Started it in the background."

    await h.tg.wait_until(lambda: any(asking(m) for m in h.bot_messages()))
    asked = next(m for m in h.bot_messages() if asking(m))
    assert asked.text.startswith("⏳ Background task #1: worker: TASK-7")
    assert len(h.model.requests) == 2  # nothing ran before the owner approved
    h.tg.inject_callback(buttons(asked)[0]["callback_data"], message_id=asked.message_id)
    await h.tg.wait_until(lambda: bool(reports(h)), timeout=30)
    assert reports(h)[0].text.endswith("It is 42.")


async def test_a_stop_button_leaves_the_other_tasks_stop_buttons(
    bot: Factory, tmp_path: Path
) -> None:
    """⏹ under /tasks edits the listing into what was done and the listing as it is now:
    the other running task keeps its ⏹ (it was a bare 'stopped' line, every button gone)."""
    h = await start(bot, tmp_path, asyncio.Event())  # never released: only ⏹ ends them
    tasks = h.kernel.agent.tasks
    for n in (1, 2):
        h.model.enqueue_for(f"JOB-{n}", tool_reply("lookup", {"query": "x"}))
        await tasks.create(NewTask("agent", f"JOB-{n}", agent="worker"), ToolContext())
    await h.tg.wait_until(lambda: len(h.model.requests) >= 2, timeout=30)

    await h.ask("/tasks")
    [listing] = [m for m in h.bot_messages() if m.text.startswith("🧵 Background tasks")]
    assert [b["text"] for b in buttons(listing)] == ["⏹ Stop #2", "⏹ Stop #1"]
    h.tg.inject_callback("taskstop:2", message_id=listing.message_id)
    await h.tg.wait_until(lambda: "Stopped background task #2" in message_now(h, listing))
    await h.settle()
    now = message_now(h, listing)
    assert "#2 ⏹ stopped · worker: JOB-2" in now and "#1 ⏳ running · worker: JOB-1" in now
    [left] = [m for m in h.bot_messages() if m.message_id == listing.message_id]
    assert buttons(left) == [{"text": "⏹ Stop #1", "callback_data": "taskstop:1"}]
    await tasks.stop_task(1)


def test_a_tasks_title_is_one_clean_line_whatever_the_cli_is_called() -> None:
    """A task's title (shown in /tasks, its report and the console) is made of the
    model's words: a CLI name with a line break or a direction override cannot break
    or reorder it."""
    title = NewTask("cli", "build it", cli="co\u202edex\nrm -rf", title="Build\n\x1bnow").heading()
    assert title == "co dex rm -rf: Build now"
