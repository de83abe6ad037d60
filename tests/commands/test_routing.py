"""Routing in the shared commands on a real Kernel (SQLite on disk): /status names the
providers that are not healthy and the session's last decision, and stays short when all
is well; /model auto (and /provider auto) hands the choice back to the rules and the
default, and that survives a restart."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.commands import Commands
from kernel.config import load_config
from kernel.store.decisions import Attempt
from tests.conftest import write_config
from tests.gateway.test_routing import PROVIDERS, decision
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply
from tests.waiting import wait_until

CONV = "console:default"
Start = Callable[..., Awaitable[Kernel]]


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Start]:
    """A Kernel on one config and data folder; called again, it restarts on them."""
    running: list[Kernel] = []

    async def make(sim: AnthropicSim, routing: str = "") -> Kernel:
        for kernel in running:
            await kernel.stop()
        running.clear()
        path = tmp_path / "config.toml"
        if not path.exists():
            write_config(tmp_path, sim.base_url, "claude", language="en")
            path.write_text(path.read_text() + PROVIDERS + routing)
        kernel = Kernel(load_config(path, env={}, require_telegram=False))
        await kernel.start()
        running.append(kernel)
        return kernel

    yield make
    for kernel in running:
        await kernel.stop()


async def status(kernel: Kernel) -> list[str]:
    """/status full's lines, its problems line split into one line per problem."""
    reply = await Commands(kernel).run(CONV, "status", "full")
    assert reply is not None
    lines: list[str] = []
    for line in reply.text.splitlines():
        problems = line.removeprefix("Problems: ")
        lines += problems.split("; ") if problems != line else [line]
    return lines


async def run(kernel: Kernel, line: str) -> str:
    name, _, arg = line.lstrip("/").partition(" ")
    reply = await Commands(kernel).run(CONV, name, arg)
    assert reply is not None and not reply.error, reply
    return reply.text


async def converse(kernel: Kernel, sim: AnthropicSim) -> int:
    sim.enqueue(text_reply("ok"))
    async for _ in kernel.agent.start_turn(CONV, UserInput("hi", channel="console")):
        pass
    session = kernel.agent.sessions.current_session(CONV)
    assert session is not None
    return session


async def test_status_is_short_when_healthy_and_names_the_last_decision(
    start: Start, anthropic_sim: AnthropicSim
) -> None:
    kernel = await start(anthropic_sim)
    before = await status(kernel)
    assert not any("Last model call" in line or ": open" in line for line in before)
    session = await converse(kernel, anthropic_sim)
    store = kernel.agent.decisions
    await store.record(decision(1, session))
    await store.record(decision(2, session + 1, chosen="backup:gpt-x"))  # another session's
    lines = await status(kernel)
    routing = [line for line in lines if line not in before]
    # everything healthy: one routing line at most (the session line changed too)
    assert [line for line in routing if not line.startswith("Session")] == [
        "Last model call: main:model-a (the default)"
    ]

    await store.record(
        decision(
            3,
            session,
            why="rule",
            rule="code",
            sticky=True,
            chosen="backup:gpt-x",
            attempts=[
                Attempt("main:model-a", "overloaded_error", 2.0, 529),
                Attempt("backup:gpt-x", "ok", 1.0),
            ],
        )
    )
    assert (
        "Last model call: backup:gpt-x (rule code, staying on the fallback); "
        "failed over: main:model-a → overloaded"
    ) in await status(kernel)
    await store.record(
        decision(4, session, chosen="", attempts=[Attempt("main:model-a", "timeout")])
    )
    assert (
        "Last model call: no model answered (the default); failed over: main:model-a → timed out"
        in await status(kernel)
    )


async def test_status_names_open_half_open_and_refused_providers(
    start: Start, anthropic_sim: AnthropicSim
) -> None:
    kernel = await start(
        anthropic_sim, "\n[routing]\nbreaker_failures = 2\nbreaker_cooldown = 600\n"
    )
    health = kernel.agent.health
    health.failure("main", "overloaded_error")
    assert not any(line.startswith("main:") for line in await status(kernel))  # one failure
    health.failure("main", "overloaded_error")
    health.refused("backup")
    lines = await status(kernel)
    (open_line,) = [line for line in lines if line.startswith("main:")]
    assert open_line.startswith("main: open, retry in ")
    assert open_line.endswith(" s (overloaded)")
    assert 0 < int(open_line.split()[4]) <= 600
    assert "backup: key refused — fix providers.backup.api_key (or api_keys)" in lines
    assert not any(line.startswith("spare:") for line in lines)  # disabled: not a fault


async def test_status_names_a_half_open_provider(start: Start, anthropic_sim: AnthropicSim) -> None:
    kernel = await start(
        anthropic_sim, "\n[routing]\nbreaker_failures = 1\nbreaker_cooldown = 0.01\n"
    )
    health = kernel.agent.health
    health.failure("main", "timeout")
    await wait_until(lambda: health.state("main") == "half_open")
    assert "main: half-open, the next call probes it (timed out)" in await status(kernel)
    health.success("main")
    assert not any(line.startswith("main:") for line in await status(kernel))


async def test_model_auto_forgets_the_pick_across_a_restart(
    start: Start, anthropic_sim: AnthropicSim
) -> None:
    kernel = await start(anthropic_sim)
    shown = await run(kernel, "/model")
    assert shown.endswith(
        "Automatic: the routing rules and the default decide; /model <name> pins one."
    )
    assert await run(kernel, "/model model-b") == "Switched to model model-b"
    shown_reply = await Commands(kernel).run(CONV, "model", "")
    assert shown_reply is not None and "send /model auto" in shown_reply.text
    assert [c.command for c in shown_reply.choices][-1] == "/model auto"  # a button for it

    kernel = await start(anthropic_sim)  # the pick is kept
    assert kernel.agent.selection.chosen and kernel.agent.selection.model == "model-b"
    assert kernel.agent.selection.owner_choice() == ("main", "model-b")
    assert "send /model auto" in await run(kernel, "/model")
    assert await run(kernel, "/model auto") == (
        "Automatic choice again: the routing rules and the default (main / model-a) decide"
    )
    assert not kernel.agent.selection.chosen and kernel.agent.selection.model == "model-a"

    kernel = await start(anthropic_sim)  # and so is its absence
    assert not kernel.agent.selection.chosen and kernel.agent.selection.model == "model-a"
    assert kernel.agent.selection.owner_choice() is None
    assert "Automatic:" in await run(kernel, "/model")


async def test_provider_auto_forgets_the_pick_too(
    start: Start, anthropic_sim: AnthropicSim
) -> None:
    kernel = await start(anthropic_sim)
    assert await run(kernel, "/provider backup") == "Switched to provider backup (model gpt-x)"
    assert kernel.agent.selection.chosen
    assert (await run(kernel, "/provider auto")).startswith("Automatic choice again")
    assert (kernel.agent.selection.provider_name, kernel.agent.selection.model) == (
        "main",
        "model-a",
    )
    kernel = await start(anthropic_sim)
    assert not kernel.agent.selection.chosen and kernel.agent.selection.provider_name == "main"
