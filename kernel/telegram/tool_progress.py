"""The progress line of a running tool: which tool runs, and its progress reports.

Shown here when the turn's drafts are off (with drafts, the view puts the line in the
draft: ``drafts.py``). A tool call shows "⚙ Running mcp_x__y…" in the turn's
placeholder (sent for it, silent); the turn's ``tool_progress`` events (an MCP
server's progress notifications) arrive as fast as the tool reports, and the chat shows
"⏳ mcp_x__y: 3/10 …" there (or, when a question took the placeholder away, in a
message of its own), edited at most once per ``interval``: the first line shows at
once, later ones at the next allowed moment, and the newest always wins. A line the
chat's rate budget thinned shows a moment later while the call runs. When the call
returns, no edit follows any more (a message of its own is deleted through the outbox:
the reply says how it ended). An edit is never sent with unchanged text ("message is
not modified").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from telegram.error import TelegramError

from kernel.core.events import ToolProgress
from kernel.core.i18n import t
from kernel.core.tasks import TaskSet
from kernel.telegram.budget import Bot, Thinned
from kernel.telegram.outbox import Outbox, delete_item

log = logging.getLogger(__name__)


class ToolProgressLine:
    def __init__(
        self,
        bot: Bot,
        outbox: Outbox,
        chat_id: int,
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        record: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        self.bot = bot
        self.record = record  # a message of its own goes on record: a crash must not keep it
        self.outbox = outbox
        self.chat_id = chat_id
        self.interval = interval
        self._clock = clock
        self._calls: set[str] = set()  # calls that reported and have not returned
        self._latest = ""
        self._shown = ""
        self._target: int | None = None  # the message the line is in
        self._own = False  # that message was sent for the line (not the placeholder)
        self._last_edit: float | None = None
        self._timer = TaskSet("tool progress")  # the next allowed edit

    @property
    def active(self) -> bool:
        return bool(self._calls)

    async def running(
        self, call_id: str, name: str, placeholder: int, *, shown: bool = False
    ) -> None:
        """The call ``call_id`` of tool ``name`` started: the placeholder says so
        (``shown``: it was sent saying so)."""
        text = t("tg.working_tool", name=name)
        if shown and not self._own:
            self._calls.add(call_id)
            self._target, self._latest, self._shown = placeholder, text, text
            self._last_edit = self._clock()
            return
        await self._show(call_id, text, placeholder)

    async def report(self, event: ToolProgress, placeholder: int | None) -> None:
        """Show ``event`` now or at the next allowed moment, in ``placeholder`` if any."""
        text = t("tg.tool_progress", name=event.name, progress=event.text)
        await self._show(event.id, text, placeholder)

    async def _show(self, call_id: str, text: str, placeholder: int | None) -> None:
        self._calls.add(call_id)
        self._latest = text
        if placeholder is not None and not self._own:
            self._target = placeholder
        now = self._clock()
        if self._last_edit is None or now - self._last_edit >= self.interval:
            await self._flush()
        elif not self._timer.running():
            wait = self._last_edit + self.interval - now
            self._timer.spawn(self._later(wait), "tool-progress")

    async def ended(self, call_id: str) -> None:
        """The call returned: once no reporting call runs, the line stops."""
        if call_id not in self._calls:
            return
        self._calls.discard(call_id)
        if not self._calls:
            await self.stop()

    async def placeholder_gone(self) -> None:
        """The placeholder was deleted (a question came): the next report sends anew."""
        if not self._own:
            self._target = None
            self._shown = ""

    async def stop(self) -> None:
        self._calls.clear()
        await self._timer.close()
        if self._own and self._target is not None:  # the final step: through the outbox
            await self.outbox.put(self.chat_id, [delete_item(self._target)])
        self._own = False
        self._target = None
        self._shown = ""
        self._last_edit = None

    async def _record(self, message_id: int) -> None:
        if self.record is not None:  # never raises (the view's record is best effort)
            await self.record(message_id)

    async def _later(self, wait: float) -> None:
        await asyncio.sleep(wait)
        await self._flush()

    async def _flush(self) -> None:
        text = self._latest
        if not text or text == self._shown:
            return
        self._last_edit = self._clock()
        try:
            if self._target is None:
                sent = await self.bot.send_message(self.chat_id, text, disable_notification=True)
                self._target, self._own = sent.message_id, True
                await self._record(sent.message_id)
            else:
                await self.bot.edit_message_text(
                    text,
                    chat_id=self.chat_id,
                    message_id=self._target,
                    rate_limit_args={"priority": "progress"},
                )
        except Thinned:  # the chat's budget is short: the newest text shows a bit later
            if self._calls:
                self._timer.spawn(self._later(self.interval), "tool-progress")
            return
        except TelegramError as exc:
            log.info("tool progress edit failed: %s", type(exc).__name__)
            return
        self._shown = text
