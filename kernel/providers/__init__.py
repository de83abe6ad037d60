"""Model provider adapters. SDKs are imported only when a provider of their type is built.

Public API: :func:`create_provider` and :func:`create_titles_provider` (the providers
behind ``kernel.core.provider.Provider``); ``kernel.providers.errors.translate`` (SDK
errors into Kernel's tree), ``kernel.providers.sdk.SDKProvider`` and
``kernel.providers.retirement.retirement_notices``.
"""

from __future__ import annotations

from kernel.config import ProviderConfig, TitlesConfig
from kernel.core.provider import Provider


def create_provider(cfg: ProviderConfig) -> Provider:
    if cfg.type == "claude":
        from kernel.providers.claude import ClaudeProvider

        return ClaudeProvider(cfg)
    from kernel.providers.openai_compat import OpenAICompatProvider

    return OpenAICompatProvider(cfg)


def create_titles_provider(cfg: TitlesConfig) -> Provider:
    """The optional small model used for session titles: a provider of its own."""
    as_provider = ProviderConfig(
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
    return create_provider(as_provider)
