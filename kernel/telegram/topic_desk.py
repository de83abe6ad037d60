"""The owner's topics as sessions (issue 41; the lanes themselves: ``topics.py``).

- ``/new <title>`` in a chat with topics opens a topic named after the text, and the
  conversation moves there: the topic's first message starts a fresh session.
- ``/resume #n`` opens the session's topic (one is made when it has none, named after
  the session) and resumes it there.
- Each session that ran in a topic says which in its meta (``telegram_topic``), kept
  across restarts: ``/history`` marks it, ``/resume`` finds the topic again.
- ``telegram.max_parallel_turns`` caps the turns running at once across topics; a
  message over the cap is told which topics are running, and sent again by the owner.

Topics are on when ``getMe`` says ``has_topics_enabled`` (the bot's threaded mode, set
in @BotFather); without them every command behaves as before.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from telegram import Message
from telegram.constants import ChatAction
from telegram.error import BadRequest, TelegramError

from kernel.core.delivery import TOPIC_META
from kernel.core.i18n import t
from kernel.telegram.deps import Deps, conversation_of
from kernel.telegram.outbox import plain_items
from kernel.telegram.topics import TOPIC_BASE, is_topic, thread_of, topic_gone

if TYPE_CHECKING:
    from kernel.store.sessions import SessionRow

log = logging.getLogger(__name__)

META = TOPIC_META  # a session's topic (its message_thread_id) in the session's meta
MAX_NAME = 128  # Telegram's longest topic name
LOOKBACK = 200  # recent sessions looked through for a topic's, after a restart
PROACTIVE = "telegram.proactive_topic"  # setting: "<thread>:<name>" of the topic opened


class TopicDesk:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.names: dict[int, str] = {}  # lane → the topic's name, as seen since start
        self._recorded: set[int] = set()  # sessions whose topic is in their meta

    @property
    def on(self) -> bool:
        """The bot's private chats have topics (getMe's ``has_topics_enabled``)."""
        try:
            return bool(self.deps.bot.bot.has_topics_enabled)
        except RuntimeError:  # not initialised yet
            return False

    def seen(self, message: Message) -> None:
        """A topic's service message (created or renamed): its name, for notices."""
        made = message.forum_topic_created or message.forum_topic_edited
        name = getattr(made, "name", None)
        if name and is_topic(message.chat.id):
            self.names[message.chat.id] = name

    def name(self, lane: int) -> str:
        thread = thread_of(lane)
        if thread is None:
            return t("tg.topic_general")
        return self.names.get(lane) or f"#{thread}"

    async def open(self, title: str) -> int:
        """Open a topic named ``title`` in the owner's chat; its lane."""
        name = " ".join(title.split())[:MAX_NAME] or t("tg.topic_untitled")
        topic = await self.deps.bot.create_forum_topic(self.deps.owner, name)
        lane = TOPIC_BASE + topic.message_thread_id
        self.names[lane] = name
        return lane

    async def new(self, chat: int, title: str) -> str:
        """``/new <title>``: a topic for a fresh session; the words to answer ``chat``."""
        try:
            lane = await self.open(title)
        except TelegramError as exc:
            log.warning("opening a topic failed: %s", type(exc).__name__)
            return t("tg.topic_open_failed")
        self.deps.agent.sessions.new_session(conversation_of(lane))
        await self.deps.outbox.put(lane, plain_items(t("tg.topic_here", title=self.name(lane))))
        return t("tg.topic_opened", title=self.name(lane))

    async def topic_of(self, row: SessionRow) -> int:
        """``/resume #n``: the session's topic's lane; a topic named after the session
        is opened when it has none, or when the owner deleted or closed its topic."""
        thread = row.meta.get(META)
        if isinstance(thread, int) and thread > 0 and await self._alive(TOPIC_BASE + thread):
            return TOPIC_BASE + thread
        lane = await self.open(row.title or f"#{row.id}")
        self._recorded.discard(row.id)  # its topic is the new one now
        await self.record(lane, row.id)
        return lane

    async def _alive(self, lane: int) -> bool:
        """The topic is not known deleted or closed (Telegram tells a bot of no deletion:
        a chat action, which leaves nothing in the chat, finds out; when Telegram cannot
        be asked now, the outbox retries there)."""
        try:
            await self.deps.bot.send_chat_action(lane, ChatAction.TYPING)
        except BadRequest as exc:
            return not topic_gone(exc)
        except TelegramError:
            return True
        return True

    def resumed(self, lane: int) -> str:
        return t("tg.topic_resumed", title=self.name(lane))

    async def record(self, lane: int, session_id: int | None) -> None:
        """A turn ran in a topic: its session keeps the topic (once per session)."""
        thread = thread_of(lane)
        if thread is None or session_id is None or session_id in self._recorded:
            return
        self._recorded.add(session_id)
        try:
            await self.deps.agent.store.merge_meta(session_id, {META: thread})
        except Exception as exc:  # a mark only: the topic still works without it
            log.warning("recording a session's topic failed: %s", type(exc).__name__)

    async def session_of(self, lane: int) -> int | None:
        """The session that ran last in the topic (among the recent ones), if any."""
        thread = thread_of(lane)
        try:
            rows = await self.deps.agent.store.list_sessions(limit=LOOKBACK, channel="telegram")
        except Exception as exc:  # the topic then starts a session of its own
            log.warning("finding a topic's session failed: %s", type(exc).__name__)
            return None
        return next((row.id for row in rows if row.meta.get(META) == thread), None)

    async def proactive(self) -> int:
        """Where a delivery that names no topic goes: the topic ``proactive_topic``
        names (opened on first use and again once the owner deleted it, its thread kept
        in the settings), else General."""
        name, owner = self.deps.cfg.proactive_topic.strip(), self.deps.owner
        if not name or not self.on:
            return owner
        store = self.deps.agent.store
        try:
            kept = await store.get_setting(PROACTIVE)
            if kept and kept.partition(":")[2] == name:  # "<thread>:<name>"
                lane = TOPIC_BASE + int(kept.partition(":")[0])
                if await self._alive(lane):  # else the owner deleted it: a new one
                    return lane
            lane = await self.open(name)
            await store.set_setting(PROACTIVE, f"{thread_of(lane)}:{name}")
        except (TelegramError, ValueError) as exc:  # General, as without the setting
            log.warning("the proactive topic is unavailable: %s", type(exc).__name__)
            return owner
        return lane

    def status(self) -> str:
        """/status full's line: whether topics are on, and which run now."""
        if not self.on:
            return t("tg.status_topics_off")
        views = self.deps.views
        running = [self.name(lane) for lane in sorted(views.tasks) if views.busy(lane)]
        limit = self.deps.cfg.max_parallel_turns
        return t("tg.status_topics_on", running=", ".join(running) or "-", limit=limit)

    def over_cap(self, lane: int) -> str | None:
        """The notice for a message that would run one turn too many across topics."""
        views = self.deps.views
        running = [other for other in views.tasks if other != lane and views.busy(other)]
        limit = self.deps.cfg.max_parallel_turns
        if len(running) < limit:
            return None
        names = ", ".join(self.name(other) for other in sorted(running))
        return t("tg.topics_busy", limit=limit, topics=names)
