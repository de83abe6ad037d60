"""Polling that cannot wedge: the bot's ``getUpdates`` and the watchdog over it.

Public API: ``PollingBot`` (the ``ExtBot`` the Application is built with), ``PollStats``
(what it counts), ``PollWatch`` (starts polling, watches it, restarts it),
``poll_request``, ``recovery_bound``, ``UnreadableUpdatesError``, ``BackedOffError``,
and the constants ``BACKOFF_CAP``, ``POLL_GRACE``.

``PollingBot.get_updates`` parses each update on its own. One that python-telegram-bot
cannot parse (e.g. a ``poll`` from a Bot API server older than the library) is logged by
id and kind only, counted, and replaced by a bare ``Update(update_id)``, so the offset
moves past it. PTB's own parsing of the whole batch, which logs every update's content
at CRITICAL and retries the same offset in a tight loop, never runs.

Liveness is judged by updates consumed: a batch counts once the next ``getUpdates``
confirms it (its offset is past the batch), which is when Telegram stops counting it as
pending. ``PollWatch`` checks every ``min(watchdog_seconds / 4, 15)`` s and restarts
polling (on a fresh connection) when ``getWebhookInfo`` reported updates pending at two
checks in a row with none consumed in between, or when no ``getUpdates`` attempt ended
(answered or failed) for ``watchdog_seconds`` (the polling loop itself is stuck). The
channel is ``degraded`` while polls fail, after ``watchdog_seconds`` without an
answered poll, and while updates wait unconsumed.

Recovery bound, from the moment the Bot API answers again to the next update consumed,
plus one request (``recovery_bound``: 30 s with the defaults poll_timeout 30 and
watchdog_seconds 120, i.e. a check every 15 s):

- errors (refused connections, resets, 5xx): the failed poll is retried after 1 s, then
  1.5 times longer after each failure, at most ``BACKOFF_CAP``. Kernel waits this itself
  inside ``get_updates`` and then lets PTB retry at once (``BackedOffError``), because
  PTB's own retry loop would wait up to 30 s and cannot be woken;
- a hang: the hung poll ends after its read timeout, ``poll_timeout + POLL_GRACE``, and
  is retried at once; an update waiting meanwhile makes the watchdog restart polling
  within two checks: at most ``min(poll_timeout + POLL_GRACE, 2 * check interval)``;
- a 429 is waited out for its ``retry_after``, as Telegram asks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from telegram import Update
from telegram._utils.defaultvalue import DEFAULT_NONE, DefaultValue
from telegram.error import BadRequest, NetworkError, TelegramError, TimedOut
from telegram.ext import Application, ExtBot

from kernel.core.backoff import Backoff, Retrying
from kernel.core.clock import Clock, SystemClock
from kernel.telegram.mending import MendingRequest
from kernel.telegram.topics import Lanes

log = logging.getLogger(__name__)

BACKOFF_CAP = 10.0  # seconds: the longest wait before retrying a failed poll
# A failed poll is retried after 1 s, then 1.5 times longer after each failure.
POLL_BACKOFF = Backoff(first=1.0, cap=BACKOFF_CAP, factor=1.5)
POLL_GRACE = 10.0  # seconds a long poll may run past its timeout before it counts as hung
_KIND = re.compile(r"[a-z_]{1,40}")


class UnreadableUpdatesError(NetworkError):
    """getUpdates answered with no update Kernel can even number: PTB backs off."""


class BackedOffError(TimedOut):
    """A poll failed and Kernel has waited its backoff: PTB's loop retries at once."""


@dataclass
class PollStats:
    """What the bot saw of getUpdates. Times are ``time.monotonic()``."""

    last_poll: float = field(default_factory=time.monotonic)  # the last answered poll
    last_attempt: float = field(default_factory=time.monotonic)  # answered or failed
    last_update_id: int | None = None  # the newest consumed (confirmed) update
    last_update_at: float | None = None
    consumed: int = 0
    unparseable: int = 0
    failures: int = 0
    failing: bool = False  # the last poll failed for a network reason
    backoff: float = 0.0  # the last wait before a retry; 0 after an answered poll
    answered: int = 0  # polls answered since start
    fetched: tuple[int, int, float] | None = None  # newest batch: last id, size, when


@dataclass(frozen=True, slots=True)
class Unreadable:
    """An update PTB could not parse: who sent it where, and its content's field name."""

    user_id: int
    chat_id: int
    private: bool
    what: str


# Fields of a message that are not its content: what is left names the kind.
_ENVELOPE = frozenset(
    {
        "message_id",
        "message_thread_id",
        "from",
        "sender_chat",
        "sender_boost_count",
        "sender_business_bot",
        "date",
        "business_connection_id",
        "chat",
        "forward_origin",
        "is_topic_message",
        "is_automatic_forward",
        "reply_to_message",
        "external_reply",
        "quote",
        "reply_to_story",
        "via_bot",
        "edit_date",
        "has_protected_content",
        "is_from_offline",
        "media_group_id",
        "author_signature",
        "entities",
        "caption_entities",
        "link_preview_options",
        "reply_markup",
        "caption",
        "show_caption_above_media",
        "has_media_spoiler",
        "effect_id",
        "paid_star_count",
    }
)
UNREADABLE_KEPT = 100
BACKLOG_KEPT = 1000  # backlog marks kept (the mailroom reads each once, right after)
FULL_BATCH = 100  # getUpdates' most per answer: a full one means more are queued
SINCE_START: None = None  # a backlog mark: the batch was queued while Kernel was down


class PollingBot(ExtBot[Any]):
    """An ExtBot whose getUpdates parses updates one by one and keeps ``PollStats``."""

    def __init__(
        self,
        token: str,
        *,
        clock: Clock | None = None,
        lanes: Lanes | None = None,
        **kwargs: Any,
    ) -> None:
        """``clock``: what the backoff after a failed poll sleeps on (Kernel's);
        ``lanes``: the owner's chat's topics (``topics.py``): updates from a topic are
        read into its lane, and calls to a lane go to the topic."""
        super().__init__(token, **kwargs)
        with self._unfrozen():
            self.lanes = lanes
            self.stats = PollStats()
            self.retrying = Retrying(POLL_BACKOFF, clock or SystemClock())
            # Told as each poll starts how many were answered before it (the mailroom
            # queues its "what waited" check behind the first batch).
            self.poll_listeners: list[Callable[[int], None]] = []
            # Told when a poll is answered after polls failed for the network (the
            # outbox then retries what the outage held back at once).
            self.recovery_listeners: list[Callable[[], None]] = []
            # The newest unreadable updates by id (the gate tells the owner of theirs).
            self.unreadable: dict[int, Unreadable] = {}
            # Updates Telegram queued before a poll could take them, by id: the first
            # answers since start (SINCE_START) or after polls failed for the network
            # (how long, by the monotonic clock, none was answered). Judged by
            # ``mailroom.py`` (late or not) without the host's wall clock.
            self.backlog: dict[int, float | None] = {}
            self._backlog_of: float | None | bool = SINCE_START  # False: none now

    async def get_updates(
        self,
        offset: int | None = None,
        limit: int | None = None,
        timeout: Any = None,  # noqa: ASYNC109 (PTB's signature)
        allowed_updates: Sequence[str] | None = None,
        *,
        read_timeout: Any = DEFAULT_NONE,
        write_timeout: Any = DEFAULT_NONE,
        connect_timeout: Any = DEFAULT_NONE,
        pool_timeout: Any = DEFAULT_NONE,
        api_kwargs: dict[str, Any] | None = None,
    ) -> tuple[Update, ...]:
        self._confirm(offset)
        for listener in self.poll_listeners:
            listener(self.stats.answered)
        data: dict[str, Any] = {
            "timeout": timeout,
            "offset": offset,
            "limit": limit,
            "allowed_updates": allowed_updates,
        }
        asked = time.monotonic()
        try:
            result = await self._post(
                "getUpdates",
                data,
                read_timeout=self._poll_read_timeout(read_timeout, timeout),
                write_timeout=write_timeout,
                connect_timeout=connect_timeout,
                pool_timeout=pool_timeout,
                api_kwargs=api_kwargs,
            )
        except TelegramError as exc:
            await self._failed(exc)
            raise
        stats = self.stats
        now = time.monotonic()
        gap = now - stats.last_poll  # since the last answered poll
        stats.last_poll = stats.last_attempt = now
        recovered = stats.failing
        stats.failing, stats.backoff = False, 0.0
        self.retrying.succeeded()
        if recovered:
            for heard in self.recovery_listeners:
                heard()
            if self._backlog_of is False:
                self._backlog_of = gap
        stats.answered += 1
        updates = self._parse(result)
        if self._backlog_of is SINCE_START and now - asked > POLL_GRACE:
            self._backlog_of = False  # the first poll waited: what it brings is live
        self._mark_backlog(updates, limit)
        if updates:
            self.stats.fetched = (updates[-1].update_id, len(updates), time.monotonic())
        for update in updates:
            self.insert_callback_data(update)
        return updates

    def _mark_backlog(self, updates: Sequence[Update], limit: int | None) -> None:
        """Mark a backlog batch's updates; a full batch means the backlog goes on."""
        mark = self._backlog_of
        if mark is False:
            return
        for update in updates:
            self.backlog[update.update_id] = mark
        while len(self.backlog) > BACKLOG_KEPT:
            del self.backlog[next(iter(self.backlog))]
        if len(updates) < min(limit or FULL_BATCH, FULL_BATCH):
            self._backlog_of = False

    async def _failed(self, error: TelegramError) -> None:
        """Count a failed poll; after a network failure wait the backoff here, then
        raise ``BackedOffError`` so PTB retries at once instead of waiting its own."""
        stats = self.stats
        stats.failures += 1
        stats.last_attempt = time.monotonic()
        if not _outage(error):
            return  # PTB's loop handles it (429: retry_after; 409: its backoff)
        stats.failing = True
        if isinstance(error, TimedOut):
            return  # a poll without an answer: retried at once
        stats.backoff = self.retrying.failed()
        log.warning("getUpdates failed: %s; retrying in %.1fs", type(error).__name__, stats.backoff)
        await self.retrying.clock.sleep(stats.backoff)
        raise BackedOffError(type(error).__name__) from error

    def _poll_read_timeout(self, read_timeout: Any, timeout: Any) -> float:
        """As PTB computes it: the request's read timeout plus the long-poll timeout."""
        if isinstance(read_timeout, DefaultValue):
            base = float(self._request[0].read_timeout or 0)
        else:
            base = float(read_timeout or 0)
        if hasattr(timeout, "total_seconds"):
            return base + float(timeout.total_seconds())
        return base + float(timeout or 0)

    def _confirm(self, offset: int | None) -> None:
        """A poll whose offset is past the newest batch confirms it: consumed."""
        fetched = self.stats.fetched
        if fetched is None or offset is None or offset <= fetched[0]:
            return
        last_id, size, at = fetched
        self.stats.fetched = None
        self.stats.last_update_id = last_id
        self.stats.last_update_at = at
        self.stats.consumed += size

    def _parse(self, result: Any) -> tuple[Update, ...]:
        if not isinstance(result, list):
            raise UnreadableUpdatesError("getUpdates answered with something else than a list")
        updates: list[Update] = []
        for item in result:
            update_id = item.get("update_id") if isinstance(item, dict) else None
            if not isinstance(update_id, int) or isinstance(update_id, bool):
                # Nothing to number it by: the offset moves past it with the next one.
                self.stats.unparseable += 1
                log.warning("skipped an update without an id")
                continue
            updates.append(self._parse_one(update_id, item))
        if result and not updates:
            raise UnreadableUpdatesError("getUpdates answered with no usable update")
        return tuple(updates)

    async def _do_post(self, endpoint: str, data: dict[str, Any], **kwargs: Any) -> Any:
        if self.lanes is not None:
            self.lanes.address(endpoint, data)
        return await super()._do_post(endpoint, data, **kwargs)

    def _parse_one(self, update_id: int, item: dict[str, Any]) -> Update:
        kind = _kind_of(item)
        if self.lanes is not None:
            self.lanes.read(item)
        try:
            return Update.de_json(item, self)
        except Exception as exc:  # whatever PTB raises on a shape it does not know
            self.stats.unparseable += 1
            log.warning(
                "skipped an unparseable update (id=%d, kind=%s): %s",
                update_id,
                kind,
                type(exc).__name__,
            )
            bare = Update(update_id=update_id)
            bare.set_bot(self)
            self._remember_unreadable(update_id, item.get(kind))
            return bare

    def _remember_unreadable(self, update_id: int, inner: Any) -> None:
        """Who sent an update Kernel cannot read (ids and a field name, never content),
        so the gate can tell the owner about their own message instead of dropping it."""
        if not isinstance(inner, dict):
            return
        sender, chat = inner.get("from"), inner.get("chat")
        if not isinstance(sender, dict) or not isinstance(chat, dict):
            return
        user_id, chat_id = sender.get("id"), chat.get("id")
        if not isinstance(user_id, int) or not isinstance(chat_id, int):
            return
        content = [k for k in inner if isinstance(k, str) and k not in _ENVELOPE]
        what = content[-1] if content and _KIND.fullmatch(content[-1]) else "unknown"
        self.unreadable[update_id] = Unreadable(
            user_id, chat_id, chat.get("type") == "private", what
        )
        while len(self.unreadable) > UNREADABLE_KEPT:
            self.unreadable.pop(next(iter(self.unreadable)))


def _outage(error: TelegramError) -> bool:
    """A failure of the connection or the server (refused, reset, timeout, 5xx), not an
    answer about the request (400, 409 Conflict, 429) nor an unreadable answer."""
    return isinstance(error, NetworkError) and not isinstance(
        error, BadRequest | UnreadableUpdatesError
    )


def recovery_bound(poll_timeout: float, watchdog_seconds: float) -> float:
    """Seconds from the Bot API answering again to polling consuming (module docstring),
    not counting the request itself."""
    hang = min(poll_timeout + POLL_GRACE, 2 * check_interval(watchdog_seconds))
    return max(BACKOFF_CAP, hang)


def check_interval(watchdog_seconds: float) -> float:
    return min(watchdog_seconds / 4, 15.0)


def _kind_of(item: dict[str, Any]) -> str:
    """The update's type: its first key other than update_id (a field name, no content)."""
    for key in item:
        if key != "update_id":
            return key if isinstance(key, str) and _KIND.fullmatch(key) else "unknown"
    return "none"


def poll_request() -> MendingRequest:
    """The request object for getUpdates: one connection; PTB adds the long-poll timeout
        to this read timeout, so a poll without an answer ends ``POLL_GRACE`` after it. Its
    updates come with lone surrogates mended (:mod:`kernel.telegram.mending`)."""
    return MendingRequest(connection_pool_size=1, read_timeout=POLL_GRACE)


class PollWatch:
    """Starts polling, checks that updates are consumed, and restarts polling when not."""

    def __init__(
        self,
        app: Application[Any, Any, Any, Any, Any, Any],
        bot: PollingBot,
        request: MendingRequest,
        *,
        poll_timeout: int,
        limit: float,
        allowed_updates: list[str],
    ) -> None:
        self.app = app
        self.bot = bot
        self.request = request
        self.poll_timeout = poll_timeout
        self.limit = limit  # telegram.watchdog_seconds
        self.interval = check_interval(limit)
        self.allowed_updates = allowed_updates
        self.restarts = 0
        self.pending: int | None = None  # from the last getWebhookInfo that answered
        self.stalled = False  # updates wait and none are consumed
        self._starved = 0  # checks in a row that saw updates pending and none consumed
        self._seen = 0  # stats.consumed at the previous check
        self._since = time.monotonic()  # polling (re)started: silence counts from here

    @property
    def stats(self) -> PollStats:
        return self.bot.stats

    async def start(self) -> None:
        """Poll without dropping anything: what waited while Kernel was down is the
        mailroom's to offer (``mailroom.py``)."""
        assert self.app.updater is not None
        self._since = time.monotonic()
        await self.app.updater.start_polling(
            timeout=self.poll_timeout,
            # deleteWebhook (the bootstrap) is retried until it works: with PTB's default
            # of no retries, a failure during an outage would leave polling stopped.
            bootstrap_retries=-1,
            allowed_updates=self.allowed_updates,
            error_callback=_polling_error,
        )

    async def watch(self) -> None:
        """The watchdog loop; runs until cancelled."""
        self._seen = self.stats.consumed
        while True:
            await asyncio.sleep(self.interval)
            await self.check()

    async def check(self) -> None:
        """One round: restart polling when it is silent or starved. While updates are
        being consumed, none can be starved: getWebhookInfo is asked only in a round
        that consumed none (``pending`` keeps the last count it gave)."""
        consumed = self.stats.consumed
        moved, self._seen = consumed != self._seen, consumed
        if not moved:
            self.pending = await self._pending()
        if moved or not self.pending:
            self._starved = 0
            self.stalled = False
        else:
            self._starved += 1
        due = self.stats.last_attempt + self.stats.backoff  # the next attempt, if alive
        if time.monotonic() - max(due, self._since) >= self.limit:
            await self.restart(f"no getUpdates ended for {self.limit:.0f}s")
        elif self._starved >= 2:
            self.stalled = True
            self._starved = 0
            await self.restart(f"{self.pending} updates pending and none consumed")

    async def _pending(self) -> int | None:
        """getWebhookInfo's pending_update_count, or None when it cannot be had now."""
        try:
            async with asyncio.timeout(self.interval):
                info = await self.bot.get_webhook_info()
        except (TelegramError, TimeoutError) as exc:
            log.debug("getWebhookInfo failed: %s", type(exc).__name__)
            return None
        return int(info.pending_update_count)

    async def restart(self, reason: str) -> None:
        log.warning("%s; restarting polling", reason)
        self.restarts += 1
        updater = self.app.updater
        assert updater is not None
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.limit):
                await updater.stop()
        # A fresh connection: a wedged one is not trusted again.
        with contextlib.suppress(Exception):
            await self.request.shutdown()
            await self.request.initialize()
        try:
            await self.start()
        except Exception as exc:  # keep watching; the next round tries again
            log.warning("restarting polling failed: %s", type(exc).__name__)

    def degraded(self) -> bool:
        """Polls failing, none answered for the watchdog limit (a restart does not hide
        it), or updates waiting unconsumed."""
        silent = time.monotonic() - self.stats.last_poll >= self.limit
        return self.stats.failing or silent or self.stalled

    def detail(self) -> dict[str, Any]:
        now = time.monotonic()
        at = self.stats.last_update_at
        return {
            "last_poll_seconds_ago": round(now - self.stats.last_poll, 1),
            "poll_restarts": self.restarts,
            "last_update_id": self.stats.last_update_id,
            "last_update_seconds_ago": None if at is None else round(now - at, 1),
            "pending_updates": self.pending,
            "unparseable_updates": self.stats.unparseable,
        }


def _polling_error(error: Exception) -> None:
    # Errors PTB retries by itself (409, an unreadable answer); log the kind only (the
    # URL carries the token). Network failures are logged with Kernel's backoff.
    log.warning("getUpdates failed: %s", type(error).__name__)
