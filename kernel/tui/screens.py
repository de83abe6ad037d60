"""The TUI's widgets beyond Textual's own: a line of plain text (never read as markup),
the modal that answers a question or an approval, and the audit screen."""

from __future__ import annotations

from datetime import UTC, tzinfo
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.events import Key
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from kernel.core.events import AskUser
from kernel.core.i18n import t
from kernel.tui.backend import AuditView
from kernel.tui.render import audit_line, printable, verdict_line

SHOWN_CHARS = 65_536  # of one line's text drawn (a 10 MB reply keeps the app responsive)


def shown(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else "…" + text[-SHOWN_CHARS:]


class TextLine(Static):
    """Plain text from a model, a tool or the history: shown as it is, so a reply that
    contains ``[bold]`` or ``[link=…]`` shows those characters."""

    def __init__(self, text: str, *, classes: str = "", id: str | None = None) -> None:
        super().__init__(Content(printable(shown(text))), markup=False, classes=classes, id=id)
        self._parts = [text]
        self._text: str | None = text
        self._tail = text[-SHOWN_CHARS:]
        self._length = len(text)

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = "".join(self._parts)
            self._parts = [self._text]
        return self._text

    def set_text(self, text: str) -> None:
        self._parts, self._text = [text], text
        self._tail, self._length = text[-SHOWN_CHARS:], len(text)
        self.update(Content(printable(shown(text))))

    def append(self, more: str) -> None:
        """A streamed delta: kept whole, drawn from the last SHOWN_CHARS only, so a
        long reply costs the same per delta at its end as at its start (review R3)."""
        self._parts.append(more)
        self._text = None
        self._tail = (self._tail + more)[-SHOWN_CHARS:]
        self._length += len(more)
        tail = self._tail if self._length <= SHOWN_CHARS else "…" + self._tail
        self.update(Content(printable(tail)))


class AskScreen(ModalScreen[int | None]):
    """A question (``ask_user``) or an approval from the running turn: its options as
    buttons (clicked, or Tab and Enter, or the option's number); the chosen index is the
    result (None: closed without an answer)."""

    DEFAULT_CSS = """
    AskScreen { align: center middle; }
    AskScreen > Vertical {
        width: 80%; max-width: 100; height: auto; max-height: 90%;
        border: thick $accent; background: $surface; padding: 1 2;
    }
    AskScreen .title { text-style: bold; }
    AskScreen Horizontal { height: auto; margin-top: 1; }
    AskScreen Button { margin-right: 1; }
    """

    def __init__(self, ask: AskUser) -> None:
        super().__init__()
        self.ask = ask
        self.options = list(ask.options)

    def compose(self) -> ComposeResult:
        kind = "tui.ask_approval" if self.ask.kind == "approval" else "tui.ask_question"
        with Vertical():
            yield TextLine(t(kind), classes="title")
            yield TextLine(self.ask.question, id="question")
            if self.ask.details:  # an approval's full arguments
                yield TextLine(self.ask.details, id="details")
            with Horizontal():
                for n, option in enumerate(self.options):
                    yield Button(Content(printable(f"{n + 1}  {option}")), id=f"option-{n}")

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel_turn", show=False),  # cancels the turn that asks
    ]

    async def action_cancel_turn(self) -> None:
        await self.app.run_action("cancel_turn")

    def on_key(self, event: Key) -> None:
        if event.character and event.character.isdigit():
            n = int(event.character) - 1
            if 0 <= n < len(self.options):
                event.stop()
                self.dismiss(n)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        name = event.button.id or ""
        if name.startswith("option-"):
            self.dismiss(int(name.removeprefix("option-")))


class AuditScreen(ModalScreen[None]):
    """The open chat's audit events, oldest first, and the verify line of its chain."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,f3", "close", show=False),
    ]
    DEFAULT_CSS = """
    AuditScreen { align: center middle; }
    AuditScreen > Vertical {
        width: 95%; height: 90%; border: thick $accent; background: $surface; padding: 0 1;
    }
    AuditScreen .title { text-style: bold; }
    AuditScreen #audit-rows { height: 1fr; }
    AuditScreen #verdict { margin-top: 1; text-style: bold; }
    """

    def __init__(
        self, title: str, view: AuditView | None, error: str = "", *, zone: tzinfo = UTC
    ) -> None:
        super().__init__()
        self.title_text = title
        self.view = view
        self.error = error
        self.zone = zone  # the owner's: the chat list shows its times in it too

    def compose(self) -> ComposeResult:
        with Vertical():
            yield TextLine(self.title_text, classes="title")
            with VerticalScroll(id="audit-rows"):
                if self.view is None:
                    yield TextLine(t("console.error", message=self.error), classes="error")
                elif not self.view.items:
                    yield TextLine(t("tui.audit_empty"), classes="note")
                else:
                    for item in self.view.items:
                        yield TextLine(audit_line(item, self.zone), classes="audit-row")
            if self.view is not None:
                yield TextLine(verdict_line(self.view.verdict), id="verdict")
            yield Button(t("tui.close"), id="close")

    def on_mount(self) -> None:
        self.query_one("#audit-rows", VerticalScroll).scroll_end(animate=False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
