"""The preset personas (seed 001: general, code-reviewer, writer, data-analyst,
approver-helper, knowledge-qa, translator; issue 38, item 6), shipped with Kernel and
installed as ordinary files in ``personas/`` beside config.toml, where the owner edits
them or removes them like any persona of their own.

The texts ship in ``kernel/profiles/presets/<language>/<name>.md`` (the owner's
``general.language`` picks the folder). :func:`install_presets` runs at every start
(``[general] preset_personas``) and keeps a record, ``personas/.presets.json``: for
each preset, the SHA-256 of the text it last wrote, i.e. which version of the preset is
installed. With it, an upgrade that ships new wording:

- installs a preset the folder never had;
- rewrites a preset whose file is still exactly what Kernel wrote (the owner never
  changed it), with the new text;
- leaves a file the owner changed as it is (its text is no longer the one recorded);
- never brings back a preset the owner removed (recorded, but no file): removing a
  preset's file is how it is hidden, and it stays hidden;
- leaves alone a file of the owner's own that has a preset's name and was never
  installed by Kernel.

To have a hidden preset back, delete its entry from ``.presets.json`` (the next start
installs it again), or write a persona of that name.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from kernel.core.fileio import write_atomic

log = logging.getLogger(__name__)

NAMES = (
    "general",
    "code-reviewer",
    "writer",
    "data-analyst",
    "approver-helper",
    "knowledge-qa",
    "translator",
)
RECORD = ".presets.json"  # a dot file: never listed as a persona
SHIPPED = Path(__file__).resolve().parent / "presets"


@dataclass(slots=True)
class Installed:
    """What one run did, by preset name."""

    written: list[str] = field(default_factory=list)  # new here
    updated: list[str] = field(default_factory=list)  # unchanged by the owner: new text
    kept: list[str] = field(default_factory=list)  # changed by the owner: left as is
    hidden: list[str] = field(default_factory=list)  # removed by the owner: not back
    adopted: list[str] = field(default_factory=list)  # there already, as shipped


def shipped(language: str) -> dict[str, str]:
    """The preset texts Kernel ships in ``language`` (Chinese when it has none)."""
    folder = SHIPPED / language if (SHIPPED / language).is_dir() else SHIPPED / "zh"
    return {name: (folder / f"{name}.md").read_text(encoding="utf-8") for name in NAMES}


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_record(path: Path) -> dict[str, str]:
    """Preset name → the digest of the text last installed; {} when unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    presets = data.get("presets") if isinstance(data, dict) else None
    if not isinstance(presets, dict):
        return {}
    return {
        name: entry["sha256"]
        for name, entry in presets.items()
        if isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
    }


def _current(path: Path) -> bytes | None:
    """The file's bytes; None when there is none (a link counts as the owner's file)."""
    if path.is_symlink():
        return b"\0link"  # never the text Kernel wrote: left alone
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def install_presets(folder: Path, texts: dict[str, str]) -> Installed:
    """Install or update ``texts`` (name → file text) in ``folder``, as the module
    docstring says. Blocking: run it in a worker thread. OSError when the folder or
    the record cannot be written."""
    record_path = folder / RECORD
    record = _read_record(record_path)
    done = Installed()
    changed = False
    for name, text in texts.items():
        outcome = _install_one(folder / f"{name}.md", text.encode("utf-8"), record.get(name))
        if outcome is None:
            continue
        getattr(done, outcome).append(name)
        if outcome not in ("kept", "hidden"):
            record[name] = _digest(text.encode("utf-8"))
            changed = True
    if changed:
        body = {"presets": {name: {"sha256": digest} for name, digest in sorted(record.items())}}
        write_atomic(record_path, (json.dumps(body, indent=1) + "\n").encode("utf-8"), mode=0o644)
    return done


def _install_one(path: Path, data: bytes, installed: str | None) -> str | None:
    """Install one preset: what was done (an :class:`Installed` field), None for
    nothing (as installed and current, or the owner's own file of that name)."""
    new = _digest(data)
    current = _current(path)
    if current is None:
        if installed is not None:
            return "hidden"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data, mode=0o644)
        return "written"
    now = _digest(current)
    if installed is None:
        # The same text, from an install whose record was lost: recorded as installed.
        return "adopted" if now == new else None
    if now != installed:
        return "kept"
    if installed == new:
        return None
    write_atomic(path, data, mode=0o644)
    return "updated"


def install_shipped(folder: Path, language: str) -> Installed | None:
    """:func:`install_presets` with the shipped texts; None (logged) when the folder
    cannot be written: Kernel runs on without them."""
    try:
        done = install_presets(folder, shipped(language))
    except OSError as exc:
        log.warning("preset personas not installed: %s", type(exc).__name__)
        return None
    if done.written or done.updated:
        log.info(
            "preset personas: %d installed, %d updated, %d kept as edited, %d hidden",
            len(done.written),
            len(done.updated),
            len(done.kept),
            len(done.hidden),
        )
    return done
