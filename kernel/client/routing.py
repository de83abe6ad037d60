"""``kernel routing decisions|providers``: which model each call of a turn went to and
why (``GET /agent/routing/decisions``), and every provider's health (``GET
/agent/routing/providers``), from the running Kernel. ``--json`` prints the sidecar's
JSON."""

from __future__ import annotations

import argparse
from datetime import tzinfo
from typing import IO, Any
from urllib.parse import urlencode

from kernel.client.http import Sidecar
from kernel.client.verbs import print_json, table, verb
from kernel.commands.usage import tokens
from kernel.core.clock import shown
from kernel.spend import money


def register(sub: Any) -> None:
    routing = sub.add_parser(
        "routing", help="model routing: the decisions log, providers' health (running Kernel)"
    )
    verbs = routing.add_subparsers(dest="verb", required=True)
    p = verb(verbs, "decisions", decisions, "which model each call went to and why, newest first")
    p.add_argument("--session", type=int, help="only this session (the N of chat-N)")
    p.add_argument("--limit", type=int, help="how many (default 50, at most 200)")
    verb(verbs, "providers", providers, "each provider's circuit state, failures and keys")


def decisions(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    query = {
        k: v for k, v in (("session_id", args.session), ("limit", args.limit)) if v is not None
    }
    data = sidecar.call("GET", "/agent/routing/decisions?" + urlencode(query))
    if args.json:
        return print_json(data, out)
    currency = data["currency"]
    zone = sidecar.zone()
    rows = [decision_row(d, currency, zone) for d in data["items"]]
    headers = ["AT", "SESSION", "CHOSEN", "WHY", "FAILOVERS", "LATENCY", "TOKENS", "COST"]
    table(headers, rows, out)
    return 0


def why_text(d: dict[str, Any]) -> str:
    """ "rule:code", "owner", "default (sticky)"."""
    why = f"{d['why']}:{d['rule']}" if d["rule"] else d["why"]
    return why + " (sticky)" if d["sticky"] else why


def failovers_text(d: dict[str, Any]) -> str:
    """Each failed attempt as model→cause, or "-"."""
    failed = [f"{a['model']}→{a['outcome']}" for a in d["attempts"] if a["outcome"] != "ok"]
    return ", ".join(failed) or "-"


def decision_row(d: dict[str, Any], currency: str, zone: tzinfo) -> list[str]:
    prompt = d["input_tokens"] + d["cache_read_tokens"] + d["cache_write_tokens"]
    return [
        shown(d["at"], zone, "%Y-%m-%d %H:%M:%S"),
        "-" if d["session_id"] is None else str(d["session_id"]),
        d["chosen"] or "(none)",
        why_text(d),
        failovers_text(d),
        f"{d['latency_ms'] / 1000:.1f} s",
        f"{tokens(prompt)}→{tokens(d['output_tokens'])}",
        "unknown" if d["cost"] is None else money(d["cost"], currency),
    ]


def providers(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("GET", "/agent/routing/providers")
    if args.json:
        return print_json(data, out)
    rows = [
        [
            p["provider"],
            p["state"],
            str(p["failures"]),
            f"{p['retry_in']:.0f} s" if p["retry_in"] else "-",
            p["last_error"] or "-",
            str(p["keys"]),
        ]
        for p in data["items"]
    ]
    table(["PROVIDER", "STATE", "FAILURES", "RETRY IN", "LAST ERROR", "KEYS"], rows, out)
    return 0
