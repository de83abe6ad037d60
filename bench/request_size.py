"""What a "你好" costs: the request size of a first and a second turn (issue 16).

A real ``Kernel`` (real store on a SQLite file in a temporary folder, the built-in tools
as registered at start, the repository's ``SOUL.md``) runs with the quickstart's
configuration: ``config.example.toml``'s defaults with one ``claude`` provider, here
pointed at the in-process Anthropic simulator (``tests/sim/anthropic_sim.py``) over
loopback. Two "你好" turns go to the same conversation a minute apart on an injected
clock. For each turn the script prints the characters of each part of the request the
simulator received (tool definitions, system prompt, messages, as compact JSON the way
the SDK sent them) and the tokens:

- ``sim``: the simulator's own count of the turn's request (``sim.cache_log``, the
  figures it reports as usage and Kernel's ledger records): fresh input, cache read,
  cache write; ``uncached`` = fresh + written (what was not served from the cache),
  ``total`` = all input; "-" with a simulator that does not count (before issue 16).
  The simulator caches a prefix only from ``sim.cache.min_tokens`` (1024, Sonnet's
  minimum) on, which is printed too;
- ``est``: ``kernel.core.usage.estimate_tokens`` over each part's text (CJK character =
  1 token, else 4 characters a token), the same rule inline where the module is absent
  (older Kernels), so a before/after comparison uses one rule.

Which tool definitions are offered depends on the machine: ``delegate_to_cli`` only when
a configured coding CLI is found on PATH. ``--cli`` puts a stand-in ``claude`` executable
on PATH for the run (the owner who has Claude Code installed).

    uv run python bench/request_size.py [--cli] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernel.agent.agent import UserInput  # noqa: E402
from kernel.app import Kernel  # noqa: E402
from kernel.config import Config, load_config  # noqa: E402
from kernel.core.events import Completed  # noqa: E402
from tests.clock import ManualClock  # noqa: E402
from tests.sim.anthropic_sim import AnthropicSim  # noqa: E402
from tests.sim.script import text_reply  # noqa: E402

try:
    from kernel.core.usage import estimate_tokens
except ImportError:  # a Kernel from before issue 16: the same rule

    def estimate_tokens(text: str) -> int:
        cjk = sum(1 for ch in text if ord(ch) > 0x2E80)
        return cjk + (len(text) - cjk + 3) // 4


CONVERSATION = "telegram:1"
GREETING = "你好"
REPLY = "你好！有什么可以帮你的？"
START = datetime(2026, 5, 4, 1, 2, 3, tzinfo=UTC)


@dataclass
class Part:
    chars: int
    est: int


@dataclass
class TurnSize:
    turn: int
    tools: list[str]
    parts: dict[str, Part]
    tool_chars: dict[str, int]
    sim: dict[str, int] | None = None  # input / cache_read / cache_write
    total_chars: int = 0
    total_est: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def write_config(folder: Path, api_base: str) -> Config:
    """The quickstart: config.example.toml's defaults and one claude provider with a
    key. Only the endpoint differs (the simulator), and the sidecar is off."""
    shutil.copy(ROOT / "SOUL.md", folder / "SOUL.md")
    (folder / "config.toml").write_text(
        "[general]\n"
        'default_provider = "anthropic"\n'
        'data_dir = "data"\n'
        'soul = "SOUL.md"\n'
        "\n"
        "[providers.anthropic]\n"
        'type = "claude"\n'
        f'api_base = "{api_base}"\n'
        'api_key = "sk-ant-bench"\n'
        "max_tokens = 16384\n"
        'default_model = "claude-sonnet-5-5"\n'
        'models = ["claude-sonnet-5-5"]\n'
        "max_retries = 0\n"
        "\n"
        "[gateway]\n"
        "enabled = false\n",
        encoding="utf-8",
    )
    return load_config(folder / "config.toml", env={}, require_telegram=False)


def text_of(value: Any) -> str:
    """The words in a part, for the estimate (JSON punctuation of the wire left out,
    as a tokenizer sees the content)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(text_of(v) for v in value)
    if isinstance(value, dict):
        if value.get("type") == "text":
            return str(value.get("text", ""))
        if "content" in value:
            return text_of(value["content"])
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def tool_text(tool: dict[str, Any]) -> str:
    schema = json.dumps(tool.get("input_schema", {}), ensure_ascii=False)
    return f"{tool.get('name', '')}\n{tool.get('description', '')}\n{schema}"


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def sim_usage(sim: Any, index: int) -> dict[str, int] | None:
    """What a simulator that counts (``cache_log``) counted for request ``index``: its own
    figures, whatever the Kernel under test records (an older one records nothing)."""
    for use in getattr(sim, "cache_log", []):
        if use.request == index:
            return {"input": use.input, "cache_read": use.read, "cache_write": use.write}
    return None


def measure(turn: int, body: dict[str, Any], usage: dict[str, int] | None) -> TurnSize:
    tools = body.get("tools") or []
    system = body.get("system", "")
    messages = body.get("messages", [])
    parts = {
        "tools": Part(len(compact(tools)), estimate_tokens("\n".join(map(tool_text, tools)))),
        "system": Part(len(compact(system)), estimate_tokens(text_of(system))),
        "messages": Part(len(compact(messages)), estimate_tokens(text_of(messages))),
    }
    size = TurnSize(
        turn,
        [str(t.get("name")) for t in tools],
        parts,
        {str(t.get("name")): len(compact(t)) for t in tools},
        total_chars=len(compact(body)),
        total_est=sum(p.est for p in parts.values()),
    )
    size.sim = usage
    return size


async def run(with_cli: bool) -> list[TurnSize]:
    with tempfile.TemporaryDirectory(prefix="kernel-bench-") as tmp:
        folder = Path(tmp)
        saved_path = os.environ.get("PATH", "")
        if with_cli:
            bin_dir = folder / "bin"
            bin_dir.mkdir()
            stand_in = bin_dir / "claude"
            stand_in.write_text("#!/bin/sh\necho 2.1.197\n", encoding="utf-8")
            stand_in.chmod(0o755)
            os.environ["PATH"] = f"{bin_dir}{os.pathsep}{saved_path}"
        else:
            # Only the system's own folders: no coding CLI an owner may have installed.
            os.environ["PATH"] = os.pathsep.join(
                p for p in saved_path.split(os.pathsep) if p.startswith(("/usr", "/bin"))
            )
        try:
            async with AnthropicSim() as sim:
                config = write_config(folder, sim.base_url)
                clock = ManualClock(START)
                sizes: list[TurnSize] = []
                async with Kernel(config, clock=clock) as kernel:
                    for turn_no in (1, 2):
                        sim.enqueue(text_reply(REPLY))
                        before = len(sim.requests)
                        turn = kernel.agent.start_turn(
                            CONVERSATION, UserInput(GREETING, channel="telegram", user_id="1")
                        )
                        final = await turn.wait()
                        if turn.task is not None:
                            await turn.task
                        if not isinstance(final, Completed):
                            raise RuntimeError(f"turn {turn_no} failed: {final}")
                        found = [
                            i
                            for i, r in enumerate(sim.requests[before:], before)
                            if isinstance(r.body, dict) and "tools" in r.body
                        ]
                        if len(found) != 1:
                            raise RuntimeError(f"turn {turn_no}: {len(found)} turn requests")
                        body = sim.requests[found[0]].body
                        usage = sim_usage(sim, found[0])
                        sizes.append(measure(turn_no, body, usage))
                        clock.advance(60)
                    await check_ledger(kernel, sizes)
                cache = getattr(sim, "cache", None)
                if cache is not None:
                    sizes[0].extra["cache_min_tokens"] = cache.min_tokens
                return sizes
        finally:
            os.environ["PATH"] = saved_path


async def check_ledger(kernel: Kernel, sizes: list[TurnSize]) -> None:
    """Where the Kernel keeps a usage ledger (issue 16), its turn rows must say what the
    simulator counted: the bench reports the sim's figures, the owner sees the ledger's."""
    meter = getattr(kernel.agent, "meter", None)
    if meter is None or sizes[0].sim is None:
        return
    from kernel.store.usage import UsageFilter

    rows = await meter.ledger.entries(UsageFilter(purpose="turn"))
    got = [
        {
            "input": r.usage.input,
            "cache_read": r.usage.cache_read,
            "cache_write": r.usage.cache_write,
        }
        for r in reversed(rows)
    ]
    want = [s.sim for s in sizes]
    if got != want:
        raise RuntimeError(f"the ledger says {got}, the simulator counted {want}")
    sizes[0].extra["ledger"] = "agrees"


def print_report(label: str, sizes: list[TurnSize]) -> None:
    print(f"\n{label}: {len(sizes[0].tools)} tools offered: {', '.join(sizes[0].tools)}")
    chars = ", ".join(f"{k} {v}" for k, v in sizes[0].tool_chars.items())
    print(f"  tool definition chars: {chars}")
    if "cache_min_tokens" in sizes[0].extra:
        print(f"  the simulator caches a prefix from {sizes[0].extra['cache_min_tokens']} tokens")
    if sizes[0].extra.get("ledger"):
        print("  Kernel's usage ledger records the same figures for both turns")
    header = (
        f"{'turn':>4} {'tools ch':>8} {'system ch':>9} {'msgs ch':>7} {'body ch':>7} "
        f"{'tools est':>9} {'system est':>10} {'msgs est':>8} {'est':>5} | "
        f"{'sim in':>6} {'c.read':>6} {'c.write':>7} {'uncached':>8} {'total':>5}"
    )
    print(header)
    print("-" * len(header))
    for s in sizes:
        p = s.parts
        sim: dict[str, Any] = dict(s.sim or {})
        if s.sim:
            sim["uncached"] = s.sim["input"] + s.sim["cache_write"]
            sim["total"] = sim["uncached"] + s.sim["cache_read"]
        print(
            f"{s.turn:>4} {p['tools'].chars:>8} {p['system'].chars:>9} {p['messages'].chars:>7} "
            f"{s.total_chars:>7} {p['tools'].est:>9} {p['system'].est:>10} "
            f"{p['messages'].est:>8} {s.total_est:>5} | "
            f"{sim.get('input', '-'):>6} {sim.get('cache_read', '-'):>6} "
            f"{sim.get('cache_write', '-'):>7} {sim.get('uncached', '-'):>8} "
            f"{sim.get('total', '-'):>5}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cli", action="store_true", help="a stand-in claude on PATH")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    sizes = asyncio.run(run(args.cli))
    if args.json:
        print(json.dumps([asdict(s) for s in sizes], ensure_ascii=False, indent=1))
        return
    label = "claude on PATH" if args.cli else "no coding CLI on PATH"
    print_report(label, sizes)


if __name__ == "__main__":
    main()
