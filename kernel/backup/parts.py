"""What a backup holds besides the database, and where each part lives and goes back:

- the data directory's ``runtime.toml`` and ``audit.anchor`` (``data/…``);
- beside config.toml: ``SOUL.md``, the configured prompt layers and the folders
  ``personas``, ``projects``, ``agents``, ``prompts`` and ``skills`` (``config/…``);
- the workspace index (``index/workspace.json``): each file of the owner's workspace
  (``general.default_workspace``) with its size and time, not its content;
- only when asked (``--with-secrets``): config.toml, ``kernel.env`` beside it, the
  audit key and the sidecar's key.

Symbolic links are left out (what they point to is not the owner's data here), and so
is anything outside config.toml's folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kernel.audit.anchor import ANCHOR_FILE
from kernel.audit.key import key_path
from kernel.backup.format import CONFIG, DATA, INDEX
from kernel.config import Config
from kernel.config.model import RUNTIME_FILE
from kernel.config.prompts import layer_paths
from kernel.config.sidecar_key import key_path as sidecar_key_path
from kernel.profiles import FOLDERS

# Beside config.toml: the profiles' folders, the prompt files (kernel/agent/prompt_files.py)
# and the skills (kernel/agent/agent.py SKILLS_FOLDER).
OWN_FOLDERS = (*FOLDERS.values(), "prompts", "skills")
ENV_FILE = "kernel.env"  # deploy/kernel.service's EnvironmentFile, beside config.toml
INDEX_MAX_FILES = 100_000
# The data directory's files that belong with the database: a restore moves the current
# ones aside even when the archive has none (an anchor ahead of the restored record).
DATA_FILES = (RUNTIME_FILE, ANCHOR_FILE)


@dataclass(frozen=True, slots=True)
class Source:
    path: Path  # where it is now
    name: str  # its name in the archive
    secret: bool = False


def sources(config: Config, with_secrets: bool) -> list[Source]:
    """Every file to put in the archive besides the database, in a stable order."""
    data, base = config.data_dir, config.base_dir
    found = [Source(data / name, DATA + name) for name in DATA_FILES]
    found += _beside(base, [config.general.soul, *layer_paths(config.prompts, base)])
    for folder in OWN_FOLDERS:
        found += [Source(p, CONFIG + p.relative_to(base).as_posix()) for p in _files(base / folder)]
    if with_secrets:
        found += _beside(base, [config.path, base / ENV_FILE, key_path(base)], secret=True)
        gateway = sidecar_key_path(data)
        found.append(Source(gateway, DATA + gateway.name, secret=True))
    unique: dict[str, Source] = {}
    for source in found:
        if source.path.is_file() and not source.path.is_symlink():
            unique.setdefault(source.name, source)
    return list(unique.values())


def destination(config: Config, name: str) -> Path | None:
    """Where a part named ``name`` goes back (None: it is not put anywhere)."""
    for prefix, root in ((DATA, config.data_dir), (CONFIG, config.base_dir)):
        if name.startswith(prefix):
            return root / name.removeprefix(prefix)
    return None


def _beside(base: Path, paths: list[Path], *, secret: bool = False) -> list[Source]:
    out = []
    for path in paths:
        name = path.name if path.parent == base else None
        if name is None:
            try:
                name = path.relative_to(base).as_posix()
            except ValueError:
                continue  # outside config.toml's folder
        out.append(Source(path, CONFIG + (path.name if secret else name), secret))
    return out


def _files(folder: Path) -> Iterator[Path]:
    if not folder.is_dir() or folder.is_symlink():
        return
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            yield Path(root) / name


def workspace_index(config: Config) -> tuple[str, bytes]:
    """The workspace index part: JSON of each file's path, size and modification time
    (hidden folders skipped, at most ``INDEX_MAX_FILES``)."""
    root = config.general.default_workspace
    entries: list[dict[str, object]] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if len(entries) >= INDEX_MAX_FILES:
                break
            path = Path(folder) / name
            try:
                stat = path.lstat()
            except OSError:
                continue
            rel = path.relative_to(root).as_posix()
            entries.append({"path": rel, "size": stat.st_size, "mtime": int(stat.st_mtime)})
    body = {"root": str(root), "files": entries, "complete": len(entries) < INDEX_MAX_FILES}
    return INDEX, json.dumps(body, ensure_ascii=False).encode("utf-8")
