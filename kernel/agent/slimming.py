"""History slimming on write (seed 004 "历史瘦身"): the model sees everything during the
turn; the database keeps a rule-made one-liner for bulky content (tool results, images,
files, voice, injected skills) so history stays small and ``/resume`` stays cheap.
Nothing here calls a model."""

from __future__ import annotations

import functools
import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernel.core.i18n import CATALOG, LANGUAGES, t
from kernel.core.messages import Block, ImageBlock, Message, TextBlock, ToolResultBlock
from kernel.core.surrogates import finditer, retried_mended
from kernel.skills.library import SKILL_BLOCK

TOOL_RESULT_LIMIT = 200  # tool results longer than this are summarised in history


def marker(key: str, hole: str = "") -> str:
    """A regex for the catalogue's history marker ``key`` in any language (history
    written under one ``general.language`` is read under another); ``hole``: the
    pattern the marker's one ``{placeholder}`` becomes (a group of its own)."""
    heads: list[str] = []
    tails: list[str] = []
    for language in LANGUAGES:
        head, _, rest = CATALOG[language][key].partition("{")
        heads.append(re.escape(head))
        tails.append(re.escape(rest.partition("}")[2]))
    middle = f"({hole})" if "{" in CATALOG[LANGUAGES[0]][key] else ""
    return "(?:" + "|".join(heads) + ")" + middle + "(?:" + "|".join(tails) + ")"


class _Markers:
    """The markers' patterns, compiled by RE2 (linear time: the texts are outside input).
    RE2 (its library and libstdc++, ~2.5 MiB) is imported by the first text that may
    hold a marker (:func:`_markers`), not at start (issue 37)."""

    def __init__(self) -> None:
        import re2

        # Markers in the model's history in the owner's language (catalogue
        # ``history.*``): an image, a voice note, a file, a skill's text (in skills/)
        # once slimmed.
        self.image_done: Any = re2.compile(marker("history.image_done"))
        self.voice_done: Any = re2.compile(marker("history.voice_done"))
        self.file_done: Any = re2.compile(marker("history.file_done", r"[^\]\n]+"))
        self.skill_done: Any = re2.compile(marker("history.skill_done", r"[^\]\n]+"))
        # An attached file as the model sees it (seed 004 Phase 3): ``[文件: name]`` and
        # a fence longer than any run of backticks inside, so a file's own code fences
        # cannot end it. The text is outside input (a document's own words): its head is
        # found by RE2 (linear time) and its closing fence by str.find, each fence
        # searched to the end at most once (review: the backtracking pattern took
        # minutes on a document full of file heads). RE2 encodes the text as UTF-8: a
        # lone surrogate in it is matched as U+FFFD (kernel.core.surrogates.finditer),
        # never an error that ends the turn.
        self.file_head: Any = re2.compile(
            marker("history.file", r"[^\]\n]+") + r"\n(`{3,})[^\n]*\n"
        )
        # A transcript is one line (whitespace collapsed) and may hold "]" itself: the
        # tag ends at the last "]" of its line. RE2: linear on outside text (a line full
        # of "[语音: ").
        self.voice: Any = re2.compile("(?m)" + marker("history.voice", r"[^\n]*") + "$")


@functools.cache
def _markers() -> _Markers:
    """The patterns, compiled once, on first need."""
    return _Markers()


_BACKTICKS = re.compile(r"`+")


# Every marker above opens with one of these characters (the catalogue's, in every
# language): a text holding none of them holds no marker, and no regex runs over it.
_OPENERS = frozenset(
    CATALOG[language][key][:1]
    for language in LANGUAGES
    for key in ("history.image_done", "history.voice_done", "history.file", "history.file_done")
    + ("history.voice", "history.skill_done")
)


def _unmarked(text: str) -> bool:
    # A marker opening with its placeholder could start anywhere: then always look.
    return "{" not in _OPENERS and not any(opener in text for opener in _OPENERS)


def wrap_file(name: str, text: str) -> str:
    """``text`` of the file ``name`` as one block the model (and slimming) can delimit."""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{t('history.file', name=name)}\n{fence}\n{text}\n{fence}"


def file_blocks(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, name) of each attached file in ``text``, in order: the head, a fence
    of 3+ backticks (and an info string), the content, then the same fence on a line of
    its own not followed by another backtick. Linear in ``text``."""
    if _unmarked(text):
        return
    pos = 0
    closed_after: dict[str, int] = {}  # fence → a position after which it never closes
    # One pass of RE2 over the text (each search call would encode the whole text anew).
    for head in finditer(_markers().file_head, text):
        if head.start() < pos:  # inside the file before
            continue
        fence = head.group(2)
        end = -1
        if head.end() - 1 < closed_after.get(fence, len(text) + 1):
            at = head.end() - 1
            while (at := text.find("\n" + fence, at)) >= 0:
                after = at + 1 + len(fence)
                if after >= len(text) or text[after] != "`":
                    end = after
                    break
                at += 1
            if end < 0:
                closed_after[fence] = head.end() - 1
        if end < 0:
            continue
        yield head.start(), end, head.group(1)
        pos = end


def _sub_files(text: str, replace_with: Callable[[str], str]) -> str:
    out: list[str] = []
    last = 0
    for start, end, name in file_blocks(text):
        out.append(text[last:start])
        out.append(replace_with(name))
        last = end
    out.append(text[last:])
    return "".join(out)


def without_files(text: str) -> str:
    """``text`` minus attached files: what the owner wrote themselves."""
    return _sub_files(text, lambda name: "")


def has_voice(text: str) -> bool:
    """Whether ``text`` holds a voice tag (a transcript)."""
    return not _unmarked(text) and retried_mended(_markers().voice.search, text) is not None


def without_voice(text: str, replace_with: str = "") -> str:
    """``text`` with each voice tag replaced (the wrapper's own sub mangles a non-ASCII
    replacement, so the slices are joined here)."""
    if _unmarked(text):
        return text
    out: list[str] = []
    last = 0
    for match in finditer(_markers().voice, text):
        out.append(text[last : match.start()])
        out.append(replace_with)
        last = match.end()
    out.append(text[last:])
    return "".join(out)


def media_dropped(message: Message) -> bool:
    """Whether the stored ``message`` lost a photo, file or voice note to slimming (what
    the owner sent cannot be rebuilt from it). The owner's own blocks are never read."""
    for block in message.content:
        if (
            isinstance(block, TextBlock)
            and block.by != "owner"
            and not _unmarked(block.text)
            and (
                retried_mended(_markers().image_done.fullmatch, block.text)
                or retried_mended(_markers().voice_done.search, block.text)
                or retried_mended(_markers().file_done.search, block.text)
            )
        ):
            return True
    return False


def owner_text(message: Message) -> str:
    """The stored message's text without the markers of skills it invoked (the skill is
    invoked again by the owner's own ``/skill/…`` words)."""
    texts = [
        b.text
        for b in message.content
        if isinstance(b, TextBlock) and (b.by == "owner" or (not b.by and not _skill_done(b.text)))
    ]
    return "\n".join(texts)


def _skill_done(text: str) -> bool:
    return not _unmarked(text) and bool(retried_mended(_markers().skill_done.fullmatch, text))


def slim_message(message: Message, artifacts: dict[str, str] | None = None) -> Message:
    """A copy of ``message`` fit for storage. ``artifacts`` maps tool_use_id → saved file."""
    artifacts = artifacts or {}
    return Message(message.role, [_slim_block(b, artifacts) for b in message.content])


def _slim_block(block: Block, artifacts: dict[str, str]) -> Block:
    if isinstance(block, ImageBlock):
        return TextBlock(t("history.image_done"), by="kernel")
    if isinstance(block, TextBlock) and block.by != "owner":  # "": stored before "by"
        if skill := SKILL_BLOCK.match(block.text):
            return TextBlock(t("history.skill_done", name=skill.group(1)), by=block.by)
        text = _sub_files(block.text, lambda name: t("history.file_done", name=name))
        return TextBlock(without_voice(text, t("history.voice_done")), by=block.by)
    if isinstance(block, ToolResultBlock):
        summary = summarize_tool_result(block.content, artifacts.get(block.tool_use_id))
        return replace(block, content=summary)
    return block


def _failed(data: dict[str, object]) -> str:
    """A failed run's state: the signal that ended it whenever there was one (and who
    sent it: a CLI that traps Kernel's SIGTERM exits 0), else its exit code."""
    signal, code = data.get("signal"), data.get("exit_code")
    if not signal:
        return t("history.task_failed", code=code)
    sent = data.get("kernel_signals")
    by_kernel = isinstance(sent, list) and signal in sent
    state = t(
        "history.task_signal_kernel" if by_kernel else "history.task_signalled", signal=signal
    )
    return state if code is None else t("history.task_signal_exit", state=state, code=code)


def summarize_tool_result(content: str, artifact: str | None = None) -> str:
    """One line describing a tool result; short results are kept as they are."""
    data = _as_dict(content)
    path = artifact or (str(data.get("output_path")) if data.get("output_path") else None)
    if len(content) <= TOOL_RESULT_LIMIT and not path:
        return content
    if "ok" in data and ("exit_code" in data or "cli" in data):
        ok = data.get("ok")
        state = t("history.task_ok") if ok else _failed(data)
        head = t("history.task_done", cli=data.get("cli") or t("history.task"), state=state)
    else:
        preview = " ".join(content.split())[:80]
        head = t("history.preview", preview=preview, count=len(content))
    return t("history.see", head=head, path=path) if path else head


def _as_dict(content: str) -> dict[str, object]:
    if not content.startswith("{"):
        return {}
    try:
        data = json.loads(content)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def save_long_results(
    blocks: list[ToolResultBlock], folder: Path, session_id: int | None, base: Path
) -> dict[str, str]:
    """Keep long tool results on disk so the slimmed history can point at them: tool
    use id → the file, relative to ``base`` (blocking: run it in a thread)."""
    out: dict[str, str] = {}
    for index, block in enumerate(blocks):
        if len(block.content) <= TOOL_RESULT_LIMIT or '"output_path"' in block.content:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        # Only Kernel-made parts in the name: the tool name and id come from the model.
        path = folder / f"s{session_id}-{uuid.uuid4().hex[:12]}-{index}.txt"
        path.write_text(block.content, encoding="utf-8")
        try:
            out[block.tool_use_id] = str(path.relative_to(base))
        except ValueError:
            out[block.tool_use_id] = str(path)
    return out
