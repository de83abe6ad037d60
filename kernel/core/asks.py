"""Questions a running turn puts to the owner, and the answers that resume it.

A tool (or the approval gate in front of a tool) asks through ``ToolContext.ask``; the
turn emits an ``ask_user`` event, a channel shows the options (Telegram: inline
buttons), and the owner's choice comes back through :meth:`AskRegistry.answer`. The
asking coroutine waits with a timeout; a cancelled turn stops waiting at once, and the
question is withdrawn in every path, so a late answer finds nothing to resolve.
Listeners (:meth:`AskRegistry.on_end`) hear how each wait ended, so a channel can close
a question's message the moment it stops counting (a CLI's permission prompt times out
while the delegation goes on). (Seed 002's pending registry; seed 001's ``ask_user``.)
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum


class AskOutcome(Enum):
    ANSWERED = "answered"
    TIMEOUT = "timeout"
    UNDELIVERED = "undelivered"  # the channel could not show the question at all


class AnswerResult(Enum):
    RESOLVED = "resolved"
    UNKNOWN = "unknown"  # no such question waits: answered, timed out, or cancelled
    BAD_OPTION = "bad_option"


@dataclass(slots=True)
class Question:
    conversation: str
    text: str
    options: list[str]
    tool_call_id: str = ""
    kind: str = "question"  # "approval" for the approval gate, "permission" for a CLI's
    markdown: bool = False  # the text is Markdown (a command in a code block, a diff)
    # Answered only in the owner's own chat (Telegram): a privileged change's confirmation
    # is never listed to, nor answered by, the sidecar's callers it guards against.
    owner_only: bool = False
    details: str = ""  # what the question is about in full (an approval's arguments)
    id: str = field(default_factory=lambda: secrets.token_hex(4))


@dataclass(slots=True)
class Answer:
    outcome: AskOutcome
    choice: int | None = None  # the index into ``Question.options``
    text: str | None = None  # the owner's own words instead of an option (a typed reply)

    @property
    def option(self) -> int | None:
        return self.choice if self.outcome is AskOutcome.ANSWERED else None


_UNDELIVERED = -1

log = logging.getLogger(__name__)

# How a wait ended: the answer, or None when the waiter was cancelled (/cancel, the
# tool or delegation ending, Kernel stopping).
EndListener = Callable[[Question, Answer | None], None]


class AskRegistry:
    def __init__(self) -> None:
        self._waiting: dict[str, tuple[Question, asyncio.Future[int | str]]] = {}
        self._listeners: list[EndListener] = []

    def on_end(self, listener: EndListener) -> Callable[[], None]:
        """Call ``listener`` (synchronously, it must not block) each time a wait ends;
        returns the function that stops it."""
        self._listeners.append(listener)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return stop

    async def wait(self, question: Question, seconds: float) -> Answer:
        """Wait for the owner's choice; the question is withdrawn however this ends."""
        future: asyncio.Future[int | str] = asyncio.get_running_loop().create_future()
        self._waiting[question.id] = (question, future)
        answer: Answer | None = None
        try:
            try:
                choice = await asyncio.wait_for(future, seconds)
            except TimeoutError:
                answer = Answer(AskOutcome.TIMEOUT)
                return answer
            if isinstance(choice, str):
                answer = Answer(AskOutcome.ANSWERED, text=choice)
            elif choice == _UNDELIVERED:
                answer = Answer(AskOutcome.UNDELIVERED)
            else:
                answer = Answer(AskOutcome.ANSWERED, choice)
            return answer
        finally:
            self._waiting.pop(question.id, None)
            self._ended(question, answer)

    def _ended(self, question: Question, answer: Answer | None) -> None:
        for listener in list(self._listeners):
            try:
                listener(question, answer)
            except Exception as exc:  # a listener's fault must not change the answer
                log.error("an ask listener failed: %s", type(exc).__name__)

    def undelivered(self, question_id: str) -> None:
        """The channel could not show the question: stop waiting now, not at the timeout."""
        entry = self._waiting.get(question_id)
        if entry is not None and not entry[1].done():
            entry[1].set_result(_UNDELIVERED)

    def answer(self, question_id: str, choice: int) -> AnswerResult:
        entry = self._waiting.get(question_id)
        if entry is None or entry[1].done():
            return AnswerResult.UNKNOWN
        question, future = entry
        if not 0 <= choice < len(question.options):
            return AnswerResult.BAD_OPTION
        future.set_result(choice)
        return AnswerResult.RESOLVED

    def answer_text(self, question_id: str, text: str) -> AnswerResult:
        """The owner answered in their own words (a message sent while a question waits)."""
        entry = self._waiting.get(question_id)
        if entry is None or entry[1].done():
            return AnswerResult.UNKNOWN
        entry[1].set_result(text)
        return AnswerResult.RESOLVED

    def get(self, question_id: str) -> Question | None:
        entry = self._waiting.get(question_id)
        return entry[0] if entry else None

    def waiting(self, conversation: str | None = None) -> list[Question]:
        return [q for q, _ in self._waiting.values() if conversation in (None, q.conversation)]

    def shared(self) -> list[Question]:
        """The questions any of the owner's front ends may list and answer (not the
        ``owner_only`` ones)."""
        return [q for q in self.waiting() if not q.owner_only]
