"""Kernel's own MCP endpoint (/mcp): the mcp SDK's client against a real sidecar.

The approve tool with a run grant opened as the Delegator opens one (its context's ask
answered by the test through ``kernel.agent.asks``, as Telegram's buttons answer it),
notify_owner, the memory tools, and the refusals before the SDK: tokens, peer, Host."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from kernel.core.asks import Answer, AskRegistry, Question
from kernel.core.delivery import Target
from kernel.core.logs import LIBRARY_FLOORS
from kernel.delegate.approvals import RunGrant
from kernel.memory import scopes
from kernel.tools.registry import ToolContext
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.gateway.conftest import sidecar as sidecar  # the fixture
from tests.sim.anthropic_sim import AnthropicSim
from tests.waiting import wait_until

BASH = {"command": "git status", "description": "Show the working tree status"}


@pytest.fixture
async def model() -> AsyncIterator[AnthropicSim]:
    sim = AnthropicSim()
    await sim.start()
    yield sim
    await sim.stop()


@pytest.fixture
def library_floors() -> Iterator[None]:
    """The libraries' loggers at the floors Kernel sets (kernel.core.logs)."""
    saved = {name: logging.getLogger(name).level for name in LIBRARY_FLOORS}
    for name, floor in LIBRARY_FLOORS.items():
        logging.getLogger(name).setLevel(floor)
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


@asynccontextmanager
async def client(sidecar: Sidecar | str, token: str | None = None) -> AsyncIterator[ClientSession]:
    """An initialized MCP session to the sidecar's /mcp (``sidecar``: or its URL), with
    ``token`` as its bearer."""
    base = sidecar if isinstance(sidecar, str) else sidecar.url
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(base + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.list_tools()  # as Claude Code does first (the SDK then knows the tools)
        yield session


def asker(asks: AskRegistry, conversation: str) -> Any:
    """A turn's ``ask`` as the agent builds it: the question waits in the registry."""

    async def ask(
        text: str,
        options: list[str],
        *,
        kind: str = "question",
        seconds: float,
        markdown: bool = False,
    ) -> Answer:
        question = Question(conversation, text, list(options), kind=kind, markdown=markdown)
        return await asks.wait(question, seconds)

    return ask


def open_grant(sc: Sidecar, *, timeout: float = 30.0, **context: Any) -> RunGrant:
    asks = sc.kernel.agent.asks
    ctx = ToolContext(conversation="console:default", ask=asker(asks, "console:default"), **context)
    return sc.kernel.approvals.open("20261126-101500-ab12cd", "claude_code", ctx, timeout=timeout)


async def answer_next(sc: Sidecar, choice: int) -> Question:
    """Wait for the permission prompt, then press ``choice``."""
    asks = sc.kernel.agent.asks
    await wait_until(lambda: bool(asks.waiting()))
    question = asks.waiting()[0]
    asks.answer(question.id, choice)
    return question


def verdict(result: Any) -> dict[str, Any]:
    assert not result.is_error, result
    assert len(result.content) == 1 and result.content[0].type == "text"
    parsed: dict[str, Any] = json.loads(result.content[0].text)
    return parsed


async def test_tools_listed_and_approve_allow_deny(
    sidecar: SidecarFactory, model: AnthropicSim
) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    grant = open_grant(sc)
    async with client(sc, grant.token) as session:
        names = [tool.name for tool in (await session.list_tools()).tools]
        assert sorted(names) == sorted(
            [
                "approve",
                "notify_owner",
                "memory_search",
                "memory_list",
                "memory_add",
                "memory_delete",
            ]
        )
        call = asyncio.create_task(
            session.call_tool(
                "approve", {"tool_name": "Bash", "input": BASH, "tool_use_id": "toolu_1"}
            )
        )
        question = await answer_next(sc, 0)
        assert question.kind == "permission" and "git status" in question.text
        assert verdict(await call) == {"behavior": "allow", "updatedInput": BASH}
        call = asyncio.create_task(
            session.call_tool("approve", {"tool_name": "Bash", "input": {"command": "rm -rf /"}})
        )
        await answer_next(sc, 2)
        denied = verdict(await call)
        assert denied["behavior"] == "deny" and "denied" in denied["message"]
    assert [d[1:] for d in grant.decisions] == [("allow", "owner"), ("deny", "owner")]
    records = await sc.kernel.approvals.recent(grant.delegation_id)
    assert {r.decision for r in records} == {"allow", "deny"}


async def test_allow_for_this_task_is_remembered_until_the_run_ends(
    sidecar: SidecarFactory, model: AnthropicSim
) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    grant = open_grant(sc)
    async with client(sc, grant.token) as session:
        call = asyncio.create_task(
            session.call_tool("approve", {"tool_name": "Bash", "input": BASH})
        )
        await answer_next(sc, 1)
        assert verdict(await call)["behavior"] == "allow"
        # The same command again: allowed by the task's rule, nobody asked.
        again = verdict(await session.call_tool("approve", {"tool_name": "Bash", "input": BASH}))
        assert again == {"behavior": "allow", "updatedInput": BASH}
        assert not sc.kernel.agent.asks.waiting()
    assert [d[1:] for d in grant.decisions] == [("allow", "owner"), ("allow", "task_rule")]


async def test_timeout_and_cancel_deny(sidecar: SidecarFactory, model: AnthropicSim) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    short = open_grant(sc, timeout=0.2)  # nobody answers: the prompt times out
    async with client(sc, short.token) as session:
        denied = verdict(await session.call_tool("approve", {"tool_name": "Bash", "input": BASH}))
    assert denied["behavior"] == "deny" and "did not answer" in denied["message"]
    assert short.decisions[-1][1:] == ("deny", "timeout")

    grant = open_grant(sc)
    async with client(sc, grant.token) as session:
        call = asyncio.create_task(
            session.call_tool("approve", {"tool_name": "Bash", "input": BASH})
        )
        await wait_until(lambda: bool(sc.kernel.agent.asks.waiting()))
        sc.kernel.approvals.close(grant)  # the delegation ended (/cancel) while asking
        denied = verdict(await call)
    assert denied["behavior"] == "deny" and "cancelled" in denied["message"]
    assert grant.decisions[-1][1:] == ("deny", "cancelled")
    assert not sc.kernel.agent.asks.waiting()  # the question was withdrawn


async def test_approve_refuses_input_that_is_not_an_object(
    sidecar: SidecarFactory, model: AnthropicSim
) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    grant = open_grant(sc)
    async with client(sc, grant.token) as session:
        for bad in ("git status", [1, 2], 7, None):
            result = await session.call_tool("approve", {"tool_name": "Bash", "input": bad})
            assert result.is_error and "input" in result.content[0].text
        result = await session.call_tool("approve", {"input": BASH})
        assert result.is_error and "tool_name" in result.content[0].text
        # Claude Code's extra keys (permission_suggestions…) are tolerated.
        call = asyncio.create_task(
            session.call_tool(
                "approve",
                {"tool_name": "Bash", "input": BASH, "permission_suggestions": [{"x": 1}]},
            )
        )
        await answer_next(sc, 0)
        assert verdict(await call)["behavior"] == "allow"
    assert not sc.kernel.agent.asks.waiting()


async def test_memory_tools_round_trip_in_the_owners_and_a_runs_scopes(
    sidecar: SidecarFactory, model: AnthropicSim
) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    async with client(sc, API_KEY) as owner:
        added = await owner.call_tool("memory_add", {"text": "The owner drinks green tea"})
        assert not added.is_error
        memory_id = json.loads(added.content[0].text)["id"]
        found = await owner.call_tool("memory_search", {"query": "green tea"})
        assert [m["id"] for m in json.loads(found.content[0].text)] == [memory_id]
        listed = json.loads((await owner.call_tool("memory_list", {})).content[0].text)
        assert [(m["id"], m["scope"]) for m in listed] == [(memory_id, "global")]
        # The registry's own checks and words: an argument of the wrong type.
        wrong = await owner.call_tool("memory_delete", {"id": "not a number"})
        assert wrong.is_error and "invalid arguments for memory_delete" in wrong.content[0].text

    # A run of a chat in project alpha: its memories go to the project, and it sees them.
    project = scopes.project("alpha")
    grant = open_grant(
        sc, project="alpha", memory_scopes=(scopes.GLOBAL, project), memory_scope=project
    )
    async with client(sc, grant.token) as run:
        added = await run.call_tool("memory_add", {"text": "alpha ships on Fridays"})
        run_id = json.loads(added.content[0].text)["id"]
        listed = json.loads((await run.call_tool("memory_list", {})).content[0].text)
        assert {(m["id"], m["scope"]) for m in listed} == {
            (memory_id, "global"),
            (run_id, project),
        }
    async with client(sc, API_KEY) as owner:
        listed = json.loads((await owner.call_tool("memory_list", {})).content[0].text)
        assert [m["id"] for m in listed] == [memory_id]  # the owner's client: global only
        missing = await owner.call_tool("memory_delete", {"id": run_id})
        assert missing.is_error and "no memory with id" in missing.content[0].text
        deleted = await owner.call_tool("memory_delete", {"id": memory_id})
        assert json.loads(deleted.content[0].text) == {"ok": True}
    assert [m.id for m in await sc.kernel.store.list_memories()] == [run_id]


class Outlet:
    """A channel named telegram that keeps what it is given (the real outlet's outbox is
    exercised by test_endpoint_telegram.py)."""

    name = "telegram"

    def __init__(self) -> None:
        self.sent: list[tuple[Target, str]] = []

    def unavailable(self) -> str:
        return ""

    async def send_text(self, target: Target, text: str) -> None:
        self.sent.append((target, text))


async def test_notify_owner_names_the_caller_and_is_rate_limited(
    sidecar: SidecarFactory, model: AnthropicSim, caplog: pytest.LogCaptureFixture
) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    grant = open_grant(sc)
    async with client(sc, grant.token) as session:
        # No Telegram here yet: refused by name, and not counted against the limit.
        for _ in range(6):
            lost = await session.call_tool("notify_owner", {"text": "anyone?"})
            assert lost.is_error and "not delivered" in lost.content[0].text
    outlet = Outlet()
    sc.kernel.channel_registry.attach(outlet)
    async with client(sc, grant.token) as session:
        for i in range(5):
            sent = await session.call_tool("notify_owner", {"text": f"step {i} done"})
            assert not sent.is_error, sent
        refused = await session.call_tool("notify_owner", {"text": "one too many"})
        assert refused.is_error and "at most 5 messages" in refused.content[0].text
        assert "retry in" in refused.content[0].text
        empty = await session.call_tool("notify_owner", {"text": "  "})
        assert empty.is_error and "text is empty" in empty.content[0].text
        long = await session.call_tool("notify_owner", {"text": "x" * 3501})
        assert long.is_error and "3500" in long.content[0].text
    assert len(outlet.sent) == 5
    target, text = outlet.sent[0]
    assert target.user_id == "" and text.startswith("📣 Claude Code (task 20261126-101500-ab12cd)")
    assert text.endswith("step 0 done")
    # Logs name neither the token nor what was said.
    logged = caplog.text
    assert grant.token not in logged and "step 0 done" not in logged


async def test_logs_carry_no_token_input_or_key(
    sidecar: SidecarFactory,
    model: AnthropicSim,
    caplog: pytest.LogCaptureFixture,
    library_floors: None,
) -> None:
    caplog.set_level(logging.INFO)  # as Kernel logs: INFO, the libraries at their floors
    sc = await sidecar(model, api_key=API_KEY)
    grant = open_grant(sc)
    secret_command = {"command": "echo s3cr3t-marker"}
    async with client(sc, grant.token) as session:
        call = asyncio.create_task(
            session.call_tool("approve", {"tool_name": "Bash", "input": secret_command})
        )
        await answer_next(sc, 2)
        await call
    async with client(sc, API_KEY) as owner:
        await owner.call_tool("memory_search", {"query": "m4rker-query"})
    logged = caplog.text
    for secret in (grant.token, API_KEY, "s3cr3t-marker", "m4rker-query"):
        assert secret not in logged
    assert "POST /mcp -> 200" in logged
