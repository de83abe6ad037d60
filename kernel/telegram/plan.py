"""The turn's plan (the ``todo_write`` tool's ``plan`` events) as one chat message.

The first plan is a silent message of its own (or takes the turn's placeholder, when
one stands: drafts off), which from then on is the plan message: the list (☐ pending,
▶ in progress, ☑ completed and struck through), below it the tool line. The reply then
comes as a new message below, so the plan stays in the chat when the turn ends. While
earlier messages still wait in the outbox, the plan comes only at the end, through the
outbox, in its place.

Updates are edits at most once per ``interval`` (the first at once), sent one at a
time and always with the newest list: an older list never lands after a newer one.
They are best effort (the rate budget may thin them); the last state goes through the
durable outbox ahead of the turn's outcome (:meth:`PlanMessage.final_items`), with the
tool line gone. A rendered plan stays within Telegram's 4096 (items are shortened).
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from telegram.constants import ParseMode
from telegram.error import TelegramError

from kernel.core.i18n import t
from kernel.core.tasks import TaskSet
from kernel.store.mailbox import OutboxItem
from kernel.telegram.budget import Bot, Thinned
from kernel.telegram.split import utf16_len

log = logging.getLogger(__name__)

LIMIT = 4000  # Telegram takes 4096; the markup's length bounds the text's
MARKS = {"pending": "☐", "in_progress": "▶", "completed": "☑"}
WIDTHS = (300, 120, 60, 30, 15)  # an item's content is shortened until the plan fits
HALT_WAIT = 5.0  # seconds the view waits for an edit in flight before the final state


def render_plan(items: Sequence[dict[str, str]], note: str = "") -> str:
    """The plan as Telegram HTML within :data:`LIMIT`; ``note``: a line below it."""
    for width in WIDTHS:
        text = _render(items, note, width)
        if utf16_len(text) <= LIMIT:
            return text
    return _render(items, "", WIDTHS[-1])


def _render(items: Sequence[dict[str, str]], note: str, width: int) -> str:
    done = sum(item.get("status") == "completed" for item in items)
    if items:
        lines = [html.escape(t("plan.title", done=done, total=len(items)), quote=False)]
    else:
        lines = [html.escape(t("plan.empty"), quote=False)]
    for item in items:
        status = item.get("status", "pending")
        content = html.escape(_clip(item.get("content", ""), width), quote=False)
        if status == "completed":
            content = f"<s>{content}</s>"
        elif status == "in_progress":
            content = f"<b>{content}</b>"
        lines.append(f"{MARKS.get(status, MARKS['pending'])} {content}")
    if note:
        lines += ["", html.escape(_clip(note, WIDTHS[1]), quote=False)]
    return "\n".join(lines)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


class PlanMessage:
    def __init__(
        self,
        bot: Bot,
        chat_id: int,
        *,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        record: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        self.bot = bot
        self.chat_id = chat_id
        self.interval = interval
        self.record = record  # a message of its own goes on record: a crash must not keep it
        self._clock = clock
        self.items: list[dict[str, str]] | None = None  # None: no plan in this turn
        self.message_id: int | None = None
        self.live = True  # False once the final state is queued: no edit follows
        self._note = ""
        self._shown = ""
        # The plan took the turn's placeholder: a tool-line edit already in flight to it
        # may land after the plan's, so the final state is always written (review R2).
        self._took_placeholder = False
        self._last_edit: float | None = None
        self._sending = asyncio.Lock()  # one edit at a time, each with the newest text
        self._timer = TaskSet("plan message")

    @property
    def holds(self) -> bool:
        """Whether the plan has a message in the chat (edited in place)."""
        return self.message_id is not None

    async def update(
        self, items: Sequence[dict[str, str]], placeholder: int | None, *, backlog: bool
    ) -> bool:
        """Show ``items`` now or at the next allowed moment. True when the plan took
        ``placeholder`` (the caller no longer has one). ``backlog``: earlier messages
        still wait in the outbox, so none is sent ahead of them."""
        self.items = [dict(item) for item in items]
        taken = False
        if self.message_id is None and placeholder is not None:
            self.message_id, taken = placeholder, True
            self._took_placeholder = True
        if self.message_id is None and backlog:
            return taken  # shown at the end, through the outbox, in its place
        await self._request()
        return taken

    async def note(self, line: str) -> None:
        """The tool line below the plan (what the placeholder would have said)."""
        if self.message_id is None or self.items is None or line == self._note:
            return
        self._note = line
        await self._request()

    def _text(self) -> str:
        return render_plan(self.items or [], self._note)

    async def _request(self) -> None:
        if not self.live:
            return
        now = self._clock()
        if self._last_edit is None or now - self._last_edit >= self.interval:
            await self._flush()
        elif not self._timer.running():
            self._timer.spawn(self._later(self._last_edit + self.interval - now), "plan")

    async def _later(self, wait: float) -> None:
        await asyncio.sleep(wait)
        await self._flush()

    async def _flush(self) -> None:
        async with self._sending:
            text = self._text()
            if not self.live or self.items is None or text == self._shown:
                return
            self._last_edit = self._clock()
            try:
                if self.message_id is None:
                    sent = await self.bot.send_message(
                        self.chat_id, text, parse_mode=ParseMode.HTML, disable_notification=True
                    )
                    self.message_id = sent.message_id
                    if self.record is not None:
                        await self.record(sent.message_id)
                else:
                    await self.bot.edit_message_text(
                        text,
                        chat_id=self.chat_id,
                        message_id=self.message_id,
                        parse_mode=ParseMode.HTML,
                        rate_limit_args={"priority": "progress"},
                    )
            except Thinned:  # the chat's budget is short: the newest list shows a bit later
                self._timer.spawn(self._later(self.interval), "plan")
                return
            except TelegramError as exc:
                log.info("plan edit failed: %s", type(exc).__name__)
                return
            self._shown = text

    async def halt(self) -> None:
        """No edit follows: the timer stops, an edit in flight gets a moment to land
        (bounded), so the final state queued next is the last one shown."""
        self.live = False  # an edit that has not begun now never will
        if self._sending.locked():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(HALT_WAIT):
                    await self._sending.acquire()
                    self._sending.release()
        await self._timer.close()

    def final_items(self) -> list[OutboxItem]:
        """The plan as it stands (no tool line), to queue ahead of the turn's outcome:
        the plan message edited (sent anew if gone); nothing when there is no plan or
        the chat already shows exactly this."""
        if self.items is None:
            return []
        text = render_plan(self.items)
        if self.message_id is not None and text == self._shown and not self._took_placeholder:
            return []
        body: dict[str, object] = {"text": text, "parse_mode": ParseMode.HTML, "silent": True}
        if self.message_id is not None:
            body["replace"] = self.message_id
        return [OutboxItem("send", body)]
