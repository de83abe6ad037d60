"""The Telegram channel: python-telegram-bot's Application inside Kernel's own loop.

Started by hand (initialize → start_polling → start; the reverse on stop) with explicit
``allowed_updates``. What arrived while Kernel was down is kept and offered to the owner,
and turns a crash cut off are told (``mailroom.py``), before anything new is handled.
Updates are handled one at a time in order; a message starts a turn whose presentation
runs as a tracked task, so ``/cancel`` and ``/status`` are never stuck behind a running
reply. The bot and the polling watchdog are in ``polling.py``.
"""

from __future__ import annotations

import os

# Opt in to PTB's future timedelta durations now: in 22.x reading an int duration (e.g.
# inside RetryAfter's own constructor on every 429) emits a deprecation warning.
os.environ.setdefault("PTB_TIMEDELTA", "true")

import logging
import time
from collections import Counter
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

from telegram import BotCommand, Message, Update
from telegram.error import InvalidToken, NetworkError, TelegramError
from telegram.ext import (
    Application,
    ApplicationBuilder,
    ApplicationHandlerStop,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    TypeHandler,
    filters,
)

from kernel.agent.agent import UserInput
from kernel.commands import MENU
from kernel.commands.listing import DELETE_PATTERN, HISTORY_PATTERN
from kernel.commands.memory import PATTERN as MEMORY_PATTERN
from kernel.commands.status import ChannelReport
from kernel.core.backoff import Backoff, Retrying
from kernel.core.errors import KernelError, StartupError
from kernel.core.i18n import t
from kernel.core.status import ChannelState
from kernel.core.tasks import TaskSet
from kernel.store.mailbox import Mailbox
from kernel.telegram.asks import AskBoard
from kernel.telegram.budget import REAL_PACE, Pace, RateBudget
from kernel.telegram.busy import BusyDesk
from kernel.telegram.commands import (
    COMMANDS,
    RETRY_PATTERN,
    CommandSet,
    channel_problems,
    mailbox_lines,
)
from kernel.telegram.deps import Deps, Lifetime, TelegramServices, Views, conversation_of
from kernel.telegram.download import FileRequest
from kernel.telegram.files import PATTERN as FILE_PATTERN
from kernel.telegram.files import Files
from kernel.telegram.inbound import Inbound
from kernel.telegram.mailroom import CALLBACK_PATTERN, Check, Mailroom
from kernel.telegram.outbox import CHANNEL, Outbox
from kernel.telegram.outlet import TelegramAsker, TelegramOutlet
from kernel.telegram.picker import PATTERN as PICK_PATTERN
from kernel.telegram.polling import PollingBot, PollWatch, Unreadable, poll_request
from kernel.telegram.tasks import PATTERN as TASK_PATTERN
from kernel.telegram.tasks import TaskTeller
from kernel.telegram.topic_desk import TopicDesk
from kernel.telegram.topics import Lanes, is_topic

log = logging.getLogger(__name__)

SKILL_PREFIX = r"^/skill/"  # a message invoking a skill, not a command
TEMPLATE_PREFIX = r"^\s*/prompts:"  # a message filling in a prompt template, not /prompts
ALLOWED_UPDATES = ["message", "edited_message", "callback_query", "channel_post"]
Context = ContextTypes.DEFAULT_TYPE
UNDELIVERED_DEGRADED = 300.0  # seconds a message may wait undelivered before /healthz says so
# An unreachable Bot API at start is tried again after 1 s, doubling to a minute.
START_BACKOFF = Backoff(first=1.0, cap=60.0)


class TelegramChannel:
    name = "telegram"

    def __init__(self, services: TelegramServices, *, pace: Pace = REAL_PACE) -> None:
        """``pace``: the clock the chat's rate budget paces calls by; the real one unless
        given (the chat tests compress its waits, tests/clock.py ``WarpPace``)."""
        self.services = services
        cfg = services.config.telegram
        self.cfg = cfg
        self.owner = cfg.allowed_user
        self.dropped: Counter[str] = Counter()
        self.started_at = time.monotonic()
        self._watchdog = TaskSet("telegram watchdog")
        self._teller: TaskTeller | None = None  # attached to the agent's tasks while running
        self._told_update: object = None  # the update whose failure was told last
        polls = poll_request()
        lanes = Lanes(cfg.allowed_user)  # the owner's topics (``topics.py``)
        bot = PollingBot(
            cfg.token,
            base_url=f"{cfg.api_base}/bot",
            base_file_url=f"{cfg.api_base}/file/bot",
            # PTB's builder default; files are read from it in chunks (download.py), and
            # a lone surrogate in an update or a send is mended (mending.py)
            request=FileRequest(connection_pool_size=256),
            get_updates_request=polls,
            rate_limiter=RateBudget(
                max_retries=cfg.max_retries_429, clock=pace.monotonic, sleep=pace.sleep
            ),
            clock=services.clock,
            lanes=lanes,
        )
        self.bot = bot
        self.app: Application[Any, Any, Any, Any, Any, Any] = (
            ApplicationBuilder().bot(bot).concurrent_updates(False).build()
        )
        self.poller = PollWatch(
            self.app,
            bot,
            polls,
            poll_timeout=cfg.poll_timeout,
            limit=cfg.watchdog_seconds,
            allowed_updates=ALLOWED_UPDATES,
        )
        self.outbox = Outbox(
            Mailbox(services.store),
            bot,
            expiry=timedelta(hours=cfg.delivery_expiry_hours),
            clock=services.clock,
            tz=ZoneInfo(services.config.general.timezone),
            audit=services.audit,
        )
        self.board = AskBoard(bot, self.outbox, services.agent.asks)
        self.life = Lifetime(self.outbox, self.owner)
        self._tasks = self.life.tasks  # replies, commands: awaited at stop
        deps = Deps(
            services,
            cfg,
            services.clock,
            self.app,
            bot,
            self.outbox,
            self.board,
            self.life,
            Views(services.agent),
        )
        self.deps = deps
        self.mailroom = Mailroom(deps)
        self.files = Files(deps, self.mailroom)  # /files and the owner's downloads
        desk = BusyDesk(deps, self.mailroom.holds)  # a message while the chat is busy
        self.topics = TopicDesk(deps)  # the owner's topics as sessions
        self.inbound = Inbound(deps, self.files, desk, self.topics)
        self.mailroom.serve(self.inbound.handle)  # the mailroom applies what it returns
        self.commands = CommandSet(deps, self.inbound, self.mailroom, self.files, self.report)
        bot.poll_listeners.append(self.mailroom.poll_starting)
        bot.recovery_listeners.append(self.outbox.nudge)
        self._register()
        services.status_board.add(self)
        # Questions of unwatched turns come here; deliveries (cron results) once it runs.
        services.channel_registry.asker = TelegramAsker(deps, self.topics)

    @property
    def running(self) -> bool:
        return self.life.running

    @property
    def stopping(self) -> bool:
        return self.life.stopping

    @property
    def poll_restarts(self) -> int:
        return self.poller.restarts

    async def status(self) -> ChannelState:
        """For /healthz and /status: polling's state, the inbox (turns open, messages
        waiting for the owner's decision) and the outbox (messages not yet delivered,
        the oldest one's age). Degraded too while a message waits undelivered for more
        than ``UNDELIVERED_DEGRADED`` seconds."""
        state = self.polling_state()
        detail = dict(state.detail)
        try:
            box = await self.outbox.mailbox.inbox_counts(CHANNEL)
        except KernelError as exc:  # the database's own state is /healthz's database part
            log.warning("reading the mailbox for the status failed: %s", type(exc).__name__)
            return state
        outbox = self.outbox.stats()
        detail["inbox"] = {"open_turns": box.open_turns, "waiting": box.waiting_updates}
        detail["outbox"] = outbox
        late = outbox["undelivered"] and (
            outbox["oldest_undelivered_seconds"] >= UNDELIVERED_DEGRADED
        )
        name = "degraded" if state.state == "running" and late else state.state
        return ChannelState(self.name, name, detail)

    async def report(self, own_row: int) -> ChannelReport:
        """The channel's part of /status: dropped updates, uptime, the mailbox and
        polling, and the chat's problems (``own_row``: the asking command's open row)."""
        dropped = self.dropped
        state = await self.status()
        lines = [
            t(
                "tg.status_dropped",
                stranger=dropped["stranger"],
                group=dropped["group"],
                edited=dropped["edited"],
                channel=dropped["channel"],
            ),
            t(
                "tg.status_uptime",
                minutes=int((time.monotonic() - self.started_at) // 60),
                restarts=self.poll_restarts,
            ),
            *mailbox_lines(state.detail, own_row),
            self.topics.status(),
        ]
        problems = channel_problems(self.polling_state().state, state.state, state.detail)
        return ChannelReport(lines, problems)

    def polling_state(self) -> ChannelState:
        """Polling alone: running, degraded (no getUpdates answered within the watchdog
        limit, or updates waiting and none consumed), starting or stopped."""
        updater = self.app.updater
        polling = bool(updater and updater.running)
        detail = {
            "polling": polling,
            **self.poller.detail(),
            "dropped_updates": sum(self.dropped.values()),
        }
        if self.stopping:
            state = "stopped"
        elif not self.life.started:
            state = "starting"
        elif polling and not self.poller.degraded():
            state = "running"
        else:
            state = "degraded"
        return ChannelState(self.name, state, detail)

    # ----- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, register commands, poll. An unreachable Bot API is waited for (a
        service often starts before the network); a rejected token is a refusal."""
        retrying = Retrying(START_BACKOFF, self.services.clock)
        while True:
            try:
                await self.app.initialize()
                break
            except InvalidToken:
                raise StartupError(t("tg.bad_token", api_base=self.cfg.api_base)) from None
            except NetworkError as exc:
                delay = retrying.failed()
                log.warning(
                    "Bot API unreachable (%s); retrying in %.0fs", type(exc).__name__, delay
                )
                await retrying.clock.sleep(delay)
        await self.outbox.start()  # what a previous run left queued goes first
        commands = [BotCommand(name, t(f"tg.cmd.{name}")) for name in MENU]
        try:
            await self.app.bot.set_my_commands(commands)
        except TelegramError as exc:  # the menu is a convenience; the bot works without it
            log.warning("setMyCommands failed: %s", type(exc).__name__)
        await self.outbox.live_retry.restore(self.outbox.mailbox, self.owner)  # the 🔁
        await self.mailroom.recover()  # turns cut off last time; then what waited
        await self._start_polling()
        await self.app.start()
        self._watchdog.spawn(self.poller.watch(), "telegram-watchdog")
        self.life.started = True
        # Deliveries waiting for Telegram (a missed cron run fired at start) go now.
        self.services.channel_registry.attach(TelegramOutlet(self.deps, self.topics))
        self._teller = TaskTeller(self.deps)  # background tasks' results, the restart's offer
        self.services.agent.tasks.attach(self._teller)
        if self.topics.on:  # the agent may open a topic (``topic_tool.py``)
            from kernel.telegram import topic_tool

            topic_tool.register(self.services.agent.tools, self.topics, self._start_in_topic)
        log.info("telegram channel started (api_base=%s)", self.cfg.api_base)

    async def _start_in_topic(self, lane: int, text: str) -> None:
        """A turn the agent starts in a topic it opened, as if the owner wrote ``text``."""
        outcome = await self.inbound.start(lane, UserInput(text, channel="telegram"))
        await self.mailroom.apply(lane, None, outcome)

    async def stop(self) -> None:
        await self._watchdog.close()
        self.life.stopping = True  # the gate refuses new work; views say "interrupted"
        registry = self.services.channel_registry
        registry.detach(self.name)
        if self._teller is not None:
            self.services.agent.tasks.detach(self._teller)
        if isinstance(registry.asker, TelegramAsker):
            registry.asker = None
        if self.app.updater and self.app.updater.running:
            await self.app.updater.stop()
        # Running turns stop now (their history is kept) and their views tell the owner;
        # a reply already being delivered gets a bounded chance to finish.
        self.services.agent.sessions.cancel(conversation_of(self.owner))
        for lane in list(self.deps.views.tasks):  # and every topic's
            if is_topic(lane):
                self.services.agent.sessions.cancel(conversation_of(lane))
        self.services.agent.tools.unregister("open_topic")
        shutdown_timeout = self.services.config.general.shutdown_timeout
        await self._tasks.wait(shutdown_timeout)
        await self._tasks.close(1.0)
        await self.board.stop()  # the closing edits of questions the stop ended
        await self.inbound.voice.aclose()
        await self.outbox.stop(drain=min(shutdown_timeout, 5.0))
        if self.app.running:
            await self.app.stop()
        await self.app.shutdown()
        log.info("telegram channel stopped")

    async def _start_polling(self) -> None:
        """Nothing is dropped: what arrived while Kernel was down is recorded waiting and
        the owner decides (``mailroom.py``)."""
        await self.poller.start()

    # ----- routing ---------------------------------------------------------------------

    def _register(self) -> None:
        self.app.add_handler(TypeHandler(Update, self._gate), group=-1)
        template = filters.Regex(TEMPLATE_PREFIX)
        for name in COMMANDS:
            handler = getattr(self.commands, name)
            self.app.add_handler(CommandHandler(name, handler, filters=~template))
        self.app.add_handler(TypeHandler(Check, self.mailroom.on_check))
        pattern = CALLBACK_PATTERN
        self.app.add_handler(CallbackQueryHandler(self.mailroom.on_press, pattern=pattern))
        retry = CallbackQueryHandler(self.commands.on_retry, pattern=RETRY_PATTERN)
        self.app.add_handler(retry)
        self.app.add_handler(CallbackQueryHandler(self.files.on_press, pattern=FILE_PATTERN))
        pick = CallbackQueryHandler(self.commands.picker.on_press, pattern=PICK_PATTERN)
        self.app.add_handler(pick)
        pages = CallbackQueryHandler(self.commands.on_history, pattern=HISTORY_PATTERN)
        self.app.add_handler(pages)
        deleting = CallbackQueryHandler(self.commands.on_delete, pattern=DELETE_PATTERN)
        self.app.add_handler(deleting)
        tasks = CallbackQueryHandler(self.commands.on_task, pattern=TASK_PATTERN)
        self.app.add_handler(tasks)
        memory = CallbackQueryHandler(self.commands.on_memory, pattern=MEMORY_PATTERN)
        self.app.add_handler(memory)
        self.app.add_handler(CallbackQueryHandler(self.board.on_press))
        # "/skill/<name> …" and "/prompts:<name> …" start like commands but are messages
        # (the agent injects the skill, fills in the template), so they go to the inbound
        # handler like any text.
        skill = filters.Regex(SKILL_PREFIX)
        unknown = filters.COMMAND & ~skill & ~template
        self.app.add_handler(MessageHandler(unknown, self.commands.unknown))
        self.app.add_handler(MessageHandler(filters.ALL, self.mailroom.on_message))
        self.app.add_handler(TypeHandler(Update, self.mailroom.after), group=1)
        self.app.add_error_handler(self._on_error)

    async def _on_error(self, update: object, context: Context) -> None:
        """A handler failed: log it (redacted by the formatter) and tell the owner."""
        error = context.error
        log.error("handling an update failed: %s", type(error).__name__, exc_info=error)
        await self.mailroom.failed(update)
        chat = update.effective_chat if isinstance(update, Update) else None
        if chat is None or chat.id != self.owner:
            return
        if update is self._told_update:
            return  # a later handler of the same update failed too: told once
        self._told_update = update
        await self.life.tell_owner(error)

    async def _gate(self, update: Update, context: Context) -> None:
        """Only the owner's private chat gets through; the rest is dropped and counted.
        The owner's updates are on record before they are handled (``mailroom.py``)."""
        _forget_persistence_marks(self.app)
        reason = self._reject_reason(update)
        if reason == "edited" and self._owners_private(update.edited_message):
            await self.mailroom.edited(update)
        unreadable = self.bot.unreadable.pop(update.update_id, None)
        if reason == "other" and unreadable is not None and self._owners(unreadable):
            await self.mailroom.unreadable(update, unreadable.what)
            raise ApplicationHandlerStop
        if reason == "topic" and update.message is not None:  # its name, for notices
            self.topics.seen(update.message)
        if reason:
            self.dropped[reason] += 1
            self.mailroom.refused(update)
            raise ApplicationHandlerStop
        if not await self.mailroom.admit(update):
            raise ApplicationHandlerStop

    def _owners(self, unreadable: Unreadable) -> bool:
        sent = (unreadable.user_id, unreadable.chat_id)
        return unreadable.private and sent == (self.owner, self.owner)

    def _owners_private(self, message: Message | None) -> bool:
        return (
            message is not None
            and message.chat.type == "private"
            and message.from_user is not None
            and message.from_user.id == self.owner
        )

    def _reject_reason(self, update: Update) -> str:
        if update.edited_message or update.edited_channel_post:
            return "edited"
        if update.channel_post:
            return "channel"
        if update.callback_query:
            return "" if update.callback_query.from_user.id == self.owner else "stranger"
        message = update.message
        if message is None:
            return "other"
        if message.chat.type != "private":
            return "group"
        if not self._owners_private(message):
            return "stranger"
        return "topic" if message.forum_topic_created or message.forum_topic_edited else ""


# python-telegram-bot 22's Application marks each update's chat and user for a
# persistence Kernel does not have, and only a persistence clears the marks: kept, every
# stranger's, group's and channel's id would stay for the process's life. Private names:
# a release that renames them leaves the gate working (nothing is cleared, and
# tests/telegram/test_bounded_state.py fails, saying so).
_PERSISTENCE_MARKS = (
    "_chat_ids_to_be_updated_in_persistence",
    "_user_ids_to_be_updated_in_persistence",
)


def _forget_persistence_marks(app: object) -> None:
    for name in _PERSISTENCE_MARKS:
        marks = getattr(app, name, None)
        if isinstance(marks, set):
            marks.clear()
