"""Chats opened over HTTP get titles too, and a name someone gave is never replaced."""

from __future__ import annotations

from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import text_reply
from tests.waiting import wait_until


def titles(sim: OpenAISim) -> str:
    return (
        f'\n[titles]\ntype = "openai_compat"\napi_base = "{sim.base_url}"\n'
        'api_key = "sk-titles-0123456789"\nmodel = "tiny"\n'
    )


async def test_http_chats_are_titled_unless_named(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, openai_sim: OpenAISim
) -> None:
    sc = await sidecar(anthropic_sim, extra=titles(openai_sim))
    openai_sim.enqueue(text_reply("Trip to Kyoto"))
    anthropic_sim.enqueue(text_reply("Let's plan."), text_reply("Named."))

    status, data = await sc.process("plan a trip to Kyoto", session_id="trip")
    assert status == 200
    await wait_until(lambda: len(openai_sim.requests) == 1)
    await wait_until(lambda: not sc.kernel.agent.background)
    _, chat, _ = await sc.call("GET", f"/chats/{data['chat_id']}")
    assert chat["name"] == "Trip to Kyoto"

    body = {"session_id": "named", "name": "My own name"}
    status, created, _ = await sc.call("POST", "/chats", body)
    assert status in (200, 201)
    status, data = await sc.process("hello", session_id="named")
    await wait_until(lambda: not sc.kernel.agent.background)
    _, chat, _ = await sc.call("GET", f"/chats/{data['chat_id']}")
    assert chat["name"] == "My own name" and len(openai_sim.requests) == 1
