"""Two models behind a real Kernel, for the failover tests: provider ``main`` (the
primary, ``main:model-a``) and ``backup`` (its fallback, ``backup:model-z``), each on a
simulator of its own type, with ``[routing]`` settings and ``[[routing.rules]]``
appended to config.toml. Retry waits are no-waits; the circuit breaker's clock is one
the test drives (:class:`FakeMonotonic`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.events import AssistantDelta, Completed, ErrorEvent, ModelSwitched, TurnEvent
from kernel.routing import Health
from kernel.store.decisions import Decision
from tests.conftest import toml_value, write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error

Sim = AnthropicSim | OpenAISim
Kind = Literal["claude", "openai_compat"]
PRIMARY = "main:model-a"
FALLBACK = "backup:model-z"
BACKUP_KEY = "sk-backup-0123456789abcdef"
CONV = "console:failover"
RETRIES = 2  # main's max_retries (tests.conftest.write_config)


async def no_wait(_seconds: float) -> None:
    await asyncio.sleep(0)


class FakeMonotonic:
    """A monotonic clock that moves only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def overloaded(sim: Sim) -> list[Error]:
    """What makes one call to ``sim`` fail after all its retries: 529 (Anthropic) or
    503 (OpenAI-compatible), once per attempt."""
    if isinstance(sim, AnthropicSim):
        return [Error(529, "overloaded_error", "Overloaded")] * (RETRIES + 1)
    return [Error(503, "server_error", "The server is overloaded")] * (RETRIES + 1)


@dataclass
class Pair:
    kernel: Kernel
    main: Sim
    backup: Sim

    async def turn(self, text: str, conv: str = CONV, **kw: Any) -> list[TurnEvent]:
        turn = self.kernel.agent.start_turn(conv, UserInput(text, **kw))
        return [event async for event in turn]

    async def decisions(self) -> list[Decision]:
        """Every decision so far, oldest first."""
        return list(reversed(await self.kernel.agent.decisions.recent(limit=200)))

    async def last_decision(self) -> Decision:
        return (await self.kernel.agent.decisions.recent(limit=1))[0]


def config_lines(
    backup_url: str,
    backup_kind: Kind,
    *,
    routing: dict[str, Any] | None = None,
    rules: list[dict[str, Any]] | None = None,
    backup: dict[str, Any] | None = None,
) -> list[str]:
    """``[providers.backup]``, ``[routing]`` and its rules, as config.toml lines."""
    settings = {
        "type": backup_kind,
        "api_base": backup_url,
        "api_key": BACKUP_KEY,
        "default_model": "model-z",
        "models": ["model-z"],
        "max_tokens": 1024,
        "max_retries": 0,
        "retry_base_delay": 0.01,
        "timeout": 10.0,
        **(backup or {}),
    }
    lines = ["[providers.backup]", *(f"{k} = {toml_value(v)}" for k, v in settings.items())]
    if routing:
        lines += ["[routing]", *(f"{k} = {toml_value(v)}" for k, v in routing.items())]
    for rule in rules or []:
        lines += ["[[routing.rules]]", *(f"{k} = {toml_value(v)}" for k, v in rule.items())]
    return lines


@asynccontextmanager
async def two_models(
    folder: Path,
    *,
    primary: Kind = "claude",
    routing: dict[str, Any] | None = None,
    rules: list[dict[str, Any]] | None = None,
    backup: dict[str, Any] | None = None,
    clock: FakeMonotonic | None = None,
    env: dict[str, str] | None = None,
    **general: Any,
) -> AsyncIterator[Pair]:
    """A started Kernel whose ``main`` is a ``primary`` provider and whose ``backup`` is
    the other type, ``backup:model-z`` being main's fallback (``general.fallbacks``);
    ``env``: the environment the configuration is read with (more keys, say)."""
    main_sim: Sim = AnthropicSim() if primary == "claude" else OpenAISim()
    backup_sim: Sim = OpenAISim() if primary == "claude" else AnthropicSim()
    backup_kind: Kind = "openai_compat" if primary == "claude" else "claude"
    async with main_sim, backup_sim:
        general = {"language": "en", "fallbacks": [FALLBACK], **general}
        path = write_config(folder, main_sim.base_url, primary, **general)
        lines = config_lines(
            backup_sim.base_url, backup_kind, routing=routing, rules=rules, backup=backup
        )
        with path.open("a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
        config = load_config(path, env=env or {}, require_telegram=False)
        health = Health(config.routing, clock=clock) if clock is not None else None
        kernel = Kernel(config, sleep=no_wait, health=health)
        await kernel.start()
        try:
            yield Pair(kernel, main_sim, backup_sim)
        finally:
            await kernel.stop()


def switches(events: list[TurnEvent]) -> list[ModelSwitched]:
    return [e for e in events if isinstance(e, ModelSwitched)]


def reply_of(events: list[TurnEvent]) -> str:
    final = events[-1]
    assert isinstance(final, Completed), f"the turn did not complete: {final!r}"
    return final.reply


def error_of(events: list[TurnEvent]) -> ErrorEvent:
    final = events[-1]
    assert isinstance(final, ErrorEvent), f"the turn did not fail: {final!r}"
    return final


def deltas(events: list[TurnEvent]) -> str:
    return "".join(e.delta for e in events if isinstance(e, AssistantDelta))
