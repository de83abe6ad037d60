"""Outbound channels: plugins that deliver a final text somewhere (seed 000's Channel
extension point), and the registry every producer (cron, the sidecar, QQ inbound) sends
through.

A channel has a stable lowercase ``name``, says whether it is ``enabled`` (and why not),
and implements ``send_text(target, text)``, raising :class:`ChannelError` when delivery
fails. :meth:`ChannelRegistry.send` bounds every delivery by a timeout and lets
cancellation through, so a caller that goes away stops the delivery too.

Built-in channels register the same way an extension would. Channels living in an
adapter the core must not import (Telegram) attach themselves once they run; until then
their name is known. A channel whose adapter is still starting (``pending``: Telegram,
configured, at Kernel start, when a missed cron run already fires) is waited for within
the delivery's timeout; one that is not coming (never configured, or stopped) refuses
at once with ``channel_disabled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from kernel.core.asks import Answer, AskOutcome, AskRegistry, Question
from kernel.core.errors import ChannelError
from kernel.core.events import AskUser, Completed, ErrorEvent, ModelSwitched, ToolResult
from kernel.core.i18n import t
from kernel.core.turns import Turn

log = logging.getLogger(__name__)


# A Telegram topic's conversation (``kernel/telegram/topics.py``): a job the agent creates
# there keeps it as its target's ``session_id``, and its runs are delivered to the topic.
TOPIC_CONVERSATION = "telegram:topic:"
TOPIC_META = "telegram_topic"  # a session's topic (message_thread_id), in the session's meta


@dataclass(frozen=True, slots=True)
class Target:
    """Where a text goes, in the channel's own terms.

    ``user_id``/``session_id``: the receiver and conversation (webhook payload, console
    chat, the Telegram chat id). For QQ, ``kind`` is c2c/group/guild/dm and ``user_id``
    the openid, group_openid, channel_id or guild_id; ``reply_to`` the inbound message
    id that makes a passive reply. ``origin`` names the channel the text came from.
    """

    user_id: str = ""
    session_id: str = ""
    kind: str = ""
    reply_to: str = ""
    origin: str = ""


class Channel(Protocol):
    name: str

    def unavailable(self) -> str:
        """Why the channel cannot send now ("" when it can): disabled, not configured…"""
        ...

    async def send_text(self, target: Target, text: str) -> None: ...


@runtime_checkable
class FileChannel(Protocol):
    """A channel that can also send a file into the chat (Telegram: a photo or a
    document): what a tool made there, a browser screenshot. Raises ChannelError."""

    name: str

    def unavailable(self) -> str: ...

    async def send_file(self, target: Target, path: Path, name: str, caption: str) -> None: ...


class Asker(Protocol):
    """A channel that can put a running turn's question (ask_user, a tool approval) to
    the owner, for turns no channel is watching (cron jobs, QQ messages)."""

    async def show(self, event: AskUser, label: str, where: str = "") -> None:
        """Put ``event`` to the owner headed by ``label``; ``where``: the conversation
        the turn belongs to (a Telegram topic's, for a job made in one), "" for none."""
        ...

    async def settle(self, tool_call_id: str) -> None:
        """The tool finished: a question still open for it is closed as unanswered."""
        ...


async def ask_owner(
    asks: AskRegistry, registry: ChannelRegistry, question: Question, seconds: float, label: str
) -> Answer:
    """Put ``question`` to the owner through the registry's asker (Telegram), outside any
    turn, and wait at most ``seconds``; no asker, or one that cannot show it: undelivered."""
    asker = registry.asker
    if asker is None:
        return Answer(AskOutcome.UNDELIVERED)
    question.tool_call_id = question.tool_call_id or f"{question.conversation}-{question.id}"
    event = AskUser(
        0,
        question.id,
        question.tool_call_id,
        question.text,
        list(question.options),
        question.kind,
        question.markdown,
        question.details,
    )
    waiting = asyncio.ensure_future(asks.wait(question, seconds))
    await asyncio.sleep(0)  # the question waits before anyone can press its buttons
    try:
        await asker.show(event, label)
    except Exception as exc:  # unanswerable: the wait runs into its timeout
        log.warning("could not show a question to the owner: %s", type(exc).__name__)
        asks.undelivered(question.id)
    try:
        return await waiting
    finally:
        waiting.cancel()
        with contextlib.suppress(Exception):
            await asker.settle(question.tool_call_id)


class Detached:
    """A known channel whose adapter is not running (Telegram before start, after stop).
    ``pending``: the adapter is expected to start, so deliveries wait for it."""

    def __init__(self, name: str, *, pending: bool = False) -> None:
        self.name = name
        self.pending = pending

    def unavailable(self) -> str:
        return t("channel.not_running", name=self.name)

    async def send_text(self, target: Target, text: str) -> None:
        raise ChannelError(ChannelError.DISABLED, self.unavailable(), channel=self.name)


Closer = Callable[[], Awaitable[None]]


class ChannelRegistry:
    def __init__(self) -> None:
        self._channels: dict[str, Channel] = {}
        self._closers: list[Closer] = []
        self.asker: Asker | None = None
        self._changed = asyncio.Event()  # replaced each time a channel comes or goes

    def register(self, channel: Channel, *, close: Closer | None = None) -> None:
        """Add a channel (replacing one of the same name); ``close`` runs at shutdown."""
        name = channel.name
        if not name or name != name.lower() or not name.replace("_", "").isalnum():
            raise ValueError(f"invalid channel name {name!r}: use lowercase letters, digits, _")
        self._channels[name] = channel
        if close is not None:
            self._closers.append(close)

    def attach(self, channel: Channel) -> None:
        """A running adapter takes over its channel's name (deliveries waiting for it go)."""
        self._channels[channel.name] = channel
        self._notify()

    def detach(self, name: str) -> None:
        """The adapter stopped: its name stays known but refuses."""
        if name in self._channels:
            self._channels[name] = Detached(name)
            self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def names(self) -> list[str]:
        return list(self._channels)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._channels

    def get(self, name: str) -> Channel:
        """The channel, or ChannelError(channel_not_supported) naming the known ones."""
        channel = self._channels.get(name)
        if channel is None:
            known = ", ".join(self._channels)
            raise ChannelError(
                ChannelError.NOT_SUPPORTED,
                t("channel.not_supported", name=name[:64], known=known),
                channel=name[:64],
                supported=list(self._channels),
            )
        return channel

    def require(self, name: str) -> Channel:
        """The channel if it can send now; else ChannelError (not supported / disabled)."""
        channel = self.get(name)
        reason = channel.unavailable()
        if reason:
            raise ChannelError(ChannelError.DISABLED, reason, channel=name)
        return channel

    async def send(self, name: str, target: Target, text: str, *, timeout: float) -> None:  # noqa: ASYNC109 - a bound per channel, applied inside
        """Deliver ``text`` within ``timeout`` seconds; ChannelError when it cannot. A
        channel still starting is waited for, within the same ``timeout``."""
        waiting = False
        try:
            async with asyncio.timeout(timeout):
                while True:
                    channel = self.get(name)
                    reason = channel.unavailable()
                    if not reason:
                        break
                    if getattr(channel, "pending", False) is not True:
                        raise ChannelError(ChannelError.DISABLED, reason, channel=name)
                    if not waiting:
                        log.info("delivery to %s waits for the channel to start", name)
                    waiting = True
                    await self._changed.wait()
                waiting = False
                await channel.send_text(target, text)
        except ChannelError:
            raise
        except TimeoutError:
            if waiting:
                log.warning("delivery to %s: the channel did not start in %.0fs", name, timeout)
                raise ChannelError(
                    ChannelError.DISABLED,
                    t("channel.not_started", name=name, seconds=f"{timeout:g}"),
                    channel=name,
                ) from None
            log.warning("delivery to %s timed out after %.0fs", name, timeout)
            raise ChannelError(
                ChannelError.DISPATCH_FAILED,
                t("channel.timeout", name=name, seconds=f"{timeout:g}"),
                channel=name,
            ) from None
        except Exception as exc:
            log.warning("delivery to %s failed: %s", name, type(exc).__name__)
            raise ChannelError(
                ChannelError.DISPATCH_FAILED,
                t("channel.failed", name=name, detail=type(exc).__name__),
                channel=name,
            ) from exc

    async def aclose(self) -> None:
        for close in self._closers:
            try:
                await close()
            except Exception as exc:  # closing is best effort at shutdown
                log.warning("closing a channel failed: %s", type(exc).__name__)


async def follow_turn(
    turn: Turn,
    asker: Asker | None,
    label: str,
    switches: list[str] | None = None,
    where: str = "",
) -> Completed | ErrorEvent:
    """Drain a turn no channel is showing (a cron job, a QQ message): its questions go to
    the owner through ``asker`` (headed by ``label``) and are closed once their tool is
    done (``where``: :meth:`Asker.show`'s); ``switches`` gets the line of each failover to
    another model. Cancelling the
    caller cancels the turn, which still writes a valid history."""
    shown: set[str] = set()
    try:
        async for event in turn:
            if isinstance(event, ModelSwitched) and switches is not None:
                switches.append(event.describe())
            elif isinstance(event, AskUser) and asker is not None:
                try:
                    await asker.show(event, label, where)
                    shown.add(event.tool_call_id)
                except Exception as exc:  # unanswerable: the wait runs into its timeout
                    log.warning("could not show a question: %s", type(exc).__name__)
            elif isinstance(event, ToolResult) and event.id in shown and asker is not None:
                shown.discard(event.id)
                await _settle(asker, event.id)
    except asyncio.CancelledError:
        turn.cancel()
        raise
    finally:
        for tool_call_id in shown:
            if asker is not None:
                await _settle(asker, tool_call_id)
    assert turn.final is not None
    return turn.final


async def _settle(asker: Asker, tool_call_id: str) -> None:
    try:
        await asker.settle(tool_call_id)
    except Exception as exc:
        log.warning("could not close a question: %s", type(exc).__name__)
