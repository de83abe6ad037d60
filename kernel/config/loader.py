"""Locate ``config.toml``, layer ``data/runtime.toml`` over it, read every section through
its model (:func:`kernel.config.schema.read_section`), then the checks that span keys.

Every refusal is a :class:`ConfigError` whose text is one line naming the key and the
fix; ``kernel.__main__`` prints it and exits with code 2. Without a ``config.toml``
the built-in defaults apply; they equal ``config.example.toml`` (a test keeps them so).
"""

from __future__ import annotations

import copy
import os
import re
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kernel.config.channels import (
    CHANNEL_MODELS,
    ChannelsConfig,
    QQChannelConfig,
    webhook_worst_case,
)
from kernel.config.cli import CLI_NAMES, DEFAULT_CLI, CLIConfig, args_problem
from kernel.config.gateway import (
    MODEL_PATTERN_MAX,
    GatewayConfig,
    model_alias_target,
)
from kernel.config.general import (
    BudgetConfig,
    CronConfig,
    GeneralConfig,
    TelegramConfig,
    ToolPolicy,
)
from kernel.config.mcp import MCPServerConfig, MCPSettings, merge_servers, server_problem
from kernel.config.net import is_loopback
from kernel.config.prompts import FeaturesConfig, PromptsConfig, missing_layers
from kernel.config.providers import (
    DEFAULT_PROVIDERS,
    ProviderConfig,
    TitlesConfig,
    provider_env_key,
)
from kernel.config.routing import RoutingConfig, RoutingRule, compile_pattern, parse_ref
from kernel.config.schema import (
    bad_choice,
    bad_type_text,
    default_of,
    expected,
    read_section,
    require_table,
)
from kernel.config.secrets import is_sensitive
from kernel.config.sidecar_key import sidecar_key
from kernel.config.tree import unknown_keys
from kernel.config.voice import OPENAI_VOICE, SttConfig, TtsConfig
from kernel.config.web import AgentsConfig, WebConfig, WebSearchConfig
from kernel.core.errors import ConfigError
from kernel.core.i18n import LANGUAGES, set_language, t

RUNTIME_FILE = "runtime.toml"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(slots=True)
class Config:
    path: Path  # where config.toml is (or would be)
    telegram: TelegramConfig
    general: GeneralConfig
    providers: dict[str, ProviderConfig]
    titles: TitlesConfig | None
    cli: dict[str, CLIConfig]
    mcp_servers: list[MCPServerConfig]
    gateway: GatewayConfig
    warnings: list[str] = field(default_factory=list)
    tools: dict[str, ToolPolicy] = field(default_factory=dict)
    stt: SttConfig | None = None  # None: voice messages are refused
    tts: TtsConfig | None = None  # None: replies to voice come as text only
    ffmpeg: str = ""  # [tts] ffmpeg resolved, kept when spoken replies are off (kernel check)
    mcp: MCPSettings = field(default_factory=MCPSettings)
    # Variables given to tools and child processes (CLIs, MCP stdio servers): [envs] of
    # config.toml under runtime.toml's. Kept current by kernel.runtime; see child_env().
    envs: dict[str, str] = field(default_factory=dict)
    channels: ChannelsConfig = field(default_factory=ChannelsConfig)
    cron: CronConfig = field(default_factory=CronConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    routing: RoutingConfig = field(default_factory=RoutingConfig)
    web: WebConfig = field(default_factory=WebConfig)
    agents: AgentsConfig = field(default_factory=AgentsConfig)
    prompts: PromptsConfig = field(default_factory=PromptsConfig)
    features: FeaturesConfig = field(default_factory=FeaturesConfig)
    # The environment this was loaded with, so a runtime change re-validates the same way.
    source_env: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    @property
    def data_dir(self) -> Path:
        return self.general.data_dir

    @property
    def db_path(self) -> Path:
        return self.general.data_dir / "kernel.db"

    @property
    def runtime_path(self) -> Path:
        return self.general.data_dir / RUNTIME_FILE

    @property
    def enabled_providers(self) -> dict[str, ProviderConfig]:
        return {n: p for n, p in self.providers.items() if p.enabled}


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
) -> Config:
    """Read, layer ``data/runtime.toml`` over it, override from ``env``, validate.
    Raises ConfigError on the first refusal. ``overlay`` replaces the runtime file's
    contents (a change is validated this way before it is written). ``provider_types``:
    the type names the plugins provide (the composition root knows them); given, a
    provider or titles ``type`` outside them is refused as it is read."""
    env = os.environ if env is None else env
    if env.get("KERNEL_LANGUAGE") in LANGUAGES:  # so that even a bad file is refused in it
        set_language(env["KERNEL_LANGUAGE"])
    path = locate_config(env) if path is None else path.resolve()
    raw: dict[str, Any] = {}
    if path.is_file():
        raw = _read_toml(path, path.name)
    if overlay is None:
        overlay = read_overlay(_data_dir_of(raw, path.parent) / RUNTIME_FILE)
    config = _build(merge_overlay(raw, overlay), path, env, require_telegram, provider_types)
    config.source_env = dict(env)
    return config


def _read_toml(path: Path, shown: str) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(t("config.bad_toml", path=shown, detail=exc), key="") from None
    except UnicodeDecodeError:
        raise ConfigError(t("config.bad_toml", path=shown, detail="not UTF-8")) from None


_DEFAULT_LANGUAGE: str = default_of(GeneralConfig, "language")


def _data_dir_of(raw: dict[str, Any], base: Path) -> Path:
    general = raw.get("general")
    value = general.get("data_dir") if isinstance(general, dict) else None
    return _resolve(
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
    """Only the [gateway] section, and the language (for the sidecar's command-line
    client, which must work whatever the rest of config.toml says)."""
    env = os.environ if env is None else env
    path = locate_config(env) if path is None else path.resolve()
    raw = _read_toml(path, path.name) if path.is_file() else {}
    general = raw.get("general")
    general = general if isinstance(general, dict) else {}
    language = env.get("KERNEL_LANGUAGE") or general.get("language", _DEFAULT_LANGUAGE)
    if language in LANGUAGES:
        set_language(language)
    return _gateway(raw.get("gateway", {}), env, check=False)


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
    return _general(raw.get("general", {}), env, path.parent)


def _resolve(base: Path, value: str | Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def _build(
    raw: dict[str, Any],
    path: Path,
    env: Mapping[str, str],
    require_tg: bool,
    types: Collection[str] | None,
) -> Config:
    base = path.parent
    warnings: list[str] = []
    general = _general(raw.get("general", {}), env, base)
    telegram = _telegram(raw.get("telegram", {}), env, require_tg)
    providers = _providers(raw.get("providers"), env, general.default_provider, warnings, types)
    titles = _titles(raw.get("titles"), env, types)
    cli = _cli(raw.get("cli"), env, warnings)
    mcp, mcp_servers = _mcp(raw.get("mcp", {}), env, base, warnings)
    gateway = _gateway(raw.get("gateway", {}), env)
    _check_model_aliases(gateway, providers)
    _check_approvals(cli, gateway, mcp)
    tools = _tools(raw.get("tools", {}), env)
    general.disabled_tools += [p.name for p in tools.values() if not p.enabled]
    stt = _stt(raw.get("stt"), env, warnings)
    tts = _tts(raw.get("tts"), env, warnings, base)
    ffmpeg = _ffmpeg_path(raw.get("tts"), env, base)
    envs = _envs(raw.get("envs", {}))
    channels = _channels(raw.get("channels", {}), env)
    cron = read_section(CronConfig, raw.get("cron", {}), "cron", env)
    budget = read_section(BudgetConfig, raw.get("budget", {}), "budget", env)
    routing = _routing(raw.get("routing", {}), env)
    _check_routing(routing, providers, general)
    web = _web(raw.get("web", {}), env)
    agents = read_section(AgentsConfig, raw.get("agents", {}), "agents", env)
    prompts = read_section(PromptsConfig, raw.get("prompts", {}), "prompts", env)
    warnings += [t("config.warn_layer_missing", path=p) for p in missing_layers(prompts, base)]
    features = read_section(FeaturesConfig, raw.get("features", {}), "features", env)
    if channels.qq.enabled and not channels.qq.allowed_users:
        warnings.append(t("config.warn_qq_nobody"))
    worst = webhook_worst_case(channels.webhook)
    if channels.webhook.enabled and worst > cron.delivery_timeout:
        limit = f"{cron.delivery_timeout:g}"
        warnings.append(t("config.warn_webhook_slow", worst=f"{worst:g}", limit=limit))
    warnings += [t("config.warn_unknown_key", key=k) for k in unknown_keys(raw)]
    return Config(
        path=path,
        telegram=telegram,
        general=general,
        providers=providers,
        titles=titles,
        cli=cli,
        mcp_servers=mcp_servers,
        gateway=gateway,
        warnings=warnings,
        tools=tools,
        stt=stt,
        tts=tts,
        ffmpeg=ffmpeg,
        mcp=mcp,
        envs=envs,
        channels=channels,
        cron=cron,
        budget=budget,
        routing=routing,
        web=web,
        agents=agents,
        prompts=prompts,
        features=features,
    )


def _general(table: Any, env: Mapping[str, str], base: Path) -> GeneralConfig:
    # The language first, so that every later refusal is worded in it.
    language = env.get("KERNEL_LANGUAGE") or (
        table.get("language", _DEFAULT_LANGUAGE) if isinstance(table, dict) else _DEFAULT_LANGUAGE
    )
    if language not in LANGUAGES:
        raise bad_choice("general.language", LANGUAGES, language)
    set_language(language)
    general = read_section(GeneralConfig, table, "general", env)
    general.default_workspace = _resolve(base, general.default_workspace)
    general.data_dir = _resolve(base, general.data_dir)
    general.soul = _resolve(base, general.soul)
    try:
        ZoneInfo(general.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            t("config.bad_timezone", tz=general.timezone), key="general.timezone"
        ) from None
    return general


def _telegram(table: Any, env: Mapping[str, str], required: bool) -> TelegramConfig:
    telegram = read_section(TelegramConfig, table, "telegram", env)
    if required and not telegram.token:
        raise ConfigError(t("config.missing_token"), key="telegram.token")
    if required and telegram.allowed_user <= 0:
        raise ConfigError(t("config.missing_user"), key="telegram.allowed_user")
    return telegram


def _known_type(key: str, kind: str, types: Collection[str] | None) -> None:
    if types is not None and kind not in types:
        raise bad_choice(key, tuple(types), kind)


def _providers(
    section: Any,
    env: Mapping[str, str],
    default: str,
    warnings: list[str],
    types: Collection[str] | None = None,
) -> dict[str, ProviderConfig]:
    if section is not None and not isinstance(section, dict):
        require_table(section, "providers")
    tables: dict[str, Any] = DEFAULT_PROVIDERS if section is None else section
    providers: dict[str, ProviderConfig] = {}
    for name, table in tables.items():
        prefix = f"providers.{name}"
        p = read_section(ProviderConfig, table, prefix, env, table_name=name, name=name)
        _known_type(f"{prefix}.type", p.type, types)
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
        providers[name] = p
    if default not in providers:
        available = ", ".join(providers) or "-"
        raise ConfigError(
            t("config.unknown_default_provider", name=default, available=available),
            key="general.default_provider",
        )
    if providers[default].switched_off:
        raise ConfigError(
            t("config.default_switched_off", name=default), key=f"providers.{default}.enabled"
        )
    if not providers[default].enabled:
        raise ConfigError(
            t("config.missing_api_key", name=default, env=provider_env_key(default)),
            key=f"providers.{default}.api_key",
        )
    for p in providers.values():
        if not p.keys:
            warnings.append(t("config.warn_provider_disabled", name=p.name, env=p.env_key))
    return providers


def _titles(
    section: Any, env: Mapping[str, str], types: Collection[str] | None = None
) -> TitlesConfig | None:
    if section is None:
        return None
    titles = read_section(TitlesConfig, section, "titles", env)
    _known_type("titles.type", titles.type, types)
    return titles if titles.api_key and titles.model else None


def _stt(section: Any, env: Mapping[str, str], warnings: list[str]) -> SttConfig | None:
    if section is None:
        return None
    stt = read_section(SttConfig, section, "stt", env)
    if not stt.model:
        raise ConfigError(t("config.missing_voice_model", key="stt.model"), key="stt.model")
    if not stt.api_key:
        warnings.append(t("config.warn_stt_disabled"))
        return None
    return stt


def _tts(section: Any, env: Mapping[str, str], warnings: list[str], base: Path) -> TtsConfig | None:
    if section is None:
        return None
    tts = read_section(TtsConfig, section, "tts", env)
    if tts.type == "openai" and "voice" not in section:
        tts.voice = OPENAI_VOICE
    if not tts.voice:
        raise ConfigError(t("config.missing_voice_model", key="tts.voice"), key="tts.voice")
    if tts.type == "openai" and not tts.model:
        raise ConfigError(t("config.missing_voice_model", key="tts.model"), key="tts.model")
    if tts.type == "openai" and not tts.api_key:
        warnings.append(t("config.warn_tts_disabled"))
        return None
    tts.ffmpeg = _ffmpeg_path(section, env, base)
    return tts


def _ffmpeg_path(section: Any, env: Mapping[str, str], base: Path) -> str:
    """``[tts] ffmpeg``: a path (relative to config.toml's folder), or a bare command name
    looked up on PATH when used; empty when unset."""
    value = read_section(TtsConfig, section, "tts", env).ffmpeg if section is not None else ""
    if not value or os.sep not in value and not value.startswith("~"):
        return value
    return str(_resolve(base, value))


def _cli(section: Any, env: Mapping[str, str], warnings: list[str]) -> dict[str, CLIConfig]:
    tables = dict(DEFAULT_CLI)
    if section is not None:
        if not isinstance(section, dict):
            require_table(section, "cli")
        tables.update(section)
    out: dict[str, CLIConfig] = {}
    for name, table in tables.items():
        if name not in CLI_NAMES:
            warnings.append(t("config.warn_unknown_cli", name=name, names=", ".join(CLI_NAMES)))
            continue
        prefix = f"cli.{name}"
        cli = read_section(
            CLIConfig, table, prefix, env, table_name=name, defaults=DEFAULT_CLI[name], name=name
        )
        cli.command = cli.command.strip()
        if not cli.command:
            key = f"{prefix}.command"
            raise ConfigError(t("config.empty_command", key=key), key=key)
        if problem := args_problem(name, cli.args, cli.approvals):
            kind, flag = problem
            key = f"{prefix}.approvals" if kind == "approvals_cli" else f"{prefix}.args"
            raise ConfigError(t(f"config.cli_args_{kind}", key=key, flag=flag), key=key)
        out[name] = cli
    return out


WILDCARDS = ("0.0.0.0", "::", "")  # binds that answer on loopback too


def _check_approvals(cli: dict[str, CLIConfig], gateway: GatewayConfig, mcp: MCPSettings) -> None:
    """A CLI that asks the owner through Kernel's MCP endpoint needs that endpoint, on
    a loopback address it can reach (a loopback bind, or a wildcard one)."""
    reachable = gateway.host in WILDCARDS or gateway.host == "localhost"
    for name, settings in cli.items():
        if settings.approvals == "off":
            continue
        key = f"cli.{name}.approvals"
        if not (gateway.enabled and mcp.serve):
            raise ConfigError(t("config.approvals_no_endpoint", key=key), key=key)
        if not (reachable or is_loopback(gateway.host)):
            raise ConfigError(t("config.approvals_host", key=key, host=gateway.host), key=key)


def _mcp(
    section: Any, env: Mapping[str, str], base: Path, warnings: list[str]
) -> tuple[MCPSettings, list[MCPServerConfig]]:
    settings = read_section(MCPSettings, section, "mcp", env)
    listed = section.get("servers", [])
    if not isinstance(listed, list):
        raise ConfigError(bad_type_text("mcp.servers", expected("list"), listed), key="mcp.servers")
    servers: list[MCPServerConfig] = []
    seen: set[str] = set()
    for i, table in enumerate(listed):
        prefix = f"mcp.servers[{i}]"
        server = read_section(MCPServerConfig, table, prefix, env, defaults={"name": f"server{i}"})
        name_key = f"{prefix}.name"
        if not server.name.strip():
            raise ConfigError(t("config.mcp_no_name", key=name_key), key=name_key)
        if server.name in seen:
            raise ConfigError(
                t("config.mcp_duplicate", key=name_key, name=server.name), key=name_key
            )
        seen.add(server.name)
        server.headers, missing = _expand_env(server.headers, env)
        server.env, missing_in_env = _expand_env(server.env, env)
        if missing or missing_in_env:
            var = missing or missing_in_env
            warnings.append(t("config.warn_mcp_env", name=server.name, var=var))
            continue
        server.cwd = _resolve(base, table["cwd"]) if table.get("cwd") else None
        wrong = server_problem(server)
        if wrong is not None:
            key = f"{prefix}.{wrong[0]}"
            raise ConfigError(t(wrong[1], key=key), key=key)
        servers.append(server)
    return settings, servers


def _expand_env(values: dict[str, str], env: Mapping[str, str]) -> tuple[dict[str, str], str]:
    """``${VAR}`` references replaced from ``env``; also the first unset variable ("" if none)."""
    out: dict[str, str] = {}
    missing = ""
    for key, value in values.items():
        refs = _ENV_REF.findall(value)
        missing = missing or next((v for v in refs if v not in env), "")
        out[key] = _ENV_REF.sub(lambda m: env.get(m.group(1), ""), value)
    return out, missing


def _web(table: Any, env: Mapping[str, str]) -> WebConfig:
    web = read_section(WebConfig, table, "web", env)
    search = table.get("search", {}) if isinstance(table, dict) else {}
    web.search = read_section(WebSearchConfig, search, "web.search", env)
    if web.search.provider == "searxng" and not web.search.base_url:
        key = "web.search.base_url"
        raise ConfigError(t("config.searxng_base_url", key=key), key=key)
    return web


def _routing(table: Any, env: Mapping[str, str]) -> RoutingConfig:
    routing = read_section(RoutingConfig, table, "routing", env)
    rules = table.get("rules", [])
    if not isinstance(rules, list):
        raise ConfigError(
            bad_type_text("routing.rules", expected("array"), rules), key="routing.rules"
        )
    for index, item in enumerate(rules):
        prefix = f"routing.rules[{index}]"
        rule = read_section(RoutingRule, item, prefix, env)
        if rule.pattern:
            try:
                compile_pattern(rule.pattern)
            except ValueError as exc:
                key = f"{prefix}.pattern"
                raise ConfigError(
                    t("config.bad_pattern", key=key, detail=str(exc)), key=key
                ) from None
        if rule.max_input_tokens and rule.max_input_tokens < rule.min_input_tokens:
            key = f"{prefix}.max_input_tokens"
            raise ConfigError(t("config.bad_token_range", key=key), key=key)
        routing.rules.append(rule)
    return routing


def _check_routing(
    routing: RoutingConfig, providers: dict[str, ProviderConfig], general: GeneralConfig
) -> None:
    """Every model reference names a configured provider and one of its models, and
    reasoning is set only where the provider declares the capability (and, for a token
    budget on a Claude provider, stays under its max_tokens)."""

    def ref(key: str, value: str) -> ProviderConfig:
        name, model = parse_ref(value)
        pcfg = providers.get(name)
        if pcfg is None:
            available = ", ".join(providers) or "-"
            raise ConfigError(
                t("config.bad_ref_provider", key=key, ref=value, available=available), key=key
            )
        if model and pcfg.resolve(model) is None:
            models = ", ".join(pcfg.models)
            raise ConfigError(
                t("config.bad_ref_model", key=key, ref=value, name=name, models=models), key=key
            )
        return pcfg

    def reasoning(key: str, value: object, pcfg: ProviderConfig) -> None:
        if value is None or value == "off":
            return
        if not pcfg.declares("reasoning"):
            raise ConfigError(t("config.no_reasoning", key=key, name=pcfg.name), key=key)
        if isinstance(value, int) and pcfg.max_tokens is not None and value >= pcfg.max_tokens:
            raise ConfigError(
                t("config.reasoning_over_max", key=key, name=pcfg.name, max=pcfg.max_tokens),
                key=key,
            )

    for index, value in enumerate(general.fallbacks):
        ref(f"general.fallbacks[{index}]", value)
    for name, pcfg in providers.items():
        prefix = f"providers.{name}"
        for index, value in enumerate(pcfg.fallbacks or []):
            ref(f"{prefix}.fallbacks[{index}]", value)
        reasoning(f"{prefix}.reasoning", pcfg.reasoning, pcfg)
        for model, options in pcfg.model_options.items():
            key = f"{prefix}.model_options.{model}"
            ref(key, f"{name}:{model}")
            target = pcfg.resolve(model)
            if target != model:  # the router looks options up by the model's own name
                raise ConfigError(
                    t("config.options_alias", key=key, alias=model, model=target, name=name),
                    key=key,
                )
            for index, value in enumerate(options.fallbacks or []):
                ref(f"{key}.fallbacks[{index}]", value)
            reasoning(f"{key}.reasoning", options.reasoning, pcfg)
    for index, rule in enumerate(routing.rules):
        prefix = f"routing.rules[{index}]"
        primary = ref(f"{prefix}.primary", rule.primary) if rule.primary else None
        for position, value in enumerate(rule.fallbacks or []):
            ref(f"{prefix}.fallbacks[{position}]", value)
        reasoning(
            f"{prefix}.reasoning", rule.reasoning, primary or providers[general.default_provider]
        )


def _check_model_aliases(gateway: GatewayConfig, providers: dict[str, ProviderConfig]) -> None:
    """Each target names a configured provider and one of its models (or "active")."""
    for pattern, target in gateway.model_aliases.items():
        provider, model = model_alias_target(target)
        if target == "active":
            continue
        pcfg = providers.get(provider)
        if pcfg is None or not model or pcfg.resolve(model) is None:
            key = f"gateway.model_aliases.{pattern}"
            raise ConfigError(t("config.bad_model_alias", key=key, target=target), key=key)


def _gateway(table: Any, env: Mapping[str, str], *, check: bool = True) -> GatewayConfig:
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


def _channels(table: Any, env: Mapping[str, str]) -> ChannelsConfig:
    require_table(table, "channels")
    sections: dict[str, Any] = {
        name: read_section(model, table.get(name, {}), f"channels.{name}", env)
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


def _tools(table: Any, env: Mapping[str, str]) -> dict[str, ToolPolicy]:
    require_table(table, "tools")
    return {
        name: read_section(ToolPolicy, policy, f"tools.{name}", env, table_name=name, name=name)
        for name, policy in table.items()
    }


def _envs(table: Any) -> dict[str, str]:
    require_table(table, "envs")
    out: dict[str, str] = {}
    for name, value in table.items():
        key = f"envs.{name}"
        if not ENV_NAME.match(str(name)):
            raise ConfigError(t("config.bad_env_name", key=key), key=key)
        if not isinstance(value, str):
            text = bad_type_text(key, expected("str"), value, secret=is_sensitive(str(name)))
            raise ConfigError(text, key=key)
        out[str(name)] = value
    return out
