"""``kernel backup [--out PATH] [--passphrase-file F | --key-file F] [--with-secrets]
[--list]`` and ``kernel restore ARCHIVE [--passphrase-file F | --key-file F]``.

Registering the verbs imports nothing but argparse; running one imports the rest.
Each ends with one line: what was written or restored, or why not (exit 1; 2 for a
file given that cannot be read).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import IO, Any

from kernel.config import Config

EXIT_FAILED = 1
EXIT_USAGE = 2


def register(sub: Any) -> None:
    backup = sub.add_parser(
        "backup", help="write a backup archive of the data (safe while Kernel runs)"
    )
    backup.add_argument("--out", type=Path, help="the archive file or folder (data/backups)")
    backup.add_argument(
        "--with-secrets",
        action="store_true",
        help="also config.toml, kernel.env and the audit and sidecar keys",
    )
    backup.add_argument(
        "--list", action="store_true", help="list the backups and pre-upgrade snapshots"
    )
    _protection_arguments(backup)
    backup.set_defaults(backup_verb="backup")
    restore = sub.add_parser(
        "restore", help="verify a backup archive, then put it in place (Kernel stopped)"
    )
    restore.add_argument("archive", type=Path, help="the .kbackup file")
    _protection_arguments(restore)
    restore.set_defaults(backup_verb="restore")


def _protection_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--passphrase-file", type=Path, help="encrypt/decrypt with the passphrase in this file"
    )
    group.add_argument("--key-file", type=Path, help="encrypt/decrypt with this key file")


def run(args: argparse.Namespace, config: Config, out: IO[str] | None = None) -> int:
    from kernel.backup.format import BackupError

    out = out or sys.stdout
    main = threading.current_thread() is threading.main_thread()
    # Stopped (systemd, kill): unwind, so that no partial archive or copy is left.
    before = signal.signal(signal.SIGTERM, _stopped) if main else None
    try:
        if args.backup_verb == "restore":
            return _restore(args, config, out)
        if args.list:
            return _list(args, config, out)
        return _backup(args, config, out)
    except BackupError as exc:
        print(f"kernel: {exc}", file=sys.stderr)
        unreadable = exc.key.startswith("backup.key_") or exc.key == "backup.unreadable"
        return EXIT_USAGE if unreadable else EXIT_FAILED
    finally:
        if main:
            signal.signal(signal.SIGTERM, before)


def _stopped(signum: int, frame: object) -> None:
    sys.exit(128 + signum)


def _protection(args: argparse.Namespace) -> Any:
    from kernel.backup.crypto import Protection
    from kernel.backup.format import BackupError

    path = args.passphrase_file or args.key_file
    if path is None:
        return None
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BackupError("backup.key_unreadable", path=path, detail=exc.strerror or "") from None
    if args.passphrase_file is not None:
        data = data.rstrip(b"\r\n")  # the line a text editor ends the file with
    if not data:
        raise BackupError("backup.key_empty", path=path)
    kind = "passphrase" if args.passphrase_file is not None else "key"
    return Protection(kind, data)


def _backup(args: argparse.Namespace, config: Config, out: IO[str]) -> int:
    from kernel.audit.words import size_words
    from kernel.backup.archive import create_backup
    from kernel.core.i18n import t

    protection = _protection(args)
    made = create_backup(config, args.out, protection=protection, with_secrets=args.with_secrets)
    manifest = made.manifest
    line = t(
        "backup.done",
        path=made.path,
        size=size_words(made.size),
        schema=manifest.schema,
        messages=manifest.counts.get("messages", 0),
        memories=manifest.counts.get("memories", 0),
        parts=len(manifest.parts),
        secrets=t("backup.with_secrets") if manifest.with_secrets else "",
        encrypted=t("backup.encrypted") if protection is not None else "",
    )
    out.write(line + "\n")
    return 0


def _list(args: argparse.Namespace, config: Config, out: IO[str]) -> int:
    from kernel.audit.words import size_words
    from kernel.backup.reader import list_backups
    from kernel.core.i18n import t

    folder = args.out if args.out is not None and args.out.is_dir() else config.backups_dir
    found = list_backups(folder)
    if not found:
        out.write(t("backup.list_none", path=folder) + "\n")
        return 0
    out.write(t("backup.list_header", path=folder) + "\n")
    for item in found:
        when = item.modified.strftime("%Y-%m-%d %H:%M")
        if item.kind == "snapshot":
            what = t("backup.list_snapshot")
        elif item.header is None:
            what = "?"
        else:
            header = item.header
            what = f"v{header.get('schema')} {header.get('label', '')}"
            if header.get("encryption"):
                what += " · " + t("backup.list_locked")
        out.write(f"  {when}  {size_words(item.size):>9}  {item.path.name}  {what}\n")
    return 0


def _restore(args: argparse.Namespace, config: Config, out: IO[str]) -> int:
    from kernel.backup.restore import restore_backup

    done = restore_backup(config, args.archive, _protection(args))
    out.write(done.describe() + "\n")
    return 0
