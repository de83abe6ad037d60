"""One line of ``kernel check`` (``ok``, ``warn`` or ``fail``, the part, what to do)
and the printed report with its exit code."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kernel.core.i18n import t

Status = Literal["ok", "warn", "fail"]
MARKS: dict[Status, str] = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


@dataclass(slots=True)
class CheckLine:
    part: str
    status: Status
    detail: str

    def render(self) -> str:
        return f"[{MARKS[self.status]}] {self.part}: {self.detail}"


def report(lines: list[CheckLine]) -> tuple[str, int]:
    """The printed report and the exit code: 1 when anything failed."""
    text = "\n".join(line.render() for line in lines)
    failed = sum(1 for line in lines if line.status == "fail")
    warned = sum(1 for line in lines if line.status == "warn")
    summary = t("check.summary", failed=failed, warned=warned)
    return f"{text}\n{summary}", 1 if failed else 0
