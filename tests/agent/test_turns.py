"""The turn loop end to end: real SDKs against the simulators, SQLite on disk."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.core.events import (
    AssistantDelta,
    Completed,
    ErrorEvent,
    StepStarted,
    ToolCall,
    ToolResult,
    TurnEvent,
)
from kernel.core.i18n import t
from kernel.core.messages import ImageBlock
from tests.conftest import SECRET_KEY, KernelFactory
from tests.sim import context
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error, Reply, Text, ToolUse, text_reply

Sim = AnthropicSim | OpenAISim
CONV = "test:1"


async def run(kernel: Kernel, text: str, **kw: Any) -> list[TurnEvent]:
    turn = kernel.agent.start_turn(CONV, UserInput(text, **kw))
    return [e async for e in turn]


def sent(sim: Sim, index: int = -1) -> list[dict[str, Any]]:
    """The conversation messages of a recorded model request (system message excluded)."""
    body = sim.requests[index].body
    assert body is not None
    return [m for m in body["messages"] if m.get("role") != "system"]


def system_of(sim: Sim, index: int = -1) -> str:
    return context.system_of(sim.requests[index])


async def test_plain_streamed_reply(sim: Sim, make_kernel: KernelFactory) -> None:
    sim.enqueue(Reply(Text("Hello there, owner!", chunks=["Hello ", "there, ", "owner!"])))
    kernel = await make_kernel(sim)

    events = await run(kernel, "hi")

    deltas = [e.delta for e in events if isinstance(e, AssistantDelta)]
    assert deltas == ["Hello ", "there, ", "owner!"]
    assert isinstance(events[0], StepStarted)
    assert isinstance(events[-1], Completed) and events[-1].reply == "Hello there, owner!"
    session = kernel.agent.sessions.current_session(CONV)
    assert session is not None
    stored = await kernel.store.load_messages(session)
    assert [(m.role, m.text) for m in stored] == [
        ("user", "hi"),
        ("assistant", "Hello there, owner!"),
    ]
    # the layers reached the model: the persona in the system prompt; the local time,
    # volatile, in the context block after the owner's words in the turn's own message
    assert "你是 Kernel" in system_of(sim) and "当前时间" not in system_of(sim)
    assert "当前时间" in context.context_of(sim.requests[-1])
    assert "Asia/Shanghai" in context.context_of(sim.requests[-1])
    assert context.owner_texts(context.turn_message(sim.requests[-1])) == ["hi"]


async def test_two_step_tool_loop(sim: Sim, make_kernel: KernelFactory) -> None:
    kernel = await make_kernel(sim)
    seen: list[str] = []

    @kernel.tools.tool
    def lookup_weather(city: str) -> dict[str, Any]:
        """Current weather for a city.

        Args:
            city: the city name
        """
        seen.append(city)
        return {"city": city, "sky": "clear", "temp_c": 21}

    sim.enqueue(
        Reply(Text("Let me check."), ToolUse("lookup_weather", {"city": "Paris"})),
        text_reply("It is clear and 21°C in Paris."),
    )
    events = await run(kernel, "weather in Paris?")

    assert seen == ["Paris"]
    calls = [e for e in events if isinstance(e, ToolCall)]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [(c.name, c.arguments) for c in calls] == [("lookup_weather", {"city": "Paris"})]
    assert results[0].ok and "clear" in results[0].summary
    assert isinstance(events[-1], Completed)
    # the text written before the tool call is part of the answer too
    assert events[-1].reply == "Let me check.\n\nIt is clear and 21°C in Paris."
    assert [e.step for e in events if isinstance(e, StepStarted)] == [1, 2]
    # the second request carried the tool result back in the provider's own format
    second = sent(sim, 1)
    if isinstance(sim, AnthropicSim):
        result = second[-1]["content"][0]
        assert result["type"] == "tool_result" and "clear" in result["content"]
        assert "lookup_weather" in [t["name"] for t in sim.requests[1].body["tools"]]
    else:
        assert second[-1]["role"] == "tool" and "clear" in second[-1]["content"]
        names = [t["function"]["name"] for t in sim.requests[1].body["tools"]]
        assert "lookup_weather" in names


async def test_parallel_tool_calls_run_concurrently(sim: Sim, make_kernel: KernelFactory) -> None:
    kernel = await make_kernel(sim)
    both_running = asyncio.Event()
    running: set[str] = set()

    @kernel.tools.tool
    async def fetch(key: str) -> str:
        """Fetch a value.

        Args:
            key: which value
        """
        running.add(key)
        if len(running) == 2:
            both_running.set()
        await asyncio.wait_for(both_running.wait(), timeout=30)
        return f"value-of-{key}"

    sim.enqueue(
        Reply(ToolUse("fetch", {"key": "a"}), ToolUse("fetch", {"key": "b"})),
        text_reply("a and b fetched"),
    )
    events = await run(kernel, "fetch a and b")

    assert isinstance(events[-1], Completed) and events[-1].reply == "a and b fetched"
    assert sorted(e.summary for e in events if isinstance(e, ToolResult)) == [
        "value-of-a",
        "value-of-b",
    ]
    second = sent(sim, 1)
    if isinstance(sim, AnthropicSim):
        ids = [b["tool_use_id"] for b in second[-1]["content"]]
        uses = [b["id"] for b in second[-2]["content"] if b["type"] == "tool_use"]
    else:
        ids = [m["tool_call_id"] for m in second[-2:]]
        uses = [c["id"] for c in second[-3]["tool_calls"]]
    assert ids == uses and len(ids) == 2


async def test_image_reaches_model_in_provider_format(sim: Sim, make_kernel: KernelFactory) -> None:
    kernel = await make_kernel(sim)
    png = base64.b64encode(b"\x89PNG\r\n\x1a\nfake-image-bytes").decode()
    sim.enqueue(text_reply("A tiny picture."))

    events = await run(kernel, "what is this?", images=[ImageBlock("image/png", png)])

    assert isinstance(events[-1], Completed)
    user = sent(sim)[-1]
    if isinstance(sim, AnthropicSim):
        image = next(b for b in user["content"] if b["type"] == "image")
        assert image["source"] == {"type": "base64", "media_type": "image/png", "data": png}
    else:
        image = next(p for p in user["content"] if p["type"] == "image_url")
        assert image["image_url"]["url"] == f"data:image/png;base64,{png}"
    # history keeps a marker, not the bytes
    stored = await kernel.store.load_messages(kernel.agent.sessions.current_session(CONV) or 0)
    assert "[图片已处理]" in stored[0].text and png not in json.dumps(stored[0].text)


async def test_429_then_success_honours_retry_after(sim: Sim, make_kernel: KernelFactory) -> None:
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)
        await asyncio.sleep(delay)

    kernel = await make_kernel(sim, sleep=sleep)
    sim.enqueue(Error(429, "rate_limit_error", "slow down", retry_after=0.3), text_reply("ok now"))

    events = await run(kernel, "hi")

    assert waits == [0.3]
    assert isinstance(events[-1], Completed) and events[-1].reply == "ok now"
    assert len(sim.requests) == 2


async def test_500_exhausts_retries_and_reports_without_secret(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(sim)  # max_retries = 2 in the test config
    echo = f"upstream exploded (key {SECRET_KEY})"
    sim.enqueue(*(Error(500, "api_error", echo) for _ in range(3)))

    events = await run(kernel, "hi")

    assert len(sim.requests) == 3
    error = events[-1]
    assert isinstance(error, ErrorEvent)
    assert "500" in error.meta["detail"] and "upstream exploded" in error.meta["detail"]
    assert "upstream exploded" not in error.message and "🔁" in error.message  # issue 34
    for text in (error.message, error.meta["detail"]):
        assert SECRET_KEY not in text and SECRET_KEY[-12:] not in text
    assert SECRET_KEY not in kernel.agent.last_error
    # the user's message is kept; the next turn works
    sim.enqueue(text_reply("back again"))
    events = await run(kernel, "still there?")
    assert isinstance(events[-1], Completed) and events[-1].reply == "back again"
    texts = [m for m in sent(sim) if m["role"] == "user"]
    assert "hi" in json.dumps(texts) and "still there?" in json.dumps(texts)


async def test_unrepairable_and_unknown_tools_become_errors_the_model_reads(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(sim)

    @kernel.tools.tool
    def explode(reason: str) -> str:
        """Always fails.

        Args:
            reason: why
        """
        raise RuntimeError(f"boom: {reason}")

    sim.enqueue(
        Reply(ToolUse("explode", {"reason": "test"}), ToolUse("no_such_tool", {})),
        text_reply("Both failed, sorry."),
    )
    events = await run(kernel, "try")

    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.ok for r in results] == [False, False]
    assert "boom: test" in results[0].summary or "boom: test" in json.dumps(sent(sim, 1))
    assert t("tool.unknown", name="no_such_tool", listing="") in json.dumps(
        sent(sim, 1), ensure_ascii=False
    )
    assert isinstance(events[-1], Completed) and events[-1].reply == "Both failed, sorry."
