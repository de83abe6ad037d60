"""The agent: the one facade every channel and adapter uses (SPEC §4).

A channel calls :meth:`Agent.start_turn` with a conversation key (``"telegram:42"``,
``"console:default"``) and iterates the returned :class:`Turn` for events. The work is
done by the agent package's parts, one idea each, and the parts are handed out as they
are (no method here re-exports theirs): ``agent.selection``
(:mod:`~kernel.agent.models`: which provider and model answer), ``agent.sessions``
(:mod:`~kernel.agent.sessions`: conversations, sessions, busy, waiting, cancel),
``agent.control`` (:mod:`~kernel.agent.rewind`: undo, rewind, branches),
``agent.scopes`` (:mod:`~kernel.agent.scope`: personas, projects, prompt modes),
``agent.modes`` (:mod:`~kernel.agent.session_modes`: act, plan, read_only),
``agent.prompt`` (:mod:`~kernel.agent.prompt`: the system layers) and ``agent.meter``
(spend). This module wires them and keeps what is the agent's own: turns
(:mod:`~kernel.agent.turn`), /retry, titles and model calls outside a turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from kernel.agent import task_tools
from kernel.agent.background import TOOLS, BackgroundTasks
from kernel.agent.fact_judge import FactJudge, audit_changes
from kernel.agent.models import MODEL_OVERRIDE, ModelSelection, ProviderFactory, SelectionError
from kernel.agent.prompt import SystemPrompt
from kernel.agent.rewind import ConversationControl
from kernel.agent.scope import Scopes
from kernel.agent.session_modes import SessionModes
from kernel.agent.sessions import OpenedSession, SessionKey, Sessions
from kernel.agent.subagents import SubAgents
from kernel.agent.titles import TitleMaker
from kernel.agent.trail import Trail
from kernel.agent.turn import TurnRun
from kernel.agent.turn_parts import TurnParts, UserInput
from kernel.audit import AuditLog
from kernel.config import Config
from kernel.core.asks import AskRegistry
from kernel.core.events import Completed
from kernel.core.provider import ChatRequest, Sleep, StreamEvent
from kernel.core.tasks import TaskSet
from kernel.core.turns import Turn
from kernel.memory.memories import Memories
from kernel.profiles import Profiles
from kernel.profiles.presets import install_shipped
from kernel.routing import Health, Router
from kernel.skills import SkillLibrary
from kernel.spend import CallTag, Meter
from kernel.spend.meter import OWNER_CHANNELS
from kernel.store.db import Store
from kernel.store.decisions import DecisionStore
from kernel.tools.registry import ToolRegistry

__all__ = [
    "MODEL_OVERRIDE",
    "SKILLS_FOLDER",
    "Agent",
    "OpenedSession",
    "ProviderFactory",
    "SelectionError",
    "SessionKey",
    "UserInput",
]

SKILLS_FOLDER = "skills"  # beside config.toml
# /retry runs again what the owner sent (photos included) in this many of the most
# recently answered conversations; an older one retries its message as stored.
RECENT_INPUTS = 32

log = logging.getLogger(__name__)


class Agent:
    def __init__(
        self,
        config: Config,
        store: Store,
        tools: ToolRegistry,
        provider_factory: ProviderFactory,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], datetime] | None = None,
        titles: TitleMaker | None = None,
        memories: Memories | None = None,
        skills: SkillLibrary | None = None,
        meter: Meter | None = None,
        health: Health | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        self.config = config
        self.store = store
        # What the agent did, appended in order with hash chains (issue 23).
        self.audit = audit or AuditLog(store)
        self.memories = memories or Memories(store, config.data_dir / "cache")
        self.skills = skills or SkillLibrary(config.base_dir / SKILLS_FOLDER)
        self.tools = tools
        self.titles = titles
        self.tz = ZoneInfo(config.general.timezone)
        self.asks = AskRegistry()
        self.last_error: str = ""
        self.background = TaskSet("agent")  # titles, provider warm-up and closes
        self._turns = TaskSet("agent-turns")
        self.sessions = Sessions(store)
        self.control = ConversationControl(self.sessions, store, self.audit)
        # conversation → (stored id, input) of its last turn's message, for /retry; the
        # RECENT_INPUTS most recent (each sidecar chat is a conversation of its own)
        self._inputs: OrderedDict[str, tuple[int, UserInput]] = OrderedDict()
        self.selection = ModelSelection(
            config,
            store,
            provider_factory,
            tasks=self.background,
            running=self._turns.running,
            sleep=sleep,
        )
        now = clock or (lambda: datetime.now(UTC))
        self.profiles = Profiles.beside(config.base_dir)
        self.scopes = Scopes(config, store, self.sessions, self.profiles)
        # act, plan or read_only per session, and the model's control tools (issue 38)
        self.modes = SessionModes(config, store, self.sessions, self.audit)
        self.modes.register(tools)
        self.prompt = SystemPrompt(
            config, tools, self.memories, self.skills, now, self.tz, self.profiles
        )
        # Every model call goes through the meter: the budget before, the ledger after.
        self.meter = meter or Meter(config, store, clock=now, tz=self.tz)
        self.meter.on_call = Trail(self.audit).model_call  # one audit row per model call
        # Facts that change (issue 39): judged by the titles model, audited.
        self.memories.judge = FactJudge(lambda: self.titles, self.meter)
        self.memories.changed = audit_changes(self.audit)
        # Failover (issue 17): which providers may be called, which models a turn tries,
        # and the log of what was chosen.
        self.health = health or Health(config.routing)
        self.router = Router(config, self.health)
        self.decisions = DecisionStore(store)
        self.selection.on_change = self.health.config_changed
        self.selection.on_pick = self.health.unstick_all
        # What a turn works with (a sub-agent's run builds its own TurnRun with it).
        self.turn_parts = TurnParts(
            config=config,
            store=store,
            tools=tools,
            memories=self.memories,
            skills=self.skills,
            models=self.selection,
            prompt=self.prompt,
            asks=self.asks,
            sleep=sleep,
            meter=self.meter,
            router=self.router,
            decisions=self.decisions,
            clock=now,
            scopes=self.scopes,
            modes=self.modes,
            audit=self.audit,
        )
        self._sleep = sleep
        # delegate_task (kernel.agent.subagents)
        self.subagents = SubAgents(self.turn_parts, self.profiles.agents, self.background)
        # Background tasks (issue 38): a sub-agent's or a CLI's job beside the chat.
        self.tasks = BackgroundTasks(store, tools, self.asks)
        self.tasks.agents = lambda: self.subagents.names
        task_tools.register(tools, self.tasks, self._tasks_offered)

    # ----- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Restore the saved provider/model (falling back to the defaults), and build
        the active model's fallbacks' clients in the background: a failover then
        waits for no SDK import."""
        await self.selection.restore()
        await self.tasks.start()
        await asyncio.to_thread(self._ship_files)
        self.background.spawn(self._warm_fallbacks(), "fallbacks-warm-up")

    def _ship_files(self) -> None:
        """Blocking: the shipped SOUL.md brought up to date when the owner never edited
        it, and the preset personas installed (``kernel/profiles/presets.py``)."""
        self.prompt.update_shipped_soul()
        if self.config.general.preset_personas:
            folder, language = self.profiles.personas.folder, self.config.general.language
            install_shipped(folder, language)

    async def _warm_fallbacks(self) -> None:
        active = (self.selection.provider_name, self.selection.model)
        for provider, _ in self.router.fallbacks_of(*active):
            if provider in self.config.enabled_providers and provider != active[0]:
                try:
                    await self.selection.provider(provider)
                except Exception as exc:  # a failover builds it again and reports it
                    log.warning("building fallback %s failed: %s", provider, type(exc).__name__)

    async def stop(self) -> None:
        """Cancel running turns (they persist what they have), then close providers."""
        timeout = self.config.general.shutdown_timeout
        for turn in self.sessions.running_turns():
            turn.cancel()
        await self._turns.wait(timeout)
        await self.tasks.stop(timeout)
        await self.background.close(timeout)
        await self.selection.aclose()

    def _tasks_offered(self) -> bool:
        """The task tools are offered while something can run as one."""
        return self.subagents.offered() or TOOLS["cli"] in self.tools

    def local_time(self, when: datetime) -> datetime:
        return when.astimezone(self.tz)

    def local_now(self) -> datetime:
        """Now, in ``general.timezone``, by the clock the store stamps sessions with (what
        a session's last activity is told against)."""
        return self.local_time(self.store.now())

    # ----- model calls outside a turn --------------------------------------------------

    async def stream_request(
        self, name: str, request: ChatRequest, tag: CallTag | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        """One model request outside any turn (the sidecar's ``/v1`` endpoints, MCP
        sampling): provider ``name``'s client, retry policy and the meter, no history.
        Raises BudgetExceededError before anything is sent when the budget refuses it."""
        provider = await self.selection.provider(name)
        policy = self.selection.policy(name)
        tag = tag or CallTag("api")
        stream = self.meter.stream(provider, request, policy, tag, sleep=self._sleep)
        # Closed with this one (a /v1 client that hangs up): its ledger row is written now.
        async with contextlib.aclosing(stream):
            async for event in stream:
                yield event

    # ----- titles ----------------------------------------------------------------------

    async def generate_title(self, session_id: int) -> str | None:
        """Ask the titles model for a title and store it; None when unavailable."""
        if self.titles is None:
            return None
        messages = await self.store.load_messages(session_id, rounds=2)
        title = await self.titles.make(messages, self.meter, CallTag("title", session_id))
        if title:
            await self.store.set_title(session_id, title)
        return title

    # ----- retry (kernel.agent.rewind) -------------------------------------------------

    async def retry(self, conversation: str, template: UserInput) -> Turn:
        """Answer the owner's last message again: the last exchange is cut (a superseded
        branch) and its message runs as a new turn (``template``: channel, sender). A
        retry that ends without an answer (refused, failed, cancelled) gives the old
        exchange back and cuts what it wrote instead: the owner never loses both."""
        remembered = self._inputs.get(conversation)
        user_input, cut = await self.control.take_back(conversation, template, remembered)

        async def unanswered(run: TurnRun) -> None:
            await self.control.give_back(cut, run.stored)

        try:
            return self.start_turn(conversation, user_input, unanswered=unanswered)
        except BaseException:
            await self.control.restore(cut)
            raise

    # ----- turns (kernel.agent.turn) ---------------------------------------------------

    def start_turn(
        self,
        conversation: str,
        user_input: UserInput,
        *,
        unanswered: Callable[[TurnRun], Awaitable[None]] | None = None,
    ) -> Turn:
        """Begin a turn; raises BusyError while this conversation already has one.
        ``unanswered``: awaited when the turn ended without a whole final answer (refused,
        failed, cancelled), while the conversation is still busy (so no other turn
        starts before it is done)."""
        self.sessions.guard_idle(conversation)
        if not user_input.text.strip() and not user_input.images and not user_input.attached:
            raise ValueError("empty input")
        turn = Turn(conversation)
        self.sessions.begin(conversation, turn)
        task = self._turns.spawn(self._run(turn, user_input, unanswered), turn.id)
        turn.attach(task)
        task.add_done_callback(lambda _: self._ended(turn))
        return turn

    def _ended(self, turn: Turn) -> None:
        self.sessions.ended(turn)
        self.sessions.forget_if_idle(turn.conversation)

    async def _run(
        self,
        turn: Turn,
        user_input: UserInput,
        unanswered: Callable[[TurnRun], Awaitable[None]] | None = None,
    ) -> None:
        run = TurnRun(self.turn_parts, turn, self.sessions.conversation(turn.conversation))
        try:
            await run.run(user_input)
        finally:
            # A final answer, whole: a failed or cancelled turn may have stored a part.
            final = turn.final
            answered = isinstance(final, Completed) and not final.cancelled
            # /retry runs what the owner sent (photos, files, voice), not the slim copy
            # stored; only in the owner's own chats (the only ones that retry); a retry
            # given back leaves the earlier input remembered.
            owner = user_input.channel in OWNER_CHANNELS and not user_input.guest
            if run.stored and owner and (unanswered is None or answered):
                self._remember(turn.conversation, (run.stored[0], user_input))
            if unanswered is not None and not answered:
                await asyncio.shield(unanswered(run))
            if run.error:
                self.last_error = run.error
            # A failed or cancelled first turn still names its session.
            if run.new_session and run.session_id is not None and self.titles is not None:
                title = self._title_if_untitled(run.session_id)
                self.background.spawn(title, f"title-{run.session_id}")

    def _remember(self, conversation: str, sent: tuple[int, UserInput]) -> None:
        """What /retry runs again in ``conversation``; the least recent one beyond
        :data:`RECENT_INPUTS` goes."""
        self._inputs.pop(conversation, None)
        self._inputs[conversation] = sent
        while len(self._inputs) > RECENT_INPUTS:
            self._inputs.popitem(last=False)

    async def _title_if_untitled(self, session_id: int) -> None:
        """A name someone gave (a bootstrap's ``name``, a job's) is never replaced."""
        row = await self.store.get_session(session_id)
        if row is not None and not row.title:
            await self.generate_title(session_id)
