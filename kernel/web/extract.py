"""A page's readable text: trafilatura's main-content extraction as Markdown-ish text,
title first; the whole page's plain text when it finds no main content.

CPU-bound (a 2 MB page takes a fair share of a second, see bench/web_fetch.py) and holding
the GIL in long C calls: callers run :func:`readable` through
:func:`kernel.web.worker.extract` (a worker process for all but small pages). Logs
nothing: it may run in that worker.

Public API: :func:`readable`, :class:`Readable`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_BLANK_LINES = re.compile(r"\n{3,}")
_TITLE_LIMIT = 300


@dataclass(frozen=True)
class Readable:
    title: str  # "" when the page names none
    text: str  # the title as a "# " heading, then the body; "" for an empty page
    plain: bool = False  # no main content found: the whole page's plain text


def readable(html: str | bytes) -> Readable:
    """The main content of ``html`` (bytes: trafilatura reads the page's own charset
    declaration) with its title; boilerplate (menus, footers, scripts) left out. (No URL
    is given to trafilatura: links are left out anyway, and its warnings quote it.)
    trafilatura (and lxml) is imported here, at the first page: a Kernel that reads no
    web page never loads it."""
    import trafilatura

    tree = trafilatura.load_html(html)
    if tree is None:
        return Readable("", "")
    title = _title(tree)
    body = trafilatura.extract(
        tree,
        output_format="markdown",
        include_tables=True,
        include_links=False,
        include_images=False,
        include_comments=False,
        with_metadata=False,
    )
    plain = not body or not body.strip()
    if plain or body is None:
        # No main content found (a bare page, a list of links): all of its text.
        body = trafilatura.html2txt(html)
    body = _BLANK_LINES.sub("\n\n", body.strip())
    if title and not _starts_with_title(body, title):
        body = f"# {title}\n\n{body}" if body else f"# {title}"
    return Readable(title, body, plain)


def _title(tree: Any) -> str:
    """og:title, else the first <h1> when <title> holds it (the site's name left out),
    else <title>. (trafilatura's metadata pass finds the same for a far higher price: a
    large share of the extraction's time on a 2 MB page.)"""
    og = tree.xpath('string(//meta[@property="og:title"][1]/@content)')
    head = tree.xpath("string(//title[1])")
    h1 = _clean(tree.xpath("string(//h1[1])"))
    if _clean(og):
        return _clean(og)
    if h1 and (not _clean(head) or h1.casefold() in _clean(head).casefold()):
        return h1
    return _clean(head)


def _clean(text: object) -> str:
    return " ".join(str(text).split())[:_TITLE_LIMIT]


def _starts_with_title(body: str, title: str) -> bool:
    first = body.split("\n", 1)[0].lstrip("#").strip()
    return first.casefold() == title.casefold()
