"""``view``, ``edit`` and ``find`` (seed 000's explicit tools) over the owner's workspace.

Every path goes through :class:`kernel.workspace.Workspace` as the ``/workspace`` routes
use it: the same text and on-disk checks (no way out of the root, no link followed,
config.toml, the data directory and Kernel's code never read or written) and, for an
edit, the same lock and atomic replace. A refusal is the workspace's own
``WorkspaceError`` (``path_denied``, ``not_found`` …); a file that is no UTF-8 text, or a
range beyond a file's end, is ``tool_invoke_failed`` in words naming the fix.

Public API: :func:`view`, :func:`edit`, :func:`find`.
"""

from __future__ import annotations

from typing import Any, BinaryIO

from kernel.core.errors import WorkspaceError
from kernel.core.i18n import t
from kernel.gateway.tool_failure import ToolFailed
from kernel.workspace import Workspace
from kernel.workspace.files import Entry

DEFAULT_LINES = 200  # a view without a range shows the file's first lines
MAX_MATCHES = 200  # seed 000: find returns at most 200 matching lines
MAX_FILES = 2000  # files one find reads
MAX_FILE_BYTES = 2 * 1024 * 1024  # larger files are left out of a find


def _failed(message: str, **details: Any) -> Exception:
    return ToolFailed("tool_invoke_failed", message, **details)


def _text(data: bytes, path: str) -> str:
    if b"\0" in data:
        raise _failed(t("gw.tool_not_text", path=path), path=path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _failed(t("gw.tool_not_text", path=path), path=path) from None


def _lines(text: str) -> tuple[list[str], bool]:
    """The lines and whether the text ended with a newline."""
    if not text:
        return [], False
    lines = text.split("\n")
    ended = lines[-1] == ""
    return (lines[:-1] if ended else lines), ended


async def view(
    workspace: Workspace, path: str, start: int | None, end: int | None
) -> dict[str, Any]:
    """Lines ``start``-``end`` (1-based, inclusive), each numbered."""
    text = _text(await workspace.read(path), path)
    lines, _ = _lines(text)
    total = len(lines)
    first = start or 1
    last = end or (first if start is not None and end is None else first + DEFAULT_LINES - 1)
    if total and first > total:
        raise _failed(t("gw.tool_beyond_end", path=path, total=total, start=first), path=path)
    last = min(last, total)
    chosen = lines[first - 1 : last]
    numbered = "\n".join(f"{first + i}: {line}" for i, line in enumerate(chosen))
    return {
        "ok": True,
        "path": path,
        "start": first,
        "end": last,
        "total_lines": total,
        "content": "\n".join(chosen),
        "text": f"view {path} [{first}-{last}] ({total})\n{numbered}",
    }


async def edit(
    workspace: Workspace, path: str, start: int, end: int, content: str
) -> dict[str, Any]:
    """Lines ``start``-``end`` replaced by ``content``'s lines, under the workspace's lock
    (read and replaced in one hold: no write made meanwhile is lost)."""
    parts = workspace.check(path)
    replacement, _ = _lines(content)

    def change() -> dict[str, Any]:
        old = workspace.read_now(parts)
        lines, ended = _lines(_text(old or b"", path))
        total = len(lines)
        if total and end > total:
            raise _failed(t("gw.tool_beyond_end", path=path, total=total, start=end), path=path)
        new = replacement if not total else [*lines[: start - 1], *replacement, *lines[end:]]
        data = "\n".join(new) + ("\n" if new and (ended or not total) else "")
        encoded = data.encode("utf-8")

        def write(fh: BinaryIO) -> None:
            fh.write(encoded)

        workspace.commit([(parts, write)])
        replaced = end - start + 1 if total else 0
        return {
            "ok": True,
            "path": path,
            "start": start,
            "end": end,
            "replaced_lines": replaced,
            "inserted_lines": len(replacement),
            "total_lines": len(new),
            "text": t("gw.tool_edited", path=path, start=start, end=end, count=replaced),
        }

    return await workspace.locked(change)


async def find(workspace: Workspace, path: str, pattern: str, ignore_case: bool) -> dict[str, Any]:
    """Lines holding ``pattern`` literally, as ``path:line: text``."""
    files = await _files(workspace, path)
    needle = pattern.casefold() if ignore_case else pattern
    matches: list[dict[str, Any]] = []
    truncated = False
    for entry in files:
        if entry.size > MAX_FILE_BYTES:
            continue
        try:
            data = await workspace.read(entry.path)
        except WorkspaceError:  # removed or swapped meanwhile: left out
            continue
        if b"\0" in data:
            continue
        text = data.decode("utf-8", "replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if needle in (line.casefold() if ignore_case else line):
                if len(matches) >= MAX_MATCHES:
                    truncated = True
                    break
                matches.append({"path": entry.path, "line": number, "text": line[:500]})
        if truncated:
            break
    shown = [f"{m['path']}:{m['line']}: {m['text']}" for m in matches]
    head = t("gw.tool_found", count=len(matches), pattern=pattern[:100])
    return {
        "ok": True,
        "path": path,
        "pattern": pattern,
        "matches": matches,
        "truncated": truncated,
        "text": "\n".join([head, *shown]),
    }


async def _files(workspace: Workspace, path: str) -> list[Entry]:
    """The file ``path``, or the files under the folder ``path`` ("" the root)."""
    if path:
        try:
            opened = await workspace.open(path)
        except WorkspaceError as exc:
            if exc.code != "path_is_directory":
                raise
        else:
            opened.close()
            return [opened.entry]
    entries, _ = await workspace.listing(path, limit=MAX_FILES)
    return [e for e in entries if e.kind == "file"]
