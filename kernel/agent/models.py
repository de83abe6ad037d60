"""Model selection: the pool of provider clients and which provider and model answer.

The active choice (``/provider``, ``/model``) is persisted in the store's settings; a
session may carry its own override (set through SelfOps) in its meta. Clients are built
on first use in a worker thread (importing an SDK takes seconds) and rebuilt when their
settings change at runtime; a replaced client is closed only once the turns that may
still use it have ended.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kernel.config import Config
from kernel.core.errors import KernelError, SessionError
from kernel.core.i18n import t
from kernel.core.provider import Provider, RetryPolicy, Sleep
from kernel.core.tasks import TaskSet
from kernel.store.db import Store

log = logging.getLogger(__name__)

ProviderFactory = Callable[[str], Provider]
RunningTasks = Callable[[], list[asyncio.Task[None]]]

MODEL_OVERRIDE = "active_llm_override"  # session meta: {"provider_id", "model"} for its turns


class SelectionError(KernelError):
    """A /provider or /model choice that cannot be made; the text says why and what to pick."""


class ModelSelection:
    """The active provider and model, the session overrides, and the built clients.

    ``running`` lists the turn tasks running now (a replaced client waits for them);
    ``tasks`` is where the warm-up and the delayed closes run.
    """

    def __init__(
        self,
        config: Config,
        store: Store,
        factory: ProviderFactory,
        *,
        tasks: TaskSet,
        running: RunningTasks,
        sleep: Sleep,
    ) -> None:
        self.config = config
        self.store = store
        self._factory = factory
        self._tasks = tasks
        self._running = running
        self._sleep = sleep
        self._providers: dict[str, Provider] = {}
        self._lock = asyncio.Lock()
        self._retired: list[Provider] = []  # replaced at runtime; closed at stop
        self._generations: dict[str, int] = {}  # bumped when a provider's settings change
        self.provider_name = config.general.default_provider
        self.model = config.providers[self.provider_name].default_model
        # True once the owner picked with /provider or /model (persisted): in the owner's
        # own chat that choice wins over the routing rules until /model auto.
        self.chosen = False
        # Told when providers' settings change, and when the owner picks a provider with
        # /provider (the routing health forgets their marks: a refused key is tried again).
        self.on_change: Callable[[set[str]], None] | None = None
        # Told when the owner picks a model (/provider, /model, /model auto, a session's
        # own): sessions that failed over stop sticking to their fallback.
        self.on_pick: Callable[[], None] | None = None

    async def restore(self) -> None:
        """Restore the saved provider/model (falling back to the defaults). The client
        is built on first use (:meth:`provider`), not now: its SDK is most of a resting
        Kernel's memory (anthropic: ~45 MiB, ~1 s of CPU), and a Kernel that is not
        asked anything should not carry it (issue 37)."""
        saved = await self.store.get_setting("provider")
        if saved and saved in self.config.enabled_providers:
            self.provider_name = saved
            self.chosen = True
        elif saved:
            log.warning("saved provider %s is unavailable; using the default", saved)
        pcfg = self.config.providers[self.provider_name]
        saved_model = await self.store.get_setting("model")
        self.model = saved_model if saved_model in pcfg.models else pcfg.default_model

    async def aclose(self) -> None:
        """Close every client, the retired ones still waiting included."""
        for provider in [*self._providers.values(), *self._retired]:
            await provider.aclose()
        self._providers.clear()
        self._retired.clear()

    # ----- the pool of clients ---------------------------------------------------------

    async def provider(self, name: str | None = None) -> Provider:
        """The built provider, created on first use in a worker thread: importing an
        SDK takes seconds (anthropic ~1.8 s) and must not stall the event loop."""
        name = name or self.provider_name
        async with self._lock:
            while name not in self._providers:
                generation = self._generations.get(name, 0)
                built = await asyncio.to_thread(self._factory, name)
                if self._generations.get(name, 0) == generation:
                    self._providers[name] = built
                else:  # its settings changed while it was being built: build anew
                    self._retire(built)
        return self._providers[name]

    def providers_changed(self, names: set[str]) -> None:
        """Providers' settings changed at runtime: rebuild their clients on next use.
        An old client is closed once the turns running now end, never under their feet."""
        for name in names:
            self._generations[name] = self._generations.get(name, 0) + 1
            old = self._providers.pop(name, None)
            if old is not None:
                self._retire(old)
        if self.on_change is not None:
            self.on_change(names)
        pcfg = self.config.providers.get(self.provider_name)
        if pcfg is None or not pcfg.enabled:
            self.provider_name = self.config.general.default_provider
            pcfg = self.config.providers[self.provider_name]
        if self.model not in pcfg.models:
            self.model = pcfg.default_model

    def retiring(self) -> int:
        """How many replaced clients wait to be closed."""
        return len(self._retired)

    def _retire(self, provider: Provider) -> None:
        """Close a replaced client once the turns running now (which may use it) end;
        whatever is still open at stop is closed there."""
        self._retired.append(provider)
        self._tasks.spawn(self._close_after(provider, self._running()), "retire")

    async def _close_after(self, provider: Provider, tasks: list[asyncio.Task[None]]) -> None:
        if tasks:
            await asyncio.wait(tasks)
        if provider in self._retired:
            self._retired.remove(provider)
            await provider.aclose()

    def policy(self, name: str) -> RetryPolicy:
        """Provider ``name``'s retry policy, as configured."""
        pcfg = self.config.providers[name]
        return RetryPolicy(max_retries=pcfg.max_retries, base_delay=pcfg.retry_base_delay)

    # ----- the choice ------------------------------------------------------------------

    def resolve_model(self, requested: str) -> tuple[str, str]:
        """(provider, model) for a model name or alias of an enabled provider, the
        active provider first; an unknown or empty name means the active choice."""
        enabled = self.config.enabled_providers
        order = [self.provider_name, *(n for n in enabled if n != self.provider_name)]
        for name in order:
            pcfg = enabled.get(name)
            model = pcfg.resolve(requested) if pcfg and requested else None
            if model:
                return name, model
        return self.provider_name, self.model

    def check_model(self, provider_id: str, requested: str | None = None) -> tuple[str, str]:
        """(provider, model) for an explicit choice: a configured, enabled provider and one
        of its models or aliases (its default model when none is named)."""
        pcfg = self.config.providers.get(provider_id)
        if pcfg is None or not pcfg.enabled:
            available = ", ".join(self.available_providers)
            raise SelectionError(t("provider.unavailable", name=provider_id, available=available))
        model = pcfg.resolve(requested) if requested else pcfg.default_model
        if model is None:
            raise SelectionError(
                t(
                    "model.invalid",
                    model=requested,
                    provider=provider_id,
                    models=", ".join(pcfg.models),
                )
            )
        return provider_id, model

    @property
    def available_providers(self) -> list[str]:
        return list(self.config.enabled_providers)

    @property
    def models(self) -> list[str]:
        return list(self.config.providers[self.provider_name].models)

    async def set_provider(self, name: str) -> str:
        """Switch provider (and to its default model); persisted. Returns the model."""
        if name not in self.config.enabled_providers:
            raise SelectionError(
                t("provider.unavailable", name=name, available=", ".join(self.available_providers))
            )
        # The owner asks for it: a refused key is tried again (the client rebuilt, every
        # key usable again, the routing health's marks forgotten).
        self.providers_changed({name})
        await self.provider(name)
        self._picked()
        self.provider_name = name
        self.model = self.config.providers[name].default_model
        self.chosen = True
        await self.store.set_setting("provider", name)
        await self.store.set_setting("model", self.model)
        return self.model

    async def set_model(self, model: str) -> None:
        """Switch model (a configured name or an alias of one); persisted."""
        model = self.config.providers[self.provider_name].resolve(model) or model
        if model not in self.models:
            raise SelectionError(
                t(
                    "model.invalid",
                    model=model,
                    provider=self.provider_name,
                    models=", ".join(self.models),
                )
            )
        self.model = model
        self.chosen = True
        self._picked()
        await self.store.set_setting("provider", self.provider_name)
        await self.store.set_setting("model", model)

    async def clear_choice(self) -> None:
        """``/model auto``: forget the owner's pick; the routing rules decide again and
        the active choice is the default provider's default model."""
        self.chosen = False
        self._picked()
        self.provider_name = self.config.general.default_provider
        self.model = self.config.providers[self.provider_name].default_model
        await self.store.delete_setting("provider")
        await self.store.delete_setting("model")

    def _picked(self) -> None:
        if self.on_pick is not None:
            self.on_pick()

    def owner_choice(self) -> tuple[str, str] | None:
        """The owner's explicit pick, if any (it wins in the owner's own chat)."""
        return (self.provider_name, self.model) if self.chosen else None

    # ----- a session's own choice ------------------------------------------------------

    def model_for(self, meta: dict[str, object]) -> tuple[str, str]:
        """The provider and model a session's turns use: its own override (set through
        SelfOps) while it still resolves, else the active choice."""
        return self.override_of(meta) or (self.provider_name, self.model)

    def override_of(self, meta: dict[str, object]) -> tuple[str, str] | None:
        """A session's own provider and model (set through SelfOps) while it resolves."""
        override = meta.get(MODEL_OVERRIDE)
        if isinstance(override, dict):
            try:
                model = override.get("model")
                return self.check_model(str(override.get("provider_id", "")), str(model or ""))
            except SelectionError:
                # A provider switched off or a model removed since: the session is not
                # left unable to answer; the override shows in the chat's meta to fix.
                log.warning("a session's model override no longer resolves; using the active one")
        return None

    async def set_session_model(
        self, session_id: int, provider_id: str, requested: str | None = None
    ) -> tuple[str, str]:
        """Give one session its own provider/model; the active choice is untouched."""
        chosen = self.check_model(provider_id, requested)
        row = await self.store.get_session(session_id)
        if row is None:
            raise SessionError(t("session.not_found", id=session_id))
        override = {"provider_id": chosen[0], "model": chosen[1]}
        await self.store.update_meta(session_id, {**row.meta, MODEL_OVERRIDE: override})
        self._picked()
        return chosen

    async def clear_session_model(self, session_id: int) -> None:
        row = await self.store.get_session(session_id)
        if row is None:
            raise SessionError(t("session.not_found", id=session_id))
        if MODEL_OVERRIDE in row.meta:
            meta = {k: v for k, v in row.meta.items() if k != MODEL_OVERRIDE}
            await self.store.update_meta(session_id, meta)
