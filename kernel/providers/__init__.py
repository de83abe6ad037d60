"""Model provider adapters, one module per provider type.

Public API: :func:`register` (the ``claude`` and ``openai_compat`` types, as a plugin;
SDKs are imported only when a provider of their type is built) and
:func:`titles_provider_config` (the optional titles model as a provider's configuration);
``kernel.providers.errors.translate`` (SDK errors into Kernel's tree),
``kernel.providers.sdk.SDKProvider`` (capabilities from the configuration; one client per
API key, ``rotate_key``) and ``kernel.providers.retirement.retirement_notices``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from kernel.config import ProviderConfig, TitlesConfig
from kernel.core.provider import Provider


class ProviderTypes(Protocol):
    """The registration hook a provider type is added with (kernel/plugins.py's
    ``Plugins``)."""

    def add_provider_type(
        self, type_name: str, factory: Callable[[ProviderConfig], Provider]
    ) -> None: ...


def _claude(cfg: ProviderConfig) -> Provider:
    from kernel.providers.claude import ClaudeProvider

    return ClaudeProvider(cfg)


def _openai_compat(cfg: ProviderConfig) -> Provider:
    from kernel.providers.openai_compat import OpenAICompatProvider

    return OpenAICompatProvider(cfg)


def register(plugins: ProviderTypes) -> None:
    plugins.add_provider_type("claude", _claude)
    plugins.add_provider_type("openai_compat", _openai_compat)


def titles_provider_config(cfg: TitlesConfig) -> ProviderConfig:
    """The optional small model used for session titles: a provider of its own."""
    return ProviderConfig(
        name="titles",
        type=cfg.type,
        api_base=cfg.api_base,
        api_key=cfg.api_key,
        max_tokens=cfg.max_tokens,
        default_model=cfg.model,
        models=[cfg.model],
        headers=cfg.headers,
        max_retries=0,
    )
