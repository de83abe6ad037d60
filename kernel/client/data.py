"""``kernel export [--out DIR]`` and ``kernel import FILE.jsonl…`` (issue 40): the owner's
data in open formats, and Kernel's own JSON Lines read back.

Like ``kernel audit``, both open kernel.db themselves (config.toml's [general] names the
data directory; ``--db`` names the file instead), never through the sidecar: an export
works with Kernel stopped, and an import prepares a new machine's database before Kernel
first starts there. The work is in :mod:`kernel.backup.export` and
:mod:`kernel.backup.importer`, imported when a verb runs.

Exit codes: 0 done, 1 an import left some lines out (counted and named), 2 nothing could
be done (in words, with the fix).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from zoneinfo import ZoneInfo

from kernel.config.loader import general_of
from kernel.core.errors import ConfigError
from kernel.core.i18n import t

EXIT_PARTIAL = 1
EXIT_REFUSED = 2


def register(sub: Any) -> None:
    """``kernel export`` and ``kernel import`` among ``kernel``'s subcommands."""
    export = sub.add_parser(
        "export", help="write memories, sessions, jobs and usage in open formats (reads kernel.db)"
    )
    export.add_argument(
        "--out", type=Path, help="a new or empty folder (default: ./kernel-export-<time>)"
    )
    export.add_argument("--db", type=Path, help="the database file (default: from config.toml)")
    export.set_defaults(data=export_command)
    imported = sub.add_parser(
        "import", help="read back an export's JSON Lines (memories, sessions, jobs); idempotent"
    )
    imported.add_argument("files", nargs="+", type=Path, metavar="FILE.jsonl")
    imported.add_argument("--db", type=Path, help="the database file (default: from config.toml)")
    imported.set_defaults(data=import_command)


def run(args: argparse.Namespace, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        code: int = args.data(args, out, err)
    except ConfigError as exc:
        print(f"kernel: {exc}", file=err)
        return EXIT_REFUSED
    return code


def _where(db: Path | None) -> tuple[Path, ZoneInfo]:
    """The database and the owner's time zone (UTC when ``--db`` is given and config.toml
    cannot be read)."""
    try:
        general = general_of()
    except ConfigError:
        if db is None:
            raise
        return db, ZoneInfo("UTC")
    return db or general.data_dir / "kernel.db", ZoneInfo(general.timezone)


def export_command(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from kernel.backup.export import ExportError, export_folder

    db, tz = _where(args.db)
    now = datetime.now(UTC)
    folder = args.out or Path(f"kernel-export-{now.astimezone(tz):%Y%m%d-%H%M%S}")
    try:
        counts = export_folder(db, folder, tz, now)
    except ExportError as exc:
        print(f"kernel: {exc}", file=err)
        return EXIT_REFUSED
    out.write(t("export.done", path=folder, **counts.as_json()) + "\n")
    return 0


def import_command(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from kernel.backup.importer import ImportRefused, import_file

    db, _ = _where(args.db)
    code = 0
    added = False
    for source in args.files:
        try:
            counts = import_file(db, source)
        except ImportRefused as exc:
            print(f"kernel: {exc}", file=err)
            return EXIT_REFUSED
        out.write(t("import.done", **counts.as_json()) + "\n")
        added = added or bool(counts.memories or counts.jobs)
        if counts.refused:
            print(t("import.refused", refused=counts.refused, line=counts.first_refused), file=err)
            code = EXIT_PARTIAL
    if added:
        out.write(t("import.restart") + "\n")
    return code
