"""JSON from outside (HTTP bodies, callbacks) read safely, and JSON out always valid.

``json.loads`` alone turns hostile input into crashes: nesting deeper than the
interpreter's recursion limit raises ``RecursionError``, an integer of more than 4,300
digits raises a bare ``ValueError``, ``1e999`` becomes ``inf``, and ``NaN``/``Infinity``
are accepted and later written back out as invalid JSON. :func:`loads` refuses all of
these with one :class:`UnsafeJSONError` (a ``ValueError``) whose message names the
problem; :func:`dumps` never writes ``NaN``/``Infinity``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from kernel.core.i18n import t

MAX_DEPTH = 100  # arrays/objects inside each other
MAX_INT = 2**63  # integers must fit SQLite's (and most clients') 64-bit integers
MAX_NUMBER_CHARS = 100  # a float literal longer than this is not a measurement


class UnsafeJSONError(ValueError):
    """Parseable, perhaps, but refused: too deep, a number too large, NaN/Infinity."""


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
    try:
        data = json.loads(
            raw,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except RecursionError:
        raise UnsafeJSONError(t("json.too_deep", limit=MAX_DEPTH)) from None
    _check_depth(data)
    return data


def _check_depth(data: Any) -> None:
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
