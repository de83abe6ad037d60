"""What every ``kernel`` client verb shares: its parser entry (with ``--json``), the
handler type, the exit codes, and the output helpers (aligned tables, the sidecar's
JSON, one-line clips).
"""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from collections.abc import Callable, Sequence
from typing import IO, Any

from kernel.client.http import Sidecar

EXIT_REFUSED = 1
EXIT_UNREACHABLE = 3

Handler = Callable[[Sidecar, argparse.Namespace, IO[str]], int]


def verb(verbs: Any, name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = verbs.add_parser(name, help=help_text)
    parser.add_argument("--json", action="store_true", help="print the sidecar's JSON")
    parser.set_defaults(client=handler)
    return parser


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: IO[str]) -> None:
    cells = [[str(c) for c in row] for row in [headers, *rows]]
    widths = [max(_width(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        padded = [c + " " * (w - _width(c)) for c, w in zip(row, widths, strict=True)]
        out.write("  ".join(padded).rstrip() + "\n")


def print_json(data: Any, out: IO[str]) -> int:
    out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    return 0


def clip(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def stdin_if_dash(value: str) -> str:
    return sys.stdin.readline().rstrip("\n") if value == "-" else value
