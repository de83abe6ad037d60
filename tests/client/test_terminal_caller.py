"""Who a line sent to ``POST /agent/terminal`` acts for: a sidecar caller (``api``),
as on every other HTTP path — never asked to raise the owner's budget, and named
``api`` in every audit row its commands write (issue 35, review of item 3). A real
Kernel behind the sidecar on 127.0.0.1, the strict Anthropic simulator."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kernel.store.audit import AuditRow
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory, sse_events
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply
from tests.waiting import wait_until

# A turn's worst case (max_tokens 1024 at 0.001 a token) fits a 1.5 limit once; after
# an answer that cost 1.0 it no longer does.
LOW = """
[providers.main.prices.model-a]
input = 10.0
output = 1000.0
[budget]
daily = 1.5
"""


async def send(sc: Sidecar, text: str, stream: bool = False) -> tuple[int, Any]:
    """(status, JSON answer) of one line; with ``stream``, the SSE payloads as a list."""
    body = {"text": text, "stream": stream}
    if not stream:
        status, data, _ = await sc.call("POST", "/agent/terminal", body)
        return status, data
    url = sc.url + "/agent/terminal"
    async with sc.http.post(url, json=body, headers=sc.headers()) as response:
        return response.status, [event async for event in sse_events(response)]


async def audit_rows(sc: Sidecar, kind: str) -> list[AuditRow]:
    return [r for r in await sc.kernel.audit.events(limit=1000) if r.kind == kind]


@pytest.mark.parametrize("stream", [False, True])
async def test_retry_over_the_budget_is_refused_never_asked(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, stream: bool
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY, extra=LOW)
    anthropic_sim.enqueue(text_reply("costly", usage=(0, 1000)))
    status, data = await send(sc, "hello")
    assert (status, data["reply"]) == (200, "costly")

    asks = sc.kernel.agent.asks
    retry = asyncio.create_task(send(sc, "/retry", stream))
    await wait_until(lambda: retry.done() or bool(asks.waiting()), timeout=120)
    assert asks.waiting() == []  # not asked to raise the owner's limit

    status, data = await retry
    if stream:
        assert status == 200 and data[-1] == "[DONE]"
        assert not [e for e in data[:-1] if e["type"] == "ask_user"], data
        error = data[-2]
        assert (error["type"], error["meta"]["code"]) == ("error", "budget_exceeded")
    else:
        error = data["error"]
        assert (status, error["code"]) == (402, "budget_exceeded")
        assert "$1.50" in error["message"]
    assert len(anthropic_sim.requests) == 1  # the retry's turn never reached the model
    [cut] = await audit_rows(sc, "history.cut")
    assert (cut.actor, cut.data and cut.data["command"]) == ("api", "retry")
    received = await audit_rows(sc, "message.received")
    assert [(r.actor, bool(r.data and r.data.get("retry"))) for r in received] == [
        ("api", False),
        ("api", True),
    ]


async def test_commands_over_the_sidecar_are_audited_as_api(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    anthropic_sim.enqueue(text_reply("one"), text_reply("two"), text_reply("three"))
    for text in ("q-one", "q-two", "q-three"):
        status, _ = await send(sc, text)
        assert status == 200

    status, data = await send(sc, "/model model-b")
    assert (status, data["command"]["text"]) == (200, "Switched to model model-b")
    status, data = await send(sc, "/model auto")
    assert status == 200 and not data["command"]["error"]
    status, data = await send(sc, "/undo")
    assert status == 200 and not data["command"]["error"]
    _, chat, _ = await sc.call("GET", "/chats/chat-default")
    first_answer = [m for m in chat["messages"] if m["role"] == "assistant"][0]["sequence"]
    status, data = await send(sc, f"/rewind {first_answer}")
    assert status == 200 and not data["command"]["error"], data

    changed = await audit_rows(sc, "config.changed")
    assert [r.actor for r in changed] == ["api", "api"]
    cuts = await audit_rows(sc, "history.cut")
    assert [(r.actor, r.data and r.data["command"]) for r in cuts] == [
        ("api", "undo"),
        ("api", "rewind"),
    ]
    # The same change through PUT /models/active is named the same.
    status, _, _ = await sc.call(
        "PUT", "/models/active", {"provider_id": "main", "model": "model-b"}
    )
    assert status == 200
    assert [r.actor for r in await audit_rows(sc, "config.changed")] == ["api"] * 3
