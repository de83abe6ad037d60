"""Your data outlives the machine (issue 40): backups, restore, export and import.

Nothing here is imported at start-up unless it is used: ``kernel export``/``kernel
import`` and the console's download import :mod:`kernel.backup.export` and
:mod:`kernel.backup.importer` when they run; the daily backup's loop is
:mod:`kernel.backup.schedule`.
"""
