"""One step's tool calls: their arguments repaired once, each run (or refused) as the
turn's scope allows, concurrently, with the events and the audit rows of each, and the
results as the message the model reads next.

:class:`TurnRun` builds one :class:`ToolRunner` per turn once it knows its session,
scope and mode; storing the results stays the turn's (:mod:`kernel.agent.turn`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kernel.agent.prompt_modes import ASK_TOOL, ModeChoice
from kernel.agent.scope import Outlook
from kernel.agent.slimming import summarize_tool_result
from kernel.agent.trail import Trail
from kernel.agent.turn_parts import TurnParts
from kernel.core.asks import Answer, Question
from kernel.core.errors import ToolError
from kernel.core.events import AskUser, PlanUpdated, ToolCall, ToolProgress, ToolResult
from kernel.core.i18n import t
from kernel.core.messages import ImageBlock, Message, TextBlock, ToolResultBlock
from kernel.core.provider import RawToolCall
from kernel.core.turns import Turn
from kernel.tools.registry import ToolContext, ToolOutcome, ToolRegistry
from kernel.tools.repair import repair_arguments, resolve_tool_name


@dataclass(frozen=True, slots=True)
class RepairedCall:
    """A tool call with its arguments repaired once, for the history, the events and the
    registry alike. ``repaired`` false: no JSON object could be recovered (``arguments``
    is then ``{}``) and the registry refuses the call in its own words."""

    raw: RawToolCall
    arguments: dict[str, Any]
    repaired: bool

    @property
    def id(self) -> str:
        return self.raw.id

    @property
    def name(self) -> str:
        return self.raw.name


def repair_calls(raw: list[RawToolCall], tools: ToolRegistry) -> list[RepairedCall]:
    """Each call's arguments repaired once, against the schema of the tool its name
    resolves to (as the registry resolves it)."""
    if not raw:
        return []
    schemas = {spec.name: spec.parameters for spec in tools.specs()}
    calls: list[RepairedCall] = []
    for call in raw:
        name = resolve_tool_name(call.name, list(schemas))
        schema = schemas[name] if name is not None else {}
        try:
            calls.append(RepairedCall(call, repair_arguments(call.arguments, schema), True))
        except ToolError:
            calls.append(RepairedCall(call, {}, False))
    return calls


def results_message(
    calls: list[RepairedCall], outcomes: list[ToolOutcome], images: bool
) -> tuple[list[ToolResultBlock], Message]:
    """The step's results (its blocks, and the message they make). Images a tool
    returned follow the results, each labelled with its tool (``images`` false: the
    provider takes none, so the model is told instead)."""
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
    return blocks, Message("user", [*blocks, *extra])


@dataclass(frozen=True, slots=True)
class ToolRunner:
    """Runs one turn's tool calls in its session, as its scope and mode allow.
    ``step``: the turn's current step, read when an event is emitted; ``session_mode``:
    the session's act, plan or read_only at the moment of each call."""

    parts: TurnParts
    turn: Turn
    trail: Trail
    step: Callable[[], int]
    session_id: int | None
    outlook: Outlook
    mode: ModeChoice
    guest_tools: tuple[str, ...] | None
    interactive: bool
    session_mode: Callable[[], Awaitable[str]]

    async def run(self, calls: list[RepairedCall], allowed: int, limit: int) -> list[ToolOutcome]:
        """Run the step's tool calls concurrently; calls past the cap get an error result."""
        for call in calls:
            self.turn.emit(ToolCall(self.step(), call.id, call.name, dict(call.arguments)))

        async def run(index: int, call: RepairedCall) -> ToolOutcome:
            began, code = time.monotonic(), ""
            try:
                if index >= allowed:
                    msg = t("turn.tool_limit", limit=limit)
                    outcome, code = ToolOutcome(call.name, False, msg, {}), "tool_limit"
                else:
                    outcome = await self._call(call)
            except asyncio.CancelledError:
                gone = ToolOutcome(call.name, False, "", call.arguments)
                await asyncio.shield(self._tool_done(call, gone, began, "cancelled"))
                raise
            await self._tool_done(call, outcome, began, code)
            summary = summarize_tool_result(outcome.content)
            self.turn.emit(ToolResult(self.step(), call.id, call.name, outcome.ok, summary))
            return outcome

        return list(await asyncio.gather(*(run(i, c) for i, c in enumerate(calls))))

    async def _tool_done(
        self, call: RepairedCall, outcome: ToolOutcome, began: float, code: str
    ) -> None:
        ms = round((time.monotonic() - began) * 1000)
        await self.trail.tool(
            self.session_id, self.step(), call.id, call.arguments, outcome, ms, code
        )

    async def _call(self, call: RepairedCall) -> ToolOutcome:
        if self.guest_tools is not None and call.name not in self.guest_tools:
            # Not offered to a guest: a name the model made up must not run either.
            return ToolOutcome(call.name, False, t("turn.guest_tool", name=call.name), {})
        name = resolve_tool_name(call.name, self.parts.tools.names()) or call.name
        if not self.outlook.allows(name):
            # Outside the persona's (or sub-agent's) allow-list: not offered, never run.
            return ToolOutcome(call.name, False, self._not_allowed(name), {})
        if name == ASK_TOOL and not self.mode.asks:
            # Codex outside plan: request_user_input (ask_user) is not offered; it fails.
            text = t("turn.ask_not_in_mode", mode=self.mode.collaboration)
            return ToolOutcome(call.name, False, text, {})
        context = self._context(call)
        context.session_mode = await self.session_mode()  # the registry refuses what it holds
        if call.repaired:
            arguments = dict(call.arguments)  # the registry's copy: history keeps its own
            return await self.parts.tools.call(call.name, arguments, context, repaired=True)
        # Unrepairable: the registry words the refusal the model reads.
        return await self.parts.tools.call(call.name, call.raw.arguments, context)

    def _context(self, call: RepairedCall) -> ToolContext:
        async def ask(
            question: str,
            options: list[str],
            *,
            kind: str = "question",
            seconds: float = 300.0,
            markdown: bool = False,
            details: str = "",
        ) -> Answer:
            asked = Question(
                self.turn.conversation,
                question,
                list(options),
                call.id,
                kind,
                markdown,
                details=details,
            )
            event = AskUser(
                self.step(), asked.id, call.id, question, list(options), kind, markdown, details
            )
            self.turn.emit(event)
            return await self.parts.asks.wait(asked, seconds)

        def progress(text: str) -> None:
            self.turn.emit(ToolProgress(self.step(), call.id, call.name, text))

        def plan(items: list[dict[str, str]]) -> None:
            self.turn.emit(PlanUpdated(self.step(), [dict(item) for item in items]))

        return self.outlook.tool_context(
            self.parts.config.base_dir,
            session_id=self.session_id,
            conversation=self.turn.conversation,
            progress=progress,
            tool_call_id=call.id,
            ask=ask if self.interactive else None,
            turn=self.turn,
            guest_tools=self.guest_tools,
            plan=plan,
        )

    def _not_allowed(self, name: str) -> str:
        refuser = self.outlook.refuser(name)
        if refuser is None:  # only the depth refuses it
            return t("turn.subagent_depth", name=name)
        kind = t(f"profile.kind.{refuser.kind}")
        return t("turn.tool_not_allowed", name=name, kind=kind, profile=refuser.name)


def _with_image_note(outcome: ToolOutcome, shown: bool) -> str:
    if not outcome.images:
        return outcome.content
    key = "tool.images_follow" if shown else "tool.images_not_shown"
    return f"{outcome.content}\n{t(key, count=len(outcome.images))}"
