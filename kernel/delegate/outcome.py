"""One delegated task (:class:`Delegation`, what channels read while it runs) and what
it ends with: the result the ``delegate_to_cli`` tool returns, and when it is not ok the
one-line reason (why, how the process ended, the CLI's last known cause) and what the
model reads instead of the raw stream."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kernel.config import CLIConfig
from kernel.core.i18n import t
from kernel.delegate.ending import ExitStatus, cause_words, exit_words, joined
from kernel.delegate.formats import Trouble, display_name, strip_ansi
from kernel.delegate.runner import HALF, OUTPUT_LIMIT, RunReport

log = logging.getLogger(__name__)

STDERR_FOR_MODEL = 2_000  # characters of stderr shown to the model when a run failed
ABORTS = ("timeout", "idle", "no_progress", "stopped")  # ended by Kernel's limits or stop


@dataclass
class Delegation:
    """One delegated task, running or finished."""

    cli: str
    cwd: str
    conversation: str
    started: float  # monotonic
    started_at: datetime
    clock: Callable[[], float] = field(repr=False)
    timeout: float = 0.0
    step: str = ""  # the latest progress step
    steps: int = 0
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=20))
    pid: int | None = None
    finished: float | None = None
    outcome: str | None = None  # ok | failed | timeout | idle | no_progress | cancelled | stopped
    trouble: Trouble | None = None  # the CLI's latest retry or API error
    cause: Trouble | None = None  # the last one of the run, kept after progress
    status: ExitStatus | None = None  # how the process ended, once it did
    version: str = ""
    exit_code: int | None = None
    output_path: str = ""
    id: str = ""  # the run's stamp: its output file's, its approvals' delegation id

    @property
    def elapsed(self) -> float:
        return (self.finished if self.finished is not None else self.clock()) - self.started

    @property
    def done(self) -> bool:
        return self.finished is not None


def truncate(text: str, limit: int = OUTPUT_LIMIT) -> str:
    """Head and tail of ``text`` within ``limit`` characters, the middle replaced by a note."""
    if len(text) <= limit:
        return text
    omitted = len(text) - 2 * HALF
    return text[:HALF] + omission(omitted) + text[-HALF:]


def omission(count: int) -> str:
    return "\n" + t("delegate.omitted", count=count) + "\n"


def ended(claim: Delegation, status: ExitStatus, ended: dict[str, Any]) -> None:
    """The exit and the last known cause, on the claim and in the audit's facts."""
    claim.status = status
    cause = cause_words(claim.cli, claim.cause) if claim.cause is not None else None
    ended.update(exit_code=status.code, **status.facts(), cause=cause)


def result(
    clis: Mapping[str, CLIConfig],
    claim: Delegation,
    report: RunReport,
    failure: str,
    answer: str,
    output_path: Path,
    jsonl: bool,
) -> dict[str, Any]:
    exited_ok = report.exit_code == 0 or report.killed_after_done
    ok = report.reason in ("exit", "completed") and exited_ok and not failure
    ok = ok and bool(answer.strip())
    claim.exit_code = report.status.code
    claim.outcome = "ok" if ok else report.reason if report.reason in ABORTS else "failed"
    reason = None if ok else _note(clis, claim, report, failure, answer)
    if ok:
        text = answer.strip()
    elif answer.strip() or not jsonl:
        text = answer.strip() or strip_ansi(report.stdout.text(omission)).strip()
        text = "\n\n".join(p for p in [text, reason, _stderr(report)] if p)
    else:  # a JSONL stream without an answer: a summary, not the raw events
        steps = "\n".join(f"- {step}" for step in list(claim.recent)[-5:])
        parts = [reason, t("delegate.last_steps", steps=steps) if steps else ""]
        parts += [_stderr(report), t("delegate.see_output", path=output_path)]
        text = "\n\n".join(p for p in parts if p)
    log.info(
        "delegation ended: cli=%s outcome=%s exit=%s reason=%s %.1fs, %d stdout chars",
        claim.cli,
        claim.outcome,
        report.exit_code,
        report.reason,
        claim.elapsed,
        report.stdout.total,
    )
    return {
        "ok": ok,
        "cli": claim.cli,
        "version": claim.version,
        "cwd": claim.cwd,
        "exit_code": report.status.code,
        "reason": reason.removeprefix("[Kernel] ") if reason else None,
        "output_path": str(output_path),
        "output": truncate(text),
        **report.status.facts(),
        "cause": cause_words(claim.cli, claim.cause) if claim.cause is not None else None,
    }


def _stderr(report: RunReport) -> str:
    stderr = strip_ansi(report.stderr.tail or "".join(report.stderr.head)).strip()
    return "[stderr]\n" + stderr[-STDERR_FOR_MODEL:] if stderr else ""


def _note(
    clis: Mapping[str, CLIConfig], claim: Delegation, report: RunReport, failure: str, answer: str
) -> str:
    """Why the run is not ok, then how it ended when a signal was in it (Kernel's
    kill, or one from outside), then the CLI's last known cause when the first part
    did not name it already."""
    note, named = _why(clis, claim, report, failure, answer)
    status = report.status
    more: list[str] = []
    if report.reason in ABORTS or (status.signal is not None and not status.from_outside):
        more.append(t("delegate.exit_status", status=exit_words(status)))
    if claim.cause is not None and not named:
        more.append(t("delegate.last_cause", cause=cause_words(claim.cli, claim.cause)))
    return t("delegate.note_more", note=note, more=joined(more)) if more else note


def _why(
    clis: Mapping[str, CLIConfig], claim: Delegation, report: RunReport, failure: str, answer: str
) -> tuple[str, bool]:
    """The note, and whether it names the CLI's trouble already."""
    cfg = clis[claim.cli]
    name = display_name(claim.cli)
    trouble = claim.trouble
    if report.reason == "no_progress" and trouble is not None:
        return t(
            "delegate.note_unreachable",
            cli=name,
            error=trouble.error,
            retries=trouble.attempt,
            seconds=f"{cfg.no_progress_timeout:g}",
        ), True
    if report.reason == "timeout":
        return t("delegate.note_timeout", cli=claim.cli, seconds=f"{cfg.timeout:g}"), False
    if report.reason == "idle":
        return t("delegate.note_idle", cli=claim.cli, seconds=f"{cfg.idle_timeout:g}"), False
    if report.reason == "stopped":
        return t("delegate.note_stopped", cli=claim.cli), False
    code = report.status.code
    if report.status.from_outside:
        return t("delegate.note_signal", cli=claim.cli, signal=report.status.signal), False
    named = False
    if failure and trouble is not None and not answer.strip():
        note = t("delegate.note_api", cli=name, error=failure, retries=trouble.attempt)
        named = True
    elif failure:
        note = t("delegate.note_failure", cli=claim.cli, detail=failure)
    elif code not in (0, None):
        return t("delegate.note_exit", cli=claim.cli, code=code), False
    elif trouble is not None:
        note = t("delegate.note_api", cli=name, error=trouble.error, retries=trouble.attempt)
        named = True
    else:
        note = t("delegate.note_empty", cli=claim.cli)
    if code == 0 and not report.status.sent:  # e.g. Gemini CLI: exit 0 after an error
        note += " " + t("delegate.note_exit_zero", cli=claim.cli)
    return note, named
