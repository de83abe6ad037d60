"""Session titles: generated once after a new session's first turn by the separate
[titles] model, retried on transient errors, never on 429, reasoning stripped."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from kernel.agent.titles import TitleMaker, clean_title
from kernel.config import TitlesConfig, load_config
from kernel.core.messages import Message, TextBlock
from kernel.plugins import default_plugins
from kernel.providers import titles_provider_config
from kernel.spend import CallTag, Meter
from kernel.store.db import Store
from kernel.store.usage import UsageFilter
from tests.conftest import write_config
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error, text_reply
from tests.telegram.conftest import Factory


def titles_section(sim: OpenAISim) -> str:
    return (
        f'[titles]\ntype = "openai_compat"\napi_base = "{sim.base_url}"\n'
        'api_key = "sk-titles-0123456789"\nmodel = "tiny"\nmax_tokens = 50\n'
    )


async def test_title_after_first_turn_and_retitle(bot: Factory, openai_sim: OpenAISim) -> None:
    h = await bot(extra=titles_section(openai_sim))
    openai_sim.enqueue(text_reply("<think>the user greets</think>\n“Greeting the owner”"))
    h.model.enqueue(text_reply("Hello!"), text_reply("Fine."))

    await h.converse("hello there")
    await h.tg.wait_until(lambda: len(openai_sim.requests) == 1)
    await h.tg.wait_until(lambda: not h.kernel.agent.background)
    listing = await h.ask("/history")
    assert "Greeting the owner" in listing
    body = openai_sim.requests[0].body
    assert body["model"] == "tiny" and "hello there" in str(body["messages"])

    await h.converse("how are you?")  # not a new session: no second title
    assert len(openai_sim.requests) == 1

    openai_sim.enqueue(text_reply("Small talk"))
    assert await h.ask("/retitle") == "New title: Small talk"
    assert "Session #5 does not exist" in await h.ask("/retitle #5")


def test_clean_title() -> None:
    assert clean_title("<think>unfinished reasoning") == ""
    assert clean_title("<THINK>x</THINK>Title: 'Trip plan'\nextra") == "Trip plan"
    assert len(clean_title("x" * 100)) == 40


async def test_transient_errors_retry_and_429_gives_up(
    openai_sim: OpenAISim, tmp_path: Path
) -> None:
    waits: list[float] = []

    async def sleep(delay: float) -> None:
        waits.append(delay)

    titles = TitlesConfig(
        api_base=openai_sim.base_url, api_key="sk-titles-0123456789", model="tiny"
    )
    provider = default_plugins().create_provider(titles_provider_config(titles))
    maker = TitleMaker(lambda: provider, sleep)
    messages = [Message("user", [TextBlock("plan a trip to Kyoto")])]
    # The title's calls go through a meter built as the agent builds its own.
    config = load_config(
        write_config(tmp_path, openai_sim.base_url, "openai_compat"),
        env={},
        require_telegram=False,
    )
    store = Store(tmp_path / "kernel.db")
    await store.start()
    meter = Meter(
        config, store, clock=lambda: datetime.now(UTC), tz=ZoneInfo(config.general.timezone)
    )
    tag = CallTag("title", session_id=7)
    try:
        openai_sim.enqueue(Error(500), Error(503), text_reply("Kyoto trip"))
        assert await maker.make(messages, meter, tag) == "Kyoto trip"
        assert waits == [3.0, 15.0]

        waits.clear()
        openai_sim.enqueue(Error(429, "rate_limit_error"))
        assert await maker.make(messages, meter, tag) is None
        assert waits == [] and openai_sim.pending == 0

        waits.clear()  # "overloaded" is the provider's trouble, not a quota: retried
        openai_sim.enqueue(Error(529, "overloaded_error"), text_reply("Osaka food"))
        assert await maker.make(messages, meter, tag) == "Osaka food"
        assert waits == [3.0]

        waits.clear()
        openai_sim.enqueue(*(Error(500) for _ in range(4)))
        assert await maker.make(messages, meter, tag) is None
        assert waits == [3.0, 15.0, 60.0]

        # The ledger has one row per answered title call, tagged as a title.
        rows = await meter.ledger.entries(UsageFilter())
        assert [(r.purpose, r.model, r.session_id) for r in rows] == [("title", "tiny", 7)] * 2
    finally:
        await provider.aclose()
        await store.close()


async def test_a_first_turn_that_fails_still_names_its_session(
    bot: Factory, openai_sim: OpenAISim
) -> None:
    h = await bot(extra=titles_section(openai_sim))
    openai_sim.enqueue(text_reply("Broken request"))
    h.model.enqueue(Error(400, "invalid_request_error", "bad request"))

    assert "refused this request" in await h.converse("summarise my week")
    await h.tg.wait_until(lambda: len(openai_sim.requests) == 1)
    await h.tg.wait_until(lambda: not h.kernel.agent.background)
    assert "Broken request" in await h.ask("/history")
