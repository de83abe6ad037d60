"""A CLI's permission prompt in Telegram: from its request to the message, from the press
to the CLI going on (issue 19 point 2).

One process and one event loop hold the Bot API simulator (``tests.sim.telegram_sim``),
the Anthropic simulator scripting ``delegate_to_cli``, and a real ``Kernel`` +
``TelegramChannel`` (real python-telegram-bot long polling, real anthropic SDK, SQLite
on disk) + the sidecar serving ``/mcp`` (``Gateway``). ``[cli.claude_code] approvals =
"telegram"``; the CLI is the tests' stand-in Claude Code
(``tests/delegate/claude_permission.py``), a child process that calls ``approve`` with
the mcp SDK's streamable HTTP client before each of its ``--prompts`` Bash calls, one
after another, and stamps each request (``time.monotonic()``: CLOCK_MONOTONIC, one clock
for every process of the machine, so its stamps compare with the simulator's).

Per prompt:

- request → message: the stand-in sends its ``approve`` request → the Telegram simulator
  receives the ``sendMessage`` carrying the prompt (sidecar, MCP SDK server, the run's
  grant, the turn's ask, the chat's view, the durable outbox, the chat's rate budget);
- press → CLI: the benchmark injects the "Allow once" callback query (as soon as it sees
  the message) → the stand-in has the ``approve`` answer (getUpdates long poll, the
  callback handler, the ask resolved, the decision recorded, the MCP response).

Each prompt is asked ``--pause`` seconds after the previous answer (the model's turn
between two tool calls; 0: back to back). A first delegation (``--warmup`` prompts) is
not counted.

    uv run python bench/permission_prompt.py [--prompts 20] [--warmup 3] [--pause 0,3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernel.app import Kernel  # noqa: E402
from kernel.config import load_config  # noqa: E402
from kernel.gateway.server import Gateway  # noqa: E402
from kernel.telegram.channel import TelegramChannel  # noqa: E402
from tests.conftest import write_config  # noqa: E402
from tests.delegate.claude_permission import make_permission_cli  # noqa: E402
from tests.delegate.conftest import cli_section  # noqa: E402
from tests.sim.anthropic_sim import AnthropicSim  # noqa: E402
from tests.sim.script import text_reply, tool_reply  # noqa: E402
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, BotCall, TelegramSim  # noqa: E402

CONV = f"telegram:{OWNER}"
WAIT = 60.0
MARK = "asks to use"  # in every prompt's text (English catalogue)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def prompt_sends(tg: TelegramSim) -> list[BotCall]:
    return [c for c in tg.calls_to("sendMessage") if MARK in str(c.params.get("text", ""))]


async def delegation(
    tg: TelegramSim, model: AnthropicSim, channel: TelegramChannel, times: Path, n: int, run: int
) -> tuple[list[float], list[float]]:
    """One delegation of ``n`` prompts, each allowed once at sight; the two latencies."""
    os.environ["STANDIN_CALLS"] = json.dumps(
        [{"name": "Bash", "input": {"command": f"step-{run}-{k} --go"}} for k in range(n)]
    )
    seen = len(read_lines(times))
    model.enqueue(
        tool_reply("delegate_to_cli", {"task": f"bench {run}"}), text_reply(f"Done {run}.")
    )
    before = len(prompt_sends(tg))
    tg.inject_text(f"run bench {run}")
    sent_at: list[float] = []
    pressed_at: list[float] = []
    for k in range(n):

        def shown(k: int = k) -> bool:
            return len(prompt_sends(tg)) > before + k

        await tg.wait_until(shown, timeout=WAIT)
        call = prompt_sends(tg)[before + k]
        sent_at.append(call.at)
        data = call.result["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        pressed_at.append(time.monotonic())
        tg.inject_callback(data, message_id=call.result["message_id"])
    await tg.wait_until(lambda: any(m.text == f"Done {run}." for m in tg.chat(OWNER)), timeout=WAIT)
    await tg.wait_until(
        lambda: not channel.kernel.agent.sessions.is_busy(CONV) and not channel._tasks, timeout=WAIT
    )
    stamps = [json.loads(line) for line in read_lines(times)[seen:]]
    stamps.sort(key=lambda s: s["tool_use_id"])
    assert len(stamps) == n and all(s["behavior"] == "allow" for s in stamps), stamps
    to_message = [(at - s["sent"]) * 1000 for at, s in zip(sent_at, stamps, strict=True)]
    to_cli = [(s["answered"] - at) * 1000 for at, s in zip(pressed_at, stamps, strict=True)]
    return to_message, to_cli


async def main(prompts: int, warmup: int, pauses: list[float]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        times = base / "times.jsonl"
        os.environ["STANDIN_TIMES"] = str(times)
        os.environ["STANDIN_RAN"] = str(base / "ran.jsonl")
        command = make_permission_cli(base / "bin")
        tg = await TelegramSim().start()
        model = await AnthropicSim().start()
        path = write_config(base, model.base_url, "claude", language="en")
        path.write_text(
            path.read_text() + f'\n[telegram]\ntoken = "{DEFAULT_TOKEN}"\nallowed_user = {OWNER}\n'
            f'api_base = "{tg.api_base}"\npoll_timeout = 1\n'
            + cli_section("claude_code", command=str(command), approvals="telegram")
        )
        kernel = Kernel(load_config(path, env={}))
        await kernel.start()
        channel = TelegramChannel(kernel.telegram_services())
        await channel.start()
        gateway = Gateway(kernel.gateway_deps(), kernel.plugins.routers())
        await gateway.start()
        results: list[tuple[float, list[float], list[float]]] = []
        try:
            await delegation(tg, model, channel, times, warmup, 0)
            for run, pause in enumerate(pauses, 1):
                os.environ["STANDIN_PAUSE"] = str(pause)
                to_message, to_cli = await delegation(tg, model, channel, times, prompts, run)
                results.append((pause, to_message, to_cli))
        finally:
            await gateway.stop()
            await channel.stop()
            await kernel.stop()
            await tg.stop()
            await model.stop()

    print(f"prompts={prompts} per delegation (after a warm-up delegation of {warmup})")
    for pause, to_message, to_cli in results:
        print(f"\npause {pause:g} s before each prompt {'p50 ms':>21} {'p90 ms':>9} {'max ms':>9}")
        rows: list[tuple[str, list[float]]] = [
            ("approve request -> sendMessage", to_message),
            ("press -> the CLI has the answer", to_cli),
        ]
        for label, values in rows:
            print(
                f"{label:40} {statistics.median(values):9.1f} "
                f"{percentile(values, 90):9.1f} {max(values):9.1f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--pause", default="0,3", help="seconds before each prompt, a list")
    args = parser.parse_args()
    pauses = [float(p) for p in args.pause.split(",")]
    asyncio.run(main(args.prompts, args.warmup, pauses))
