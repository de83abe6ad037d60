"""The client verbs' shared output: tables aligned for wide (CJK) characters, clips."""

from __future__ import annotations

import io

from kernel.client.verbs import clip, print_json, table


def test_table_columns_line_up_with_wide_characters() -> None:
    out = io.StringIO()
    table(["id", "title"], [["1", "天气预报"], ["22", "notes"]], out)
    lines = out.getvalue().splitlines()
    assert lines == ["id  title", "1   天气预报", "22  notes"]


def test_clip_makes_one_bounded_line() -> None:
    assert clip("a\n b   c") == "a b c"
    assert clip("x" * 70, 10) == "x" * 9 + "…"


def test_print_json_keeps_unicode_and_succeeds() -> None:
    out = io.StringIO()
    assert print_json({"name": "提醒"}, out) == 0
    assert out.getvalue() == '{\n  "name": "提醒"\n}\n'
