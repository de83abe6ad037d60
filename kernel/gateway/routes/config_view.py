"""``GET /config``: the configuration in effect (``config.toml`` with ``data/runtime.toml``
and the environment over it), read-only, as the config tree (:mod:`kernel.config.tree`)
knows it: one entry per table, keys as written in TOML.

No secret leaves, not even a part of one: every field the schema marks secret is shown
as ``[REDACTED]`` when set; ``[envs]`` by their names (the shared rule,
:func:`kernel.config.secrets.is_sensitive`: ``*_KEY``, ``*_TOKEN`` …, and for this page
also names ending in auth, pat or credential(s): ``GH_PAT``, ``--auth``); a secret flag's
value in a command's ``args`` (``--token X``, ``--pat=X``), a URL's password, and values
shaped like a credential whatever their name (``ghp_…``, ``sk-…``, ``AKIA…``); then every
string is passed through the log's redactor with the configured secrets, so a key pasted
where no marker expects it is masked too.
"""

from __future__ import annotations

import enum
import re
from pathlib import PurePath
from typing import Any

from aiohttp import web

from kernel.config.loader import Config
from kernel.config.schema import Secret, Section, is_toml, marker
from kernel.config.secrets import header_names_of, header_values_of, is_sensitive, secrets_of
from kernel.config.tree import SECTIONS
from kernel.core.redact import REDACTED, Redactor, secret_assignment
from kernel.gateway.api import Router, deps_of, json_response
from kernel.gateway.schema import OpenShape, Shape

router = Router("config", "The configuration in effect, secrets masked (read-only)")

# Values that are credentials by their shape whatever their name (GitHub, GitLab, Slack,
# OpenAI-style and AWS keys, JWTs): linear, a fixed prefix then a run of token characters.
_TOKEN_SHAPED = re.compile(
    r"\b(?:gh[pousr]_|github_pat_|glpat-|xox[abpr]-|sk-|sk_live_|rk_live_|AKIA|ASIA|AIza|eyJ)"
    r"[A-Za-z0-9_\-.]{12,}"
)
# Names the shared secret rule leaves alone (in prose "Pat" or "auth" are words) but a
# settings page had better hide: a flag, key or header ending in auth, pat or
# credential(s) (`--auth`, `GH_PAT`, `DEPLOY_CREDENTIALS`, `X-Custom-Auth`).
_VIEW_SECRET = re.compile(r"(?i)(?:^|[_\-.])(?:auth|pat|credentials?)$")
_VIEW_ASSIGNMENT = re.compile(
    r"(?i)(?:^|(?<=[^A-Za-z0-9]))(?:[A-Za-z0-9]+[_-])*(?:auth|pat|credentials?)[=:]\s*"
    r"([^\s&\"',;]+)"
)
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)([^/\s@]+)(@)")


class ConfigView(Shape):
    path: str
    sections: OpenShape
    warnings: list[str]


def _sensitive(name: str) -> bool:
    name = name.lstrip("-")
    return is_sensitive(name.replace("-", "_")) or _VIEW_SECRET.search(name) is not None


def _mask(value: Any) -> Any:
    """A secret, wholly: a page shows that it is set, never a part of it."""
    if isinstance(value, str):
        return REDACTED if value else ""
    if isinstance(value, int) and not isinstance(value, bool):
        return REDACTED if value else value
    return value


def _secret(mark: Secret, value: Any) -> Any:
    """A secret-marked field's value, masked by its kind."""
    if mark.kind in ("headers", "all_headers") and isinstance(value, dict):
        return {str(k): REDACTED for k in value}
    if isinstance(value, dict):
        return {str(k): _mask(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_mask(v) for v in value]
    return _mask(value)


def _args(items: list[Any]) -> list[Any]:
    """A command's arguments: the value after a secret flag (``--token X``) masked."""
    out: list[Any] = []
    secret_next = False
    for item in items:
        if secret_next and isinstance(item, str):
            out.append(REDACTED)
            secret_next = False
            continue
        secret_next = False
        out.append(_plain(item))
        if isinstance(item, str) and item.startswith("-") and "=" not in item:
            secret_next = _sensitive(item)
    return out


def _section(section: Section) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, info in type(section).model_fields.items():
        if not is_toml(info):
            continue
        key = info.validation_alias if isinstance(info.validation_alias, str) else name
        value = getattr(section, name)
        mark = marker(info, Secret)
        if mark is not None:
            out[key] = _secret(mark, value)
        elif key == "args" and isinstance(value, list):
            out[key] = _args(value)
        else:
            out[key] = _plain(value, key)
    return out


def _plain(value: Any, name: str = "") -> Any:
    """``value`` as JSON, secret-marked fields of sections masked on the way down."""
    if isinstance(value, Section):
        return _section(value)
    if isinstance(value, dict):
        return {
            str(k): _mask(v) if isinstance(v, str) and _sensitive(str(k)) else _plain(v, str(k))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return [_plain(v) for v in items]
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, PurePath):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        if isinstance(value, str) and name and _sensitive(name):
            return _mask(value)
        return value
    return str(value)


def _masked_text(text: str, redactor: Redactor) -> str:
    """A string with secret assignments (``token=X``), URL passwords and every known
    secret masked."""
    start = 0
    while (found := secret_assignment(text[start:])) is not None:
        _, begin, end = found
        begin, end = begin + start, end + start
        if begin == end:
            break
        masked = REDACTED
        text = text[:begin] + masked + text[end:]
        start = begin + len(masked)
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + m.group(3), text)
    text = _TOKEN_SHAPED.sub(REDACTED, text)
    text = _VIEW_ASSIGNMENT.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + REDACTED, text)
    return redactor.redact(text)


def _sweep(value: Any, redactor: Redactor) -> Any:
    if isinstance(value, str):
        return _masked_text(value, redactor)
    if isinstance(value, dict):
        return {_masked_text(k, redactor): _sweep(v, redactor) for k, v in value.items()}
    if isinstance(value, list):
        return [_sweep(v, redactor) for v in value]
    return value


def config_view(config: Config) -> dict[str, Any]:
    """The configuration as JSON, secrets masked (see the module's docstring)."""
    sections: dict[str, Any] = {}
    for table in SECTIONS:
        if table == "envs":
            sections[table] = {
                k: _mask(v) if _sensitive(k) else v for k, v in sorted(config.envs.items())
            }
            continue
        part = _plain(getattr(config, table))
        if table == "mcp" and isinstance(part, dict):
            part["servers"] = _plain(config.mcp_servers)
        sections[table] = part
    redactor = Redactor(secrets_of(config), header_names_of(config), header_values_of(config))
    body = {"path": str(config.path), "sections": sections, "warnings": list(config.warnings)}
    swept: dict[str, Any] = _sweep(body, redactor)
    return swept


@router.get(
    "/config",
    summary="The configuration in effect, every secret masked (read-only)",
    response=ConfigView,
)
async def get_config(request: web.Request) -> web.Response:
    return json_response(config_view(deps_of(request).config))
