"""The command line of one delegation, and the argument rules checked at config load.

Each CLI gets its task where no option can swallow it (verified with claude 2.1.197,
codex-cli 0.169.0 and gemini-cli 0.61.0):

- claude, codex: ``command + args [+ codex's -C <cwd> --output-last-message <file>] +
  ["--", task]``. ``--`` ends the options, so a variadic flag in ``args``
  (``--allowedTools Bash``, ``--add-dir a b``, codex's ``--image``) keeps its values and
  the task stays the prompt; a task that starts with ``-`` is not read as a flag.
- gemini: the task is the value of ``--prompt=<task>`` (a trailing ``-p``/``--prompt`` in
  ``args`` is folded into it): yargs reads ``--prompt=`` whole, after any array option.

What still cannot work is refused at load (:func:`kernel.config.cli.args_problem`, the
configuration's rule): a ``--`` written in ``args`` (Kernel ends the options itself), a
variadic flag with no value at the end of ``args`` (its values would be Kernel's ``--``),
and gemini's ``-p`` anywhere but last.
"""

from __future__ import annotations

from pathlib import Path

from kernel.config.cli import GEMINI_PROMPT, VARIADIC, args_problem

__all__ = ["GEMINI_PROMPT", "VARIADIC", "args_problem", "build_argv", "output_flags"]


def build_argv(
    cli: str, executable: str, args: list[str], task: str, extra: list[str] | None = None
) -> list[str]:
    """``executable + args + extra`` and the task, placed so nothing can swallow it."""
    if cli == "gemini":
        head = args[:-1] if args and args[-1] in GEMINI_PROMPT else args
        return [executable, *head, *(extra or []), f"--prompt={task}"]
    return [executable, *args, *(extra or []), "--", task]


def output_flags(folder: Path, stamp: str, workdir: Path) -> tuple[list[str], Path]:
    """Codex's extra flags: its working root and the file its final answer goes to."""
    last_message = folder / f"{stamp}-codex-last.txt"
    return ["-C", str(workdir), "--output-last-message", str(last_message)], last_message
