"""Every pattern that reads outside input (model replies, HTTP bodies, CLI output, prompt
files) runs in linear time (issue 12): each is given a ~200 KB input of the shape that
made it quadratic or worse, in a worker thread with a generous bound. A quadratic scan of
200 KB takes minutes; a linear one, milliseconds."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from kernel.cron.workflow import parse_condition
from kernel.telegram.render import html_to_plain
from kernel.telegram.split import split_html
from kernel.voice.text import speakable

N = 200_000


def _condition(text: str) -> None:
    # Refused or parsed, either way at once.
    try:
        parse_condition(text)
    except ValueError:
        pass


CASES: dict[str, tuple[Callable[[str], object], str]] = {
    "telegram plain text of '<<<<'": (html_to_plain, "<" * N),
    "spoken text of '<a<a<a'": (lambda s: speakable(s, 10**9), "<a" * (N // 2)),
    "spoken text of a table rule and spaces": (
        lambda s: speakable(s, 10**9),
        "--" + " " * N + "x",
    ),
    "spoken text of blank lines": (lambda s: speakable(s, 10**9), "\n" * N + "x"),
    "4096 split of unclosed tags": (split_html, "<a " * (N // 3)),
    "cron condition with a run of spaces": (_condition, "text == x" + " " * N + "y"),
}


@pytest.mark.parametrize(("work", "text"), CASES.values(), ids=CASES.keys())
def test_linear_on_hostile_input(work: Callable[[str], object], text: str) -> None:
    done = threading.Event()

    def run() -> None:
        work(text)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(30)
