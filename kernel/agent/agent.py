"""The agent: sessions, provider choice, and the turn loop every channel shares (SPEC §4).

A channel calls :meth:`Agent.start_turn` with a conversation key (``"telegram:42"``,
``"console:default"``) and iterates the returned :class:`Turn` for events. The agent
builds the request (system layers, recalled memories, truncated history, the input),
streams the model, runs requested tools, loops until a final reply, and writes the
history as it goes, slimmed, so that a crash or cancel at any point leaves a history
the next turn is accepted with.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from kernel.agent.context import (
    CANCELLED_RESULT,
    Layer,
    flatten_tool_blocks,
    join_layers,
    repair_history,
)
from kernel.agent.slimming import (
    TOOL_RESULT_LIMIT,
    slim_message,
    summarize_tool_result,
    without_files,
)
from kernel.agent.titles import TitleMaker
from kernel.config import Config
from kernel.core.asks import Answer, AskRegistry, Question
from kernel.core.errors import (
    BusyError,
    KernelError,
    ProtectedSessionError,
    ProviderError,
    SessionError,
    SkillError,
    ToolError,
)
from kernel.core.events import (
    AskUser,
    AssistantDelta,
    Completed,
    ErrorEvent,
    StepStarted,
    ToolCall,
    ToolProgress,
    ToolResult,
)
from kernel.core.i18n import t
from kernel.core.messages import (
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from kernel.core.provider import (
    ChatRequest,
    Completion,
    Provider,
    RawToolCall,
    RetryPolicy,
    Sleep,
    StreamEvent,
    TextDelta,
    stream_with_retry,
)
from kernel.core.turns import Turn
from kernel.memory.memories import MAX_REMEMBERED_PER_TURN, Memories
from kernel.memory.remember import Fact, RememberFilter, extract_remember
from kernel.skills import SkillLibrary, wrap_skill
from kernel.store.db import SessionRow, Store
from kernel.tools.registry import ToolContext, ToolOutcome, ToolRegistry
from kernel.tools.repair import repair_arguments

log = logging.getLogger(__name__)

ProviderFactory = Callable[[str], Provider]

SESSION_PREFIX = "session:"  # a conversation named by its session: "session:<id>"
RECENT_TURNS = 256
CANCELLED_MARK = " [已取消]"  # model-facing history marker, not user-facing text
FAILED_RESULT = "failed: the turn ended with an error before this tool's result was recorded"
SOUL_FALLBACK = "You are Kernel, the owner's personal assistant. Be brief, accurate and kind."
SKILLS_FOLDER = "skills"  # beside config.toml
MODEL_OVERRIDE = "active_llm_override"  # session meta: {"provider_id", "model"} for its turns


class SelectionError(KernelError):
    """A /provider or /model choice that cannot be made; the text says why and what to pick."""


@dataclass(slots=True)
class UserInput:
    text: str
    images: list[ImageBlock] = field(default_factory=list)
    channel: str = "console"
    user_id: str = ""  # the sender in the channel's terms, recorded with a new session
    # False where nobody can answer a question (ask_user, a tool approval) during the
    # turn: tools see ToolContext.ask = None and refuse at once instead of waiting.
    interactive: bool = True
    # Someone other than the owner (a QQ user): the owner's memories are neither recalled
    # nor written, and only ``guest_tools`` are offered (and may run).
    guest: bool = False
    guest_tools: tuple[str, ...] = ()

    def to_message(self) -> Message:
        blocks: list[TextBlock | ImageBlock] = [*self.images]
        if self.text:
            blocks.append(TextBlock(self.text))
        return Message("user", list(blocks))


@dataclass(frozen=True, slots=True)
class SessionKey:
    """A session named in a channel's own terms: who (``user_id``) and which of their
    conversations (``external_id``, e.g. the sidecar's ``session_id``)."""

    channel: str
    user_id: str
    external_id: str


@dataclass(frozen=True, slots=True)
class OpenedSession:
    conversation: str  # the key to start turns with
    row: SessionRow
    created: bool


@dataclass(slots=True)
class _Conversation:
    session_id: int | None = None
    turn: Turn | None = None


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
    ) -> None:
        self.config = config
        self.store = store
        self.memories = memories or Memories(store, config.data_dir / "cache")
        self.skills = skills or SkillLibrary(config.base_dir / SKILLS_FOLDER)
        self.tools = tools
        self._factory = provider_factory
        self._providers: dict[str, Provider] = {}
        self._provider_lock = asyncio.Lock()
        self.titles = titles
        self._background: set[asyncio.Task[object]] = set()
        self._sleep = sleep
        self._clock = clock or (lambda: datetime.now(UTC))
        self._conversations: dict[str, _Conversation] = {}
        self._recent: OrderedDict[str, Turn] = OrderedDict()  # turn id → turn, for cancel
        self.provider_name = config.general.default_provider
        self.model = config.providers[self.provider_name].default_model
        self.last_error: str = ""
        self.tz = ZoneInfo(config.general.timezone)
        self.asks = AskRegistry()
        self._retired: list[Provider] = []  # replaced at runtime; closed at stop
        self._generations: dict[str, int] = {}  # bumped when a provider's settings change
        self._waiting: dict[str, int] = {}  # conversation → requests queued behind its turn

    # ----- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Restore the saved provider/model (falling back to the defaults)."""
        saved = await self.store.get_setting("provider")
        if saved and saved in self.config.enabled_providers:
            self.provider_name = saved
        elif saved:
            log.warning("saved provider %s is unavailable; using the default", saved)
        pcfg = self.config.providers[self.provider_name]
        saved_model = await self.store.get_setting("model")
        self.model = saved_model if saved_model in pcfg.models else pcfg.default_model
        # Warm up in the background rather than in the owner's first turn: importing an
        # SDK takes seconds, and channels should start polling meanwhile. A turn that
        # arrives first simply waits for the same build (``provider()`` holds a lock).
        self.spawn(self._warm_up(), "provider-warm-up")

    async def _warm_up(self) -> None:
        try:
            await self.provider()
        except Exception as exc:  # the first turn builds it again and reports the error
            log.warning("building provider %s failed: %s", self.provider_name, type(exc).__name__)

    async def stop(self) -> None:
        """Cancel running turns (they persist what they have), then close providers."""
        timeout = self.config.general.shutdown_timeout
        turns = [c.turn for c in self._conversations.values() if c.turn and not c.turn.done]
        for turn in turns:
            turn.cancel()
        tasks = [turn.task for turn in turns if turn.task]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.wait(self._background, timeout=timeout)
        for provider in [*self._providers.values(), *self._retired]:
            await provider.aclose()
        self._providers.clear()
        self._retired.clear()

    # ----- providers and models --------------------------------------------------------

    async def provider(self, name: str | None = None) -> Provider:
        """The built provider, created on first use in a worker thread: importing an
        SDK takes seconds (anthropic ~1.8 s) and must not stall the event loop."""
        name = name or self.provider_name
        async with self._provider_lock:
            while name not in self._providers:
                generation = self._generations.get(name, 0)
                built = await asyncio.to_thread(self._factory, name)
                if self._generations.get(name, 0) == generation:
                    self._providers[name] = built
                else:  # its settings changed while it was being built: build anew
                    self._retire(built)
        return self._providers[name]

    def providers_changed(self, names: set[str]) -> None:
        """Providers' settings changed at runtime: rebuild their clients on next use.
        An old client is closed once the turns running now end, never under their feet."""
        for name in names:
            self._generations[name] = self._generations.get(name, 0) + 1
            old = self._providers.pop(name, None)
            if old is not None:
                self._retire(old)
        pcfg = self.config.providers.get(self.provider_name)
        if pcfg is None or not pcfg.enabled:
            self.provider_name = self.config.general.default_provider
            pcfg = self.config.providers[self.provider_name]
        if self.model not in pcfg.models:
            self.model = pcfg.default_model

    def _retire(self, provider: Provider) -> None:
        """Close a replaced client once the turns running now (which may use it) end;
        whatever is still open at stop is closed there."""
        self._retired.append(provider)
        running = [c.turn.task for c in self._conversations.values() if c.turn and c.turn.task]
        self.spawn(self._close_after(provider, [t for t in running if not t.done()]), "retire")

    async def _close_after(self, provider: Provider, tasks: list[asyncio.Task[None]]) -> None:
        if tasks:
            await asyncio.wait(tasks)
        if provider in self._retired:
            self._retired.remove(provider)
            await provider.aclose()

    def resolve_model(self, requested: str) -> tuple[str, str]:
        """(provider, model) for a model name or alias of an enabled provider, the
        active provider first; an unknown or empty name means the active choice."""
        enabled = self.config.enabled_providers
        order = [self.provider_name, *(n for n in enabled if n != self.provider_name)]
        for name in order:
            pcfg = enabled.get(name)
            model = pcfg.resolve(requested) if pcfg and requested else None
            if model:
                return name, model
        return self.provider_name, self.model

    def check_model(self, provider_id: str, requested: str | None = None) -> tuple[str, str]:
        """(provider, model) for an explicit choice: a configured, enabled provider and one
        of its models or aliases (its default model when none is named)."""
        pcfg = self.config.providers.get(provider_id)
        if pcfg is None or not pcfg.enabled:
            available = ", ".join(self.available_providers)
            raise SelectionError(t("provider.unavailable", name=provider_id, available=available))
        model = pcfg.resolve(requested) if requested else pcfg.default_model
        if model is None:
            raise SelectionError(
                t(
                    "model.invalid",
                    model=requested,
                    provider=provider_id,
                    models=", ".join(pcfg.models),
                )
            )
        return provider_id, model

    def model_for(self, meta: dict[str, object]) -> tuple[str, str]:
        """The provider and model a session's turns use: its own override (set through
        SelfOps) while it still resolves, else the active choice."""
        override = meta.get(MODEL_OVERRIDE)
        if isinstance(override, dict):
            try:
                model = override.get("model")
                return self.check_model(str(override.get("provider_id", "")), str(model or ""))
            except SelectionError:
                # A provider switched off or a model removed since: the session is not
                # left unable to answer; the override shows in the chat's meta to fix.
                log.warning("a session's model override no longer resolves; using the active one")
        return self.provider_name, self.model

    async def set_session_model(
        self, session_id: int, provider_id: str, requested: str | None = None
    ) -> tuple[str, str]:
        """Give one session its own provider/model; the active choice is untouched."""
        chosen = self.check_model(provider_id, requested)
        row = await self.store.get_session(session_id)
        if row is None:
            raise SessionError(t("session.not_found", id=session_id))
        override = {"provider_id": chosen[0], "model": chosen[1]}
        await self.store.update_meta(session_id, {**row.meta, MODEL_OVERRIDE: override})
        return chosen

    async def clear_session_model(self, session_id: int) -> None:
        row = await self.store.get_session(session_id)
        if row is None:
            raise SessionError(t("session.not_found", id=session_id))
        if MODEL_OVERRIDE in row.meta:
            meta = {k: v for k, v in row.meta.items() if k != MODEL_OVERRIDE}
            await self.store.update_meta(session_id, meta)

    async def stream_request(
        self, name: str, request: ChatRequest
    ) -> AsyncGenerator[StreamEvent, None]:
        """One model request outside any turn (the sidecar's Claude-compatible endpoint):
        provider ``name``'s client, capability checks and retry policy, no history."""
        provider = await self.provider(name)
        pcfg = self.config.providers[name]
        policy = RetryPolicy(max_retries=pcfg.max_retries, base_delay=pcfg.retry_base_delay)
        async for event in stream_with_retry(provider, request, policy, sleep=self._sleep):
            yield event

    @property
    def available_providers(self) -> list[str]:
        return list(self.config.enabled_providers)

    async def set_provider(self, name: str) -> str:
        """Switch provider (and to its default model); persisted. Returns the model."""
        if name not in self.config.enabled_providers:
            raise SelectionError(
                t("provider.unavailable", name=name, available=", ".join(self.available_providers))
            )
        await self.provider(name)
        self.provider_name = name
        self.model = self.config.providers[name].default_model
        await self.store.set_setting("provider", name)
        await self.store.set_setting("model", self.model)
        return self.model

    @property
    def models(self) -> list[str]:
        return list(self.config.providers[self.provider_name].models)

    async def set_model(self, model: str) -> None:
        """Switch model (a configured name or an alias of one); persisted."""
        model = self.config.providers[self.provider_name].resolve(model) or model
        if model not in self.models:
            raise SelectionError(
                t(
                    "model.invalid",
                    model=model,
                    provider=self.provider_name,
                    models=", ".join(self.models),
                )
            )
        self.model = model
        await self.store.set_setting("model", model)

    # ----- sessions --------------------------------------------------------------------

    def _conv(self, conversation: str) -> _Conversation:
        conv = self._conversations.get(conversation)
        if conv is None:
            conv = self._conversations[conversation] = _Conversation()
            if conversation.startswith(SESSION_PREFIX):  # named by its session: derivable
                conv.session_id = int(conversation.removeprefix(SESSION_PREFIX))
        return conv

    def _forget_if_idle(self, conversation: str) -> None:
        """A ``session:<id>`` conversation is rebuilt from its name when needed: drop it
        once idle, so thousands of HTTP chats do not pile up (nor slow ``_running``)."""
        conv = self._conversations.get(conversation)
        if (
            conversation.startswith(SESSION_PREFIX)
            and conv is not None
            and (conv.turn is None or conv.turn.done)
            and not self._waiting.get(conversation)
        ):
            del self._conversations[conversation]

    def current_session(self, conversation: str) -> int | None:
        return self._conv(conversation).session_id

    def new_session(self, conversation: str) -> None:
        """Start afresh; the session row is created with the first message."""
        self._guard_idle(conversation)
        self._conv(conversation).session_id = None

    async def list_sessions(self, limit: int = 20) -> list[SessionRow]:
        return await self.store.list_sessions(limit=limit)

    async def open_session(
        self,
        key: SessionKey,
        *,
        create: bool = True,
        title: str | None = None,
        meta: dict[str, object] | None = None,
    ) -> OpenedSession | None:
        """The conversation for the session with this key, the session created first
        when missing (unless ``create`` is false: then None). Every caller naming the same
        session gets the same conversation, so its turns queue behind one another."""
        row, created = await self.store.open_session(
            key.channel, key.user_id, key.external_id, title=title, meta=meta, create=create
        )
        if row is None:
            return None
        return OpenedSession(f"{SESSION_PREFIX}{row.id}", row, created)

    async def clear_history(self, conversation: str) -> int:
        """Forget the conversation's messages but keep its session (seed 000 ``/new``)."""
        self._guard_idle(conversation)
        session_id = self._conv(conversation).session_id
        if session_id is None:
            return 0
        return await self.store.clear_messages(session_id)

    async def resume(self, conversation: str, session_id: int) -> SessionRow:
        self._guard_idle(conversation)
        row = await self.store.get_session(session_id)
        if row is None:
            raise SessionError(t("session.not_found", id=session_id))
        self._conv(conversation).session_id = session_id
        return row

    async def delete_sessions(self, ids: list[int]) -> int:
        """Delete sessions (not a protected one, nor one with a running turn)."""
        for session_id in ids:
            row = await self.store.get_session(session_id)
            if row is not None and row.meta.get("system_default"):
                raise ProtectedSessionError(t("session.protected"))
        holding = [(n, c) for n, c in self._conversations.items() if c.session_id in ids]
        if any(c.turn and not c.turn.done for _, c in holding):
            raise BusyError(t("turn.busy"))  # refused whole: nothing detached, nothing gone
        for name, conv in holding:
            conv.session_id = None
            self._forget_if_idle(name)
        return await self.store.delete_sessions(ids)

    async def retitle(self, session_id: int, title: str | None) -> None:
        await self.store.set_title(session_id, title)

    async def generate_title(self, session_id: int) -> str | None:
        """Ask the titles model for a title and store it; None when unavailable."""
        if self.titles is None:
            return None
        messages = await self.store.load_messages(session_id, rounds=2)
        title = await self.titles.make(messages)
        if title:
            await self.store.set_title(session_id, title)
        return title

    def spawn(self, coro: Coroutine[object, object, object], name: str) -> None:
        """Run background work that is tracked and cancelled at stop (no fire-and-forget)."""
        task: asyncio.Task[object] = asyncio.get_running_loop().create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[object]) -> None:
        self._background.discard(task)
        error = None if task.cancelled() else task.exception()
        if error is not None:
            log.warning(
                "background task %s failed: %s",
                task.get_name(),
                type(error).__name__,
                exc_info=error,
            )

    def local_time(self, when: datetime) -> datetime:
        return when.astimezone(self.tz)

    # ----- turns -----------------------------------------------------------------------

    def _running(self, conversation: str) -> Turn | None:
        """The turn this conversation must wait for: its own, or one running on the same
        session from another channel (e.g. a Telegram chat that resumed it)."""
        conv = self._conv(conversation)
        if conv.turn is not None and not conv.turn.done:
            return conv.turn
        if conv.session_id is None:
            return None
        for other in self._conversations.values():
            turn = other.turn
            if other.session_id == conv.session_id and turn is not None and not turn.done:
                return turn
        return None

    def is_busy(self, conversation: str) -> bool:
        return self._running(conversation) is not None

    async def wait_idle(self, conversation: str, seconds: float) -> None:
        """Wait (up to ``seconds``) until no turn runs on this conversation's session;
        BusyError after that. Waiters are woken in the order they came."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        self._waiting[conversation] = self._waiting.get(conversation, 0) + 1
        try:
            while (turn := self._running(conversation)) is not None:
                remaining = deadline - loop.time()
                if remaining <= 0 or turn.task is None:
                    raise BusyError(t("turn.busy"))
                await asyncio.wait({turn.task}, timeout=remaining)
        finally:
            self._waiting[conversation] -= 1
            if not self._waiting[conversation]:
                del self._waiting[conversation]
            self._forget_if_idle(conversation)

    def waiting(self, conversation: str) -> int:
        """How many callers are queued in :meth:`wait_idle` for this conversation."""
        return self._waiting.get(conversation, 0)

    def find_turn(self, turn_id: str) -> Turn | None:
        """A running turn, or one of the last ``RECENT_TURNS`` that ended."""
        return self._recent.get(turn_id)

    def _guard_idle(self, conversation: str) -> None:
        if self.is_busy(conversation):
            raise BusyError(t("turn.busy"))

    def start_turn(self, conversation: str, user_input: UserInput) -> Turn:
        """Begin a turn; raises BusyError while this conversation already has one."""
        self._guard_idle(conversation)
        if not user_input.text.strip() and not user_input.images:
            raise ValueError("empty input")
        turn = Turn(conversation)
        self._conv(conversation).turn = turn
        self._recent[turn.id] = turn
        while len(self._recent) > RECENT_TURNS:
            self._recent.popitem(last=False)
        task = asyncio.get_running_loop().create_task(self._run(turn, user_input), name=turn.id)
        turn.attach(task)
        task.add_done_callback(lambda _: self._forget_if_idle(conversation))
        return turn

    def cancel(self, conversation: str) -> bool:
        """Stop the turn this conversation waits for: its own, or one another channel
        runs on the same session (what makes it busy is what /cancel stops)."""
        turn = self._running(conversation)
        return turn.cancel() if turn else False

    async def system_layers(
        self, query: str = "", *, guest_tools: tuple[str, ...] | None = None
    ) -> list[Layer]:
        """SOUL.md, tool guide, recalled memories, skills summary, local time (SPEC §4).
        ``guest_tools``: a guest's turn, with only those tools and no memories."""
        soul = await asyncio.to_thread(self._read_soul)
        where = _relative(self.config.general.soul, self.config.base_dir)
        layers = [Layer("soul", soul, "built-in" if soul == SOUL_FALLBACK else where)]
        names = self.tools.names()
        if guest_tools is not None:
            names = [n for n in names if n in guest_tools]
        if names:
            layers.append(Layer("tools", _tool_guide(names), "tool registry"))
        memories = await self._recall(query) if guest_tools is None else ""
        if memories:
            layers.append(Layer("memories", memories, "memories"))
        skills = await self.skills.summary()
        if skills:
            where = _relative(self.skills.folder, self.config.base_dir)
            layers.append(Layer("skills", skills, where))
        now = self.local_time(self._clock())
        stamp = now.strftime("%Y-%m-%dT%H:%M:%S%z")
        text = f"当前时间：{stamp}（{self.config.general.timezone}）"
        layers.append(Layer("time", text, "clock"))
        return layers

    def _read_soul(self) -> str:
        try:
            return self.config.general.soul.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return SOUL_FALLBACK

    async def _recall(self, query: str) -> str:
        try:
            found = await self.memories.recall(query, self.config.general.memory_recall_k)
        except KernelError:
            # Recall is a help, not a condition: the turn goes on without it.
            log.warning("memory recall failed", exc_info=True)
            return ""
        if not found:
            return ""
        lines = [f"- [{m.id}] {m.text}" for m in found]
        return "## 长期记忆（自动召回）\n" + "\n".join(lines)

    async def _run(self, turn: Turn, user_input: UserInput) -> None:
        turn.started = True
        run = _TurnRun(self, turn)
        try:
            await run.execute(user_input)
        except asyncio.CancelledError:
            reply = run.reply_so_far()
            try:
                await asyncio.shield(run.close_history(CANCELLED_RESULT, CANCELLED_MARK))
            finally:
                turn.emit(Completed(run.step, reply, cancelled=True))
            raise
        except SkillError as exc:
            # Refused before anything was stored or sent: the owner fixes the name and
            # sends again (the text names the skills there are).
            turn.emit(ErrorEvent(run.step, exc.code, str(exc)))
        except ProviderError as exc:
            self.last_error = str(exc)
            log.warning("turn %s: provider error %s", turn.id, type(exc).__name__)
            code = exc.code or "provider_request_failed"
            await run.fail(ErrorEvent(run.step, code, t("provider.error", detail=str(exc))))
        except Exception as exc:
            self.last_error = type(exc).__name__
            log.exception("turn %s failed", turn.id)
            message = t("turn.internal_error", kind=type(exc).__name__)
            await run.fail(ErrorEvent(run.step, "internal_error", message))
        finally:
            self._title_later(run)  # a failed or cancelled first turn still names its session

    def _title_later(self, run: _TurnRun) -> None:
        if run.new_session and run.session_id is not None and self.titles is not None:
            self.spawn(self._title_if_untitled(run.session_id), f"title-{run.session_id}")

    async def _title_if_untitled(self, session_id: int) -> None:
        """A name someone gave (a bootstrap's ``name``, a job's) is never replaced."""
        row = await self.store.get_session(session_id)
        if row is not None and not row.title:
            await self.generate_title(session_id)


class _TurnRun:
    """The state of one turn while it runs; history is written step by step."""

    def __init__(self, agent: Agent, turn: Turn) -> None:
        self.agent = agent
        self.turn = turn
        self.step = 0
        self.session_id: int | None = None
        self.pending: Message | None = None  # an assistant message whose tools have no results
        self.partial: list[str] = []  # text streamed in the current step, not yet stored
        self.replies: list[str] = []
        self.new_session = False
        self.remembered = 0  # new memories from <remember> tags in this turn
        self.guest_tools: tuple[str, ...] | None = None  # set for a guest's turn
        self.interactive = True

    def reply_so_far(self) -> str:
        return "".join([*self.replies, *self.partial])

    async def _store(self, message: Message, artifacts: dict[str, str] | None = None) -> None:
        assert self.session_id is not None
        # Shielded: once a write has begun it completes even if the turn is cancelled.
        write = self.agent.store.append_messages(
            self.session_id, [slim_message(message, artifacts)]
        )
        await asyncio.shield(write)

    async def execute(self, user_input: UserInput) -> None:
        agent, cfg = self.agent, self.agent.config
        # Only the owner's own words invoke a skill, not an attached file's contents.
        skills = await agent.skills.invoked(without_files(user_input.text))
        self.interactive = user_input.interactive
        conv = agent._conv(self.turn.conversation)
        self.new_session = conv.session_id is None
        if conv.session_id is None:
            row = await agent.store.create_session(user_input.channel, user_id=user_input.user_id)
            conv.session_id = row.id
        self.session_id = conv.session_id
        history = await agent.store.load_messages(
            self.session_id, rounds=max(cfg.general.context_rounds - 1, 1)
        )
        # A session opened by key (HTTP, QQ, cron) exists before its first message.
        self.new_session = self.new_session or not history
        user_message = user_input.to_message()
        # Each invoked skill is a block of its own before the owner's words, so that
        # slimming can replace exactly it with a marker when storing.
        user_message.content[0:0] = [TextBlock(wrap_skill(s)) for s in skills]
        await self._store(user_message)
        if self.turn.cancel_requested:  # cancelled before it began: the message is kept
            raise asyncio.CancelledError
        working = repair_history([*history, user_message])
        self.guest_tools = user_input.guest_tools if user_input.guest else None
        system = join_layers(
            await agent.system_layers(user_input.text, guest_tools=self.guest_tools)
        )
        session = await agent.store.get_session(self.session_id)
        name, model = agent.model_for(session.meta if session else {})
        provider = await agent.provider(name)
        pcfg = cfg.providers[provider.name]
        policy = RetryPolicy(max_retries=pcfg.max_retries, base_delay=pcfg.retry_base_delay)
        limit = cfg.general.max_tool_calls
        calls_used = 0
        while True:
            self.step += 1
            self.turn.emit(StepStarted(self.step))
            tools = agent.tools.specs() if provider.capabilities.tool_call else []
            if self.guest_tools is not None:
                tools = [spec for spec in tools if spec.name in self.guest_tools]
            messages = working if tools else flatten_tool_blocks(working)
            request = ChatRequest(model, system, messages, tools)
            completion = await self._stream(provider, request, policy)
            # History keeps the text without <remember> tags: it is what the owner saw,
            # the facts live in memories (recalled as their own layer), and a model shown
            # its old tags would learn to repeat them.
            text, facts = extract_remember(completion.text)
            if facts and self.guest_tools is None:  # a guest never writes the owner's memory
                await self._remember(facts)
            assistant = Message("assistant", [])
            if text:
                assistant.content.append(TextBlock(text))
            for call in completion.tool_calls:
                assistant.content.append(ToolUseBlock(call.id, call.name, self._args(call)))
            self.partial = []
            if text:
                self.replies.append(text)
            if not completion.tool_calls:
                if assistant.content:
                    await self._store(assistant)
                # Text written before tool calls is part of the answer too.
                self.turn.emit(Completed(self.step, "\n\n".join(self.replies)))
                return
            self.pending = assistant
            await self._store(assistant)
            working.append(assistant)
            allowed = max(0, limit - calls_used)
            calls_used += len(completion.tool_calls)
            results = await self._run_tools(
                completion.tool_calls, allowed, images=provider.capabilities.attachments
            )
            working.append(results)
            if calls_used > limit:
                notice = t("turn.tool_limit", limit=limit)
                self.turn.emit(AssistantDelta(self.step, notice))
                await self._store(Message("assistant", [TextBlock(notice)]))
                self.turn.emit(Completed(self.step, "\n\n".join([*self.replies, notice])))
                return

    async def _stream(
        self, provider: Provider, request: ChatRequest, policy: RetryPolicy
    ) -> Completion:
        completion: Completion | None = None
        tags = RememberFilter()  # every channel previews deltas: tags never reach them
        stream = stream_with_retry(provider, request, policy, sleep=self.agent._sleep)
        async for event in stream:
            if isinstance(event, TextDelta):
                self._show(tags.feed(event.text))
            elif isinstance(event, Completion):
                completion = event
        assert completion is not None
        self._show(tags.flush())
        return completion

    def _show(self, text: str) -> None:
        if text:
            self.partial.append(text)
            self.turn.emit(AssistantDelta(self.step, text))

    async def _remember(self, facts: list[Fact]) -> None:
        """Save the facts of this step's <remember> tags, at most 3 new per turn."""
        allowance = MAX_REMEMBERED_PER_TURN - self.remembered
        if allowance <= 0:
            return
        try:
            saved = await self.agent.memories.save_facts(facts, limit=allowance)
        except (KernelError, ValueError):
            log.warning("turn %s: saving remembered facts failed", self.turn.id, exc_info=True)
            return
        self.remembered += len(saved)
        if saved:
            log.info("turn %s: %d new memories from remember tags", self.turn.id, len(saved))

    def _args(self, call: RawToolCall) -> dict[str, object]:
        spec = next((s for s in self.agent.tools.specs() if s.name == call.name), None)
        try:
            return repair_arguments(call.arguments, spec.parameters if spec else {})
        except ToolError:
            return {}

    async def _run_tools(
        self, calls: list[RawToolCall], allowed: int, *, images: bool = True
    ) -> Message:
        """Run the step's tool calls concurrently; calls past the cap get an error result.
        Images a tool returned follow the results, each labelled with its tool (``images``
        false: the provider takes none, so the model is told instead)."""
        agent = self.agent
        for call in calls:
            self.turn.emit(ToolCall(self.step, call.id, call.name, self._args(call)))

        async def run(index: int, call: RawToolCall) -> ToolOutcome:
            if index >= allowed:
                msg = t("turn.tool_limit", limit=agent.config.general.max_tool_calls)
                outcome = ToolOutcome(call.name, False, msg, {})
            else:
                outcome = await self._call(call)
            summary = summarize_tool_result(outcome.content)
            self.turn.emit(ToolResult(self.step, call.id, call.name, outcome.ok, summary))
            return outcome

        outcomes = await asyncio.gather(*(run(i, c) for i, c in enumerate(calls)))
        blocks = [
            ToolResultBlock(c.id, _with_image_note(o, images), is_error=not o.ok)
            for c, o in zip(calls, outcomes, strict=True)
        ]
        extra: list[TextBlock | ImageBlock] = []
        if images:
            for call, outcome in zip(calls, outcomes, strict=True):
                if outcome.images:
                    extra.append(TextBlock(t("tool.images_from", name=call.name, id=call.id)))
                    extra.extend(outcome.images)
        message = Message("user", [*blocks, *extra])
        artifacts = await asyncio.to_thread(self._save_artifacts, blocks)
        self.pending = None
        await self._store(message, artifacts)
        return message

    async def _call(self, call: RawToolCall) -> ToolOutcome:
        if self.guest_tools is not None and call.name not in self.guest_tools:
            # Not offered to a guest: a name the model made up must not run either.
            return ToolOutcome(call.name, False, t("turn.guest_tool", name=call.name), {})
        return await self.agent.tools.call(call.name, call.arguments, self._context(call))

    def _context(self, call: RawToolCall) -> ToolContext:
        async def ask(
            question: str, options: list[str], *, kind: str = "question", seconds: float = 300.0
        ) -> Answer:
            asked = Question(self.turn.conversation, question, list(options), call.id, kind)
            self.turn.emit(AskUser(self.step, asked.id, call.id, question, list(options), kind))
            return await self.agent.asks.wait(asked, seconds)

        def progress(text: str) -> None:
            self.turn.emit(ToolProgress(self.step, call.id, call.name, text))

        return ToolContext(
            session_id=self.session_id,
            conversation=self.turn.conversation,
            progress=progress,
            tool_call_id=call.id,
            ask=ask if self.interactive else None,
        )

    def _save_artifacts(self, blocks: list[ToolResultBlock]) -> dict[str, str]:
        """Keep long tool results on disk so the slimmed history can point at them."""
        out: dict[str, str] = {}
        folder = self.agent.config.data_dir / "tool_outputs"
        for index, block in enumerate(blocks):
            if len(block.content) <= TOOL_RESULT_LIMIT or '"output_path"' in block.content:
                continue
            folder.mkdir(parents=True, exist_ok=True)
            # Only Kernel-made parts in the name: the tool name and id come from the model.
            path = folder / f"s{self.session_id}-{uuid.uuid4().hex[:12]}-{index}.txt"
            path.write_text(block.content, encoding="utf-8")
            out[block.tool_use_id] = _relative(path, self.agent.config.base_dir)
        return out

    async def fail(self, event: ErrorEvent) -> None:
        try:
            await asyncio.shield(self.close_history(FAILED_RESULT))
        finally:
            self.turn.emit(event)

    async def close_history(self, reason: str, partial_note: str = "") -> None:
        """After a cancel or failure: answer dangling tool calls and keep streamed text."""
        if self.session_id is None:
            return
        try:
            if self.pending is not None:
                results = [ToolResultBlock(u.id, reason, True) for u in self.pending.tool_uses]
                await self._store(Message("user", list(results)))
                self.pending = None
            if self.partial:
                text = "".join(self.partial) + partial_note
                await self._store(Message("assistant", [TextBlock(text)]))
                self.partial = []
        except KernelError:
            log.warning("could not record the end of an interrupted turn", exc_info=True)


def _with_image_note(outcome: ToolOutcome, shown: bool) -> str:
    if not outcome.images:
        return outcome.content
    key = "tool.images_follow" if shown else "tool.images_not_shown"
    return f"{outcome.content}\n{t(key, count=len(outcome.images))}"


def _tool_guide(names: list[str]) -> str:
    return (
        "## 工具\n"
        "你可以通过 tool use 调用这些工具：" + ", ".join(names) + "。\n"
        "需要时直接调用，不要假装已经调用；工具失败时读懂错误，修正参数或告诉用户。"
    )


def _relative(path: Path, base: Path) -> str:
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)
