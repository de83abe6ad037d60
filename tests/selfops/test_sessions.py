"""SelfOps sessions: bootstrap (a chat, its first input and one turn in one call) and a
session's own model, which that session's turns use (HTTP and Telegram) while every
other session and the global active model stay as they were."""

from __future__ import annotations

from pathlib import Path

from kernel.gateway.routes import ROUTERS
from kernel.gateway.server import Gateway
from tests.gateway.conftest import SidecarFactory, message, sse_events
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply
from tests.telegram.conftest import CONV, Factory

SPARE = '\n[providers.spare]\ntype = "openai_compat"\ndefault_model = "x-1"\n'  # no key: disabled


async def test_a_session_model_applies_to_that_session_only(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, extra=SPARE)
    anthropic_sim.enqueue(*(text_reply(f"r{i}") for i in range(5)))
    await sc.process("hello", session_id="s1")
    await sc.process("hello", session_id="s2")

    status, data, _ = await sc.call(
        "PUT", "/agent/self/sessions/s1/model", {"provider_id": "main", "model": "model-b"}
    )

    assert status == 200
    assert data["active_llm_override"] == {"provider_id": "main", "model": "model-b"}
    assert data["applied_model"] == {"provider_id": "main", "model": "model-b"}
    assert data["active_llm"] == {"provider_id": "main", "model": "model-a"}
    _, active, _ = await sc.call("GET", "/models/active")
    assert active == {"provider_id": "main", "model": "model-a"}
    _, chat, _ = await sc.call("GET", f"/chats/{data['chat_id']}")
    assert chat["meta"]["active_llm_override"]["model"] == "model-b"

    await sc.process("which model?", session_id="s1")
    await sc.process("which model?", session_id="s2")
    models = [r.body["model"] for r in anthropic_sim.requests]
    assert models == ["model-a", "model-a", "model-b", "model-a"]

    status, data, _ = await sc.call("DELETE", f"/agent/self/sessions/{data['chat_id']}/model")
    assert status == 200 and data["active_llm_override"] is None
    await sc.process("and now?", session_id="s1")
    assert anthropic_sim.requests[-1].body["model"] == "model-a"


async def test_invalid_models_and_sessions_are_refused(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, extra=SPARE)
    await sc.call("POST", "/chats", {"session_id": "shared", "channel": "console"})
    await sc.call("POST", "/chats", {"session_id": "shared", "channel": "webhook"})
    path = "/agent/self/sessions/shared/model?channel=console"
    for body, needle in (
        ({"provider_id": "nope"}, "nope"),
        ({"provider_id": "spare"}, "spare"),
        ({"provider_id": "main", "model": "model-z"}, "model-z"),
        ({"model": "gpt-nothing"}, "gpt-nothing"),
    ):
        status, data, _ = await sc.call("PUT", path, body)
        assert status == 400 and data["error"]["code"] == "session_model_invalid", body
        assert needle in data["error"]["message"]
    status, data, _ = await sc.call(
        "PUT", "/agent/self/sessions/shared/model", {"model": "model-b"}
    )
    assert status == 400 and "channel" in data["error"]["message"]
    status, data, _ = await sc.call("PUT", path, {"model": "model-b"})
    assert status == 200 and data["applied_model"]["model"] == "model-b"
    for missing in ("nobody", "chat-99999"):
        status, data, _ = await sc.call(
            "PUT", f"/agent/self/sessions/{missing}/model", {"provider_id": "main"}
        )
        assert status == 404 and data["error"]["code"] in ("session_not_found", "not_found")
    _, active, _ = await sc.call("GET", "/models/active")
    assert active == {"provider_id": "main", "model": "model-a"}


async def test_a_telegram_session_follows_its_override(bot: Factory, tmp_path: Path) -> None:
    h = await bot()
    gateway = Gateway(h.kernel.gateway_deps(), ROUTERS)
    await gateway.start()
    try:
        h.model.enqueue(text_reply("one"), text_reply("two"))
        await h.converse("first")
        session = h.kernel.agent.sessions.current_session(CONV)
        path = f"chat-{session}"
        status, data = await _put(gateway.url, gateway.api_key, path, {"model": "model-b"})
        assert status == 200 and data["applied_model"]["model"] == "model-b"

        assert await h.converse("second") == "two"

        assert [r.body["model"] for r in h.model.requests] == ["model-a", "model-b"]
    finally:
        await gateway.stop()


async def _put(
    url: str, key: str, session: str, body: dict[str, str]
) -> tuple[int, dict[str, object]]:
    import aiohttp

    async with (
        aiohttp.ClientSession(headers={"X-API-Key": key}) as http,
        http.put(f"{url}/agent/self/sessions/{session}/model", json=body) as response,
    ):
        return response.status, await response.json()


async def test_bootstrap_creates_a_chat_and_runs_one_turn(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, extra=SPARE)
    anthropic_sim.enqueue(text_reply("Hello, I am Kernel."), text_reply("Streamed."))
    body = {"input": [message("introduce yourself")], "session_id": "boot-1", "model": "model-b"}

    status, data, _ = await sc.call("POST", "/agent/self/sessions/bootstrap", body)

    assert status == 201
    assert data["reply"] == "Hello, I am Kernel."
    assert data["applied_model"] == {"provider_id": "main", "model": "model-b"}
    assert [e["type"] for e in data["events"]][-1] == "completed"
    chat = data["chat"]
    assert (chat["channel"], chat["session_id"], chat["message_count"]) == ("console", "boot-1", 2)
    assert chat["meta"]["active_llm_override"] == {"provider_id": "main", "model": "model-b"}
    assert anthropic_sim.requests[-1].body["model"] == "model-b"
    _, active, _ = await sc.call("GET", "/models/active")
    assert active["model"] == "model-a"

    status, data, _ = await sc.call("POST", "/agent/self/sessions/bootstrap", body)
    assert status == 409 and data["error"]["code"] == "session_exists"
    assert data["error"]["details"]["chat_id"] == chat["id"]

    _, before, _ = await sc.call("GET", "/chats")
    bad = {"input": [message("hi")], "provider_id": "spare"}
    status, data, _ = await sc.call("POST", "/agent/self/sessions/bootstrap", bad)
    assert status == 400 and data["error"]["code"] == "session_model_invalid"
    _, after, _ = await sc.call("GET", "/chats")
    assert after["total"] == before["total"]  # nothing created

    streamed = {"input": [message("stream it")], "stream": True, "channel": "webhook"}
    async with sc.http.post(
        sc.url + "/agent/self/sessions/bootstrap", json=streamed, headers=sc.headers()
    ) as response:
        assert response.status == 200
        assert response.headers["X-Applied-Model"] == "main/model-a"
        chat_id = response.headers["X-Chat-Id"]
        events = [e async for e in sse_events(response)]
    assert events[-1] == "[DONE]" and events[-2]["reply"] == "Streamed."
    _, chat, _ = await sc.call("GET", f"/chats/{chat_id}")
    assert chat["channel"] == "webhook" and chat["message_count"] == 2


async def test_a_bootstrap_refused_before_anything_was_stored_leaves_no_chat(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    _, before, _ = await sc.call("GET", "/chats")
    body = {"input": [message("/skill/nope do it")], "session_id": "boot-skill"}
    status, data, _ = await sc.call("POST", "/agent/self/sessions/bootstrap", body)
    assert status == 404 and data["error"]["code"] == "skill_not_found"
    _, after, _ = await sc.call("GET", "/chats")
    assert after["total"] == before["total"]  # nothing left behind
    anthropic_sim.enqueue(text_reply("Fine."))
    retry = {"input": [message("do it")], "session_id": "boot-skill"}
    status, data, _ = await sc.call("POST", "/agent/self/sessions/bootstrap", retry)
    assert status == 201 and data["reply"] == "Fine."  # the same session_id works now
