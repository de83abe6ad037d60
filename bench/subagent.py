"""What one ``delegate_task`` call costs Kernel, around a model that answers instantly.

A real Kernel on a temporary directory (real SQLite file, real tool registry, one
``agents/bench.md``) whose provider is an in-process scripted model: no HTTP, no SDK,
each answer yielded at once, so what is timed is Kernel alone. Three kinds of turn, each
in a fresh session (``/new`` before each, outside the timed region):

- ``direct``: the model answers at once (1 model call);
- ``tool``: the model calls ``noop`` (an instant tool), then answers (2 calls);
- ``delegate``: the model calls ``delegate_task``; the sub-agent (its own child session,
  prompt, history writes) answers at once; the model answers (3 calls).

``delegate − tool`` is the overhead of one sub-agent run: the agent file read, the child
session, its layers, its one model call through the meter, its history and events.

    uv run python bench/subagent.py [--turns 200] [--warmup 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.config import Config, load_config
from kernel.core.events import Completed
from kernel.core.provider import (
    Capabilities,
    ChatRequest,
    Completion,
    Provider,
    RawToolCall,
    StreamEvent,
    TextDelta,
)

CONVERSATION = "console:bench"
MARK = "BENCH-SUBAGENT"  # in the agent's prompt: a request carrying it is the child's
AGENT = f"""---
name: bench
description: answers at once
tools: []
---

{MARK}: answer the task in one sentence.
"""
KINDS = ("direct", "tool", "delegate")


class ScriptedProvider(Provider):
    """Answers at once: the parent's first call asks for the turn kind's tool (if any),
    a call after a tool result or a sub-agent's call answers in text."""

    capabilities = Capabilities(stream=True, tool_call=True, attachments=True)

    def __init__(self, name: str) -> None:
        super().__init__(name, ["m"], "m")
        self.kind = "direct"
        self.calls = 0

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        last = request.messages[-1]
        child = MARK in request.system
        if child or last.tool_results or self.kind == "direct":
            text = "The answer, in one sentence." if child else "Done: here it is."
            yield TextDelta(text)
            yield Completion(text, [], stop_reason="end_turn", input_tokens=1, output_tokens=1)
            return
        if self.kind == "tool":
            call = RawToolCall(f"call_{self.calls}", "noop", json.dumps({"text": "x"}))
        else:
            task = {"agent": "bench", "task": "Say one sentence about the weather."}
            call = RawToolCall(f"call_{self.calls}", "delegate_task", json.dumps(task))
        yield Completion("", [call], stop_reason="tool_use", input_tokens=1, output_tokens=1)


class ScriptedKernel(Kernel):
    def _make_provider(self, name: str) -> Provider:
        return ScriptedProvider(name)


def write_config(folder: Path) -> Config:
    (folder / "config.toml").write_text(
        "[general]\n"
        'default_provider = "main"\n'
        'data_dir = "data"\n'
        "\n"
        "[providers.main]\n"
        'type = "openai_compat"\n'
        'api_key = "x"\n'
        'default_model = "m"\n'
        "max_retries = 0\n"
        "\n"
        "[gateway]\n"
        "enabled = false\n",
        encoding="utf-8",
    )
    (folder / "agents").mkdir()
    (folder / "agents" / "bench.md").write_text(AGENT, encoding="utf-8")
    return load_config(folder / "config.toml", env={}, require_telegram=False)


async def timed(kernel: Kernel, provider: ScriptedProvider, kind: str, count: int) -> list[int]:
    provider.kind = kind
    samples = []
    for i in range(count):
        kernel.agent.sessions.new_session(CONVERSATION)
        start = time.perf_counter_ns()
        turn = kernel.agent.start_turn(CONVERSATION, UserInput(f"question {i}"))
        final = await turn.wait()
        samples.append(time.perf_counter_ns() - start)
        if turn.task is not None:
            await turn.task
        if not isinstance(final, Completed) or final.cancelled:
            raise RuntimeError(f"{kind} turn {i} did not complete: {final}")
    return samples


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="kernel-bench-") as tmp:
        kernel = ScriptedKernel(write_config(Path(tmp)))
        async with kernel:

            @kernel.tools.tool
            def noop(text: str) -> str:
                """Returns its argument."""
                return text

            provider = await kernel.agent.selection.provider()
            assert isinstance(provider, ScriptedProvider)
            results: dict[str, list[float]] = {kind: [] for kind in KINDS}
            for kind in KINDS:
                await timed(kernel, provider, kind, args.warmup)
            for _ in range(args.rounds):  # interleaved: a busy machine's drift hits all alike
                for kind in KINDS:
                    samples = await timed(kernel, provider, kind, args.turns // args.rounds)
                    results[kind].extend(s / 1e6 for s in samples)
            children = await kernel.store.list_sessions(limit=1, channel="agent")
            assert children, "no sub-agent session was made"
    print(
        f"\nPer-turn wall time, start_turn -> final event, instant in-process model "
        f"({len(results['direct'])} timed turns per kind after {args.warmup} warm-up)"
    )
    header = f"{'turn':<9} {'calls':>5} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'mean ms':>8}"
    print(header)
    print("-" * len(header))
    p50: dict[str, float] = {}
    for kind, calls in zip(KINDS, (1, 2, 3), strict=True):
        ms = sorted(results[kind])
        p50[kind] = statistics.median(ms)
        print(
            f"{kind:<9} {calls:>5} {p50[kind]:>8.2f} {ms[int(len(ms) * 0.9)]:>8.2f} "
            f"{ms[min(len(ms) - 1, int(len(ms) * 0.99))]:>8.2f} {statistics.fmean(ms):>8.2f}"
        )
    overhead = p50["delegate"] - p50["tool"]
    print(f"\ndelegate_task overhead (p50 delegate - p50 tool): {overhead:.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200, help="timed turns per kind")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds of kinds")
    asyncio.run(main(parser.parse_args()))
