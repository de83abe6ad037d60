"""One rate budget per chat, shared by every Bot API call (PTB's rate limiter hook).

Public API: ``RateBudget`` (installed with ``ApplicationBuilder.rate_limiter``),
``Thinned``, ``Priority``, ``RateArgs``, ``Bot`` (the bot type whose calls take
``rate_limit_args``).

Telegram's FAQ: about one message a second in a chat (short bursts allowed), 20 a minute
in a group, about 30 a second overall. So each chat has a token bucket (1 a second,
burst 3; a group also a window of 20 a minute), all chats share a window of 30 a second,
and a 429 blocks the chat it came from (every chat when the method names none) for its
``retry_after``: no call goes to that chat before the block ends, whatever its priority.

A call says its priority with ``rate_limit_args={"priority": ...}``:

- ``final`` (the default: PTB's own calls and everything that must arrive) waits for its
  turn: finals go one at a time per chat, in arrival order, so they arrive in that order.
  After a 429 the call keeps its turn, waits the block out and tries again, up to
  ``max_retries`` times; then the ``RetryAfter`` is raised for the caller (the outbox)
  to schedule. A block longer than ``max_wait`` (a flood ban of minutes or hours) is not
  waited out in memory: the call raises ``RetryAfter`` for the time left at once, without
  calling the API.
- ``progress`` (intermediate edits) and ``draft`` (drafts, typing) never wait: when the
  chat is blocked, a final waits in it, or the budget has no room to spare for finals,
  they raise ``Thinned`` at once, without calling the API. A progress edit takes a token
  only when one is left for a final after it. A draft or a chat action leaves nothing in
  the chat (sendMessageDraft is made for streaming), so it takes no token from the chat
  and goes while the chat's bucket is not empty: drafts never cost a final its turn.

:meth:`RateBudget.room` waits until a ``progress`` call to a chat would be admitted: for
work that may wait as long as it must but must never cost a final its turn (taking a
superseded 🔁 away, ``outbox.py``'s tidy rows).

Chat-less calls (getMe, answerCallbackQuery, setMyCommands…) take no token; getUpdates
never reaches a rate limiter. Pure bookkeeping: no thread, no task of its own; time is
read from ``clock`` (monotonic), so a test can drive it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import logging
import math
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, TypedDict

from telegram.error import RetryAfter, TelegramError
from telegram.ext import BaseRateLimiter, ExtBot

from kernel.core.window import SlidingWindow

log = logging.getLogger(__name__)

Priority = Literal["final", "progress", "draft"]
PRIORITIES: tuple[Priority, ...] = ("final", "progress", "draft")


class Pace(Protocol):
    """The clock a budget paces calls by: monotonic seconds and a sleep on them."""

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class _RealPace:
    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


REAL_PACE: Pace = _RealPace()  # time as it passes


class RateArgs(TypedDict, total=False):
    priority: Priority


Bot: TypeAlias = ExtBot[RateArgs]
JSONResult: TypeAlias = bool | dict[str, Any] | list[dict[str, Any]]

# Methods that leave nothing in the chat: they take no token from the chat's bucket.
EPHEMERAL = frozenset({"sendChatAction", "sendMessageDraft"})
# Tokens a low-priority call needs in the chat's limits: a progress edit takes one and
# leaves one for a final; a draft takes none and only needs the bucket not empty.
NEEDS: dict[Priority, float] = {"final": 1.0, "progress": 2.0, "draft": 1.0}
OVERALL_SPARE = 5  # overall slots a progress or draft call leaves for finals
MAX_CHATS = 256  # idle chats are forgotten beyond this many


class Thinned(TelegramError):
    """A progress or draft call dropped under pressure, without calling the API."""


class Limit(Protocol):
    def level(self, now: float) -> float: ...
    def wait(self, now: float) -> float: ...
    def take(self, now: float) -> None: ...
    def idle(self, now: float) -> bool: ...


class Bucket:
    """``rate`` tokens a second, at most ``burst`` kept; starts full."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.at = now

    def level(self, now: float) -> float:
        if now > self.at:
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
        return self.tokens

    def wait(self, now: float) -> float:
        return max(0.0, (1.0 - self.level(now)) / self.rate)

    def take(self, now: float) -> None:
        self.level(now)
        self.tokens -= 1.0

    def drain(self, now: float) -> None:
        self.level(now)
        self.tokens = min(self.tokens, 0.0)

    def idle(self, now: float) -> bool:
        return self.level(now) >= self.burst


@dataclass
class _Chat:
    bucket: Bucket
    limits: list[Limit]
    blocked_until: float = -math.inf
    queue: deque[int] = field(default_factory=deque)  # finals, in arrival order
    sending: bool = False  # the head's request is under way
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def waiting(self) -> int:
        """Finals waiting for their turn or for the budget (not the one under way)."""
        return len(self.queue) - self.sending

    def pulse(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


def _time_to(limit: Limit, need: float, now: float) -> float:
    """Seconds until ``limit`` holds ``need`` tokens (a bucket refills at its rate; a
    window frees a slot at a time, so its next free slot is waited for)."""
    level = limit.level(now)
    if level >= need:
        return 0.0
    if isinstance(limit, Bucket):
        return (need - level) / limit.rate
    assert isinstance(limit, SlidingWindow)
    leave = math.ceil(need - level)  # the oldest events that must leave the window first
    return limit.times[leave - 1] + limit.seconds - now


def priority_of(args: object) -> Priority:
    """The priority asked for; anything unknown is a final (never drop by mistake)."""
    if isinstance(args, dict):
        value = args.get("priority")
        for priority in PRIORITIES:
            if value == priority:
                return priority
    return "final"


def retry_seconds(exc: RetryAfter) -> float:
    # The private timedelta: the public property warns while PTB migrates from int.
    return max(0.0, exc._retry_after.total_seconds())


class RateBudget(BaseRateLimiter[RateArgs]):
    def __init__(
        self,
        *,
        max_retries: int = 3,
        max_wait: float = 60.0,
        chat_rate: float = 1.0,
        chat_burst: float = 3.0,
        group: tuple[int, float] = (20, 60.0),
        overall: tuple[int, float] = (30, 1.0),
        clock: Callable[[], float] = REAL_PACE.monotonic,
        sleep: Callable[[float], Awaitable[None]] = REAL_PACE.sleep,
    ) -> None:
        self.max_retries = max_retries
        self.max_wait = max_wait
        self.chat_rate = chat_rate
        self.chat_burst = chat_burst
        self.group = group  # (calls, seconds) in a group, supergroup or channel
        self._clock = clock
        self._sleep = sleep
        self._overall = SlidingWindow(*overall)
        self._blocked_until = -math.inf  # every chat (a 429 on a chat-less method)
        self._chats: dict[int | str, _Chat] = {}
        self._tickets = itertools.count()
        self.thinned: Counter[str] = Counter()  # by priority
        self.limited = 0  # 429 answers seen
        self.retried = 0  # finals sent again after a 429

    async def initialize(self) -> None:
        """Nothing to set up: the state is plain bookkeeping."""

    async def shutdown(self) -> None:
        """Nothing to release; callers still waiting are cancelled by their owners."""

    def stats(self) -> dict[str, Any]:
        now = self._clock()
        return {
            "thinned": dict(self.thinned),
            "limited": self.limited,
            "retried": self.retried,
            "waiting": sum(chat.waiting for chat in self._chats.values()),
            "blocked_chats": sum(1 for c in self._chats.values() if c.blocked_until > now),
            "blocked_all": self._blocked_until > now,
        }

    async def process_request(
        self,
        callback: Callable[..., Coroutine[Any, Any, JSONResult]],
        args: Any,
        kwargs: dict[str, Any],
        endpoint: str,
        data: dict[str, Any],
        rate_limit_args: RateArgs | None,
    ) -> JSONResult:
        priority = priority_of(rate_limit_args)
        chat = self._chat(data.get("chat_id"))
        costs = endpoint not in EPHEMERAL
        if priority != "final":
            self._admit_now(chat, costs, priority)
            try:
                return await callback(*args, **kwargs)
            except RetryAfter as exc:
                self._block(chat, exc, endpoint)
                raise
        if chat is None:
            return await self._send_final(None, costs, endpoint, callback, args, kwargs)
        ticket = next(self._tickets)
        chat.queue.append(ticket)
        try:
            while chat.queue[0] != ticket:
                await chat.changed.wait()
            return await self._send_final(chat, costs, endpoint, callback, args, kwargs)
        finally:
            chat.queue.remove(ticket)
            chat.pulse()

    async def _send_final(
        self,
        chat: _Chat | None,
        costs: bool,
        endpoint: str,
        callback: Callable[..., Coroutine[Any, Any, JSONResult]],
        args: Any,
        kwargs: dict[str, Any],
    ) -> JSONResult:
        """Send a final call whose turn it is: wait for the budget, and after a 429 for
        the block, up to ``max_retries`` times."""
        attempt = 0
        while True:
            now = self._clock()
            while (delay := self._delay(chat, costs, now)) > 0:
                blocked = self._blocked(chat, now)
                if blocked > self.max_wait:  # a flood ban: the caller schedules, not us
                    raise RetryAfter(dt.timedelta(seconds=math.ceil(blocked)))
                await self._sleep(delay)
                now = self._clock()
            self._take(chat, costs, now)
            try:
                if chat is not None:
                    chat.sending = True
                return await callback(*args, **kwargs)
            except RetryAfter as exc:
                self._block(chat, exc, endpoint)
                if (
                    attempt >= self.max_retries
                    or self._blocked(chat, self._clock()) > self.max_wait
                ):
                    raise
            finally:
                if chat is not None:
                    chat.sending = False
            attempt += 1
            self.retried += 1

    async def room(self, chat_id: int) -> None:
        """Return once a ``progress`` call to ``chat_id`` would be admitted now: no final
        waits or goes in the chat, nothing blocks it, and its limits keep a token for a
        final after it. Waits as long as that takes (the caller cancels it)."""
        chat = self._chat(chat_id)
        assert chat is not None
        while True:
            now = self._clock()
            if chat.queue:  # finals first: look again once one is done
                await chat.changed.wait()
                continue
            delay = max(
                self._blocked(chat, now),
                _time_to(self._overall, 1 + OVERALL_SPARE, now),
                *(_time_to(limit, NEEDS["progress"], now) for limit in chat.limits),
            )
            if delay <= 0:
                return
            await self._sleep(delay)

    # ----- chats -------------------------------------------------------------------------

    def _chat(self, chat_id: object) -> _Chat | None:
        if chat_id is None or isinstance(chat_id, bool):
            return None
        key: int | str
        if isinstance(chat_id, int):
            key = chat_id
        else:
            text = str(chat_id)
            key = int(text) if text.lstrip("-").isdigit() else text.lower()
        chat = self._chats.get(key)
        if chat is None:
            self._forget_idle()
            now = self._clock()
            bucket = Bucket(self.chat_rate, self.chat_burst, now)
            limits: list[Limit] = [bucket]
            # A negative id or an @username is a group, supergroup or channel.
            if isinstance(key, str) or key < 0:
                limits.append(SlidingWindow(*self.group))
            chat = self._chats[key] = _Chat(bucket, limits)
        return chat

    def _forget_idle(self) -> None:
        if len(self._chats) < MAX_CHATS:
            return
        now = self._clock()
        for key, chat in list(self._chats.items()):
            idle = all(limit.idle(now) for limit in chat.limits)
            if idle and not chat.queue and chat.blocked_until <= now:
                del self._chats[key]

    # ----- admission ---------------------------------------------------------------------

    def _blocked(self, chat: _Chat | None, now: float) -> float:
        """Seconds until the 429 blocks on this chat end (<= 0: none)."""
        until = (
            self._blocked_until if chat is None else max(self._blocked_until, chat.blocked_until)
        )
        return until - now

    def _delay(self, chat: _Chat | None, costs: bool, now: float) -> float:
        delay = self._blocked(chat, now)
        if chat is None:
            return delay
        delay = max(delay, self._overall.wait(now))
        if costs:
            delay = max(delay, *(limit.wait(now) for limit in chat.limits))
        return delay

    def _take(self, chat: _Chat | None, costs: bool, now: float) -> None:
        if chat is None:
            return
        self._overall.take(now)
        if costs:
            for limit in chat.limits:
                limit.take(now)

    def _admit_now(self, chat: _Chat | None, costs: bool, priority: Priority) -> None:
        """Admit a progress or draft call at once, or raise Thinned."""
        now = self._clock()
        pressed = self._blocked_until > now
        if chat is not None:
            pressed = (
                pressed
                or chat.blocked_until > now
                or chat.waiting > 0
                or self._overall.level(now) < 1 + OVERALL_SPARE
                or any(limit.level(now) < NEEDS[priority] for limit in chat.limits)
            )
        if pressed:
            self.thinned[priority] += 1
            raise Thinned(f"rate budget: {priority} call thinned")
        self._take(chat, costs, now)

    def _block(self, chat: _Chat | None, exc: RetryAfter, endpoint: str) -> None:
        """A 429: nothing goes to the chat (every chat, for a chat-less method) until
        ``retry_after`` has passed, and the chat's burst starts again from empty."""
        now = self._clock()
        seconds = retry_seconds(exc)
        self.limited += 1
        if chat is None:
            self._blocked_until = max(self._blocked_until, now + seconds)
            log.warning("429 on %s: every chat waits %.1f s", endpoint, seconds)
            return
        chat.blocked_until = max(chat.blocked_until, now + seconds)
        chat.bucket.drain(now)
        log.warning("429 on %s: the chat waits %.1f s", endpoint, seconds)
