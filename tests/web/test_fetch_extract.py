"""web_fetch's HTML to text on its own (kernel.web.extract): the title, the charset a
page declares inside itself, pages with nothing to extract."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kernel.web.extract import readable

BODY = (
    "<p>The harbour reopened on Monday after the dredging works, and the first ferry "
    "left at seven with a full deck of commuters and a few tourists.</p>"
)


@pytest.mark.parametrize(
    ("head", "title"),
    [
        (
            '<meta property="og:title" content="Harbour reopens"><title>x | News</title>',
            "Harbour reopens",
        ),
        ("<title>Harbour news | The Daily</title>", "Harbour news | The Daily"),
        ("", ""),
    ],
)
def test_the_title_comes_first(head: str, title: str) -> None:
    page = readable(f"<html><head>{head}</head><body><article>{BODY}</article></body></html>")
    assert page.title == title
    if title:
        assert page.text.startswith(f"# {title}\n\nThe harbour reopened")
    else:
        assert page.text.startswith("The harbour reopened")


def test_the_first_heading_is_the_title_when_the_head_title_holds_it() -> None:
    html = (
        "<html><head><title>Harbour reopens - The Daily</title></head><body><article>"
        f"<h1>Harbour reopens</h1>{BODY}</article></body></html>"
    )
    page = readable(html)
    assert page.title == "Harbour reopens"
    assert page.text.startswith("# Harbour reopens\n\nThe harbour reopened")
    assert page.text.count("Harbour reopens") == 1


def test_a_charset_declared_in_the_page_is_read() -> None:
    text = "港口周一重新开放，第一班渡轮七点出发，甲板上满是通勤的人和几位游客。" * 3
    html = (
        '<html><head><meta charset="gbk"><title>港口新闻</title></head>'
        f"<body><article><p>{text}</p></article></body></html>"
    ).encode("gbk")
    page = readable(html)
    assert page.title == "港口新闻"
    assert text in page.text


@pytest.mark.parametrize("html", ["", "   ", "<html></html>", b"\x00\x01\x02", "<p>"])
def test_an_empty_or_broken_page_gives_no_text_and_no_error(html: str | bytes) -> None:
    assert readable(html).text == ""


def test_markup_nested_past_the_parser_s_depth_gives_no_markup_and_no_error() -> None:
    # libxml2 stops at 256 levels: what is deeper is lost, never shown as raw markup.
    html = "<html><body>" + "<div>" * 5000 + BODY + "</div>" * 5000 + "</body></html>"
    assert "<div" not in readable(html).text
    shallow = "<html><body>" + "<div>" * 100 + BODY + "</div>" * 100 + "</body></html>"
    assert "harbour reopened" in readable(shallow).text


def test_registering_the_web_tools_loads_no_extraction_library() -> None:
    """trafilatura and lxml (~10 MB) load at the first page read, not at start-up."""
    code = (
        "import sys\n"
        "from kernel.tools.registry import ToolRegistry\n"
        "from kernel.config import Config\n"
        "import kernel.web\n"
        "from kernel.web import fetch, search\n"
        "print(sorted(m for m in ('trafilatura', 'lxml') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"
