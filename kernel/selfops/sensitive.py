"""What SelfOps treats as sensitive: the keys a settings change sets and the lines a file
change adds, judged by the one rule of :mod:`kernel.config.secrets` (names) and
:func:`kernel.core.redact.secret_assignment` (free text); and the masking of what a
preview shows.

A secret may hide in JSON inside JSON (``{"env": "{\\"OPENAI_API_KEY\\": \\"sk-…\\"}"}``):
each line is also read with its JSON string escapes decoded, up to :data:`NESTED_DEPTH`
times, and a value that is a JSON document is read as one."""

from __future__ import annotations

import json
import re
from typing import Any

from kernel.config.providers import ProviderConfig
from kernel.config.secrets import is_sensitive, secret_fields
from kernel.core import safejson
from kernel.core.redact import mask_secret, secret_assignment

NESTED_DEPTH = 3  # JSON strings inside JSON strings, decoded at most this deep
# One escape at a time, each of a fixed length: linear on any line.
_ESCAPE = re.compile(r'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])')
_DOCUMENT_MAX = 64 * 1024  # a longer string value is not parsed as a JSON document
# Arrays/objects inside each other that sensitive_keys reads, nested documents counted:
# what lies deeper is not read and its path counts as sensitive.
_KEYS_DEPTH = 2 * safejson.MAX_DEPTH


def _unescape(match: re.Match[str]) -> str:
    decoded: str = json.loads(f'"{match.group(0)}"')
    return decoded


def _views(line: str) -> list[str]:
    """``line`` and its JSON-unescaped readings, the deepest last."""
    views = [line]
    while len(views) <= NESTED_DEPTH and "\\" in views[-1]:
        decoded = _ESCAPE.sub(_unescape, views[-1])
        if decoded == views[-1]:
            break
        views.append(decoded)
    return views


def _escaped(value: str, depth: int) -> str:
    """``value`` as it reads ``depth`` JSON strings deep."""
    for _ in range(depth):
        value = json.dumps(value, ensure_ascii=False)[1:-1]
    return value


def _line_secret(line: str) -> tuple[str, str, int, int] | None:
    """The first sensitive assignment in any reading of ``line``: (name, value, and the
    value's place in ``line`` when it is found there as written, else -1, -1)."""
    for depth, view in enumerate(_views(line)):
        found = secret_assignment(view)
        if found is None:
            continue
        name, start, end = found
        if depth == 0:
            return name, view[start:end], start, end
        return name, view[start:end], -depth, -depth
    return None


def mask_lines(text: str) -> str:
    """What follows a sensitive-looking assignment masked, so a diff never shows a secret
    (one found in a nested JSON string is masked wherever it appears on the line)."""
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        found = _line_secret(body)
        if found is not None and found[1]:
            name, value, start, end = found
            if start >= 0:
                body = body[:start] + mask_secret(value) + body[end:]
            else:
                body = _masked_nested(body, name, value)
        out.append(body + line[len(line.rstrip("\r\n")) :])
    return "".join(out)


def _masked_nested(body: str, name: str, value: str) -> str:
    """``body`` with a secret found in a nested JSON string masked wherever it appears;
    when it is written with other escapes (``\\/``, ``\\u002d``) and so not found as
    re-escaped, everything from the secret's name (or the whole line) is masked."""
    shown = mask_secret(value)
    masked_body = body
    for depth in range(NESTED_DEPTH, 0, -1):
        masked_body = masked_body.replace(_escaped(value, depth), shown)
    masked_body = masked_body.replace(value, shown)
    if not _shows(masked_body, value):
        return masked_body
    at = body.find(name)
    kept = body[: at + len(name)] if at >= 0 else ""
    return f"{kept} {shown}" if kept and not _shows(kept, value) else shown


def _shows(text: str, value: str) -> bool:
    """``value`` can be read in ``text`` as written or in one of its decoded readings."""
    return any(value in view for view in _views(text))


def added_sensitive(before: str, after: str) -> list[str]:
    """Names of sensitive-looking assignments on lines the change adds."""
    old = set(before.splitlines())
    found: list[str] = []
    for line in after.splitlines():
        match = None if line in old else _line_secret(line)
        if match:
            found.append(match[0])
    return found


def _document(value: str, depth: int) -> Any:
    """A string value that is itself a JSON object (or array), parsed; else None."""
    text = value.strip()
    if depth >= NESTED_DEPTH or len(text) > _DOCUMENT_MAX or text[:1] not in ("{", "["):
        return None
    try:  # depth-limited: a hostile value is refused, never a RecursionError
        return safejson.loads(text)
    except ValueError:  # not JSON, too deep, a number out of range, a lone surrogate
        return None


def sensitive_keys(value: Any, path: str, depth: int = 0, level: int = 0) -> list[str]:
    """Dotted names (``<provider>.<key>…``) of sensitive keys an operation sets: the
    provider keys the schema marks secret (``api_key``, every header: a header often
    carries a credential), and any name the secret-name rule accepts (``*_KEY`` …), also
    inside a string value that is a JSON document. ``level``: arrays/objects above this
    one; past :data:`_KEYS_DEPTH` the path itself counts as sensitive, unread."""
    parts = path.split(".") if path else []
    name = parts[-1] if parts else ""
    # An endpoint change decides where the provider's key is sent: as sensitive as the key.
    redirect = name in ("api_base", "base_url")
    marked = any(part in secret_fields(ProviderConfig) for part in parts[1:])
    found = [path] if path and (is_sensitive(name) or redirect or marked) else []
    return found + _keys_inside(value, path, depth, level)


def _keys_inside(value: Any, path: str, depth: int, level: int) -> list[str]:
    """:func:`sensitive_keys` of what ``value`` (at ``path``) holds."""
    if level > _KEYS_DEPTH:
        return [path or "(too deep)"]
    if isinstance(value, str):
        inner = _document(value, depth)
        if inner is not None:
            value, depth = inner, depth + 1
    found: list[str] = []
    if isinstance(value, list):  # an item is at its list's path: not named again
        for item in value:
            found += _keys_inside(item, path, depth, level + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            found += sensitive_keys(item, where, depth, level + 1)
    return found


def masked(value: Any, under_headers: bool = False) -> Any:
    """A ``[providers]`` table as a preview shows it: secrets and header values masked."""
    if isinstance(value, dict):
        return {
            k: (
                mask_secret(v)
                if isinstance(v, str) and (under_headers or is_sensitive(str(k)))
                else masked(v, under_headers or k == "headers")
            )
            for k, v in value.items()
        }
    return value
