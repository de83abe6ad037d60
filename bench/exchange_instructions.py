"""Kernel's instructions per exchange: ``exchange_cpu.py``'s service, counted by callgrind.

CPU seconds on a shared two-core machine move by ±10–25 % from one hour to the next
(issue 37's figures), more than most single changes save. Instructions do not: the same
code, inputs and environment execute the same instructions whatever else the machine
does (valgrind's callgrind counts them; repeat runs agree within ~0.3 %). So a change is
judged here first, and ``exchange_cpu.py`` tells what the count means in seconds.

The real ``python -m kernel`` (this interpreter) runs under ``valgrind --tool=callgrind``
with instrumentation off, against the same simulators and default configuration as
``exchange_cpu.py`` (Telegram, one Claude provider in echo mode, the sidecar on). After
``--warmup`` exchanges (3) instrumentation is switched on (``callgrind_control -i on``),
then ``--exchanges`` (20) exchanges ``--pace`` (2.5) seconds apart are counted, idle
polling between them included. Printed: instructions per exchange, in all and by thread
(the event loop's, the database thread's, the worker threads'). Valgrind's dumps stay in
a temporary folder (``callgrind_annotate`` reads them) whose path is printed.

Only user-space instructions are counted: system calls (an fsync, a socket write) cost
time the count does not show, and an instruction is not a fixed time. Needs valgrind
(Debian's ``valgrind`` package); runs ~50× slower than the service, ~2 min.

    uv run python bench/exchange_instructions.py [--exchanges 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.exchange_cpu import exchange, start_service  # noqa: E402

THREADS = {"01": "event loop", "02": "database"}  # valgrind numbers threads as they start


def control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True)


async def count(args: argparse.Namespace) -> Path:
    """Run the counted exchanges; the folder of callgrind's dumps."""
    dumps = Path(tempfile.mkdtemp(prefix="kernel-callgrind-"))
    wrapper = dumps / "python-under-callgrind"
    wrapper.write_text(
        "#!/bin/sh\n"
        "exec valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes"
        f' --callgrind-out-file={dumps}/out.%p {sys.executable} "$@" 2>{dumps}/valgrind.log\n',
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    async with contextlib.AsyncExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kernel-ins-")))
        tg, proc, _ = await start_service(stack, folder, str(wrapper))
        for n in range(1, args.warmup + 1):
            await exchange(tg, n)
            await asyncio.sleep(args.pace)
        control("-i", "on", str(proc.pid))
        control("-z", str(proc.pid))
        for n in range(args.warmup + 1, args.warmup + args.exchanges + 1):
            await exchange(tg, n)
            await asyncio.sleep(args.pace)
        control("-d", "counted", str(proc.pid))
    return dumps


def per_thread(dumps: Path, exchanges: int) -> dict[str, float]:
    """Instructions per exchange (millions) by valgrind's thread number."""
    per: dict[str, float] = {}
    for dump in sorted(dumps.glob("out.*.1-*")):
        for line in dump.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("summary:"):
                per[dump.name.rsplit("-", 1)[1]] = int(line.split()[1]) / exchanges / 1e6
                break
    return per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--exchanges", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--pace", type=float, default=2.5, help="seconds between exchanges")
    args = parser.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("valgrind is not installed (Debian: apt-get install valgrind)")
    dumps = asyncio.run(count(args))
    per = per_thread(dumps, args.exchanges)
    threads = ", ".join(
        f"{THREADS.get(number, 'worker ' + number)} {value:.2f}" for number, value in per.items()
    )
    print(f"{args.exchanges} exchanges {args.pace} s apart after {args.warmup}, under callgrind")
    print(f"instructions per exchange: {sum(per.values()):.2f} M ({threads})")
    print(f"callgrind's dumps: {dumps}")


if __name__ == "__main__":
    main()
