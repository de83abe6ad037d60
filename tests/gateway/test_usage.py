"""``GET /usage`` and ``GET /usage/summary`` on a live sidecar, and ``usage`` in
``/agent/process``'s completed events: real turns through the Anthropic simulator on an
injected clock, prices configured, figures computed by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kernel.core.usage import Usage
from kernel.spend import CallTag
from tests.clock import ManualClock
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory, message, sse_events
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Text, ToolUse, text_reply

# model-a: $3 in, $15 out, $0.30 cache read per million tokens; model-b has no price.
PRICES = """
[providers.main.prices."model-a"]
input = 3.0
output = 15.0
cache_read = 0.3
[budget]
daily = 5.0
"""


def local(day: str, hour: int = 10) -> datetime:
    """``hour`` o'clock on ``day`` in Asia/Shanghai (UTC+8), as UTC."""
    return datetime.fromisoformat(f"{day}T{hour - 8:02d}:00:00+00:00").astimezone(UTC)


async def start(sidecar: SidecarFactory, sim: AnthropicSim) -> tuple[Sidecar, ManualClock]:
    clock = ManualClock(local("2026-11-30"))
    sc = await sidecar(sim, api_key=API_KEY, extra=PRICES, clock=clock)
    return sc, clock


async def get(sc: Sidecar, query: str) -> tuple[int, Any]:
    status, data, _ = await sc.call("GET", "/usage" + query)
    return status, data


async def test_completed_events_carry_the_turns_usage_json_and_sse(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc, _ = await start(sidecar, anthropic_sim)
    anthropic_sim.enqueue(
        Reply(Text("Looking."), ToolUse("memory_list", {}), usage=(2_000, 100)),
        text_reply("None yet.", usage=(3_000, 200)),
    )
    status, data = await sc.process("what do you remember?")
    assert status == 200
    completed = data["events"][-1]
    assert completed["type"] == "completed"
    # 5,000 in at $3 + 300 out at $15 = 0.015 + 0.0045
    assert completed["usage"] == {
        "input_tokens": 5_000,
        "output_tokens": 300,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "calls": 2,
        "cost": 0.0195,
        "unpriced_calls": 0,
    }

    anthropic_sim.enqueue(text_reply("Hi.", usage=(1_000, 10)))
    body = {"input": [message("hi")], "stream": True}
    async with sc.http.post(sc.url + "/agent/process", json=body, headers=sc.headers()) as resp:
        payloads = [p async for p in sse_events(resp)]
    assert payloads[-1] == "[DONE]"
    assert payloads[-2]["type"] == "completed"
    assert payloads[-2]["usage"]["calls"] == 1 and payloads[-2]["usage"]["cost"] == 0.00315
    # /new makes no model call: its completed event has no usage.
    status, data = await sc.process("/new")
    assert status == 200 and "usage" not in data["events"][-1]


async def test_get_usage_filters_groups_and_rows(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc, clock = await start(sidecar, anthropic_sim)
    meter = sc.kernel.agent.meter
    anthropic_sim.enqueue(text_reply("a", usage=(10_000, 1_000)))  # Mon 30 Nov: $0.045
    status, first = await sc.process("one")
    assert status == 200
    clock.advance(to=local("2026-12-01", 23))  # late on the 1st, local time
    await meter.record(
        "main", "model-a", Usage(1_000, 0, cache_read=10_000), CallTag("cron", job_id="water")
    )  # 0.003 + 0.003 = $0.006
    clock.advance(to=local("2026-12-02"))
    await meter.record("main", "model-b", Usage(500, 50), CallTag("title"))  # no price

    status, data = await get(sc, "")
    assert status == 200
    assert data["total"] == {
        "key": "",
        "calls": 3,
        "input_tokens": 11_500,
        "output_tokens": 1_050,
        "cache_read_tokens": 10_000,
        "cache_write_tokens": 0,
        "cost": 0.051,
        "unpriced_calls": 1,
        "charged": 0.051,  # the unpriced call has no bound either: no price at all
        "cached_share": round(10_000 / 21_500, 4),
    }
    assert (data["since"], data["until"], data["groups"], data["entries"]) == (None, None, [], [])
    assert data["currency"] == "USD"

    # A date is a whole day of the owner's zone: the 23:00 call is on the 1st.
    status, data = await get(sc, "?since=2026-12-01&until=2026-12-01")
    assert data["total"]["calls"] == 1 and data["total"]["cost"] == 0.006
    assert (data["since"], data["until"]) == (
        "2026-12-01T00:00:00+08:00",
        "2026-12-02T00:00:00+08:00",
    )
    status, data = await get(sc, "?since=2026-12-01T15:00:00%2B00:00")  # 23:00 local on the 1st
    assert data["total"]["calls"] == 2
    status, data = await get(sc, "?since=2026-12-01T23:00:01")  # no offset: local
    assert data["total"]["calls"] == 1

    status, data = await get(sc, "?group_by=day")
    assert [(g["key"], g["calls"]) for g in data["groups"]] == [
        ("2026-11-30", 1),
        ("2026-12-01", 1),
        ("2026-12-02", 1),
    ]
    status, data = await get(sc, "?group_by=model")
    assert [(g["key"], g["cost"], g["unpriced_calls"]) for g in data["groups"]] == [
        ("main:model-a", 0.051, 0),
        ("main:model-b", 0.0, 1),
    ]
    assert data["group_by"] == "model"
    status, data = await get(sc, "?purpose=cron&group_by=job")
    assert [(g["key"], g["calls"]) for g in data["groups"]] == [("water", 1)]
    status, data = await get(sc, "?model=model-b&provider=main")
    assert data["total"]["unpriced_calls"] == 1 and data["total"]["cost"] == 0.0
    status, data = await get(sc, "?channel=console&purpose=turn")
    assert data["total"]["calls"] == 1
    status, data = await get(sc, "?purpose=turn&limit=1")
    session = data["entries"][0]["session_id"]
    assert first["chat_id"] in ("chat-default", f"chat-{session}")
    status, data = await get(sc, f"?session_id={session}")
    assert data["total"]["calls"] == 1
    status, data = await get(sc, f"?session_id={session + 1}")
    assert data["total"]["calls"] == 0
    status, data = await get(sc, "?job_id=nothing")
    assert data["total"]["calls"] == 0 and data["total"]["cost"] == 0.0

    status, data = await get(sc, "?limit=2")
    assert [(e["model"], e["purpose"], e["cost"]) for e in data["entries"]] == [
        ("model-b", "title", None),  # newest first; unknown price stays unknown
        ("model-a", "cron", 0.006),
    ]
    assert data["entries"][1]["at"] == "2026-12-01T15:00:00+00:00"
    assert data["entries"][1]["cache_read_tokens"] == 10_000


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?since=yesterday", "since"),
        ("?until=2026-13-01", "until"),
        ("?since=0001-01-01T00:00:00%2B08:00", "since"),
        ("?until=9999-12-31", "until"),
        ("?since=2026-12-02&until=2026-12-01", "until"),
        ("?group_by=week", "group_by"),
        ("?purpose=fun", "purpose"),
        ("?limit=5000", "limit"),
        ("?limit=-1", "limit"),
        ("?session_id=abc", "session_id"),
        ("?session_id=99999999999999999999", "session_id"),
        ("?model=" + "m" * 300, "model"),
    ],
)
async def test_bad_queries_are_refused_with_a_400_naming_the_parameter(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, query: str, field: str
) -> None:
    sc, _ = await start(sidecar, anthropic_sim)
    status, data = await get(sc, query)
    assert status == 400, data
    assert data["error"]["code"] == "invalid_request"
    assert data["error"]["details"]["field"] == field
    assert field in data["error"]["message"] or field == "until"


async def test_the_key_is_required_and_the_summary_matches_usage(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc, clock = await start(sidecar, anthropic_sim)
    for path in ("/usage", "/usage/summary"):
        status, data, _ = await sc.call("GET", path, headers={})
        assert status == 401, path
    anthropic_sim.enqueue(text_reply("a", usage=(10_000, 1_000)))  # Mon 30 Nov: $0.045
    await sc.process("one")
    clock.advance(to=local("2026-12-02"))
    status, data, _ = await sc.call("GET", "/usage/summary")
    assert status == 200
    today, week, month = data["periods"]
    assert (today["calls"], week["calls"], month["calls"]) == (0, 1, 0)
    assert week["cost"] == 0.045 and week["by_channel"][0]["key"] == "console"
    assert week["since"] == "2026-11-30T00:00:00+08:00"
    assert data["sparkline"] == "▁" * 11 + "█▁▁" and data["sparkline_of"] == "cost"
    assert data["budget"] == {
        "currency": "USD",
        "daily": 5.0,
        "monthly": 0.0,
        "raised_today": 0.0,
        "step": 1.0,
        "spent_today": 0.0,
        "spent_month": 0.0,
    }
