"""JSON from outside (HTTP bodies, callbacks) read safely, and JSON out always valid.

``json.loads`` alone turns hostile input into crashes: nesting deeper than the
interpreter's recursion limit raises ``RecursionError``, an integer of more than 4,300
digits raises a bare ``ValueError``, ``1e999`` becomes ``inf``, and ``NaN``/``Infinity``
are accepted and later written back out as invalid JSON. :func:`loads` refuses all of
these with one :class:`UnsafeJSONError` (a ``ValueError``) whose message names the
problem; :func:`dumps` never writes ``NaN``/``Infinity``.

A lone surrogate (``"\\ud800"``: valid JSON, not text) is judged here too, once: inside a
field of people's words (:data:`WORDS`: a message, a prompt, a file's content) each one
becomes U+FFFD, so nothing sent is lost and the text can be stored and sent on; anywhere
else (a name, a key, an id, a value that must stay exact) it is refused with
:class:`LoneSurrogateError` naming the field.
"""

from __future__ import annotations

import json
import math
from typing import Any

from kernel.core.i18n import t
from kernel.core.surrogates import has_lone, may_carry, mend

MAX_DEPTH = 100  # arrays/objects inside each other
MAX_INT = 2**63  # integers must fit SQLite's (and most clients') 64-bit integers
MAX_NUMBER_CHARS = 100  # a float literal longer than this is not a measurement


# Fields whose strings (at any depth inside them) are people's words, not names.
WORDS = frozenset(
    {
        "input",
        "messages",
        "message",
        "content",
        "text",
        "system",
        "instructions",  # /v1/responses: the system prompt
        "body",
        "description",
        "prompt",
    }
)


class UnsafeJSONError(ValueError):
    """Parseable, perhaps, but refused: too deep, a number too large, NaN/Infinity."""


class LoneSurrogateError(UnsafeJSONError):
    """A lone surrogate outside people's words: ``field`` names where (``a.b[0]``)."""

    def __init__(self, field: str) -> None:
        super().__init__(t("json.lone_surrogate", field=field))
        self.field = field


def _parse_int(text: str) -> int:
    value = int(text) if len(text) <= 20 else MAX_INT
    if not -MAX_INT <= value < MAX_INT:
        raise UnsafeJSONError(t("json.big_number", limit="2^63"))
    return value


def _parse_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise UnsafeJSONError(t("json.big_number", limit=f"{MAX_NUMBER_CHARS} characters"))
    value = float(text)
    if not math.isfinite(value):
        raise UnsafeJSONError(t("json.big_number", limit="±1.8e308"))
    return value


def _parse_constant(name: str) -> Any:
    raise UnsafeJSONError(t("json.not_finite", name=name))


def loads(raw: bytes | str) -> Any:
    """The parsed document, or :class:`UnsafeJSONError`, :class:`json.JSONDecodeError`
    or :class:`UnicodeDecodeError` (all ``ValueError``)."""
    if isinstance(raw, bytes | bytearray):
        # Strictly: ``json.loads`` decodes bytes with ``surrogatepass``, so the encoded
        # surrogate ED A0 80 would become a lone surrogate with no escape to find.
        raw = bytes(raw).decode(json.detect_encoding(raw))
    try:
        data = json.loads(
            raw,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except RecursionError:
        raise UnsafeJSONError(t("json.too_deep", limit=MAX_DEPTH)) from None
    check_depth(data)
    if may_carry(raw):
        _mend_words(data)
    return data


def _mend_words(data: Any) -> None:
    """Lone surrogates mended in place inside :data:`WORDS`, refused anywhere else."""
    if isinstance(data, str) and has_lone(data):
        raise LoneSurrogateError("body")
    stack: list[tuple[Any, str, bool]] = (
        [(data, "", False)] if isinstance(data, dict | list) else []
    )
    while stack:
        node, path, words = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            if isinstance(key, str):
                if has_lone(key):  # a name: refused, shown mended
                    raise LoneSurrogateError(f"{path}.{mend(key)}" if path else mend(key))
                where = f"{path}.{key}" if path else key
            else:
                where = f"{path}[{key}]"
            inside = words or key in WORDS
            if isinstance(child, str) and has_lone(child):
                if not inside:
                    raise LoneSurrogateError(where)
                node[key] = mend(child)
            elif isinstance(child, dict | list):
                stack.append((child, where, inside))


def check_depth(data: Any) -> None:
    """:class:`UnsafeJSONError` when ``data`` nests deeper than :data:`MAX_DEPTH`."""
    stack: list[tuple[Any, int]] = [(data, 1)] if isinstance(data, dict | list) else []
    while stack:
        node, depth = stack.pop()
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, dict | list):
                if depth >= MAX_DEPTH:
                    raise UnsafeJSONError(t("json.too_deep", limit=MAX_DEPTH))
                stack.append((child, depth + 1))


def dumps(data: Any, **kw: Any) -> str:
    """``json.dumps`` that writes ``null`` for a non-finite float (one read from a TOML
    file, say) instead of the invalid ``NaN``/``Infinity``."""
    try:
        return json.dumps(data, allow_nan=False, **kw)
    except ValueError:
        return json.dumps(_finite(data), allow_nan=False, **kw)


def _finite(data: Any) -> Any:
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: _finite(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(value) for value in data]
    return data
