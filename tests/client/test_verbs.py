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


def test_a_sidecar_that_does_not_answer_in_time_is_unreachable_not_broken() -> None:
    """A read timeout (Kernel accepted the connection, then said nothing) reads as before
    the move to httpx: Kernel could not be reached in time, and how to start it."""
    import httpx

    from kernel.client.http import transport_error
    from kernel.core.i18n import set_language

    set_language("en")
    url = "http://127.0.0.1:8765"
    said = str(transport_error(url, httpx.ReadTimeout("read timed out")))
    assert said.startswith(f"cannot reach Kernel ({url}: timed out)")
    assert "start it first" in said
    broke = str(transport_error(url, httpx.RemoteProtocolError("peer closed")))
    assert broke.startswith(f"the connection to Kernel broke ({url}: RemoteProtocolError)")
