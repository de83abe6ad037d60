"""``kernel mcp list|add|remove|restart``: the running Kernel's MCP servers (``/mcp/servers``).

``add`` keeps the server in data/runtime.toml and connects it at once; it prints the
server's state after the first attempt. ``${VAR}`` in a header or env value is expanded
from Kernel's environment (so a token need not be typed here). A stdio server runs a
command on Kernel's machine: the sidecar takes it only with its API key.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import quote

from kernel.client.http import TRANSFER_TIMEOUT, Sidecar
from kernel.client.verbs import clip, print_json, table, verb
from kernel.commands import mcp_listing
from kernel.core.errors import ConfigError
from kernel.core.i18n import t


def register(sub: Any) -> None:
    mcp = sub.add_parser("mcp", help="MCP servers: list, add, remove, restart (running Kernel)")
    verbs = mcp.add_subparsers(dest="verb", required=True)
    verb(verbs, "list", mcp_list, "every server: state, tools, where it is defined")
    p = verb(verbs, "add", mcp_add, "add a server (kept in runtime.toml) and connect it")
    p.add_argument("name")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="streamable HTTP: the endpoint")
    where.add_argument("--command", help="stdio: the executable (needs the API key)")
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        dest="args",
        metavar="ARG",
        help="stdio: one argument (repeat; --arg=-v for one starting with -)",
    )
    p.add_argument(
        "--header", action="append", default=[], metavar="NAME=VALUE", help="http: a header"
    )
    p.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="stdio: a variable"
    )
    p.add_argument("--cwd", help="stdio: working directory")
    p.add_argument("--connect-timeout", type=float, help="seconds to connect (default 10)")
    p.add_argument("--timeout", type=float, help="seconds per tool call (default 60)")
    p.add_argument("--disabled", action="store_true", help="keep it, unconnected")
    p = verb(verbs, "remove", mcp_remove, "remove a server added at run time")
    p.add_argument("name")
    p = verb(verbs, "restart", mcp_restart, "reconnect a server")
    p.add_argument("name")


def mcp_list(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("GET", "/mcp/servers")
    if args.json:
        return print_json(data, out)
    rows = [_row(server) for server in data["servers"]]
    headers = ["NAME", "TYPE", "STATE", "TOOLS", "NOT OFFERED", "SOURCE", "LAST ERROR"]
    table(headers, rows, out)
    return 0


def print_servers(sidecar: Sidecar, out: IO[str]) -> None:
    """The /mcp text of remote ``kernel chat``: as Telegram's /mcp shows it."""
    servers = [_Line(**_fields(s)) for s in sidecar.call("GET", "/mcp/servers")["servers"]]
    out.write(mcp_listing(servers).text + "\n")


@dataclass(frozen=True, slots=True)
class _Line:
    name: str
    type: str
    state: str
    tools: int
    last_error: str
    skipped: dict[str, str]


def _fields(server: dict[str, Any]) -> dict[str, Any]:
    return {name: server[name] for name in _Line.__dataclass_fields__}


def _row(server: dict[str, Any]) -> list[str]:
    return [
        server["name"],
        server["type"],
        server["state"],
        str(server["tools"]),
        str(len(server["skipped"])) if server["skipped"] else "-",
        server["source"],
        clip(server["last_error"]) if server["last_error"] else "-",
    ]


def mcp_add(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    body: dict[str, Any] = {"name": args.name}
    if args.url is not None:
        body |= {"type": "http", "url": args.url}
    else:
        body |= {"type": "stdio", "command": args.command, "args": args.args}
    if args.header:
        body["headers"] = _pairs(args.header)
    if args.env:
        body["env"] = _pairs(args.env)
    optional = {
        "cwd": args.cwd,
        "connect_timeout": args.connect_timeout,
        "timeout": args.timeout,
    }
    body |= {key: value for key, value in optional.items() if value is not None}
    if args.disabled:
        body["enabled"] = False
    # The answer comes after the first connect attempt (up to the server's connect_timeout).
    server = sidecar.call("POST", "/mcp/servers", body, timeout=TRANSFER_TIMEOUT)
    return _show(server, args, out)


def mcp_remove(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    path = f"/mcp/servers/{quote(args.name, safe='')}"
    data = sidecar.call("DELETE", path, timeout=TRANSFER_TIMEOUT)
    if args.json:
        return print_json(data, out)
    out.write(t("client.mcp_removed", name=args.name) + "\n")
    return 0


def mcp_restart(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    path = f"/mcp/servers/{quote(args.name, safe='')}/restart"
    server = sidecar.call("POST", path, timeout=TRANSFER_TIMEOUT)
    return _show(server, args, out)


def _show(server: dict[str, Any], args: argparse.Namespace, out: IO[str]) -> int:
    if args.json:
        return print_json(server, out)
    table(
        ["NAME", "TYPE", "STATE", "TOOLS", "NOT OFFERED", "SOURCE", "LAST ERROR"],
        [_row(server)],
        out,
    )
    return 0


def _pairs(values: list[str]) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name:
            raise ConfigError(t("client.bad_pair", pair=value))
        pairs[name] = text
    return pairs
