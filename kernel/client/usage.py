"""``kernel usage``: what model calls used and cost, from the running Kernel's ledger.

Without filters it prints the summary /usage shows (``GET /usage/summary``); with
``--since``, ``--by``, ``--entries`` or a filter it asks ``GET /usage`` and prints the
total, the groups and the newest rows. ``--json`` prints the sidecar's JSON.
"""

from __future__ import annotations

import argparse
from typing import IO, Any
from urllib.parse import urlencode

from kernel.client.http import Sidecar
from kernel.client.verbs import print_json, table
from kernel.commands.usage import cost_text, tokens
from kernel.spend import money
from kernel.store.usage import GROUPS, PURPOSES

# argument → the sidecar's query parameter
FILTERS = (
    ("since", "since"),
    ("until", "until"),
    ("provider", "provider"),
    ("model", "model"),
    ("purpose", "purpose"),
    ("channel", "channel"),
    ("job", "job_id"),
    ("session", "session_id"),
    ("by", "group_by"),
    ("entries", "limit"),
)


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "usage", help="what model calls used and cost (running Kernel)"
    )
    p.add_argument("--json", action="store_true", help="print the sidecar's JSON")
    p.add_argument("--since", help="a date (YYYY-MM-DD, Kernel's time zone) or ISO date-time")
    p.add_argument("--until", help="exclusive; a date includes that whole day")
    p.add_argument("--by", choices=GROUPS, help="group the calls")
    p.add_argument("--provider")
    p.add_argument("--model")
    p.add_argument("--purpose", choices=PURPOSES)
    p.add_argument("--channel")
    p.add_argument("--job", help="a cron job's id")
    p.add_argument("--session", type=int, help="a session (the N of chat-N)")
    p.add_argument("--entries", type=int, metavar="N", help="also list the newest N calls")
    p.set_defaults(client=usage)


def usage(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    query = {
        param: getattr(args, name) for name, param in FILTERS if getattr(args, name) is not None
    }
    if not query:
        if args.json:
            return print_json(sidecar.call("GET", "/usage/summary"), out)
        print_summary(sidecar, out)
        return 0
    data = sidecar.call("GET", "/usage?" + urlencode(query))
    if args.json:
        return print_json(data, out)
    _ledger(data, out)
    return 0


def _cost(total: dict[str, Any], currency: str) -> str:
    return cost_text(total["cost"], total["calls"], total["unpriced_calls"], currency)


def _row(label: str, total: dict[str, Any], currency: str) -> list[str]:
    prompt = total["input_tokens"] + total["cache_read_tokens"] + total["cache_write_tokens"]
    return [
        label,
        str(total["calls"]),
        tokens(total["input_tokens"]),
        tokens(total["cache_read_tokens"]),
        tokens(total["cache_write_tokens"]),
        tokens(total["output_tokens"]),
        f"{round(total['cache_read_tokens'] / prompt * 100) if prompt else 0}%",
        _cost(total, currency),
    ]


HEADERS = ["", "CALLS", "FRESH", "CACHE READ", "CACHE WRITE", "OUTPUT", "CACHED", "COST"]


def print_summary(sidecar: Sidecar, out: IO[str]) -> None:
    """The /usage summary as tables (``kernel usage``; /usage in ``kernel chat`` is the
    shared command's text, as in Telegram)."""
    data = sidecar.call("GET", "/usage/summary")
    currency = data["currency"]
    periods = data["periods"]
    table(["PERIOD", *HEADERS[1:]], [_row(p["period"], p, currency) for p in periods], out)
    days = data["days"]
    out.write(f"\nlast {len(days)} days ({data['sparkline_of']}): {data['sparkline']}\n")
    month = periods[-1]
    for title, key in (("model", "by_model"), ("channel", "by_channel"), ("cron job", "by_job")):
        groups = month[key]
        if groups:
            out.write(f"\nthis month by {title}:\n")
            rows = [_row(g.get("name") or g["key"] or "-", g, currency) for g in groups]
            table([title.upper(), *HEADERS[1:]], rows, out)
    b = data["budget"]
    daily = money(b["daily"], currency) if b["daily"] else "no limit"
    monthly = money(b["monthly"], currency) if b["monthly"] else "no limit"
    raised = f" (raised {money(b['raised_today'], currency)})" if b["raised_today"] else ""
    out.write(
        f"\nbudget: today {money(b['spent_today'], currency)} / {daily}{raised}"
        f" · month {money(b['spent_month'], currency)} / {monthly}\n"
    )


def _ledger(data: dict[str, Any], out: IO[str]) -> None:
    currency = data["currency"]
    if data["groups"]:
        key = str(data["group_by"]).upper()
        rows = [_row(g["key"] or "-", g, currency) for g in data["groups"]]
        table([key, *HEADERS[1:]], [*rows, _row("total", data["total"], currency)], out)
    else:
        table(HEADERS, [_row("total", data["total"], currency)], out)
    if data["entries"]:
        out.write("\n")
        rows = [
            [
                e["at"],
                e["provider"],
                e["model"],
                e["purpose"],
                e["channel"] or "-",
                tokens(e["input_tokens"] + e["cache_read_tokens"] + e["cache_write_tokens"]),
                tokens(e["output_tokens"]),
                "unknown" if e["cost"] is None else money(e["cost"], currency),
            ]
            for e in data["entries"]
        ]
        headers = ["AT", "PROVIDER", "MODEL", "PURPOSE", "CHANNEL", "INPUT", "OUTPUT", "COST"]
        table(headers, rows, out)
