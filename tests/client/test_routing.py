"""``kernel routing decisions|providers``: the decisions log and the providers' health from
a live sidecar, as text and as ``--json`` (the handler in a thread, and the real command
as a process); ``kernel chat`` through the sidecar shows a switch line."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest

from kernel.client.commands import show_stream
from kernel.client.http import Sidecar as Client
from kernel.core.event_wire import event_to_dict
from kernel.core.events import ModelSwitched
from kernel.core.i18n import set_language
from kernel.store.decisions import Attempt
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.gateway.test_cli import kernel as run_kernel
from tests.gateway.test_routing import PROVIDERS, decision
from tests.sim.anthropic_sim import AnthropicSim


async def logged(sidecar: SidecarFactory, sim: AnthropicSim) -> Sidecar:
    """Two decisions of session 7: a plain one, then a failover chosen by a rule."""
    sc = await sidecar(sim, api_key=API_KEY, extra=PROVIDERS)
    store = sc.kernel.agent.decisions
    await store.record(decision(1, 7))
    await store.record(
        decision(
            2,
            7,
            why="rule",
            rule="code",
            sticky=True,
            chosen="backup:gpt-x",
            attempts=[
                Attempt("main:model-a", "overloaded_error", 2.0, 529),
                Attempt("backup:gpt-x", "ok", 1.0),
            ],
            latency_ms=3_200,
            cost=None,
        )
    )
    await store.record(decision(3, None, chosen="", attempts=[Attempt("main:model-a", "timeout")]))
    return sc


async def run(sc: Sidecar, *argv: str) -> str:
    """The verb's handler, off the loop the sidecar answers on (its client blocks)."""
    from kernel.__main__ import _parser

    args = _parser().parse_args(["routing", *argv])
    out = io.StringIO()
    code = await asyncio.to_thread(args.client, Client(sc.url, API_KEY), args, out)
    assert code == 0
    return out.getvalue()


async def test_decisions_as_text_one_line_each(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await logged(sidecar, anthropic_sim)
    lines = (await run(sc, "decisions")).splitlines()
    assert lines[0].split() == [
        "AT",
        "SESSION",
        "CHOSEN",
        "WHY",
        "FAILOVERS",
        "LATENCY",
        "TOKENS",
        "COST",
    ]
    assert len(lines) == 4
    assert lines[1].split() == [  # stored 05:03 UTC: shown in general.timezone (Shanghai)
        "2026-11-26",
        "13:03:00",
        "-",
        "(none)",
        "default",
        "main:model-a→timeout",
        "1.5",
        "s",
        "1.0K→50",
        "$0.0040",
    ]
    assert lines[2].split() == [
        "2026-11-26",
        "13:02:00",
        "7",
        "backup:gpt-x",
        "rule:code",
        "(sticky)",
        "main:model-a→overloaded_error",
        "3.2",
        "s",
        "1.0K→50",
        "unknown",
    ]
    assert lines[3].split()[2:6] == ["7", "main:model-a", "default", "-"]

    lines = (await run(sc, "decisions", "--session", "7", "--limit", "1")).splitlines()
    assert len(lines) == 2 and "backup:gpt-x" in lines[1]


async def test_decisions_and_providers_as_json(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await logged(sidecar, anthropic_sim)
    data = json.loads(await run(sc, "decisions", "--json", "--session", "7"))
    assert [d["chosen"] for d in data["items"]] == ["backup:gpt-x", "main:model-a"]
    assert data["items"][0]["failovers"] == 1

    sc.kernel.agent.health.refused("backup")
    data = json.loads(await run(sc, "providers", "--json"))
    assert [(p["provider"], p["state"], p["keys"]) for p in data["items"]] == [
        ("main", "closed", 1),
        ("backup", "unusable", 2),
        ("spare", "disabled", 0),
    ]
    lines = (await run(sc, "providers")).splitlines()
    assert lines[0].split() == [
        "PROVIDER",
        "STATE",
        "FAILURES",
        "RETRY",
        "IN",
        "LAST",
        "ERROR",
        "KEYS",
    ]
    assert lines[2].split() == ["backup", "unusable", "0", "-", "provider_auth_failed", "2"]
    assert lines[3].split() == ["spare", "disabled", "0", "-", "-", "0"]


def test_a_streamed_switch_is_one_line_of_its_own() -> None:
    """``kernel chats send`` and the remote ``kernel chat`` print the switch on its own
    line, before the answer the fallback streams (never inside it)."""
    set_language("en")  # as KERNEL_LANGUAGE=en sets it for the verb (reset after each test)
    switch = ModelSwitched(1, "main:model-a", "backup:gpt-x", "overloaded_error")
    events: list[dict[str, Any]] = [
        event_to_dict(switch),
        {"type": "assistant_delta", "step": 1, "delta": "Hello"},
        {"type": "completed", "step": 1, "reply": "Hello"},
    ]
    out, err = io.StringIO(), io.StringIO()
    assert show_stream(iter(events), out, err) == 0
    assert out.getvalue() == switch.describe() + "\nHello\n"
    assert "main:model-a" in switch.describe() and "(overloaded)" in switch.describe()


@pytest.mark.slow  # the real `kernel` command as a process
async def test_kernel_routing_as_a_process(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await logged(sidecar, anthropic_sim)
    code, out, err = await run_kernel(sc, "routing", "providers", "--json")
    assert (code, err) == (0, "")
    assert [p["state"] for p in json.loads(out)["items"]] == ["closed", "closed", "disabled"]

    code, out, err = await run_kernel(sc, "routing", "decisions", "--limit", "0")
    assert code == 1 and "(invalid_request)" in err and "limit" in err
