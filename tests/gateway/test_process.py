"""``POST /agent/process`` as seed 000 describes it, against both provider types: JSON and
SSE, /new, direct tool calls, queueing per chat, cancel, client disconnect."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp

from kernel.agent.agent import SessionKey
from tests.gateway.conftest import Sidecar, SidecarFactory, message, sse_events
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Reply, Text, ToolUse, text_reply
from tests.waiting import wait_until

PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()


@asynccontextmanager
async def streaming(sc: Sidecar, text: str, **fields: Any) -> AsyncIterator[aiohttp.ClientResponse]:
    body = {"input": [message(text)], "stream": True, **fields}
    async with sc.http.post(sc.url + "/agent/process", json=body, headers=sc.headers()) as resp:
        yield resp


async def conversation(sc: Sidecar, session_id: str, **key: str) -> tuple[str, int]:
    full = SessionKey(key.get("channel", "console"), key.get("user_id", "demo-user"), session_id)
    opened = await sc.kernel.agent.sessions.open_session(full, create=False)
    assert opened is not None
    return opened.conversation, opened.row.id


async def idle(sc: Sidecar, conv: str) -> None:
    await wait_until(lambda: not sc.kernel.agent.sessions.is_busy(conv))


async def test_json_reply_and_events(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim
) -> None:
    sc = await sidecar(sim)
    sim.enqueue(
        Reply(Text("Let me note that."), ToolUse("memory_add", {"text": "likes jasmine tea"})),
        text_reply("Noted."),
    )
    status, data = await sc.process("remember: jasmine tea", session_id="s1", user_id="u1")
    assert status == 200
    assert data["reply"] == "Let me note that.\n\nNoted."
    types = [e["type"] for e in data["events"]]
    assert types[0] == "step_started" and types[-1] == "completed"
    assert "assistant_delta" in types
    call = next(e for e in data["events"] if e["type"] == "tool_call")
    assert call["tool_call"]["name"] == "memory_add"
    assert call["tool_call"]["arguments"] == {"text": "likes jasmine tea"}
    result = next(e for e in data["events"] if e["type"] == "tool_result")
    assert result["tool_result"]["ok"] is True and result["tool_result"]["name"] == "memory_add"
    assert data["events"][-1]["reply"] == data["reply"]
    # The chat exists with the request's key, channel defaulted to console.
    status, chats, _ = await sc.call("GET", "/chats?user_id=u1")
    assert [(c["channel"], c["session_id"]) for c in chats["chats"]] == [("console", "s1")]
    assert data["chat_id"] == chats["chats"][0]["id"]
    assert [m.text for m in await sc.kernel.store.list_memories()] == ["likes jasmine tea"]


async def test_no_session_fields_means_the_default_chat(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(text_reply("hello"))
    status, data = await sc.process("hi")
    assert status == 200 and data["chat_id"] == "chat-default"
    _, chat, _ = await sc.call("GET", "/chats/chat-default")
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant"]


async def test_sse_events_arrive_as_they_happen_and_end_with_done(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim
) -> None:
    sc = await sidecar(sim)
    sim.enqueue(Reply(Text("Hello world", chunks=["Hello ", "world"])))
    async with streaming(sc, "hi", session_id="s-sse") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        assert response.headers["X-Turn-Id"]
        payloads = [p async for p in sse_events(response)]
    assert payloads[-1] == "[DONE]"
    events = payloads[:-1]
    assert [e["type"] for e in events] == [
        "step_started",
        "assistant_delta",
        "assistant_delta",
        "completed",
    ]
    assert "".join(e["delta"] for e in events if e["type"] == "assistant_delta") == "Hello world"
    assert events[-1]["reply"] == "Hello world"


async def test_sse_is_flushed_while_the_model_is_still_working_and_cancel_route(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    # The model sends "Hello " and then nothing more until cancelled.
    anthropic_sim.enqueue(Reply(Text("Hello world", chunks=["Hello ", "world"]), stall_after=3))
    async with streaming(sc, "hi", session_id="s-cancel") as response:
        turn_id = response.headers["X-Turn-Id"]
        events = sse_events(response)
        assert (await anext(events))["type"] == "step_started"
        delta = await anext(events)
        assert delta == {"type": "assistant_delta", "step": 1, "delta": "Hello "}
        status, data, _ = await sc.call("POST", f"/agent/turns/{turn_id}/cancel")
        assert (status, data) == (200, {"cancelled": True, "turn_id": turn_id})
        rest = [e async for e in events]
    assert rest[-1] == "[DONE]"
    assert rest[-2]["type"] == "completed" and rest[-2]["cancelled"] is True
    status, data, _ = await sc.call("POST", f"/agent/turns/{turn_id}/cancel")
    assert (status, data["cancelled"]) == (200, False)  # already over
    status, data, _ = await sc.call("POST", "/agent/turns/turn-999999/cancel")
    assert status == 404 and data["error"]["code"] == "not_found"
    conv, session_id = await conversation(sc, "s-cancel")
    await idle(sc, conv)
    stored = await sc.kernel.store.load_messages(session_id)
    assert [m.role for m in stored] == ["user", "assistant"]
    assert stored[1].text.startswith("Hello ")


async def test_client_disconnect_cancels_its_turn(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(Reply(Text("Hello world", chunks=["Hello ", "world"]), stall_after=3))
    async with streaming(sc, "hi", session_id="s-gone") as response:
        events = sse_events(response)
        await anext(events)
        await anext(events)  # "Hello " has arrived: the turn is mid-stream
        conv, session_id = await conversation(sc, "s-gone")
        assert sc.kernel.agent.sessions.is_busy(conv)
        turn = sc.kernel.agent.sessions.conversation(conv).turn
        response.close()  # the client goes away
    await idle(sc, conv)
    assert turn is not None and turn.final is not None
    assert getattr(turn.final, "cancelled", False) is True
    stored = await sc.kernel.store.load_messages(session_id)
    assert [m.role for m in stored] == ["user", "assistant"]


async def test_error_mid_stream_is_an_error_event_then_done(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(Reply(Text("partial", chunks=["par", "tial"]), error_after=3))
    async with streaming(sc, "hi", session_id="s-err") as response:
        assert response.status == 200
        payloads = [p async for p in sse_events(response)]
    assert payloads[-1] == "[DONE]"
    error = payloads[-2]
    assert error["type"] == "error"
    assert set(error["meta"]) >= {"code", "message"}
    assert error["meta"]["message"]


async def test_provider_failure_without_stream_is_an_error_response(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    from tests.sim.script import Error

    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(Error(400, "invalid_request_error", "max_tokens: too large"))
    status, data = await sc.process("hi", session_id="s-400")
    assert status == 502
    assert data["error"]["code"] == "invalid_request_error"
    assert "max_tokens: too large" in data["error"]["message"]
    assert data["error"]["details"]["events"][-1]["type"] == "error"
    # A refusal of what was sent (issue 15) is the client's to change: 400, its own code.
    anthropic_sim.enqueue(Error(400, "invalid_request_error", "prompt is too long"))
    status, data = await sc.process("hi", session_id="s-400")
    assert status == 400
    assert data["error"]["code"] == "provider_refused_input"
    assert "prompt is too long" in data["error"]["message"]
    assert data["error"]["details"]["events"][-1]["type"] == "error"


async def test_new_clears_the_chat_without_calling_the_model(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(text_reply("first answer"))
    await sc.process("first", session_id="s-new")
    conv, session_id = await conversation(sc, "s-new")
    assert len(await sc.kernel.store.load_messages(session_id)) == 2
    before = len(anthropic_sim.requests)
    status, data = await sc.process("  /new  ", session_id="s-new")
    assert status == 200
    assert data["reply"] == "The history of this chat was cleared"
    assert [e["type"] for e in data["events"]] == ["completed"]
    async with streaming(sc, "/new", session_id="s-new") as response:
        payloads = [p async for p in sse_events(response)]
    assert [p if p == "[DONE]" else p["type"] for p in payloads] == ["completed", "[DONE]"]
    assert len(anthropic_sim.requests) == before
    assert await sc.kernel.store.load_messages(session_id) == []
    status, chat, _ = await sc.call("GET", f"/chats/{data['chat_id']}")
    assert status == 200 and chat["message_count"] == 0
    # The next message starts from an empty history.
    anthropic_sim.enqueue(text_reply("fresh"))
    await sc.process("again", session_id="s-new")
    sent = anthropic_sim.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user"]


async def test_direct_tool_call_runs_the_tool_without_the_model(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    body = {
        "input": [message("")],
        "biz_params": {"tool": {"name": "memory_add", "input": {"text": "owns a cat"}}},
    }
    status, data, _ = await sc.call("POST", "/agent/process", body)
    assert status == 200
    assert [e["type"] for e in data["events"]] == ["tool_call", "tool_result", "completed"]
    assert data["events"][0]["tool_call"]["arguments"] == {"text": "owns a cat"}
    assert data["events"][1]["tool_result"]["ok"] is True
    assert [m.text for m in await sc.kernel.store.list_memories()] == ["owns a cat"]
    assert anthropic_sim.requests == []


async def test_disabled_and_unknown_tools(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, disabled_tools=["memory_delete"])
    body = {"input": [message("x")], "biz_params": {"tool": {"name": "memory_delete"}}}
    status, data, _ = await sc.call("POST", "/agent/process", body)
    assert status == 403 and data["error"]["code"] == "tool_disabled"
    assert "memory_delete" in data["error"]["message"]
    body["biz_params"] = {"tool": {"name": "rm_rf"}}
    status, data, _ = await sc.call("POST", "/agent/process", body)
    assert status == 400 and data["error"]["code"] == "tool_not_supported"
    assert "memory_add" in data["error"]["details"]["available"]


async def test_prompt_mode_and_input_validation(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    bad = [
        {"input": [message("x")], "biz_params": {"prompt_mode": "codex-max"}},
        {"input": []},
        {"input": [{"role": "assistant", "content": [{"type": "text", "text": "x"}]}]},
        {"input": [{"content": [{"type": "video"}]}]},
        {"input": [message("   ")]},
        {"input": [{"content": [{"type": "image", "media_type": "image/png", "data": "!!"}]}]},
    ]
    for body in bad:
        status, data, _ = await sc.call("POST", "/agent/process", body)
        assert status == 400, body
        assert data["error"]["code"] == "invalid_request"
    assert anthropic_sim.requests == []
    _, data, _ = await sc.call("POST", "/agent/process", bad[0])
    assert "invalid prompt_mode" in data["error"]["message"]


async def test_images_reach_the_model(sidecar: SidecarFactory, anthropic_sim: AnthropicSim) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(text_reply("a tiny image"))
    part = {"type": "image", "media_type": "image/png", "data": PNG}
    body = {"input": [{"role": "user", "content": [part, {"type": "text", "text": "what?"}]}]}
    status, data, _ = await sc.call("POST", "/agent/process", body)
    assert status == 200 and data["reply"] == "a tiny image"
    sent = anthropic_sim.requests[-1].body["messages"][-1]["content"]
    assert sent[0]["type"] == "image" and sent[0]["source"]["data"] == PNG


async def test_different_chats_run_in_parallel(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    for _ in range(2):
        anthropic_sim.enqueue(Reply(Text("slow", chunks=["sl", "ow"]), stall_after=3))
    async with (
        streaming(sc, "one", session_id="p1") as first,
        streaming(sc, "two", session_id="p2") as second,
    ):
        async with asyncio.timeout(30):
            await anthropic_sim.wait_for_requests(2)  # both turns are at the model at once
        for response in (first, second):
            turn_id = response.headers["X-Turn-Id"]
            status, data, _ = await sc.call("POST", f"/agent/turns/{turn_id}/cancel")
            assert data["cancelled"] is True
            assert [p async for p in sse_events(response)][-1] == "[DONE]"


async def test_same_chat_waits_for_its_running_turn(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(
        Reply(Text("first", chunks=["fi", "rst"]), stall_after=3), text_reply("second")
    )
    async with streaming(sc, "one", session_id="q1") as first:
        events = sse_events(first)
        await anext(events)
        async with asyncio.timeout(30):
            await anthropic_sim.wait_for_requests(1)  # the first turn is at the model
        conv, session_id = await conversation(sc, "q1")
        second = asyncio.create_task(sc.process("two", session_id="q1"))
        await wait_until(lambda: sc.kernel.agent.sessions.waiting(conv) > 0)
        assert len(anthropic_sim.requests) == 1  # queued, not run alongside
        await sc.call("POST", f"/agent/turns/{first.headers['X-Turn-Id']}/cancel")
        assert [e async for e in events][-1] == "[DONE]"
    status, data = await second
    assert status == 200 and data["reply"] == "second"
    # It ran after the first had finished: its history holds the first exchange.
    sent = anthropic_sim.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert len(await sc.kernel.store.load_messages(session_id)) == 4


async def test_waiting_too_long_is_a_409(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"queue_timeout": 0.2})
    anthropic_sim.enqueue(Reply(Text("first", chunks=["fi", "rst"]), stall_after=3))
    async with streaming(sc, "one", session_id="q2") as first:
        events = sse_events(first)
        await anext(events)
        status, data = await sc.process("two", session_id="q2")
        assert status == 409 and data["error"]["code"] == "session_busy"
        assert "cancel" in data["error"]["message"]
        assert len(anthropic_sim.requests) == 1
        await sc.call("POST", f"/agent/turns/{first.headers['X-Turn-Id']}/cancel")
        assert [e async for e in events][-1] == "[DONE]"


async def test_events_are_valid_json_lines(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """Raw wire check: every frame is `data: <one JSON line>` + blank line."""
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(text_reply("line one\nline two"))
    async with streaming(sc, "hi", session_id="raw") as response:
        raw = (await response.read()).decode()
    frames = [f for f in raw.split("\n\n") if f]
    assert frames[-1] == "data: [DONE]"
    for frame in frames[:-1]:
        assert frame.startswith("data: ") and "\n" not in frame
        json.loads(frame[6:])


async def test_many_chats_leave_no_state_behind_and_a_direct_tool_waits_its_turn(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    for n in range(30):
        anthropic_sim.enqueue(text_reply(f"reply {n}"))
        status, data = await sc.process("hi", session_id=f"many-{n}")
        assert (status, data["reply"]) == (200, f"reply {n}")
    # Idle HTTP chats are rebuilt from their session when needed, never kept around.
    assert [k for k in sc.kernel.agent.sessions.names() if k.startswith("session:")] == []

    anthropic_sim.enqueue(Reply(Text("slow", chunks=["sl", "ow"]), chunk_delay=0.3))
    turn = asyncio.ensure_future(sc.process("take your time", session_id="busy"))
    await wait_until(lambda: len(anthropic_sim.requests) == 31)
    body = {
        "input": [message("x")],
        "session_id": "busy",
        "biz_params": {"tool": {"name": "memory_add", "input": {"text": "after"}}},
    }
    direct = asyncio.ensure_future(sc.call("POST", "/agent/process", body))
    await asyncio.sleep(0.1)
    assert not direct.done()  # queued behind the running turn of the same chat
    assert (await turn)[1]["reply"] == "slow"
    assert (await direct)[0] == 200
    assert [m.text for m in await sc.kernel.store.list_memories()] == ["after"]


async def test_a_json_client_that_goes_away_cancels_its_turn(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(Reply(Text("never", chunks=["nev", "er"]), stall_after=3))
    request = asyncio.ensure_future(sc.process("long question", session_id="s-left"))
    await wait_until(lambda: len(anthropic_sim.requests) == 1)
    conv, session_id = await conversation(sc, "s-left")
    turn = sc.kernel.agent.sessions.conversation(conv).turn
    assert turn is not None and not turn.done
    request.cancel()  # the client closes its connection without waiting for the reply
    await idle(sc, conv)
    assert turn.final is not None and getattr(turn.final, "cancelled", False) is True
    stored = await sc.kernel.store.load_messages(session_id)
    assert stored[0].text == "long question"  # kept; nothing dangles
