"""``PATCH /chats/{id}`` (rename) and ``POST /chats/{id}/resume`` (continue a chat in
the owner's Telegram chat, as /resume there): the console's sessions page (issue 21)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from kernel.gateway.routes import ROUTERS
from kernel.gateway.server import Gateway
from tests.gateway.conftest import SidecarFactory, message
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Text, text_reply
from tests.telegram.conftest import CONV, Factory
from tests.telegram.conftest import bot as bot  # noqa: F401 - the fixture, shared


async def test_rename_a_chat(sidecar: SidecarFactory, anthropic_sim: AnthropicSim) -> None:
    sc = await sidecar(anthropic_sim)
    _, chat, _ = await sc.call("POST", "/chats", {"session_id": "s-1", "name": "old"})
    status, renamed, _ = await sc.call("PATCH", f"/chats/{chat['id']}", {"name": "  新名字 "})
    assert status == 200 and renamed["name"] == "新名字" and renamed["id"] == chat["id"]
    _, listed, _ = await sc.call("GET", "/chats")
    assert {c["id"]: c["name"] for c in listed["chats"]}[chat["id"]] == "新名字"
    # The default chat may be renamed too (only deleting it is refused).
    status, renamed, _ = await sc.call("PATCH", "/chats/chat-default", {"name": "Console"})
    assert status == 200 and renamed["name"] == "Console"


async def test_rename_refusals(sidecar: SidecarFactory, anthropic_sim: AnthropicSim) -> None:
    sc = await sidecar(anthropic_sim)
    _, chat, _ = await sc.call("POST", "/chats", {"session_id": "s-1", "name": "kept"})
    path = f"/chats/{chat['id']}"
    for body in ({"name": ""}, {"name": "   "}, {"name": "a\nb"}, {"name": "x" * 201}, {}):
        status, data, _ = await sc.call("PATCH", path, body)
        assert status == 400, body
        assert data["error"]["code"] == "invalid_request" and data["error"]["details"] == {
            "field": "name"
        }, body
    status, data, _ = await sc.call("PATCH", path, {"name": 5})
    assert status == 400
    status, data, _ = await sc.call("PATCH", "/chats/chat-999999", {"name": "x"})
    assert status == 404 and data["error"]["details"] == {"chat_id": "chat-999999"}
    status, data, _ = await sc.call("PATCH", "/chats/nonsense", {"name": "x"})
    assert status == 404
    _, same, _ = await sc.call("GET", path)
    assert same["name"] == "kept"  # nothing refused was stored


async def test_resume_without_telegram_is_409_naming_the_fix(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    _, chat, _ = await sc.call("POST", "/chats", {"session_id": "s-1"})
    path = f"/chats/{chat['id']}/resume"
    status, data, _ = await sc.call("POST", path, {"channel": "telegram"})
    assert status == 409 and data["error"]["code"] == "telegram_not_configured"
    assert "allowed_user" in data["error"]["message"] and "token" in data["error"]["message"]
    status, data, _ = await sc.call("POST", path, {"channel": "qq"})
    assert status == 400 and data["error"]["details"]["field"] == "channel"
    status, data, _ = await sc.call("POST", path, {})
    assert status == 400
    status, data, _ = await sc.call("POST", "/chats/chat-424242/resume", {"channel": "telegram"})
    assert status == 404


async def _call(
    http: aiohttp.ClientSession, method: str, url: str, body: Any = None
) -> tuple[int, Any]:
    async with http.request(method, url, json=body) as response:
        return response.status, json.loads(await response.read())


async def test_resume_in_telegram_continues_the_chat_there(bot: Factory) -> None:
    h = await bot()
    gateway = Gateway(h.kernel.gateway_deps(), ROUTERS)
    await gateway.start()
    try:
        async with aiohttp.ClientSession(headers={"X-API-Key": gateway.api_key}) as http:
            h.model.enqueue(text_reply("noted: apple"))
            body = {"input": [message("the word is apple")], "session_id": "web-1"}
            status, done = await _call(http, "POST", gateway.url + "/agent/process", body)
            assert status == 200 and done["reply"] == "noted: apple"
            chat_id = done["chat_id"]

            status, data = await _call(
                http, "POST", f"{gateway.url}/chats/{chat_id}/resume", {"channel": "telegram"}
            )
            assert (status, data) == (
                200,
                {"resumed": True, "chat_id": chat_id, "channel": "telegram"},
            )

            h.model.enqueue(text_reply("it was apple"))
            assert await h.converse("which word?") == "it was apple"
            # The model saw the console's exchange: the Telegram message went on in that chat.
            sent = json.dumps(h.model.requests[-1].body["messages"], ensure_ascii=False)
            assert "the word is apple" in sent and "which word?" in sent
            _, chat = await _call(http, "GET", f"{gateway.url}/chats/{chat_id}")
            texts = [json.dumps(m["content"], ensure_ascii=False) for m in chat["messages"]]
            assert "which word?" in texts[-2] and "it was apple" in texts[-1]

            # While a Telegram turn runs, resuming another chat there is refused (as /resume).
            h.model.enqueue(Reply(Text("slow", chunks=["slow"]), stall_after=2))
            seen = len(h.model.requests)
            h.tg.inject_text("take your time")
            async with asyncio.timeout(30):
                await h.model.wait_for_requests(seen + 1)
            assert h.kernel.agent.sessions.is_busy(CONV)
            status, data = await _call(
                http, "POST", f"{gateway.url}/chats/chat-default/resume", {"channel": "telegram"}
            )
            assert status == 409 and data["error"]["code"] == "session_busy"
            h.kernel.agent.sessions.cancel(CONV)
            await h.settle()
            assert h.kernel.agent.sessions.current_session(CONV) == int(
                chat_id.removeprefix("chat-")
            )
    finally:
        await gateway.stop()
