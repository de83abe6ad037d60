"""``kernel chat``: a terminal conversation with the in-process agent (channel ``console``).

Replies stream to stdout as they arrive; each tool call is one line, each update of the
plan (todo_write) one compact block. Ctrl-C cancels the running turn, not the program
(Ctrl-C while idle, ``/exit`` or end of input quits). Works with a pipe: lines are taken
one at a time, each turn finished before the next line is read, and the exit code is 1
if any turn ended in an error.
Commands are the terminal's set of ``kernel.commands`` (:mod:`kernel.commands.terminal`,
the same through the running Kernel's sidecar); a refusal is printed as ``✗ <message>``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from kernel.agent.agent import UserInput
from kernel.commands import Commands, Reply
from kernel.commands.terminal import CONVERSATION, is_command, render, reply_json, run_line
from kernel.config import Config
from kernel.core.errors import KernelError
from kernel.core.events import (
    AskUser,
    AssistantDelta,
    Completed,
    ErrorEvent,
    ModelRetrying,
    ModelSwitched,
    PlanUpdated,
    ToolCall,
    ToolResult,
    TurnEvent,
)
from kernel.core.i18n import t
from kernel.core.platform import install_stop
from kernel.core.turns import Turn
from kernel.tools.todo import NAME as PLAN_TOOL

if TYPE_CHECKING:
    from kernel.commands.parts import KernelParts, LocalCore

PLAN_MARKS = {"pending": "☐", "in_progress": "▶", "completed": "☑"}


class ConsoleChat:
    def __init__(
        self,
        kernel: KernelParts,
        out: IO[str],
        err: IO[str],
        interactive: bool,
        lines: asyncio.Queue[str | None] | None = None,
    ) -> None:
        self.agent = kernel.agent
        self.commands = Commands(kernel)
        self.lines = lines  # the input; a question from the turn reads its answer here
        self.out = out
        self.err = err
        self.interactive = interactive
        self.failed = False
        self._line_open = False

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self._line_open = not text.endswith("\n")

    def line(self, text: str) -> None:
        if self._line_open:
            self.write("\n")
        self.write(text + "\n")

    async def handle(self, text: str) -> bool:
        """Handle one input line; False means quit."""
        text = text.strip()
        if not text:
            return True
        if is_command(text):  # a skill or a template ("/prompts:<name> …") is a message
            return await self.command(text)
        await self.converse(text)
        return True

    async def converse(self, text: str) -> None:
        try:
            turn = self.agent.start_turn(CONVERSATION, UserInput(text, channel="console"))
        except KernelError as exc:
            self.line(t("console.error", message=exc))
            return
        await self._follow(turn)

    async def _follow(self, turn: Turn) -> None:
        asking: asyncio.Task[None] | None = None
        try:
            async for event in turn:
                if isinstance(event, AskUser):
                    asking = asyncio.get_running_loop().create_task(self._answer(event))
                elif isinstance(event, ToolResult | Completed | ErrorEvent) and asking:
                    asking.cancel()  # settled otherwise (timeout, cancel): stop reading
                self._show(event)
        finally:
            if asking is not None:
                asking.cancel()

    async def _answer(self, event: AskUser) -> None:
        """Print the options and wait for the owner's number on the next input line."""
        self.line(event.question)
        if event.details:  # an approval's full arguments: a terminal has room for them
            self.line(event.details)
        for n, option in enumerate(event.options, start=1):
            self.line(f"  {n}) {option}")
        while self.lines is not None:
            self.write(t("console.ask_prompt", count=len(event.options)))
            line = await self.lines.get()
            if line is None:
                self.lines.put_nowait(None)  # end of input: leave it for the main loop
                return
            choice = line.strip()
            if choice.isdigit() and 1 <= int(choice) <= len(event.options):
                self.agent.asks.answer(event.id, int(choice) - 1)
                return

    def _show(self, event: TurnEvent) -> None:
        if isinstance(event, AssistantDelta):
            self.write(event.delta)
        elif isinstance(event, PlanUpdated):
            self.line(plan_block(event.items))
        elif isinstance(event, ToolCall) and event.name == PLAN_TOOL:
            pass  # its plan event shows what it did
        elif isinstance(event, ToolResult) and event.name == PLAN_TOOL and event.ok:
            pass
        elif isinstance(event, ToolCall):
            args = json.dumps(event.arguments, ensure_ascii=False)
            self.line(t("console.tool_call", name=event.name, args=_clip(args, 80)))
        elif isinstance(event, ModelSwitched | ModelRetrying):  # a failover, a retry
            self.line(event.describe())
        elif isinstance(event, ToolResult):
            key = "console.tool_result_ok" if event.ok else "console.tool_result_err"
            self.line(t(key, summary=_clip(event.summary, 100)))
        elif isinstance(event, Completed):
            if event.cancelled:
                self.line(f"[{t('turn.cancelled')}]")
            elif self._line_open:
                self.write("\n")
        elif isinstance(event, ErrorEvent):
            self.failed = True
            if self._line_open:
                self.write("\n")
            self.err.write(t("console.error", message=event.message) + "\n")
            self.err.flush()

    async def command(self, text: str) -> bool:
        if text.partition(" ")[0] in ("/exit", "/quit"):
            return False
        try:
            await self._render(await run_line(self.commands, text))
        except KernelError as exc:
            self.line(t("console.error", message=exc))
        return True

    async def _render(self, reply: Reply) -> None:
        if shown := render(reply_json(reply)):
            self.line(shown)
        if reply.turn is not None:  # /retry: shown as the turn of a message
            await self._follow(reply.turn)
        if reply.follow_up is not None:  # the terminal has nothing else to do meanwhile
            await self._render(await reply.follow_up())


def plan_block(items: list[dict[str, str]]) -> str:
    """The plan as one compact block: a title line, then one line per item."""
    if not items:
        return t("plan.empty")
    done = sum(item.get("status") == "completed" for item in items)
    lines = [t("plan.title", done=done, total=len(items))]
    for item in items:
        mark = PLAN_MARKS.get(item.get("status", ""), PLAN_MARKS["pending"])
        lines.append(f"  {mark} {_clip(item.get('content', ''), 100)}")
    return "\n".join(lines)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _read_lines(
    stream: IO[str], queue: asyncio.Queue[str | None], loop: asyncio.AbstractEventLoop
) -> None:
    for line in stream:
        loop.call_soon_threadsafe(queue.put_nowait, line)
    loop.call_soon_threadsafe(queue.put_nowait, None)


async def run_chat(
    config: Config,
    make_kernel: Callable[[Config], LocalCore],
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    stdin = stdin or sys.stdin
    out, err = stdout or sys.stdout, stderr or sys.stderr
    interactive = stdin.isatty()
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    # A daemon thread, so a blocked read never holds up the exit.
    threading.Thread(target=_read_lines, args=(stdin, lines, loop), daemon=True).start()
    kernel = make_kernel(config)
    # Telegram never runs in this process: deliveries to it fail at once, not after a wait.
    kernel.channel_registry.detach("telegram")
    async with kernel:
        chat = ConsoleChat(kernel, out, err, interactive, lines)

        def on_interrupt() -> None:
            if not kernel.agent.sessions.cancel(CONVERSATION):
                lines.put_nowait(None)

        restore = install_stop(loop, on_interrupt, signals=("SIGINT",))
        try:
            if interactive:
                chat.line(
                    t(
                        "console.welcome",
                        provider=kernel.agent.selection.provider_name,
                        model=kernel.agent.selection.model,
                    )
                )
            while True:
                if interactive:
                    chat.write("› ")
                line = await lines.get()
                if line is None or not await chat.handle(line):
                    break
        finally:
            restore()
        if interactive:
            chat.line(t("console.bye"))
    return 1 if chat.failed else 0
