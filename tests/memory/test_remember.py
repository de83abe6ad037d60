"""<remember> tags: extraction, stripping, and the same result however the text is split."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.memory.remember import (
    MAX_FACT_CHARS,
    MAX_OPEN_CHARS,
    Fact,
    RememberFilter,
    extract_remember,
)


def streamed(pieces: list[str]) -> tuple[list[str], list[Fact]]:
    tags = RememberFilter()
    out = [tags.feed(p) for p in pieces]
    out.append(tags.flush())
    return out, tags.facts


def test_tags_are_stripped_and_their_facts_kept() -> None:
    text = (
        'Noted. <remember category="user">Likes oolong tea</remember>Anything else?'
        "<REMEMBER category='project'> repo is ~/src/kernel </Remember>"
        "<remember>no category given</remember>"
        '<remember category="gossip">unknown category</remember>'
        "<remember category=feedback>unquoted</remember>"
        "<remember>   </remember>"
    )
    shown, facts = extract_remember(text)
    assert shown == "Noted. Anything else?"
    assert facts == [
        Fact("Likes oolong tea", "user"),
        Fact("repo is ~/src/kernel", "project"),
        Fact("no category given", "user"),
        Fact("unknown category", "user"),
        Fact("unquoted", "feedback"),
    ]


def test_text_that_only_looks_like_a_tag_is_shown_as_written() -> None:
    for text in (
        "a < b and c <= d, x<y",
        "use <rememberance> or <remember-me> or <rem",
        "<remember/> self-closing",
        "a stray </remember> close",
        "trailing <remember",
        "trailing <remember category=",
        "html <b>bold</b> & <i>it</i>",
    ):
        assert extract_remember(text) == (text, []), text


def test_an_unclosed_tag_does_not_swallow_the_rest() -> None:
    text = 'Sure. <remember category="user">likes tea\n\nHere is the rest of the answer.'
    assert extract_remember(text) == (text, [])
    # ... and a later well-formed tag is still a tag
    shown, facts = extract_remember("<remember>" + "x" * MAX_FACT_CHARS + "y</remember> ok")
    assert facts == [] and shown.endswith("y</remember> ok")
    long_then_good = "<remember>" + "z" * (MAX_FACT_CHARS + 5) + "<remember>fact</remember>."
    shown, facts = extract_remember(long_then_good)
    assert facts == [Fact("fact", "user")]
    assert shown == "<remember>" + "z" * (MAX_FACT_CHARS + 5) + "."


def test_an_opening_tag_has_a_bounded_length() -> None:
    attrs = " " + "a" * MAX_OPEN_CHARS
    text = f"<remember{attrs}>fact</remember>"
    assert extract_remember(text) == (text, [])


def test_nested_tags_close_at_the_first_closing_tag() -> None:
    shown, facts = extract_remember("<remember>a <remember>b</remember> c</remember>!")
    assert facts == [Fact("a <remember>b", "user")]
    assert shown == " c</remember>!"


def test_a_tag_split_across_deltas_never_leaks() -> None:
    pieces = ["Noted. <", "rem", 'ember category="us', 'er">likes ', "tea</remem", "ber> Bye"]
    out, facts = streamed(pieces)
    assert "".join(out) == "Noted.  Bye"
    assert facts == [Fact("likes tea", "user")]
    # nothing of the tag is shown before it is resolved
    assert out[:5] == ["Noted. ", "", "", "", ""]
    for shown in out:
        assert "<" not in shown and "tea" not in shown


def test_held_text_is_released_as_soon_as_it_cannot_be_a_tag() -> None:
    tags = RememberFilter()
    assert tags.feed("x <rem") == "x "
    assert tags.feed("ote") == "<remote"
    assert tags.feed(" <") == " "
    assert tags.flush() == "<"


_PARTS = st.sampled_from(
    [
        "hello ",
        "昭和 ",
        "<",
        ">",
        "<remember>",
        '<remember category="project">',
        "<remember category='user' >",
        "</remember>",
        "</REMEMBER>",
        "<rem",
        "ember>",
        "</remem",
        "ber>",
        "fact",
        "\n",
        "a" * 300,
        "b" * (MAX_FACT_CHARS - 5),
    ]
)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_PARTS, max_size=12), cuts=st.lists(st.integers(0, 4000), max_size=8))
def test_output_does_not_depend_on_how_the_text_is_split(parts: list[str], cuts: list[int]) -> None:
    text = "".join(parts)
    whole, facts = extract_remember(text)
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    out, streamed_facts = streamed(pieces)
    assert "".join(out) == whole
    assert streamed_facts == facts
    for fact in facts:
        assert fact.text.strip() == fact.text and fact.text
