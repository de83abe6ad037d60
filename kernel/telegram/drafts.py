"""The turn's draft (``sendMessageDraft``): what the chat shows while a reply forms.

A draft leaves nothing in the chat and costs the chat's rate budget no token, so it is
the turn's progress surface (issue 37: an exchange costs one token, its answer). It
shows the newest part of the reply as plain text while it streams and, below it (or
alone while nothing is written yet), the status line: the tool that runs, its progress,
a retry of the model. One draft at a time, at most one every ``interval`` seconds, and
always the newest text: a draft the chat's budget thinned is tried again while there is
something new to show. The reply's first text waits ``FIRST_TEXT_WAIT`` for its first
draft, and no draft goes once the final answer is in hand (``whole``): a reply whole by
then gets none, as its answer replaces a draft at once. The first error (a 429
included) turns drafts off for the turn (``on``), and the view shows its status lines
another way. Best effort throughout.

Public API: :class:`DraftLine`, :data:`DRAFT_LIMIT`, :data:`DRAFT_SETTLE`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import time
from collections.abc import Callable

from telegram.error import TelegramError

from kernel.core.tasks import TaskSet
from kernel.telegram.budget import Bot, Thinned
from kernel.telegram.split import utf16_len

log = logging.getLogger(__name__)

DRAFT_LIMIT = 4096
DRAFT_SETTLE = 1.0  # seconds a draft in flight may take to land before the final reply
# The reply's first text waits this long for its first draft: a reply whole by then (an
# instant model, a short answer in one read) gets none, its answer replaces a draft at
# once anyway (issue 37). A status line (a tool, a retry) is not held.
FIRST_TEXT_WAIT = 0.1
_draft_ids = itertools.count(1)


def tail_utf16(text: str, limit: int) -> str:
    """The end of ``text`` within ``limit`` UTF-16 units: a draft shows the newest part."""
    if limit <= 0:
        return ""
    if utf16_len(text) <= limit:
        return text
    tail = text[-limit:]
    while utf16_len(tail) > limit:
        tail = tail[1:]
    return tail


class DraftLine:
    def __init__(self, bot: Bot, chat_id: int, *, on: bool, interval: float) -> None:
        self.bot = bot
        self.chat_id = chat_id
        self.on = on  # False: drafts are off (by configuration, an error, or the end)
        self.interval = interval
        self.draft_id = next(_draft_ids)
        self.status = ""  # the status line (a tool, a retry); "" when none
        self._parts: list[str] = []
        self._drafted = ""
        self._last = -math.inf
        self._first_text = math.inf  # when the reply's first text came
        self._tasks = TaskSet("telegram drafts")
        self._sender: asyncio.Task[None] | None = None
        self._sending = False  # a draft is under way (the sender is not just waiting)
        # True once the final answer is in hand: no draft of it goes (the answer
        # replaces it at once).
        self.whole: Callable[[], bool] = lambda: False

    @property
    def text(self) -> str:
        """The reply as streamed so far."""
        return "".join(self._parts)

    def add(self, delta: str) -> None:
        if not self._parts:
            self._first_text = time.monotonic()
        self._parts.append(delta)
        self._poke()

    def say(self, status: str) -> None:
        """The status line below the reply (``""``: none)."""
        if status != self.status:
            self.status = status
            self._poke()

    def compose(self) -> str:
        text = self.text.strip()
        if not self.status:
            return tail_utf16(text, DRAFT_LIMIT)
        if not text:
            return tail_utf16(self.status, DRAFT_LIMIT)
        room = DRAFT_LIMIT - utf16_len(self.status) - 2
        return f"{tail_utf16(text, room)}\n\n{self.status}"

    def _poke(self) -> None:
        """Something new to show: the sender goes (one at a time; a running one picks
        the newest text up itself). Never waits: the turn's events go on."""
        if self.on and (self._sender is None or self._sender.done()):
            self._sender = self._tasks.spawn(self._send_newest(), "telegram-draft")

    async def _send_newest(self) -> None:
        while self.on:
            text = self.compose()
            if not text or text == self._drafted or (self.text and self.whole()):
                return
            wait = self._due() - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            self._last = time.monotonic()
            self._sending = True
            try:
                await self.bot.send_message_draft(
                    self.chat_id, self.draft_id, text, rate_limit_args={"priority": "draft"}
                )
                self._drafted = text
            except Thinned:  # the chat's budget is short: tried again a moment later
                continue
            except TelegramError as exc:
                log.info("draft failed (%s); drafts off for this turn", type(exc).__name__)
                self.on = False
            finally:
                self._sending = False

    def _due(self) -> float:
        """When the next draft may go: ``interval`` after the last one, and the reply's
        first text FIRST_TEXT_WAIT after it came."""
        due = self._last + self.interval
        if not self._drafted and not self.status:
            due = max(due, self._first_text + FIRST_TEXT_WAIT)
        return due

    async def settle(self) -> None:
        """Before the final message: no draft follows, and one in flight may land (a
        draft arriving after the reply would show stale text), within DRAFT_SETTLE s."""
        self.on = False
        sender = self._sender
        if sender is not None and self._sending:
            await asyncio.wait({sender}, timeout=DRAFT_SETTLE)
        await self._tasks.close(DRAFT_SETTLE)
