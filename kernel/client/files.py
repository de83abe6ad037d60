"""``kernel skills …`` and ``kernel workspace …``: seed 000's verbs for skills and the
workspace, talking to the running sidecar (``/skills``, ``/workspace/*``)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, urlencode

from kernel.client.http import Sidecar
from kernel.client.verbs import clip, print_json, table, verb
from kernel.core.clock import shown
from kernel.core.i18n import t


def register(sub: Any) -> None:
    skills = sub.add_parser("skills", help="list/create/enable/disable/delete skills")
    verbs = skills.add_subparsers(dest="verb", required=True)
    verb(verbs, "list", skills_list, "list skills (usable or not, and why)")
    p = verb(verbs, "create", skills_create, "create skills/<name>/SKILL.md")
    p.add_argument("name")
    p.add_argument("--description", required=True, help="one line, shown to the model")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--file", help='the instructions from a file ("-": stdin)')
    source.add_argument("--content", help="the instructions as text")
    p.add_argument("--disabled", action="store_true", help="create it switched off")
    for name, handler, text in (
        ("enable", skills_enable, "switch a skill on"),
        ("disable", skills_disable, "switch a skill off (kept on disk)"),
        ("delete", skills_delete, "delete a skill and its folder"),
    ):
        verb(verbs, name, handler, text).add_argument("name")

    ws = sub.add_parser("workspace", help="files of general.default_workspace (running Kernel)")
    verbs = ws.add_subparsers(dest="verb", required=True)
    p = verb(verbs, "ls", workspace_ls, "list files and folders")
    p.add_argument("path", nargs="?", default="", help="a folder (default: the workspace)")
    p.add_argument("--limit", type=int, default=1000)
    p = verb(verbs, "cat", workspace_cat, "print a file")
    p.add_argument("path")
    p = verb(verbs, "put", workspace_put, "write a local file into the workspace")
    p.add_argument("local", help='a local file ("-": stdin, then give the remote path)')
    p.add_argument("remote", nargs="?", help="path in the workspace (default: the file's name)")
    p = verb(verbs, "rm", workspace_rm, "delete files or empty folders")
    p.add_argument("paths", nargs="+", metavar="path")
    p = verb(verbs, "export", workspace_export, "save the workspace as a zip")
    p.add_argument("file", nargs="?", help='where to save it ("-": stdout)')
    p = verb(verbs, "import", workspace_import, "unpack a zip into the workspace (all or nothing)")
    p.add_argument("file", help='the zip ("-": stdin)')


def _yes(value: bool) -> str:
    return t("client.yes") if value else t("client.no")


def _binary(out: IO[str]) -> IO[bytes]:
    return getattr(out, "buffer", sys.stdout.buffer)


def _read_local(name: str) -> bytes:
    return sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()


def _remote(path: str) -> str:
    """A workspace path in a URL, as given: "." and ".." segments are escaped so that
    the HTTP client does not resolve them away (the sidecar judges them and says why)."""
    return "/".join(
        seg.replace(".", "%2E") if seg in (".", "..") else quote(seg, safe="")
        for seg in path.split("/")
    )


# ---------------------------------------------------------------------- skills


def skills_list(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("GET", "/skills")
    if args.json:
        return print_json(data, out)
    rows = [
        [
            s["name"],
            _yes(s["enabled"]),
            clip(f"! {s['problem']}" if s["problem"] else s["description"]),
        ]
        for s in data["skills"]
    ]
    if not rows:
        out.write(t("client.no_skills") + "\n")
        return 0
    keys = ("skill", "enabled", "description")
    table([t(f"client.col.{k}") for k in keys], rows, out)
    return 0


def skills_create(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    content = args.content
    if args.file is not None:
        content = _read_local(args.file).decode("utf-8")
    body = {
        "name": args.name,
        "description": args.description,
        "content": content,
        "enabled": not args.disabled,
    }
    data = sidecar.call("POST", "/skills", body)
    if args.json:
        return print_json(data, out)
    out.write(t("client.skill_created", name=data["name"], enabled=_yes(data["enabled"])) + "\n")
    return 0


def _toggle(sidecar: Sidecar, args: argparse.Namespace, out: IO[str], verb: str) -> int:
    data = sidecar.call("PUT", f"/skills/{quote(args.name, safe='')}/{verb}")
    if args.json:
        return print_json(data, out)
    out.write(t(f"client.skill_{verb}d", name=data["name"]) + "\n")
    return 0


def skills_enable(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    return _toggle(sidecar, args, out, "enable")


def skills_disable(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    return _toggle(sidecar, args, out, "disable")


def skills_delete(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.call("DELETE", f"/skills/{quote(args.name, safe='')}")
    if args.json:
        return print_json(data, out)
    out.write(t("client.skill_deleted", name=args.name) + "\n")
    return 0


# ---------------------------------------------------------------------- workspace


def workspace_ls(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    query = {"limit": args.limit} | ({"path": args.path} if args.path else {})
    data = sidecar.call("GET", "/workspace/files?" + urlencode(query))
    if args.json:
        return print_json(data, out)
    zone = sidecar.zone()
    rows = [
        [
            e["path"] + ("/" if e["type"] == "dir" else ""),
            "-" if e["type"] == "dir" else e["size"],
            shown(e["modified"], zone),
        ]
        for e in data["entries"]
    ]
    table([t(f"client.col.{k}") for k in ("path", "size", "modified")], rows, out)
    if data["truncated"]:
        out.write(t("client.truncated", limit=args.limit) + "\n")
    return 0


def workspace_cat(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    out.flush()
    sink = _binary(out)
    sidecar.download(f"/workspace/files/{_remote(args.path)}", sink)
    sink.flush()
    return 0


def workspace_put(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    if args.local == "-" and not args.remote:
        out.write(t("client.put_needs_remote") + "\n")
        return 2
    remote = args.remote or Path(args.local).name
    data = _read_local(args.local)
    entry = sidecar.send(
        "PUT", f"/workspace/files/{_remote(remote)}", data, "application/octet-stream"
    )
    if args.json:
        return print_json(entry, out)
    out.write(t("client.ws_written", path=entry["path"], size=entry["size"]) + "\n")
    return 0


def workspace_rm(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    results = []
    for path in args.paths:
        results.append(sidecar.call("DELETE", f"/workspace/files/{_remote(path)}"))
        if not args.json:
            out.write(t("client.ws_deleted", path=path) + "\n")
    return print_json(results, out) if args.json else 0


def workspace_export(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    if args.file == "-":
        out.flush()
        sink = _binary(out)
        sidecar.download("/workspace/export", sink)
        sink.flush()
        return 0
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    target = Path(args.file or f"workspace-{stamp}.zip")
    partial = target.with_name(target.name + ".part")
    try:
        with partial.open("wb") as sink:
            size = sidecar.download("/workspace/export", sink)
        partial.replace(target)  # never a half-written zip under the final name
    finally:
        partial.unlink(missing_ok=True)
    if args.json:
        return print_json({"file": str(target), "size": size}, out)
    out.write(t("client.ws_exported", file=target, size=size) + "\n")
    return 0


def workspace_import(sidecar: Sidecar, args: argparse.Namespace, out: IO[str]) -> int:
    data = sidecar.send("POST", "/workspace/import", _read_local(args.file), "application/zip")
    if args.json:
        return print_json(data, out)
    out.write(t("client.ws_imported", count=data["count"]) + "\n")
    for path in data["imported"]:
        out.write(f"  {path}\n")
    return 0
