"""One implementation of the text commands; each channel renders the ``Reply``.

A session's ``#n`` is its own number (its id: never reused, so an old /history list
stays right); a memory's ``#n`` refers to the last /memory listing of the same
conversation. Dates are local to ``general.timezone``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from kernel.agent.sessions import Origin
from kernel.agent.titles import MAX_TITLE
from kernel.agent.trail import actor_of
from kernel.agent.turn_parts import UserInput
from kernel.audit import kinds
from kernel.commands.audit import audit_command
from kernel.commands.branches import branches_command
from kernel.commands.listing import (
    CONFIRM,
    DELETE,
    DELETE_NO,
    HistoryQuery,
    format_history,
    history_query,
    named,
    page_buttons,
    recap,
    session_ids,
    session_label,
    session_name,
)
from kernel.commands.mcp import mcp_listing
from kernel.commands.memory import MemoryCommands
from kernel.commands.modes import mode_command
from kernel.commands.parts import KernelParts
from kernel.commands.profiles import profile_command
from kernel.commands.prompts import prompts_listing
from kernel.commands.reply import Button, Choice, Reply
from kernel.commands.status import ChannelReport, status_lines
from kernel.commands.tasks import tasks_command
from kernel.commands.usage import PERIOD_WORDS, render_report
from kernel.core.errors import KernelError, SessionError
from kernel.core.i18n import t
from kernel.core.oneline import one_line
from kernel.spend import build_report

if TYPE_CHECKING:
    from kernel.store.db import SessionRow

HISTORY_LISTING = 20  # /history shows the newest this many sessions
RESUME_CHOICES = 200  # a bare /resume offers the newest this many (a picker pages them)
KNOWN_NAMES = 1000  # names of sessions shown, kept to refuse a gone one by name
CALLBACK_BYTES = 64  # Telegram's limit for a button's data

# The commands ``Commands.run`` answers, in help order.
SHARED = (
    "new",
    "history",
    "resume",
    "retitle",
    "del_history",
    "provider",
    "model",
    "persona",
    "project",
    "prompts",
    "mode",
    "remember",
    "memory",
    "forget",
    "cancel",
    "status",
    "usage",
    "mcp",
    "undo",
    "retry",
    "rewind",
    "branches",
    "audit",
    "tasks",
)


Handler = Callable[[str, str], Awaitable[Reply]]


class Commands:
    def __init__(self, kernel: KernelParts, sender: UserInput | None = None) -> None:
        """``sender``: whom the channel's commands act for (None: the owner). A /retry's
        turn runs with its flags; its actor is named in every audit row a command writes
        (a sidecar caller's: ``api``, never asked to raise the owner's budget)."""
        self.kernel = kernel
        self.agent = kernel.agent
        self.sender = sender
        self.actor = actor_of(sender) if sender is not None else "owner"
        # session id → the name it was last shown by (a gone one is refused by name)
        self.known: dict[int, str] = {}
        self.memory_set = MemoryCommands(self.agent, kernel.memories, self.actor)
        # conversation → ids of its last /memory listing
        self.memories_listed = self.memory_set.listed
        self._handlers: dict[str, Handler] = {
            "new": self.new,
            "history": self.history,
            "resume": self.resume,
            "retitle": self.retitle,
            "del_history": self.del_history,
            "provider": self.provider,
            "model": self.model,
            "persona": lambda conversation, arg: profile_command(
                self.agent, conversation, "persona", arg
            ),
            "project": lambda conversation, arg: profile_command(
                self.agent, conversation, "project", arg
            ),
            "prompts": lambda conversation, arg: prompts_listing(self.agent),
            "mode": lambda conversation, arg: mode_command(self.agent, conversation, arg),
            "remember": self.memory_set.remember,
            "memory": self.memory_set.memory,
            "forget": self.memory_set.forget,
            "cancel": lambda conversation, arg: self.cancel(conversation),
            "status": lambda conversation, arg: self.status(conversation, arg=arg),
            "usage": self.usage,
            "mcp": lambda conversation, arg: self.mcp(),
            "undo": lambda conversation, arg: self.undo(conversation),
            "retry": lambda conversation, arg: self.retry(conversation),
            "rewind": self.rewind,
            "branches": lambda conversation, arg: branches_command(
                self.agent, conversation, arg, self.actor
            ),
            "audit": lambda conversation, arg: audit_command(self.agent, conversation, arg),
            "tasks": lambda conversation, arg: tasks_command(self.agent, arg),
        }

    async def run(self, conversation: str, name: str, arg: str) -> Reply | None:
        """Answer ``/name arg`` in ``conversation``; None when ``name`` is not a command
        of this set. A refusal the owner can act on is a Reply with ``error`` set."""
        handler = self._handlers.get(name)
        if handler is None:
            return None
        return await handler(conversation, arg.strip())

    # ----- sessions ---------------------------------------------------------------------

    async def new(self, conversation: str, arg: str = "") -> Reply:
        try:
            self.agent.sessions.new_session(conversation)
        except KernelError as exc:
            return Reply(str(exc), error=True)
        return Reply(t("session.new"))

    async def history(self, conversation: str, arg: str = "", *, pick: bool = False) -> Reply:
        """``/history [all] [project:NAME] [page]``: a Telegram chat's own sessions
        (``all``: every channel's), newest first, ``HISTORY_LISTING`` a page. ``pick``
        (a bare /resume): the same page, its sessions offered as choices."""
        try:
            query = history_query(arg)
        except KernelError as exc:
            return Reply(str(exc), error=True)
        agent = self.agent
        origin = None if query.every else Origin.of(conversation)
        total = await agent.sessions.count_sessions(query.project, origin)
        pages = max(1, -(-total // HISTORY_LISTING))
        page = min(query.page, pages)
        rows = await agent.sessions.list_sessions(
            HISTORY_LISTING, query.project, offset=(page - 1) * HISTORY_LISTING, origin=origin
        )
        if not rows:
            none = t("session.none_in_project", project=query.project) if query.project else None
            return Reply(none or t("session.none") + self._elsewhere(origin, total))
        first = await self._known(rows)
        header = t("session.list_header_paged", page=page, pages=pages) if pages > 1 else ""
        current = agent.sessions.current_session(conversation)
        text = format_history(
            rows,
            first,
            agent.local_now(),
            agent,
            current=current,
            header=header or t("session.list_header"),
        )
        if origin is not None and not query.project:
            text += await self._current_elsewhere(origin, current, page)
            text += await self._elsewhere_count(origin, total)
        if current is not None:
            branches, messages = await agent.control.branches(current)
            if branches:
                text += "\n" + t("conv.branches", branches=branches, messages=messages)
        if pick:
            return Reply(text, choices=await self._resume_choices(query, origin, current))
        return Reply(text, buttons=page_buttons(query, page, pages))

    async def _resume_choices(
        self, query: HistoryQuery, origin: Origin | None, current: int | None
    ) -> tuple[Choice, ...]:
        """A bare /resume's choices: the newest RESUME_CHOICES sessions the listing
        covers, not only its first page (a channel pages them)."""
        agent = self.agent
        rows = await agent.sessions.list_sessions(RESUME_CHOICES, query.project, origin=origin)
        first = await self._known(rows)
        now = agent.local_now()
        return tuple(
            Choice(
                f"#{row.id} {session_label(row, first.get(row.id, ''), now, agent)}",
                f"/resume #{row.id}",
                current=row.id == current,
            )
            for row in rows
        )

    async def _current_elsewhere(self, origin: Origin, current: int | None, page: int) -> str:
        """The chat's current session when another channel made it (resumed from
        ``/history all``): its line too, under the first page, so the mark is never lost."""
        row = await self.agent.sessions.listed(current) if current and page == 1 else None
        if row is None or origin.made(row):
            return ""
        first = await self._known([row])
        return "\n" + format_history(
            [row], first, self.agent.local_now(), self.agent, current=current, header=""
        ).lstrip("\n")

    async def _elsewhere_count(self, origin: Origin, total: int) -> str:
        return self._elsewhere(origin, await self.agent.sessions.count_sessions() - total)

    @staticmethod
    def _elsewhere(origin: Origin | None, others: int) -> str:
        """The hint that other channels' sessions exist (``/history all``)."""
        return "\n" + t("session.elsewhere", n=others) if origin and others > 0 else ""

    async def _known(self, rows: list[SessionRow]) -> dict[int, str]:
        """The sessions' first words; their names kept so that a number whose session is
        gone can be refused by name."""
        first = await self.agent.store.first_words([r.id for r in rows])
        for row in rows:
            self.known.pop(row.id, None)
            self.known[row.id] = session_name(row, first.get(row.id, ""))
        while len(self.known) > KNOWN_NAMES:
            del self.known[next(iter(self.known))]
        return first

    async def _resolve(self, text: str, *, single: bool = False) -> list[SessionRow]:
        """The sessions ``#n/#m`` names (``n``: a session's own number); a number whose
        session is gone (or never was) is refused, naming it."""
        if not text:
            raise SessionError(t("tg.need_ref"))
        ids = list(dict.fromkeys(session_ids(text)))
        if not ids or (single and len(ids) != 1):
            raise SessionError(t("session.bad_ref", ref=text))
        rows = []
        for session_id in ids:
            row = await self.agent.sessions.listed(session_id)
            if row is None:
                name = self.known.get(session_id)
                if name is None:
                    raise SessionError(t("session.not_found", id=f"#{session_id}"))
                raise SessionError(t("session.gone", name=named(session_id, name)))
            rows.append(row)
        await self._known(rows)
        return rows

    async def resume(self, conversation: str, arg: str) -> Reply:
        """A bare /resume lists the sessions as choices (a channel offers them as buttons)."""
        if not arg:
            return await self.history(conversation, pick=True)
        try:
            [found] = await self._resolve(arg, single=True)
            row = await self.agent.sessions.resume(conversation, found.id)
        except KernelError as exc:
            return Reply(str(exc), error=True)
        text = t("session.resumed", name=named(row.id, self.known[row.id]))
        last = await self.agent.store.load_messages(row.id, rounds=1)
        return Reply(text + recap(last))

    async def retitle(self, conversation: str, arg: str = "") -> Reply:
        """``/retitle [#n] [text]``: the text as the title; without one, the titles
        model's (it comes in ``follow_up``: title retries wait up to 78 s, which a
        channel must not spend ahead of the owner's next message, or /cancel)."""
        ref = re.match(r"#\d+(?=\s|$)", arg)
        title = one_line(arg[ref.end() :] if ref else arg, MAX_TITLE)
        try:
            if ref:
                [row] = await self._resolve(ref.group(), single=True)
                session_id = row.id
            else:
                current = self.agent.sessions.current_session(conversation)
                if current is None:
                    raise SessionError(t("tg.no_session"))
                session_id = current
            if title:
                await self.agent.sessions.retitle(session_id, title)
        except KernelError as exc:
            return Reply(str(exc), error=True)
        if title:
            self.known[session_id] = title
            return Reply(t("tg.retitled", title=title))
        if self.agent.titles is None:  # not an error: the owner can name it
            return Reply(t("session.retitle_by_hand"))

        async def generate() -> Reply:
            title = await self.agent.generate_title(session_id)
            if title:
                return Reply(t("tg.retitled", title=title))
            return Reply(t("tg.retitle_failed"), error=True)

        return Reply(follow_up=generate)

    async def del_history(self, conversation: str, arg: str = "") -> Reply:
        """``/del_history [#n/#m]`` (none: the current session) asks first, with
        buttons; ``… yes`` deletes at once (where there are no buttons)."""
        words = arg.split()
        confirmed = bool(words) and words[-1].lower() == CONFIRM
        refs = " ".join(words[:-1] if confirmed else words)
        try:
            if refs:
                rows = await self._resolve(refs)
            else:
                current = self.agent.sessions.current_session(conversation)
                if current is None:
                    raise SessionError(t("tg.no_session"))
                rows = await self._resolve(f"#{current}")
        except KernelError as exc:
            return Reply(str(exc), error=True)
        ids = [row.id for row in rows]
        if confirmed:
            return await self.delete_now(conversation, ids)
        data = DELETE + ",".join(map(str, ids))
        if len(data) > CALLBACK_BYTES:
            return Reply(t("session.delete_too_many"), error=True)
        which = ", ".join(named(i, self.known[i]) for i in ids)
        command = "/del_history " + "/".join(f"#{i}" for i in ids) + f" {CONFIRM}"
        yes = Button(t("session.delete_yes"), data, command)
        return Reply(
            t("session.delete_ask", which=which),
            buttons=(yes, Button(t("session.delete_no"), DELETE_NO)),
        )

    async def delete_now(self, conversation: str, ids: list[int]) -> Reply:
        """Delete these sessions (confirmed); any already gone refuses the whole."""
        try:
            rows = await self._resolve("/".join(f"#{i}" for i in ids))
            current = self.agent.sessions.current_session(conversation)
            await self.agent.sessions.delete_sessions([row.id for row in rows])
        except KernelError as exc:
            return Reply(str(exc), error=True)
        text = t("session.deleted", which=", ".join(named(r.id, self.known[r.id]) for r in rows))
        if current in ids:
            text += "\n" + t("session.deleted_current")
        return Reply(text)

    # ----- undo, retry, rewind (kernel.agent.rewind) ----------------------------------------

    async def undo(self, conversation: str) -> Reply:
        try:
            cut = await self.agent.control.undo(conversation, self.actor)
        except KernelError as exc:
            return Reply(str(exc), error=True)
        return Reply(t("conv.undone", count=cut.count))

    async def retry(self, conversation: str, template: UserInput | None = None) -> Reply:
        """The last exchange cut and its message run again: the Reply carries the turn
        (``template``: the channel's sender and flags; by default the command set's
        sender, else the owner in the conversation's channel, its prefix)."""
        if template is None:
            channel = conversation.partition(":")[0] or "console"
            template = self.sender or UserInput("", channel=channel)
        try:
            turn = await self.agent.retry(conversation, template)
        except KernelError as exc:
            return Reply(str(exc), error=True)
        return Reply(turn=turn)

    async def rewind(self, conversation: str, arg: str) -> Reply:
        """``/rewind N``: cut everything after the final answer stored as N (its
        ``sequence``); Telegram finds N from the answer the command replies to."""
        if not (arg.isascii() and arg.isdigit() and len(arg) <= 18):  # "²", 5000 digits
            return Reply(t("conv.rewind_need_reply"), error=True)
        try:
            cut = await self.agent.control.rewind(conversation, int(arg), self.actor)
        except KernelError as exc:
            return Reply(str(exc), error=True)
        return Reply(t("conv.rewound", count=cut.count))

    # ----- provider and model -------------------------------------------------------------

    async def provider(self, conversation: str, arg: str = "") -> Reply:
        agent = self.agent
        if not arg:
            available = agent.selection.available_providers
            text = t(
                "provider.current",
                name=agent.selection.provider_name,
                model=agent.selection.model,
                available=", ".join(available),
            )
            current = agent.selection.provider_name
            choices = tuple(Choice(p, f"/provider {p}", current=p == current) for p in available)
            return Reply(text, choices=choices)
        if arg == "auto":
            return await self._auto()
        try:
            model = await agent.selection.set_provider(arg)
        except KernelError as exc:
            return Reply(str(exc), error=True)
        await self._picked()
        return Reply(t("provider.switched", name=arg, model=model))

    async def model(self, conversation: str, arg: str = "") -> Reply:
        agent = self.agent
        if not arg:
            models = agent.selection.models
            text = t("model.current", model=agent.selection.model, models=", ".join(models))
            text += "\n" + t(
                "routing.pick_in_force" if agent.selection.chosen else "routing.pick_auto"
            )
            choices = [Choice(m, f"/model {m}", current=m == agent.selection.model) for m in models]
            if agent.selection.chosen:
                choices.append(Choice("auto", "/model auto"))
            return Reply(text, choices=tuple(choices))
        if arg == "auto":
            return await self._auto()
        try:
            await agent.selection.set_model(arg)
        except KernelError as exc:
            return Reply(str(exc), error=True)
        await self._picked()
        return Reply(t("model.switched", model=arg))

    async def _picked(self) -> None:
        """The active model changed: the setting's names in the audit trail."""
        keys = ["active.model", "active.provider"]
        await self.agent.audit.record(
            kinds.CONFIG_CHANGED, actor=self.actor, sections=["active"], keys=keys
        )

    async def _auto(self) -> Reply:
        """``/model auto`` (``/provider auto``): forget the owner's pick."""
        agent = self.agent
        await agent.selection.clear_choice()
        await self._picked()
        return Reply(
            t("routing.auto", provider=agent.selection.provider_name, model=agent.selection.model)
        )

    # ----- memory (kernel/commands/memory.py) -----------------------------------------

    async def memory_press(self, conversation: str, data: str) -> Reply:
        """A button under /memory or a memory (``mem:…``)."""
        return await self.memory_set.press(conversation, data)

    # ----- control ------------------------------------------------------------------------

    async def cancel(self, conversation: str, stop: Callable[[], bool] | None = None) -> Reply:
        """``stop``: how the channel stops what runs for the conversation (by default
        the agent's turn); a delegated CLI it stopped with it is named."""
        running = self.kernel.delegator.current(conversation)
        cancelled = stop() if stop is not None else self.agent.sessions.cancel(conversation)
        if not cancelled:
            return Reply(t("tg.nothing_to_cancel"))
        if running is not None and not running.done:
            return Reply(t("tg.cancelled_cli", cli=running.cli))
        return Reply(t("turn.cancelled"))

    async def status(
        self, conversation: str, channel: ChannelReport | None = None, arg: str = ""
    ) -> Reply:
        """``/status``: the owner's six lines; ``/status full``: the operator's view.
        ``channel``: the channel's own state (dropped updates, uptime, …, its problems)."""
        full = arg.strip().casefold()
        if full not in ("", "full"):
            return Reply(t("status.usage"), error=True)
        lines = await status_lines(
            self.kernel,
            conversation,
            channel or ChannelReport(),
            full=full == "full",
        )
        return Reply("\n".join(lines))

    async def usage(self, conversation: str, arg: str = "") -> Reply:
        """What was spent today, this week and this month; ``arg`` (today, week, month)
        picks the period whose groups are shown (the month by default)."""
        period = PERIOD_WORDS.get(arg.lower(), None) if arg else "month"
        if period is None:
            return Reply(t("usage.bad_period", got=arg), error=True)
        jobs = self.kernel.cron.jobs

        def job_name(job_id: str) -> str | None:
            job = jobs.get(job_id)
            return job.spec.name if job is not None else None

        report = await build_report(self.agent.meter, job_name)
        return Reply(render_report(report, period))

    async def mcp(self) -> Reply:
        """The MCP servers: state and tools offered (and any listed but not offered)."""
        return mcp_listing(self.kernel.mcp.status())
