"""Prompt caching end to end: the real Agent, the real SDKs, the simulators' caches
(tests/sim/caching.py) and the usage ledger. The Anthropic request marks the stable
prefix and the conversation with ``cache_control``; the next turn reads what the last
one wrote; every ledger row shows the call's cached and fresh tokens as the API
reported them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.events import Completed, TurnEvent
from kernel.core.messages import Message, TextBlock, ToolSpec
from kernel.core.provider import ChatRequest
from kernel.providers.claude import _params
from kernel.store.usage import UsageEntry, UsageFilter
from tests.clock import ManualClock
from tests.conftest import write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.caching import CacheUse
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Reply, Text, ToolUse, text_reply

CONV = "test:1"
START = datetime(2025, 6, 1, 10, 30, tzinfo=ZoneInfo("Asia/Shanghai"))
# A tool whose description makes the stable prefix (tools + system) longer than the
# 1024-token minimum whatever the built-in tools weigh: this is about where the
# breakpoints go and what is read, not about the size of Kernel's own prompt.
HANDBOOK = "The owner's handbook, chapter by chapter. " * 100

Booted = Callable[[AnthropicSim | OpenAISim], AbstractAsyncContextManager[Kernel]]


def booted(tmp_path: Path, clock: ManualClock) -> Booted:
    @asynccontextmanager
    async def boot(sim: AnthropicSim | OpenAISim) -> AsyncIterator[Kernel]:
        kind = "claude" if isinstance(sim, AnthropicSim) else "openai_compat"
        config = load_config(
            write_config(tmp_path, sim.base_url, kind), env={}, require_telegram=False
        )
        async with Kernel(config, clock=clock) as kernel:
            kernel.tools.register(
                "handbook", HANDBOOK, {"type": "object", "properties": {}}, lambda: "ok"
            )

            @kernel.tools.tool
            def note(text: str) -> str:
                """Take a note.

                Args:
                    text: the note
                """
                return "noted " + text

            yield kernel

    return boot


async def run(kernel: Kernel, text: str) -> list[TurnEvent]:
    events = [e async for e in kernel.agent.start_turn(CONV, UserInput(text))]
    assert isinstance(events[-1], Completed), events[-1]
    return events


async def rows(kernel: Kernel) -> list[UsageEntry]:
    """The ledger's rows, oldest first."""
    return sorted(await kernel.agent.meter.ledger.entries(UsageFilter()), key=lambda e: e.id)


def marks(value: Any, path: str = "") -> list[str]:
    """Where a request carries ``cache_control``, as paths in prefix order (tools,
    system, messages): ``system.0``, ``messages.0.content.0``…"""
    found: list[str] = []
    if isinstance(value, dict):
        if "cache_control" in value:
            found.append(path)
        order = {"tools": 0, "system": 1, "messages": 2}
        for key, item in sorted(value.items(), key=lambda kv: order.get(kv[0], 3)):
            found += marks(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += marks(item, f"{path}.{index}")
    return found


def words_at(body: dict[str, Any]) -> int:
    """The cache unit index of the first message's first block (after tools and system)."""
    return len(body.get("tools") or []) + len(body["system"])


def figures(use: CacheUse) -> tuple[int, int, int]:
    return use.input, use.read, use.write


def ledger_figures(entry: UsageEntry) -> tuple[int, int, int]:
    return entry.usage.input, entry.usage.cache_read, entry.usage.cache_write


async def test_claude_turns_mark_the_prefix_and_read_the_last_turn(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    clock = ManualClock(START)
    anthropic_sim.enqueue(text_reply("你好！"), text_reply("又见面了。"))
    async with booted(tmp_path, clock)(anthropic_sim) as kernel:
        await run(kernel, "你好")
        clock.advance(60)
        await run(kernel, "你好")
        ledger = await rows(kernel)

    first, second = (r.body for r in anthropic_sim.requests)
    # The stable prefix is marked and byte-identical a minute later; the time is not in it.
    assert first["system"][0]["cache_control"] == {"type": "ephemeral"}
    stable = [json.dumps([b["tools"], b["system"]], ensure_ascii=False) for b in (first, second)]
    assert stable[0] == stable[1]
    assert "2025-06-01" not in stable[0] and "10:3" not in stable[0]
    # The conversation so far is marked on the owner's words, never on the context block.
    assert marks(first) == ["system.0", "messages.0.content.0"]
    assert first["messages"][0]["content"][1]["text"].startswith("<context>")
    assert marks(second) == ["system.0", "messages.2.content.0"]
    assert second["messages"][2]["content"][0] == {
        "type": "text",
        "text": "你好",
        "cache_control": {"type": "ephemeral"},
    }
    assert "10:31" in second["messages"][2]["content"][1]["text"]  # the time moved on

    cold, warm = anthropic_sim.cache_log
    assert cold.read == 0 and cold.write > 1024
    assert (
        warm.hit == words_at(first) and warm.read == cold.write
    )  # the first turn's words and all before
    assert 0 < warm.write < 20 and 0 < warm.input < 100  # the reply and the new words; context
    # The ledger holds what the API reported, call by call.
    assert [r.purpose for r in ledger] == ["turn", "turn"]
    assert [ledger_figures(r) for r in ledger] == [figures(cold), figures(warm)]


async def test_a_tool_loop_reads_each_step_s_prefix(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    clock = ManualClock(START)
    anthropic_sim.enqueue(
        Reply(Text("Noting."), ToolUse("note", {"text": "milk"})),
        Reply(ToolUse("note", {"text": "eggs"})),
        text_reply("Both noted."),
    )
    async with booted(tmp_path, clock)(anthropic_sim) as kernel:
        await run(kernel, "note milk, then eggs")
        ledger = await rows(kernel)

    bodies = [r.body for r in anthropic_sim.requests]
    assert [marks(b) for b in bodies] == [
        ["system.0", "messages.0.content.0"],
        ["system.0", "messages.0.content.0", "messages.2.content.0"],
        ["system.0", "messages.0.content.0", "messages.4.content.0"],
    ]
    assert all(len(marks(b)) <= 4 for b in bodies)
    assert bodies[1]["messages"][2]["content"][0]["type"] == "tool_result"
    one, two, three = anthropic_sim.cache_log
    assert one.read == 0 and one.write > 1024
    assert (
        two.hit == words_at(bodies[0]) and two.read == one.write and two.input == 0
    )  # the owner's words
    assert three.read == two.read + two.write  # the last step's tool result and before
    assert [ledger_figures(r) for r in ledger] == [figures(u) for u in (one, two, three)]
    assert all(r.usage.output > 0 for r in ledger)


async def test_openai_reports_cached_tokens_split_out(
    openai_sim: OpenAISim, tmp_path: Path
) -> None:
    clock = ManualClock(START)
    openai_sim.enqueue(text_reply("你好！"), text_reply("又见面了。"))
    async with booted(tmp_path, clock)(openai_sim) as kernel:
        await run(kernel, "你好")
        clock.advance(60)
        await run(kernel, "你好")
        ledger = await rows(kernel)

    cold, warm = openai_sim.cache_log
    assert cold.read == 0 and warm.read >= 1024 and (warm.read - 1024) % 128 == 0
    # prompt_tokens included the cached part; the ledger's input is the fresh part alone.
    assert [ledger_figures(r) for r in ledger] == [(cold.input, 0, 0), (warm.input, warm.read, 0)]
    assert ledger[1].usage.prompt == warm.prompt


# ---- where the claude provider puts breakpoints, case by case ------------------------------


def user(*texts: str) -> Message:
    return Message("user", [TextBlock(text) for text in texts])


def test_breakpoints_without_a_turn_context() -> None:
    """/v1 passthrough, titles, sampling: the stable prefix and the very last block."""
    request = ChatRequest(
        "m", "be brief", [user("a"), Message("assistant", [TextBlock("b")]), user("c")]
    )
    params = _params(request, 100)
    assert marks(params) == ["system.0", "messages.2.content.0"]
    assert params["system"] == [
        {"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}
    ]


def test_without_a_system_prompt_the_last_tool_is_marked() -> None:
    tools = [ToolSpec("a", "A", {"type": "object"}), ToolSpec("b", "B", {"type": "object"})]
    params = _params(ChatRequest("m", "", [user("hi")], tools=tools), 100)
    assert marks(params) == ["tools.1", "messages.0.content.0"]
    assert "system" not in params


def test_the_context_block_and_thinking_are_never_marked() -> None:
    thinking = {"type": "thinking", "thinking": "hm", "signature": "s"}
    messages = [user("question"), Message("assistant", [])]
    request = ChatRequest(
        "m",
        "s",
        messages,
        history_thinking={1: [thinking]},
        context="<context>\nnow\n</context>",
        context_at=0,
    )
    params = _params(request, 100)
    # The request ends in a thinking block (a prefill): it may not carry a mark.
    assert params["messages"][1]["content"] == [thinking]
    assert marks(params) == ["system.0", "messages.0.content.0"]
    own_turn = ChatRequest("m", "s", [user("q")], context="<context>\nx\n</context>", context_at=0)
    assert marks(_params(own_turn, 100)) == ["system.0", "messages.0.content.0"]
    assert "cache_control" not in _params(own_turn, 100)["messages"][0]["content"][1]
