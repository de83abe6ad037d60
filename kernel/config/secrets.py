"""What counts as a secret, decided in one place: the schema's :class:`Secret` markers
for configured values, and :func:`kernel.core.redact.is_secret_name` for names (envs,
SelfOps keys, free text). Everyone asks here:

- the log's redaction: :func:`secrets_of`, :func:`header_names_of`, :func:`header_values_of`;
- GET responses: :func:`masked_view` (channel settings), :func:`is_sensitive` (envs);
- SelfOps: :func:`is_sensitive` for the keys a change sets;
- refusals: a value under a secret-marked key is never printed back
  (:func:`kernel.config.schema.refusal`);
- child processes: :func:`child_env` (Kernel's own ``KERNEL_*`` variables never pass).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kernel.config.schema import Env, Secret, Section, marker, toml_keys
from kernel.core.redact import is_secret_name, mask_secret

if TYPE_CHECKING:
    from kernel.config.model import Config

# Header names sent with every request that carry no credential.
PUBLIC_HEADERS = frozenset({"user-agent", "accept", "accept-language", "content-type"})
KERNEL_PREFIX = "KERNEL_"  # Kernel's own variables: its keys, never a child's business


def is_sensitive(name: str) -> bool:
    """Whether a name (an env variable, a settings key, a header) holds a secret: the
    same rule the log and SelfOps' file scan use (``api_key``, ``*_KEY``, ``*_TOKEN``,
    ``*_SECRET``, ``*_PASSWORD``, ``Authorization`` …)."""
    return is_secret_name(name)


def _marked(value: Any) -> Iterator[tuple[Secret, Any]]:
    """(marker, value) of every secret-marked field in a configuration tree."""
    if isinstance(value, Section):
        for name, info in type(value).model_fields.items():
            mark = marker(info, Secret)
            item = getattr(value, name)
            if mark is not None:
                yield mark, item
            else:
                yield from _marked(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _marked(item)
    elif isinstance(value, list):
        for item in value:
            yield from _marked(item)


def _config_parts(config: Config) -> Iterator[Any]:
    skip = {"path", "warnings", "envs", "source_env"}
    for name in type(config).model_fields:
        if name not in skip:
            yield getattr(config, name)


def _each(config: Config) -> Iterator[tuple[Secret, Any]]:
    for part in _config_parts(config):
        yield from _marked(part)


def _secret_headers(headers: dict[str, str], every: bool) -> dict[str, str]:
    return {k: v for k, v in headers.items() if every or k.lower() not in PUBLIC_HEADERS}


def secrets_of(config: Config) -> list[str]:
    """Every configured value that must never reach a log line or an error message."""
    found: list[str] = []
    for mark, value in _each(config):
        if mark.kind == "value" and isinstance(value, str):
            found.append(value)
        elif mark.kind in ("headers", "all_headers"):
            found += _secret_headers(value, mark.kind == "all_headers").values()
        elif mark.kind == "map":
            found += value.values()
        elif mark.kind == "list":
            found += [v for v in value if isinstance(v, str)]
    found += [v for k, v in config.envs.items() if is_sensitive(k)]
    return [s for s in found if s]


def header_names_of(config: Config) -> list[str]:
    """Configured header names whose values the log always shows as ``[REDACTED]``."""
    names: list[str] = []
    for mark, value in _each(config):
        if mark.kind in ("headers", "all_headers"):
            names += _secret_headers(value, mark.kind == "all_headers")
    return names


def header_values_of(config: Config) -> list[str]:
    """Configured secret header values: never shown even in part (seed 004)."""
    values: list[str] = []
    for mark, value in _each(config):
        if mark.kind in ("headers", "all_headers"):
            values += _secret_headers(value, mark.kind == "all_headers").values()
    return [v for v in values if v]


def secret_fields(model: type[Section]) -> dict[str, Secret]:
    """Key in the table → its marker, for a section's secret-marked keys."""
    out: dict[str, Secret] = {}
    for key, name in toml_keys(model).items():
        mark = marker(model.model_fields[name], Secret)
        if mark is not None:
            out[key] = mark
    return out


def env_variable(model: type[Section], key: str, table_name: str = "") -> str:
    """The ``KERNEL_*`` variable that overrides ``key`` of ``model`` ("" if none)."""
    name = toml_keys(model).get(key, key)
    override = marker(model.model_fields[name], Env)
    return override.variable(table_name) if override is not None else ""


def masked_view(section: Section) -> dict[str, Any]:
    """A section as JSON for a GET response: secret values masked (headers: each value)."""
    data = section.model_dump(mode="json", by_alias=False)
    for key, mark in secret_fields(type(section)).items():
        value = data.get(key)
        if isinstance(value, str):
            data[key] = mask_secret(value) if value else ""
        elif isinstance(value, dict) and mark.kind != "id":
            data[key] = {k: mask_secret(str(v)) for k, v in value.items()}
        elif isinstance(value, list):
            data[key] = [mask_secret(str(v)) for v in value]
    return data


def child_env(envs: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process (a coding CLI, a check probe): ``base``
    (default: this process's environment) minus Kernel's own ``KERNEL_*`` variables,
    which carry its keys and which a child has no business reading and could echo; then
    the owner's ``envs`` (config.toml ``[envs]`` under runtime.toml's) on top."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.startswith(KERNEL_PREFIX)}
    env.update(envs)
    return env
