"""Runtime changes: the Kernel-managed overlay ``data/runtime.toml`` (SPEC §2).

Changes made while Kernel runs (provider settings, envs, channel settings, MCP servers)
are written here, never into the owner's ``config.toml``, and layered over it at every load
(:func:`kernel.config.merge_overlay`). :meth:`Runtime.update` validates a change by
loading the whole configuration with it, writes the file atomically (tomli-w, a
temporary file renamed over the old one, mode 0600 since it may hold keys), then applies
it to the live :class:`Config` in place, so the change takes effect without a restart.

Child processes (coding CLIs, MCP stdio servers) get their environment from
:func:`child_env`: the process environment (minus Kernel's own ``KERNEL_*`` variables)
plus the effective ``envs`` overlay (:func:`kernel.config.secrets.child_env`).

Every applied change is told to the listeners of :meth:`Runtime.on_config_changed` as
the dotted names of the keys it changed (:func:`changed_keys`: ``providers.openai.
default_model``, ``envs.FOO``, ``mcp.servers``; names, never values) and who made it:
the Kernel records them in the audit trail (``config.changed``).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import tomli_w

from kernel.config import CHANNEL_TYPES, Config, load_config, privilege, read_overlay, secrets
from kernel.core.asks import AskRegistry
from kernel.core.delivery import ChannelRegistry
from kernel.core.fileio import write_atomic
from kernel.core.logs import add_secrets

log = logging.getLogger(__name__)

Overlay = dict[str, Any]
ProvidersListener = Callable[[set[str]], None]
ChannelsListener = Callable[[set[str]], None]
ConfigListener = Callable[[list[str], str], Awaitable[None]]  # (changed keys, by whom)
KEY_DEPTH = 3  # providers.<name>.<setting>: deeper tables are named by their parent
KEY_CHARS = 64  # of one part of a dotted name


def changed_keys(before: Overlay, after: Overlay, depth: int = KEY_DEPTH) -> list[str]:
    """The dotted names of what differs between two overlays, sorted: tables are
    walked ``depth`` deep (a table added or removed is named key by key), anything else
    (a value, a list such as ``mcp.servers``) is named where it differs."""
    found: list[str] = []

    def walk(a: Any, b: Any, path: list[str]) -> None:
        if a == b:
            return
        if len(path) < depth and isinstance(a, dict | None) and isinstance(b, dict | None):
            old, new = a or {}, b or {}
            for key in sorted(set(old) | set(new), key=str):
                walk(old.get(key), new.get(key), [*path, str(key)[:KEY_CHARS]])
        else:
            found.append(".".join(path))

    walk(before, after, [])
    return found


def child_env(config: Config, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child process: ``base`` (default: this process's
    environment, minus ``KERNEL_*``) with the effective ``envs`` overlay on top."""
    return secrets.child_env(config.envs, base)


def write_overlay(path: Path, data: Overlay) -> None:
    """Replace ``path`` atomically: readers see the old file or the new one, never half."""
    write_atomic(path, tomli_w.dumps(data).encode("utf-8"), mode=0o600)


class Runtime:
    """Reads and changes the overlay; one change at a time."""

    def __init__(self, config: Config, provider_types: Collection[str] | None = None) -> None:
        """``provider_types``: the type names the plugins provide (a change naming
        another is refused like the loader refuses it)."""
        self.config = config
        self._provider_types = provider_types
        self._lock = asyncio.Lock()
        self._providers_listeners: list[ProvidersListener] = []
        self._channels_listeners: list[ChannelsListener] = []
        self._config_listeners: list[ConfigListener] = []
        # Who may make a privileged change; the Kernel gives the one that can ask the
        # owner in Telegram (without it a console's privileged change is refused).
        self.privilege = privilege.PrivilegeGate(
            AskRegistry(), ChannelRegistry(), lambda: config.gateway.confirm_timeout
        )

    @property
    def path(self) -> Path:
        return self.config.runtime_path

    def on_providers_changed(self, listener: ProvidersListener) -> None:
        """Call ``listener(names)`` after providers' settings changed (e.g. to drop a
        cached client built with the old key or address)."""
        self._providers_listeners.append(listener)

    def on_channels_changed(self, listener: ChannelsListener) -> None:
        """Call ``listener(names)`` after channels' settings changed (e.g. to drop a
        cached access token obtained with the old secret)."""
        self._channels_listeners.append(listener)

    def on_config_changed(self, listener: ConfigListener) -> None:
        """Await ``listener(keys, by)`` after each applied change that changed a key
        (``by``: who asked, as :meth:`update` was told)."""
        self._config_listeners.append(listener)

    def child_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        return child_env(self.config, base)

    async def overlay(self) -> Overlay:
        return await asyncio.to_thread(read_overlay, self.path)

    async def validate(self, candidate: Overlay) -> Config:
        """The configuration ``candidate`` would give (ConfigError names the problem);
        nothing is written."""
        return await asyncio.to_thread(
            load_config,
            self.config.path,
            env=self.config.source_env,
            require_telegram=False,
            overlay=candidate,
            provider_types=self._provider_types,
            model=type(self.config),
        )

    async def update(
        self,
        change: Callable[[Overlay], None],
        *,
        expect: Callable[[Overlay], None] | None = None,
        by: str = "api",
        caller: str = "owner",
        given: Collection[str] = (),
    ) -> Config:
        """Apply ``change`` to a copy of the overlay, validate the result as a whole
        configuration (ConfigError names the problem), write it, then make it live.
        ``expect`` sees the current overlay first, under the same lock, and may raise to
        refuse a change prepared against an older one. Shielded: a caller that goes away
        (an HTTP client disconnecting) never leaves the file and the live configuration
        disagreeing. ``by``: who asked (``api``: a sidecar client), for the listeners.

        ``caller`` (``owner``: Kernel itself, the owner's Telegram; ``key``, ``console``,
        ``keyless``: the sidecar's) meets the privilege rule (:mod:`kernel.config.privilege`)
        first: what the change would do is worked out, the caller allowed (the owner asked
        in Telegram when the rule says so) or ``privilege_required`` raised; under the lock
        the result may hold nothing privileged beyond what was allowed. ``given``: the
        values the request carried itself (a provider's key given again)."""
        check = None
        if caller != "owner":
            fresh, _ = await self.preview(change)
            found = privilege.config_changes(self.config, fresh, given)
            await self.privilege.authorize(caller, found)
            check = privilege.within(caller, found, given)
        return await asyncio.shield(self._update(change, expect, by, check))

    async def preview(self, change: Callable[[Overlay], None]) -> tuple[Config, Overlay]:
        """The configuration ``change`` would give now, and the overlay it was made from;
        nothing is written."""
        current = await self.overlay()
        candidate = copy.deepcopy(current)
        change(candidate)
        return await self.validate(candidate), current

    async def _update(
        self,
        change: Callable[[Overlay], None],
        expect: Callable[[Overlay], None] | None,
        by: str,
        check: Callable[[Config, Config], None] | None = None,
    ) -> Config:
        async with self._lock:
            current = await asyncio.to_thread(read_overlay, self.path)
            if expect is not None:
                expect(current)
            candidate = copy.deepcopy(current)
            change(candidate)
            fresh = await self.validate(candidate)
            if check is not None:
                check(self.config, fresh)
            await asyncio.to_thread(write_overlay, self.path, candidate)
            self._apply(fresh)
            keys = changed_keys(current, candidate)
            if keys:
                for listener in self._config_listeners:
                    await listener(keys, by)
            return fresh

    def _apply(self, fresh: Config) -> None:
        live = self.config
        changed = {
            name
            for name in set(live.providers) | set(fresh.providers)
            if live.providers.get(name) != fresh.providers.get(name)
        }
        live.providers.clear()
        live.providers.update(fresh.providers)
        live.envs = dict(fresh.envs)
        channels = {
            name
            for name in CHANNEL_TYPES
            if getattr(live.channels, name) != getattr(fresh.channels, name)
        }
        live.channels = fresh.channels
        # The servers' definitions; their connections are the MCP manager's to change.
        live.mcp.servers = list(fresh.mcp.servers)
        add_secrets(secrets.secrets_of(fresh), secrets.header_values_of(fresh))
        if channels:
            log.info("runtime change: channels %s updated", ", ".join(sorted(channels)))
            for channel_listener in self._channels_listeners:
                channel_listener(channels)
        if changed:
            log.info("runtime change: providers %s updated", ", ".join(sorted(changed)))
            for listener in self._providers_listeners:
                listener(changed)
