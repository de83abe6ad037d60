"""``POST /agent/process`` streams a failover (issue 17): a ``model_switch`` event
naming both models and the cause, before the fallback's first words; the JSON answer
holds it among its events, both as the OpenAPI document describes events."""

from __future__ import annotations

from pydantic import TypeAdapter

from kernel.gateway.routes.agent import Event, ProcessResult
from tests.gateway.conftest import SidecarFactory, message, sse_events
from tests.routing.kit import FALLBACK, PRIMARY, config_lines, overloaded
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Reply, Text


async def test_sse_streams_the_model_switch_before_the_fallbacks_words(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, openai_sim: OpenAISim
) -> None:
    extra = "\n".join(config_lines(openai_sim.base_url, "openai_compat")) + "\n"
    sc = await sidecar(anthropic_sim, extra=extra, fallbacks=[FALLBACK])
    anthropic_sim.enqueue(*overloaded(anthropic_sim))
    openai_sim.enqueue(Reply(Text("from the fallback", chunks=["from ", "the fallback"])))

    body = {"input": [message("hello")], "stream": True, "session_id": "s-switch"}
    async with sc.http.post(sc.url + "/agent/process", json=body, headers=sc.headers()) as resp:
        assert resp.status == 200
        payloads = [p async for p in sse_events(resp)]

    assert payloads[-1] == "[DONE]"
    events = payloads[:-1]
    types = [e["type"] for e in events]
    assert types == [
        "step_started",
        "model_retry",  # issue 34: each retry is told, then the switch
        "model_retry",
        "model_switch",
        "assistant_delta",
        "assistant_delta",
        "completed",
    ]
    assert [e["retry"] for e in events[1:3]] == [
        {"model": PRIMARY, "attempt": n, "of": 2, "reason": "overloaded_error"} for n in (1, 2)
    ]
    switch = events[3]
    assert switch["step"] == 1
    assert switch["switch"] == {"from": PRIMARY, "to": FALLBACK, "reason": "overloaded_error"}
    assert events[-1]["reply"] == "from the fallback"
    for event in events:  # each as the document describes an event
        TypeAdapter(Event).validate_python(event)

    # The JSON form carries the same event.
    anthropic_sim.enqueue(*overloaded(anthropic_sim))
    openai_sim.enqueue(Reply(Text("again")))
    status, data = await sc.process("once more", session_id="s-json")
    assert status == 200 and data["reply"] == "again"
    TypeAdapter(ProcessResult).validate_python(data)
    [switched] = [e for e in data["events"] if e["type"] == "model_switch"]
    assert switched["switch"]["to"] == FALLBACK
