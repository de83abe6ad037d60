from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel.telegram.render import html_to_plain, render_markdown
from tests.sim.telegram_html import parse_html


def render(md: str) -> str:
    """Render, and insist Telegram would accept the result and show what we think."""
    out = render_markdown(md)
    plain, _ = parse_html(out)
    assert html_to_plain(out) == plain
    assert out == out.strip()
    assert all(line == line.rstrip() for line in out.split("\n"))
    return out


def entities(html: str) -> list[dict[str, object]]:
    return parse_html(html)[1]


def test_headings_are_bold_lines() -> None:
    assert (
        render("# Title *x*\n\nbody\n\n## **Sub**") == "<b>Title <i>x</i></b>\n\nbody\n\n<b>Sub</b>"
    )


def test_emphasis_strong_strikethrough() -> None:
    assert render("*a* **b** ~~c~~ ***d***") == "<i>a</i> <b>b</b> <s>c</s> <i><b>d</b></i>"


def test_same_tag_is_not_nested_in_itself() -> None:
    assert render("**a **b** c**") == "<b>a b c</b>"


def test_paragraphs_hard_breaks_and_rule() -> None:
    assert render("one  \ntwo\\\nthree\n\n---\n\nfour") == "one\ntwo\nthree\n\n———\n\nfour"


def test_nested_lists_indent_two_spaces_per_level() -> None:
    md = "- a\n  - b\n    - c\n- d"
    assert render(md) == "• a\n  • b\n    • c\n• d"


def test_ordered_list_respects_start() -> None:
    assert render("3. x\n7. y\n1. z") == "3. x\n4. y\n5. z"
    assert render("1. a\n   - inner\n2. b") == "1. a\n  • inner\n2. b"


def test_task_list() -> None:
    assert render("- [ ] todo\n- [x] done\n- plain") == "☐ todo\n☑ done\n• plain"


def test_table_is_aligned_monospace() -> None:
    md = "| name | n |\n|:-----|--:|\n| apple | 1 |\n| 中文字 | 22 |\n| *x* &amp; `y` | 3 |"
    out = render(md)
    assert out == ("<pre>name   |  n\n-------+---\napple  |  1\n中文字 | 22\nx &amp; y  |  3</pre>")
    assert entities(out) == [{"type": "pre", "offset": 0, "length": len(html_to_plain(out))}]


def test_code_block_escapes_and_keeps_language() -> None:
    md = "```python\nif a < b && c > d:\n    pass\n```"
    assert render(md) == (
        '<pre><code class="language-python">if a &lt; b &amp;&amp; c &gt; d:\n    pass</code></pre>'
    )
    assert entities(render(md))[0]["language"] == "python"


def test_code_block_language_is_sanitised() -> None:
    assert render("```c++ extra\nx\n```") == '<pre><code class="language-c++">x</code></pre>'
    assert render('```"><b>\nx\n```') == '<pre><code class="language-b">x</code></pre>'
    assert render("```<>\nx\n```") == "<pre>x</pre>"
    assert render("```\nplain\n```") == "<pre>plain</pre>"
    assert render("    indented <") == "<pre>indented &lt;</pre>"


def test_inline_code() -> None:
    assert render("use `a<b>&c` now") == "use <code>a&lt;b&gt;&amp;c</code> now"


@pytest.mark.parametrize(
    ("md", "html"),
    [
        (
            "[site](https://example.com/a?b=1&c=2)",
            '<a href="https://example.com/a?b=1&amp;c=2">site</a>',
        ),
        ("[**b**](http://x.org)", '<a href="http://x.org"><b>b</b></a>'),
        ("[mail](mailto:a@b.org)", '<a href="mailto:a@b.org">mail</a>'),
        ("[tg](tg://resolve?domain=x)", '<a href="tg://resolve?domain=x">tg</a>'),
        ("[](https://e.org)", '<a href="https://e.org">https://e.org</a>'),
        ("see https://e.org/x now", 'see <a href="https://e.org/x">https://e.org/x</a> now'),
        ("[evil](javascript:alert(1))", "evil"),
        ("[data](data:text/html;base64,xx)", "data"),
        ("[rel](/relative/path)", "rel"),
        ("[empty](mailto:) [none](<>)", "empty none"),
        (
            '[q](http://x.org/"onmouseover=")',
            '<a href="http://x.org/%22onmouseover=%22">q</a>',
        ),
    ],
)
def test_links(md: str, html: str) -> None:
    assert render(md) == html


def test_images_become_links_or_alt_text() -> None:
    assert render("![a cat](https://e.org/cat.png)") == '<a href="https://e.org/cat.png">a cat</a>'
    assert render("![](https://e.org/x.png)") == '<a href="https://e.org/x.png">image</a>'
    assert render("![bad](javascript:x)") == "bad"
    # A link inside a link is refused by Telegram: the image keeps only its alt text.
    assert render("[![pic](http://i.org/p)](http://l.org)") == '<a href="http://l.org">pic</a>'


def test_block_quotes_flatten_nesting() -> None:
    assert render("> a\n> b") == "<blockquote>a\nb</blockquote>"
    assert render("> outer\n>\n> > inner\n\nafter") == (
        "<blockquote>outer\n\ninner</blockquote>\n\nafter"
    )
    assert render("> ```\n> x < y\n> ```") == "<blockquote><pre>x &lt; y</pre></blockquote>"


def test_raw_html_is_shown_escaped() -> None:
    assert render("a <b>x</b> <script>alert(1)</script>") == (
        "a &lt;b&gt;x&lt;/b&gt; &lt;script&gt;alert(1)&lt;/script&gt;"
    )
    assert render("<div>\n<i>hi</i>\n</div>") == "&lt;div&gt;\n&lt;i&gt;hi&lt;/i&gt;\n&lt;/div&gt;"


def test_character_references_and_specials() -> None:
    out = render("AT&T &amp; &lt;tag&gt; &copy; &#128512; a < b > c")
    assert html_to_plain(out) == "AT&T & <tag> © 😀 a < b > c"


def test_control_characters_and_empty_input() -> None:
    assert html_to_plain(render("a\x00b\x01c\r\nd")) == "a\ufffdb\ufffdc\nd"
    assert render("") == ""
    assert render("  \n\n ") == ""


def test_html_to_plain() -> None:
    html = '<b>a &amp; <a href="http://x?a=1&amp;b=&quot;">b</a></b> &lt;&#33;&#x21;&gt;'
    assert html_to_plain(html) == "a & b <!!>"
    assert html_to_plain(html) == parse_html(html)[0]


_FRAGMENTS = st.sampled_from(
    [
        "# ",
        "## ",
        "\n",
        "\n\n",
        "- ",
        "  - ",
        "1. ",
        "3. ",
        "- [ ] ",
        "- [x] ",
        "> ",
        "> > ",
        "```",
        "```py\n",
        "\n```\n",
        "    ",
        "*",
        "**",
        "_",
        "__",
        "~~",
        "`",
        "<",
        ">",
        "&",
        "&amp;",
        "&#0;",
        "&#x1F600;",
        "[",
        "]",
        "(",
        ")",
        "](http://e.org)",
        "](javascript:x)",
        "![",
        "<b>",
        "</i>",
        "<a href='x'>",
        "| a | b |\n|---|:-:|\n| 1 | 2 |\n",
        "|",
        "---",
        "😀",
        "中文",
        "http://e.org/x",
        "\\",
        "  \n",
        "\t",
        "\x00",
        "\r",
        "text",
        " ",
    ]
)
MARKDOWN = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=12)), max_size=40).map("".join)


@settings(max_examples=300, deadline=None, database=None)
@given(st.one_of(st.text(), MARKDOWN))
def test_any_input_renders_to_valid_telegram_html(md: str) -> None:
    render(md)
