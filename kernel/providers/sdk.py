"""Plumbing shared by the two SDK-backed providers. Both SDKs come from the same code
generator, so client options and error classes have the same names."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from kernel.config import ProviderConfig
from kernel.core.provider import Provider
from kernel.providers import errors


class SDKProvider(Provider):
    sdk: ModuleType  # the ``anthropic`` or ``openai`` module

    def __init__(self, cfg: ProviderConfig, client_class: Any) -> None:
        super().__init__(cfg.name, cfg.models, cfg.default_model, cfg.capabilities)
        self.max_tokens = cfg.max_tokens
        self._secrets = [cfg.api_key, *cfg.headers.values()]
        self._client = client_class(
            api_key=cfg.api_key,
            base_url=cfg.api_base or None,
            default_headers=cfg.headers or None,
            timeout=cfg.timeout,
            max_retries=0,  # Kernel retries itself, so /cancel can interrupt the wait
        )

    def limit_time(self, total: float, connect: float) -> None:
        """Shorter timeouts for a probe (``kernel check``): an unreachable endpoint fails
        within ``connect`` seconds instead of the configured request timeout."""
        self._client = self._client.with_options(timeout=self.sdk.Timeout(total, connect=connect))

    async def aclose(self) -> None:
        await self._client.close()

    def _translate(self, exc: Exception) -> Exception:
        return errors.translate(exc, provider=self.name, secrets=self._secrets, sdk=self.sdk)
