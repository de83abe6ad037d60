"""Token counts and prompt caching for the model simulators.

**Counting** (both simulators, deterministic): a request is cut into *units* in the
order the API reads it, and each unit is counted with Kernel's own estimate,
:func:`kernel.core.usage.estimate_tokens`, over its canonical form:

- a tool definition: its JSON (``cache_control`` left out, keys sorted, non-ASCII kept);
- the system prompt: the text of each system text block (a string is one block);
- a message's content block: a text block's text, an image :data:`IMAGE_TOKENS`, any
  other block (``tool_use``, ``tool_result``, ``thinking``…) its JSON without
  ``cache_control``. OpenAI-style: each content part likewise, a ``tool_calls`` entry
  its function's name followed by its arguments string, a tool message its content.

There is no per-message overhead. The output is the same estimate over the reply's
text, thinking and each tool call's name followed by its JSON input (at least 1).
A scripted ``Reply(usage=...)`` replaces the whole count.

**Anthropic prompt caching** (:class:`PromptCache`), as the Messages API documents it:
the prefix is read tools → system → messages; a block carrying ``cache_control``
(``{"type": "ephemeral"}``, optional ``"ttl": "5m" | "1h"``) is a breakpoint, at most 4
(else 400 "A maximum of 4 blocks with cache_control may be provided. Found N."); a
top-level ``cache_control`` puts one on the last block. The prefix up to a breakpoint is
written to the cache when it holds at least :attr:`PromptCache.min_tokens` (1024, as
Sonnet/Opus); a request reads the longest cached prefix found by looking back from each
breakpoint over at most :attr:`PromptCache.lookback` (20) block boundaries, the
breakpoint itself included. ``input_tokens`` is what lies after both the read and the
written part; a hit refreshes the entry's TTL. The cache is keyed by model; it ignores
what else invalidates the real one (tool_choice, thinking settings, images toggled).

**OpenAI automatic prefix caching** (:class:`PrefixCache`): prompts of at least 1024
tokens are remembered; a later prompt's ``cached_tokens`` is its longest common prefix
with one of them (whole units, then characters within the first differing text unit),
rounded down to 1024 + a multiple of 128, and 0 under 1024. Entries never expire.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from kernel.core.usage import IMAGE_TOKENS, estimate_tokens
from tests.sim.script import Reply, Text, Thinking

MAX_BREAKPOINTS = 4
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


@dataclass(frozen=True, slots=True)
class Unit:
    """One countable piece of a prompt. ``key`` identifies it with its place (``head``:
    its role where it opens a message); ``text`` is its text when it is plain text (for
    character-level prefix matches); ``mark`` its ``cache_control``, if any."""

    head: str
    body: str
    tokens: int
    kind: str = ""
    where: str = ""
    text: str | None = None
    mark: Any = None

    @property
    def key(self) -> str:
        return self.head + "\x00" + self.body


def block_unit(head: str, block: dict[str, Any], where: str) -> Unit:
    kind = str(block.get("type", ""))
    text = str(block.get("text", "")) if kind == "text" else None
    body = dumps(without_mark(block))
    return Unit(head, body, block_tokens(block), kind, where, text, block.get("cache_control"))


@dataclass
class CacheUse:
    """What one answered request read from and wrote to the cache, in tokens."""

    request: int  # index into the simulator's ``requests``
    input: int  # fresh input (after the read and the written part)
    read: int = 0
    write: int = 0
    breakpoints: list[int] = field(default_factory=list)  # unit indexes with cache_control
    hit: int | None = None  # the unit index the cached prefix read ends at
    write_1h: int = 0  # the part of ``write`` under a 1-hour TTL

    @property
    def prompt(self) -> int:
        return self.input + self.read + self.write


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def without_mark(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


def block_tokens(block: dict[str, Any]) -> int:
    kind = block.get("type")
    if kind == "text":
        return estimate_tokens(str(block.get("text", "")))
    if kind == "image" or kind == "image_url":
        return IMAGE_TOKENS
    return estimate_tokens(dumps(without_mark(block)))


def output_tokens(reply: Reply) -> int:
    parts: list[str] = []
    for block in reply.blocks:
        if isinstance(block, Text | Thinking):
            parts.append(block.text)
        else:
            parts.append(block.name + block.arguments())
    return max(1, estimate_tokens("".join(parts)))


# ---- Anthropic ---------------------------------------------------------------------------


def anthropic_units(body: dict[str, Any]) -> list[Unit]:
    """Tools, system, then each message's blocks, in the order the prefix is read."""
    units: list[Unit] = []
    for index, tool in enumerate(body.get("tools") or []):
        if isinstance(tool, dict):
            shown = dumps(without_mark(tool))
            mark = tool.get("cache_control")
            units.append(
                Unit("tool", shown, estimate_tokens(shown), "tool", f"tools.{index}", None, mark)
            )
    system = body.get("system")
    blocks = [{"type": "text", "text": system}] if isinstance(system, str) and system else system
    for index, block in enumerate(blocks if isinstance(blocks, list) else []):
        if isinstance(block, dict):
            units.append(block_unit("system", block, f"system.{index}"))
    for number, message in enumerate(body.get("messages") or []):
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for position, block in enumerate(parts if isinstance(parts, list) else []):
            if isinstance(block, dict):
                head = str(message.get("role")) if position == 0 else "+"
                units.append(block_unit(head, block, f"messages.{number}.content.{position}"))
    automatic = body.get("cache_control")
    if isinstance(automatic, dict) and units and units[-1].mark is None:
        units[-1] = replace(units[-1], mark=automatic)
    return units


def cache_control_problem(body: dict[str, Any]) -> str | None:
    """The 400 the real API answers for a misplaced or malformed ``cache_control``."""
    marked = [unit for unit in anthropic_units(body) if unit.mark is not None]
    for unit in marked:
        mark = unit.mark
        if unit.kind in ("thinking", "redacted_thinking"):
            return f"{unit.where}.{unit.kind}.cache_control: Extra inputs are not permitted"
        if not isinstance(mark, dict) or mark.get("type") != "ephemeral":
            return f"{unit.where}.cache_control.type: Input should be 'ephemeral'"
        if "ttl" in mark and mark["ttl"] not in TTL_SECONDS:
            return f"{unit.where}.cache_control.ttl: Input should be '5m' or '1h'"
    if len(marked) > MAX_BREAKPOINTS:
        return (
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(marked)}."
        )
    return None


def prefix_hashes(model: str, units: list[Unit]) -> list[str]:
    digest = hashlib.sha256(model.encode()).hexdigest()
    hashes: list[str] = []
    for unit in units:
        digest = hashlib.sha256((digest + unit.key).encode()).hexdigest()
        hashes.append(digest)
    return hashes


def running_totals(units: list[Unit]) -> list[int]:
    totals: list[int] = []
    total = 0
    for unit in units:
        total += unit.tokens
        totals.append(total)
    return totals


class PromptCache:
    """Anthropic's prompt cache for one simulator: prefix hash → (expiry, TTL seconds)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.min_tokens = 1024
        self.lookback = 20
        self.entries: dict[str, tuple[float, float]] = {}

    def clear(self) -> None:
        self.entries.clear()

    def use(self, body: dict[str, Any], request: int) -> CacheUse:
        units = anthropic_units(body)
        hashes = prefix_hashes(str(body.get("model")), units)
        totals = running_totals(units)
        total = totals[-1] if totals else 0
        marks = [index for index, unit in enumerate(units) if unit.mark is not None]
        now = self.clock()
        self.entries = {h: entry for h, entry in self.entries.items() if entry[0] > now}
        hit: int | None = None
        for mark in marks:
            for index in range(mark, max(-1, mark - self.lookback), -1):
                if hashes[index] in self.entries:
                    hit = index if hit is None else max(hit, index)
                    break
        read = totals[hit] if hit is not None else 0
        if hit is not None:
            ttl = self.entries[hashes[hit]][1]
            self.entries[hashes[hit]] = (now + ttl, ttl)
        written, write_1h = read, 0
        for mark in marks:
            if totals[mark] < self.min_tokens:
                continue
            ttl = TTL_SECONDS.get(str(units[mark].mark.get("ttl", "5m")), 300.0)
            self.entries[hashes[mark]] = (now + ttl, ttl)
            if hit is None or mark > hit:
                if ttl > 300.0:
                    write_1h += totals[mark] - written
                written = totals[mark]
        write = written - read
        return CacheUse(request, total - read - write, read, write, marks, hit, write_1h)


# ---- OpenAI ------------------------------------------------------------------------------


def openai_units(body: dict[str, Any]) -> list[Unit]:
    """Tools, then each message's parts and tool calls, in prompt order."""
    units: list[Unit] = []
    for tool in body.get("tools") or []:
        shown = dumps(tool)
        units.append(Unit("tool", shown, estimate_tokens(shown)))
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        head = str(message.get("role"))
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict):
                units.append(block_unit(head, part, ""))
                head = "+"
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                shown = f"{function.get('name', '')}{function.get('arguments', '')}"
                units.append(Unit(head, dumps(call), estimate_tokens(shown)))
                head = "+"
    return units


def common_tokens(units: list[Unit], seen: list[Unit]) -> int:
    """Tokens of the longest common prefix: whole units, then the text two differing
    text units in the same place share."""
    tokens = 0
    for unit, other in zip(units, seen, strict=False):
        if unit.key == other.key:
            tokens += unit.tokens
            continue
        if unit.head == other.head and unit.text is not None and other.text is not None:
            tokens += estimate_tokens(os.path.commonprefix([unit.text, other.text]))
        break
    return tokens


class PrefixCache:
    """OpenAI's automatic prompt caching for one simulator."""

    def __init__(self) -> None:
        self.min_tokens = 1024
        self.increment = 128
        self.keep = 64  # prompts remembered per model, newest first
        self.seen: dict[str, list[list[Unit]]] = {}

    def clear(self) -> None:
        self.seen.clear()

    def use(self, body: dict[str, Any], request: int) -> CacheUse:
        units = openai_units(body)
        total = sum(unit.tokens for unit in units)
        remembered = self.seen.setdefault(str(body.get("model")), [])
        best = max((common_tokens(units, seen) for seen in remembered), default=0)
        cached = 0
        if total >= self.min_tokens and best >= self.min_tokens:
            cached = self.min_tokens + (best - self.min_tokens) // self.increment * self.increment
        if total >= self.min_tokens:
            remembered.insert(0, units)
            del remembered[self.keep :]
        return CacheUse(request, total - cached, read=cached)


# ---- what a simulator reports --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Counted:
    """The usage a simulator reports for one answer (Anthropic's split: ``input`` fresh)."""

    input: int
    output: int
    read: int = 0
    write: int = 0
    write_1h: int = 0


def counted(reply: Reply, use: CacheUse) -> Counted:
    """The scripted usage if the reply has one, else the simulator's own count."""
    if reply.usage is not None:
        fresh, output, *cache = reply.usage
        read, write = [*cache, 0, 0][:2]
        return Counted(fresh, output, read, write)
    return Counted(use.input, output_tokens(reply), use.read, use.write, use.write_1h)
