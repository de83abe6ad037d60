"""Telegram commands (seed 004 "TG 命令汇总"). ``#n`` refers to the last /history or
/memory listing of this chat; dates are local to ``general.timezone``."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from telegram import Update
from telegram.ext import ContextTypes

from kernel.agent.agent import SelectionError
from kernel.console.sessions import format_history, parse_refs
from kernel.core.errors import KernelError, SessionError
from kernel.core.i18n import t
from kernel.telegram.inbound import conversation_of
from kernel.telegram.progress import format_elapsed
from kernel.telegram.view import send_plain

if TYPE_CHECKING:
    from kernel.telegram.channel import TelegramChannel

Context = ContextTypes.DEFAULT_TYPE

MEMORY_LISTING = 200  # /memory shows the newest this many (and says how many there are)

COMMANDS = (
    "start",
    "help",
    "new",
    "history",
    "resume",
    "retitle",
    "del_history",
    "provider",
    "model",
    "remember",
    "memory",
    "forget",
    "cancel",
    "status",
)


class CommandSet:
    def __init__(self, channel: TelegramChannel) -> None:
        self.channel = channel
        self.agent = channel.kernel.agent
        self.store = channel.kernel.store
        self.memories = channel.kernel.memories
        self.sessions: dict[int, list[int]] = {}  # chat → session ids of the last /history
        self.memories_listed: dict[int, list[int]] = {}  # chat → memory ids of the last /memory

    async def _reply(self, update: Update, text: str) -> None:
        assert update.effective_message is not None
        await update.effective_message.reply_text(text)

    @staticmethod
    def _chat(update: Update) -> int:
        assert update.effective_chat is not None
        return update.effective_chat.id

    @staticmethod
    def _arg(context: Context) -> str:
        return " ".join(context.args or []).strip()

    # ----- help -------------------------------------------------------------------------

    async def start(self, update: Update, context: Context) -> None:
        await self.help(update, context)

    async def help(self, update: Update, context: Context) -> None:
        lines = [t("tg.help_header")]
        lines += [f"/{name} — {t(f'tg.cmd.{name}')}" for name in COMMANDS]
        lines.append(t("tg.help_footer", provider=self.agent.provider_name, model=self.agent.model))
        await self._reply(update, "\n".join(lines))

    async def unknown(self, update: Update, context: Context) -> None:
        await self._reply(update, t("tg.unknown_command"))

    # ----- sessions ---------------------------------------------------------------------

    async def new(self, update: Update, context: Context) -> None:
        try:
            self.agent.new_session(conversation_of(self._chat(update)))
        except KernelError as exc:
            await self._reply(update, str(exc))
            return
        await self._reply(update, t("session.new"))

    async def history(self, update: Update, context: Context) -> None:
        rows = await self.agent.list_sessions(limit=20)
        self.sessions[self._chat(update)] = [r.id for r in rows]
        await self._reply(update, format_history(rows, self.agent) if rows else t("session.none"))

    def _session_refs(self, update: Update, text: str, *, single: bool) -> list[tuple[int, int]]:
        listing = self.sessions.get(self._chat(update), [])
        if not text:
            raise SessionError(t("tg.need_ref"))
        refs = parse_refs(text, len(listing))
        if not refs or (single and len(refs) != 1):
            raise SessionError(t("session.bad_ref", ref=text))
        return [(n, listing[n - 1]) for n in refs]

    async def resume(self, update: Update, context: Context) -> None:
        try:
            [(n, session_id)] = self._session_refs(update, self._arg(context), single=True)
            row = await self.agent.resume(conversation_of(self._chat(update)), session_id)
        except KernelError as exc:
            await self._reply(update, str(exc))
            return
        await self._reply(
            update, t("session.resumed", n=n, title=row.title or t("session.untitled"))
        )

    async def retitle(self, update: Update, context: Context) -> None:
        if self.agent.titles is None:
            await self._reply(update, t("tg.titles_off"))
            return
        arg = self._arg(context)
        try:
            if arg:
                [(_, session_id)] = self._session_refs(update, arg, single=True)
            else:
                current = self.agent.current_session(conversation_of(self._chat(update)))
                if current is None:
                    raise SessionError(t("tg.no_session"))
                session_id = current
        except KernelError as exc:
            await self._reply(update, str(exc))
            return
        # Title retries wait up to 78 s: never in the update queue, ahead of /cancel.
        self.channel.spawn(
            self._retitle(update, session_id), f"tg-retitle-{session_id}", for_owner=True
        )

    async def _retitle(self, update: Update, session_id: int) -> None:
        title = await self.agent.generate_title(session_id)
        await self._reply(
            update, t("tg.retitled", title=title) if title else t("tg.retitle_failed")
        )

    async def del_history(self, update: Update, context: Context) -> None:
        try:
            refs = self._session_refs(update, self._arg(context), single=False)
            count = await self.agent.delete_sessions([sid for _, sid in refs])
        except KernelError as exc:
            await self._reply(update, str(exc))
            return
        self.sessions.pop(self._chat(update), None)  # numbers changed: list again first
        await self._reply(update, t("session.deleted", count=count))

    # ----- provider and model -------------------------------------------------------------

    async def provider(self, update: Update, context: Context) -> None:
        name = self._arg(context)
        agent = self.agent
        if not name:
            available = ", ".join(agent.available_providers)
            await self._reply(
                update,
                t(
                    "provider.current",
                    name=agent.provider_name,
                    model=agent.model,
                    available=available,
                ),
            )
            return
        try:
            model = await agent.set_provider(name)
        except SelectionError as exc:
            await self._reply(update, str(exc))
            return
        await self._reply(update, t("provider.switched", name=name, model=model))

    async def model(self, update: Update, context: Context) -> None:
        name = self._arg(context)
        if not name:
            models = ", ".join(self.agent.models)
            await self._reply(update, t("model.current", model=self.agent.model, models=models))
            return
        try:
            await self.agent.set_model(name)
        except SelectionError as exc:
            await self._reply(update, str(exc))
            return
        await self._reply(update, t("model.switched", model=name))

    # ----- memory -------------------------------------------------------------------------

    async def remember(self, update: Update, context: Context) -> None:
        text = self._arg(context)
        if not text:
            await self._reply(update, t("tg.remember_usage"))
            return
        _, created = await self.memories.add(text)
        await self._reply(update, t("tg.remembered" if created else "tg.remember_exists"))

    async def memory(self, update: Update, context: Context) -> None:
        rows = await self.memories.recent(MEMORY_LISTING)
        self.memories_listed[self._chat(update)] = [r.id for r in rows]
        if not rows:
            await self._reply(update, t("tg.memory_none"))
            return
        lines = [t("tg.memory_header")]
        for n, row in enumerate(rows, start=1):
            date = self.agent.local_time(row.created_at).strftime("%Y-%m-%d")
            category = f"[{t(f'memory.category.{row.category}')}] " if row.category else ""
            lines.append(f"#{n} {date} {category}{row.text}")
        if len(rows) == MEMORY_LISTING:
            total = await self.memories.count()
            if total > len(rows):
                lines.append(t("tg.memory_more", shown=len(rows), total=total))
        await send_plain(self.channel.app.bot, self._chat(update), "\n".join(lines))

    async def forget(self, update: Update, context: Context) -> None:
        listing = self.memories_listed.get(self._chat(update), [])
        arg = self._arg(context)
        try:
            if not arg:
                raise SessionError(t("tg.forget_usage"))
            refs = parse_refs(arg, len(listing), "memory.bad_ref")
        except KernelError as exc:
            await self._reply(update, str(exc))
            return
        count = await self.memories.delete([listing[n - 1] for n in refs])
        self.memories_listed.pop(self._chat(update), None)  # numbers changed: list again
        await self._reply(update, t("tg.forgotten", count=count))

    # ----- control ------------------------------------------------------------------------

    async def cancel(self, update: Update, context: Context) -> None:
        chat = self._chat(update)
        running = self.channel.kernel.delegator.current(conversation_of(chat))
        cancelled = self.channel.inbound.cancel(chat)
        if not cancelled:
            await self._reply(update, t("tg.nothing_to_cancel"))
        elif running is not None and not running.done:
            await self._reply(update, t("tg.cancelled_cli", cli=running.cli))
        else:
            await self._reply(update, t("turn.cancelled"))

    def _cli_status(self) -> str:
        running = self.channel.kernel.delegator.running
        if running is None:
            return t("tg.status_cli_idle")
        return t("tg.status_cli_running", cli=running.cli, elapsed=format_elapsed(running.elapsed))

    async def _search_status(self) -> str:
        key = (
            "tg.status_search_fts"
            if self.memories.search_mode == "fts5"
            else "tg.status_search_like"
        )
        return t(key, count=await self.memories.count())

    def _cron_status(self) -> str:
        cron = self.channel.kernel.cron
        job = cron.next_due() if cron.started else None
        if job is None or job.row.next_run_at is None:
            return t("tg.status_cron_none")
        when = self.agent.local_time(job.row.next_run_at).strftime("%Y-%m-%d %H:%M")
        return t("tg.status_cron", name=job.spec.name, when=when)

    async def status(self, update: Update, context: Context) -> None:
        conversation = conversation_of(self._chat(update))
        agent = self.agent
        session = agent.current_session(conversation)
        title = ""
        if session is not None:
            row = await self.store.get_session(session)
            title = (row.title if row else None) or t("session.untitled")
        dropped = self.channel.dropped
        lines = [
            t("tg.status_session", session=f"{session} {title}" if session else t("tg.status_new")),
            t("tg.status_model", provider=agent.provider_name, model=agent.model),
            t("tg.status_busy") if agent.is_busy(conversation) else t("tg.status_idle"),
            self._cli_status(),
            self.channel.kernel.mcp.status_text(),
            await self._search_status(),
            t(
                "tg.status_dropped",
                stranger=dropped["stranger"],
                group=dropped["group"],
                edited=dropped["edited"],
                channel=dropped["channel"],
            ),
            t(
                "tg.status_uptime",
                minutes=int((time.monotonic() - self.channel.started_at) // 60),
                restarts=self.channel.poll_restarts,
            ),
            self._cron_status(),
            t("tg.status_error", error=agent.last_error or "—"),
        ]
        await self._reply(update, "\n".join(lines))
