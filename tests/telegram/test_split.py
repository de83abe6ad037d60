from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.telegram.render import html_to_plain, render_markdown
from kernel.telegram.split import split_html, split_plain, utf16_len
from tests.sim.telegram_html import parse_html
from tests.telegram.test_render import MARKDOWN


def ink(text: str) -> str:
    return "".join(text.split())


def check_split(html: str, limit: int) -> list[str]:
    """Split, and insist every chunk is sendable and no visible text is lost."""
    chunks = split_html(html, limit)
    for chunk in chunks:
        plain, _ = parse_html(chunk)
        assert utf16_len(plain) <= limit
        assert plain.strip()
        assert plain == plain.rstrip()
        assert not plain.startswith("\n")
    full, _ = parse_html(html)
    assert ink("".join(parse_html(chunk)[0] for chunk in chunks)) == ink(full)
    return chunks


def long_document() -> str:
    para = (
        "Kernel keeps **state** in SQLite, talks to _models_ through adapters, and "
        "answers on Telegram; see [the docs](https://example.com/docs?a=1&b=2) 😀. "
    )
    code = "\n".join(f"if x < {i} && y > {i}:\n    print('&lt; {i}')" for i in range(80))
    table = "| key | 值 |\n|:--|--:|\n" + "".join(f"| k{i} | 中文{i} |\n" for i in range(20))
    lists = "".join(f"- item {i}\n  - nested **{i}**\n    1. deep\n" for i in range(15))
    quote = "> " + "quoted words & more " * 40
    long_paragraphs = "\n\n".join([para * 6] * 4)
    parts = ["# Heading", long_paragraphs, "```py\n" + code + "\n```", table, "## Lists", lists]
    parts += [quote, "~~old~~ `inline <code>` " * 30, "- [x] done\n- [ ] todo", para * 20]
    md = "\n\n".join(parts)
    assert len(md) > 10_000
    return md


def test_long_mixed_document() -> None:
    html = render_markdown(long_document())
    assert utf16_len(html_to_plain(html)) > 10_000
    chunks = check_split(html, 4096)
    assert len(chunks) >= 3
    assert check_split(html, 500)


def test_short_text_is_one_chunk() -> None:
    assert split_html("<b>hi</b> there") == ["<b>hi</b> there"]
    assert split_html("") == []
    assert split_html("\n\n  \n") == []


def test_long_code_block_reopens_pre_code_with_language() -> None:
    lines = [f"value_{i:04} = compute({i}) < limit & mask" for i in range(250)]
    html = render_markdown("```py\n" + "\n".join(lines) + "\n```")
    assert len(html_to_plain(html)) > 10_000
    chunks = check_split(html, 4096)
    assert len(chunks) >= 3
    for chunk in chunks:
        assert chunk.startswith('<pre><code class="language-py">')
        assert chunk.endswith("</code></pre>")
        # Cut at line boundaries only: every line survives whole.
        assert set(parse_html(chunk)[0].split("\n")) <= set(lines)
        assert parse_html(chunk)[1][0]["language"] == "py"


def test_code_block_keeps_indentation_after_a_cut() -> None:
    html = "<pre>" + "\n".join(["def f():", "    return 1"] * 20) + "</pre>"
    for chunk in check_split(html, 60):
        assert "<pre>def f():\n    return 1" in chunk or chunk.startswith("<pre>    return 1")


def test_link_and_bold_reopened_with_attributes_outermost_first() -> None:
    href = '<a href="https://example.com/?q=1&amp;r=&quot;2&quot;">'
    html = "<b>intro " + href + "<i>" + "word " * 40 + "</i></a> tail</b>"
    chunks = check_split(html, 50)
    assert len(chunks) > 3
    for chunk in chunks[1:-1]:
        assert chunk.startswith("<b>" + href + "<i>")
        assert chunk.endswith("</i></a></b>")
        kinds = {entity["type"]: entity for entity in parse_html(chunk)[1]}
        assert kinds["text_link"]["url"] == 'https://example.com/?q=1&r="2"'
        assert kinds.keys() == {"bold", "text_link", "italic"}


def test_prefers_paragraph_then_line_then_space() -> None:
    text = "a" * 30 + "\n\n" + "b" * 10 + "\n" + "c" * 10 + " " + "d" * 10
    assert split_html(text, 60) == ["a" * 30, "b" * 10 + "\n" + "c" * 10 + " " + "d" * 10]
    assert split_html(text, 45) == ["a" * 30, "b" * 10 + "\n" + "c" * 10 + " " + "d" * 10]
    text = "a" * 30 + "\n" + "b" * 10 + " " + "c" * 10
    assert split_html(text, 40) == ["a" * 30, "b" * 10 + " " + "c" * 10]
    assert split_html("word " * 5, 12) == ["word word", "word word", "word"]


def test_word_longer_than_limit_is_hard_cut() -> None:
    chunks = check_split("x" * 10_000, 4096)
    assert [len(chunk) for chunk in chunks] == [4096, 4096, 1808]
    assert split_plain("y" * 10, 4) == ["yyyy", "yyyy", "yy"]


def test_entities_are_never_cut() -> None:
    html = "&amp;" * 3000 + "&lt;&gt;&quot;&#128512;" * 10
    chunks = check_split(html, 1000)
    assert "".join(parse_html(chunk)[0] for chunk in chunks) == parse_html(html)[0]


def test_surrogate_pairs_are_never_split() -> None:
    text = "😀" * 3000
    for limit in (5, 4096):
        chunks = check_split(text, limit)
        assert "".join(chunks) == text
        assert all(utf16_len(chunk) == limit - limit % 2 for chunk in chunks[:-1])
    assert split_plain("a😀b😀", 2) == ["a", "😀", "b", "😀"]


def test_split_plain() -> None:
    text = ("para one is here\nline two\n\n" * 300).strip()
    chunks = split_plain(text, 4096)
    assert all(utf16_len(chunk) <= 4096 for chunk in chunks)
    assert all(chunk.startswith("para") and chunk.endswith("line two") for chunk in chunks)
    assert ink("".join(chunks)) == ink(text)
    assert split_plain("  short  ") == ["  short"]
    assert split_plain("") == []


@settings(max_examples=300, deadline=None, database=None)
@given(st.one_of(st.text(), MARKDOWN), st.integers(min_value=50, max_value=4096))
def test_rendered_markdown_always_splits_into_sendable_chunks(md: str, limit: int) -> None:
    check_split(render_markdown(md), limit)


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(MARKDOWN, min_size=5, max_size=30).map("\n\n".join), st.integers(2, 300))
def test_small_limits_split_long_markdown(md: str, limit: int) -> None:
    check_split(render_markdown(md), limit)
