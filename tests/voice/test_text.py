"""What of a reply is spoken."""

from __future__ import annotations

from kernel.voice.text import speakable


def test_markdown_is_spoken_as_prose() -> None:
    reply = (
        "# Plan\n"
        "**Bold** and `code`, see [the docs](https://example.com/a?b=1) or "
        "https://example.com/raw.\n\n"
        "```python\nprint('never read aloud')\n```\n\n"
        "| city | temp |\n|---|:---:|\n| Paris | 20 |\n\n"
        "- one\n- [x] two\n> quoted\n"
        "snake_case_name stays, 2*3 stays, *stress* goes"
    )
    assert speakable(reply, 500) == (
        "Plan\nBold and code, see the docs or .\ncity temp\nParis 20\none\ntwo\nquoted\n"
        "snake_case_name stays, 2*3 stays, stress goes"
    )


def test_only_code_means_nothing_to_say() -> None:
    assert speakable("```\nls -la\n```", 500) == ""


def test_long_replies_are_cut_at_a_sentence_end_within_the_limit() -> None:
    reply = "第一句话说完了。" + "第二句很长" * 40 + "。"
    assert speakable(reply, 500) == reply  # within the limit: all of it
    assert speakable(reply, 12) == "第一句话说完了。…"  # a sentence end in the second half
    assert speakable("a" * 30, 10) == "a" * 10 + "…"  # none: a hard cut
    english = "First point. Second point is here. " * 300
    spoken = speakable(english, 500)
    assert len(spoken) <= 501 and spoken.endswith("here.…")
