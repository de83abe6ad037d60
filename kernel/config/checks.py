"""The rules that span sections, run by :class:`kernel.config.model.Config`'s validators
once every table is read: the default provider usable, model references naming configured
models, approvals reaching Kernel's MCP endpoint, and the warnings that weigh one table
against another."""

from __future__ import annotations

from kernel.config.channels import ChannelsConfig, webhook_worst_case
from kernel.config.cli import CLIConfig
from kernel.config.gateway import GatewayConfig, model_alias_target
from kernel.config.general import CronConfig, GeneralConfig
from kernel.config.mcp import MCPSettings
from kernel.config.memory import MemoryConfig
from kernel.config.net import is_loopback
from kernel.config.providers import ProviderConfig, provider_env_key
from kernel.config.routing import RoutingConfig, parse_ref
from kernel.core.errors import ConfigError
from kernel.core.i18n import t

WILDCARDS = ("0.0.0.0", "::", "")  # binds that answer on loopback too


def check_default_provider(general: GeneralConfig, providers: dict[str, ProviderConfig]) -> None:
    """``general.default_provider`` names a configured provider that is on and keyed."""
    default = general.default_provider
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


def check_model_aliases(gateway: GatewayConfig, providers: dict[str, ProviderConfig]) -> None:
    """Each target names a configured provider and one of its models (or "active")."""
    for pattern, target in gateway.model_aliases.items():
        provider, model = model_alias_target(target)
        if target == "active":
            continue
        pcfg = providers.get(provider)
        if pcfg is None or not model or pcfg.resolve(model) is None:
            key = f"gateway.model_aliases.{pattern}"
            raise ConfigError(t("config.bad_model_alias", key=key, target=target), key=key)


def check_approvals(cli: dict[str, CLIConfig], gateway: GatewayConfig, mcp: MCPSettings) -> None:
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


class _References:
    """Model references and reasoning levels checked against the configured providers."""

    def __init__(self, providers: dict[str, ProviderConfig]) -> None:
        self.providers = providers

    def ref(self, key: str, value: str) -> ProviderConfig:
        name, model = parse_ref(value)
        pcfg = self.providers.get(name)
        if pcfg is None:
            available = ", ".join(self.providers) or "-"
            raise ConfigError(
                t("config.bad_ref_provider", key=key, ref=value, available=available), key=key
            )
        if model and pcfg.resolve(model) is None:
            models = ", ".join(pcfg.models)
            raise ConfigError(
                t("config.bad_ref_model", key=key, ref=value, name=name, models=models), key=key
            )
        return pcfg

    def refs(self, key: str, values: list[str] | None) -> None:
        for index, value in enumerate(values or []):
            self.ref(f"{key}[{index}]", value)

    @staticmethod
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


def check_routing(
    routing: RoutingConfig, providers: dict[str, ProviderConfig], general: GeneralConfig
) -> None:
    """Every model reference names a configured provider and one of its models, and
    reasoning is set only where the provider declares the capability (and, for a token
    budget on a Claude provider, stays under its max_tokens)."""
    check = _References(providers)
    check.refs("general.fallbacks", general.fallbacks)
    for name, pcfg in providers.items():
        prefix = f"providers.{name}"
        check.refs(f"{prefix}.fallbacks", pcfg.fallbacks)
        check.reasoning(f"{prefix}.reasoning", pcfg.reasoning, pcfg)
        for model, options in pcfg.model_options.items():
            key = f"{prefix}.model_options.{model}"
            check.ref(key, f"{name}:{model}")
            target = pcfg.resolve(model)
            if target != model:  # the router looks options up by the model's own name
                raise ConfigError(
                    t("config.options_alias", key=key, alias=model, model=target, name=name),
                    key=key,
                )
            check.refs(f"{key}.fallbacks", options.fallbacks)
            check.reasoning(f"{key}.reasoning", options.reasoning, pcfg)
    for index, rule in enumerate(routing.rules):
        prefix = f"routing.rules[{index}]"
        primary = check.ref(f"{prefix}.primary", rule.primary) if rule.primary else None
        check.refs(f"{prefix}.fallbacks", rule.fallbacks)
        default = providers[general.default_provider]
        check.reasoning(f"{prefix}.reasoning", rule.reasoning, primary or default)


def channel_warnings(channels: ChannelsConfig, cron: CronConfig) -> list[str]:
    """A QQ bot answering nobody; webhook retries outlasting a cron delivery."""
    warnings: list[str] = []
    if channels.qq.enabled and not channels.qq.allowed_users:
        warnings.append(t("config.warn_qq_nobody"))
    worst = webhook_worst_case(channels.webhook)
    if channels.webhook.enabled and worst > cron.delivery_timeout:
        limit = f"{cron.delivery_timeout:g}"
        warnings.append(t("config.warn_webhook_slow", worst=f"{worst:g}", limit=limit))
    return warnings


def resolve_embeddings(memory: MemoryConfig, providers: dict[str, ProviderConfig]) -> None:
    """``[memory.embeddings]``: the provider it names exists, and lends its key (and its
    api_base) where the table sets none; an endpoint is known in the end."""
    cfg = memory.embeddings
    if cfg is None:
        return
    if cfg.provider:
        lender = providers.get(cfg.provider)
        if lender is None:
            available = ", ".join(providers) or "-"
            raise ConfigError(
                t("config.embeddings_provider", name=cfg.provider, available=available),
                key="memory.embeddings.provider",
            )
        cfg.api_key = cfg.api_key or (lender.keys[:1] or [""])[0]
        cfg.base_url = cfg.base_url or lender.api_base.rstrip("/")
    if not cfg.base_url:
        key = "memory.embeddings.base_url"
        raise ConfigError(t("config.embeddings_base_url", key=key), key=key)
