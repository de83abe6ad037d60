"""The TUI's words: what each stored message, turn event, plan and audit row reads as.
Pure functions over the sidecar's JSON shapes and the turn events, no Textual; the widgets show the
strings as plain text (never as markup)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import tzinfo
from typing import Any, Literal

from kernel.core.clock import shown
from kernel.core.events import ModelSwitched, ToolCall, ToolProgress, ToolResult
from kernel.core.i18n import t, t_or
from kernel.tui.backend import AuditItem, ChatRef

Kind = Literal["owner", "assistant", "tool", "note", "error"]

PLAN_MARKS = {"pending": "☐", "in_progress": "▶", "completed": "☑"}
ARGS_WIDTH = 80
SUMMARY_WIDTH = 100
FACTS_WIDTH = 160


@dataclass(slots=True)
class Line:
    kind: Kind
    text: str


# C0/C1 controls (line breaks and tabs kept) and the bidi embeddings, overrides and
# isolates, which would reorder what the terminal shows.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` without control characters (line breaks and tabs kept): an escape
    sequence in a reply or a title must not reach the terminal."""
    return _CONTROL.sub("", text)


def clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def chat_label(chat: ChatRef, zone: tzinfo) -> str:
    """A chat in the list: its title (or its key) and when it was last active (in
    ``zone``, the owner's, as the audit shows its times)."""
    if not chat.stored:
        return t("tui.new_chat")
    name = chat.title or (t("tui.default_chat") if chat.ident == "chat-default" else "")
    name = clip(name or t("tui.untitled", id=chat.external_id), 40)
    when = shown(chat.updated, zone)
    return f"{name}\n{when}" if when else name


def history_lines(messages: list[dict[str, Any]]) -> list[Line]:
    """The stored messages as lines; cut (undone) and failed ones are left out, as in
    the web console."""
    lines: list[Line] = []
    for message in messages:
        if message.get("cut") or message.get("failed"):
            continue
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
        images = sum(1 for b in blocks if b.get("type") == "image")
        text = "\n".join(part for part in texts if part)
        if images:
            text = (t("tui.images", count=images) + "\n" + text).strip()
        owner = message.get("role") == "user"
        if text:
            lines.append(Line("owner" if owner else "assistant", _owner(text) if owner else text))
        for block in blocks:
            if block.get("type") == "tool_use":
                lines.append(Line("tool", t("tui.history_tool", name=str(block.get("name", "")))))
    return lines


def _owner(text: str) -> str:
    return "› " + text


def owner_line(text: str) -> Line:
    return Line("owner", _owner(text))


def tool_call_line(call: ToolCall) -> Line:
    args = clip(json.dumps(call.arguments, ensure_ascii=False), ARGS_WIDTH)
    return Line("tool", t("console.tool_call", name=call.name, args=args))


def tool_progress_line(progress: ToolProgress) -> Line:
    text = clip(progress.text, SUMMARY_WIDTH)
    return Line("tool", t("tui.tool_progress", name=progress.name, text=text))


def tool_result_line(result: ToolResult) -> Line:
    key = "console.tool_result_ok" if result.ok else "console.tool_result_err"
    return Line("tool", t(key, summary=clip(result.summary, SUMMARY_WIDTH)))


def switch_line(switch: ModelSwitched) -> Line:
    return Line("note", switch.describe())


def error_line(message: str) -> Line:
    return Line("error", t("console.error", message=message))


def plan_text(items: list[dict[str, Any]]) -> str:
    """The plan as it now stands, one item a line with its status mark."""
    rows = [t("tui.plan")]
    for item in items:
        mark = PLAN_MARKS.get(str(item.get("status", "")), "•")
        rows.append(f"{mark} {item.get('content', '')}")
    return "\n".join(rows)


def audit_line(item: AuditItem, zone: tzinfo) -> str:
    """One audit event: its sequence, then its words (with their time) when the backend
    has them, else its time, actor, kind and facts."""
    seq = f"#{item.seq}" if item.seq is not None else "#?"
    if item.text:
        return f"{seq} {item.text}"
    when = shown(item.at, zone, "%Y-%m-%d %H:%M:%S")
    if item.data is None:
        what = t("tui.audit_pruned", kind=item.kind)
    else:
        facts = " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in item.data.items())
        what = f"{item.kind} {clip(facts, FACTS_WIDTH)}".strip()
    return f"{seq} {when} {item.actor}: {what}"


def verdict_line(verdict: dict[str, Any]) -> str:
    """The chain's verdict in words: the backend's own when it has them."""
    if verdict.get("text"):
        return str(verdict["text"])
    checked = verdict.get("checked", 0)
    pruned = verdict.get("pruned", 0)
    if verdict.get("ok"):
        return t("tui.audit_ok", checked=checked, pruned=pruned)
    reason = str(verdict.get("reason") or "")
    words = t_or(f"audit.broken.{reason}", str(verdict.get("detail") or reason))
    seq = verdict.get("first_broken_seq", verdict.get("firstBrokenSeq"))
    return t("tui.audit_broken", seq=seq, reason=words)
