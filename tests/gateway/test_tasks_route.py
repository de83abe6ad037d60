"""``/agent/tasks`` (issue 38): background tasks created, listed and stopped over the
sidecar, with the key like every /agent route, and refused with clear codes. A real
Kernel on SQLite, a sub-agent answering through the model simulator."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kernel.agent.background import MAX_RUNNING
from tests.agents.kit import agent_file, write_agents
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply, tool_reply
from tests.waiting import wait_until

WORKER = agent_file("worker", "[lookup]", "Look it up, then answer in one line.")


async def start(
    sidecar: SidecarFactory, sim: AnthropicSim, tmp_path: Path, release: asyncio.Event
) -> Sidecar:
    write_agents(tmp_path, {"worker": WORKER})
    sc = await sidecar(sim, api_key=API_KEY)

    @sc.kernel.tools.tool
    async def lookup(query: str) -> str:
        """Look something up.

        Args:
            query: what to look up
        """
        await release.wait()
        return "the answer is 42"

    return sc


def job(task: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "agent", "agent": "worker", "task": task, **extra}


async def test_create_list_and_stop_with_the_key(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    release = asyncio.Event()  # never set: the task runs until stopped
    sc = await start(sidecar, anthropic_sim, tmp_path, release)
    anthropic_sim.enqueue(tool_reply("lookup", {"query": "x"}))

    status, _, _ = await sc.call("POST", "/agent/tasks", job("dig"), headers={})
    assert status == 401
    status, created, _ = await sc.call("POST", "/agent/tasks", job("dig", title="Dig it"))
    assert status == 201
    assert created["id"] == 1 and created["status"] == "running" and created["running"]
    assert created["title"] == "worker: Dig it"

    status, listed, _ = await sc.call("GET", "/agent/tasks")
    assert status == 200
    assert [(i["id"], i["status"]) for i in listed["items"]] == [(1, "running")]
    status, other, _ = await sc.call("GET", "/agent/tasks?session_id=99")
    assert (status, other) == (200, {"items": []})

    status, stopped, _ = await sc.call("POST", "/agent/tasks/1/stop")
    assert status == 200
    assert stopped["status"] == "stopped" and not stopped["running"]
    status, again, _ = await sc.call("POST", "/agent/tasks/1/stop")
    assert status == 409 and again["error"]["code"] == "task_not_running"
    assert "status: ⏹ stopped" in again["error"]["message"]  # the listing's own words
    status, missing, _ = await sc.call("POST", "/agent/tasks/77/stop")
    assert status == 404 and missing["error"]["code"] == "task_not_found"


async def test_a_task_in_a_session_ends_with_its_result(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    release = asyncio.Event()
    release.set()
    sc = await start(sidecar, anthropic_sim, tmp_path, release)
    anthropic_sim.enqueue(text_reply("hello"))
    status, _ = await sc.process("hi")
    assert status == 200
    [row] = await sc.kernel.store.list_sessions(limit=5)
    session = row.id
    anthropic_sim.enqueue(tool_reply("lookup", {"query": "x"}), text_reply("It is 42."))

    status, created, _ = await sc.call("POST", "/agent/tasks", job("dig", session_id=session))
    assert status == 201 and created["session_id"] == session

    async def ended() -> bool:
        _, listed, _ = await sc.call("GET", f"/agent/tasks?session_id={session}")
        return listed["items"][0]["status"] == "done"

    await wait_until(ended, what="the task done")
    _, listed, _ = await sc.call("GET", f"/agent/tasks?session_id={session}")
    [item] = listed["items"]
    assert item["result"] == "It is 42." and not item["running"]


async def test_refusals_name_the_problem(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await start(sidecar, anthropic_sim, tmp_path, asyncio.Event())

    status, data, _ = await sc.call("POST", "/agent/tasks", {"kind": "cli", "task": "build"})
    assert status == 409 and data["error"]["code"] == "task_refused"
    assert "[cli.*]" in data["error"]["message"]
    status, data, _ = await sc.call("POST", "/agent/tasks", job("dig", agent="ghost"))
    assert status == 409 and data["error"]["code"] == "task_refused"
    assert "no usable sub-agent named ghost: the usable ones are worker" in data["error"]["message"]
    status, data, _ = await sc.call("POST", "/agent/tasks", job("dig", session_id=999))
    assert status == 404 and data["error"]["code"] == "session_not_found"
    status, data, _ = await sc.call("POST", "/agent/tasks", {"kind": "agent", "agent": "worker"})
    assert status == 400 and data["error"]["code"] == "invalid_request"
    assert (await sc.call("GET", "/agent/tasks"))[1] == {"items": []}


async def test_running_tasks_are_bounded(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    """``MAX_RUNNING`` tasks run at once (docs/architecture.md §9); one more is refused
    until one ends, and the ended one leaves nothing behind."""
    sc = await start(sidecar, anthropic_sim, tmp_path, asyncio.Event())
    tasks = sc.kernel.agent.tasks
    for n in range(MAX_RUNNING):
        anthropic_sim.enqueue_for(f"job-{n}", tool_reply("lookup", {"query": "x"}))
        status, _, _ = await sc.call("POST", "/agent/tasks", job(f"job-{n}"))
        assert status == 201
    status, data, _ = await sc.call("POST", "/agent/tasks", job("one more"))
    assert status == 409 and data["error"]["code"] == "task_refused"
    assert f"{MAX_RUNNING} background tasks are running already" in data["error"]["message"]

    status, _, _ = await sc.call("POST", "/agent/tasks/1/stop")
    assert status == 200
    assert len(tasks._running) == MAX_RUNNING - 1 and not tasks._stopping
    status, _, _ = await sc.call("POST", "/agent/tasks", job("now it fits"))
    assert status == 201


async def test_a_session_in_plan_or_read_only_gets_no_task(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    """task_create is held back in plan and read_only: the sidecar's route asks the same
    rule, so a task in such a session's context is refused (403) and nothing is stored."""
    sc = await start(sidecar, anthropic_sim, tmp_path, asyncio.Event())
    row = await sc.kernel.store.create_session("api")
    modes = sc.kernel.agent.modes
    for mode in ("plan", "read_only"):
        await modes.set(f"session:{row.id}", mode, actor="owner", how="test", session_id=row.id)
        status, data, _ = await sc.call("POST", "/agent/tasks", job("dig", session_id=row.id))
        assert status == 403 and data["error"]["code"] == "tool_forbidden_in_mode"
        assert "task_create" in data["error"]["message"]
    assert (await sc.call("GET", "/agent/tasks"))[1] == {"items": []}


async def test_an_id_past_sqlites_integers_is_not_found(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await start(sidecar, anthropic_sim, tmp_path, asyncio.Event())
    status, data, _ = await sc.call("POST", "/agent/tasks/99999999999999999999/stop")
    assert status == 404 and data["error"]["code"] == "task_not_found"
    assert "#99999999999999999999" in data["error"]["message"]
