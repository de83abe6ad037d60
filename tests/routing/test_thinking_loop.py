"""Claude's thinking through a turn's tool loop, across a failover (issue 17).

With budgeted thinking on, the Messages API requires the assistant message a tool loop
goes on from to start with the thinking block the model made for it, unchanged
(signature and all). So Kernel keeps a turn's thinking blocks in memory, sends them
back only to the model that made them, sends a budgeted call without thinking when the
continuing message was made by another model, and never stores them.

The Anthropic simulator checks the round trip as the API does (a budgeted-thinking
continuation that does not open with a thinking block, or a signature it did not
issue, is a 400), so an answered request here is an accepted one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernel.app import Kernel
from tests.routing.kit import FALLBACK, PRIMARY, Pair, overloaded, reply_of, switches, two_models
from tests.sim.script import Reply, Text, Thinking, ToolUse, text_reply

DEEP = [{"name": "deep", "pattern": "(?i)weather", "reasoning": "high"}]
THOUGHT = "The owner wants the weather; look it up first."


def add_lookup(kernel: Kernel) -> None:
    @kernel.tools.tool
    def lookup(city: str) -> str:
        """The weather in a city.

        Args:
            city: the city name
        """
        return f"sunny in {city}"


def request(requests: list[Any], index: int = -1) -> dict[str, Any]:
    body = requests[index].body
    assert isinstance(body, dict)
    return body


def thinking_blocks_in(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        block
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") in ("thinking", "redacted_thinking")
    ]


async def thinking_step(pair: Pair) -> None:
    """Script main (Claude) to think, then call ``lookup``."""
    pair.main.enqueue(Reply(Thinking(THOUGHT), ToolUse("lookup", {"city": "Paris"}, id="t1")))


async def test_claude_gets_its_own_thinking_back_through_the_tool_loop(tmp_path: Path) -> None:
    async with two_models(tmp_path, rules=DEEP) as pair:
        add_lookup(pair.kernel)
        await thinking_step(pair)
        pair.main.enqueue(text_reply("Sunny."))

        assert reply_of(await pair.turn("weather in Paris?")) == "Sunny."

        second = request(pair.main.requests)
        assert second["thinking"] == {"type": "adaptive"}
        assert second["output_config"] == {"effort": "high"}
        assistant = second["messages"][-2]
        assert assistant["role"] == "assistant"
        first, use = assistant["content"][0], assistant["content"][1]
        assert (first["type"], first["thinking"]) == ("thinking", THOUGHT)
        assert first["signature"]  # sent back as the model streamed it
        assert (use["type"], use["id"]) == ("tool_use", "t1")

        # Stored history never holds thinking: the next turn sends none of it.
        pair.main.enqueue(text_reply("Still sunny."))
        await pair.turn("and the weather now?")
        assert thinking_blocks_in(request(pair.main.requests)) == []
        assert THOUGHT not in json.dumps(request(pair.main.requests))


async def test_claudes_thinking_is_not_sent_to_the_fallback(tmp_path: Path) -> None:
    async with two_models(tmp_path, rules=DEEP) as pair:
        add_lookup(pair.kernel)
        await thinking_step(pair)
        pair.main.enqueue(*overloaded(pair.main))
        pair.backup.enqueue(text_reply("Sunny, says the backup."))

        events = await pair.turn("weather in Paris?")

        assert reply_of(events) == "Sunny, says the backup."
        [switch] = switches(events)
        assert (switch.from_model, switch.to_model, switch.step) == (PRIMARY, FALLBACK, 2)
        sent = request(pair.backup.requests)
        assert THOUGHT not in json.dumps(sent)
        assert "reasoning_effort" not in sent  # backup does not declare reasoning
        # Main's retries of step 2 all carried its thinking back.
        for recorded in pair.main.requests[1:]:
            assert thinking_blocks_in(request([recorded]))[0]["thinking"] == THOUGHT


@pytest.mark.parametrize("reasoning", ["high", 2048])
async def test_claude_continuing_another_models_tool_call(
    tmp_path: Path, reasoning: str | int
) -> None:
    """Budgeted thinking requires the continued message to open with this model's own
    thinking: that step goes without (the simulator refuses it otherwise, as the API
    does); adaptive thinking does not, so it stays on. Once Claude made the message a
    step continues, its thinking goes back and thinking is on again."""
    # main is OpenAI-compatible (no reasoning), backup is Claude (it reasons).
    backup = {"reasoning": reasoning, "max_tokens": 8192}
    async with two_models(tmp_path, primary="openai_compat", backup=backup) as pair:
        add_lookup(pair.kernel)
        pair.main.enqueue(
            Reply(Text("Checking."), ToolUse("lookup", {"city": "Paris"}, id="o1")),
            *overloaded(pair.main),
        )
        pair.backup.enqueue(
            Reply(Thinking(THOUGHT), ToolUse("lookup", {"city": "Lyon"}, id="c2")),
            text_reply("Sunny in both."),
        )

        events = await pair.turn("weather in Paris and Lyon?")

        assert reply_of(events) == "Checking.\n\nSunny in both."
        assert "reasoning_effort" not in request(pair.main.requests, 0)
        step2 = request(pair.backup.requests, 0)  # continues main's tool call
        assert thinking_blocks_in(step2) == []
        if reasoning == "high":
            assert step2["thinking"] == {"type": "adaptive"}
            assert step2["output_config"] == {"effort": "high"}
        else:
            assert "thinking" not in step2
        # Step 3 continues Claude's own message: its block first, thinking on.
        step3 = request(pair.backup.requests, 1)
        expected = {"type": "adaptive"} if reasoning == "high" else {"type": "enabled"}
        assert step3["thinking"].items() >= expected.items()
        [block] = thinking_blocks_in(step3)
        assert block["thinking"] == THOUGHT
        assert step3["messages"][-2]["content"][0] == block
        decisions = await pair.decisions()
        assert [(d.step, d.chosen, d.reasoning) for d in decisions] == [
            (1, PRIMARY, ""),
            (2, FALLBACK, str(reasoning)),
            (3, FALLBACK, str(reasoning)),
        ]
