"""Your data outlives the machine (issue 40): backups, restore, export and import.

Backups: one archive of the database (SQLite's online backup API, consistent while
Kernel runs), runtime.toml, the audit anchor, personas, projects, agents, prompts, skills
and the workspace index, with a manifest of each part's size and SHA-256; optionally
encrypted (crypto.py), secrets only when asked. The daily backup with its rotation is
schedule.py (and rotation.py); ``kernel export``/``kernel import`` and the console's
download are export.py and importer.py.

Public API: :func:`kernel.backup.archive.create_backup` (into ``config.backups_dir``;
its ``Backup``), :class:`kernel.backup.format.BackupError`,
:class:`kernel.backup.crypto.Protection`. Nothing here is imported when Kernel starts:
the ``kernel backup``, ``kernel restore``, ``kernel export`` and ``kernel import`` verbs,
the console's download and the scheduled backups import it when they run.
"""
