"""``kernel usage``: the summary and the ledger from a live sidecar, as text and as
``--json`` (the real command as a process, and its handler in a thread)."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime

import pytest

from kernel.client.http import Sidecar as Client
from kernel.client.usage import usage
from kernel.core.usage import Usage
from kernel.spend import CallTag
from tests.clock import ManualClock
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.gateway.test_cli import kernel as run_kernel
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply

PRICES = """
[providers.main.prices."model-a"]
input = 3.0
output = 15.0
"""
NOW = datetime(2026, 12, 2, 2, 0, tzinfo=UTC)  # Wed 2 Dec, 10:00 in Asia/Shanghai


async def ledger(sidecar: SidecarFactory, sim: AnthropicSim) -> Sidecar:
    """A turn on model-a ($0.06) and a title call on model-b (no price), today."""
    sc = await sidecar(sim, api_key=API_KEY, extra=PRICES, clock=ManualClock(NOW))
    sim.enqueue(text_reply("ok", usage=(10_000, 2_000)))
    status, _ = await sc.process("hi")
    assert status == 200
    await sc.kernel.agent.meter.record("main", "model-b", Usage(1_000, 100), CallTag("title"))
    return sc


async def run(sc: Sidecar, *argv: str) -> str:
    """The verb's handler, off the loop the sidecar answers on (its client blocks)."""
    from kernel.__main__ import _parser

    args = _parser().parse_args(["usage", *argv])
    out = io.StringIO()
    code = await asyncio.to_thread(usage, Client(sc.url, API_KEY), args, out)
    assert code == 0
    return out.getvalue()


async def test_the_summary_and_the_ledger_as_text(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await ledger(sidecar, anthropic_sim)
    lines = (await run(sc)).splitlines()
    assert lines[0].split() == ["PERIOD", "CALLS", "FRESH", "CACHE", "READ", "CACHE", "WRITE"] + [
        "OUTPUT",
        "CACHED",
        "COST",
    ]
    today = lines[1].split()
    assert today[:7] == ["today", "2", "11.0K", "0", "0", "2.1K", "0%"]
    assert " ".join(today[7:]) in ("$0.06 + 1 of unknown price", "$0.06 + 1 次价格未知")
    assert lines[4] == ""
    assert lines[5] == "last 14 days (cost): ▁▁▁▁▁▁▁▁▁▁▁▁▁█"
    text = "\n".join(lines)
    assert "this month by model:" in text and "main:model-a" in text
    assert text.endswith("budget: today $0.06 / no limit · month $0.06 / no limit")

    lines = (await run(sc, "--by", "model", "--entries", "5", "--since", "2026-12-02")).splitlines()
    assert lines[0].split()[:2] == ["MODEL", "CALLS"]
    assert lines[1].split()[:2] == ["main:model-a", "1"]
    assert lines[3].split()[:2] == ["total", "2"]
    assert lines[4] == "" and lines[5].split()[:2] == ["AT", "PROVIDER"]
    assert lines[6].split()[1:4] == ["main", "model-b", "title"]  # newest first
    assert lines[6].split()[-1] == "unknown" and lines[7].split()[-1] == "$0.06"


@pytest.mark.slow  # the real `kernel` command as a process
async def test_kernel_usage_json_and_a_refusal(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await ledger(sidecar, anthropic_sim)
    code, out, err = await run_kernel(sc, "usage", "--json")
    assert (code, err) == (0, "")
    data = json.loads(out)
    today = data["periods"][0]
    assert (today["calls"], today["cost"], today["unpriced_calls"]) == (2, 0.06, 1)
    assert data["sparkline"].endswith("█")

    code, out, err = await run_kernel(sc, "usage", "--json", "--by", "purpose")
    assert code == 0
    groups = {g["key"]: g["calls"] for g in json.loads(out)["groups"]}
    assert groups == {"turn": 1, "title": 1}

    code, out, err = await run_kernel(sc, "usage", "--since", "yesterday")
    assert code == 1 and "(invalid_request)" in err and "since" in err

    # /usage in a `kernel chat` through the sidecar is Telegram's /usage: no model call.
    before = len(anthropic_sim.requests)
    code, out, err = await run_kernel(sc, "chat", stdin="/usage\n/exit\n")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "📊 Usage and spend" and "Today:" in out
    assert len(anthropic_sim.requests) == before
