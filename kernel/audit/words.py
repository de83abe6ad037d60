"""The audit in plain words: one line per event (``/audit``, the API's ``text``, the
console, ``kernel audit list``) and a chain's verdict.

Each kind of :mod:`kernel.audit.kinds` has its words in the catalogue
(``audit.kind.<kind>``), filled from the row's facts; a fact a recorder left out is
left out of the line, an unknown kind is shown by its name, and an emptied row (its
history was deleted) says so. Facts are shown, never looked up: the line holds only
what the row holds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import tzinfo
from typing import Any

from kernel.audit import kinds
from kernel.audit.verify import Verdict
from kernel.core.clock import shown
from kernel.core.i18n import t, t_or
from kernel.store.audit import AuditRow

Facts = Mapping[str, Any]
TIME_FORMAT = "%m-%d %H:%M:%S"


def describe(row: AuditRow, tz: tzinfo) -> str:
    """``"11-26 18:02:07 🔧 tool memory_search ✓ 120 ms"``: local time, then the words."""
    return f"{local_time(row.at, tz)} {words(row)}"


def local_time(at: str, tz: tzinfo) -> str:
    return shown(at, tz, TIME_FORMAT)


def words(row: AuditRow) -> str:
    """The event without its time."""
    if row.pruned or row.data is None:
        return t("audit.emptied", kind=row.kind)
    fill = _FILLERS.get(row.kind)
    if fill is None:
        return f"• {row.kind}"
    return t(f"audit.kind.{row.kind}", **fill(row.data, row.actor))


def verdict_words(verdict: Verdict) -> str:
    """``"✅ record whole: 42 events (3 emptied with deleted history)"`` or
    ``"⚠️ record broken at #5: the row was changed after it was written"``."""
    if verdict.ok:
        if verdict.pruned:
            return t("audit.whole_pruned", checked=verdict.checked, pruned=verdict.pruned)
        return t("audit.whole", checked=verdict.checked)
    reason = verdict.reason or ""
    return t(
        "audit.broken",
        seq=verdict.first_broken_seq,
        reason=t_or(f"audit.broken.{reason}", reason),
    )


# ----- facts → the placeholders of each kind's words --------------------------------------


def _get(facts: Facts, *names: str) -> Any:
    for name in names:
        value = facts.get(name)
        if value is not None and value != "":
            return value
    return None


def _text(value: Any, default: str = "?") -> str:
    if value is None:
        return default
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or default
    return str(value)


def _paren(text: str) -> str:
    return t("audit.paren", text=text) if text else ""


def _mark(ok: Any) -> str:
    if ok is None:
        return ""
    return "✓" if ok else "✗"


def _tokens(count: Any) -> str:
    if not isinstance(count, int | float) or isinstance(count, bool):
        return "?"
    if count < 1000:
        return str(int(count))
    if count < 1_000_000:
        return f"{count / 1000:.1f}K"
    return f"{count / 1_000_000:.1f}M"


def size_words(size: Any) -> str:
    """A byte count in words: "512 B", "3.4 KB", "1.2 GB"."""
    if not isinstance(size, int) or isinstance(size, bool):
        return "?"
    value = float(size)
    for unit in ("B", "KB", "MB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def _duration(facts: Facts) -> str:
    ms = _get(facts, "ms", "duration_ms")
    if isinstance(ms, int | float) and not isinstance(ms, bool):
        return f"{ms:.0f} ms" if ms < 10_000 else f"{ms / 1000:.0f} s"
    seconds = _get(facts, "seconds", "duration")
    if isinstance(seconds, int | float) and not isinstance(seconds, bool):
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    return ""


def _joined(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def _reason(facts: Facts) -> str:
    code = _get(facts, "reason", "error", "code")
    if code is None:
        return t("audit.reason.unknown")
    return t_or(f"audit.reason.{code}", str(code))


def _who(actor: str) -> str:
    channel = actor.partition(":")[2]
    if actor.startswith("guest:"):
        return t("audit.who.guest", channel=channel)
    return t_or(f"audit.who.{actor}", actor)


def _id(facts: Facts, *names: str) -> str:
    value = _get(facts, *names)
    return "" if value is None else f" #{value}"


def _message(facts: Facts, actor: str) -> dict[str, str]:
    parts = facts.get("parts")
    shown = [p for p in parts if p != "text"] if isinstance(parts, list) else []
    named = [t_or(f"audit.part.{p}", str(p)) for p in shown]
    channel = _get(facts, "channel")
    where = t("audit.via", channel=channel) if channel else ""
    return {"who": _who(actor), "parts": _paren(t("audit.list_sep").join(named)), "via": where}


def _turn(facts: Facts, actor: str) -> dict[str, str]:
    outcome = _text(_get(facts, "outcome"), "answered")
    code = _get(facts, "code", "error")
    return {
        "outcome": t_or(f"audit.outcome.{outcome}", outcome),
        "code": _paren(str(code)) if code else "",
    }


def _model(facts: Facts, actor: str) -> dict[str, str]:
    provider, model = _get(facts, "provider"), _get(facts, "model")
    name = f"{provider}:{model}" if provider and model else _text(model or provider)
    cost = _get(facts, "cost")
    shown = ""
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        currency = _get(facts, "currency") or ""
        shown = f" · {cost:.4f}".rstrip("0").rstrip(".") + (f" {currency}" if currency else "")
    purpose = _get(facts, "purpose")
    tokens = facts.get("tokens")
    counts: Facts = tokens if isinstance(tokens, dict) else facts  # recorded nested
    outcome = _get(facts, "outcome")
    failed = _paren(str(outcome)) if outcome not in (None, "ok") else ""  # a code
    return {
        "model": name,
        "purpose": _paren(str(purpose)) if purpose else "",
        "input": _tokens(_get(counts, "input_tokens", "input")),
        "output": _tokens(_get(counts, "output_tokens", "output")),
        "cost": shown + failed,
    }


def _tool(facts: Facts, actor: str) -> dict[str, str]:
    ok = _get(facts, "ok")
    error = _get(facts, "error", "code") if ok is False else None
    return {
        "tool": _text(_get(facts, "tool", "name")),
        "details": _joined(_mark(ok), str(error) if error else "", _duration(facts)),
    }


def _delegation_started(facts: Facts, actor: str) -> dict[str, str]:
    return {"cli": _text(_get(facts, "cli")), "id": _id(facts, "delegation", "delegation_id")}


def _delegation_ended(facts: Facts, actor: str) -> dict[str, str]:
    code = _get(facts, "exit_code", "exit", "code")
    reason = _get(facts, "reason")
    signal = _get(facts, "signal")
    cause = _get(facts, "cause")
    return {
        "id": _id(facts, "delegation", "delegation_id"),
        "details": _joined(
            _mark(_get(facts, "ok")),
            t("audit.exit", code=code) if code is not None else "",
            t("audit.signal", signal=signal) if signal else "",
            str(reason) if reason else "",
            t("audit.cause", cause=cause) if cause else "",
            _duration(facts),
        ),
    }


def _approval_asked(facts: Facts, actor: str) -> dict[str, str]:
    return {"tool": _text(_get(facts, "tool")), "id": _id(facts, "delegation", "delegation_id")}


def _approval_answered(facts: Facts, actor: str) -> dict[str, str]:
    decision = _text(_get(facts, "decision"))
    by = _get(facts, "by")
    return {
        "tool": _text(_get(facts, "tool")),
        "decision": t_or(f"audit.decision.{decision}", decision),
        "by": _paren(_who(str(by))) if by else "",
    }


def _job(facts: Facts, actor: str) -> dict[str, str]:
    outcome = _get(facts, "outcome")
    return {
        "job": _text(_get(facts, "name", "job", "job_id")),
        "outcome": _paren(t_or(f"audit.outcome.{outcome}", str(outcome))) if outcome else "",
        "reason": _reason(facts),
    }


def _selfops(step: str) -> Callable[[Facts, str], dict[str, str]]:
    """``step``: preview or apply; a refused one says which, with its error code."""

    def words(facts: Facts, actor: str) -> dict[str, str]:
        target = _get(facts, "target")
        paths = _get(facts, "paths", "path")
        shown = _joined(str(target or ""), _text(paths, "") if paths else "") or "?"
        outcome = _get(facts, "outcome")
        if outcome in (None, "previewed", "applied"):
            result = t(f"audit.selfops.{step}")
        else:
            code = t_or(f"audit.reason.{outcome}", str(outcome))
            result = t(f"audit.selfops.{step}_refused", code=code)
        return {"id": _id(facts, "change", "change_id", "id"), "target": shown, "result": result}

    return words


def _config(facts: Facts, actor: str) -> dict[str, str]:
    return {"keys": _text(_get(facts, "keys", "sections"))}


def _mcp(facts: Facts, actor: str) -> dict[str, str]:
    action = _text(_get(facts, "action"))
    outcome = _get(facts, "outcome")
    refused = ""
    if outcome not in (None, "ok"):
        refused = _paren(t("audit.refused_with", code=t_or(f"audit.reason.{outcome}", outcome)))
    return {
        "server": _text(_get(facts, "server", "name")),
        "action": t_or(f"audit.action.{action}", action) + refused,
    }


def _outbox(facts: Facts, actor: str) -> dict[str, str]:
    action = _text(_get(facts, "action", "kind"))
    what = t_or(f"audit.outbox.{action}", action)
    message = _get(facts, "message")
    if message is not None:
        what = _joined(what, t("audit.outbox.message", id=message))
    return {
        "what": what,
        "id": _id(facts, "row", "outbox", "outbox_id"),
        "reason": _reason(_get(facts, "outcome") and {"reason": facts["outcome"]} or facts),
    }


def _cut(facts: Facts, actor: str) -> dict[str, str]:
    count = _get(facts, "count", "cut", "messages_cut", "cut_messages")
    return {
        "how": _text(_get(facts, "how", "by", "command", "action", "op", "reason")),
        "count": _text(count),
    }


def _restored(facts: Facts, actor: str) -> dict[str, str]:
    branch = _get(facts, "branch")
    return {"branch": _paren(str(branch)) if branch is not None else ""}


def _switched(facts: Facts, actor: str) -> dict[str, str]:
    left = _get(facts, "left")
    return {
        "branch": _text(_get(facts, "branch")),
        "restored": _text(_get(facts, "restored")),
        "left": _paren(t("audit.switched_left", left=_text(left))) if left else "",
    }


def _mode(facts: Facts, actor: str) -> dict[str, str]:
    return {
        "before": _text(_get(facts, "before")),
        "mode": _text(_get(facts, "mode")),
        "by": _paren(_who(actor)) if actor else "",
    }


def _memory(facts: Facts, actor: str) -> dict[str, str]:
    action = _get(facts, "action")
    return {
        "id": _id(facts, "memory"),
        "action": t_or(f"audit.memory.{action}", _text(action)),
        "by": _paren(_who(actor)) if actor else "",
    }


def _artifact(facts: Facts, actor: str) -> dict[str, str]:
    return {
        "id": _id(facts, "artifact", "artifact_id", "id"),
        "kind": _text(_get(facts, "kind"), ""),
        "size": size_words(_get(facts, "size")),
    }


def _pruned(facts: Facts, actor: str) -> dict[str, str]:
    sessions = facts.get("sessions")
    return {
        "rows": _text(_get(facts, "rows")),
        "sessions": str(len(sessions)) if isinstance(sessions, list) else "?",
    }


def _backup(facts: Facts, actor: str) -> dict[str, str]:
    return {
        "size": size_words(_get(facts, "size")),
        "deleted": _text(_get(facts, "deleted")),
        "reason": _text(_get(facts, "reason")),
    }


_FILLERS: dict[str, Callable[[Facts, str], dict[str, str]]] = {
    kinds.MESSAGE_RECEIVED: _message,
    kinds.TURN_ANSWERED: _turn,
    kinds.MODEL_CALL: _model,
    kinds.TOOL_CALL: _tool,
    kinds.DELEGATION_STARTED: _delegation_started,
    kinds.DELEGATION_ENDED: _delegation_ended,
    kinds.APPROVAL_ASKED: _approval_asked,
    kinds.APPROVAL_ANSWERED: _approval_answered,
    kinds.CRON_FIRED: _job,
    kinds.CRON_SKIPPED: _job,
    kinds.CRON_MISSED: _job,
    kinds.CRON_INTERRUPTED: _job,
    kinds.SELFOPS_PREVIEW: _selfops("preview"),
    kinds.SELFOPS_APPLY: _selfops("apply"),
    kinds.CONFIG_CHANGED: _config,
    kinds.MCP_CHANGED: _mcp,
    kinds.OUTBOX_SENT: _outbox,
    kinds.OUTBOX_FAILED: _outbox,
    kinds.HISTORY_CUT: _cut,
    kinds.HISTORY_RESTORED: _restored,
    kinds.HISTORY_SWITCHED: _switched,
    kinds.MODE_CHANGED: _mode,
    kinds.MEMORY_CHANGED: _memory,
    kinds.ARTIFACT_SAVED: _artifact,
    kinds.PRUNED: _pruned,
    kinds.KEYED: lambda facts, actor: {},
    kinds.BACKUP_MADE: _backup,
    kinds.BACKUP_FAILED: _backup,
}
