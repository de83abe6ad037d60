"""The usage ledger: one row per model call, through the real Agent and SDKs against the
simulators — a tool loop, a retry, a title, a cron turn; prices applied; an unknown
price recorded as unknown."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kernel.agent.agent import SessionKey, UserInput
from kernel.agent.titles import TitleMaker
from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.events import Completed
from kernel.core.usage import Usage
from kernel.providers import titles_provider_config
from kernel.spend import cost_of
from kernel.store.usage import UsageEntry, UsageFilter
from tests.conftest import SECRET_KEY, write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import owner_texts
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error, Reply, Text, ToolUse, text_reply

Sim = AnthropicSim | OpenAISim
PRICES = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}


async def start(sim: Sim, tmp_path: Path, *extra: str) -> Kernel:
    kind = "claude" if isinstance(sim, AnthropicSim) else "openai_compat"
    path = write_config(tmp_path, sim.base_url, kind)
    prices = ", ".join(f"{k} = {v}" for k, v in PRICES.items())
    lines = [f"prices = {{ model-a = {{ {prices} }} }}", *extra]
    with path.open("a", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    kernel = Kernel(load_config(path, env={}, require_telegram=False), sleep=_no_wait)
    await kernel.start()
    return kernel


async def _no_wait(_seconds: float) -> None:
    await asyncio.sleep(0)


async def rows(kernel: Kernel) -> list[UsageEntry]:
    return list(reversed(await kernel.agent.meter.ledger.entries(UsageFilter())))


def priced(entry: UsageEntry) -> float | None:
    from kernel.config import ModelPrice

    return cost_of(entry.usage, ModelPrice(**PRICES))


@pytest.fixture
async def kernel_for(tmp_path: Path) -> Any:
    started: list[Kernel] = []

    async def factory(sim: Sim, *extra: str) -> Kernel:
        kernel = await start(sim, tmp_path, *extra)
        started.append(kernel)
        return kernel

    yield factory
    for kernel in started:
        await kernel.stop()


async def test_a_tool_loop_writes_one_row_per_call_with_its_cost(sim: Sim, kernel_for: Any) -> None:
    kernel = await kernel_for(sim)

    @kernel.tools.tool
    def lookup(city: str) -> str:
        """Weather for a city."""
        return f"sunny in {city}"

    sim.enqueue(
        Reply(ToolUse("lookup", {"city": "Paris"}), usage=(1200, 40)),
        Reply(Text("Sunny."), usage=(1300, 7)),
    )
    turn = kernel.agent.start_turn("test:1", UserInput("weather?", channel="telegram"))
    final = await turn.wait()
    assert isinstance(final, Completed) and final.reply == "Sunny."

    first, second = await rows(kernel)
    session = kernel.agent.sessions.current_session("test:1")
    for row in (first, second):
        assert (row.provider, row.model, row.purpose) == ("main", "model-a", "turn")
        assert (row.session_id, row.channel, row.turn_id) == (session, "telegram", turn.id)
        assert row.retries == 0
        assert row.cost is not None and row.cost == pytest.approx(priced(row))
    # what the provider reported (fresh + cached = what the sim counted), per call
    assert (first.usage.prompt, first.usage.output) == (1200, 40)
    assert (second.usage.prompt, second.usage.output) == (1300, 7)
    # the turn's own sum, as the completed event and /status carry it
    assert final.usage["calls"] == 2
    assert final.usage["output_tokens"] == 47
    assert final.usage["cost"] == pytest.approx(round(first.cost + second.cost, 6))  # type: ignore[operator]


async def test_a_call_that_succeeded_after_a_retry_says_so(sim: Sim, kernel_for: Any) -> None:
    kernel = await kernel_for(sim)
    sim.enqueue(Error(529, "overloaded_error"), Error(503), text_reply("at last"))
    final = await kernel.agent.start_turn("test:1", UserInput("hi")).wait()
    assert isinstance(final, Completed) and final.reply == "at last"
    [row] = await rows(kernel)  # the failed attempts reported no usage: one row
    assert row.retries == 2


async def test_an_unknown_price_is_recorded_as_unknown(sim: Sim, kernel_for: Any) -> None:
    kernel = await kernel_for(sim)
    await kernel.agent.selection.set_model("model-b")  # no price configured for it
    sim.enqueue(text_reply("fine"))
    await kernel.agent.start_turn("test:1", UserInput("hi")).wait()
    [row] = await rows(kernel)
    assert row.model == "model-b" and row.cost is None
    total = await kernel.agent.meter.ledger.total(UsageFilter())
    assert (total.calls, total.cost, total.unpriced) == (1, 0.0, 1)


async def test_a_cron_turn_is_recorded_with_its_job(sim: Sim, kernel_for: Any) -> None:
    kernel = await kernel_for(sim)
    meta: dict[str, object] = {"source": "cron", "cron_job_id": "job-7"}
    opened = await kernel.agent.sessions.open_session(SessionKey("cron", "", "job-7"), meta=meta)
    assert opened is not None
    sim.enqueue(text_reply("drink water"))
    user_input = UserInput("remind me", channel="cron", interactive=False)
    await kernel.agent.start_turn(opened.conversation, user_input).wait()
    [row] = await rows(kernel)
    assert (row.purpose, row.job_id, row.channel) == ("cron", "job-7", "cron")
    by_job = await kernel.agent.meter.ledger.grouped(UsageFilter(), "job")
    assert [(g.key, g.calls) for g in by_job] == [("job-7", 1)]


async def test_a_title_is_recorded_at_the_titles_price(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    titles = [
        "[titles]",
        'type = "claude"',
        f'api_base = "{anthropic_sim.base_url}"',
        f'api_key = "{SECRET_KEY}"',
        'model = "tiny"',
        "prices = { tiny = { input = 1.0, output = 5.0 } }",
    ]
    kernel = await start(anthropic_sim, tmp_path, *titles)
    try:
        assert kernel.config.titles is not None
        cfg = titles_provider_config(kernel.config.titles)
        kernel.agent.titles = TitleMaker(
            lambda: kernel.plugins.create_provider(cfg), _no_wait, delays=(0.0,)
        )
        anthropic_sim.enqueue(
            text_reply("hello", usage=(900, 30)), text_reply("问候", usage=(80, 4))
        )
        await kernel.agent.start_turn("test:1", UserInput("hi")).wait()
        session = kernel.agent.sessions.current_session("test:1")
        assert session is not None
        await kernel.agent.background.wait(30)  # the title runs after the turn
        entries = await rows(kernel)
        assert [e.purpose for e in entries] == ["turn", "title"]
        title = entries[1]
        assert (title.provider, title.model, title.session_id) == ("titles", "tiny", session)
        # A title's prompt is far below what the API caches: all of it fresh.
        assert title.usage == Usage(80, 4)
        assert title.cost == pytest.approx((80 * 1.0 + 4 * 5.0) / 1e6)
    finally:
        await kernel.stop()


async def test_a_refused_message_is_set_aside_not_sent_later_glued_to_the_next(
    anthropic_sim: AnthropicSim, kernel_for: Any
) -> None:
    kernel = await kernel_for(anthropic_sim, "[budget]", "daily = 0.000001")
    for _ in range(2):  # two runs of a job the day's limit refuses
        final = await kernel.agent.start_turn(
            "test:1", UserInput("drink water", channel="cron", interactive=False)
        ).wait()
        assert final.type == "error" and final.code == "budget_exceeded"
    assert anthropic_sim.requests == []
    kernel.config.budget.daily = 0.0  # the owner lifts the limit
    anthropic_sim.enqueue(text_reply("done"))
    await kernel.agent.start_turn(
        "test:1", UserInput("drink water", channel="cron", interactive=False)
    ).wait()
    [request] = anthropic_sim.requests
    assert len(request.body["messages"]) == 1
    assert owner_texts(request.body["messages"][0]) == ["drink water"]  # once, not thrice
    session = kernel.agent.sessions.current_session("test:1")
    assert session is not None
    shown = await kernel.store.load_transcript(session)
    # kept for people to see, the two refused ones marked
    assert [(m.message.text, m.failed) for m in shown if m.message.role == "user"] == [
        ("drink water", True),
        ("drink water", True),
        ("drink water", False),
    ]
