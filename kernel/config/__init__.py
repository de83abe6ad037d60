"""Configuration, declared once: one pydantic model per section, each field carrying its
default, bounds, description and markers (secret, environment override).

Public API (``from kernel.config import …``):

- loading: :func:`load_config`, :class:`Config` (one model whose fields are the sections),
  :func:`locate_config`, :func:`gateway_of`, :func:`sidecar_of` (the [gateway] section and
  the key Kernel's clients send), :func:`language_of` (the language asked for: loading
  never sets it, entry points do), :func:`read_overlay`, :func:`merge_overlay`,
  :data:`RUNTIME_FILE`, :data:`ENV_NAME`;
- sections: :class:`TelegramConfig`, :class:`GeneralConfig`, :class:`ProviderConfig`,
  :class:`TitlesConfig`, :class:`CLIConfig`, :class:`ToolPolicy`, :class:`MCPSettings`,
  :class:`MCPServerConfig`, :class:`GatewayConfig`, :class:`ChannelsConfig` with
  :class:`ConsoleChannelConfig` / :class:`WebhookChannelConfig` / :class:`QQChannelConfig`,
  :class:`CronConfig`, :class:`BudgetConfig`, :class:`ModelPrice`, :class:`SttConfig`,
  :class:`TtsConfig`, :class:`RoutingConfig` with :class:`RoutingRule` and
  :class:`ModelOptions`, :class:`WebConfig` with :class:`WebSearchConfig`,
  :class:`AgentsConfig`, :class:`BrowserConfig`, :class:`PromptsConfig`, :class:`FeaturesConfig`,
  :class:`MemoryConfig` with :class:`EmbeddingsConfig`;
- the shape of the file, derived from :class:`Config`: :data:`SCHEMA`, :func:`unknown_keys`;
- helpers: :func:`provider_env_key`, :func:`parse_ref`, :func:`compile_pattern`,
  :func:`model_alias_target`, :func:`webhook_backoff`, :func:`webhook_worst_case`,
  :func:`is_loopback`, :func:`is_http_url`, :func:`args_problem`;
- secrets: :mod:`kernel.config.secrets` (what is secret, asked by everyone).

Modules: ``schema`` (the field vocabulary and the reader), one module per section group
(``general``, ``providers``, ``routing``, ``cli``, ``mcp``, ``gateway``, ``channels``, ``voice``,
``web``, ``prompts``), ``model`` (:class:`Config`), ``readers`` (tables their model alone
does not read), ``checks`` (rules across sections), ``tree`` (the file's shape, derived),
``loader`` (files, overlay, language), ``secrets``, ``net``.
"""

from kernel.config.channels import (
    CHANNEL_TYPES,
    QQ_TARGET_TYPES,
    ChannelsConfig,
    ConsoleChannelConfig,
    QQChannelConfig,
    WebhookChannelConfig,
    webhook_backoff,
    webhook_worst_case,
)
from kernel.config.cli import CLI_NAMES, CLI_OUTPUTS, DEFAULT_CLI, CLIConfig, args_problem
from kernel.config.gateway import (
    DEFAULT_MODEL_ALIASES,
    MODEL_PATTERN_MAX,
    GatewayConfig,
    model_alias_target,
)
from kernel.config.general import (
    LOG_LEVELS,
    BudgetConfig,
    CronConfig,
    GeneralConfig,
    TelegramConfig,
    ToolPolicy,
)
from kernel.config.loader import (
    gateway_of,
    language_of,
    load_config,
    locate_config,
    merge_overlay,
    read_overlay,
    sidecar_of,
)
from kernel.config.mcp import MCPServerConfig, MCPSettings
from kernel.config.memory import EmbeddingsConfig, MemoryConfig
from kernel.config.model import RUNTIME_FILE, Config
from kernel.config.net import is_http_url, is_loopback
from kernel.config.prompts import FeaturesConfig, PromptsConfig
from kernel.config.providers import (
    CAPABILITIES,
    DEFAULT_PROVIDERS,
    ModelPrice,
    ProviderConfig,
    TitlesConfig,
    provider_env_key,
)
from kernel.config.readers import ENV_NAME
from kernel.config.routing import (
    MIN_THINKING_BUDGET,
    REASONING_LEVELS,
    ModelOptions,
    Reasoning,
    RoutingConfig,
    RoutingRule,
    compile_pattern,
    parse_ref,
)
from kernel.config.tree import SCHEMA, SECTIONS, unknown_keys
from kernel.config.voice import TTS_FORMATS, TTS_TYPES, SttConfig, TtsConfig
from kernel.config.web import (
    SEARCH_ENDPOINTS,
    SEARCH_PROVIDERS,
    AgentsConfig,
    BrowserConfig,
    WebConfig,
    WebSearchConfig,
)

__all__ = [
    "CAPABILITIES",
    "FeaturesConfig",
    "PromptsConfig",
    "CHANNEL_TYPES",
    "CLI_NAMES",
    "CLI_OUTPUTS",
    "MIN_THINKING_BUDGET",
    "REASONING_LEVELS",
    "DEFAULT_CLI",
    "DEFAULT_MODEL_ALIASES",
    "DEFAULT_PROVIDERS",
    "ENV_NAME",
    "LOG_LEVELS",
    "MODEL_PATTERN_MAX",
    "QQ_TARGET_TYPES",
    "RUNTIME_FILE",
    "SCHEMA",
    "SECTIONS",
    "TTS_FORMATS",
    "TTS_TYPES",
    "BudgetConfig",
    "CLIConfig",
    "ChannelsConfig",
    "Config",
    "ConsoleChannelConfig",
    "CronConfig",
    "GatewayConfig",
    "GeneralConfig",
    "MCPServerConfig",
    "MCPSettings",
    "MemoryConfig",
    "EmbeddingsConfig",
    "ModelOptions",
    "ModelPrice",
    "ProviderConfig",
    "QQChannelConfig",
    "Reasoning",
    "RoutingConfig",
    "RoutingRule",
    "SttConfig",
    "TelegramConfig",
    "TitlesConfig",
    "ToolPolicy",
    "TtsConfig",
    "WebConfig",
    "WebSearchConfig",
    "AgentsConfig",
    "BrowserConfig",
    "SEARCH_ENDPOINTS",
    "SEARCH_PROVIDERS",
    "WebhookChannelConfig",
    "args_problem",
    "compile_pattern",
    "gateway_of",
    "is_http_url",
    "is_loopback",
    "language_of",
    "load_config",
    "locate_config",
    "merge_overlay",
    "model_alias_target",
    "parse_ref",
    "provider_env_key",
    "read_overlay",
    "sidecar_of",
    "unknown_keys",
    "webhook_backoff",
    "webhook_worst_case",
]
