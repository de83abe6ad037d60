"""Outbound channels besides Telegram: ``console``, ``webhook`` and ``qq`` (with QQ's
inbound callbacks).

Public API: one plugin function per channel (:func:`console_plugin`,
:func:`webhook_plugin`, :func:`qq_plugin`; named apart from the modules), listed in
kernel/plugins.py's ``DEFAULT_PLUGINS``; each builds its channel from a
``deps.ChannelDeps`` and names the steps the Kernel runs at start and stop. The channels themselves:
``console.ConsoleChannel``, ``webhook.WebhookChannel``, ``qq.QQChannel`` and, for QQ
events coming in (``POST /channels/qq/inbound``), ``qq_inbound.QQInbound`` and
``InboundError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel.core.plugin import ChannelParts

if TYPE_CHECKING:
    from kernel.channels.deps import ChannelDeps, ChannelHooks


def console_plugin(plugins: ChannelHooks) -> None:
    def build(deps: ChannelDeps) -> ChannelParts:
        from kernel.channels.console import ConsoleChannel

        return ChannelParts(ConsoleChannel(deps.config, deps.store))

    plugins.add_channel("console", build)


def webhook_plugin(plugins: ChannelHooks) -> None:
    def build(deps: ChannelDeps) -> ChannelParts:
        from kernel.channels.webhook import WebhookChannel

        channel = WebhookChannel(deps.config, deps.clock, deps.records)
        return ChannelParts(channel, start=channel.load, close=channel.aclose)

    plugins.add_channel("webhook", build)


def qq_plugin(plugins: ChannelHooks) -> None:
    def build(deps: ChannelDeps) -> ChannelParts:
        from kernel.channels.qq import QQChannel
        from kernel.channels.qq_inbound import QQInbound

        channel = QQChannel(deps.config, deps.clock)
        deps.runtime.on_channels_changed(channel.settings_changed)
        inbound = QQInbound(channel, deps.agent, deps.registry, deps.records)
        return ChannelParts(channel, stop=inbound.stop, close=channel.aclose, inbound=inbound)

    plugins.add_channel("qq", build)
