"""Pickers (issue 34): a bare /resume, /model, /provider, /persona, /project, /branches
or /mode (issue 38) answers with its choices as inline buttons; one tap acts.

The choices are the command's own (:class:`kernel.commands.Choice`), so every channel
lists the same ones; here they become a keyboard of ``PER_PAGE`` buttons a page, the
current one marked, ◀ n/m ▶ below when there are more. Callback data names a choice by
a digest of what it is, never by text from outside, and stays short:

- ``pick:<command>:<8 hex digits>``: that choice (sha256 of its command);
- ``pick:<command>:p<n>``: show page n;
- ``pick:-``: the page number itself (does nothing).

A tap is checked from scratch: the owner's chat, then the command's choices listed again;
a choice no longer among them (a persona deleted, a session gone) is refused in words and
nothing changes. Otherwise the command runs with the choice's argument, exactly as if it
had been typed, and the picker message is edited into its reply, buttons gone; when the
command refuses (the chat is busy), its words come as an alert and the picker stays.
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING, Any

from telegram import CallbackQuery, Update
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from kernel.commands import Choice, Commands, Reply
from kernel.core.i18n import t
from kernel.telegram.deps import conversation_of
from kernel.telegram.outbox import edit_item, plain_items

if TYPE_CHECKING:
    from kernel.telegram.deps import Deps
    from kernel.telegram.inbound import Inbound

log = logging.getLogger(__name__)
Context = ContextTypes.DEFAULT_TYPE

PICKED = ("resume", "model", "provider", "persona", "project", "branches", "mode")
PREFIX = "pick:"
PATTERN = (
    r"^pick:(?:(?:resume|model|provider|persona|project|branches|mode):(?:p\d{1,4}|[0-9a-f]{8})|-)$"
)
NOTHING = "pick:-"
PER_PAGE = 8
LABEL = 60  # characters of a button's label
ALERT = 200  # characters of a press's answer (answerCallbackQuery's limit)
CURRENT = "✅ "


def token(name: str, choice: Choice) -> str:
    """Eight hex digits naming the choice (what it is, not where it is listed)."""
    return hashlib.sha256(f"{name}\0{choice.command}".encode()).hexdigest()[:8]


def label(choice: Choice) -> str:
    text = choice.label if len(choice.label) <= LABEL else choice.label[: LABEL - 1] + "…"
    return CURRENT + text if choice.current else text


def page_of_current(choices: tuple[Choice, ...]) -> int:
    """The page that shows the current choice (the first when none is)."""
    here = next((i for i, c in enumerate(choices) if c.current), 0)
    return here // PER_PAGE + 1


def keyboard(name: str, choices: tuple[Choice, ...], page: int) -> dict[str, Any]:
    """One button a row; ◀ n/m ▶ under them when the choices fill more than a page."""
    pages = max(1, -(-len(choices) // PER_PAGE))
    page = min(max(page, 1), pages)
    shown = choices[(page - 1) * PER_PAGE : page * PER_PAGE]
    rows: list[list[dict[str, str]]] = [
        [{"text": label(c), "callback_data": f"{PREFIX}{name}:{token(name, c)}"}] for c in shown
    ]
    if pages > 1:
        nav = []
        if page > 1:
            nav.append({"text": "◀", "callback_data": f"{PREFIX}{name}:p{page - 1}"})
        nav.append({"text": f"{page}/{pages}", "callback_data": NOTHING})
        if page < pages:
            nav.append({"text": "▶", "callback_data": f"{PREFIX}{name}:p{page + 1}"})
        rows.append(nav)
    return {"inline_keyboard": rows}


def picker_markup(name: str, arg: str, reply: Reply) -> dict[str, Any] | None:
    """The keyboard a command's reply gets: only a bare picked command with choices."""
    if arg or name not in PICKED or reply.error or not reply.choices:
        return None
    return keyboard(name, reply.choices, page_of_current(reply.choices))


class Picker:
    def __init__(self, deps: Deps, commands: Commands, inbound: Inbound) -> None:
        self.deps = deps
        self.commands = commands
        self.inbound = inbound

    async def on_press(self, update: Update, context: Context) -> None:
        query = update.callback_query
        assert query is not None and query.data is not None
        toast: str | None = None
        alert = False
        try:
            toast = await self._press(query, query.data)
            alert = toast is not None
        finally:
            try:
                await query.answer(toast, show_alert=alert)
            except TelegramError as exc:  # the answer is a courtesy
                log.info("answering a press failed: %s", type(exc).__name__)

    async def _press(self, query: CallbackQuery, data: str) -> str | None:
        """Act on the press; a refusal to show the owner is returned."""
        message = query.message
        owner = self.deps.owner
        if query.from_user.id != owner or message is None or message.chat.id != owner:
            return None  # not the owner's picker: nothing happens
        if data == NOTHING:
            return None
        name, _, what = data.removeprefix(PREFIX).partition(":")
        if name == "resume":  # the owner chooses the chat's session: no restart hint
            self.inbound.chose_session(owner)
        conversation = conversation_of(owner)
        listing = await self.commands.run(conversation, name, "")
        choices = listing.choices if listing is not None and not listing.error else ()
        if what.startswith("p"):
            if choices:
                markup = keyboard(name, choices, int(what[1:]))
                edit = edit_item(message.message_id, None, markup=markup)
                await self.deps.outbox.put(owner, [edit])
            return None
        chosen = next((c for c in choices if token(name, c) == what), None)
        if chosen is None:
            return t("pick.stale", command=name)
        reply = await self.commands.run(conversation, name, chosen.argument)
        if reply is None or reply.error:  # (busy) the picker stays, to tap again later
            return _alert(reply.text if reply is not None else t("pick.stale", command=name))
        await self.deps.outbox.put(owner, plain_items(reply.text, replace=message.message_id))
        if name == "branches":  # another answer is the latest now
            await take_retry(self.deps, owner)
        return None


async def take_retry(deps: Deps, chat: int) -> None:
    """The chat's standing 🔁 goes: its answer is no longer the one to redo (/undo, a
    switch of branches)."""
    live = deps.outbox.live_retry
    if items := live.supersede(chat):
        await deps.outbox.put(chat, items)
        live.taken(chat, items)


def _alert(text: str) -> str:
    """``text`` as a press's alert, within Telegram's 200 characters."""
    return text if len(text) <= ALERT else text[: ALERT - 1] + "…"
