"""The command line of one delegation, and the argument rules checked at config load.

Each CLI gets its task where no option can swallow it (verified with claude 2.1.197,
codex-cli 0.169.0 and gemini-cli 0.61.0):

- claude, codex: ``command + args [+ codex's -C <cwd> --output-last-message <file>] +
  ["--", task]``. ``--`` ends the options, so a variadic flag in ``args``
  (``--allowedTools Bash``, ``--add-dir a b``, codex's ``--image``) keeps its values and
  the task stays the prompt; a task that starts with ``-`` is not read as a flag.
- gemini: the task is the value of ``--prompt=<task>`` (a trailing ``-p``/``--prompt`` in
  ``args`` is folded into it): yargs reads ``--prompt=`` whole, after any array option.

System instructions (:mod:`kernel.delegate.instructions`): claude gets them as ONE
element ``--append-system-prompt=<text>`` after ``args`` and before ``--`` (with ``=``, a
text that starts with ``-`` is the flag's value, never a flag; a variadic flag in
``args`` stops at it); codex and gemini get them in the task itself, as a leading
``[SYSTEM]\n<text>\n[/SYSTEM]\n\n`` block. No instructions: the argv is as before.

What still cannot work is refused at load (:func:`kernel.config.cli.args_problem`, the
configuration's rule): a ``--`` written in ``args`` (Kernel ends the options itself), a
variadic flag with no value at the end of ``args`` (its values would be Kernel's ``--``),
and gemini's ``-p`` anywhere but last.
"""

from __future__ import annotations

import re
from pathlib import Path

from kernel.config.cli import GEMINI_PROMPT, VARIADIC, args_problem

__all__ = [
    "CLAUDE_SYSTEM",
    "GEMINI_PROMPT",
    "VARIADIC",
    "args_problem",
    "build_argv",
    "output_flags",
    "system_block",
]


CLAUDE_SYSTEM = "--append-system-prompt"
_CLOSE = re.compile(r"\[\s*/\s*SYSTEM\s*\]", re.IGNORECASE)


def build_argv(
    cli: str,
    executable: str,
    args: list[str],
    task: str,
    extra: list[str] | None = None,
    system: str = "",
) -> list[str]:
    """``executable + args + extra`` and the task, placed so nothing can swallow it;
    ``system``: the instructions ("" none), placed as the CLI takes them. A CLI other
    than the built-ins (an adapter's, :mod:`kernel.delegate.adapters`) gets codex's
    placement: ``--`` then the task, the instructions in a ``[SYSTEM]`` block."""
    extra = list(extra or [])
    if system and cli == "claude_code":
        extra.append(f"{CLAUDE_SYSTEM}={system}")
    elif system:
        task = system_block(system, task)
    if cli == "gemini":
        head = args[:-1] if args and args[-1] in GEMINI_PROMPT else args
        return [executable, *head, *extra, f"--prompt={task}"]
    return [executable, *args, *extra, "--", task]


def system_block(system: str, task: str) -> str:
    """The task with the instructions before it, as Codex and Gemini get them."""
    # A closing tag inside the text (a persona's body) must not end the block early.
    body = _CLOSE.sub(r"[\/SYSTEM]", system)
    return f"[SYSTEM]\n{body}\n[/SYSTEM]\n\n{task}"


def output_flags(folder: Path, stamp: str, workdir: Path) -> tuple[list[str], Path]:
    """Codex's extra flags: its working root and the file its final answer goes to."""
    last_message = folder / f"{stamp}-codex-last.txt"
    return ["-C", str(workdir), "--output-last-message", str(last_message)], last_message
