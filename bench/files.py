"""Skills and workspace files: what they add per turn, and what the file routes cost.

Per turn: every turn builds the skills summary layer (``SkillLibrary.summary``: list the
folder, read and parse every SKILL.md, in a worker thread) and resolves ``/skill/<name>``
words (``SkillLibrary.invoked``: no disk work when the message names no skill, else the
same scan). Timed with 0, 10 and 100 skills of ~2 KB each.

Workspace (through the same ``Workspace`` / ``Archives`` objects the sidecar uses, so the
figures leave out HTTP): listing a tree of N files in folders of 50, writing one 4 KiB
file (checked path, O_NOFOLLOW walk, temporary file, fsync, rename), reading it back, and
a zip export then an import of the whole tree (staged, checked, committed with backups).

    uv run python bench/files.py [--files 1000] [--repeat 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from kernel.skills import SkillLibrary
from kernel.workspace import Workspace
from kernel.workspace.archive import Archives

BODY = ("Follow these steps carefully. " * 60).strip()


def make_skills(folder: Path, count: int) -> None:
    for i in range(count):
        path = folder / f"skill-{i:03d}" / "SKILL.md"
        path.parent.mkdir(parents=True)
        path.write_text(f"---\nname: skill-{i:03d}\ndescription: does task {i}\n---\n{BODY}\n")


def make_tree(root: Path, count: int) -> None:
    for i in range(count):
        path = root / f"dir-{i // 50:03d}" / f"file-{i:05d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes([65 + i % 26]) * 4096)


async def timed(fn: Callable[[], Awaitable[object]], repeat: int) -> tuple[float, float]:
    """(median, p95) in milliseconds after 5 untimed calls."""
    for _ in range(5):
        await fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        await fn()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def row(name: str, figures: tuple[float, float]) -> None:
    print(f"| {name} | {figures[0]:.3f} | {figures[1]:.3f} |")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    print("| operation | median ms | p95 ms |\n|---|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for count in (0, 10, 100):
            folder = base / f"skills-{count}"
            folder.mkdir()
            make_skills(folder, count)
            library = SkillLibrary(folder)
            row(f"skills summary, {count} skills", await timed(library.summary, args.repeat))
            row(
                f"no /skill/ in the message, {count} skills",
                await timed(lambda lib=library: lib.invoked("hello there"), args.repeat),
            )
            if count:
                text = "please /skill/skill-007 now"
                row(
                    f"one /skill/ in the message, {count} skills",
                    await timed(lambda lib=library, s=text: lib.invoked(s), args.repeat),
                )

        root = base / "ws"
        root.mkdir()
        make_tree(root, args.files)
        workspace = Workspace(root)
        archives = Archives(
            workspace, base / "staging", max_bytes=1 << 30, max_files=args.files * 2
        )
        few = max(args.repeat // 10, 5)
        row(
            f"list {args.files} files",
            await timed(lambda: workspace.listing("", args.files * 2), few),
        )
        data = b"x" * 4096
        row(
            "write one 4 KiB file",
            await timed(lambda: workspace.write("new/a.txt", data), args.repeat),
        )
        row("read one 4 KiB file", await timed(lambda: workspace.read("new/a.txt"), args.repeat))

        async def export() -> None:
            (await archives.export()).unlink()

        row(f"export {args.files} files (zip)", await timed(export, 5))
        zipped = await archives.export()
        payload = zipped.read_bytes()
        zipped.unlink()
        row(
            f"import {args.files} files (zip, {len(payload) // 1024} KiB)",
            await timed(lambda: archives.import_zip(payload), 5),
        )


if __name__ == "__main__":
    asyncio.run(main())
