"""Search results in their one shape, ``{title, url, snippet, date}``, whichever
service gave them (:mod:`kernel.web.search`, :mod:`kernel.web.keyless`).

Public API: :func:`result_of`, :func:`clean`, :data:`Result`, the ``MAX_*`` bounds.
"""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import urlsplit

MAX_TITLE = 300
MAX_SNIPPET = 1_000
MAX_URL = 2_000
MAX_DATE = 40

Result = dict[str, str]

TAG = re.compile(r"<[^<>]{0,200}>")
SPACE = re.compile(r"\s+")


def clean(value: Any, limit: int) -> str:
    """A provider's field as one plain line: tags (Brave's <strong>) and entities
    removed, whitespace collapsed, cut at ``limit``."""
    if not isinstance(value, str):
        return ""
    text = SPACE.sub(" ", html.unescape(TAG.sub("", value[: limit * 4]))).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def result_of(title: Any, link: Any, snippet: Any, date: str) -> Result | None:
    """One result in the common shape; None unless its address is an http(s) URL."""
    if not isinstance(link, str) or len(link) > MAX_URL or not is_web(link.strip()):
        return None
    return {
        "title": clean(title, MAX_TITLE),
        "url": link.strip(),
        "snippet": clean(snippet, MAX_SNIPPET),
        "date": date,
    }


def is_web(link: str) -> bool:
    try:
        parts = urlsplit(link)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc) and link.isprintable()
