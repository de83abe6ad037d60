"""Kernel's own MCP endpoint (/mcp): the mcp SDK's client against a real sidecar.

The approve tool with a run grant opened as the Delegator opens one (its context's ask
answered by the test through ``kernel.agent.asks``, as Telegram's buttons answer it),
notify_owner, the memory tools, and the refusals before the SDK: tokens, peer, Host."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from kernel.core.asks import Answer, AskRegistry, Question
from kernel.core.delivery import Target
from kernel.delegate.approvals import RunGrant
from kernel.tools.registry import ToolContext
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory, until
from tests.gateway.conftest import sidecar as sidecar  # the fixture
from tests.sim.anthropic_sim import AnthropicSim

BASH = {"command": "git status", "description": "Show the working tree status"}


@pytest.fixture
async def model() -> AsyncIterator[AnthropicSim]:
    sim = AnthropicSim()
    await sim.start()
    yield sim
    await sim.stop()


@asynccontextmanager
async def client(sc: Sidecar, token: str | None = None) -> AsyncIterator[ClientSession]:
    """An initialized MCP session to the sidecar's /mcp, with ``token`` as its bearer."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(sc.url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def asker(asks: AskRegistry, conversation: str) -> Any:
    """A turn's ``ask`` as the agent builds it: the question waits in the registry."""

    async def ask(
        text: str, options: list[str], *, kind: str = "question", seconds: float, markdown: bool = False
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
    await until(lambda: bool(asks.waiting()))
    question = asks.waiting()[0]
    asks.answer(question.id, choice)
    return question


def verdict(result: Any) -> dict[str, Any]:
    assert not result.is_error, result
    assert len(result.content) == 1 and result.content[0].type == "text"
    parsed: dict[str, Any] = json.loads(result.content[0].text)
    return parsed


async def test_tools_listed_and_approve_allow_deny(sidecar: SidecarFactory, model: AnthropicSim) -> None:
    sc = await sidecar(model, api_key=API_KEY)
    grant = open_grant(sc)
    async with client(sc, grant.token) as session:
        names = [tool.name for tool in (await session.list_tools()).tools]
        assert sorted(names) == sorted(
            ["approve", "notify_owner", "memory_search", "memory_list", "memory_add", "memory_delete"]
        )
        call = asyncio.create_task(
            session.call_tool("approve", {"tool_name": "Bash", "input": BASH, "tool_use_id": "toolu_1"})
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
