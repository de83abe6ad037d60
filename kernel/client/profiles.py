"""``kernel personas …`` and ``kernel projects …``: list, show, add, edit and rm the
files beside config.toml through the running sidecar (``/agent/personas``,
``/agent/projects``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from kernel.client.http import Sidecar
from kernel.client.verbs import clip, print_json, table, verb
from kernel.core.i18n import t

KINDS = {"personas": "persona", "projects": "project"}


def register(sub: Any) -> None:
    for plural, kind in KINDS.items():
        group = sub.add_parser(plural, help=f"list/show/add/edit/rm {plural} (running Kernel)")
        verbs = group.add_subparsers(dest="verb", required=True)
        verb(verbs, "list", profiles_list, f"list {plural} (usable or not, and why)").set_defaults(
            plural=plural
        )
        p = verb(verbs, "show", profiles_show, f"show a {kind} with its instructions")
        p.add_argument("name")
        p.set_defaults(plural=plural)
        p = verb(verbs, "add", profiles_add, f"create {plural}/<name>.md")
        p.add_argument("name")
        p.add_argument("--description", required=True, help="one line")
        _fields(p, kind)
        p.set_defaults(plural=plural)
        p = verb(verbs, "edit", profiles_edit, f"change a {kind} (what is not given is kept)")
        p.add_argument("name")
        p.add_argument("--description", help="one line")
        _fields(p, kind)
        p.set_defaults(plural=plural)
        p = verb(verbs, "rm", profiles_rm, f"delete a {kind}'s file")
        p.add_argument("name")
        p.set_defaults(plural=plural)


def _fields(p: argparse.ArgumentParser, kind: str) -> None:
    source = p.add_mutually_exclusive_group()
    source.add_argument("--file", help='the instructions from a file ("-": stdin)')
    source.add_argument("--body", help="the instructions as text")
    if kind == "persona":
        p.add_argument("--tools", help='allow-list, comma-separated ("": none, "*": all)')
        p.add_argument("--model", help='"provider:model" ("": the usual choice)')
        p.add_argument("--reasoning", help="off, low, medium, high or a token budget")
    else:
        p.add_argument("--folder", help='the working folder ("": none)')


def _path(args: argparse.Namespace, name: str | None = None) -> str:
    base = f"/agent/{args.plural}"
    return base if name is None else f"{base}/{quote(name, safe='')}"


def _body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if args.description is not None:
        body["description"] = args.description
    if args.file is not None:
        raw = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
        body["body"] = raw.decode("utf-8")
    elif args.body is not None:
        body["body"] = args.body
    if getattr(args, "tools", None) is not None:
        body["tools"] = [x.strip() for x in args.tools.split(",") if x.strip()]
    if getattr(args, "reasoning", None) is not None:
        level = args.reasoning.strip()
        body["reasoning"] = int(level) if level.isdigit() else level
    for key in ("model", "folder"):
        if getattr(args, key, None) is not None:
            body[key] = getattr(args, key)
    return body


def profiles_list(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("GET", _path(args))
    if args.json:
        return print_json(data, out)
    found = data[args.plural]
    if not found:
        out.write(t(f"client.no_{args.plural}") + "\n")
        return 0
    rows = [
        [p["name"], clip(f"! {p['problem']}" if p["problem"] else p["description"])] for p in found
    ]
    table([t("client.col.skill"), t("client.col.description")], rows, out)
    return 0


def profiles_show(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("GET", _path(args, args.name))
    if args.json:
        return print_json(data, out)
    out.write(render(data))
    return 0


def render(data: dict[str, Any]) -> str:
    """A profile as its front matter would say it, then its problem and instructions."""
    lines = [f"name: {data['name']}", f"description: {data['description']}"]
    if data.get("tools") is not None:
        lines.append(f"tools: {', '.join(data['tools']) or '[]'}")
    for key in ("model", "reasoning", "folder"):
        if data.get(key):
            lines.append(f"{key}: {data[key]}")
    lines.append(f"source: {data['source']}")
    if data.get("problem"):
        lines.append("! " + data["problem"])
    return "\n".join(lines) + "\n\n" + (data.get("body") or "") + "\n"


def profiles_add(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("POST", _path(args), {"name": args.name, **_body(args)})
    if args.json:
        return print_json(data, out)
    out.write(t("client.profile_created", source=data["source"]) + "\n")
    return 0


def profiles_edit(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("PUT", _path(args, args.name), _body(args))
    if args.json:
        return print_json(data, out)
    out.write(t("client.profile_changed", source=data["source"]) + "\n")
    return 0


def profiles_rm(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("DELETE", _path(args, args.name))
    if args.json:
        return print_json(data, out)
    out.write(t("client.profile_deleted", name=args.name) + "\n")
    return 0
