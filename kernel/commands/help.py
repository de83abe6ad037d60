"""The command catalogue: one declaration per command (its group, whether the Telegram
menu offers it), and the /start and /help texts made from it.

A command's words live in the message catalogue: ``tg.cmd.<name>`` is its short help
(the menu's description), ``help.cmd.<name>`` its long help (``/help <name>``); a
group's name is ``help.group.<group>``. /help is one line per group (one phone screen);
``/help <topic>`` gives one group's commands with their long help, or one command's.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from kernel.commands.reply import Reply
from kernel.core.i18n import CATALOG, t

Group = Literal["chat", "sessions", "memory", "models", "tools", "system"]
GROUPS: tuple[Group, ...] = ("chat", "sessions", "memory", "models", "tools", "system")
ICONS: dict[Group, str] = {
    "chat": "💬",
    "sessions": "🗂",
    "memory": "🧠",
    "models": "🤖",
    "tools": "🧰",
    "system": "⚙️",
}


@dataclass(frozen=True, slots=True)
class Command:
    """One command: its ``group`` in /help, and ``menu``: whether the Telegram command
    menu offers it (every command works when typed)."""

    name: str
    group: Group
    menu: bool = False

    @property
    def short(self) -> str:
        return t(f"tg.cmd.{self.name}")

    @property
    def long(self) -> str:
        return t(f"help.cmd.{self.name}")


# Every command of every channel, in help order; ``menu``: the ten an owner uses most.
CATALOGUE: tuple[Command, ...] = (
    Command("new", "chat", menu=True),
    Command("cancel", "chat", menu=True),
    Command("retry", "chat", menu=True),
    Command("undo", "chat"),
    Command("rewind", "chat"),
    Command("branches", "chat"),
    Command("history", "sessions", menu=True),
    Command("resume", "sessions", menu=True),
    Command("retitle", "sessions"),
    Command("del_history", "sessions"),
    Command("project", "sessions"),
    Command("remember", "memory", menu=True),
    Command("memory", "memory"),
    Command("forget", "memory"),
    Command("model", "models", menu=True),
    Command("provider", "models"),
    Command("persona", "models"),
    Command("mode", "models"),
    Command("files", "tools"),
    Command("prompts", "tools"),
    Command("mcp", "tools"),
    Command("tasks", "tools"),
    Command("status", "system", menu=True),
    Command("usage", "system", menu=True),
    Command("audit", "system"),
    Command("start", "system"),
    Command("help", "system", menu=True),
)
BY_NAME = {c.name: c for c in CATALOGUE}
MENU = tuple(c.name for c in CATALOGUE if c.menu)


def welcome() -> str:
    """/start: a short welcome with three things to try."""
    return t("help.welcome")


def overview(names: Collection[str], provider: str, model: str, header: str = "") -> str:
    """/help: one line per group of the commands in ``names`` (those the channel has),
    then how to see details and the model in use (``header``: the channel's own first
    line, Telegram's by default)."""
    lines = [header or t("help.header")]
    for group in GROUPS:
        listed = [f"/{c.name}" for c in CATALOGUE if c.group == group and c.name in names]
        if listed:
            name = t(f"help.group.{group}")
            lines.append(t("help.line", icon=ICONS[group], group=name, commands=" ".join(listed)))
    lines.append(t("help.more"))
    lines.append(t("help.now", provider=provider, model=model))
    return "\n".join(lines)


def topic(text: str, names: Collection[str]) -> Reply:
    """``/help <text>``: a group (by its key or its name in any language) or a command
    (with or without its slash); anything else is named with the topics there are."""
    wanted = text.strip().removeprefix("/").casefold()
    command = BY_NAME.get(wanted)
    if command is not None and command.name in names:
        where = t("help.in_group", group=t(f"help.group.{command.group}"))
        return Reply(f"/{command.name} — {command.long}\n{where}")
    for group in GROUPS:
        words = {group, *(CATALOG[lang][f"help.group.{group}"].casefold() for lang in CATALOG)}
        if wanted in words:
            return Reply(_group_text(group, names))
    topics = t("audit.list_sep").join(t(f"help.group.{g}") for g in GROUPS)
    return Reply(t("help.unknown_topic", topic=text.strip(), topics=topics), error=True)


def _group_text(group: Group, names: Collection[str]) -> str:
    lines = [f"{ICONS[group]} {t(f'help.group.{group}')}"]
    lines += [f"/{c.name} — {c.long}" for c in CATALOGUE if c.group == group and c.name in names]
    if group == "tools":
        lines.append(t("help.skills"))
    return "\n".join(lines)
