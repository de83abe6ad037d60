"""/usage and the spend lines of /status on a real Kernel: turns through the Anthropic
simulator on an injected clock, prices configured, every figure computed by hand."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.commands import Commands, render_report
from kernel.config import load_config
from kernel.core.i18n import set_language
from kernel.core.usage import Usage
from kernel.spend import CallTag, build_report
from kernel.spend.report import sparkline
from tests.clock import ManualClock
from tests.conftest import write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Text, ToolUse, text_reply

CONV = "console:default"
# model-a: $3 in, $15 out per million tokens; model-b has no price.
PRICES = """
[providers.main.prices."model-a"]
input = 3.0
output = 15.0
[budget]
daily = 1.0
monthly = 20.0
"""


def local(day: str, hour: int = 10) -> datetime:
    """``hour`` o'clock on ``day`` in Asia/Shanghai (UTC+8), as UTC."""
    return datetime.fromisoformat(f"{day}T{hour - 8:02d}:00:00+00:00").astimezone(UTC)


@pytest.fixture
async def kernel(tmp_path: Path, anthropic_sim: AnthropicSim) -> AsyncIterator[Kernel]:
    path = write_config(tmp_path, anthropic_sim.base_url, "claude", language="en")
    path.write_text(path.read_text() + PRICES)
    clock = ManualClock(local("2026-11-27"))
    kernel = Kernel(load_config(path, env={}, require_telegram=False), clock=clock)
    await kernel.start()
    yield kernel
    await kernel.stop()


def clock_of(kernel: Kernel) -> ManualClock:
    assert isinstance(kernel.clock, ManualClock)
    return kernel.clock


async def turn(kernel: Kernel, sim: AnthropicSim, fresh: int, output: int) -> None:
    sim.enqueue(text_reply("ok", usage=(fresh, output)))
    final = await kernel.agent.start_turn(CONV, UserInput("hi", channel="console")).wait()
    assert final.type == "completed"


async def text_of(commands: Commands, name: str, arg: str = "") -> str:
    reply = await commands.run(CONV, name, arg)
    assert reply is not None
    return reply.text


async def test_usage_shows_periods_groups_the_last_14_days_and_the_budget(
    kernel: Kernel, anthropic_sim: AnthropicSim
) -> None:
    clock = clock_of(kernel)
    commands = Commands(kernel)
    await turn(kernel, anthropic_sim, 100_000, 10_000)  # Fri 27 Nov: 0.30 + 0.15 = $0.45
    clock.advance(to=local("2026-11-30"))  # Monday: this week, last month
    await turn(kernel, anthropic_sim, 20_000, 4_000)  # 0.06 + 0.06 = $0.12
    clock.advance(to=local("2026-12-01"))
    await turn(kernel, anthropic_sim, 30_000, 0)  # $0.09
    clock.advance(to=local("2026-12-02"))  # Wednesday: today
    await turn(kernel, anthropic_sim, 10_000, 2_000)  # 0.03 + 0.03 = $0.06
    assert await text_of(commands, "model", "model-b") == "Switched to model model-b"
    await turn(kernel, anthropic_sim, 5_000, 1_000)  # no price: unknown
    # A cron run's call, through the meter as the runner's turn records it.
    await kernel.agent.meter.record(
        "main", "model-a", Usage(10_000), CallTag("cron", channel="cron", job_id="cron-default")
    )  # $0.03
    job = kernel.cron.jobs["cron-default"].spec.name

    lines = (await text_of(commands, "usage")).splitlines()
    assert lines == [
        "📊 Usage and spend",
        "Today: $0.09 + 1 of unknown price · 3 calls · 25.0K in (0% cached) · 3.0K out",
        "This week: $0.30 + 1 of unknown price · 5 calls · 75.0K in (0% cached) · 7.0K out",
        "This month: $0.18 + 1 of unknown price · 4 calls · 55.0K in (0% cached) · 3.0K out",
        "This month input: fresh 55.0K · cache read 0 · cache write 0; output 3.0K",
        "This month: 1 calls of unknown price, not in the sums: set the model's price in"
        " [providers.<name>.prices]",
        # 19 Nov … 2 Dec: $0.45 on the 27th is the top; 0.12 → ▃, 0.09 → ▂ (of 7 steps)
        "Daily cost, last 14 days: ▁▁▁▁▁▁▁▁█▁▁▃▂▂",
        "This month by model:",
        "• main:model-a $0.18 · 3 calls",
        "• main:model-b unknown cost · 1 calls",
        "By channel:",
        "• console $0.15 + 1 of unknown price · 3 calls",
        "• cron $0.03 · 1 calls",
        "By cron job:",
        f"• {job} $0.03 · 1 calls",
        "Budget: today $0.09 / $1.00 · month $0.18 / $20.00",
    ]
    week = (await text_of(commands, "usage", "week")).splitlines()
    assert week[4] == "This week input: fresh 75.0K · cache read 0 · cache write 0; output 7.0K"
    assert "• main:model-a $0.30 · 4 calls" in week
    refused = await commands.run(CONV, "usage", "year")
    assert refused is not None and refused.error and refused.text.startswith("Unknown period")

    report = await build_report(kernel.agent.meter)
    data = report.as_json()
    assert [p["period"] for p in data["periods"]] == ["today", "week", "month"]
    month = data["periods"][2]
    assert month["since"] == "2026-12-01T00:00:00+08:00"
    assert (month["calls"], month["unpriced_calls"], month["cost"]) == (4, 1, 0.18)
    assert month["by_job"] == [
        {**month["by_job"][0], "key": "cron-default", "name": "", "calls": 1}
    ]  # no names given: the id stands
    assert data["days"][8] == {
        "date": "2026-11-27",
        "calls": 1,
        "tokens": 110_000,
        "cost": 0.45,
        "unpriced_calls": 0,
    }
    assert data["budget"]["spent_today"] == 0.09 and data["sparkline_of"] == "cost"

    set_language("zh")  # the other catalogue has every placeholder too
    try:
        text = render_report(report, "week").splitlines()
    finally:
        set_language("en")
    assert text[1] == "今日：$0.09 + 1 次价格未知 · 3 次调用 · 输入 25.0K（缓存 0%）· 输出 3.0K"
    assert "本周按模型：" in text and "• cron-default $0.03 · 1 次" in text
    assert text[-1] == "预算：今日 $0.09 / $1.00 · 本月 $0.18 / $20.00"


async def test_no_calls_and_only_unknown_prices(
    kernel: Kernel, anthropic_sim: AnthropicSim
) -> None:
    commands = Commands(kernel)
    lines = (await text_of(commands, "usage")).splitlines()
    assert lines[1:4] == [
        "Today: no calls yet",
        "This week: no calls yet",
        "This month: no calls yet",
    ]
    assert lines[4:] == [
        "Daily cost, last 14 days: ▁▁▁▁▁▁▁▁▁▁▁▁▁▁",
        "Budget: today $0.00 / $1.00 · month $0.00 / $20.00",
    ]
    await commands.run(CONV, "model", "model-b")
    await turn(kernel, anthropic_sim, 4_000, 1_000)
    lines = (await text_of(commands, "usage", "today")).splitlines()
    assert lines[1] == "Today: unknown cost · 1 calls · 4.0K in (0% cached) · 1.0K out"
    assert lines[5].startswith("Today: 1 calls of unknown price, not in the sums")
    # No cost known: the line draws tokens instead, and says so.
    assert lines[6] == "Daily tokens, last 14 days (no price known): ▁▁▁▁▁▁▁▁▁▁▁▁▁█"
    assert "• main:model-b unknown cost · 1 calls" in lines


async def test_status_shows_the_running_turns_usage_and_todays_spend(
    kernel: Kernel, anthropic_sim: AnthropicSim
) -> None:
    commands = Commands(kernel)
    await kernel.agent.meter.extend()  # the owner raised today's limit by the step ($1)
    anthropic_sim.enqueue(
        Reply(Text("looking"), ToolUse("memory_list", {}), usage=(2_000, 1_000)),  # $0.021
        Reply(Text("still"), stall_after=1),  # the second call hangs: the turn runs
    )
    running = kernel.agent.start_turn(CONV, UserInput("hi", channel="console"))
    await anthropic_sim.wait_for_requests(2)

    status = (await text_of(commands, "status", "full")).splitlines()
    assert status[2] == "State: replying"
    assert status[3] == "Spend: today $0.02 / $2.00 (raised $1.00 today)"
    turn = status.index("Last model call: main:model-a (the default)")  # the first call's
    assert status[turn + 1 : turn + 3] == [
        "This turn: 1 calls · 2.0K in (0% cached) · 1.0K out · $0.02",
        "Budget: today $0.02 / $2.00 (raised $1.00 today) · month $0.02 / $21.00",
    ]
    assert running.cancel()
    await running.wait()
    status = (await text_of(commands, "status")).splitlines()
    # the cancelled second call counts too: the prompt it sent was read (its usage is
    # unknown, so the budget counts the input's worst case)
    assert status[2] == "State: idle" and status[3].startswith("Spend: today $0.03")


def test_sparkline_scales_to_the_largest_and_leaves_empty_days_low() -> None:
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([0.0, 0.0]) == "▁▁"
    assert sparkline([]) == ""
    assert sparkline([5, 0.01]) == "█▁"
