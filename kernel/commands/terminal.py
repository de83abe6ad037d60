"""The terminal chat's commands (``kernel chat``, in-process or through the running
Kernel's sidecar): one line in, the shared command's ``Reply`` out, and the one way a
terminal shows it.

Both ways of running ``kernel chat`` call :func:`run_line` on the same
:class:`~kernel.commands.Commands` and render with :func:`render`, so the answers are
the same words; through the sidecar the ``Reply`` travels as :func:`reply_json`. A
Telegram picker's buttons (a bare /model, /resume, /persona …) become the commands to
type, numbered; an unknown command gets Telegram's own refusal.
"""

from __future__ import annotations

from typing import Any

from kernel.commands.command_set import SHARED, Commands
from kernel.commands.help import overview
from kernel.commands.help import topic as help_topic
from kernel.commands.listing import named, session_name
from kernel.commands.reply import Reply
from kernel.core.i18n import t
from kernel.core.oneline import one_line

# The terminal's conversation: a chat with a current session that /new and /resume
# choose, as a Telegram chat's (the sidecar keeps it for every `kernel chat` attached).
CONVERSATION = "console:default"
# What works in a terminal: the shared set, /help and /start.
COMMANDS = (*SHARED, "help", "start")
# Telegram's own: what they do needs Telegram (the reason is in the catalogue).
TELEGRAM_ONLY = ("files",)
COMMAND_CHARS = 4096  # a command line longer than a Telegram message is refused
CHOICES_SHOWN = 20  # a picker's options listed (a bare /resume offers up to 200)
REFRESH_ROUNDS = 5  # /refresh shows the session's last this many exchanges
REFRESH_CHARS = 600  # of each message, on one line


def is_command(text: str) -> bool:
    """A line that is a command; ``/skill/…`` and ``/prompts:…`` are messages."""
    text = text.strip()
    return text.startswith("/") and not text.startswith(("/skill/", "/prompts:"))


async def run_line(commands: Commands, text: str) -> Reply:
    """Answer one command line (``/name arg``) in the terminal's conversation."""
    text = text.strip()
    if len(text) > COMMAND_CHARS:
        return Reply(t("terminal.too_long", limit=COMMAND_CHARS), error=True)
    if any(ord(c) < 32 and c != "\t" or ord(c) == 127 for c in text):
        return Reply(t("terminal.control_chars"), error=True)
    head, _, arg = text.partition(" ")
    name = head.removeprefix("/")
    if name == "help":
        if arg.strip():
            return help_topic(arg, COMMANDS)
        agent = commands.agent
        header = t("terminal.help_header")
        lines = overview(COMMANDS, agent.selection.provider_name, agent.selection.model, header)
        return Reply(lines + "\n" + t("terminal.help"))
    if name == "start":
        return Reply(t("help.welcome"))
    if name == "refresh":
        return await refresh(commands)
    if name == "settings":
        return await settings(commands)
    if name in TELEGRAM_ONLY:
        return Reply(t(f"terminal.only_telegram.{name}", cmd=head), error=True)
    reply = await commands.run(CONVERSATION, name, arg) if name in COMMANDS else None
    return reply if reply is not None else Reply(t("tg.unknown_command"), error=True)


async def refresh(commands: Commands) -> Reply:
    """``/refresh`` (seed 000's terminal command): the current session's last exchanges
    as stored now. The terminal's chat is shared (every ``kernel chat`` attached to the
    running Kernel, the web console's terminal), so it may have moved on elsewhere."""
    agent = commands.agent
    current = agent.sessions.current_session(CONVERSATION)
    row = await agent.sessions.listed(current) if current is not None else None
    if current is None or row is None:
        return Reply(t("terminal.refresh_none"))
    messages = await agent.store.load_messages(current, rounds=REFRESH_ROUNDS)
    first = next((m.text for m in messages if m.role == "user"), "")
    lines = [t("terminal.refresh_header", session=named(current, session_name(row, first)))]
    for message in messages:
        if message.role in ("user", "assistant") and message.text.strip():
            mark = "›" if message.role == "user" else "‹"
            lines.append(f"{mark} {one_line(message.text, REFRESH_CHARS)}")
    if len(lines) == 1:
        lines.append(t("terminal.refresh_empty"))
    return Reply("\n".join(lines))


async def settings(commands: Commands) -> Reply:
    """``/settings`` (seed 000's terminal command): what this chat runs with, and where
    each is changed. Read-only; nothing secret (no key, no address with credentials)."""
    agent = commands.agent
    config = agent.config
    scope = await agent.scopes.current(CONVERSATION)
    mode = await agent.scopes.prompt_mode(CONVERSATION)
    current = agent.sessions.current_session(CONVERSATION)
    none = t("profile.current_none")
    features = config.features
    flags = ", ".join(
        f"{name}={'on' if getattr(features, name) else 'off'}"
        for name in ("prompt_templates", "prompt_context_introspect", "environment_context")
    )
    text = t(
        "terminal.settings",
        model=f"{agent.selection.provider_name}:{agent.selection.model}",
        session=f"#{current}" if current is not None else none,
        persona=scope.persona or none,
        project=scope.project or none,
        mode=mode.mode,
        language=config.general.language,
        workspace=config.general.default_workspace,
        soul=config.general.soul,
        config=config.path,
        flags=flags,
        disabled=", ".join(config.general.disabled_tools) or none,
    )
    return Reply(text)


def reply_json(reply: Reply) -> dict[str, Any]:
    """A Reply as the sidecar sends it (its turn and follow-up are sent as they come)."""
    return {
        "text": reply.text,
        "error": reply.error,
        "choices": [
            {"label": c.label, "command": c.command, "current": c.current} for c in reply.choices
        ],
        "buttons": [{"label": b.label, "command": b.command} for b in reply.buttons],
    }


def render(reply: dict[str, Any]) -> str:
    """The lines a terminal prints for a reply (:func:`reply_json`'s shape): a refusal
    as ``✗ …``; a picker's options numbered, each with the command that picks it; a
    button's command beside its label (there are no buttons here)."""
    lines: list[str] = []
    if reply.get("text"):
        text = str(reply["text"])
        lines.append(t("console.error", message=text) if reply.get("error") else text)
    choices = list(reply.get("choices") or [])
    if choices:
        lines.append(t("terminal.choose"))
        for n, choice in enumerate(choices[:CHOICES_SHOWN], start=1):
            mark = t("terminal.current") if choice.get("current") else ""
            lines.append(f"  {n}) {choice['command']}{mark}")
        if len(choices) > CHOICES_SHOWN:
            lines.append(t("terminal.more_choices", count=len(choices) - CHOICES_SHOWN))
    typed = [f"[{b['label']}] {b['command']}" for b in reply.get("buttons") or [] if b["command"]]
    if typed:
        lines.append("  " + "   ".join(typed))
    return "\n".join(lines)
