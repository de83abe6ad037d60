"""``/chats``: the agent's sessions, with the protected default chat."""

from __future__ import annotations

import asyncio
import json

import pytest

from kernel.agent.agent import SessionKey
from kernel.core.errors import ProtectedSessionError
from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error, Reply, Text, text_reply


async def test_default_chat_exists_and_is_protected(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    status, chat, _ = await sc.call("GET", "/chats/chat-default")
    assert status == 200
    assert (chat["session_id"], chat["user_id"], chat["channel"]) == (
        "session-default",
        "demo-user",
        "console",
    )
    assert chat["meta"] == {"system_default": True} and chat["messages"] == []
    status, data, _ = await sc.call("DELETE", "/chats/chat-default")
    assert status == 400 and data["error"]["code"] == "default_chat_protected"
    assert "/new" in data["error"]["message"]

    status, other, _ = await sc.call("POST", "/chats", {"session_id": "keep-me"})
    status, data, _ = await sc.call(
        "POST", "/chats/batch-delete", {"chat_ids": [other["id"], "chat-default"]}
    )
    assert status == 400 and data["error"]["code"] == "default_chat_protected"
    assert (await sc.call("GET", f"/chats/{other['id']}"))[0] == 200  # nothing was deleted

    # Other channels (Telegram's /del_history) go through the same rule.
    key = SessionKey("console", "demo-user", "session-default")
    default = await sc.kernel.agent.sessions.open_session(key, create=False)
    assert default is not None
    with pytest.raises(ProtectedSessionError):
        await sc.kernel.agent.sessions.delete_sessions([default.row.id])


async def test_default_chat_survives_a_restart_and_is_not_duplicated(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    await sc.stop()
    again = await sidecar(anthropic_sim, keep_config=True)
    _, data, _ = await again.call("GET", "/chats")
    assert [c["id"] for c in data["chats"]] == ["chat-default"] and data["total"] == 1


async def test_create_is_idempotent_per_key(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    body = {
        "session_id": "s1",
        "user_id": "u1",
        "channel": "webhook",
        "name": "Groceries",
        "meta": {"origin": "script"},
    }
    status, created, _ = await sc.call("POST", "/chats", body)
    assert status == 201
    assert created["id"].startswith("chat-") and created["name"] == "Groceries"
    assert (created["channel"], created["user_id"], created["session_id"]) == (
        "webhook",
        "u1",
        "s1",
    )
    assert created["meta"] == {"origin": "script"}
    status, again, _ = await sc.call("POST", "/chats", body)
    assert status == 200 and again["id"] == created["id"]
    status, fresh, _ = await sc.call("POST", "/chats", {})
    assert status == 201 and fresh["session_id"].startswith("s-") and fresh["channel"] == "console"
    for bad in (
        {"meta": {"system_default": True}},
        {"session_id": ""},
        {"user_id": "a\nb"},
        {"channel": 5},
        {"session_id": "x" * 200},
    ):
        status, data, _ = await sc.call("POST", "/chats", bad)
        assert (status, data["error"]["code"]) == (400, "invalid_request"), bad


async def test_list_filters_and_pages(sidecar: SidecarFactory, anthropic_sim: AnthropicSim) -> None:
    sc = await sidecar(anthropic_sim)
    for i in range(3):
        await sc.call("POST", "/chats", {"session_id": f"s{i}", "user_id": "alice"})
    await sc.call("POST", "/chats", {"session_id": "b", "user_id": "bob", "channel": "qq"})
    _, data, _ = await sc.call("GET", "/chats?user_id=alice&limit=2")
    assert data["total"] == 3 and len(data["chats"]) == 2
    _, rest, _ = await sc.call("GET", "/chats?user_id=alice&limit=2&offset=2")
    assert len(rest["chats"]) == 1
    ids = {c["session_id"] for c in data["chats"] + rest["chats"]}
    assert ids == {"s0", "s1", "s2"}
    _, qq, _ = await sc.call("GET", "/chats?channel=qq")
    assert [c["user_id"] for c in qq["chats"]] == ["bob"]
    _, everything, _ = await sc.call("GET", "/chats")
    assert everything["total"] == 5
    status, data, _ = await sc.call("GET", "/chats?limit=-1")
    assert (status, data["error"]["code"]) == (400, "invalid_request")


async def test_get_and_delete_a_chat_with_messages(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(text_reply("pong"))
    _, reply = await sc.process("ping", session_id="s-del", user_id="u9")
    chat_id = reply["chat_id"]
    status, chat, _ = await sc.call("GET", f"/chats/{chat_id}")
    assert status == 200 and chat["message_count"] == 2
    assert [(m["role"], m["content"][0]["text"]) for m in chat["messages"]] == [
        ("user", "ping"),
        ("assistant", "pong"),
    ]
    status, data, _ = await sc.call("DELETE", f"/chats/{chat_id}")
    assert (status, data["deleted"]) == (200, True)
    for ident in (chat_id, "chat-424242", "nonsense"):
        status, data, _ = await sc.call("GET", f"/chats/{ident}")
        assert (status, data["error"]["code"]) == (404, "not_found")
    status, data, _ = await sc.call("DELETE", f"/chats/{chat_id}")
    assert status == 404
    row_id = int(chat_id.split("-")[1])
    assert await sc.kernel.store.get_session(row_id) is None
    assert await sc.kernel.store.load_messages(row_id) == []


async def test_batch_delete_reports_missing(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    ids = [(await sc.call("POST", "/chats", {"session_id": f"b{i}"}))[1]["id"] for i in range(2)]
    status, data, _ = await sc.call("POST", "/chats/batch-delete", {"chat_ids": [*ids, "chat-999"]})
    assert (status, data) == (200, {"deleted": 2, "missing": ["chat-999"]})
    status, data, _ = await sc.call("POST", "/chats/batch-delete", {"chat_ids": "chat-1"})
    assert (status, data["error"]["code"]) == (400, "invalid_request")


async def test_a_chat_with_a_running_turn_is_not_deleted(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(Reply(Text("slow", chunks=["sl", "ow"]), stall_after=3))
    request = asyncio.create_task(sc.process("hi", session_id="busy"))
    await anthropic_sim.wait_for_requests(1)
    _, listing, _ = await sc.call("GET", "/chats?limit=500")
    chat_id = next(c["id"] for c in listing["chats"] if c["session_id"] == "busy")
    status, data, _ = await sc.call("DELETE", f"/chats/{chat_id}")
    assert (status, data["error"]["code"]) == (409, "session_busy")
    for conv in sc.kernel.agent.sessions.names():
        sc.kernel.agent.sessions.cancel(conv)
    status, _ = await request
    assert status == 200


async def test_a_refused_message_is_shown_flagged_and_left_out_of_the_next_request(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(
        Error(400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000"),
        text_reply("pong"),
    )
    status, data = await sc.process("far too long", session_id="s-ref")
    assert status == 400 and data["error"]["code"] == "provider_refused_input"
    status, reply = await sc.process("ping", session_id="s-ref")
    assert status == 200 and reply["reply"] == "pong"
    assert "far too long" not in json.dumps(anthropic_sim.requests[-1].body)

    status, chat, _ = await sc.call("GET", f"/chats/{reply['chat_id']}")
    assert status == 200 and chat["message_count"] == 3  # history keeps it, flagged
    assert [(m["content"][0]["text"], m.get("failed")) for m in chat["messages"]] == [
        ("far too long", True),
        ("ping", None),
        ("pong", None),
    ]
