"""Telegram commands (seed 004 "TG 命令汇总"): the shared set of ``kernel.commands``
rendered as plain messages (queued in the durable outbox), plus /start, /help and
Telegram's parts of /cancel and /status."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from telegram import InlineKeyboardMarkup, Update
from telegram.error import TelegramError
from telegram.ext import ContextTypes

from kernel.agent.turn import UserInput
from kernel.commands import CATALOGUE, SHARED, Commands, Reply, help_topic, overview, welcome
from kernel.commands.listing import DELETE, DELETE_NO, history_arg
from kernel.commands.status import ChannelReport
from kernel.commands.tasks import STOP
from kernel.core.i18n import t
from kernel.store.mailbox import InboxState
from kernel.telegram.deps import Deps, conversation_of
from kernel.telegram.outbox import CHANNEL, RETRY, edit_item, plain_items
from kernel.telegram.picker import Picker, picker_markup, take_retry
from kernel.telegram.split import LIMIT, utf16_len
from kernel.telegram.tasks import task_arg

if TYPE_CHECKING:
    from kernel.telegram.files import Files
    from kernel.telegram.inbound import Inbound
    from kernel.telegram.mailroom import Mailroom

Context = ContextTypes.DEFAULT_TYPE
log = logging.getLogger(__name__)

COMMANDS = tuple(c.name for c in CATALOGUE)  # every one works when typed
RETRY_PATTERN = r"^retry:\d{1,18}$"  # the 🔁 under a final reply: its stored answer's id
# Commands by which the owner chooses the chat's session (no restart hint after them).
SESSION_CHOICES = frozenset({"new", "resume", "del_history"})
# The channel's own part of /status: given the asking command's own open rows (0 or 1).
Report = Callable[[int], Awaitable[ChannelReport]]


class CommandSet:
    """One handler per name of ``COMMANDS`` (``getattr(commands, name)``)."""

    def __init__(
        self, deps: Deps, inbound: Inbound, mailroom: Mailroom, files: Files, report: Report
    ) -> None:
        self.deps = deps
        self.inbound = inbound
        self.mailroom = mailroom
        self.uploads = files  # /files (``files`` is the command's handler)
        self.report = report
        self.commands = Commands(deps.services)
        self.picker = Picker(deps, self.commands, inbound)  # a bare /model … as buttons
        for name in SHARED:
            if not hasattr(self, name):
                setattr(self, name, partial(self._shared, name))

    @staticmethod
    def _chat(update: Update) -> int:
        assert update.effective_chat is not None
        return update.effective_chat.id

    async def _render(
        self, chat: int, reply: Reply, row: int | None, markup: dict[str, Any] | None = None
    ) -> None:
        """Queue the reply (``markup``: its buttons); the command's inbox row is settled
        in the same transaction (with the follow-up's reply when one comes), so a crash
        cannot leave both."""
        follow_up = reply.follow_up
        mailroom = self.mailroom
        settle: tuple[int, InboxState] | None = None
        if row is not None and follow_up is None:
            settle = (row, "answered")
        if reply.text or settle is not None:
            markup = markup or buttons_markup(reply)
            items = plain_items(reply.text, markup=markup) if reply.text else []
            await self.deps.outbox.put(chat, items, settle=settle)
        if follow_up is not None:
            if row is not None:
                mailroom.defer(row)

            async def later() -> None:
                then: Reply | None = None
                try:
                    then = await follow_up()
                    await self._render(chat, then, row)
                finally:
                    if row is not None and (then is None or then.follow_up is None):
                        mailroom.undefer(row)
                        await mailroom.close(row, "failed")  # no-op once answered

            self.deps.life.spawn(later(), f"tg-command-{chat}", for_owner=True)

    def _row(self, update: Update) -> int | None:
        return self.mailroom.row_id(update)

    async def _shared(self, name: str, update: Update, context: Context) -> None:
        chat = self._chat(update)
        arg = " ".join(context.args or [])
        if name in SESSION_CHOICES:
            self.inbound.chose_session(chat)
        reply = await self.commands.run(conversation_of(chat), name, arg)
        assert reply is not None  # every name of SHARED is a command
        await self._render(chat, reply, self._row(update), picker_markup(name, arg, reply))

    async def new(self, update: Update, context: Context) -> None:
        """``/new <title>`` with topics on opens a topic for the new session
        (``topic_desk.py``); otherwise the shared /new."""
        title = " ".join(context.args or [])
        topics = self.inbound.topics
        if not title or not topics.on:
            return await self._shared("new", update, context)
        chat = self._chat(update)
        self.inbound.chose_session(chat)
        await self._render(chat, Reply(await topics.new(chat, title)), self._row(update))

    async def resume(self, update: Update, context: Context) -> None:
        """``/resume #n`` with topics on opens the session in its topic."""
        arg = " ".join(context.args or [])
        topics = self.inbound.topics
        if not arg or not topics.on:
            return await self._shared("resume", update, context)
        number = re.fullmatch(r"#?(\d{1,18})", arg.strip())
        row = await self.deps.agent.store.get_session(int(number[1])) if number else None
        if row is None:  # not one session by number: the shared /resume says why
            return await self._shared("resume", update, context)
        chat = self._chat(update)
        try:
            lane = await topics.topic_of(row)
        except TelegramError as exc:
            log.warning("opening a session's topic failed: %s", type(exc).__name__)
            return await self._render(chat, Reply(t("tg.topic_open_failed")), self._row(update))
        self.inbound.chose_session(lane)
        there = await self.commands.run(conversation_of(lane), "resume", arg)
        assert there is not None
        if there.error or lane == chat:
            return await self._render(chat, there, self._row(update))
        await self._render(lane, there, None)
        await self._render(chat, Reply(topics.resumed(lane)), self._row(update))

    async def start(self, update: Update, context: Context) -> None:
        await self._render(self._chat(update), Reply(welcome()), self._row(update))

    async def help(self, update: Update, context: Context) -> None:
        """/help: the commands by group; ``/help <group or command>``: its details."""
        arg = " ".join(context.args or [])
        if arg:
            reply = help_topic(arg, COMMANDS)
        else:
            agent = self.commands.agent
            reply = Reply(overview(COMMANDS, agent.selection.provider_name, agent.selection.model))
        await self._render(self._chat(update), reply, self._row(update))

    async def files(self, update: Update, context: Context) -> None:
        await self.uploads.command(update, context)  # issue 23: kernel/telegram/files.py

    async def unknown(self, update: Update, context: Context) -> None:
        await self._render(self._chat(update), Reply(t("tg.unknown_command")), self._row(update))

    async def cancel(self, update: Update, context: Context) -> None:
        chat = self._chat(update)

        def stop() -> bool:  # and the stored messages queued to run after it
            queued = chat == self.deps.owner and self.mailroom.cancel_runs()
            return self.inbound.cancel(chat, queued=queued)

        reply = await self.commands.cancel(conversation_of(chat), stop)
        await self._render(chat, reply, self._row(update))

    async def undo(self, update: Update, context: Context) -> None:
        """The shared /undo; the undone answer's 🔁 goes with it (issue 34)."""
        chat = self._chat(update)
        reply = await self.commands.run(conversation_of(chat), "undo", "")
        assert reply is not None
        if not reply.error:
            await self._supersede(chat)
        await self._render(chat, reply, self._row(update))

    async def _supersede(self, chat: int) -> None:
        """The chat's standing 🔁 goes: its answer is no longer the one to redo."""
        await take_retry(self.deps, chat)

    async def branches(self, update: Update, context: Context) -> None:
        """The shared /branches (its listing a picker); a switch takes the standing 🔁
        away like /undo."""
        chat = self._chat(update)
        arg = " ".join(context.args or [])
        reply = await self.commands.run(conversation_of(chat), "branches", arg)
        assert reply is not None
        if arg and not reply.error:
            await self._supersede(chat)
        markup = picker_markup("branches", arg, reply)
        await self._render(chat, reply, self._row(update), markup)

    async def retry(self, update: Update, context: Context) -> None:
        """The last exchange cut and its message answered again, shown like a message's
        turn (the command's inbox row settled with the new answer)."""
        chat = self._chat(update)
        row = self._row(update)
        refused = await self._retry(chat, row)
        if refused is not None:
            await self._render(chat, refused, row)

    async def _retry(self, chat: int, row: int | None) -> Reply | None:
        """Start the retry's turn and show it; a refusal is returned to be told."""
        if self.inbound.busy(chat):
            return Reply(t("conv.busy"), error=True)
        template = UserInput("", channel="telegram", user_id=str(chat))
        reply = await self.commands.retry(conversation_of(chat), template)
        if reply.turn is None:
            return reply
        await self.mailroom.apply(chat, row, self.inbound.show(chat, reply.turn, row=row))
        if row is not None:  # settled by the turn's view with the new answer, not now
            self.mailroom.defer(row)
        return None

    async def on_retry(self, update: Update, context: Context) -> None:
        """🔁 under a final reply: only the latest answer's press retries (an older
        one's is told so); the pressed message loses its button."""
        query = update.callback_query
        assert query is not None and query.data is not None
        answer_id = int(query.data.removeprefix(RETRY))
        notice = query.message
        chat = notice.chat.id if notice is not None else self.deps.owner
        latest = await self.commands.agent.control.latest_answer(conversation_of(chat))
        if latest != answer_id:
            toast = t("conv.retry_old")
        else:
            refused = await self._retry(chat, None)
            toast = refused.text if refused is not None else t("conv.retrying")
            if refused is None and notice is not None and _editable(notice):
                # The pressed answer is the one the chat's 🔁 stands on (since a restart,
                # unknown: then by its message).
                live = self.deps.outbox.live_retry
                items = live.supersede(chat) or [edit_item(notice.message_id, None)]
                await self.deps.outbox.put(chat, items)
                live.taken(chat, items)
        try:
            await query.answer(toast)
        except TelegramError as exc:  # the toast is a courtesy
            log.info("answering a press failed: %s", type(exc).__name__)

    async def on_history(self, update: Update, context: Context) -> None:
        """◀ ▶ under a /history page: the page message is edited into the other page."""
        query = update.callback_query
        assert query is not None and query.data is not None
        chat = query.message.chat.id if query.message is not None else self.deps.owner
        self.inbound.chose_session(chat)
        reply = await self.commands.history(conversation_of(chat), history_arg(query.data))
        await self._answer_press(query, reply)

    async def on_delete(self, update: Update, context: Context) -> None:
        """[🗑 删除] / [取消] under a deletion's question: the question is edited into
        what was done (a session gone meanwhile is refused by name)."""
        query = update.callback_query
        assert query is not None and query.data is not None
        chat = query.message.chat.id if query.message is not None else self.deps.owner
        self.inbound.chose_session(chat)
        if query.data == DELETE_NO:
            reply = Reply(t("session.delete_kept"))
        else:
            ids = [int(i) for i in query.data.removeprefix(DELETE).split(",")]
            reply = await self.commands.delete_now(conversation_of(chat), ids)
        await self._answer_press(query, reply)

    async def on_task(self, update: Update, context: Context) -> None:
        """⏹ under /tasks, 🔁 under a restart's offer: the shared /tasks verb, and the
        pressed message edited into what was done (kernel/telegram/tasks.py); after a ⏹,
        with the listing as it is now, the other running tasks' ⏹ kept."""
        query = update.callback_query
        assert query is not None and query.data is not None
        chat = query.message.chat.id if query.message is not None else self.deps.owner
        conversation = conversation_of(chat)
        reply = await self.commands.run(conversation, "tasks", task_arg(query.data))
        assert reply is not None
        if query.data.startswith(STOP):  # the listing as it is now: the other ⏹ stay
            listing = await self.commands.run(conversation, "tasks", "")
            if listing is not None and not listing.error:
                reply = Reply(f"{reply.text}\n\n{listing.text}", buttons=listing.buttons)
        await self._answer_press(query, reply)

    async def on_memory(self, update: Update, context: Context) -> None:
        """A button under /memory or under a memory (kernel/commands/memory.py): the
        message edited into what it did; a press for a memory gone or changed since it
        was shown is answered in an alert, the message left as it is."""
        query = update.callback_query
        assert query is not None and query.data is not None
        chat = query.message.chat.id if query.message is not None else self.deps.owner
        reply = await self.commands.memory_press(conversation_of(chat), query.data)
        if not reply.error:
            await self._answer_press(query, reply)
            return
        try:
            await query.answer(reply.text, show_alert=True)
        except TelegramError as exc:  # the answer is a courtesy
            log.info("answering a press failed: %s", type(exc).__name__)

    async def _answer_press(self, query: Any, reply: Reply) -> None:
        """The pressed message edited into ``reply`` (its buttons replaced by the
        reply's, or taken away); a message too old to edit, or a reply too long for one
        message (a long /memory listing's next page), gets new ones."""
        notice = query.message
        chat = notice.chat.id if notice is not None else self.deps.owner
        markup = buttons_markup(reply)
        if notice is not None and _editable(notice) and utf16_len(reply.text) <= LIMIT:
            item = edit_item(notice.message_id, reply.text, markup=markup)
            await self.deps.outbox.put(chat, [item])
        else:
            await self.deps.outbox.put(chat, plain_items(reply.text, markup=markup))
        try:
            await query.answer()
        except TelegramError as exc:  # the answer only stops the button's spinner
            log.info("answering a press failed: %s", type(exc).__name__)

    async def rewind(self, update: Update, context: Context) -> None:
        """``/rewind`` as a reply to one of the bot's answers: what follows it is cut
        (the answer found by the 🔁 it carries: its stored id); ``/rewind N`` as in
        every channel."""
        chat = self._chat(update)
        message = update.message
        target = message.reply_to_message if message is not None else None
        arg = " ".join(context.args or [])
        if target is not None:
            answer_id = await self._answer_of(chat, target)
            if answer_id is None:
                reply = Reply(t("conv.rewind_no_button"), error=True)
                await self._render(chat, reply, self._row(update))
                return
            arg = str(answer_id)
        reply = await self.commands.rewind(conversation_of(chat), arg)
        await self._render(chat, reply, self._row(update))

    async def _answer_of(self, chat: int, target: Any) -> int | None:
        """The stored answer a message is: by the 🔁 it carries, or, once a newer answer
        took the 🔁 away (issue 34), by the 🔁 its outbox row was sent with."""
        answer_id = _answer_of(target.reply_markup)
        if answer_id is not None:
            return answer_id
        row = await self.deps.outbox.mailbox.sent_as(CHANNEL, str(chat), target.message_id)
        markup = row.body.get("reply_markup") if row is not None else None
        return _answer_of(InlineKeyboardMarkup.de_json(markup, None) if markup else None)

    async def status(self, update: Update, context: Context) -> None:
        """The owner's /status with the chat's problems; /status full adds what the
        channel counts (dropped updates, uptime, the mailbox, polling)."""
        chat = self._chat(update)
        # This command's own inbox row is open while it runs: not a turn in progress.
        report = await self.report(1 if self._row(update) is not None else 0)
        arg = " ".join(context.args or [])
        reply = await self.commands.status(conversation_of(chat), report, arg)
        await self._render(chat, reply, self._row(update))


def buttons_markup(reply: Reply) -> dict[str, Any] | None:
    """The reply's buttons as one row of an inline keyboard (None: no buttons)."""
    if not reply.buttons:
        return None
    row = [{"text": b.label, "callback_data": b.data} for b in reply.buttons]
    return {"inline_keyboard": [row]}


def channel_problems(polling: str, state: str, detail: dict[str, Any]) -> list[str]:
    """What is wrong with the chat itself, in the owner's words: polling that does not
    keep up (``polling``: its own state), replies waiting undelivered too long (the
    channel's ``state`` degraded by them)."""
    problems = []
    if polling == "degraded":
        problems.append(t("status.problem_polling"))
    undelivered = (detail.get("outbox") or {}).get("undelivered", 0)
    if undelivered and state == "degraded" and polling != "degraded":
        problems.append(t("status.problem_outbox", count=undelivered))
    return problems


def _answer_of(markup: Any) -> int | None:
    """The stored answer id a reply's 🔁 names, if it carries one."""
    rows = getattr(markup, "inline_keyboard", None) or ()
    for row in rows:
        for button in row:
            data = getattr(button, "callback_data", None)
            if isinstance(data, str) and re.fullmatch(RETRY_PATTERN, data):
                return int(data.removeprefix(RETRY))
    return None


def _editable(message: Any) -> bool:
    """A message the bot can still edit (not Telegram's dateless stand-in)."""
    date = getattr(message, "date", None)
    return date is not None and date.timestamp() > 0


def mailbox_lines(detail: dict[str, Any], own_row: int = 0) -> list[str]:
    """The inbox, the outbox and polling's last consumed update, from the status detail
    (``own_row``: the asking command's own open row, not counted as a turn)."""
    lines = []
    inbox, outbox = detail.get("inbox"), detail.get("outbox")
    if inbox is not None and outbox is not None:
        seconds = int(outbox["oldest_undelivered_seconds"])
        oldest = t("tg.status_oldest", seconds=seconds) if outbox["undelivered"] else ""
        lines.append(
            t(
                "tg.status_mailbox",
                open=max(0, inbox["open_turns"] - own_row),
                waiting=inbox["waiting"],
                undelivered=outbox["undelivered"],
                oldest=oldest,
            )
        )
    ago = detail.get("last_update_seconds_ago")
    when = t("tg.status_never") if ago is None else t("tg.status_ago", seconds=int(ago))
    pending = detail.get("pending_updates")
    lines.append(
        t(
            "tg.status_polling",
            ago=when,
            pending="?" if pending is None else pending,
            unparseable=detail.get("unparseable_updates", 0),
        )
    )
    return lines
