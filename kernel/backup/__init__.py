"""Backups of the owner's data (issue 40): one archive of the database (SQLite's online
backup API, consistent while Kernel runs), runtime.toml, the audit anchor, personas,
projects, agents, prompts, skills and the workspace index, with a manifest of each
part's size and SHA-256; optionally encrypted (crypto.py), secrets only when asked.

Public API: :func:`kernel.backup.archive.create_backup` (and ``backups_dir``,
``Backup``), :class:`kernel.backup.format.BackupError`,
:class:`kernel.backup.crypto.Protection`. Nothing here is imported when Kernel starts:
the ``kernel backup`` and ``kernel restore`` verbs and the scheduled backups import it
when they run.
"""
