"""Regexes run on outside input stay linear (issue 12 sweep): each pattern that used to
backtrack quadratically runs on a hostile ~200 KB input in a worker thread, which must
finish within a generous bound (quadratic took minutes at this size)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from kernel.cron import schedule, workflow
from kernel.redact import Redactor, secret_assignment
from kernel.telegram import render, split
from kernel.voice import text as voice

N = 200_000
CASES: dict[str, Callable[[], object]] = {
    "selfops scan: a run of name characters": lambda: secret_assignment("a" * N),
    "selfops scan: flags without values": lambda: secret_assignment("--a " * (N // 4)),
    "selfops scan: table cells": lambda: secret_assignment("| a " * (N // 4)),
    "selfops scan: keys without values": lambda: secret_assignment('"a":' * (N // 4)),
    "voice tags never closed": lambda: voice._TAG.sub("", "<a" * (N // 2)),
    "voice table rule over blank lines": lambda: voice._TABLE_RULE.sub("", "\n" * N + "x"),
    "voice table rule over blanks": lambda: voice._TABLE_RULE.sub("", "--" + " " * N + "x"),
    "telegram trailing blanks": lambda: render._TRAILING_SPACE.sub("", " " * N + "x"),
    "telegram tags never closed": lambda: render._TAG.sub("", "<" * N),
    "telegram split atoms": lambda: list(split._ATOM.finditer('<a "' * (N // 4))),
    "cron every: digits without a unit": lambda: schedule._PART.findall("1" * N),
    "cron every: blanks": lambda: schedule._EVERY.match("every" + " " * N + "\nx\ny"),
    "workflow condition: blanks in the value": lambda: workflow._CONDITION.match(
        "a == x" + " " * N + "y"
    ),
    "redact header before blanks": lambda: Redactor()("authorization:" + " " * N + "[REDACTED]"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_the_pattern_is_linear_on_hostile_input(name: str) -> None:
    worker = threading.Thread(target=CASES[name], daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), f"{name}: still running after 20 s (super-linear)"
