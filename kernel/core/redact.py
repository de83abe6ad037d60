"""Masking of secrets in anything that may reach a log or a user (seed 004 "安全").

Two kinds of rule:

- **Known secrets** (the configured token and keys, see ``kernel.config.secrets``) are
  masked wherever they appear: first 4 + last 4 characters, or entirely when 8 or shorter.
- **Shapes** are masked whatever their value: HTTP credential headers (``Authorization``,
  ``Cookie``, ``X-API-Key``, MCP header names…) become ``[REDACTED]``, as do ``Bearer``
  credentials and key-like query parameters; a Telegram bot token in a Bot API URL or on
  its own is masked like a known secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

REDACTED = "[REDACTED]"

# Header names whose values are always replaced whole (seed 004: headers never keep a
# fragment). Configured provider/MCP header names are added per Redactor.
CREDENTIAL_HEADERS = (
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "api_key",
    "apikey",
    "access_token",
    "client_secret",
    "password",
)

# A bot token: numeric bot id, a colon, then the secret part (35 characters in practice).
_BOT_URL = re.compile(r"(/bot)(\d+:[^/\s'\"]+)")
_BOT_TOKEN = re.compile(r"(?<![\w/])(\d{6,}:[A-Za-z0-9_-]{30,})(?![\w-])")
_BEARER = re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9._~+/=:-]{8,}")
_QUERY = re.compile(
    r"(?i)([?&](?:key|api_key|apikey|token|access_token|secret|password|sig|signature)=)"
    r"[^&\s'\"#]+"
)
# Quoted values inside exception messages and library log lines: repr'd strings and
# bytes, "quoted" names. A single quote right after a letter is an apostrophe (can't).
_QUOTED = re.compile(r"""(?<![A-Za-z])(b?)('[^'\r\n]*'|"[^"\r\n]*")""")


# A name given a value, in the shapes text takes: `name = v`, `name: v`, `"name": "v"`
# (JSON, YAML), `<name>v</name>` (XML), `--name v` / `--name=v` (command lines) and
# `| name | v |` (Markdown tables). Linear: a name starts only where no name character
# precedes it, and every run is possessive, so no run is rescanned from each position.
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<flag>--?)?+(?P<name>[A-Za-z_][A-Za-z0-9_.-]*+)"
    r"""(?:>|["']?+[ \t]*+[:=][ \t]*+|(?P<cell>[ \t]*+\|[ \t]*+)|(?(flag)[ \t]++|(?!)))"""
)
# The value after it: an optional quote and Bearer/Basic scheme, then the value itself.
_VALUE = re.compile(r"""["']?+(?:[Bb]earer[ \t]++|[Bb]asic[ \t]++)?+([^"'<>,;|\s]++)""")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Beyond api_key / *_KEY / *_TOKEN / *_SECRET: what a text may hold a secret in.
_SECRET_NAMES = frozenset(
    {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "AUTHORIZATION", "COOKIE", "APIKEY", "BEARER"}
)
_SECRET_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_COOKIE")


def is_secret_name(name: str) -> bool:
    """Whether a name (a key, a header, a flag, a table cell) holds a secret: ``api_key``,
    ``*_KEY``/``*_TOKEN``/``*_SECRET``/``*_PASSWORD``, ``token``, ``Authorization``, the
    credential header names, in any case and in camelCase (``accessToken``, ``apiKey``);
    a dotted name is judged by its last part."""
    last = name.rsplit(".", 1)[-1]
    if last.lower() in CREDENTIAL_HEADERS:
        return True
    upper = _CAMEL.sub("_", last).upper().replace("-", "_")
    return upper == "API_KEY" or upper in _SECRET_NAMES or upper.endswith(_SECRET_SUFFIXES)


def _secret_like(value: str) -> bool:
    """A flag's or a table cell's value that looks like a credential, not a word of
    prose (``--token <yours>``, ``| token | the bot's token |``): 8+ characters with a
    digit."""
    return len(value) >= 8 and any(c.isdigit() for c in value)


def secret_assignment(line: str) -> tuple[str, int, int] | None:
    """The first sensitive name given a value on ``line``: (name, start, end of the
    value), or None. Shared by SelfOps' sensitive-field check and its masked diff."""
    for match in _ASSIGNMENT.finditer(line):
        name = match.group("name")
        if not is_secret_name(name):
            continue
        value = _VALUE.match(line, match.end())
        if value is None:
            if match.group("cell") is None and match.group("flag") is None:
                return name, match.end(), match.end()  # `token =` at the end: still a key
            continue
        spaced = match.group("flag") is not None and line[match.end() - 1] in " \t"
        if (spaced or match.group("cell") is not None) and not _secret_like(value.group(1)):
            continue
        return name, value.start(1), value.end(1)
    return None


SHOW_EDGES_FROM = 16  # shorter secrets are masked whole


def mask_secret(secret: str) -> str:
    """First 4 + last 4 characters (seed 004), for secrets long enough that those 8 say
    little: a 9-character secret would show 8 of its 9, so anything under
    SHOW_EDGES_FROM characters is masked whole (one ``*`` per character)."""
    if len(secret) < SHOW_EDGES_FROM:
        return "*" * len(secret)
    return f"{secret[:4]}…{secret[-4:]}"


def hide_quoted(text: str) -> str:
    """Replace every quoted value with ``'…'``: what libraries quote in their messages is
    data (a file name, a search query, a tool argument), and it may be the owner's."""
    return _QUOTED.sub(lambda m: f"{m.group(1)}{m.group(2)[0]}…{m.group(2)[0]}", text)


def _variants(secret: str) -> set[str]:
    """The forms a secret takes in text: as configured, stripped (a pasted key with a
    newline), escaped (how ``repr`` of bytes shows it), and each word of a header value
    such as ``Bearer sk-…``."""
    found = {secret, secret.strip()}
    found.add(secret.encode("unicode_escape").decode("ascii"))
    found.update(word for word in secret.split() if len(word) >= 8)
    return {v for v in found if v}


class Redactor:
    """All the rules, compiled once for one set of secrets."""

    def __init__(
        self,
        secrets: Iterable[str] = (),
        header_names: Iterable[str] = (),
        opaque: Iterable[str] = (),
    ) -> None:
        """``opaque``: values never shown even in part (header values, seed 004: headers
        are always ``[REDACTED]``); other secrets keep their first and last 4."""
        secrets, header_names = list(secrets), list(header_names)
        opaque = [o for o in opaque if o]
        self.secrets, self.header_names, self.opaque = secrets, header_names, opaque
        replacements: dict[str, str] = {}
        short: set[str] = set()
        for value in opaque:
            for variant in _variants(value):
                if len(variant) >= 4:
                    replacements[variant] = REDACTED
                    if len(variant) < 8:
                        short.add(variant)
        for secret in secrets:
            for value in _variants(secret):
                if value in replacements:
                    continue  # an opaque value stays wholly hidden
                if len(value) >= 8:
                    replacements[value] = mask_secret(value.strip())
                    if len(value) > 12:
                        # Servers often echo a key partly masked: hide any long visible tail.
                        replacements.setdefault(value[-12:], "…" + value[-4:])
                elif len(value) >= 4:
                    short.add(value)
        for value in short:
            replacements.setdefault(value, "*" * len(value))
        # Longest first, so a key is masked whole before its tail is considered.
        parts = []
        for value in sorted(replacements, key=len, reverse=True):
            escaped = re.escape(value)
            if value in short:
                # Short values only as whole words: a 5-character key must not mask
                # every number or word that happens to contain it.
                escaped = rf"(?<![A-Za-z0-9]){escaped}(?![A-Za-z0-9])"
            parts.append(escaped)
        self._replacements = replacements
        self._secrets = re.compile("|".join(parts)) if parts else None
        names = {n.lower() for n in (*CREDENTIAL_HEADERS, *header_names) if n}
        alternation = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        # `Name: value` to the end of the line, or a quoted value after a quoted name
        # ('authorization': 'Bearer …', (b"cookie", b"a=1")).
        self._headers = re.compile(
            rf"(?i)(['\"]?)(?<![\w-])({alternation})(?![\w-])\1"
            rf"(\s*+[:=]\s*+|(?<=['\"])\s*+,\s*+)"
            r"(?:(b?['\"])[^'\"\r\n]*(['\"])|(?!\s*+\[REDACTED\])[^\r\n]*)"
        )

    def __call__(self, text: str) -> str:
        return self.redact(text)

    def with_secrets(self, more: Iterable[str], opaque: Iterable[str] = ()) -> Redactor:
        """A redactor that also masks ``more`` and hides ``opaque`` wholly (rules are
        compiled once, so a new one)."""
        added = [s for s in more if s and s not in self.secrets]
        hidden = [s for s in opaque if s and s not in self.opaque]
        if not added and not hidden:
            return self
        return Redactor([*self.secrets, *added], self.header_names, [*self.opaque, *hidden])

    def redact(self, text: str) -> str:
        if not text:
            return text
        text = self._headers.sub(self._header_value, text)
        text = _BEARER.sub(rf"\1\2{REDACTED}", text)
        text = _QUERY.sub(rf"\1{REDACTED}", text)
        if self._secrets is not None:
            text = self._secrets.sub(lambda m: self._replacements[m.group(0)], text)
        text = _BOT_URL.sub(lambda m: m.group(1) + mask_secret(m.group(2)), text)
        return _BOT_TOKEN.sub(lambda m: mask_secret(m.group(1)), text)

    @staticmethod
    def _header_value(m: re.Match[str]) -> str:
        head = f"{m.group(1)}{m.group(2)}{m.group(1)}{m.group(3)}"
        if m.group(4) is not None:
            return f"{head}{m.group(4)}{REDACTED}{m.group(5)}"
        return head + REDACTED


@lru_cache(maxsize=32)
def _cached(secrets: tuple[str, ...]) -> Redactor:
    return Redactor(secrets)


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every known secret masked and every credential shape redacted."""
    return _cached(tuple(sorted(set(secrets))))(text)
