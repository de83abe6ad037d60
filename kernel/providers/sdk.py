"""Plumbing shared by the two SDK-backed providers. Both SDKs come from the same code
generator, so client options and error classes have the same names.

A provider with several API keys (``api_key`` then ``api_keys``) holds one SDK client per
key, all sharing one HTTP connection pool (``client.with_options(api_key=…)``). The key
in use stays in use until it fails: a 429 or a used-up quota moves to the next key in
turn (the first stays usable for later calls); a refused key (401/403) is dropped until
the provider is rebuilt from a changed configuration. Logs name a key by its position.

Claude's client speaks HTTP through aiohttp (the SDK's own ``DefaultAioHttpClient``,
whose transport it vendors): the same requests, timeouts, proxies from the environment
and errors as its default httpx transport, for well under half its CPU per call (issue
37: 0.40 against 0.91 ms per loopback request, client and server together). aiohttp is
already Kernel's (the sidecar); its session opens on the first request, in the event
loop that makes it. The OpenAI SDK's copy of that transport (openai 3.63) reports a
refused connection as a timeout (its ``AIOHTTP_EXC_MAP``; Anthropic's copy fixes it),
which would tell the owner to wait instead of to check the address: OpenAI-compatible
providers keep the default transport (``aiohttp = False``).
"""

from __future__ import annotations

import importlib
import logging
import weakref
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any, TypeVar

from kernel.config import CAPABILITIES, ProviderConfig
from kernel.core.errors import ProviderAuthError, ProviderError
from kernel.core.provider import Provider
from kernel.core.surrogates import mend_all
from kernel.providers import errors

log = logging.getLogger(__name__)

T = TypeVar("T")


async def sent(create: Callable[..., Awaitable[T]], **params: Any) -> T:
    """``create(**params)``. A request the SDK cannot encode (a lone surrogate, valid in
    JSON but not text, from a tool's result or a model's own output) is sent with U+FFFD
    for each instead: the encoding fails before anything is sent, so nothing goes twice."""
    try:
        return await create(**params)
    except UnicodeEncodeError:
        return await create(**mend_all(params))


class SDKProvider(Provider):
    sdk: ModuleType  # the ``anthropic`` or ``openai`` module
    aiohttp = True  # HTTP through the SDK's aiohttp transport (see above)
    client_options: dict[str, Any] = {}  # more options for the client's constructor

    def __init__(self, cfg: ProviderConfig, client_class: Any) -> None:
        # What the endpoint can do is declared once, in the configuration: its listed
        # capabilities, else its type's (kernel.config.TYPE_CAPABILITIES).
        declared = [c for c in CAPABILITIES if cfg.declares(c)]
        super().__init__(cfg.name, cfg.models, cfg.default_model, declared)
        self.max_tokens = cfg.max_tokens
        keys = cfg.keys or [cfg.api_key]
        self._secrets = [*keys, *cfg.headers.values()]
        first = client_class(
            api_key=keys[0],
            base_url=cfg.api_base or None,
            default_headers=cfg.headers or None,
            timeout=cfg.timeout,
            max_retries=0,  # Kernel retries itself, so /cancel can interrupt the wait
            http_client=self.sdk.DefaultAioHttpClient() if self.aiohttp else None,
            **self.client_options,
        )
        self._clients: list[Any] = [first, *(first.with_options(api_key=k) for k in keys[1:])]
        self._warm(first)
        self.key_count = len(keys)
        self._usable = list(range(len(keys)))  # positions of the keys not refused
        self._key = 0  # the key in use
        # The key each failed attempt used: concurrent calls share the provider, so a
        # rotation must move on from the key that failed, not from whatever is current.
        self._failed_key: weakref.WeakKeyDictionary[BaseException, int] = (
            weakref.WeakKeyDictionary()
        )

    def _warm(self, client: Any) -> None:
        """Import now, in the worker thread that builds the provider, what the SDK would
        import on its first request on the event loop (openai's chat resources: ~30 ms
        idle, 200+ ms loaded, in the first call after a failover; anyio's backend)."""
        importlib.import_module("anyio._backends._asyncio")
        for name in self.resources:
            getattr(client, name)

    resources: tuple[str, ...] = ()  # the client's lazily imported resources a call uses

    @property
    def _client(self) -> Any:
        """The SDK client of the key in use."""
        return self._clients[self._key]

    def limit_time(self, total: float, connect: float) -> None:
        """Shorter timeouts for a probe (``kernel check``): an unreachable endpoint fails
        within ``connect`` seconds instead of the configured request timeout."""
        timeout = self.sdk.Timeout(total, connect=connect)
        self._clients = [client.with_options(timeout=timeout) for client in self._clients]

    def rotate_key(self, error: ProviderError) -> bool:
        failed = self._failed_key.get(error, self._key)
        if isinstance(error, ProviderAuthError) and failed in self._usable:
            self._usable.remove(failed)
            log.warning(
                "provider %s: key %d of %d refused; not used again until the configuration changes",
                self.name,
                failed + 1,
                self.key_count,
            )
        if not self._usable:
            return False
        if self._key == failed or self._key not in self._usable:
            later = [k for k in self._usable if k > failed]
            self._key = (later or self._usable)[0]
        if self._key == failed:
            return False
        log.warning(
            "provider %s: key %d of %d failed (%s); using key %d",
            self.name,
            failed + 1,
            self.key_count,
            error.code or type(error).__name__,
            self._key + 1,
        )
        return True

    async def aclose(self) -> None:
        await self._clients[0].close()  # the clients share one HTTP pool

    def _translate(self, exc: Exception, key: int | None = None) -> Exception:
        """``exc`` as Kernel's error; ``key`` is the position of the key the attempt used."""
        error = errors.translate(exc, provider=self.name, secrets=self._secrets, sdk=self.sdk)
        self._failed_key[error] = self._key if key is None else key
        return error
