"""The words for a session's last activity, against a fixed clock, in both languages;
and /retitle without a titles model answering without an error."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from kernel.commands import Commands
from kernel.commands.listing import activity_words
from kernel.core.i18n import get_language, set_language
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim

TZ = ZoneInfo("Asia/Shanghai")
NOW = datetime(2025, 6, 3, 14, 2, tzinfo=TZ)  # a Tuesday


@pytest.fixture
def language() -> Iterator[None]:
    before = get_language()
    yield
    set_language(before)


def at(month: int, day: int, hour: int = 9, minute: int = 30, year: int = 2025) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=TZ)


@pytest.mark.parametrize(
    ("when", "zh", "en"),
    [
        (at(6, 3, 14, 2), "今天 14:02", "today 14:02"),
        (at(6, 3, 0, 5), "今天 00:05", "today 00:05"),
        (at(6, 3, 14, 3), "今天 14:03", "today 14:03"),  # a stamp a moment ahead
        (at(6, 2, 23, 59), "昨天", "yesterday"),
        (at(6, 1), "周日", "Sun"),
        (at(5, 28), "周三", "Wed"),
        (at(5, 27), "5月27日", "May 27"),
        (at(1, 1), "1月1日", "Jan 1"),
        (at(12, 30, year=2024), "2024-12-30", "2024-12-30"),
    ],
)
def test_activity_in_words(language: None, when: datetime, zh: str, en: str) -> None:
    set_language("zh")
    assert activity_words(when, NOW) == zh
    set_language("en")
    assert activity_words(when, NOW) == en


async def test_retitle_without_a_titles_model_is_no_error(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    conversation = "telegram:7"
    row = await kernel.store.create_session("telegram", user_id="7")
    commands = Commands(kernel)
    await kernel.agent.sessions.resume(conversation, row.id)
    reply = await commands.run(conversation, "retitle", "")
    assert reply is not None and not reply.error and reply.follow_up is None
    assert reply.text.endswith("set one by hand with /retitle NEW TITLE")
    reply = await commands.run(conversation, "retitle", "Taxes 2025")
    assert reply is not None and not reply.error and reply.text == "New title: Taxes 2025"
    assert (await kernel.store.get_session(row.id)).title == "Taxes 2025"  # type: ignore[union-attr]
