"""Configuration: locate ``config.toml``, parse it, apply environment overrides, validate.

Every refusal is a :class:`ConfigError` whose text is one line naming the key and the
fix; ``kernel.__main__`` prints it and exits with code 2. Without a ``config.toml``
the built-in defaults apply; they equal ``config.example.toml`` (a test keeps them so).
"""

from __future__ import annotations

import copy
import dataclasses
import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kernel.core.errors import ConfigError
from kernel.core.i18n import LANGUAGES, set_language, t
from kernel.core.redact import mask_secret
from kernel.delegate.argv import args_problem

PROVIDER_TYPES = ("claude", "openai_compat")
TTS_TYPES = ("edge", "openai")
TTS_FORMATS = ("mp3", "opus", "aac", "flac", "wav")  # what ffmpeg can read from a pipe
CAPABILITIES = ("stream", "tool_call", "attachments", "reasoning")
LOG_LEVELS = ("debug", "info", "warning", "error")
QQ_TARGET_TYPES = ("c2c", "group", "guild", "dm")
CHANNEL_TYPES = ("console", "webhook", "qq")  # configurable under [channels.<type>]


@dataclass(slots=True)
class TelegramConfig:
    token: str = ""
    allowed_user: int = 0
    api_base: str = "https://api.telegram.org"
    stream: bool = True
    progress_interval: float = 3.0
    poll_timeout: int = 30
    watchdog_seconds: float = 120.0
    max_retries_429: int = 3
    typing_interval: float = 4.0


@dataclass(slots=True)
class GeneralConfig:
    timezone: str = "Asia/Shanghai"
    default_provider: str = "anthropic"
    default_workspace: Path = Path(".")
    context_rounds: int = 50
    memory_recall_k: int = 5
    data_dir: Path = Path("data")
    language: str = "zh"
    max_tool_calls: int = 25
    soul: Path = Path("SOUL.md")
    shutdown_timeout: float = 10.0
    disabled_tools: list[str] = field(default_factory=list)
    log_level: str = "info"
    log_messages: bool = False  # message text may reach the log (debugging only)
    retention_days: int = 7  # downloads, CLI and tool outputs; 0 keeps them forever
    check_timeout: float = 20.0  # `kernel check`: seconds each part gets to answer
    check_connect_timeout: float = 2.0  # `kernel check`: seconds to connect to a provider


@dataclass(slots=True)
class ProviderConfig:
    name: str
    type: str
    api_base: str = ""
    api_key: str = ""
    max_tokens: int | None = None
    default_model: str = ""
    models: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 120.0
    max_retries: int = 3
    retry_base_delay: float = 1.0
    capabilities: list[str] | None = None  # None: what the provider type supports
    aliases: dict[str, str] = field(default_factory=dict)  # alias → one of ``models``
    switched_off: bool = False  # `enabled = false`: kept configured but not used

    @property
    def env_key(self) -> str:
        return provider_env_key(self.name)

    @property
    def enabled(self) -> bool:
        return bool(self.api_key) and not self.switched_off

    def resolve(self, model: str) -> str | None:
        """A configured model name, or the model an alias points at; else None."""
        if model in self.models:
            return model
        return self.aliases.get(model)


@dataclass(slots=True)
class TitlesConfig:
    type: str = "openai_compat"
    api_base: str = ""
    api_key: str = ""
    model: str = ""
    max_tokens: int = 100
    headers: dict[str, str] = field(default_factory=dict)


CLI_NAMES = ("claude_code", "codex", "gemini")
CLI_OUTPUTS = ("text", "jsonl")


@dataclass(slots=True)
class SttConfig:
    """``[stt]``: speech to text through an OpenAI-compatible ``audio/transcriptions``."""

    api_base: str = "https://api.openai.com/v1"
    api_key: str = ""
    model: str = "whisper-1"
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 60.0


@dataclass(slots=True)
class TtsConfig:
    """``[tts]``: replies to voice spoken by edge-tts or an OpenAI-compatible
    ``audio/speech``, then converted to OGG/Opus by ffmpeg."""

    type: str = "edge"
    voice: str = "zh-CN-XiaoxiaoNeural"
    api_base: str = "https://api.openai.com/v1"  # type "openai" only
    api_key: str = ""
    model: str = "tts-1"
    headers: dict[str, str] = field(default_factory=dict)
    format: str = "mp3"  # what the openai endpoint returns; edge always gives mp3
    proxy: str = ""  # type "edge" only: an HTTP proxy to reach Microsoft's service
    timeout: float = 30.0
    ffmpeg: str = ""  # an explicit path; empty: PATH, then imageio-ffmpeg's binary
    max_chars: int = 500


@dataclass(slots=True)
class CLIConfig:
    name: str
    command: str
    args: list[str] = field(default_factory=list)
    timeout: float = 600.0
    idle_timeout: float = 300.0  # counted only after the CLI has shown something (seed 003)
    output: str | None = None  # "text" | "jsonl"; None: detected from args
    # Seconds without progress after the CLI reported a retry or an API error: the run
    # ends early with that error (retries are not progress).
    no_progress_timeout: float = 60.0
    version_timeout: float = 10.0  # `<command> --version` and kernel check's probe

    @property
    def jsonl(self) -> bool:
        """Whether stdout is a JSONL event stream rather than the answer itself."""
        if self.output is not None:
            return self.output == "jsonl"
        return any("stream-json" in a or a in ("--json", "--experimental-json") for a in self.args)


@dataclass(slots=True)
class ToolPolicy:
    """``[tools.<name>]``: per-tool switches."""

    name: str
    enabled: bool = True
    approval: bool = False  # the owner approves each call (Telegram inline buttons)
    approval_timeout: float = 300.0


@dataclass(slots=True)
class MCPServerConfig:
    name: str
    type: str
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # stdio: extra environment, ${ENV} expanded
    cwd: Path | None = None  # stdio: working directory of the server process
    enabled: bool = True
    connect_timeout: float = 10.0  # seconds for start + initialize + tools/list
    timeout: float = 60.0  # seconds per tool call


@dataclass(slots=True)
class MCPSettings:
    """``[mcp]``: how dropped servers are retried (per-server keys live on each server)."""

    reconnect_attempts: int = 5  # consecutive failures before a server's tools are withdrawn
    reconnect_base_delay: float = 1.0  # first backoff in seconds, doubled each failure
    reconnect_max_delay: float = 60.0  # backoff ceiling; withdrawn servers are retried this often
    ping_interval: float = 30.0  # seconds between liveness pings of a connected server; 0 = off
    # Server → client sampling/createMessage: "off" (not declared), "ask" (the owner
    # approves each request with buttons), "auto" (answered without asking).
    sampling: str = "ask"
    sampling_max_tokens: int = 1024  # the ceiling on one sampling answer, whatever is asked
    elicitation: bool = True  # server questions with choices, asked with Telegram buttons


DEFAULT_MODEL_ALIASES = {"claude-*": "active"}
MODEL_PATTERN_MAX = 100


@dataclass(slots=True)
class GatewayConfig:
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 8088  # 0: any free port (the bound one is logged)
    api_key: str = ""
    read_header_timeout: float = 10.0
    read_timeout: float = 120.0
    idle_timeout: float = 120.0
    shutdown_timeout: float = 30.0
    max_body_bytes: int = 32 * 1024 * 1024
    queue_timeout: float = 300.0  # a request waits this long for its chat's running turn
    # Browser origins allowed to call the sidecar (a page of yours); others get 403.
    allowed_origins: list[str] = field(default_factory=list)
    archive_max_bytes: int = 256 * 1024 * 1024  # workspace zip export/import, uncompressed
    archive_max_files: int = 10000  # entries in a workspace zip
    # /v1/messages and /v1/models: a requested model name that is no configured model or
    # alias is matched against these patterns in order ("*" matches any run of
    # characters) and answered by the target: "active" or "<provider>:<model>".
    model_aliases: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_MODEL_ALIASES))
    # Serve workspace files with more than one hard link (never config.toml or data/ ones).
    allow_hard_links: bool = False
    max_connections: int = 0  # open at once; 0: derived from the open-files limit
    max_connections_per_client: int = 0  # from one address; 0: half of max_connections
    selfops_max_bytes: int = 256 * 1024  # a file a SelfOps preview may produce

    @property
    def client_host(self) -> str:
        """Where a local client reaches the sidecar (a wildcard bind is reached locally)."""
        if self.host in ("0.0.0.0", ""):
            return "127.0.0.1"
        if self.host == "::":
            return "::1"
        return self.host

    @property
    def url(self) -> str:
        host = self.client_host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"


@dataclass(slots=True)
class ConsoleChannelConfig:
    """``[channels.console]``: replies over HTTP (``/agent/process``); as a delivery
    target (cron), the text is added to a console chat."""

    enabled: bool = True


@dataclass(slots=True)
class WebhookChannelConfig:
    """``[channels.webhook]``: each final text POSTed as JSON to ``url``."""

    enabled: bool = False
    url: str = ""
    secret: str = ""  # HMAC-SHA256 key; empty: requests are not signed
    timeout_seconds: float = 10.0  # per attempt
    max_retries: int = 3  # after the first attempt, on timeouts, 429 and 5xx
    retry_base_delay: float = 1.0  # seconds; doubled each retry


@dataclass(slots=True)
class QQChannelConfig:
    """``[channels.qq]``: the official QQ bot open platform (webhook events in, REST out)."""

    enabled: bool = False
    app_id: str = ""
    client_secret: str = ""
    bot_prefix: str = ""  # put before every reply
    target_type: str = "c2c"  # where a reply with no inbound event goes: c2c/group/guild/dm
    target_id: str = ""
    api_base: str = "https://api.sgroup.qq.com"
    token_url: str = "https://bots.qq.com/app/getAppAccessToken"
    timeout_seconds: float = 10.0
    allowed_users: list[str] = field(default_factory=list)  # sender ids answered; empty: nobody
    # Senders who are the owner: the owner's memories and every tool. Everyone else answered
    # is a guest: no memories, and only ``guest_tools``.
    owner_users: list[str] = field(default_factory=list)
    guest_tools: list[str] = field(default_factory=list)
    callback_max_age: float = 300.0  # seconds a callback's signed timestamp may be off
    max_concurrent_turns: int = 4  # QQ messages answered at once; more are declined
    turn_timeout: float = 240.0  # seconds one QQ turn may take (passive replies expire)


@dataclass(slots=True)
class ChannelsConfig:
    console: ConsoleChannelConfig = field(default_factory=ConsoleChannelConfig)
    webhook: WebhookChannelConfig = field(default_factory=WebhookChannelConfig)
    qq: QQChannelConfig = field(default_factory=QQChannelConfig)


@dataclass(slots=True)
class CronConfig:
    """``[cron]``: scheduled jobs (times in ``general.timezone``)."""

    enabled: bool = True
    max_jobs: int = 50  # jobs the agent may have created through its cron tools
    misfire_grace_seconds: float = 300.0  # a run missed by at most this much runs at start
    run_timeout: float = 600.0  # seconds one run (turn, workflow) may take
    delivery_timeout: float = 60.0  # seconds one delivery to a channel may take
    min_interval_seconds: int = 60  # the shortest fixed interval accepted


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
    extra: dict[str, Any]  # sections owned by later features
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


DEFAULT_PROVIDERS: dict[str, dict[str, Any]] = {
    "anthropic": {
        "type": "claude",
        "api_base": "https://api.anthropic.com",
        "max_tokens": 16384,
        "default_model": "claude-sonnet-5-5",
        "models": ["claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-5-5"],
    },
    "openai": {
        "type": "openai_compat",
        "api_base": "https://api.openai.com/v1",
        "default_model": "gpt-5.5",
        "models": ["gpt-5.5", "gpt-5.4-mini"],
    },
}

DEFAULT_CLI: dict[str, dict[str, Any]] = {
    "claude_code": {
        "command": "claude",
        "args": ["-p", "--output-format=stream-json", "--verbose"],
    },
    # codex-cli 0.169.0 dropped --full-auto; --sandbox=workspace-write is what it set.
    "codex": {
        "command": "codex",
        "args": [
            "exec",
            "--json",
            "--sandbox=workspace-write",
            "--skip-git-repo-check",
            "--color=never",
        ],
    },
    # gemini-cli 0.61.0 exits 55 headless in a folder it was never told to trust.
    "gemini": {"command": "gemini", "args": ["--output-format=stream-json", "--skip-trust"]},
}

RUNTIME_FILE = "runtime.toml"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

KNOWN_SECTIONS = {
    "envs",
    "telegram",
    "general",
    "providers",
    "titles",
    "cli",
    "mcp",
    "gateway",
    "channels",
    "stt",
    "tts",
    "tools",
    "cron",
}


def provider_env_key(name: str) -> str:
    return "KERNEL_PROVIDER_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper() + "_API_KEY"


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
) -> Config:
    """Read, layer ``data/runtime.toml`` over it, override from ``env``, validate.
    Raises ConfigError on the first refusal. ``overlay`` replaces the runtime file's
    contents (a change is validated this way before it is written)."""
    env = os.environ if env is None else env
    if env.get("KERNEL_LANGUAGE") in LANGUAGES:  # so that even a bad file is refused in it
        set_language(env["KERNEL_LANGUAGE"])
    path = locate_config(env) if path is None else path.resolve()
    raw: dict[str, Any] = {}
    if path.is_file():
        raw = _read_toml(path, path.name)
    if overlay is None:
        overlay = read_overlay(_data_dir_of(raw, path.parent) / RUNTIME_FILE)
    config = _build(merge_overlay(raw, overlay), path, env, require_telegram)
    config.source_env = dict(env)
    return config


def _read_toml(path: Path, shown: str) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(t("config.bad_toml", path=shown, detail=exc), key="") from None
    except UnicodeDecodeError:
        raise ConfigError(t("config.bad_toml", path=shown, detail="not UTF-8")) from None


def _data_dir_of(raw: dict[str, Any], base: Path) -> Path:
    general = raw.get("general")
    value = general.get("data_dir") if isinstance(general, dict) else None
    return _resolve(base, value if isinstance(value, str) else "data")


def read_overlay(path: Path) -> dict[str, Any]:
    """The Kernel-managed overlay (SPEC §2); a missing file is an empty overlay."""
    if not path.is_file():
        return {}
    return _read_toml(path, str(path))


def merge_overlay(raw: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """``overlay`` over ``raw``: tables merge key by key, anything else is replaced."""
    merged = copy.deepcopy(raw)
    if "providers" in overlay and "providers" not in merged:
        # Without [providers.*] in config.toml the built-in pair applies; the overlay
        # changes that pair rather than replacing it.
        merged["providers"] = copy.deepcopy(DEFAULT_PROVIDERS)
    _merge_into(merged, overlay)
    return merged


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
    language = env.get("KERNEL_LANGUAGE") or general.get("language", "zh")
    if language in LANGUAGES:
        set_language(language)
    return _gateway(_Reader(raw.get("gateway", {}), "gateway"), env, check=False)


class _Reader:
    """Typed access to one TOML table with key-naming refusals."""

    def __init__(self, table: Any, prefix: str) -> None:
        if not isinstance(table, dict):
            raise ConfigError(
                _bad_type_text(prefix, _expected("table"), table),
                key=prefix,
            )
        self.table = table
        self.prefix = prefix

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def get(self, name: str, kind: type | tuple[type, ...], default: Any) -> Any:
        value = self.table.get(name, default)
        if value is default:
            return value
        kinds = kind if isinstance(kind, tuple) else (kind,)
        ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            ok, value = True, float(value)
        if not ok:
            expected = _expected(kinds[0].__name__)
            raise ConfigError(
                _bad_type_text(self.key(name), expected, value),
                key=self.key(name),
            )
        return value

    def str_list(self, name: str, default: list[str]) -> list[str]:
        value = self.get(name, list, default)
        if not all(isinstance(v, str) for v in value):
            expected = _expected("list of strings")
            raise ConfigError(
                _bad_type_text(self.key(name), expected, value),
                key=self.key(name),
            )
        return list(value)

    def str_map(self, name: str) -> dict[str, str]:
        value = self.get(name, dict, {})
        return {str(k): str(v) for k, v in value.items()}

    def positive(self, name: str, kind: type, default: Any) -> Any:
        value = self.get(name, kind, default)
        if value is not None and value <= 0:
            expected = _expected("positive number")
            raise ConfigError(
                _bad_type_text(self.key(name), expected, value),
                key=self.key(name),
            )
        return value

    def non_negative(self, name: str, default: Any, kind: type = int) -> Any:
        value = self.get(name, kind, default)
        if value < 0:
            expected = _expected("int ≥ 0" if kind is int else "number ≥ 0")
            raise ConfigError(_bad_type_text(self.key(name), expected, value), key=self.key(name))
        return value

    def url(self, name: str) -> str:
        """An http(s) URL (or empty), without a trailing slash."""
        value = str(self.get(name, str, "")).rstrip("/")
        if value and not is_http_url(value):
            expected = _expected("http(s) URL")
            raise ConfigError(_bad_type_text(self.key(name), expected, value), key=self.key(name))
        return value

    def choice(self, name: str, choices: tuple[str, ...], default: str) -> str:
        value = self.get(name, str, default)
        if value not in choices:
            raise _bad_choice(self.key(name), choices, value)
        return str(value)


_EXPECTED_ZH = {
    "str": "字符串",
    "int": "整数",
    "float": "数字",
    "bool": "true 或 false",
    "list": "列表",
    "dict": "表",
    "table": "表（[section]）",
    "list of strings": "字符串列表",
    "positive number": "正数",
    "int ≥ 0": "大于等于 0 的整数",
    "number ≥ 0": "大于等于 0 的数字",
    "http(s) URL": "http(s) 网址",
}


_SECRET_KEYS = ("token", "api_key", "secret", "client_secret", "allowed_user", "headers")


def _bad_type_text(key: str, expected: str, got: Any) -> str:
    """The refusal text; a value under a secret-like key (or a long one) is masked, since
    a token pasted into the wrong key must not be printed back."""
    shown = repr(got)
    if key.rsplit(".", 1)[-1] in _SECRET_KEYS or len(shown) > 40:
        shown = repr(mask_secret(str(got)))
    return t("config.bad_type", key=key, expected=expected, got=shown)


def _bad_choice(key: str, choices: tuple[str, ...], got: Any) -> ConfigError:
    return ConfigError(
        t("config.bad_choice", key=key, choices=" / ".join(choices), got=got), key=key
    )


def _expected(kind: str) -> str:
    from kernel.core.i18n import get_language

    return _EXPECTED_ZH.get(kind, kind) if get_language() == "zh" else kind.replace("dict", "table")


def _build(raw: dict[str, Any], path: Path, env: Mapping[str, str], require_tg: bool) -> Config:
    base = path.parent
    warnings: list[str] = []

    g = _Reader(raw.get("general", {}), "general")
    language = env.get("KERNEL_LANGUAGE") or g.get("language", str, "zh")
    if language not in LANGUAGES:
        raise _bad_choice("general.language", LANGUAGES, language)
    set_language(language)
    general = GeneralConfig(
        timezone=g.get("timezone", str, "Asia/Shanghai"),
        default_provider=g.get("default_provider", str, "anthropic"),
        default_workspace=_resolve(base, g.get("default_workspace", str, ".")),
        context_rounds=g.positive("context_rounds", int, 50),
        memory_recall_k=g.positive("memory_recall_k", int, 5),
        data_dir=_resolve(base, g.get("data_dir", str, "data")),
        language=language,
        max_tool_calls=g.positive("max_tool_calls", int, 25),
        soul=_resolve(base, g.get("soul", str, "SOUL.md")),
        shutdown_timeout=g.positive("shutdown_timeout", float, 10.0),
        disabled_tools=g.str_list("disabled_tools", []),
        log_level=g.choice("log_level", LOG_LEVELS, "info"),
        log_messages=g.get("log_messages", bool, False),
        retention_days=g.get("retention_days", int, 7),
        check_timeout=g.positive("check_timeout", float, 20.0),
        check_connect_timeout=g.positive("check_connect_timeout", float, 2.0),
    )
    if general.retention_days < 0:
        raise ConfigError(
            _bad_type_text("general.retention_days", _expected("int ≥ 0"), general.retention_days),
            key="general.retention_days",
        )
    disabled_env = env.get("KERNEL_DISABLED_TOOLS", "")
    general.disabled_tools += [n.strip() for n in disabled_env.split(",") if n.strip()]
    try:
        ZoneInfo(general.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            t("config.bad_timezone", tz=general.timezone), key="general.timezone"
        ) from None

    telegram = _telegram(_Reader(raw.get("telegram", {}), "telegram"), env, require_tg)
    providers = _providers(raw.get("providers"), env, general.default_provider, warnings)
    titles = _titles(raw.get("titles"), env)
    cli = _cli(raw.get("cli"), warnings)
    mcp, mcp_servers = _mcp(raw.get("mcp", {}), env, base, warnings)
    gateway = _gateway(_Reader(raw.get("gateway", {}), "gateway"), env)
    _check_model_aliases(gateway, providers)
    tools = _tools(_Reader(raw.get("tools", {}), "tools"))
    general.disabled_tools += [p.name for p in tools.values() if not p.enabled]
    stt = _stt(raw.get("stt"), env, warnings)
    tts = _tts(raw.get("tts"), env, warnings, base)
    ffmpeg = _ffmpeg_path(raw.get("tts"), base)
    envs = _envs(raw.get("envs", {}))
    channels = _channels(_Reader(raw.get("channels", {}), "channels"), env)
    cron = _cron(_Reader(raw.get("cron", {}), "cron"))
    if channels.qq.enabled and not channels.qq.allowed_users:
        warnings.append(t("config.warn_qq_nobody"))
    worst = webhook_worst_case(channels.webhook)
    if channels.webhook.enabled and worst > cron.delivery_timeout:
        limit = f"{cron.delivery_timeout:g}"
        warnings.append(t("config.warn_webhook_slow", worst=f"{worst:g}", limit=limit))
    extra: dict[str, Any] = {}
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
        extra=extra,
        warnings=warnings,
        tools=tools,
        stt=stt,
        tts=tts,
        ffmpeg=ffmpeg,
        mcp=mcp,
        envs=envs,
        channels=channels,
        cron=cron,
    )


def _tools(r: _Reader) -> dict[str, ToolPolicy]:
    policies: dict[str, ToolPolicy] = {}
    for name in r.table:
        tr = _Reader(r.table[name], r.key(name))
        policies[name] = ToolPolicy(
            name=name,
            enabled=tr.get("enabled", bool, True),
            approval=tr.get("approval", bool, False),
            approval_timeout=tr.positive("approval_timeout", float, 300.0),
        )
    return policies


def _keys(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)} - {"name"}


def unknown_keys(raw: dict[str, Any]) -> list[str]:
    """Keys Kernel does not read (a typo such as ``[telegram] tokne`` would otherwise be
    ignored silently); sections owned by adapters with their own parsing are skipped."""
    found = [k for k in raw if k not in KNOWN_SECTIONS]

    def check(table: Any, prefix: str, known: set[str]) -> None:
        if isinstance(table, dict):
            found.extend(f"{prefix}.{k}" for k in table if k not in known)

    check(raw.get("telegram"), "telegram", _keys(TelegramConfig))
    check(raw.get("general"), "general", _keys(GeneralConfig))
    check(raw.get("gateway"), "gateway", _keys(GatewayConfig))
    check(raw.get("titles"), "titles", _keys(TitlesConfig))
    check(raw.get("stt"), "stt", _keys(SttConfig))
    check(raw.get("tts"), "tts", _keys(TtsConfig))
    check(raw.get("cron"), "cron", _keys(CronConfig))
    channels = raw.get("channels")
    if isinstance(channels, dict):
        check(channels, "channels", set(CHANNEL_TYPES))
        for name, kind in (
            ("console", ConsoleChannelConfig),
            ("webhook", WebhookChannelConfig),
            ("qq", QQChannelConfig),
        ):
            check(channels.get(name), f"channels.{name}", _keys(kind))
    for section, cls in (("providers", ProviderConfig), ("cli", CLIConfig), ("tools", ToolPolicy)):
        tables = raw.get(section)
        if isinstance(tables, dict):
            for name, table in tables.items():
                check(table, f"{section}.{name}", _keys(cls))
    mcp = raw.get("mcp")
    if isinstance(mcp, dict):
        check(mcp, "mcp", _keys(MCPSettings) | {"servers"})
        for i, server in enumerate(mcp.get("servers", []) or []):
            check(server, f"mcp.servers[{i}]", _keys(MCPServerConfig) | {"name"})
    return found


def _resolve(base: Path, value: str) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else (base / p).resolve()


def _telegram(r: _Reader, env: Mapping[str, str], required: bool) -> TelegramConfig:
    token = env.get("KERNEL_TELEGRAM_TOKEN") or r.get("token", str, "")
    user_raw: Any = env.get("KERNEL_TELEGRAM_ALLOWED_USER") or r.get("allowed_user", (int, str), 0)
    try:
        allowed_user = int(user_raw)
    except ValueError:
        raise ConfigError(
            _bad_type_text("telegram.allowed_user", _expected("int"), user_raw),
            key="telegram.allowed_user",
        ) from None
    if required and not token:
        raise ConfigError(t("config.missing_token"), key="telegram.token")
    if required and allowed_user <= 0:
        raise ConfigError(t("config.missing_user"), key="telegram.allowed_user")
    return TelegramConfig(
        token=token,
        allowed_user=allowed_user,
        api_base=r.get("api_base", str, "https://api.telegram.org").rstrip("/"),
        stream=r.get("stream", bool, True),
        progress_interval=r.positive("progress_interval", float, 3.0),
        poll_timeout=r.positive("poll_timeout", int, 30),
        watchdog_seconds=r.positive("watchdog_seconds", float, 120.0),
        max_retries_429=r.get("max_retries_429", int, 3),
        typing_interval=r.positive("typing_interval", float, 4.0),
    )


def _providers(
    section: Any, env: Mapping[str, str], default: str, warnings: list[str]
) -> dict[str, ProviderConfig]:
    tables = DEFAULT_PROVIDERS if section is None else _Reader(section, "providers").table
    providers: dict[str, ProviderConfig] = {}
    for name, table in tables.items():
        r = _Reader(table, f"providers.{name}")
        p = ProviderConfig(
            name=name,
            type=r.choice("type", PROVIDER_TYPES, "openai_compat"),
            api_base=r.url("api_base"),
            api_key=env.get(provider_env_key(name)) or r.get("api_key", str, ""),
            max_tokens=r.positive("max_tokens", int, None),
            default_model=r.get("default_model", str, ""),
            models=r.str_list("models", []),
            headers=r.str_map("headers"),
            timeout=r.positive("timeout", float, 120.0),
            max_retries=r.get("max_retries", int, 3),
            retry_base_delay=r.get("retry_base_delay", float, 1.0),
            capabilities=_capabilities(r),
            aliases=r.str_map("aliases"),
            switched_off=not r.get("enabled", bool, True),
        )
        if not p.default_model and p.models:
            p.default_model = p.models[0]
        if not p.default_model:
            raise ConfigError(t("config.missing_model", name=name), key=r.key("default_model"))
        if p.default_model not in p.models:
            p.models.insert(0, p.default_model)
        if p.type == "claude" and p.max_tokens is None:
            raise ConfigError(t("config.missing_max_tokens", name=name), key=r.key("max_tokens"))
        for alias, target in p.aliases.items():
            if target not in p.models:
                key = r.key(f"aliases.{alias}")
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
        if not p.api_key:
            warnings.append(t("config.warn_provider_disabled", name=p.name, env=p.env_key))
    return providers


def _capabilities(r: _Reader) -> list[str] | None:
    if "capabilities" not in r.table:
        return None
    caps = r.str_list("capabilities", [])
    for cap in caps:
        if cap not in CAPABILITIES:
            raise _bad_choice(r.key("capabilities"), CAPABILITIES, cap)
    if "stream" not in caps:
        # Kernel streams every reply; no silent fallback to a blocking call.
        raise ConfigError(
            t("config.needs_stream", key=r.key("capabilities")), key=r.key("capabilities")
        )
    return caps


def _titles(section: Any, env: Mapping[str, str]) -> TitlesConfig | None:
    if section is None:
        return None
    r = _Reader(section, "titles")
    titles = TitlesConfig(
        type=r.choice("type", PROVIDER_TYPES, "openai_compat"),
        api_base=r.get("api_base", str, "").rstrip("/"),
        api_key=env.get("KERNEL_TITLES_API_KEY") or r.get("api_key", str, ""),
        model=r.get("model", str, ""),
        max_tokens=r.positive("max_tokens", int, 100),
        headers=r.str_map("headers"),
    )
    return titles if titles.api_key and titles.model else None


def _stt(section: Any, env: Mapping[str, str], warnings: list[str]) -> SttConfig | None:
    if section is None:
        return None
    r = _Reader(section, "stt")
    stt = SttConfig(
        api_base=r.get("api_base", str, "https://api.openai.com/v1").rstrip("/"),
        api_key=env.get("KERNEL_STT_API_KEY") or r.get("api_key", str, ""),
        model=r.get("model", str, "whisper-1"),
        headers=r.str_map("headers"),
        timeout=r.positive("timeout", float, 60.0),
    )
    if not stt.model:
        raise ConfigError(t("config.missing_voice_model", key="stt.model"), key="stt.model")
    if not stt.api_key:
        warnings.append(t("config.warn_stt_disabled"))
        return None
    return stt


def _tts(section: Any, env: Mapping[str, str], warnings: list[str], base: Path) -> TtsConfig | None:
    if section is None:
        return None
    r = _Reader(section, "tts")
    kind = r.choice("type", TTS_TYPES, "edge")
    tts = TtsConfig(
        type=kind,
        voice=r.get("voice", str, "zh-CN-XiaoxiaoNeural" if kind == "edge" else "alloy"),
        api_base=r.get("api_base", str, "https://api.openai.com/v1").rstrip("/"),
        api_key=env.get("KERNEL_TTS_API_KEY") or r.get("api_key", str, ""),
        model=r.get("model", str, "tts-1"),
        headers=r.str_map("headers"),
        format=r.choice("format", TTS_FORMATS, "mp3"),
        proxy=r.get("proxy", str, ""),
        timeout=r.positive("timeout", float, 30.0),
        ffmpeg=r.get("ffmpeg", str, ""),
        max_chars=r.positive("max_chars", int, 500),
    )
    if not tts.voice:
        raise ConfigError(t("config.missing_voice_model", key="tts.voice"), key="tts.voice")
    if kind == "openai" and not tts.model:
        raise ConfigError(t("config.missing_voice_model", key="tts.model"), key="tts.model")
    if kind == "openai" and not tts.api_key:
        warnings.append(t("config.warn_tts_disabled"))
        return None
    tts.ffmpeg = _ffmpeg_path(section, base)
    return tts


def _ffmpeg_path(section: Any, base: Path) -> str:
    """``[tts] ffmpeg``: a path (relative to config.toml's folder), or a bare command name
    looked up on PATH when used; empty when unset."""
    value = _Reader(section, "tts").get("ffmpeg", str, "") if section is not None else ""
    if not value or os.sep not in value and not value.startswith("~"):
        return value
    return str(_resolve(base, value))


def _cli(section: Any, warnings: list[str]) -> dict[str, CLIConfig]:
    tables = dict(DEFAULT_CLI)
    if section is not None:
        tables.update(_Reader(section, "cli").table)
    out: dict[str, CLIConfig] = {}
    for name, table in tables.items():
        if name not in CLI_NAMES:
            warnings.append(t("config.warn_unknown_cli", name=name, names=", ".join(CLI_NAMES)))
            continue
        r = _Reader(table, f"cli.{name}")
        cli = CLIConfig(
            name=name,
            command=r.get("command", str, DEFAULT_CLI[name]["command"]).strip(),
            args=r.str_list("args", DEFAULT_CLI[name]["args"]),
            timeout=r.positive("timeout", float, 600.0),
            idle_timeout=r.positive("idle_timeout", float, 300.0),
            output=r.choice("output", CLI_OUTPUTS, "") if "output" in r.table else None,
            no_progress_timeout=r.positive("no_progress_timeout", float, 60.0),
            version_timeout=r.positive("version_timeout", float, 10.0),
        )
        if not cli.command:
            raise ConfigError(t("config.empty_command", key=r.key("command")), key=r.key("command"))
        if problem := args_problem(name, cli.args):
            kind, flag = problem
            key = r.key("args")
            raise ConfigError(t(f"config.cli_args_{kind}", key=key, flag=flag), key=key)
        out[name] = cli
    return out


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _mcp(
    section: Any, env: Mapping[str, str], base: Path, warnings: list[str]
) -> tuple[MCPSettings, list[MCPServerConfig]]:
    r = _Reader(section, "mcp")
    settings = MCPSettings(
        reconnect_attempts=r.positive("reconnect_attempts", int, 5),
        reconnect_base_delay=r.positive("reconnect_base_delay", float, 1.0),
        reconnect_max_delay=r.positive("reconnect_max_delay", float, 60.0),
        ping_interval=r.get("ping_interval", float, 30.0),
        sampling=r.choice("sampling", ("off", "ask", "auto"), "ask"),
        sampling_max_tokens=r.positive("sampling_max_tokens", int, 1024),
        elicitation=r.get("elicitation", bool, True),
    )
    if settings.ping_interval < 0:
        expected = _expected("positive number")
        raise ConfigError(
            _bad_type_text("mcp.ping_interval", expected, settings.ping_interval),
            key="mcp.ping_interval",
        )
    servers: list[MCPServerConfig] = []
    seen: set[str] = set()
    for i, table in enumerate(r.get("servers", list, [])):
        s = _Reader(table, f"mcp.servers[{i}]")
        name = s.get("name", str, f"server{i}")
        if not name.strip():
            raise ConfigError(t("config.mcp_no_name", key=s.key("name")), key=s.key("name"))
        if name in seen:
            raise ConfigError(
                t("config.mcp_duplicate", key=s.key("name"), name=name), key=s.key("name")
            )
        seen.add(name)
        kind = s.choice("type", ("http", "stdio"), "http")
        headers, missing = _expand_env(s.str_map("headers"), env)
        server_env, missing_in_env = _expand_env(s.str_map("env"), env)
        if missing or missing_in_env:
            warnings.append(t("config.warn_mcp_env", name=name, var=missing or missing_in_env))
            continue
        cwd = s.get("cwd", str, "")
        server = MCPServerConfig(
            name=name,
            type=kind,
            url=s.get("url", str, ""),
            headers=headers,
            command=s.get("command", str, ""),
            args=s.str_list("args", []),
            env=server_env,
            cwd=_resolve(base, cwd) if cwd else None,
            enabled=s.get("enabled", bool, True),
            connect_timeout=s.positive("connect_timeout", float, 10.0),
            timeout=s.positive("timeout", float, 60.0),
        )
        if kind == "http" and not server.url.startswith(("http://", "https://")):
            raise ConfigError(t("config.mcp_needs_url", key=s.key("url")), key=s.key("url"))
        if kind == "stdio" and not server.command:
            raise ConfigError(
                t("config.mcp_needs_command", key=s.key("command")), key=s.key("command")
            )
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


def model_alias_target(target: str) -> tuple[str, str]:
    """("provider", "model") of an alias target; ("", "") for "active"."""
    if target == "active":
        return "", ""
    provider, _, model = target.partition(":")
    return provider, model


def _model_aliases(r: _Reader) -> dict[str, str]:
    if "model_aliases" not in r.table:
        return dict(DEFAULT_MODEL_ALIASES)
    aliases = r.str_map("model_aliases")
    for pattern in aliases:
        if not 0 < len(pattern) <= MODEL_PATTERN_MAX:
            key = r.key(f"model_aliases.{pattern[:40]}")
            raise ConfigError(
                t("config.bad_model_pattern", key=key, limit=MODEL_PATTERN_MAX), key=key
            )
    return aliases


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


def _gateway(r: _Reader, env: Mapping[str, str], *, check: bool = True) -> GatewayConfig:
    gw = GatewayConfig(
        enabled=r.get("enabled", bool, True),
        host=r.get("host", str, "127.0.0.1"),
        port=r.get("port", int, 8088),
        api_key=env.get("KERNEL_GATEWAY_API_KEY") or r.get("api_key", str, ""),
        read_header_timeout=r.positive("read_header_timeout", float, 10.0),
        read_timeout=r.positive("read_timeout", float, 120.0),
        idle_timeout=r.positive("idle_timeout", float, 120.0),
        shutdown_timeout=r.positive("shutdown_timeout", float, 30.0),
        max_body_bytes=r.positive("max_body_bytes", int, 32 * 1024 * 1024),
        queue_timeout=r.positive("queue_timeout", float, 300.0),
        allowed_origins=[o.rstrip("/") for o in r.str_list("allowed_origins", [])],
        archive_max_bytes=r.positive("archive_max_bytes", int, 256 * 1024 * 1024),
        archive_max_files=r.positive("archive_max_files", int, 10000),
        model_aliases=_model_aliases(r),
        allow_hard_links=r.get("allow_hard_links", bool, False),
        max_connections=r.non_negative("max_connections", 0),
        max_connections_per_client=r.non_negative("max_connections_per_client", 0),
        selfops_max_bytes=r.positive("selfops_max_bytes", int, 256 * 1024),
    )
    if not 0 <= gw.port <= 65535:
        expected = _expected("int") + " 0-65535"
        raise ConfigError(_bad_type_text(r.key("port"), expected, gw.port), key=r.key("port"))
    if check and gw.enabled and not gw.api_key and not is_loopback(gw.host):
        raise ConfigError(t("config.gateway_no_key", host=gw.host), key="gateway.api_key")
    return gw


def _channels(r: _Reader, env: Mapping[str, str]) -> ChannelsConfig:
    console = _Reader(r.table.get("console", {}), "channels.console")
    w = _Reader(r.table.get("webhook", {}), "channels.webhook")
    q = _Reader(r.table.get("qq", {}), "channels.qq")
    webhook = WebhookChannelConfig(
        enabled=w.get("enabled", bool, False),
        url=w.url("url"),
        secret=env.get("KERNEL_WEBHOOK_SECRET") or w.get("secret", str, ""),
        timeout_seconds=w.positive("timeout_seconds", float, 10.0),
        max_retries=w.non_negative("max_retries", 3),
        retry_base_delay=w.positive("retry_base_delay", float, 1.0),
    )
    if webhook.enabled and not webhook.url:
        raise ConfigError(t("config.channel_needs", key=w.key("url")), key=w.key("url"))
    qq = QQChannelConfig(
        enabled=q.get("enabled", bool, False),
        app_id=str(q.get("app_id", (str, int), "")).strip(),
        client_secret=env.get("KERNEL_QQ_CLIENT_SECRET") or q.get("client_secret", str, ""),
        bot_prefix=q.get("bot_prefix", str, ""),
        target_type=q.choice("target_type", QQ_TARGET_TYPES, "c2c"),
        target_id=q.get("target_id", str, ""),
        api_base=q.url("api_base") or "https://api.sgroup.qq.com",
        token_url=q.url("token_url") or "https://bots.qq.com/app/getAppAccessToken",
        timeout_seconds=q.positive("timeout_seconds", float, 10.0),
        allowed_users=q.str_list("allowed_users", []),
        owner_users=q.str_list("owner_users", []),
        guest_tools=q.str_list("guest_tools", []),
        callback_max_age=q.positive("callback_max_age", float, 300.0),
        max_concurrent_turns=q.positive("max_concurrent_turns", int, 4),
        turn_timeout=q.positive("turn_timeout", float, 240.0),
    )
    if qq.enabled:
        for name in ("app_id", "client_secret"):
            if not getattr(qq, name):
                raise ConfigError(t("config.channel_needs", key=q.key(name)), key=q.key(name))
    return ChannelsConfig(
        console=ConsoleChannelConfig(enabled=console.get("enabled", bool, True)),
        webhook=webhook,
        qq=qq,
    )


def webhook_worst_case(w: WebhookChannelConfig) -> float:
    """Seconds one webhook delivery may take: every attempt timing out, plus the backoff."""
    backoff = sum(w.retry_base_delay * 2.0 ** min(i, 60) for i in range(min(w.max_retries, 64)))
    return (1 + w.max_retries) * w.timeout_seconds + backoff


def _cron(r: _Reader) -> CronConfig:
    return CronConfig(
        enabled=r.get("enabled", bool, True),
        max_jobs=r.positive("max_jobs", int, 50),
        misfire_grace_seconds=float(r.non_negative("misfire_grace_seconds", 300.0, float)),
        run_timeout=r.positive("run_timeout", float, 600.0),
        delivery_timeout=r.positive("delivery_timeout", float, 60.0),
        min_interval_seconds=r.positive("min_interval_seconds", int, 60),
    )


def _envs(section: Any) -> dict[str, str]:
    r = _Reader(section, "envs")
    out: dict[str, str] = {}
    for name in r.table:
        if not ENV_NAME.match(str(name)):
            raise ConfigError(t("config.bad_env_name", key=f"envs.{name}"), key=f"envs.{name}")
        out[str(name)] = r.get(name, str, "")
    return out


def is_http_url(value: str) -> bool:
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        return False
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not 0-65535
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def is_loopback(host: str) -> bool:
    """``host`` is ``localhost`` or a literal loopback address: 127.0.0.0/8, ``::1``, or an
    IPv4-mapped ``::ffff:127.x.y.z``. Nothing that merely looks like one (``127.evil.example``,
    ``localhost.evil``, a zone id): a name other than ``localhost`` may resolve anywhere.
    The one definition for both the bind check and the sidecar's ``Host`` check."""
    name = host.lower()
    if name == "localhost":
        return True
    if "%" in name:  # a zone id (fe80::1%eth0) names an interface, not loopback
        return False
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
