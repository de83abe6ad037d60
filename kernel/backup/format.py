"""The archive's layout, shared by the writer (archive.py) and the reader (reader.py).

An archive is a 512-byte header, one line of JSON padded with spaces (what it is, when,
which Kernel and schema, how it is encrypted, the SHA-256 of everything after the
header), then the body: a tar stream (sealed in chunks when encrypted, crypto.py) whose
members are the parts and, last, ``manifest.json`` with each part's size and SHA-256.
Any byte changed after the header changes the body's hash; a changed header no longer
parses or names another hash.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from kernel.core.i18n import t

FORMAT = "kernel-backup"
VERSION = 1
HEADER_BYTES = 512
SUFFIX = ".kbackup"
MANIFEST = "manifest.json"
DATABASE = "db/kernel.db"
# Where a part goes back on restore: the data directory, or config.toml's folder.
DATA, CONFIG = "data/", "config/"
INDEX = "index/workspace.json"
BLOCK = 1 << 20


class BackupError(Exception):
    """A backup or restore refused or failed, in the owner's words (one line that names
    the problem and the fix); nothing of the owner's data was changed."""

    def __init__(self, key: str, **values: Any) -> None:
        super().__init__(t(key, **values))
        self.key = key


@dataclass(frozen=True, slots=True)
class Part:
    name: str  # its path in the archive: db/…, data/…, config/…, index/…
    size: int
    sha256: str
    secret: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, "sha256": self.sha256, "secret": self.secret}


@dataclass(slots=True)
class Manifest:
    kernel: str
    schema: int
    created_at: str
    label: str
    with_secrets: bool
    parts: list[Part] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "kernel": self.kernel,
            "schema": self.schema,
            "created_at": self.created_at,
            "label": self.label,
            "with_secrets": self.with_secrets,
            "counts": self.counts,
            "parts": [p.as_json() for p in self.parts],
        }

    @classmethod
    def from_json(cls, data: Any) -> Manifest:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("not a manifest")
        parts = [
            Part(str(p["name"]), int(p["size"]), str(p["sha256"]), bool(p.get("secret")))
            for p in data["parts"]
        ]
        counts = {str(k): int(v) for k, v in dict(data.get("counts") or {}).items()}
        return cls(
            str(data["kernel"]),
            int(data["schema"]),
            str(data["created_at"]),
            str(data.get("label", "")),
            bool(data.get("with_secrets")),
            parts,
            counts,
        )


def header_bytes(fields: dict[str, Any]) -> bytes:
    text = json.dumps(fields, separators=(",", ":"), sort_keys=True).encode("ascii")
    if len(text) >= HEADER_BYTES:
        raise ValueError("header too long")
    return text + b" " * (HEADER_BYTES - 1 - len(text)) + b"\n"


def parse_header(raw: bytes) -> dict[str, Any] | None:
    """The header's fields, or None when ``raw`` is not a Kernel backup's header."""
    if len(raw) != HEADER_BYTES or not raw.endswith(b"\n"):
        return None
    try:
        fields = json.loads(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(fields, dict) or fields.get("format") != FORMAT:
        return None
    return fields


class HashingWriter:
    """Writes through to ``out``, counting and hashing what passes."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._out.write(data)
        self.hash.update(data)
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        self._out.flush()

    def close(self) -> None:
        pass


class HashingReader:
    """Reads from ``source``, counting and hashing what passes."""

    def __init__(self, source: BinaryIO) -> None:
        self._source = source
        self.hash = hashlib.sha256()
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        data = self._source.read(size)
        self.hash.update(data)
        self.size += len(data)
        return data

    def drain(self) -> None:
        while self.read(BLOCK):
            pass
