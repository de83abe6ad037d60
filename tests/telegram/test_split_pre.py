"""Property: the 4096 split never cuts a code block at a space.

What ``kernel.telegram.split`` promises, stated on the visible text ``T`` of the HTML
(as Telegram parses it) and the chunks ``T[a:b]`` it is cut into:

* every chunk is valid Telegram HTML on its own (tags balanced and allowed) and shows at
  most ``limit`` UTF-16 units;
* only whitespace is dropped between two chunks;
* where a cut falls inside one ``<pre>`` (code on both sides of it), it either falls at a
  line break, and the next chunk begins at the start of a line (its indentation kept), or
  it falls in the middle of a line and then drops nothing: spaces in code are code. A line
  is cut in the middle only when the chunk holds no line break to cut at instead.

(A run of spaces as long as a whole chunk is the one exception, where something must go;
the generated code keeps its runs of spaces shorter than the smallest limit tried.)
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.telegram.render import render_markdown
from kernel.telegram.split import split_html, utf16_len
from tests.sim.telegram_html import parse_html

_CODE_CHARS = "abcxyz019_()=+-*/#:.,<>&\"'😀中"
_WORD = st.text(alphabet=_CODE_CHARS, min_size=1, max_size=8)
_GAP = st.sampled_from([" ", "  ", "    ", "\t", " \t ", "        "])
_INDENT = st.sampled_from(["", "", "  ", "    ", "\t", "        "])
_PROSE = st.lists(st.sampled_from(["word", "**bold**", "_it_", "中文", "😀", "a&b"]), max_size=30)


@st.composite
def _code_line(draw: st.DrawFn, length: st.SearchStrategy[int]) -> str:
    """A line of code: indentation, then words and runs of spaces repeated up to a length
    (long lines without asking Hypothesis for that much data)."""
    parts = draw(st.lists(st.tuples(_WORD, _GAP), max_size=6))
    unit = "".join(word + gap for word, gap in parts) + draw(_WORD)
    size = draw(length)
    return draw(_INDENT) + (unit * (size // len(unit) + 1))[:size]


_SHORT_LINE = st.integers(min_value=0, max_value=80)
_BLANK_LINE = st.sampled_from(["", "   ", "\t"])


def _code(length: st.SearchStrategy[int]) -> st.SearchStrategy[str]:
    lines = st.one_of(_code_line(_SHORT_LINE), _code_line(length), _BLANK_LINE)
    return st.lists(lines, min_size=1, max_size=12).map("\n".join)


def _paragraph(length: st.SearchStrategy[int]) -> st.SearchStrategy[str]:
    return st.builds(lambda words, size: (" ".join(words) + " ") * (size // 40 + 1), _PROSE, length)


def _fence(code: str, language: str) -> str:
    return f"```{language}\n{code}\n```"


def _escape(code: str) -> str:
    return code.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _pre(code: str, language: str) -> str:
    if language:
        return f'<pre><code class="language-{language}">{_escape(code)}</code></pre>'
    return f"<pre>{_escape(code)}</pre>"


@st.composite
def _document(draw: st.DrawFn, markdown: bool, length: st.SearchStrategy[int]) -> str:
    """Paragraphs and code blocks, one of them holding a line of the given length."""
    if markdown:
        text, block, separators = _paragraph(length), _fence, ["\n\n"]
    else:
        text = _paragraph(length).map(lambda words: f"<b>{_escape(words)}</b> tail")
        block, separators = _pre, ["\n", "\n\n"]
    code = st.builds(block, _code(length), st.sampled_from(["", "py", "c++"]))
    parts = draw(st.lists(st.one_of(text, code), max_size=3))
    line = draw(_code_line(length))
    around = draw(st.tuples(_code(_SHORT_LINE), _code(_SHORT_LINE)))
    sure = block(f"{around[0]}\n{line}\n{around[1]}", draw(st.sampled_from(["", "py"])))
    parts.insert(draw(st.integers(0, len(parts))), sure)
    return draw(st.sampled_from(separators)).join(parts)


# With Telegram's limit, some lines are longer than it; small limits run on small
# documents, for many cuts each.
_LONG_LINE = st.integers(min_value=3000, max_value=9000)
_MEDIUM_LINE = st.integers(min_value=80, max_value=1200)


def _index_of_unit(text: str) -> dict[int, int]:
    """UTF-16 offset -> index into ``text`` (for the entities' offsets)."""
    where, units = {0: 0}, 0
    for index, char in enumerate(text):
        units += utf16_len(char)
        where[units] = index + 1
    return where


def _pre_ranges(html: str) -> tuple[str, list[tuple[int, int]]]:
    """The visible text of ``html`` and the index ranges of its ``pre`` entities."""
    text, entities = parse_html(html)
    index = _index_of_unit(text)
    ranges = [
        (index[e["offset"]], index[e["offset"] + e["length"]])
        for e in entities
        if e["type"] == "pre"
    ]
    return text, ranges


def check_pre_cuts(html: str, limit: int) -> list[str]:
    chunks = split_html(html, limit)
    text, pres = _pre_ranges(html)
    spans: list[tuple[int, int]] = []
    end = 0
    for chunk in chunks:
        shown, _ = parse_html(chunk)  # raises unless the chunk is valid, balanced HTML
        assert 0 < utf16_len(shown) <= limit
        start = text.find(shown, end)
        assert start >= end, (chunk, text[end:])
        assert not text[end:start].strip(), f"lost {text[end:start]!r}"
        spans.append((start, start + len(shown)))
        end = start + len(shown)
    assert not text[end:].strip(), f"lost {text[end:]!r}"

    for (a, b), (after, _) in zip(spans, spans[1:], strict=False):
        for first, last in pres:
            if not first < b <= after < last:
                continue  # this cut is not inside this code block
            dropped = text[b:after]
            if "\n" in dropped:
                assert text[after - 1] == "\n", f"next chunk starts mid-line: {text[after:]!r}"
            else:
                assert dropped == "", f"cut inside a code line dropped {dropped!r}"
                ink = a + len(text[a:b]) - len(text[a:b].lstrip())
                assert "\n" not in text[ink + 1 : b], "cut mid-line with a line break at hand"
    return chunks


@settings(max_examples=60)
@given(_document(markdown=True, length=_LONG_LINE))
def test_rendered_code_blocks_are_cut_at_line_breaks_or_lose_nothing(md: str) -> None:
    check_pre_cuts(render_markdown(md), 4096)


@settings(max_examples=60)
@given(_document(markdown=False, length=_LONG_LINE))
def test_pre_blocks_are_cut_at_line_breaks_or_lose_nothing(html: str) -> None:
    check_pre_cuts(html, 4096)


@settings(max_examples=100)
@given(
    st.one_of(
        _document(markdown=True, length=_MEDIUM_LINE).map(render_markdown),
        _document(markdown=False, length=_MEDIUM_LINE),
    ),
    st.integers(min_value=16, max_value=600),
)
def test_small_limits_cut_code_at_line_breaks_or_lose_nothing(html: str, limit: int) -> None:
    check_pre_cuts(html, limit)


def test_a_long_code_line_is_cut_before_its_spaces_not_in_them() -> None:
    assert split_html("<pre>aaaaaaaa  bbbbbbbb</pre>", 10) == [
        "<pre>aaaaaaaa</pre>",
        "<pre>  bbbbbbbb</pre>",
    ]
    line = "y" * 4090 + " " * 20 + "z" * 10
    chunks = check_pre_cuts(f"<pre>{line}</pre>", 4096)
    assert "".join(parse_html(chunk)[0] for chunk in chunks) == line
