"""Kernel's own overhead per turn, around a model that answers instantly.

For each history length (rounds already stored in the session) a fresh Kernel is built
on a temporary directory with a real SQLite file. The provider is replaced by an
in-process :class:`InstantProvider` that yields one ``TextDelta`` and one ``Completion``
at once, so what is timed is Kernel alone: session lookup, history load and repair,
system layers (SOUL.md, tool guide, memory recall, time), request building, event
queueing and the history writes, from ``Agent.start_turn`` to the final event.

By default the session is reset to exactly N rounds after every turn (the two messages
the turn wrote are deleted, outside the timed region), so every sample sees the same
history; ``--grow`` lets the history grow by one round per turn instead.

Optionally (when ``tests/sim/openai_sim.py`` is present) the same measurement is repeated
with the real ``openai_compat`` provider talking to the in-process HTTP simulator over
loopback, which adds the openai SDK, httpx and the simulator's own work.

    uv run python bench/turn_overhead.py [--turns 200] [--warmup 20] [--rounds 0,50,500]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib
import io
import pstats
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.config import Config, load_config
from kernel.core.events import Completed
from kernel.core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from kernel.core.provider import (
    Capabilities,
    ChatRequest,
    Completion,
    Provider,
    StreamEvent,
    TextDelta,
)

ROOT = Path(__file__).resolve().parent.parent
CONVERSATION = "console:bench"

# ~200 characters each, like a short chat exchange.
USER_TEXT = (
    "Could you remind me what we decided about the quarterly report structure last week, "
    "and whether the revenue chart should use monthly or weekly buckets? Round {n}."
)
ASSISTANT_TEXT = (
    "Last week we settled on three sections: summary, revenue, and risks. The revenue chart "
    "uses monthly buckets, with a weekly breakdown only in the appendix. Anything else? {n}"
)
TOOL_RESULT = (
    '[{"id": 3, "text": "Quarterly report: sections summary, revenue, risks; monthly '
    'buckets for revenue", "created_at": "2025-01-10T09:00:00+00:00", "category": '
    '"project"}]'
)
MEMORIES = [
    "The owner prefers concise answers with the conclusion first.",
    "Quarterly report: sections summary, revenue, risks; monthly buckets for revenue.",
    "The owner's timezone is Asia/Shanghai and they work 9:00-18:00.",
    "Project Atlas deploys on Fridays; never suggest Monday deploys.",
    "The owner reads English and Chinese; answer in the language of the question.",
]


class InstantProvider(Provider):
    """A model that answers at once: one text delta, then the completion. No I/O."""

    capabilities = Capabilities(stream=True, tool_call=True, attachments=True)

    def __init__(self, name: str, reply: str) -> None:
        super().__init__(name, ["m"], "m")
        self.reply = reply
        self.sent: list[int] = []  # messages in each request: what the model "sees"

    async def _stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        self.sent.append(len(request.messages))
        yield TextDelta(self.reply)
        yield Completion(self.reply, [], stop_reason="end_turn", input_tokens=1, output_tokens=1)


class InstantKernel(Kernel):
    """A real Kernel whose provider factory builds the instant provider."""

    def _make_provider(self, name: str) -> Provider:
        return InstantProvider(name, ASSISTANT_TEXT.format(n="reply"))


@dataclass(slots=True)
class Result:
    variant: str
    rounds: int
    stored_rounds: tuple[int, int]  # rounds in the DB before the first / after the last turn
    samples_ns: list[int]
    sent: tuple[int, int] | None  # min/max messages per model request (instant variant only)


# --budget: every call priced and checked against limits it never reaches (issue 16's meter
# at its most: the worst case, two sums before the call, a ledger row and the warning's
# sums after it).
BUDGET_TOML = (
    "\n[providers.main.prices.m]\ninput = 3.0\noutput = 15.0\n"
    "cache_read = 0.3\ncache_write = 3.75\n\n[budget]\ndaily = 1000000.0\n"
    "monthly = 1000000.0\n"
)


def write_config(folder: Path, api_base: str = "", budget: bool = False) -> Config:
    soul = ROOT / "SOUL.md"
    if soul.is_file():
        shutil.copy(soul, folder / "SOUL.md")
    base_line = f'api_base = "{api_base}"\n' if api_base else ""
    (folder / "config.toml").write_text(
        "[general]\n"
        'default_provider = "main"\n'
        'data_dir = "data"\n'
        'soul = "SOUL.md"\n'
        "context_rounds = 50\n"
        "\n"
        "[providers.main]\n"
        'type = "openai_compat"\n'
        'api_key = "x"\n'
        'default_model = "m"\n'
        f"{base_line}"
        "max_retries = 0\n"
        "\n"
        "[gateway]\n"
        "enabled = false\n" + (BUDGET_TOML if budget else ""),
        encoding="utf-8",
    )
    return load_config(folder / "config.toml", env={}, require_telegram=False)


def history(rounds: int) -> list[Message]:
    """``rounds`` rounds of ~200-character user/assistant texts; every 10th round also
    has a tool_use / tool_result pair between the question and the answer."""
    out: list[Message] = []
    for n in range(rounds):
        out.append(Message("user", [TextBlock(USER_TEXT.format(n=n))]))
        if n % 10 == 9:
            call_id = f"call_{n:06d}"
            use = ToolUseBlock(call_id, "memory_search", {"query": "quarterly report"})
            out.append(Message("assistant", [TextBlock("Let me check my notes."), use]))
            out.append(Message("user", [ToolResultBlock(call_id, TOOL_RESULT)]))
        out.append(Message("assistant", [TextBlock(ASSISTANT_TEXT.format(n=n))]))
    return out


async def prepare(kernel: Kernel, rounds: int) -> tuple[int, int]:
    """Create a session holding ``rounds`` rounds and resume it; returns (session id,
    highest message id), the point every turn is reset to."""
    store = kernel.store
    for text in MEMORIES:
        await store.add_memory(text, "project")
    session = await store.create_session("console")
    messages = history(rounds)
    for start in range(0, len(messages), 500):
        await store.append_messages(session.id, messages[start : start + 500])
    await kernel.agent.sessions.resume(CONVERSATION, session.id)
    return session.id, await max_message_id(kernel, session.id)


# The store has no public "delete messages" (Kernel never needs one); the benchmark uses
# its db thread directly so the reset is serialised like every other store call.
async def max_message_id(kernel: Kernel, session_id: int) -> int:
    def op(conn: sqlite3.Connection) -> int:
        sql = "SELECT COALESCE(MAX(id), 0) FROM messages WHERE session_id = ?"
        return int(conn.execute(sql, (session_id,)).fetchone()[0])

    return await kernel.store._read("bench max id", op)


async def reset_to(kernel: Kernel, session_id: int, last_id: int) -> None:
    def op(conn: sqlite3.Connection) -> None:
        sql = "DELETE FROM messages WHERE session_id = ? AND id > ?"
        conn.execute(sql, (session_id, last_id))

    await kernel.store._write("bench reset", op)


async def timed_turns(
    kernel: Kernel,
    count: int,
    *,
    reset: tuple[int, int] | None,
    before_turn: Callable[[], None] | None = None,
    profiler: cProfile.Profile | None = None,
) -> list[int]:
    samples: list[int] = []
    for i in range(count):
        if before_turn is not None:
            before_turn()
        user_input = UserInput(USER_TEXT.format(n=f"bench {i}"), channel="console")
        if profiler is not None:
            profiler.enable()
        start = time.perf_counter_ns()
        turn = kernel.agent.start_turn(CONVERSATION, user_input)
        final = await turn.wait()
        elapsed = time.perf_counter_ns() - start
        if profiler is not None:
            profiler.disable()
        if turn.task is not None:
            await turn.task
        if not isinstance(final, Completed):
            raise RuntimeError(f"turn {i} failed: {final}")
        samples.append(elapsed)
        if reset is not None:
            await reset_to(kernel, *reset)
    return samples


async def run_case(
    variant: str,
    rounds: int,
    args: argparse.Namespace,
    *,
    api_base: str = "",
    before_turn: Callable[[], None] | None = None,
) -> Result:
    with tempfile.TemporaryDirectory(prefix="kernel-bench-") as tmp:
        config = write_config(Path(tmp), api_base, getattr(args, "budget", False))
        kernel = InstantKernel(config) if variant == "instant" else Kernel(config)
        async with kernel:
            session_id, last_id = await prepare(kernel, rounds)
            reset = None if args.grow else (session_id, last_id)
            before = await kernel.store.count_rounds(session_id)
            await timed_turns(kernel, args.warmup, reset=reset, before_turn=before_turn)
            profiler = cProfile.Profile() if args.profile else None
            samples = await timed_turns(
                kernel, args.turns, reset=reset, before_turn=before_turn, profiler=profiler
            )
            after = await kernel.store.count_rounds(session_id)
            provider = await kernel.agent.selection.provider()
            sent = None
            if isinstance(provider, InstantProvider):
                timed = provider.sent[-args.turns :]
                sent = (min(timed), max(timed))
            if profiler is not None:
                print_profile(profiler, f"{variant}, {rounds} rounds", args.profile)
        return Result(variant, rounds, (before, after), samples, sent)


def print_profile(profiler: cProfile.Profile, title: str, limit: int) -> None:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(limit)
    print(f"\n--- cProfile (event-loop thread only), {title}, by tottime ---")
    print(out.getvalue())


def load_sim() -> tuple[Any, Callable[[str], Any]] | None:
    """(OpenAISim class, text_reply) if the simulator exists with the expected API."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        sim_module = importlib.import_module("tests.sim.openai_sim")
        script_module = importlib.import_module("tests.sim.script")
        sim_class = sim_module.OpenAISim
        text_reply = script_module.text_reply
    except (ImportError, AttributeError) as exc:
        print(f"(HTTP simulator variant skipped: {exc})")
        return None
    needed = ("start", "stop", "enqueue", "base_url")
    if not all(hasattr(sim_class, name) for name in needed):
        print("(HTTP simulator variant skipped: OpenAISim lacks start/stop/enqueue/base_url)")
        return None
    return sim_class, text_reply


async def run_sim_case(
    rounds: int, args: argparse.Namespace, sim_api: tuple[Any, Callable[[str], Any]]
) -> Result | None:
    sim_class, text_reply = sim_api
    reply = ASSISTANT_TEXT.format(n="reply")
    try:
        sim = sim_class()
        await sim.start()
    except Exception as exc:  # the simulator's API may have changed: skip, don't fail
        print(f"(HTTP simulator variant skipped: cannot start OpenAISim: {exc!r})")
        return None
    try:
        return await run_case(
            "http-sim",
            rounds,
            args,
            api_base=sim.base_url,
            before_turn=lambda: sim.enqueue(text_reply(reply)),
        )
    finally:
        await sim.stop()


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    index = max(0, min(len(sorted_values) - 1, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


def print_table(results: list[Result], args: argparse.Namespace) -> None:
    mode = "grows by one round per turn" if args.grow else "reset to N rounds after each turn"
    print(
        f"\nPer-turn wall time, start_turn -> final event ({args.turns} timed turns after "
        f"{args.warmup} warm-up; history {mode})"
    )
    header = (
        f"{'variant':<9} {'rounds':>6} {'in DB':>9} {'sent':>7} {'p50 ms':>8} {'p90 ms':>8} "
        f"{'p99 ms':>8} {'max ms':>8} {'mean ms':>8}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        ms = sorted(s / 1e6 for s in r.samples_ns)
        stored = f"{r.stored_rounds[0]}-{r.stored_rounds[1]}"
        sent = "-" if r.sent is None else f"{r.sent[0]}-{r.sent[1]}"
        print(
            f"{r.variant:<9} {r.rounds:>6} {stored:>9} {sent:>7} {percentile(ms, 50):>8.2f} "
            f"{percentile(ms, 90):>8.2f} {percentile(ms, 99):>8.2f} {ms[-1]:>8.2f} "
            f"{statistics.fmean(ms):>8.2f}"
        )


async def main_async(args: argparse.Namespace) -> None:
    rounds_list = [int(x) for x in args.rounds.split(",") if x.strip()]
    results: list[Result] = []
    for rounds in rounds_list:
        results.append(await run_case("instant", rounds, args))
    if not args.no_sim:
        sim_api = load_sim()
        if sim_api is not None:
            for rounds in rounds_list:
                result = await run_sim_case(rounds, args, sim_api)
                if result is None:
                    break
                results.append(result)
    print_table(results, args)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200, help="timed turns per case")
    parser.add_argument("--warmup", type=int, default=20, help="untimed turns first")
    parser.add_argument("--rounds", default="0,50,500", help="history lengths, comma list")
    parser.add_argument("--grow", action="store_true", help="do not reset history per turn")
    parser.add_argument("--no-sim", action="store_true", help="skip the HTTP simulator")
    parser.add_argument(
        "--budget", action="store_true", help="prices and limits set: the meter's full path"
    )
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="print the top N cProfile rows"
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    print(f"Python {sys.version.split()[0]}, {sys.platform}")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
