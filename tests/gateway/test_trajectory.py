"""/agent/trajectory/*: a session's audit events in order with their words, its chain
verified, then a row edited and a row deleted in the SQLite file named by the verdict;
refusals in the API's error shape; the key required like the other /agent routes."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import Any, get_args

from kernel.audit.verify import REASONS
from kernel.gateway.routes.trajectory import (
    Reason,
    TrajectoryAnswer,
    VerdictAnswer,
)
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply


def edit(sc: Sidecar, sql: str, *args: object) -> None:
    with closing(sqlite3.connect(sc.kernel.store.path)) as conn:
        conn.execute(sql, args)
        conn.commit()


async def get(sc: Sidecar, path: str) -> tuple[int, Any]:
    status, data, _ = await sc.call("GET", path)
    return status, data


async def new_chat(sc: Sidecar, session_id: str) -> tuple[str, int]:
    status, chat, _ = await sc.call("POST", "/chats", {"session_id": session_id})
    assert status in (200, 201)
    return chat["id"], int(chat["id"].removeprefix("chat-"))


async def test_events_in_order_verified_then_an_edit_and_a_deletion_named(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    anthropic_sim.enqueue(text_reply("Hello!"))
    status, _ = await sc.process("hi", session_id="s-audit")
    assert status == 200
    [row] = await sc.kernel.store.sessions_by_external_id("s-audit")
    chat, n = f"chat-{row.id}", row.id
    audit = sc.kernel.audit
    base = len(await audit.events(n, limit=1000))
    for tool, ms in (("memory_search", 120), ("web_fetch", 80), ("memory_add", 5)):
        await audit.record("tool.call", session_id=n, actor="model", tool=tool, ok=True, ms=ms)
    await audit.record("cron.missed", job_id="daily-news", reason="down")

    status, data = await get(sc, f"/agent/trajectory/events?session_id={chat}")
    assert status == 200
    TrajectoryAnswer.model_validate(data)
    items = data["items"]
    assert [i["seq"] for i in items] == list(range(1, base + 4))
    assert [i["kind"] for i in items[-3:]] == ["tool.call"] * 3
    assert items[-3]["text"].endswith("🔧 tool memory_search ✓ 120 ms")
    assert items[-3]["data"]["tool"] == "memory_search" and items[-1]["hash"]
    assert data["session_id"] == n and data["chat_id"] == chat and data["next_before"] is None
    # The same session by seed 001's sessionId, its number, and its session_id.
    for query in (f"sessionId={chat}", f"session_id={n}", "session_id=s-audit"):
        status, again = await get(sc, f"/agent/trajectory/events?{query}")
        assert status == 200 and again["items"] == items, query
    # Paging back: the newest 2, then the ones before them.
    status, page = await get(sc, f"/agent/trajectory/events?session_id={chat}&limit=2")
    assert [i["seq"] for i in page["items"]] == [base + 2, base + 3]
    before = page["next_before"]
    status, older = await get(sc, f"/agent/trajectory/events?session_id={chat}&before={before}")
    assert [i["seq"] for i in older["items"]] == list(range(1, base + 2))
    # The global chain: every event, the cron one included, in global order.
    status, every = await get(sc, "/agent/trajectory/events?scope=global")
    ids = [i["id"] for i in every["items"]]
    assert ids == sorted(ids) and every["items"][-1]["kind"] == "cron.missed"
    assert every["items"][-1]["text"].endswith("⏰ cron job daily-news missed: Kernel was down")

    status, verdict = await get(sc, f"/agent/trajectory/verify/{chat}")
    assert status == 200
    VerdictAnswer.model_validate(verdict)
    assert verdict["ok"] is True and verdict["checked"] == base + 3 and verdict["pruned"] == 0
    assert verdict["text"] == f"✅ record whole: {base + 3} events"
    status, whole = await get(sc, "/agent/trajectory/verify")
    assert status == 200 and whole["ok"] is True and whole["scope"] == "global"

    # A row edited directly in the file: the verdict names it (200: an answer).
    edited = items[-2]
    edit(sc, "UPDATE audit_events SET actor = 'owner' WHERE id = ?", edited["id"])
    status, verdict = await get(sc, f"/agent/trajectory/verify/{chat}")
    assert status == 200
    VerdictAnswer.model_validate(verdict)
    assert {k: verdict[k] for k in ("ok", "firstBrokenSeq", "first_broken_seq", "reason")} == {
        "ok": False,
        "firstBrokenSeq": edited["seq"],
        "first_broken_seq": edited["seq"],
        "reason": "edited",
    }
    assert verdict["detail"] == REASONS["edited"]
    assert verdict["text"] == (
        f"⚠️ record broken at #{edited['seq']}: the row was changed after it was written"
    )
    status, whole = await get(sc, "/agent/trajectory/verify")
    assert (whole["ok"], whole["firstBrokenSeq"], whole["reason"]) == (
        False,
        edited["id"],
        "edited",
    )

    # Another session's row deleted: its chain is missing that sequence.
    other, m = await new_chat(sc, "s-other")
    for tool in ("a", "b", "c"):
        await audit.record("tool.call", session_id=m, actor="model", tool=tool, ok=True)
    status, verdict = await get(sc, f"/agent/trajectory/verify/{other}")
    assert verdict["ok"] is True and verdict["checked"] == 3
    edit(sc, "DELETE FROM audit_events WHERE session_id = ? AND seq = 2", m)
    status, verdict = await get(sc, f"/agent/trajectory/verify/{other}")
    assert status == 200
    assert (verdict["ok"], verdict["firstBrokenSeq"], verdict["reason"]) == (False, 2, "missing")
    assert verdict["text"] == "⚠️ record broken at #2: a row is missing: it was deleted"


async def test_a_deleted_sessions_chain_stays_verifiable(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    chat, n = await new_chat(sc, "s-gone")
    await sc.kernel.audit.record("tool.call", session_id=n, actor="model", tool="x", ok=True)
    status, _, _ = await sc.call("DELETE", f"/chats/{chat}")
    assert status in (200, 204)
    status, verdict = await get(sc, f"/agent/trajectory/verify/{n}")
    assert status == 200 and verdict["ok"] is True and verdict["pruned"] == 1
    status, data = await get(sc, f"/agent/trajectory/events?session_id={chat}")
    assert status == 200 and data["chat_id"] is None
    [item] = data["items"]
    assert item["pruned"] is True and item["data"] is None
    assert item["text"].endswith("🧹 tool.call (emptied with its deleted history)")
    status, whole = await get(sc, "/agent/trajectory/verify")
    assert whole["ok"] is True and whole["pruned"] == 1


async def test_refusals_in_the_apis_error_shape(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    await new_chat(sc, "twin")
    await sc.call("POST", "/chats", {"session_id": "twin", "channel": "webhook"})
    cases = [
        ("/agent/trajectory/events", 400, "invalid_request", "session_id is missing"),
        ("/agent/trajectory/events?session_id=chat-999999", 404, "not_found", "no session"),
        ("/agent/trajectory/events?session_id=nobody", 404, "not_found", "no session"),
        ("/agent/trajectory/verify/chat-424242", 404, "not_found", "no session"),
        ("/agent/trajectory/verify/999999", 404, "not_found", "no session"),
        (
            "/agent/trajectory/events?scope=global&session_id=chat-1",
            400,
            "invalid_request",
            "scope=global",
        ),
        ("/agent/trajectory/events?scope=mine", 400, "invalid_request", "scope"),
        ("/agent/trajectory/events?scope=global&limit=0", 400, "invalid_request", "limit"),
        ("/agent/trajectory/events?scope=global&limit=1001", 400, "invalid_request", "limit"),
        ("/agent/trajectory/events?scope=global&before=x", 400, "invalid_request", "before"),
        ("/agent/trajectory/verify/twin", 400, "invalid_request", "2 chats"),
        ("/agent/trajectory/verify/" + "x" * 300, 400, "invalid_request", "session_id"),
    ]
    for path, code, error, words in cases:
        status, data = await get(sc, path)
        assert status == code, path
        assert set(data) == {"error"} and data["error"]["code"] == error, path
        assert words in data["error"]["message"], (path, data)
    status, data = await get(sc, "/agent/trajectory/verify/twin?channel=webhook")
    assert status == 200 and data["ok"] is True and data["checked"] == 0
    # The key, as on every /agent route.
    for path in ("/agent/trajectory/verify", "/agent/trajectory/events?scope=global"):
        status, data, _ = await sc.call("GET", path, headers={})
        assert status == 401, path


def test_the_documented_reasons_are_verifys() -> None:
    assert set(get_args(Reason)) == set(REASONS)
