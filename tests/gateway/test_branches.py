"""A chat's branches over the sidecar (issue 38, seed 002 ``siblingNav``): ``GET
/chats/{id}`` lists them (id, fork, size) and the active one; ``POST
/chats/{id}/branches/{branch}`` makes one the live history, the history left kept as a
branch; refused while the chat's turn runs. Against the strict Anthropic simulator."""

from __future__ import annotations

import asyncio

from tests.gateway.conftest import SidecarFactory, message, sse_events
from tests.gateway.test_conversation_control import texts
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Text, text_reply


async def test_branches_listed_switched_and_refused_while_busy(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(*(text_reply(f"a{n}") for n in range(1, 6)))
    for q in ("q1", "q2", "q3"):
        _, data = await sc.process(q, session_id="walk")
    chat = data["chat_id"]
    _, got, _ = await sc.call("GET", f"/chats/{chat}?rounds=100")
    assert got["branches"] == [] and got["active_branch"] == 0
    a1 = next(m["sequence"] for m in got["messages"] if texts([m]) == ["a1"])
    status, cut, _ = await sc.call("POST", f"/chats/{chat}/rewind", {"after_sequence": a1})
    assert status == 200 and cut["branch"] == 1
    await sc.process("q-other", session_id="walk")

    # The cut branch: where it forks, its size, its first words.
    _, got, _ = await sc.call("GET", f"/chats/{chat}?rounds=100")
    [branch] = got["branches"]
    assert branch["id"] == 1 and branch["fork_sequence"] == a1 and branch["messages"] == 4
    assert branch["first_words"] == "q2" and branch["how"] == "rewind"
    assert got["branch_count"] == 1 and got["active_branch"] == 0

    # Unknown branch, a word: refused; nothing changes.
    status, err, _ = await sc.call("POST", f"/chats/{chat}/branches/9")
    assert status == 404 and err["error"]["code"] == "branch_not_found", err
    status, err, _ = await sc.call("POST", f"/chats/{chat}/branches/one")
    assert status == 400
    status, err, _ = await sc.call("POST", "/chats/chat-999/branches/1")
    assert status == 404

    # Switch: the branch is what the model sees; the history left is branch 2.
    status, switched, _ = await sc.call("POST", f"/chats/{chat}/branches/1")
    assert status == 200, switched
    assert switched["active_branch"] == 1 and switched["restored"] == 4
    assert switched["left"] == [{"id": 2, "messages": 2}]
    _, after = await sc.process("q5", session_id="walk")
    assert after["reply"] == "a5"
    sent = texts(anthropic_sim.requests[-1].body["messages"])
    assert sent[:6] == ["q1", "a1", "q2", "a2", "q3", "a3"] and "q-other" not in sent
    _, got, _ = await sc.call("GET", f"/chats/{chat}?rounds=100")
    assert [b["id"] for b in got["branches"]] == [2] and got["active_branch"] == 1

    # While a turn runs on the chat: 409, nothing switched.
    anthropic_sim.enqueue(Reply(Text("slow", chunks=["sl", "ow"]), stall_after=3))
    calls = len(anthropic_sim.requests)
    body = {"input": [message("q6")], "stream": True, "session_id": "walk"}
    async with sc.http.post(sc.url + "/agent/process", json=body, headers=sc.headers()) as resp:
        events = sse_events(resp)
        await anext(events)
        async with asyncio.timeout(30):
            await anthropic_sim.wait_for_requests(calls + 1)
        status, err, _ = await sc.call("POST", f"/chats/{chat}/branches/2")
        assert status == 409 and err["error"]["code"] == "session_busy", err
        await sc.call("POST", f"/agent/turns/{resp.headers['X-Turn-Id']}/cancel")
        assert [e async for e in events][-1] == "[DONE]"
    _, got, _ = await sc.call("GET", f"/chats/{chat}?rounds=100")
    assert got["active_branch"] == 1

    # Switching back: the other history again.
    status, back, _ = await sc.call("POST", f"/chats/{chat}/branches/2")
    assert status == 200 and back["active_branch"] == 2
    assert back["left"][0]["id"] == 1
    anthropic_sim.enqueue(text_reply("a7"))
    _, last = await sc.process("q7", session_id="walk")
    assert last["reply"] == "a7"
    sent = texts(anthropic_sim.requests[-1].body["messages"])
    assert sent[:5] == ["q1", "a1", "q-other", "a4", "q7"] and "q6" not in sent
