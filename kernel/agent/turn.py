"""One turn: build the request, stream the model, run the tools it asks for, loop until a
final reply, and write the history step by step, slimmed, so that a crash or cancel at
any point leaves a history the next turn is accepted with.

A :class:`TurnRun` sees the agent only through the collaborators in
:class:`~kernel.agent.turn_parts.TurnParts` and the one
:class:`~kernel.agent.sessions.Conversation` it runs in; a step's tool calls run in
:mod:`kernel.agent.turn_tools`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from typing import Any

from kernel.agent.asked_again import unanswered_repeat
from kernel.agent.context import covered_tools, repair_history, split_layers
from kernel.agent.failover import Build, ModelCalls
from kernel.agent.prompt_files import names_template
from kernel.agent.prompt_modes import MODE_KEY, ModeChoice
from kernel.agent.requests import Requests
from kernel.agent.scope import ChatScope, Outlook
from kernel.agent.sessions import Conversation
from kernel.agent.slimming import (
    save_long_results,
    slim_message,
    without_files,
)
from kernel.agent.trail import Trail
from kernel.agent.turn_parts import TurnParts, UserInput
from kernel.agent.turn_start import TurnStart
from kernel.agent.turn_tools import RepairedCall, ToolRunner, repair_calls, results_message
from kernel.core.asks import Question
from kernel.core.errors import (
    BudgetExceededError,
    InputRefusedError,
    KernelError,
    ProfileError,
    PromptError,
    ProviderError,
    SkillError,
)
from kernel.core.events import (
    AskUser,
    AssistantDelta,
    Completed,
    ErrorEvent,
    StepStarted,
)
from kernel.core.failures import log_fields, owner_words
from kernel.core.i18n import t
from kernel.core.messages import Message, TextBlock, ToolResultBlock, ToolSpec, ToolUseBlock
from kernel.core.provider import (
    Completion,
    TextDelta,
    thinking_blocks,
)
from kernel.core.session_modes import ACT, CONTROL
from kernel.core.turns import Turn
from kernel.core.usage import estimate_request_tokens
from kernel.memory.memories import MAX_REMEMBERED_PER_TURN
from kernel.memory.remember import Fact, RememberFilter, extract_remember
from kernel.routing import Facts
from kernel.skills import wrap_skill
from kernel.spend import CallTag, Over, money
from kernel.spend.meter import OWNER_CHANNELS
from kernel.store.artifacts import ArtifactStore
from kernel.store.database import RowId

log = logging.getLogger(__name__)

BUDGET_ASK_SECONDS = 600.0  # how long a turn over its budget waits for the owner


class TurnRun(TurnStart):
    """The state of one turn while it runs; history is written step by step."""

    def __init__(
        self,
        parts: TurnParts,
        turn: Turn,
        conversation: Conversation,
        outlook: Outlook | None = None,
    ) -> None:
        self.parts = parts
        # Given for a sub-agent's run; else made from the session's persona and project.
        self.outlook = outlook or Outlook()
        self._given_outlook = outlook is not None
        self.turn = turn
        self.conversation = conversation
        self.step = 0
        self.session_id: int | None = None
        self.pending: Message | None = None  # an assistant message whose tools have no results
        self.partial: list[str] = []  # text streamed in the current step, not yet stored
        self.replies: list[str] = []
        self.new_session = False
        self.remembered = 0  # new memories from <remember> tags in this turn
        self.guest_tools: tuple[str, ...] | None = None  # set for a guest's turn
        self.mode = ModeChoice()  # the session's prompt mode (default for guests)
        # The session's act, plan or read_only, and SessionModes.changes when it was read.
        self.session_mode = ACT
        self._modes_seen = parts.modes.changes
        self.interactive = True
        self.error = ""  # why the turn failed, for the agent's status ("" when it did not)
        self.stored: list[int] = []  # ids of the messages this turn wrote, in order
        self.tag = CallTag("turn", turn_id=turn.id)  # what its model calls are for
        self.may_raise = False  # the owner may raise the budget from this turn
        self.calls: ModelCalls | None = None  # the turn's model calls over its route
        self.tools: ToolRunner | None = None  # runs the model's tool calls, once scoped
        # Thinking blocks of this turn's assistant messages (index in the working
        # history → the model that made them, the blocks): sent back to that model only.
        self.thinking: dict[int, tuple[str, list[dict[str, Any]]]] = {}
        self.trail = Trail(parts.audit)
        self.ended = False  # turn.answered is recorded (once, before the final event)

    def reply_so_far(self) -> str:
        return "".join([*self.replies, *self.partial])

    async def run(self, user_input: UserInput) -> None:
        """Execute the turn; every ending becomes the turn's final event. A cancel is
        re-raised once the history is closed."""
        self.turn.started = True
        try:
            await self.execute(user_input)
        except asyncio.CancelledError:
            reply = self.reply_so_far()
            try:
                mark = " " + t("history.cancelled")  # in the history the model reads
                await asyncio.shield(self.close_history(t("history.tool_cancelled"), mark))
            finally:
                done = Completed(self.step, reply, cancelled=True, usage=self.turn.spend())
                await self.end(done, "cancelled")
            raise
        except InputRefusedError as exc:
            self.error = str(exc)
            log.warning(
                "turn %s: the provider refused the input: %s", self.turn.id, log_fields(exc)
            )
            message = owner_words(exc)  # the provider's own words: /status full's
            meta = {"detail": str(exc)} if self.guest_tools is None else {}
            await self.set_aside(ErrorEvent(self.step, exc.code, message, meta=meta))
        except BudgetExceededError as exc:
            self.error = exc.code
            log.info("turn %s: stopped by the budget", self.turn.id)
            event = ErrorEvent(self.step, exc.code, str(exc), meta=dict(exc.details))
            if self.guest_tools is not None:  # what the owner spends is not a guest's business
                event = ErrorEvent(self.step, exc.code, t("budget.guest"))
            if self.turn.calls:
                await self.fail(event, "budget")  # what the turn did stays in the history
            else:
                # Nothing was sent: the owner's message is set aside, or it would be sent
                # again glued to the next one (a cron job's prompt, once per skipped run).
                await self.set_aside(event, "budget")
        except (SkillError, ProfileError, PromptError) as exc:
            # Refused before anything was stored or sent: the owner fixes the name (or
            # the persona's file) and sends again (the text names what there is).
            event = ErrorEvent(self.step, exc.code, str(exc), meta=dict(exc.details))
            await self.end(event, "rejected")
        except ProviderError as exc:  # a refused key, 429, 5xx, timeout, a bad request
            self.error = str(exc)  # the raw detail: for /status full and the log's fields
            log.warning("turn %s: provider error %s", self.turn.id, log_fields(exc))
            code = exc.code or "provider_request_failed"
            event = ErrorEvent(self.step, code, owner_words(exc), meta={"detail": str(exc)})
            if self.guest_tools is not None:  # the owner's providers are not a guest's
                event = ErrorEvent(self.step, code, t("routing.guest_unavailable"))
            await self.fail(event)
        except Exception as exc:
            self.error = type(exc).__name__
            log.exception("turn %s failed", self.turn.id)
            message = t("turn.internal_error", kind=type(exc).__name__)
            await self.fail(ErrorEvent(self.step, "internal_error", message))

    async def _store(self, message: Message, artifacts: dict[str, str] | None = None) -> None:
        assert self.session_id is not None
        # Shielded: once a write has begun it completes even if the turn is cancelled.
        write = self.parts.store.append_messages(
            self.session_id, [slim_message(message, artifacts)]
        )
        ids = await asyncio.shield(write)
        self.stored.extend(ids)
        if message.role == "assistant" and not message.tool_uses and ids:
            self.turn.answer_id = ids[-1]

    def _store_answer(self, message: Message) -> None:
        """The final answer, queued and not waited for: the turn's end and the reply's
        outbox row (its 🔁 naming the answer's id: ``turn.answer_id`` is a RowId until
        it is written) are queued behind it and ride its hop and its transaction (issue
        37: one hop for "model call done"). Once queued, it is written even if the turn
        is cancelled, and before any store call made later (the conversation's next
        turn reads it; the store's close waits for it). A failure leaves the reply
        shown without its 🔁 and the history without it: logged, the turn answered."""
        assert self.session_id is not None
        row = RowId()
        storing = self.parts.store.append_messages_soon(
            self.session_id, [slim_message(message)], [row]
        )
        self.turn.answer_id = row
        storing.add_done_callback(self._answer_stored)

    def _answer_stored(self, done: asyncio.Future[list[int]]) -> None:
        if done.cancelled():
            return
        exc = done.exception()
        if exc is not None:
            log.warning("turn %s: storing the answer failed: %s", self.turn.id, type(exc).__name__)
            return
        ids = done.result()
        self.stored.extend(ids)
        if ids:
            self.turn.answer_id = ids[-1]

    async def execute(self, user_input: UserInput) -> None:
        parts, cfg, conv = self.parts, self.parts.config, self.conversation
        # The owner's "/prompts:<name> KEY=VALUE …" is the template filled in, or refused
        # before anything is stored or sent (a guest's text is taken as it is).
        # Read in a thread only when it names one (not a hop for every message).
        if not user_input.guest and user_input.expand and names_template(user_input.text):
            text = await asyncio.to_thread(parts.prompt.files.expand, user_input.text)
            user_input = replace(user_input, text=text)
        # Only the owner's own words invoke a skill, not an attached file's contents.
        skills = await parts.skills.invoked(without_files(user_input.text))
        self.interactive = user_input.interactive
        self.new_session = conv.session_id is None
        if conv.session_id is None:
            inherited = await parts.scopes.inherited(self.turn.conversation)
            row = await parts.store.create_session(
                user_input.channel,
                user_id=user_input.user_id,
                meta=_scope_meta(inherited),
                mode=await parts.modes.inherited(self.turn.conversation),
            )
            conv.session_id = row.id
        self.session_id = conv.session_id
        self.turn.place(self.session_id)
        self.guest_tools = user_input.guest_tools if user_input.guest else None
        user_message = user_input.to_message()
        # Each invoked skill is a block of its own before the owner's words, so that
        # slimming can replace exactly it with a marker when storing.
        user_message.content[0:0] = [TextBlock(wrap_skill(s), by="kernel") for s in skills]
        self._modes_seen = parts.modes.changes
        started = await self._begin(user_input, user_message)
        if started is not None:  # read, checked and (ids) stored in one hop
            session, repeat, history, ids, layers, volatile = started
        else:
            # Read together (one hop to the database thread): the session, whether this
            # asks a failed turn's question again, and the history (read again after a
            # cut).
            ids = None
            session, repeat, history = await asyncio.gather(
                parts.store.get_session(self.session_id),
                unanswered_repeat(parts.store, self.session_id, user_input.text),
                self._history(),
            )
        meta = session.meta if session else {}
        self.session_mode = session.mode if session else ACT
        conv.assumed = (self.session_id, meta, self.session_mode) if session else None
        if ids is None:  # not stored yet: as the session is now
            layers = await self._prepare(user_input, meta)
            if await self._cut_repeat(user_input, repeat):
                history = await self._history()
            # The message, its audit row (naming the message's id, known on the database
            # thread) and the memories recalled meanwhile: one hop to the database. Both
            # writes are queued now; the recall's read sends the hop. Once queued, the
            # writes run even if the turn is cancelled.
            sent = RowId()
            storing = parts.store.append_messages_soon(
                self.session_id, [slim_message(user_message)], [sent]
            )
            await self.trail.received(
                self.session_id, sent, user_input, self.turn, self.outlook.agent
            )
            ids, volatile = await asyncio.gather(
                asyncio.shield(storing), self._volatile(user_input)
            )
        outlook = self.outlook
        # A session opened by key (HTTP, QQ, cron) exists before its first message.
        self.new_session = self.new_session or not history
        assert ids is not None
        self.stored.extend(ids)
        layers += volatile
        system, context = split_layers(layers)
        if self.turn.cancel_requested:  # cancelled before it began: the message is kept
            raise asyncio.CancelledError
        working = repair_history([*history, user_message])
        # The turn's own message: the volatile context (memories, time) goes with it.
        anchor = len(working) - 1
        job = meta.get("cron_job_id")
        self.tag = CallTag(
            "subagent" if outlook.agent else "cron" if user_input.channel == "cron" else "turn",
            session_id=self.session_id,
            channel=user_input.channel,
            job_id=job if isinstance(job, str) else "",
            turn_id=self.turn.id,
        )
        # Only the owner, in a chat that shows buttons, may raise the limit mid-turn.
        owner_chat = user_input.channel in OWNER_CHANNELS and not user_input.guest
        self.may_raise = user_input.interactive and user_input.budget_ask and owner_chat
        names = parts.prompt.offered(self.guest_tools, outlook, self.mode)
        # The control tools are the chat's own: a sub-agent's run is offered none.
        if outlook.agent is not None:
            names = [n for n in names if parts.tools.effect(n) != CONTROL]
        specs = parts.tools.specs(covered_tools(layers))  # SOUL.md's rules win
        offerable = [spec for spec in specs if spec.name in names]
        offered = self._in_mode(offerable)
        models = parts.models
        seen = Facts(
            channel=user_input.channel,
            text=without_files(user_input.full_text),
            image=bool(user_input.images),
            job_id=self.tag.job_id,
            skills=tuple(skill.name for skill in skills),
            # Estimated only when a rule bounds it (the whole history is read for it).
            input_tokens=(
                estimate_request_tokens(system + context, working, offered)
                if any(r.min_input_tokens or r.max_input_tokens for r in cfg.routing.rules)
                else 0
            ),
            session_id=self.session_id,
            persona=outlook.persona.name if outlook.persona else "",
        )
        route = parts.router.route(
            seen,
            active=(models.provider_name, models.model),
            override=models.override_of(meta),
            owner=models.owner_choice() if owner_chat else None,
            choice=outlook.choice,
        )
        if route.candidates:  # built now (an SDK import takes seconds), before the first step
            await models.provider(route.primary.provider)
        self.calls = calls_over = ModelCalls(
            route,
            models=models,
            meter=parts.meter,
            health=parts.router.health,
            decisions=parts.decisions,
            tag=self.tag,
            emit=self.turn.emit,
            clock=parts.clock,
            sleep=parts.sleep,
        )

        build = Requests(system, context, anchor, working, offered, self.thinking)

        self.tools = ToolRunner(
            parts,
            self.turn,
            self.trail,
            lambda: self.step,
            self.session_id,
            outlook,
            self.mode,
            self.guest_tools,
            self.interactive,
            self.current_mode,
        )
        limit = outlook.max_tool_calls or cfg.general.max_tool_calls
        calls_used = 0
        while True:
            self.step += 1
            self.turn.emit(StepStarted(self.step))
            await self.current_mode()  # switched since (/mode, a control tool): offered anew
            build.offered = self._in_mode(offerable)
            completion = await self._stream(build)
            provider = calls_over.provider
            assert provider is not None  # set by the call that answered
            if completion.stop_reason == "refusal":
                # Anthropic's streaming classifiers: the context must drop the turn, or
                # every later request is refused too.
                raise InputRefusedError("the model declined the request", provider=provider.name)
            # History keeps the text without <remember> tags: it is what the owner saw,
            # the facts live in memories (recalled as their own layer), and a model shown
            # its old tags would learn to repeat them.
            text, facts = extract_remember(completion.text)
            # A guest never writes the owner's memory; nor does a sub-agent's small job.
            if facts and self.guest_tools is None and outlook.agent is None:
                await self._remember(facts)
            calls = repair_calls(completion.tool_calls, parts.tools)
            assistant = Message("assistant", [])
            if text:
                assistant.content.append(TextBlock(text))
            for call in calls:
                assistant.content.append(ToolUseBlock(call.id, call.name, call.arguments))
            self.partial = []
            if text:
                self.replies.append(text)
            if not calls:
                self.turn.reply_whole = True
                if assistant.content:
                    self._store_answer(assistant)
                # Text written before tool calls is part of the answer too.
                reply = "\n\n".join(self.replies)
                await self.end(Completed(self.step, reply, usage=self.turn.spend()), "answered")
                return
            self.pending = assistant
            await self._store(assistant)
            blocks = thinking_blocks(completion.thinking)
            if blocks:  # sent back, unchanged, while this tool loop goes on (never stored)
                self.thinking[len(working)] = (str(calls_over.current), blocks)
            working.append(assistant)
            allowed = max(0, limit - calls_used)
            calls_used += len(calls)
            results = await self._run_tools(
                calls, allowed, limit, images=provider.capabilities.attachments
            )
            working.append(results)
            if calls_used > limit:
                notice = t("turn.tool_limit", limit=limit)
                self.turn.emit(AssistantDelta(self.step, notice))
                await self._store(Message("assistant", [TextBlock(notice)]))
                reply = "\n\n".join([*self.replies, notice])
                done = Completed(self.step, reply, usage=self.turn.spend())
                await self.end(done, "tool_limit")
                return

    async def current_mode(self) -> str:
        """The session's mode now: read again only when some session's mode changed
        since it was last read (a running turn follows /mode and its control tools)."""
        modes = self.parts.modes
        if modes.changes != self._modes_seen and self.session_id is not None:
            self._modes_seen = modes.changes
            self.session_mode = await modes.of_session(self.session_id)
        return self.session_mode

    def _in_mode(self, specs: list[ToolSpec]) -> list[ToolSpec]:
        """What the session's mode leaves of the turn's tools (plan, read_only: only
        the tools that read, and the control tools)."""
        tools = self.parts.tools
        return [spec for spec in specs if tools.visible_in(spec.name, self.session_mode)]

    async def _stream(self, build: Build) -> Completion:
        assert self.calls is not None
        completion: Completion | None = None
        tags = RememberFilter()  # every channel previews deltas: tags never reach them
        stream = self.calls.stream(
            self.step,
            build,
            admit=self._raise_limit if self.may_raise else None,
            counted=lambda entry: self.turn.count(entry.usage, entry.cost),
        )
        async with contextlib.aclosing(stream):
            async for event in stream:
                if isinstance(event, TextDelta):
                    self._show(tags.feed(event.text))
                elif isinstance(event, Completion):
                    completion = event
        assert completion is not None
        self._show(tags.flush())
        return completion

    async def _raise_limit(self, over: Over) -> bool:
        """Ask the owner whether to raise today's limit; True only for their "raise"."""
        step = money(self.parts.config.budget.step, over.currency)
        question = Question(
            self.turn.conversation,
            t("budget.ask", over=over.describe(), step=step),
            [t("budget.raise", step=step), t("budget.stop")],
            kind="budget",
        )
        self.turn.emit(
            AskUser(self.step, question.id, "", question.text, list(question.options), "budget")
        )
        answer = await self.parts.asks.wait(question, BUDGET_ASK_SECONDS)
        return answer.option == 0

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
            saved = await self.parts.memories.save_facts(
                facts, limit=allowance, scope=self.outlook.memory_scope
            )
        except (KernelError, ValueError):
            log.warning("turn %s: saving remembered facts failed", self.turn.id, exc_info=True)
            return
        self.remembered += len(saved)
        if saved:
            log.info("turn %s: %d new memories from remember tags", self.turn.id, len(saved))

    async def _run_tools(
        self, calls: list[RepairedCall], allowed: int, limit: int, *, images: bool = True
    ) -> Message:
        """Run the step's tool calls (:mod:`kernel.agent.turn_tools`) and store their
        results, the long ones kept as files."""
        assert self.tools is not None
        outcomes = await self.tools.run(calls, allowed, limit)
        blocks, message = results_message(calls, outcomes, images)
        cfg = self.parts.config
        artifacts = await asyncio.to_thread(
            save_long_results, blocks, cfg.data_dir / "tool_outputs", self.session_id, cfg.base_dir
        )
        self.pending = None
        await self._store(message, artifacts)
        if artifacts:  # issue 23: the files kept are listed per session
            kept = [cfg.base_dir / path for path in artifacts.values()]
            store = ArtifactStore(self.parts.store)
            saving = store.save_all(
                cfg.data_dir, kept, session_id=self.session_id, kind="tool_output", actor="model"
            )
            await asyncio.shield(saving)
        return message

    async def end(self, event: Completed | ErrorEvent, outcome: str) -> None:
        """Record the turn's end, then emit its final event (readers that stop at it
        find the record written); the event goes out even if recording is cancelled."""
        try:
            if not self.ended:
                self.ended = True
                code = event.code if isinstance(event, ErrorEvent) else ""
                ended = self.trail.answered(
                    self.session_id, self.turn, outcome, self.step, code, self.stored
                )
                await asyncio.shield(ended)
        finally:
            self.turn.emit(event)

    async def fail(self, event: ErrorEvent, outcome: str = "failed") -> None:
        try:
            await asyncio.shield(self.close_history(t("history.tool_failed")))
        finally:
            await self.end(event, outcome)

    async def set_aside(self, event: ErrorEvent, outcome: str = "refused") -> None:
        """The provider refused what this turn sent: every message the turn wrote (the
        owner's, its tool calls, the partial reply) is marked failed, so the session's
        next turn is sent without them. They stay in the history shown to people."""
        try:
            await asyncio.shield(self._mark_failed())
        finally:
            await self.end(event, outcome)

    async def _mark_failed(self) -> None:
        await self.close_history(t("history.tool_failed"))
        if self.session_id is None or not self.stored:
            return
        try:
            await self.parts.store.mark_failed(self.session_id, self.stored)
        except KernelError:
            log.warning("turn %s: could not set the refused messages aside", self.turn.id)

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


def _scope_meta(scope: ChatScope) -> dict[str, object] | None:
    meta: dict[str, object] = {}
    pairs = (("persona", scope.persona), ("project", scope.project), (MODE_KEY, scope.prompt_mode))
    for key, value in pairs:
        if value:
            meta[key] = value
    return meta or None
