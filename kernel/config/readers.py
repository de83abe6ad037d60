"""How the tables whose model alone does not say it are read: defaults that are not the
model's (the built-in providers and CLIs), checks between the keys of one table, paths
resolved from config.toml's folder, tables absent meaning "off".

Each reader takes the table as the file has it (None when absent) and the :class:`Load`
it is read under, and returns the field's value; :class:`kernel.config.model.Config`
names its reader in the field's annotation (:class:`Reader`). A table without one is read
by its annotation alone (:func:`read_table`). Checks spanning tables are the model's
validators (:mod:`kernel.config.checks`).
"""

from __future__ import annotations

import os
import re
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kernel.config.channels import CHANNEL_MODELS, ChannelsConfig, QQChannelConfig
from kernel.config.cli import SPECS, CLIConfig, args_problem, cli_names
from kernel.config.gateway import MODEL_PATTERN_MAX, GatewayConfig
from kernel.config.general import GeneralConfig, TelegramConfig
from kernel.config.mcp import MCPServerConfig, MCPSettings, server_problem
from kernel.config.memory import EmbeddingsConfig, MemoryConfig
from kernel.config.net import is_loopback
from kernel.config.prompts import PromptsConfig, missing_layers
from kernel.config.providers import DEFAULT_PROVIDERS, ProviderConfig, TitlesConfig
from kernel.config.routing import RoutingConfig, RoutingRule, compile_pattern
from kernel.config.schema import (
    Section,
    bad_choice,
    bad_type_text,
    default_of,
    expected,
    read_section,
    require_table,
    unwrap,
)
from kernel.config.voice import OPENAI_VOICE, SttConfig, TtsConfig
from kernel.config.web import WebConfig, WebSearchConfig
from kernel.core.errors import ConfigError
from kernel.core.i18n import t
from kernel.core.redact import is_secret_name

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(slots=True)
class Load:
    """What reading needs beyond a table: the environment (its overrides), where
    config.toml is (relative paths), whether the Telegram token is required, the provider
    types the plugins give (None: any) and the warnings gathered on the way."""

    env: Mapping[str, str]
    path: Path
    require_telegram: bool = True
    types: Collection[str] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def base(self) -> Path:
        return self.path.parent


@dataclass(frozen=True, slots=True)
class Reader:
    """A field's reader (in its ``Annotated`` metadata); ``table``: the table it reads
    when that is not the field's own name."""

    read: Callable[[Any, Load], Any]
    table: str = ""


def read_table(annotation: Any, table: Any, name: str, load: Load) -> Any:
    """A table read by its annotation: a section (absent: its defaults), an optional
    section (absent: None) or sections by name (``[tools.<name>]``)."""
    base = unwrap(annotation)
    if isinstance(base, type) and issubclass(base, Section):
        if table is None and _optional(annotation):
            return None
        return read_section(base, {} if table is None else table, name, load.env)
    args = typing.get_args(base)
    model = args[1] if typing.get_origin(base) is dict else None
    if isinstance(model, type) and issubclass(model, Section):
        tables = require_table({} if table is None else table, name)
        return {key: _named(model, value, name, key, load) for key, value in tables.items()}
    return {} if table is None else table


def _named(model: type[Section], table: Any, section: str, key: str, load: Load) -> Section:
    """``[<section>.<key>]``; a model with a ``name`` field is told its table's name."""
    fixed: dict[str, Any] = {"name": key} if "name" in model.model_fields else {}
    return read_section(model, table, f"{section}.{key}", load.env, table_name=key, **fixed)


def _optional(annotation: Any) -> bool:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return type(None) in typing.get_args(annotation)


def resolve(base: Path, value: str | Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def read_general(table: Any, load: Load) -> GeneralConfig:
    general = read_section(GeneralConfig, {} if table is None else table, "general", load.env)
    return finish_general(general, load.base)


def finish_general(general: GeneralConfig, base: Path) -> GeneralConfig:
    general.default_workspace = resolve(base, general.default_workspace)
    general.data_dir = resolve(base, general.data_dir)
    general.soul = resolve(base, general.soul)
    try:
        ZoneInfo(general.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            t("config.bad_timezone", tz=general.timezone), key="general.timezone"
        ) from None
    return general


def read_telegram(table: Any, load: Load) -> TelegramConfig:
    telegram = read_section(TelegramConfig, {} if table is None else table, "telegram", load.env)
    if load.require_telegram and not telegram.token:
        raise ConfigError(t("config.missing_token"), key="telegram.token")
    if load.require_telegram and telegram.allowed_user <= 0:
        raise ConfigError(t("config.missing_user"), key="telegram.allowed_user")
    return telegram


def _known_type(key: str, kind: str, types: Collection[str] | None) -> None:
    if types is not None and kind not in types:
        raise bad_choice(key, tuple(types), kind)


def read_providers(section: Any, load: Load) -> dict[str, ProviderConfig]:
    """``[providers.<name>]``, the built-in pair when there is none; a provider without
    a key is kept (disabled, with a warning)."""
    if section is not None and not isinstance(section, dict):
        require_table(section, "providers")
    tables: dict[str, Any] = DEFAULT_PROVIDERS if section is None else section
    providers = {name: _provider(name, table, load) for name, table in tables.items()}
    for p in providers.values():
        if not p.keys:
            load.warnings.append(t("config.warn_provider_disabled", name=p.name, env=p.env_key))
    return providers


def _provider(name: str, table: Any, load: Load) -> ProviderConfig:
    prefix = f"providers.{name}"
    p = read_section(ProviderConfig, table, prefix, load.env, table_name=name, name=name)
    _known_type(f"{prefix}.type", p.type, load.types)
    if not p.default_model and p.models:
        p.default_model = p.models[0]
    if not p.default_model:
        raise ConfigError(t("config.missing_model", name=name), key=f"{prefix}.default_model")
    if p.default_model not in p.models:
        p.models.insert(0, p.default_model)
    if p.type == "claude" and p.max_tokens is None:
        raise ConfigError(t("config.missing_max_tokens", name=name), key=f"{prefix}.max_tokens")
    if p.capabilities is not None and "stream" not in p.capabilities:
        # Kernel streams every reply; no silent fallback to a blocking call.
        key = f"{prefix}.capabilities"
        raise ConfigError(t("config.needs_stream", key=key), key=key)
    for alias, target in p.aliases.items():
        if target not in p.models:
            key = f"{prefix}.aliases.{alias}"
            raise ConfigError(t("config.bad_alias", key=key, model=target), key=key)
    return p


def read_titles(section: Any, load: Load) -> TitlesConfig | None:
    if section is None:
        return None
    titles = read_section(TitlesConfig, section, "titles", load.env)
    _known_type("titles.type", titles.type, load.types)
    return titles if titles.api_key and titles.model else None


def read_stt(section: Any, load: Load) -> SttConfig | None:
    if section is None:
        return None
    stt = read_section(SttConfig, section, "stt", load.env)
    if not stt.model:
        raise ConfigError(t("config.missing_voice_model", key="stt.model"), key="stt.model")
    if not stt.api_key:
        load.warnings.append(t("config.warn_stt_disabled"))
        return None
    return stt


def read_tts(section: Any, load: Load) -> TtsConfig | None:
    if section is None:
        return None
    tts = read_section(TtsConfig, section, "tts", load.env)
    if tts.type == "openai" and "voice" not in section:
        tts.voice = OPENAI_VOICE
    if not tts.voice:
        raise ConfigError(t("config.missing_voice_model", key="tts.voice"), key="tts.voice")
    if tts.type == "openai" and not tts.model:
        raise ConfigError(t("config.missing_voice_model", key="tts.model"), key="tts.model")
    if tts.type == "openai" and not tts.api_key:
        load.warnings.append(t("config.warn_tts_disabled"))
        return None
    tts.ffmpeg = read_ffmpeg(section, load)
    return tts


def read_ffmpeg(section: Any, load: Load) -> str:
    """``[tts] ffmpeg``: a path (relative to config.toml's folder), or a bare command name
    looked up on PATH when used; empty when unset."""
    value = read_section(TtsConfig, section, "tts", load.env).ffmpeg if section is not None else ""
    if not value or os.sep not in value and not value.startswith("~"):
        return value
    return str(resolve(load.base, value))


def read_cli(section: Any, load: Load) -> dict[str, CLIConfig]:
    """Every registered CLI (``kernel.config.cli.SPECS``) with its defaults, under what
    ``[cli.<name>]`` says; an unregistered name is warned about and left out."""
    tables: dict[str, Any] = {name: spec.table() for name, spec in SPECS.items()}
    if section is not None:
        if not isinstance(section, dict):
            require_table(section, "cli")
        tables.update(section)
    out: dict[str, CLIConfig] = {}
    for name, table in tables.items():
        if name not in SPECS:
            names = ", ".join(cli_names())
            load.warnings.append(t("config.warn_unknown_cli", name=name, names=names))
            continue
        out[name] = _cli(name, table, load.env)
    return out


def _cli(name: str, table: Any, env: Mapping[str, str]) -> CLIConfig:
    prefix = f"cli.{name}"
    cli = read_section(
        CLIConfig, table, prefix, env, table_name=name, defaults=SPECS[name].table(), name=name
    )
    cli.command = cli.command.strip()
    if not cli.command:
        key = f"{prefix}.command"
        raise ConfigError(t("config.empty_command", key=key), key=key)
    if problem := args_problem(name, cli.args, cli.approvals):
        kind, flag = problem
        key = f"{prefix}.approvals" if kind == "approvals_cli" else f"{prefix}.args"
        raise ConfigError(t(f"config.cli_args_{kind}", key=key, flag=flag), key=key)
    return cli


def read_mcp(section: Any, load: Load) -> MCPSettings:
    """``[mcp]`` and its ``[[mcp.servers]]``; a server whose ``${VAR}`` is unset is
    left out with a warning."""
    section = {} if section is None else section
    settings = read_section(MCPSettings, section, "mcp", load.env)
    listed = section.get("servers", [])
    if not isinstance(listed, list):
        raise ConfigError(bad_type_text("mcp.servers", expected("list"), listed), key="mcp.servers")
    seen: set[str] = set()
    for i, table in enumerate(listed):
        server = _server(i, table, load, seen)
        if server is not None:
            settings.servers.append(server)
    return settings


def _server(i: int, table: Any, load: Load, seen: set[str]) -> MCPServerConfig | None:
    prefix = f"mcp.servers[{i}]"
    env = load.env
    server = read_section(MCPServerConfig, table, prefix, env, defaults={"name": f"server{i}"})
    name_key = f"{prefix}.name"
    if not server.name.strip():
        raise ConfigError(t("config.mcp_no_name", key=name_key), key=name_key)
    if server.name in seen:
        raise ConfigError(t("config.mcp_duplicate", key=name_key, name=server.name), key=name_key)
    seen.add(server.name)
    server.headers, missing = _expand_env(server.headers, env)
    server.env, missing_in_env = _expand_env(server.env, env)
    if missing or missing_in_env:
        var = missing or missing_in_env
        load.warnings.append(t("config.warn_mcp_env", name=server.name, var=var))
        return None
    server.cwd = resolve(load.base, table["cwd"]) if table.get("cwd") else None
    wrong = server_problem(server)
    if wrong is not None:
        key = f"{prefix}.{wrong[0]}"
        raise ConfigError(t(wrong[1], key=key), key=key)
    return server


def _expand_env(values: dict[str, str], env: Mapping[str, str]) -> tuple[dict[str, str], str]:
    """``${VAR}`` references replaced from ``env``; also the first unset variable ("" if none)."""
    out: dict[str, str] = {}
    missing = ""
    for key, value in values.items():
        refs = _ENV_REF.findall(value)
        missing = missing or next((v for v in refs if v not in env), "")
        out[key] = _ENV_REF.sub(lambda m: env.get(m.group(1), ""), value)
    return out, missing


def read_web(table: Any, load: Load) -> WebConfig:
    table = {} if table is None else table
    web = read_section(WebConfig, table, "web", load.env)
    search = table.get("search", {}) if isinstance(table, dict) else {}
    web.search = read_section(WebSearchConfig, search, "web.search", load.env)
    if web.search.provider == "searxng" and not web.search.base_url:
        key = "web.search.base_url"
        raise ConfigError(t("config.searxng_base_url", key=key), key=key)
    return web


def read_memory(table: Any, load: Load) -> MemoryConfig:
    table = {} if table is None else table
    memory = read_section(MemoryConfig, table, "memory", load.env)
    found = table.get("embeddings") if isinstance(table, dict) else None
    if found is not None:
        memory.embeddings = read_section(EmbeddingsConfig, found, "memory.embeddings", load.env)
    return memory


def read_routing(table: Any, load: Load) -> RoutingConfig:
    table = {} if table is None else table
    routing = read_section(RoutingConfig, table, "routing", load.env)
    rules = table.get("rules", [])
    if not isinstance(rules, list):
        raise ConfigError(
            bad_type_text("routing.rules", expected("array"), rules), key="routing.rules"
        )
    for index, item in enumerate(rules):
        routing.rules.append(_rule(index, item, load.env))
    return routing


def _rule(index: int, item: Any, env: Mapping[str, str]) -> RoutingRule:
    prefix = f"routing.rules[{index}]"
    rule = read_section(RoutingRule, item, prefix, env)
    if rule.pattern:
        try:
            compile_pattern(rule.pattern)
        except ValueError as exc:
            key = f"{prefix}.pattern"
            raise ConfigError(t("config.bad_pattern", key=key, detail=str(exc)), key=key) from None
    if rule.max_input_tokens and rule.max_input_tokens < rule.min_input_tokens:
        key = f"{prefix}.max_input_tokens"
        raise ConfigError(t("config.bad_token_range", key=key), key=key)
    return rule


def read_gateway(table: Any, load: Load) -> GatewayConfig:
    return gateway_section({} if table is None else table, load.env)


def gateway_section(table: Any, env: Mapping[str, str], *, check: bool = True) -> GatewayConfig:
    """``[gateway]``; ``check``: refuse what would expose the sidecar (off for the
    command-line client, which only needs where to reach it)."""
    gw = read_section(GatewayConfig, table, "gateway", env)
    for pattern in gw.model_aliases:
        if not 0 < len(pattern) <= MODEL_PATTERN_MAX:
            key = f"gateway.model_aliases.{pattern[:40]}"
            raise ConfigError(
                t("config.bad_model_pattern", key=key, limit=MODEL_PATTERN_MAX), key=key
            )
    if gw.auth == "none" and gw.api_key:
        raise ConfigError(t("config.gateway_none_with_key"), key="gateway.auth")
    if check and gw.enabled and gw.auth == "none" and not is_loopback(gw.host):
        raise ConfigError(t("config.gateway_none_remote", host=gw.host), key="gateway.auth")
    if check and gw.enabled and not gw.api_key and not is_loopback(gw.host):
        raise ConfigError(t("config.gateway_no_key", host=gw.host), key="gateway.api_key")
    return gw


def read_channels(table: Any, load: Load) -> ChannelsConfig:
    table = require_table({} if table is None else table, "channels")
    sections: dict[str, Any] = {
        name: read_section(model, table.get(name, {}), f"channels.{name}", load.env)
        for name, model in CHANNEL_MODELS.items()
    }
    channels = ChannelsConfig(**sections)
    webhook, qq = channels.webhook, channels.qq
    if webhook.enabled and not webhook.url:
        key = "channels.webhook.url"
        raise ConfigError(t("config.channel_needs", key=key), key=key)
    for name in ("api_base", "token_url"):  # empty: the platform's own address
        if not getattr(qq, name):
            setattr(qq, name, default_of(QQChannelConfig, name))
    if qq.enabled:
        for name in ("app_id", "client_secret"):
            if not getattr(qq, name):
                key = f"channels.qq.{name}"
                raise ConfigError(t("config.channel_needs", key=key), key=key)
    return channels


def read_prompts(table: Any, load: Load) -> PromptsConfig:
    prompts = read_section(PromptsConfig, {} if table is None else table, "prompts", load.env)
    missing = missing_layers(prompts, load.base)
    load.warnings += [t("config.warn_layer_missing", path=p) for p in missing]
    return prompts


def read_envs(table: Any, load: Load) -> dict[str, str]:
    """``[envs]``: variables given to tools and child processes, any name a variable may
    have; a value is text."""
    table = require_table({} if table is None else table, "envs")
    out: dict[str, str] = {}
    for name, value in table.items():
        key = f"envs.{name}"
        if not ENV_NAME.match(str(name)):
            raise ConfigError(t("config.bad_env_name", key=key), key=key)
        if not isinstance(value, str):
            text = bad_type_text(key, expected("str"), value, secret=is_secret_name(str(name)))
            raise ConfigError(text, key=key)
        out[str(name)] = value
    return out
