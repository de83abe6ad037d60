"""``GET /agent/routing/decisions`` and ``GET /agent/routing/providers`` on a live sidecar:
the decisions log read back from the real database, the providers' health as the
breaker has it, the refusals of bad query values, and the key every route needs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kernel.core.event_wire import event_to_dict
from kernel.core.events import ModelSwitched
from kernel.core.usage import Usage
from kernel.store.decisions import Attempt, Decision
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory, message, sse_events
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error, text_reply

PROVIDERS = """
[providers.backup]
type = "openai_compat"
api_base = "http://127.0.0.1:9/v1"
api_key = "backup-key-one"
api_keys = ["backup-key-two"]
default_model = "gpt-x"
models = ["gpt-x"]

[providers.spare]
type = "claude"
api_base = "http://127.0.0.1:9"
default_model = "claude-y"
max_tokens = 1024
models = ["claude-y"]
"""
AT = datetime(2026, 11, 26, 5, 0, tzinfo=UTC)


def decision(n: int, session: int | None, **kw: Any) -> Decision:
    base: dict[str, Any] = {
        "at": AT + timedelta(minutes=n),
        "why": "default",
        "candidates": ["main:model-a", "backup:gpt-x"],
        "chosen": "main:model-a",
        "attempts": [Attempt("main:model-a", "ok", 1.5)],
        "session_id": session,
        "turn_id": f"turn-{n}",
        "step": 1,
        "channel": "api",
        "latency_ms": 1500,
        "usage": Usage(1_000, 50),
        "cost": 0.004,
    }
    return Decision(**(base | kw))


async def get(sc: Sidecar, path: str, **kw: Any) -> tuple[int, Any]:
    status, data, _ = await sc.call("GET", path, **kw)
    return status, data


async def test_decisions_newest_first_by_session_and_limited(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY, extra=PROVIDERS)
    store = sc.kernel.agent.decisions
    await store.record(decision(1, 7))
    failover = decision(
        2,
        7,
        why="rule",
        rule="code",
        chosen="backup:gpt-x",
        attempts=[
            Attempt("main:model-a", "overloaded_error", 2.0, 529),
            Attempt("backup:gpt-x", "ok", 1.0),
        ],
        skipped=[("spare:claude-y", "disabled")],
        reasoning="high",
        cost=None,
    )
    await store.record(failover)
    await store.record(decision(3, 8))

    status, data = await get(sc, "/agent/routing/decisions")
    assert status == 200
    assert data["currency"] == "USD"
    assert [d["turn_id"] for d in data["items"]] == ["turn-3", "turn-2", "turn-1"]

    status, data = await get(sc, "/agent/routing/decisions?session_id=7&limit=1")
    assert status == 200
    (item,) = data["items"]
    assert item == {
        "id": item["id"],
        "at": "2026-11-26T05:02:00.000+00:00",
        "session_id": 7,
        "turn_id": "turn-2",
        "step": 1,
        "channel": "api",
        "job_id": "",
        "why": "rule",
        "rule": "code",
        "sticky": False,
        "candidates": ["main:model-a", "backup:gpt-x"],
        "skipped": [{"model": "spare:claude-y", "why": "disabled"}],
        "chosen": "backup:gpt-x",
        "reasoning": "high",
        "attempts": [
            {"model": "main:model-a", "outcome": "overloaded_error", "seconds": 2.0, "status": 529},
            {"model": "backup:gpt-x", "outcome": "ok", "seconds": 1.0},
        ],
        "failovers": 1,
        "latency_ms": 1500,
        "input_tokens": 1_000,
        "output_tokens": 50,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cost": None,
    }
    status, data = await get(sc, "/agent/routing/decisions?session_id=99")
    assert (status, data["items"]) == (200, [])


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=201", "limit"),
        ("limit=ten", "limit"),
        ("limit=", "limit"),
        ("session_id=-1", "session_id"),
        ("session_id=chat-3", "session_id"),
        ("session_id=" + "9" * 40, "session_id"),
    ],
)
async def test_bad_query_values_are_refused_naming_the_parameter(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, query: str, field: str
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    status, data = await get(sc, "/agent/routing/decisions?" + query)
    assert status == 400
    assert data["error"]["code"] == "invalid_request"
    assert data["error"]["details"]["field"] == field
    message = data["error"]["message"]
    assert field in message and "integer from" in message  # what to send instead


async def test_providers_show_the_breaker_refused_keys_and_disabled_ones(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY, extra=PROVIDERS)
    status, data = await get(sc, "/agent/routing/providers")
    assert status == 200
    assert data["items"] == [
        {
            "provider": "main",
            "state": "closed",
            "failures": 0,
            "retry_in": 0.0,
            "last_error": "",
            "keys": 1,
        },
        {
            "provider": "backup",
            "state": "closed",
            "failures": 0,
            "retry_in": 0.0,
            "last_error": "",
            "keys": 2,
        },
        {
            "provider": "spare",
            "state": "disabled",
            "failures": 0,
            "retry_in": 0.0,
            "last_error": "",
            "keys": 0,
        },
    ]
    health = sc.kernel.agent.health
    for _ in range(health.config.breaker_failures):
        health.failure("main", "overloaded_error")
    health.refused("backup")
    status, data = await get(sc, "/agent/routing/providers")
    main, backup, _ = data["items"]
    assert (main["state"], main["failures"], main["last_error"]) == (
        "open",
        health.config.breaker_failures,
        "overloaded_error",
    )
    assert 0 < main["retry_in"] <= health.config.breaker_cooldown
    assert (backup["state"], backup["last_error"]) == ("unusable", "provider_auth_failed")


async def test_the_key_is_required(sidecar: SidecarFactory, anthropic_sim: AnthropicSim) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    for path in ("/agent/routing/decisions", "/agent/routing/providers"):
        status, data = await get(sc, path, headers={})
        assert status == 401, path
        assert data["error"]["code"] == "unauthorized"
        status, data = await get(sc, path, headers={"X-API-Key": API_KEY[:-1] + "x"})
        assert status == 401, path


def test_a_switch_is_one_sse_event_of_its_own() -> None:
    """What ``/agent/process`` streams for a failover (the turn emits the event)."""
    event = ModelSwitched(2, "main:model-a", "backup:gpt-x", "overloaded_error")
    assert event_to_dict(event) == {
        "type": "model_switch",
        "step": 2,
        "switch": {"from": "main:model-a", "to": "backup:gpt-x", "reason": "overloaded_error"},
    }


async def test_process_streams_the_switch_before_the_fallbacks_answer(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    extra = 'fallbacks = ["main:model-b"]\n'  # into [providers.main], the last table
    sc = await sidecar(anthropic_sim, api_key=API_KEY, extra=extra)
    overloaded = Error(529, "overloaded_error", "Overloaded")
    anthropic_sim.enqueue(overloaded, overloaded, overloaded, text_reply("made it"))
    body = {"input": [message("hi")], "stream": True}
    async with sc.http.post(sc.url + "/agent/process", json=body, headers=sc.headers()) as resp:
        payloads = [p async for p in sse_events(resp)]
    kinds = [p["type"] for p in payloads if isinstance(p, dict)]
    assert kinds.index("model_switch") < kinds.index("assistant_delta")
    (switch,) = [p for p in payloads if isinstance(p, dict) and p["type"] == "model_switch"]
    assert switch["switch"] == {
        "from": "main:model-a",
        "to": "main:model-b",
        "reason": "overloaded_error",
    }
    assert payloads[-2]["reply"] == "made it"
    (logged,) = await sc.kernel.agent.decisions.recent()
    assert logged.chosen == "main:model-b" and logged.failovers == 1
