"""The soak of issue 15: the real ``python -m kernel`` against the Telegram and Anthropic
simulators, 300 owner messages one after another, faults drawn from a seeded random
generator (tests/e2e/soak.py: SIGKILL while streaming, during an MCP tool call, at a
random moment, between a processed sendMessage and its lost answer, and between
exchanges; the Bot API refusing connections or answering 502 for 2-8 s mid-reply; 429
storms on sends and edits; getUpdates hanging; lost sendMessage answers). Each message
is counted by the ledger (tests/e2e/harness.py) from what the bot ever showed in the
chat: answered, noticed, lost; re-sends marked with ↻; unmarked duplicates.

Prints exchanges, faults injected by kind, lost, marked re-sends, unmarked duplicates,
the time from an outage's end to the held reply appearing (p50/max) and integrity
failures after kills.

    uv run python bench/soak.py [--exchanges 300] [--seed 15] [--patience 90]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.soak import soak  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=300)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--patience", type=float, default=90.0, help="seconds per message")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kernel-soak-") as folder:
        figures = asyncio.run(
            soak(Path(folder), exchanges=args.exchanges, seed=args.seed, patience=args.patience)
        )
    print(f"seed                 {args.seed}")
    print(figures.report())
    print(f"wall time            {time.monotonic() - started:.0f} s")
    if figures.ledger is not None and (figures.lost or figures.unmarked_duplicates):
        print(f"ledger: {figures.ledger.summary()}")


if __name__ == "__main__":
    main()
