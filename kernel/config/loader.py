"""Locate ``config.toml``, layer ``data/runtime.toml`` over it and read the result as
:class:`kernel.config.model.Config` (every section through its model, then the checks
that span sections).

Every refusal is a :class:`ConfigError` whose text is one line naming the key and the
fix, worded in the language the file (or ``KERNEL_LANGUAGE``) asks for; ``kernel.__main__``
prints it and exits with code 2. Loading never sets the process's language: the config
holds it (``general.language``, :func:`language_of` without the rest of the file) and the
program's entry points set it. Without a ``config.toml`` the built-in defaults apply;
they equal ``config.example.toml`` (a test keeps them so).
"""

from __future__ import annotations

import contextlib
import copy
import os
import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from kernel.config.gateway import GatewayConfig
from kernel.config.general import GeneralConfig
from kernel.config.mcp import merge_servers
from kernel.config.model import RUNTIME_FILE, Config
from kernel.config.providers import DEFAULT_PROVIDERS
from kernel.config.readers import Load, finish_general, gateway_section, resolve
from kernel.config.schema import bad_choice, default_of, read_section
from kernel.config.sidecar_key import sidecar_key
from kernel.config.tree import unknown_keys
from kernel.core.errors import ConfigError
from kernel.core.i18n import LANGUAGES, get_language, speaking, t

_DEFAULT_LANGUAGE: str = default_of(GeneralConfig, "language")


def locate_config(env: Mapping[str, str]) -> Path:
    """``KERNEL_CONFIG`` if set (it must exist), else ``./config.toml`` (which may not)."""
    explicit = env.get("KERNEL_CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(t("config.not_found", path=path), key="KERNEL_CONFIG")
        return path.resolve()
    return (Path.cwd() / "config.toml").resolve()


def load_config(
    path: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    require_telegram: bool = True,
    overlay: dict[str, Any] | None = None,
    provider_types: Collection[str] | None = None,
    model: type[Config] = Config,
) -> Config:
    """Read, layer ``data/runtime.toml`` over it, override from ``env``, validate.
    Raises ConfigError on the first refusal. ``overlay`` replaces the runtime file's
    contents (a change is validated this way before it is written). ``provider_types``:
    the type names the plugins provide (the composition root knows them); given, a
    provider or titles ``type`` outside them is refused as it is read. ``model``: the
    configuration's model (a test's extension of :class:`Config`)."""
    env = os.environ if env is None else env
    with _speaking(env.get("KERNEL_LANGUAGE")):  # so that even a bad file is refused in it
        path = locate_config(env) if path is None else path.resolve()
        raw: dict[str, Any] = {}
        if path.is_file():
            raw = _read_toml(path, path.name)
        if overlay is None:
            overlay = read_overlay(_data_dir_of(raw, path.parent) / RUNTIME_FILE)
        merged = merge_overlay(raw, overlay)
        with speaking(_language(merged, env)):
            load = Load(env, path, require_telegram, provider_types)
            config = model.model_validate(merged, context=load)
            unknown = unknown_keys(merged, model)
            config.warnings += [t("config.warn_unknown_key", key=k) for k in unknown]
    return config


def language_of(path: Path | None = None, env: Mapping[str, str] | None = None) -> str:
    """The language ``KERNEL_LANGUAGE`` or config.toml's ``general.language`` asks for,
    read without the rest of the file, for a program's entry point to set; the current
    one when they name none Kernel has or the file cannot be read."""
    env = os.environ if env is None else env
    try:
        language = _wanted(_raw(path, env), env)
    except ConfigError:
        language = env.get("KERNEL_LANGUAGE")
    return language if language in LANGUAGES else get_language()


def _speaking(language: str | None) -> contextlib.AbstractContextManager[None]:
    return speaking(language) if language in LANGUAGES else contextlib.nullcontext()


def _wanted(raw: dict[str, Any], env: Mapping[str, str]) -> Any:
    general = raw.get("general")
    table = general if isinstance(general, dict) else {}
    return env.get("KERNEL_LANGUAGE") or table.get("language", _DEFAULT_LANGUAGE)


def _language(raw: dict[str, Any], env: Mapping[str, str]) -> str:
    """The language asked for (refused when Kernel has no such one): the first thing read,
    so that every later refusal is worded in it."""
    language = _wanted(raw, env)
    if language not in LANGUAGES:
        raise bad_choice("general.language", LANGUAGES, language)
    return str(language)


def _read_toml(path: Path, shown: str) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(t("config.bad_toml", path=shown, detail=exc), key="") from None
    except UnicodeDecodeError:
        raise ConfigError(t("config.bad_toml", path=shown, detail="not UTF-8")) from None


def _raw(path: Path | None, env: Mapping[str, str]) -> dict[str, Any]:
    path = locate_config(env) if path is None else path.resolve()
    return _read_toml(path, path.name) if path.is_file() else {}


def _data_dir_of(raw: dict[str, Any], base: Path) -> Path:
    general = raw.get("general")
    value = general.get("data_dir") if isinstance(general, dict) else None
    return resolve(
        base, value if isinstance(value, str) else str(default_of(GeneralConfig, "data_dir"))
    )


def read_overlay(path: Path) -> dict[str, Any]:
    """The Kernel-managed overlay (SPEC §2); a missing file is an empty overlay."""
    if not path.is_file():
        return {}
    return _read_toml(path, str(path))


def merge_overlay(raw: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """``overlay`` over ``raw``: tables merge key by key, anything else is replaced,
    except ``[[mcp.servers]]``, merged by name (:func:`merge_servers`)."""
    merged = copy.deepcopy(raw)
    if "providers" in overlay and "providers" not in merged:
        # Without [providers.*] in config.toml the built-in pair applies; the overlay
        # changes that pair rather than replacing it.
        merged["providers"] = copy.deepcopy(DEFAULT_PROVIDERS)
    servers = _servers_of(merged)
    _merge_into(merged, overlay)
    if servers is not None and _servers_of(overlay) is not None:
        merged["mcp"]["servers"] = merge_servers(servers, overlay["mcp"]["servers"])
    return merged


def _servers_of(raw: dict[str, Any]) -> Any:
    mcp = raw.get("mcp")
    return mcp.get("servers") if isinstance(mcp, dict) else None


def _merge_into(target: dict[str, Any], overlay: dict[str, Any]) -> None:
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge_into(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def gateway_of(path: Path | None = None, env: Mapping[str, str] | None = None) -> GatewayConfig:
    """Only the [gateway] section (for the sidecar's command-line client, which must
    work whatever the rest of config.toml says)."""
    env = os.environ if env is None else env
    raw = _raw(path, env)
    with _speaking(_wanted(raw, env)):
        return gateway_section(raw.get("gateway", {}), env, check=False)


def sidecar_of(
    path: Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[GatewayConfig, str]:
    """:func:`gateway_of` and the key Kernel's own clients send (:func:`sidecar_key`: the
    configured one, else the file Kernel generated in the data directory; never made
    here)."""
    env = os.environ if env is None else env
    path = locate_config(env) if path is None else path.resolve()
    raw = _read_toml(path, path.name) if path.is_file() else {}
    gateway = gateway_of(path, env)
    return gateway, sidecar_key(gateway, _data_dir_of(raw, path.parent))


def general_of(path: Path | None = None, env: Mapping[str, str] | None = None) -> GeneralConfig:
    """Only the [general] section (data directory, time zone, language): for ``kernel
    audit``, which reads the database whatever the rest of config.toml says."""
    env = os.environ if env is None else env
    path = locate_config(env) if path is None else path.resolve()
    raw = _read_toml(path, path.name) if path.is_file() else {}
    with speaking(_language(raw, env)):
        general = read_section(GeneralConfig, raw.get("general", {}), "general", env)
        return finish_general(general, path.parent)
