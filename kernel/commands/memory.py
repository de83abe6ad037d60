"""/remember, /memory and /forget (issue 18's scopes, issue 39's editable memory).

``/memory`` lists what the chat sees; ``#n`` refers to that listing. ``/memory #n``
shows one memory and its earlier versions, ``/memory edit #n <text>`` changes it (the
text before kept as a version), ``/memory move #n global|project|persona`` moves it.

Under the listing a row of buttons opens a memory (``mem:o:<id>``) and pages
(``mem:p:<page>``); under a memory, buttons edit, move and forget it. Buttons name the
memory by its id (never reused) and, for a change, by a digest of the text shown
(``mem:f:<id>:<8 hex>``): a press for a memory gone, out of the chat's scopes or
changed since it was shown is refused in words and nothing changes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kernel.commands.listing import parse_refs
from kernel.commands.reply import Button, Reply
from kernel.core.errors import KernelError
from kernel.core.i18n import t
from kernel.memory import scopes
from kernel.store.db import DuplicateMemory

if TYPE_CHECKING:
    from kernel.agent.agent import Agent
    from kernel.memory.memories import Memories
    from kernel.store.db import MemoryRow

MEMORY_LISTING = 200  # /memory shows the newest this many (and says how many there are)
PAGE = 6  # numbered buttons under the listing, with ◀ ▶ (one row of at most 8)
PRESS = "mem:"
PATTERN = r"^mem:(?:o:\d{1,18}|[ef]:\d{1,18}:[0-9a-f]{8}|m:\d{1,18}:[0-9a-f]{8}:[gjs]|p:\d{1,4})$"
# A move's target in a button: global, the chat's project, the chat's persona.
TARGETS = {"g": "global", "j": "project", "s": "persona"}
_VERB = re.compile(r"^(edit|move)\s+(#?\d+)\s*(.*)$", re.DOTALL)


def digest(row: MemoryRow) -> str:
    """Eight hex digits naming what the memory says now."""
    return hashlib.sha256(f"{row.id}\0{row.scope}\0{row.text}".encode()).hexdigest()[:8]


class MemoryCommands:
    """A conversation's memory commands; ``listed``: conversation → ids of its last
    /memory listing (shared with ``Commands.memories_listed``)."""

    def __init__(self, agent: Agent, memories: Memories, actor: str) -> None:
        self.agent = agent
        self.memories = memories
        self.actor = actor
        self.listed: dict[str, list[int]] = {}

    async def _visible(self, conversation: str) -> tuple[str, ...]:
        chat = await self.agent.scopes.current(conversation)
        return scopes.visible(chat.project, chat.persona)

    async def remember(self, conversation: str, arg: str) -> Reply:
        """Saved into the chat's project when one is active, else global."""
        if not arg:
            return Reply(t("tg.remember_usage"), error=True)
        chat = await self.agent.scopes.current(conversation)
        saved = await self.memories.remember(
            arg, scope=scopes.default(chat.project), actor=self.actor
        )
        row = saved.row
        if saved.outcome == "exists":
            return Reply(t("tg.remember_exists"))
        if saved.outcome == "promoted":
            return Reply(t("tg.remember_promoted"))
        if saved.outcome in ("superseded", "restated"):
            return Reply(t("tg.remember_updated", old=saved.replaced, new=row.text))
        if row.scope == scopes.GLOBAL:
            return Reply(t("tg.remembered"))
        return Reply(t("tg.remembered_in", scope=scopes.word(row.scope)))

    async def memory(self, conversation: str, arg: str = "", page: int = 1) -> Reply:
        """The memories this chat sees (global, its project's, its persona's), each
        with its scope; ``#n``, ``edit #n <text>``, ``move #n <scope>``: see the module."""
        arg = arg.strip()
        verb = _VERB.match(arg)
        if verb is not None:
            name, ref, rest = verb.groups()
            if name == "edit":
                return await self._edit(conversation, ref, rest.strip())
            return await self._move_ref(conversation, ref, rest.strip())
        if arg in ("edit", "move") or arg.startswith(("edit ", "move ")):
            return Reply(t(f"tg.memory_{arg.split()[0]}_usage"), error=True)
        if arg:
            return await self._card_ref(conversation, arg)
        return await self._listing(conversation, page)

    async def _listing(self, conversation: str, page: int) -> Reply:
        visible = await self._visible(conversation)
        rows = await self.memories.recent(MEMORY_LISTING, visible)
        self.listed[conversation] = [r.id for r in rows]
        if not rows:
            return Reply(t("tg.memory_none"))
        lines = [t("tg.memory_header")]
        for n, row in enumerate(rows, start=1):
            date = self.agent.local_time(row.created_at).strftime("%Y-%m-%d")
            category = f"[{t(f'memory.category.{row.category}')}] " if row.category else ""
            where = t("tg.memory_scope", scope=scopes.word(row.scope))
            lines.append(f"#{n} {date} {where} {category}{row.text}")
        if len(rows) == MEMORY_LISTING:
            total = await self.memories.count(visible)
            if total > len(rows):
                lines.append(t("tg.memory_more", shown=len(rows), total=total))
        return Reply("\n".join(lines), buttons=_pages(rows, page))

    async def _row_of(self, conversation: str, ref: str) -> MemoryRow:
        """The memory ``#n`` of the last listing names, if the chat still sees it."""
        listing = self.listed.get(conversation, [])
        [n] = parse_refs(ref, len(listing), "memory.bad_ref")
        row = await self.memories.get(listing[n - 1])
        if row is None or row.scope not in await self._visible(conversation):
            raise KernelError(t("tg.memory_stale"))
        return row

    async def _card_ref(self, conversation: str, ref: str) -> Reply:
        try:
            row = await self._row_of(conversation, ref)
        except (KernelError, ValueError) as exc:
            return Reply(_words(exc), error=True)
        return await self.card(conversation, row)

    async def card(self, conversation: str, row: MemoryRow, note: str = "") -> Reply:
        """One memory: its text, scope, category and date, its earlier versions, and
        buttons to edit, move and forget it."""
        n = await self._number(conversation, row.id)
        date = self.agent.local_time(row.created_at).strftime("%Y-%m-%d")
        category = f" · {t(f'memory.category.{row.category}')}" if row.category else ""
        lines = [note] if note else []
        lines.append(t("tg.memory_card", n=n, scope=scopes.word(row.scope), date=date))
        lines.append(f"{row.text}{category}")
        versions = await self.memories.versions(row.id)
        if versions:
            lines.append(t("tg.memory_versions"))
            for version in versions:
                when = self.agent.local_time(version.replaced_at).strftime("%Y-%m-%d")
                how = t(f"memory.how.{version.how}")
                lines.append(t("tg.memory_version", date=when, text=version.text, how=how))
        else:
            lines.append(t("tg.memory_no_versions"))
        buttons = await self._buttons(conversation, row, n)
        return Reply("\n".join(lines), buttons=buttons)

    async def _number(self, conversation: str, memory_id: int) -> int:
        """The memory's ``#n`` in the chat's listing (listed again when it is not in it)."""
        listing = self.listed.get(conversation, [])
        if memory_id not in listing:
            visible = await self._visible(conversation)
            listing = [r.id for r in await self.memories.recent(MEMORY_LISTING, visible)]
            self.listed[conversation] = listing
        return listing.index(memory_id) + 1 if memory_id in listing else 0

    async def _same_fact(self, conversation: str, existing: int) -> Reply:
        """The refusal of a change into a fact another memory holds, named by its #n."""
        n = await self._number(conversation, existing)
        return Reply(t("tg.memory_same_fact", n=n), error=True)

    async def _buttons(self, conversation: str, row: MemoryRow, n: int) -> tuple[Button, ...]:
        mark = f"{row.id}:{digest(row)}"
        buttons = [Button(t("tg.memory_button_edit"), f"{PRESS}e:{mark}", f"/memory edit #{n}")]
        chat = await self.agent.scopes.current(conversation)
        for code, kind in TARGETS.items():
            target = _target(kind, chat.project, chat.persona)
            if target and target != row.scope:
                label = t("tg.memory_button_move", scope=scopes.word(target))
                buttons.append(
                    Button(label, f"{PRESS}m:{mark}:{code}", f"/memory move #{n} {kind}")
                )
        buttons.append(Button(t("tg.memory_button_forget"), f"{PRESS}f:{mark}", f"/forget #{n}"))
        return tuple(buttons)

    async def _edit(self, conversation: str, ref: str, text: str) -> Reply:
        if not text:
            return Reply(t("tg.memory_edit_usage"), error=True)
        try:
            row = await self._row_of(conversation, ref)
            visible = await self._visible(conversation)
            edited = await self.memories.edit(row.id, text, actor=self.actor, scopes=visible)
        except DuplicateMemory as exc:
            return await self._same_fact(conversation, exc.existing)
        except (KernelError, ValueError) as exc:
            return Reply(_words(exc), error=True)
        if edited is None:
            return Reply(t("tg.memory_stale"), error=True)
        return await self.card(conversation, edited, t("tg.memory_edited"))

    async def _move_ref(self, conversation: str, ref: str, kind: str) -> Reply:
        if kind not in TARGETS.values():
            return Reply(t("tg.memory_move_usage"), error=True)
        try:
            row = await self._row_of(conversation, ref)
        except (KernelError, ValueError) as exc:
            return Reply(_words(exc), error=True)
        return await self.move(conversation, row, kind)

    async def move(self, conversation: str, row: MemoryRow, kind: str) -> Reply:
        """Move ``row`` to global or the chat's project or persona (``kind``)."""
        chat = await self.agent.scopes.current(conversation)
        target = _target(kind, chat.project, chat.persona)
        if not target:
            return Reply(t("tg.memory_move_none", kind=kind), error=True)
        visible = await self._visible(conversation)
        try:
            moved = await self.memories.move(row.id, target, actor=self.actor, scopes=visible)
        except DuplicateMemory as exc:
            return await self._same_fact(conversation, exc.existing)
        if moved is None:
            return Reply(t("tg.memory_stale"), error=True)
        note = t("tg.memory_moved", scope=scopes.word(target))
        return await self.card(conversation, moved.row, note)

    async def forget(self, conversation: str, arg: str) -> Reply:
        listing = self.listed.get(conversation, [])
        try:
            if not arg:
                raise KernelError(t("tg.forget_usage"))
            refs = parse_refs(arg, len(listing), "memory.bad_ref")
        except KernelError as exc:
            return Reply(str(exc), error=True)
        # Only what this chat sees now (a /project switch since the listing changes it).
        visible = await self._visible(conversation)
        ids = [listing[n - 1] for n in refs]
        gone = await self.memories.forget(ids, visible, actor=self.actor)
        self.listed.pop(conversation, None)  # numbers changed: list again
        return Reply(t("tg.forgotten", count=len(gone)))

    async def press(self, conversation: str, data: str) -> Reply:
        """A button under /memory or a memory (``data`` matches :data:`PATTERN`): what
        it did, or a refusal (``error``) when the memory changed since it was shown."""
        verb, _, rest = data.removeprefix(PRESS).partition(":")
        if verb == "p":
            return await self._listing(conversation, int(rest))
        memory_id, _, mark = rest.partition(":")
        row = await self.memories.get(int(memory_id))
        visible = await self._visible(conversation)
        shown, _, code = mark.partition(":")
        if row is None or row.scope not in visible or (shown and shown != digest(row)):
            return Reply(t("tg.memory_stale"), error=True)
        if verb == "o":
            return await self.card(conversation, row)
        n = await self._number(conversation, row.id)
        if verb == "e":
            return await self.card(conversation, row, t("tg.memory_edit_hint", n=n))
        if verb == "m":
            return await self.move(conversation, row, TARGETS[code])
        gone = await self.memories.forget([row.id], visible, actor=self.actor)
        self.listed.pop(conversation, None)
        return Reply(t("tg.forgotten", count=len(gone)))


def _target(kind: str, project: str, persona: str) -> str:
    """The scope ``kind`` means in a chat ("" when the chat has none of that kind)."""
    if kind == "global":
        return scopes.GLOBAL
    if kind == "project":
        return scopes.project(project) if project else ""
    return scopes.persona(persona) if persona else ""


def _pages(rows: Sequence[MemoryRow], page: int) -> tuple[Button, ...]:
    """A row of numbered buttons opening the listing's memories, ◀ ▶ when more."""
    pages = max(1, -(-len(rows) // PAGE))
    page = min(max(page, 1), pages)
    start = (page - 1) * PAGE
    buttons = [
        Button(f"#{n}", f"{PRESS}o:{row.id}", f"/memory #{n}")
        for n, row in enumerate(rows[start : start + PAGE], start=start + 1)
    ]
    if page > 1:
        buttons.insert(0, Button("◀", f"{PRESS}p:{page - 1}"))
    if page < pages:
        buttons.append(Button("▶", f"{PRESS}p:{page + 1}"))
    return tuple(buttons)


def _words(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, KernelError) else t("tg.memory_stale")
