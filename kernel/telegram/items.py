"""What goes into the outbox (``outbox.py``): a reply or a plain text as chunked sends,
edits and deletes (of a message, or of the message an earlier row sent), the 🔁
buttons, and :class:`LiveRetry`, which row of each chat carries the live 🔁.

Builders of :class:`~kernel.store.mailbox.OutboxItem`, and the outbox's small parts:
a put's :class:`Ticket`, :class:`Undeliverable`, a finished row's audit note
(:func:`note_row`). Nothing here calls Telegram or waits for the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime
from html import escape
from typing import Any

from telegram.constants import ParseMode

from kernel.audit import AuditLog, kinds
from kernel.core.i18n import t
from kernel.core.rows import Later, RowId
from kernel.store.mailbox import Mailbox, OutboxItem, OutboxRow
from kernel.telegram.render import render_markdown
from kernel.telegram.split import split_html, split_plain

log = logging.getLogger(__name__)

CHANNEL = "telegram"
RETRY = "retry:"  # the 🔁 under a final reply: retry:<its stored answer's id>
UNDELIVERED = ("failed", "expired")  # outbox states of rows that never reached the chat
RESTORE_SCAN = 200  # rows of a chat looked through at start for the standing 🔁
# How long a tidy row's "sent" mark may wait for a hop to ride (the audit anchor's next
# move, the next exchange): a death meanwhile only repeats the edit at the next start.
TIDY_LINGER = 1.0
# A message's buttons: made, or made on the database thread (retry_later).
Markup = dict[str, Any] | Later


def reply_items(
    markdown: str,
    *,
    replace: int | None = None,
    markup: Markup | None = None,
    reply_to: int | None = None,
    footer: Sequence[str] = (),
    silent: bool = False,
) -> list[OutboxItem]:
    """A Markdown reply as Telegram HTML chunks; ``replace``: the message (placeholder)
    whose text becomes the first chunk; ``markup`` goes on the last; ``reply_to``: the
    owner's message the first chunk quotes (an answer given late), sent anew then;
    ``footer``: plain lines in italics below the reply (what ran for it); ``silent``:
    see :func:`_items`."""
    html = render_markdown(markdown)
    if footer and html.strip():
        lines = "\n".join(escape(line, quote=False) for line in footer)
        html = f"{html.rstrip()}\n\n<i>{lines}</i>"
    chunks = split_html(html)
    if not chunks:
        return plain_items(
            t("tg.empty_reply"), replace=replace, markup=markup, reply_to=reply_to, silent=silent
        )
    return _items(chunks, ParseMode.HTML, replace, markup, reply_to, silent)


def plain_items(
    text: str,
    *,
    replace: int | None = None,
    markup: Markup | None = None,
    reply_to: int | None = None,
    silent: bool = False,
) -> list[OutboxItem]:
    chunks = split_plain(text) or [t("tg.empty_reply")]
    return _items(chunks, None, replace, markup, reply_to, silent)


def _items(
    chunks: list[str],
    mode: str | None,
    replace: int | None,
    markup: Markup | None,
    reply_to: int | None = None,
    silent: bool = False,
) -> list[OutboxItem]:
    """One send per chunk. Only the first may notify (issue 34: the owner's lock screen
    shows the answer's first words, once); ``silent``: none does (progress, a line
    beside the answer)."""
    items = []
    for index, chunk in enumerate(chunks):
        body: dict[str, Any] = {"text": chunk, "parse_mode": mode}
        if index == 0 and replace is not None:
            body["replace"] = replace
        if index == 0 and reply_to is not None:
            body["reply_to"] = reply_to
        if index == len(chunks) - 1 and markup is not None:
            body["reply_markup"] = markup
        if silent or index > 0:
            body["silent"] = True
        items.append(OutboxItem("send", body))
    return items


def edit_item(
    message_id: int,
    text: str | None,
    *,
    parse_mode: str | None = None,
    markup: Markup | None = None,
) -> OutboxItem:
    """Edit a message's text (and buttons: ``markup`` None takes them away); ``text``
    None edits the buttons only."""
    return OutboxItem(
        "edit",
        {"message_id": message_id, "text": text, "parse_mode": parse_mode, "reply_markup": markup},
    )


def delete_item(message_id: int) -> OutboxItem:
    return OutboxItem("delete", {"message_id": message_id})


def unbutton_item(row_id: int) -> OutboxItem:
    """The buttons of the message an earlier outbox row sent are taken away (the row
    is named, not the message: its message id is known once it is delivered, and rows
    go in order). Nothing happens when that row never landed. A tidy row: it goes once
    the chat's budget has a token to spare, after the rows queued behind it (the outbox
    worker), so it never costs an answer its turn."""
    body = {"of_row": row_id, "text": None, "reply_markup": None, "tidy": True}
    return OutboxItem("edit", body)


class Delivered:
    """The message ids of the rows this process delivered last (at most ``size``: the
    bound, whatever the chats), so that a tidy row's first try names its message
    without a store call (``Outbox._claim``)."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._ids: OrderedDict[int, int] = OrderedDict()

    def note(self, row_id: int, message_id: int | None) -> None:
        if message_id is not None:
            self._ids[row_id] = message_id
            if len(self._ids) > self.size:
                self._ids.popitem(last=False)

    def get(self, row_id: int) -> int | None:
        return self._ids.get(row_id)


def is_tidy(body: dict[str, Any]) -> bool:
    """Whether an outbox row is a tidy-up (:func:`unbutton_item`): no message of its
    own, no hurry, never ahead of a row that shows something."""
    return bool(body.get("tidy"))


def unsend_item(row_id: int) -> OutboxItem:
    """The message an earlier outbox row sent (or edited) is deleted (as above)."""
    return OutboxItem("delete", {"of_row": row_id})


def _retry_button(markup: Any) -> bool:
    """Whether a stored reply_markup carries a 🔁 (retry:…)."""
    rows = markup.get("inline_keyboard", []) if isinstance(markup, dict) else []
    return any(
        str(button.get("callback_data", "")).startswith(RETRY)
        for row in rows
        if isinstance(row, list)
        for button in row
        if isinstance(button, dict)
    )


def retry_markup(answer_id: int, label: str | None = None) -> dict[str, Any]:
    """One 🔁 button under a final reply: answer its message again (issue 20; handled
    by the commands: only the latest answer's press runs)."""
    text = t("tg.again") if label is None else label
    return {"inline_keyboard": [[{"text": text, "callback_data": f"{RETRY}{answer_id}"}]]}


def retry_later(answer: int | RowId) -> Markup:
    """:func:`retry_markup` for an answer whose id is known (an int) or is being stored
    (a RowId: the outbox row that carries it is written behind the answer, in the same
    hop, and made there; no 🔁 when the answer was not stored). The label is taken
    here: the database thread has not the turn's language."""
    if isinstance(answer, int):
        return retry_markup(answer)
    label = t("tg.again")
    return Later(answer, lambda answer_id: retry_markup(answer_id, label))


def again_markup(inbox_id: int) -> dict[str, Any]:
    """One 🔁 button running the stored update again (handled by the mailroom)."""
    return {"inline_keyboard": [[{"text": t("tg.again"), "callback_data": f"again:{inbox_id}"}]]}


class LiveRetry:
    """Which outbox row of each chat carries the live 🔁 (issue 34: one 🔁, on the
    newest answer). A new answer, /undo or /retry takes the standing one's buttons
    away through the outbox (:func:`unbutton_item`), a tidy row that goes after what is
    queued and only with a token to spare: durable like any reply (a restart still
    takes the old 🔁 away), never racing the answer it follows nor delaying the next
    one (back to back, an exchange costs one token: issue 37). Kept in memory, and
    found again at start (:meth:`restore`) from the chat's recent rows."""

    def __init__(self) -> None:
        self._rows: dict[int, int] = {}  # chat → the row of the answer with 🔁

    async def restore(self, mailbox: Mailbox, chat_id: int) -> None:
        """At start: the newest row among the chat's last RESTORE_SCAN that was sent
        with a 🔁 no later row took away stands again (so the next answer removes it)."""
        if chat_id in self._rows:
            return
        taken: set[int] = set()
        for row in await mailbox.recent(CHANNEL, str(chat_id), RESTORE_SCAN):
            of_row = row.body.get("of_row")
            if row.kind == "edit" and isinstance(of_row, int):
                taken.add(of_row)
            elif (
                row.kind == "send"
                and row.state not in UNDELIVERED
                and row.id not in taken
                and _retry_button(row.body.get("reply_markup"))
            ):
                self._rows[chat_id] = row.id
                return

    def supersede(self, chat_id: int) -> list[OutboxItem]:
        """The items that take the standing 🔁 away (none when none stands). It stays
        on record until they are queued (:meth:`taken`, or :meth:`stands` for the row
        that carries it now): a refused put leaves it known, to be taken away later."""
        row = self._rows.get(chat_id)
        return [unbutton_item(row)] if row is not None else []

    def taken(self, chat_id: int, items: list[OutboxItem]) -> None:
        """``items`` (from :meth:`supersede`) are queued: their 🔁 no longer stands."""
        row = self._rows.get(chat_id)
        if row is not None and any(item.body.get("of_row") == row for item in items):
            del self._rows[chat_id]

    def stands(self, chat_id: int, row_id: int) -> None:
        """``row_id`` (queued) now carries the chat's 🔁: an answer's retry: or a
        notice's again:, whichever came last."""
        self._rows[chat_id] = row_id


def parse_time(value: Any) -> datetime | None:
    """A stored ISO time (a notice's ``since``), or None."""
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


class Undeliverable(Exception):
    """The item will not be delivered: it expired or Telegram refused it for good."""

    def __init__(self, state: str) -> None:
        super().__init__(state)
        self.state = state


class Ticket:
    """The rows of one :meth:`Outbox.put`; :meth:`wait` gives their message ids in order
    (None for a delete, or a row that was not delivered: see :meth:`states`)."""

    def __init__(self, ids: list[int], futures: list[asyncio.Future[tuple[str, int | None]]]):
        self.ids = ids
        self._futures = futures

    async def _outcomes(self) -> list[tuple[str, int | None]]:
        return [await asyncio.shield(future) for future in self._futures]

    async def wait(self) -> list[int | None]:
        return [message_id for _, message_id in await self._outcomes()]

    async def states(self) -> list[str]:
        return [state for state, _ in await self._outcomes()]


def note_row(
    audit: AuditLog | None,
    row: OutboxRow,
    outcome: str,
    attempts: int,
    message_id: int | None = None,
    linger: float | None = None,
) -> None:
    """A finished outbox row in the audit's global chain (``outbox.sent`` or
    ``outbox.failed``): what it was and how it ended, no text; ``linger``: as long as
    its row's mark may wait for a hop (a tidy row's, TIDY_LINGER)."""
    if audit is None:
        return
    kind = kinds.OUTBOX_SENT if outcome == "sent" else kinds.OUTBOX_FAILED
    notice = row.body.get("notice")
    try:  # queued, written with the outbox's next store call
        audit.note(
            kind,
            linger=linger,
            row=row.id,
            action=row.kind,
            chat=row.chat_id,
            outcome=outcome,
            attempts=attempts,
            message=message_id,
            resent=True if row.ambiguous and row.kind == "send" else None,
            notice=notice if isinstance(notice, str) else None,
        )
    except Exception as exc:  # the delivery stands whether or not its record does
        log.warning("audit: an outbox row was not recorded (%s)", type(exc).__name__)


def goes_first(items: Sequence[OutboxItem]) -> bool:
    """A put whose first item may be claimed with it (``Outbox.put``): a send that shows
    something (a tidy row's first try takes no mark at all). Whether the chat has
    nothing else unsent is the outbox's to say. A crash after such a put is a crash
    after the claim (re-sent marked); a stop before the call takes the mark back."""
    return bool(items) and items[0].kind == "send" and not is_tidy(items[0].body)


def logged(done: asyncio.Future[None]) -> None:
    """A tidy row's "sent" mark no one waited for: a failure is told in the log (the row
    is tried again at the next start; taking buttons off twice is harmless)."""
    if not done.cancelled() and done.exception() is not None:
        log.warning("recording a tidy row sent failed: %s", type(done.exception()).__name__)
