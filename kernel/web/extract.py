"""A page's readable text: trafilatura's main-content extraction as Markdown-ish text,
title first; the whole page's plain text when it finds no main content.

CPU-bound (a 2 MB page takes a fair share of a second, see bench/web_fetch.py): callers
run :func:`readable` off the event loop (``asyncio.to_thread``).

Public API: :func:`readable`, :class:`Readable`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import trafilatura

log = logging.getLogger(__name__)

_BLANK_LINES = re.compile(r"\n{3,}")
_TITLE_LIMIT = 300


@dataclass(frozen=True)
class Readable:
    title: str  # "" when the page names none
    text: str  # the title as a "# " heading, then the body; "" for an empty page


def readable(html: str | bytes, url: str = "") -> Readable:
    """The main content of ``html`` (bytes: trafilatura reads the page's own charset
    declaration) with its title; boilerplate (menus, footers, scripts) left out."""
    tree = trafilatura.load_html(html)
    if tree is None:
        return Readable("", "")
    metadata = trafilatura.extract_metadata(tree, default_url=url or None, extensive=False)
    title = " ".join((metadata.title or "").split())[:_TITLE_LIMIT]
    body = trafilatura.extract(
        tree,
        url=url or None,
        output_format="markdown",
        include_tables=True,
        include_links=False,
        include_images=False,
        include_comments=False,
        with_metadata=False,
    )
    if not body or not body.strip():
        # No main content found (a bare page, a list of links): all of its text.
        log.info("web: no main content found, plain text instead")
        body = trafilatura.html2txt(html)
    body = _BLANK_LINES.sub("\n\n", body.strip())
    if title and not _starts_with_title(body, title):
        body = f"# {title}\n\n{body}" if body else f"# {title}"
    return Readable(title, body)


def _starts_with_title(body: str, title: str) -> bool:
    first = body.split("\n", 1)[0].lstrip("#").strip()
    return first.casefold() == title.casefold()
