"""Issue 37, item 4: what the agent keeps in memory per sidecar chat stays within its
written bound however many chats the sidecar serves (docs/architecture.md, "Bounded by
design"), and a live chat behaves as before."""

from __future__ import annotations

from kernel.agent.agent import RECENT_INPUTS
from kernel.agent.sessions import SESSION_PREFIX
from tests.gateway.conftest import Sidecar, SidecarFactory
from tests.gateway.test_process import PNG
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply


def held_chats(sc: Sidecar) -> list[str]:
    return [name for name in sc.kernel.agent.sessions.names() if name.startswith(SESSION_PREFIX)]


async def photo(sc: Sidecar, session: str) -> dict[str, object]:
    part = {"type": "image", "media_type": "image/png", "data": PNG}
    body = {
        "input": [{"role": "user", "content": [part, {"type": "text", "text": "what?"}]}],
        "session_id": session,
    }
    status, data, _ = await sc.call("POST", "/agent/process", body)
    assert status == 200, data
    return dict(data)


async def test_retry_inputs_are_kept_for_the_most_recent_chats_only(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    last: dict[str, object] = {}
    for n in range(RECENT_INPUTS + 8):
        anthropic_sim.enqueue(text_reply(f"image {n}"))
        last = await photo(sc, f"pic-{n}")
    assert len(sc.kernel.agent._inputs) == RECENT_INPUTS

    # The latest chat's retry still sends the photo as it was sent.
    anthropic_sim.enqueue(text_reply("retried"))
    status, data, _ = await sc.call("POST", f"/chats/{last['chat_id']}/retry")
    assert status == 200 and data["reply"] == "retried", data
    sent = anthropic_sim.requests[-1].body["messages"][-1]["content"]
    assert sent[0]["type"] == "image" and sent[0]["source"]["data"] == PNG
    assert len(sc.kernel.agent._inputs) == RECENT_INPUTS


async def test_asking_about_a_chat_keeps_no_conversation_for_it(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    chats = []
    for n in range(12):
        anthropic_sim.enqueue(text_reply(f"reply {n}"))
        status, data = await sc.process("hi", session_id=f"scoped-{n}")
        assert status == 200
        chats.append(data["chat_id"])
    for chat in chats:
        status, data, _ = await sc.call("PUT", f"/chats/{chat}/scope", {"persona": ""})
        assert (status, data["persona"]) == (200, ""), data
        status, data, _ = await sc.call("POST", f"/chats/{chat}/rewind", {"after_sequence": 1})
        assert status in (404, 409) and data["error"]["code"].startswith("rewind_"), data
        status, data = await sc.process("/new", session_id=f"scoped-{chats.index(chat)}")
        assert status == 200
    assert held_chats(sc) == []


async def test_deleted_skills_and_personas_are_not_kept_parsed(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    skills = sc.kernel.agent.skills
    personas = sc.kernel.agent.profiles.personas
    for n in range(12):
        body = {"name": f"skill-{n}", "description": "a skill", "content": "Do it."}
        status, data, _ = await sc.call("POST", "/skills", body)
        assert status == 201, data
        persona = {"name": f"persona-{n}", "description": "a persona", "body": "Be kind."}
        status, data, _ = await sc.call("POST", "/agent/personas", persona)
        assert status == 201, data
        for path in (f"/skills/skill-{n}", f"/agent/personas/persona-{n}"):
            status, data, _ = await sc.call("DELETE", path)
            assert status == 200, data
    body = {"name": "kept", "description": "a skill", "content": "Keep it."}
    assert (await sc.call("POST", "/skills", body))[0] == 201
    persona = {"name": "kept", "description": "a persona", "body": "Stay."}
    assert (await sc.call("POST", "/agent/personas", persona))[0] == 201
    _, listed, _ = await sc.call("GET", "/skills")
    assert [s["name"] for s in listed["skills"]] == ["kept"]
    _, listed, _ = await sc.call("GET", "/agent/personas")
    assert [p["name"] for p in listed["personas"]] == ["kept"]
    assert list(skills._parsed) == ["kept"]
    assert list(personas._parsed) == ["kept"]
