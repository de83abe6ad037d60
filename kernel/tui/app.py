"""``kernel tui``: the full-screen terminal client (Textual), over any :class:`Backend`.

Left, the console chats (a new one first); right, the open chat: its history, the reply
streaming in, one line per tool call and result, model switches and errors in words,
the turn's plan as it stands, and the input line. Keys: Enter sends; Esc or Ctrl+C
(or ``/cancel``) cancels the running turn; F2 opens a new chat; F3 (or ``a`` outside
the input) shows the chat's audit with its verify line; Ctrl+Q (or ``q`` outside the
input, ``/quit``) quits, a running turn cancelled first. A question or an approval
from the turn opens a modal with its options as buttons.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import tzinfo
from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, ListItem, ListView
from textual.worker import Worker

from kernel.core.events import (
    AskUser,
    AssistantDelta,
    Completed,
    ErrorEvent,
    ModelSwitched,
    PlanUpdated,
    ToolCall,
    ToolProgress,
    ToolResult,
    TurnEvent,
)
from kernel.core.i18n import t
from kernel.tui.backend import Backend, BackendError, ChatRef
from kernel.tui.render import (
    Line,
    chat_label,
    error_line,
    history_lines,
    owner_line,
    plan_text,
    switch_line,
    tool_call_line,
    tool_progress_line,
    tool_result_line,
)
from kernel.tui.screens import AskScreen, AuditScreen, TextLine

log = logging.getLogger(__name__)

QUIT_WAIT = 30.0  # seconds a quit waits for the cancelled turn to write its history
COMMANDS = ("/cancel", "/new", "/audit", "/quit", "/exit")
MESSAGE_PREFIXES = ("/skill/", "/prompts:")  # a skill or a template is a message


class ChatItem(ListItem):
    def __init__(self, chat: ChatRef, zone: tzinfo) -> None:
        super().__init__()
        self.chat = chat
        self.zone = zone

    def compose(self) -> ComposeResult:
        yield TextLine(chat_label(self.chat, self.zone))


class KernelTui(App[int]):
    TITLE = "Kernel"
    CSS = """
    #side { width: 32; border-right: solid $primary; }
    #side .heading { text-style: bold; padding: 0 1; }
    #chats { height: 1fr; }
    #main { width: 1fr; }
    #where { height: 1; color: $text-muted; padding: 0 1; }
    #conversation { height: 1fr; padding: 0 1; }
    #plan { height: auto; max-height: 12; border: round $accent; padding: 0 1; }
    #keys { height: 1; color: $text-muted; padding: 0 1; }
    .owner { color: $accent; margin-top: 1; }
    .tool { color: $text-muted; }
    .note { color: $warning; }
    .error { color: $error; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel_turn", show=False),
        Binding("ctrl+c", "cancel_turn", show=False, priority=True),
        Binding("f2,ctrl+n", "new_chat", show=False),
        Binding("f3", "audit", show=False),
        Binding("a", "audit", show=False),
        Binding("q", "quit_tui", show=False),
        Binding("ctrl+q", "quit_tui", show=False, priority=True),
    ]

    def __init__(self, backend: Backend) -> None:
        super().__init__()
        self.backend = backend
        self.chat = ChatRef()
        self.chat_list: list[ChatRef] = []
        self.turn: Worker[None] | None = None
        self.live: TextLine | None = None  # the reply streaming in
        self.streamed = False
        self.tools: dict[str, TextLine] = {}  # tool call id → its line (progress updates it)
        self.asking: AskScreen | None = None
        self.quitting = False

    # ----- layout --------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="side"):
                yield TextLine(t("tui.chats"), classes="heading")
                yield ListView(id="chats")
            with Vertical(id="main"):
                yield TextLine(self.backend.where, id="where")
                yield VerticalScroll(id="conversation")
                yield TextLine("", id="plan")
                yield Input(placeholder=t("tui.placeholder"), id="input")
        yield TextLine(t("tui.keys"), id="keys")

    async def on_mount(self) -> None:
        self.query_one("#plan", TextLine).display = False
        self.query_one("#input", Input).focus()
        failed = await self.refresh_chats()
        await self.open_chat(self.chat_list[0] if self.chat_list else ChatRef())
        if failed:
            self.say(failed)

    @property
    def busy(self) -> bool:
        return self.turn is not None and not self.turn.is_finished

    @property
    def conversation(self) -> VerticalScroll:
        return self.query_one("#conversation", VerticalScroll)

    def say(self, line: Line) -> TextLine:
        widget = TextLine(line.text, classes=line.kind)
        self.conversation.mount(widget)
        self.conversation.scroll_end(animate=False)
        return widget

    def say_line(self, line: Line) -> Line:
        self.say(line)
        return line

    def note(self, text: str) -> None:
        self.say(Line("note", text))

    def show_plan(self, items: list[dict[str, Any]] | None) -> None:
        plan = self.query_one("#plan", TextLine)
        plan.display = bool(items)
        plan.set_text(plan_text(items) if items else "")

    # ----- chats ---------------------------------------------------------------------

    async def refresh_chats(self) -> Line | None:
        """List the chats again; the error line when they cannot be listed."""
        failed: Line | None = None
        try:
            chats = await self.backend.chats()
        except BackendError as exc:
            failed, chats = error_line(str(exc)), []
        self.chat_list = chats
        if self.chat.stored:
            self.chat = next((c for c in chats if c.ident == self.chat.ident), self.chat)
        view = self.query_one("#chats", ListView)
        await view.clear()
        zone = self.backend.zone
        await view.extend([ChatItem(ChatRef(), zone), *(ChatItem(chat, zone) for chat in chats)])
        self._mark_open()
        return failed

    def _mark_open(self) -> None:
        view = self.query_one("#chats", ListView)
        if not self.chat.stored:
            view.index = 0
            return
        for n, chat in enumerate(self.chat_list, start=1):
            if chat.ident == self.chat.ident:
                view.index = n

    async def open_chat(self, chat: ChatRef) -> None:
        self.chat = chat
        self._mark_open()
        self.show_plan(None)
        await self.conversation.remove_children()
        title = chat_label(chat, self.backend.zone).splitlines()[0]
        self.query_one("#where", TextLine).set_text(f"{self.backend.where} · {title}")
        try:
            lines = history_lines(await self.backend.history(chat))
        except BackendError as exc:
            lines = [error_line(str(exc))]
        for line in lines:
            self.say(line)

    async def on_list_view_selected(self, event: ListView.Selected) -> None:
        event.stop()
        if not isinstance(event.item, ChatItem):
            return
        if self.busy:
            self.note(t("turn.busy"))
            self._mark_open()
            return
        await self.open_chat(event.item.chat)
        self.query_one("#input", Input).focus()

    # ----- input ---------------------------------------------------------------------

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        event.input.value = ""
        if not text:
            return
        command = text.split()[0]
        if command in COMMANDS:
            actions = {
                "/cancel": self.action_cancel_turn,
                "/new": self.action_new_chat,
                "/audit": self.action_audit,
                "/quit": self.action_quit_tui,
                "/exit": self.action_quit_tui,
            }
            await actions[command]()
            return
        if text.startswith("/") and not text.startswith(MESSAGE_PREFIXES):
            self.note(t("tui.unknown_command", cmd=command))
            return
        if self.busy:
            self.note(t("turn.busy"))
            return
        self.say(owner_line(text))
        self.turn = self.run_worker(self._turn(text), group="turn", exit_on_error=False)

    # ----- a turn --------------------------------------------------------------------

    async def _turn(self, text: str) -> None:
        self.live, self.streamed, self.tools = None, False, {}
        self.show_plan(None)
        said: Line | None = None
        try:
            async for event in self.backend.send(self.chat, text):
                self.show(event)
        except BackendError as exc:
            said = self.say_line(error_line(str(exc)))
        except Exception as exc:  # shown, not a crash of the whole screen
            log.error("tui: the turn's stream failed (%s)", type(exc).__name__)
            said = self.say_line(error_line(t("tui.failed", kind=type(exc).__name__)))
        finally:
            self.live = None
            self._close_ask()
        if self.quitting:
            return
        failed = await self.refresh_chats()
        if failed is not None and failed != said:  # said once, not twice
            self.say(failed)

    def show(self, event: TurnEvent) -> None:
        if isinstance(event, AssistantDelta):
            if self.live is None:
                self.live = self.say(Line("assistant", event.delta))
            else:
                self.live.append(event.delta)
                self.conversation.scroll_end(animate=False)
            self.streamed = True
        elif isinstance(event, ToolCall):
            self.live = None  # text after a tool call is a new paragraph
            self.tools[event.id] = self.say(tool_call_line(event))
        elif isinstance(event, ToolProgress):
            line = self.tools.get(event.id)
            if line is not None:
                line.set_text(tool_progress_line(event).text)
        elif isinstance(event, ToolResult):
            self.say(tool_result_line(event))
            if self.asking is not None and self.asking.ask.tool_call_id == event.id:
                self._close_ask()  # settled otherwise (timed out): the modal is stale
        elif isinstance(event, AskUser):
            self.live = None
            self._ask(event)
        elif isinstance(event, ModelSwitched):
            self.live = None
            self.say(switch_line(event))
        elif isinstance(event, PlanUpdated):
            self.show_plan(event.items)
        elif isinstance(event, Completed):
            self.live = None
            if event.cancelled:
                self.note(f"[{t('turn.cancelled')}]")
            elif not self.streamed and event.reply:  # /new, a direct tool call
                self.say(Line("assistant", event.reply))
        elif isinstance(event, ErrorEvent):
            self.live = None
            self.say(error_line(event.message))

    # ----- questions -----------------------------------------------------------------

    def _ask(self, ask: AskUser) -> None:
        self._close_ask()
        self.asking = AskScreen(ask)

        def answered(choice: int | None) -> None:
            self.asking = None
            if choice is not None:
                self.run_worker(self._answer(ask, choice), exit_on_error=False)

        self.push_screen(self.asking, callback=answered)

    async def _answer(self, ask: AskUser, choice: int) -> None:
        options = ask.options
        try:
            resolved = await self.backend.answer(ask.id, choice)
        except BackendError as exc:
            self.say(error_line(str(exc)))
            return
        if resolved:
            self.note(t("tui.answered", option=options[choice] if choice < len(options) else ""))
        else:
            self.note(t("tg.ask_gone"))

    def _close_ask(self) -> None:
        asking, self.asking = self.asking, None
        if asking is not None and self.screen is asking:
            asking.dismiss(None)

    # ----- actions -------------------------------------------------------------------

    async def action_cancel_turn(self) -> None:
        if not self.busy:
            self.notify(t("tui.nothing_to_cancel"))
            return
        try:
            cancelled = await self.backend.cancel(self.chat)
        except BackendError as exc:
            self.say(error_line(str(exc)))
            return
        if cancelled:
            self.notify(t("tui.cancelling"))

    async def action_new_chat(self) -> None:
        if self.busy:
            self.note(t("turn.busy"))
            return
        await self.open_chat(ChatRef())
        self.query_one("#input", Input).focus()

    async def action_audit(self) -> None:
        if not self.chat.stored:
            self.notify(t("tui.audit_none"))
            return
        zone = self.backend.zone
        title = t("tui.audit_title", chat=chat_label(self.chat, zone).splitlines()[0])
        try:
            screen = AuditScreen(title, await self.backend.audit(self.chat), zone=zone)
        except BackendError as exc:
            screen = AuditScreen(title, None, str(exc), zone=zone)
        await self.push_screen(screen)

    async def action_quit_tui(self) -> None:
        if self.quitting:
            return
        self.quitting = True
        self.run_worker(self._quit(), exit_on_error=False)

    async def _quit(self) -> None:
        """A running turn is cancelled and awaited (it writes a valid history) first."""
        turn = self.turn
        if turn is not None and not turn.is_finished:
            with contextlib.suppress(BackendError):
                await self.backend.cancel(self.chat)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(turn.wait(), QUIT_WAIT)
        self.exit(0)
