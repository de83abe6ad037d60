"""What a turn is given: the owner's :class:`UserInput` and the agent's collaborators
(:class:`TurnParts`), built once and handed to every turn."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from kernel.agent.models import ModelSelection
from kernel.agent.prompt import SystemPrompt
from kernel.agent.scope import Scopes
from kernel.agent.session_modes import SessionModes
from kernel.audit import AuditLog
from kernel.config import Config
from kernel.core.asks import AskRegistry
from kernel.core.messages import ImageBlock, Message, TextBlock
from kernel.core.provider import Sleep
from kernel.memory.memories import Memories
from kernel.routing import Router
from kernel.skills import SkillLibrary
from kernel.spend import Meter
from kernel.store.db import Store
from kernel.store.decisions import DecisionStore
from kernel.tools.registry import ToolRegistry


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
    # False: a turn over a day or month limit ends with budget_exceeded instead of asking
    # the owner to raise it (HTTP callers get the refusal in the error model).
    budget_ask: bool = True
    # False: the text is already what the owner meant (a retry of a stored message): a
    # "/prompts:…" in it is taken as it is, not expanded again.
    expand: bool = True
    # The audit trail's actor ("" : told by the channel, see trail.actor_of: "api" for a
    # sidecar client), and whether this is /retry running a stored message again.
    actor: str = ""
    retry: bool = False
    # What Kernel attached to the owner's ``text`` (a voice transcript, a text file), in
    # the catalogue's ``history.voice`` / ``history.file`` form: blocks of Kernel's own
    # before the owner's, so slimming reads markers only where Kernel put them.
    attached: tuple[str, ...] = ()

    @property
    def full_text(self) -> str:
        """What the model reads as text: the attachments, then the owner's words."""
        return "\n".join([*self.attached, self.text] if self.text else self.attached)

    def to_message(self) -> Message:
        blocks: list[TextBlock | ImageBlock] = [*self.images]
        blocks += [TextBlock(text, by="kernel") for text in self.attached]
        if self.text:
            blocks.append(TextBlock(self.text, by="owner"))
        return Message("user", list(blocks))


@dataclass(frozen=True, slots=True)
class TurnParts:
    """What a turn works with; the agent builds it once and hands it to every turn."""

    config: Config
    store: Store
    tools: ToolRegistry
    memories: Memories
    skills: SkillLibrary
    models: ModelSelection
    prompt: SystemPrompt
    asks: AskRegistry
    sleep: Sleep
    meter: Meter
    router: Router
    decisions: DecisionStore
    clock: Callable[[], datetime]  # wall time (the decisions log's stamps)
    scopes: Scopes  # the chats' personas and projects
    modes: SessionModes  # the sessions' act, plan or read_only
    audit: AuditLog | None = None  # what the turn did, recorded (issue 23)
