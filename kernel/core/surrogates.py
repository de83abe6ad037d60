"""Lone surrogates: valid JSON (``"\\ud800"``), not valid text.

A JSON escape of half a UTF-16 pair decodes to a Python string that cannot be encoded
as UTF-8, so SQLite, RE2, the model SDKs and the Telegram library all fail on it. Outside
JSON is judged once where it is parsed (:func:`kernel.core.safejson.loads`, the
Telegram update reader): people's words keep every character with U+FFFD for each lone
half, names are refused. What may still carry one later (a model's output, a tool's
result) is mended where it would fail, and only then (:func:`mend`, :func:`mend_all`).

Strictly decoded UTF-8 never holds a surrogate (:func:`kernel.core.safejson.loads`
refuses the bytes of one), so only a ``\\uD800``–``\\uDFFF`` escape can
bring one: :func:`may_carry` looks for that in the raw text first, and nothing is
walked when it is absent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

REPLACEMENT = "\ufffd"
_TO_REPLACEMENT = dict.fromkeys(range(0xD800, 0xE000), REPLACEMENT)


def may_carry(raw: bytes | str) -> bool:
    """``raw`` (a JSON text) may hold a lone surrogate: it has a ``\\uD…`` escape."""
    if isinstance(raw, str):
        return "\\ud" in raw or "\\uD" in raw
    return b"\\ud" in raw or b"\\uD" in raw


def has_lone(text: str) -> bool:
    """``text`` holds a surrogate code point (which UTF-8 cannot encode)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def mend(text: str) -> str:
    """``text`` with each surrogate code point replaced by U+FFFD: one for one, so a
    position found in the mended text holds in the original."""
    if not has_lone(text):
        return text
    return text.translate(_TO_REPLACEMENT)


def mend_all(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings) with every string mended, keys too."""
    if isinstance(value, str):
        return mend(value)
    if isinstance(value, dict):
        return {mend(str(k)) if isinstance(k, str) else k: mend_all(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mend_all(v) for v in value]
    return value


def retried_mended(fn: Callable[[str], T], text: str) -> T:
    """``fn(text)``; when ``text`` cannot be encoded as UTF-8 (a C library encodes it
    first: RE2), ``fn`` of the mended text. Nothing is scanned twice when all is well."""
    try:
        return fn(text)
    except UnicodeEncodeError:
        return fn(mend(text))


def finditer(pattern: Any, text: str) -> Iterator[Any]:
    """``pattern.finditer(text)`` (RE2, which encodes the whole text once, at the first
    match), over the mended text when ``text`` cannot be encoded; positions hold in
    ``text`` either way (:func:`mend` is one for one)."""
    matches = pattern.finditer(text)
    try:
        first = next(matches, None)
    except UnicodeEncodeError:
        matches = pattern.finditer(mend(text))
        first = next(matches, None)
    if first is not None:
        yield first
        yield from matches
