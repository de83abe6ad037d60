"""How a delegated CLI's run ended, in facts and in the owner's words (issue 35).

:class:`ExitStatus` is the process's real end: its own exit code, or the signal that
ended it, and the signals Kernel sent it (its time limits, /cancel, Kernel's stop).
A CLI that traps SIGTERM and exits 0 (Gemini CLI) or 143 (Claude Code) after Kernel's
SIGTERM keeps that code, and ``signal`` names Kernel's SIGTERM as what ended it: never
a bare 0 that reads as success. A process killed from outside shows the signal it died
of, which Kernel did not send.

:func:`cause_words` names the CLI's last known trouble (the last retry or API error it
printed, kept when later output clears the live warning), :func:`exit_words` the exit.
"""

from __future__ import annotations

import signal as signals
from dataclasses import dataclass, field
from typing import Any

from kernel.core.i18n import t
from kernel.delegate.formats import Trouble, display_name

SIGTERM = "SIGTERM"
SIGKILL = "SIGKILL"


def signal_name(number: int) -> str:
    """``SIGKILL`` for 9 (``signal 64`` for one this platform has no name for)."""
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass(slots=True)
class ExitStatus:
    """``code``: the process's own exit code (None when a signal killed it, or it was
    never reaped); ``signal``: what ended it (the one it died of, or Kernel's last one
    before it exited); ``sent``: the signals Kernel sent while it ran, in order;
    ``after``: the run's seconds when Kernel sent the first."""

    code: int | None = None
    signal: str | None = None
    sent: list[str] = field(default_factory=list)
    after: float | None = None

    @classmethod
    def of(cls, returncode: int | None, sent: list[str], after: float | None) -> ExitStatus:
        if returncode is not None and returncode < 0:  # asyncio's -N: killed by signal N
            return cls(None, signal_name(-returncode), list(sent), after)
        return cls(returncode, sent[-1] if sent else None, list(sent), after)

    @property
    def from_outside(self) -> bool:
        """A signal ended it that Kernel did not send."""
        return self.signal is not None and self.signal not in self.sent

    def facts(self) -> dict[str, Any]:
        """What the tool result and the audit row add beside ``exit_code``."""
        return {"signal": self.signal, "kernel_signals": list(self.sent)}


def exit_words(status: ExitStatus) -> str:
    """ "Kernel sent SIGTERM after 20 s; exit code 0" / "killed by SIGKILL from outside
    Kernel" / "exit code 3"."""
    parts: list[str] = []
    if status.sent:
        after = f"{round(status.after, 1):g}" if status.after is not None else "?"
        sent = status.sent[0]
        for later in status.sent[1:]:
            sent = t("delegate.exit_then", first=sent, second=later)
        parts.append(t("delegate.exit_sent", signals=sent, seconds=after))
    if status.code is not None:
        parts.append(t("delegate.exit_code", code=status.code))
    elif status.from_outside:
        parts.append(t("delegate.exit_outside", signal=status.signal))
    elif status.signal is not None:
        parts.append(t("delegate.exit_signal", signal=status.signal))
    else:
        parts.append(t("delegate.exit_unknown"))
    return joined(parts, "delegate.exit_and")


def joined(parts: list[str], key: str = "delegate.sentences") -> str:
    """``parts`` joined the catalogue's way ("；" and no space between Chinese sentences)."""
    text = parts[0] if parts else ""
    for part in parts[1:]:
        text = t(key, a=text, b=part)
    return text


def cause_words(cli: str, trouble: Trouble) -> str:
    """The CLI's last retry or API error: "Codex could not reach its API: … (retry 3/5)"."""
    name = display_name(cli)
    if trouble.attempt <= 0:
        return t("delegate.cause_error", cli=name, error=trouble.error)
    if trouble.max_attempts:
        retry = f"{trouble.attempt}/{trouble.max_attempts}"
    else:
        retry = str(trouble.attempt)
    return t("delegate.cause_retry", cli=name, error=trouble.error, retry=retry)
