"""The audit in plain words: every kind and every verification reason has its words in
both catalogues, each line is filled from the row's facts (absent facts left out), an
emptied row and an unknown kind are still told, and the time is the owner's."""

from __future__ import annotations

import string
from collections.abc import Iterator
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from kernel.audit import kinds
from kernel.audit.verify import REASONS, Verdict
from kernel.audit.words import describe, verdict_words, words
from kernel.core.i18n import CATALOG, get_language, set_language
from kernel.store.audit import AuditRow

SHANGHAI = ZoneInfo("Asia/Shanghai")

# Facts as the recorders write them (kernel/audit/kinds.py), one example per kind.
EXAMPLES: dict[str, tuple[str, dict[str, Any], str]] = {
    kinds.MESSAGE_RECEIVED: (
        "owner",
        {"messages": [{"id": 1, "sha256": "ab"}], "channel": "telegram", "parts": ["photo"]},
        "🧑 you sent a message (photo) via telegram",
    ),
    kinds.TURN_ANSWERED: ("kernel", {"outcome": "answered"}, "💬 turn answered"),
    kinds.MODEL_CALL: (
        "kernel",
        {
            "provider": "main",
            "model": "model-a",
            "purpose": "turn",
            "input_tokens": 12_300,
            "output_tokens": 850,
            "cost": 0.05,
            "currency": "USD",
        },
        "🧠 model main:model-a (turn): 12.3K in · 850 out · 0.05 USD",
    ),
    kinds.TOOL_CALL: (
        "model",
        {"tool": "memory_search", "ok": True, "ms": 120, "args_sha256": "cd"},
        "🔧 tool memory_search ✓ 120 ms",
    ),
    kinds.DELEGATION_STARTED: (
        "model",
        {"delegation": "d1", "cli": "codex", "task_sha256": "ef", "task_chars": 40},
        "🤖 delegated to codex #d1",
    ),
    kinds.DELEGATION_ENDED: (
        "kernel",
        {"delegation": "d1", "exit_code": 0, "ok": True, "seconds": 12.0},
        "🤖 delegation #d1 ended ✓ exit 0 12 s",
    ),
    kinds.APPROVAL_ASKED: (
        "kernel",
        {"delegation": "d1", "tool": "Bash"},
        "❓ approval asked: Bash #d1",
    ),
    kinds.APPROVAL_ANSWERED: (
        "owner",
        {"delegation": "d1", "tool": "Bash", "decision": "deny", "by": "owner"},
        "✋ approval for Bash: denied (you)",
    ),
    kinds.CRON_FIRED: (
        "cron",
        {"job_id": "daily-news", "outcome": "succeeded"},
        "⏰ cron job daily-news fired (succeeded)",
    ),
    kinds.CRON_SKIPPED: (
        "cron",
        {"job_id": "j2", "reason": "busy"},
        "⏰ cron job j2 skipped: its previous run was still going",
    ),
    kinds.CRON_MISSED: (
        "cron",
        {"job_id": "daily-news", "reason": "down"},
        "⏰ cron job daily-news missed: Kernel was down",
    ),
    kinds.CRON_INTERRUPTED: (
        "cron",
        {"job_id": "j3"},
        "⏰ cron job j3 was cut short: Kernel stopped",
    ),
    kinds.SELFOPS_PREVIEW: (
        "model",
        {"change": "c1", "target": "prompt", "path": "prompts/codex.md"},
        "🛠 SelfOps change #c1 previewed: prompt prompts/codex.md",
    ),
    kinds.SELFOPS_APPLY: (
        "owner",
        {"change": "c1", "target": "prompt", "path": "prompts/codex.md", "after_sha256": "01"},
        "🛠 SelfOps change #c1 applied: prompt prompts/codex.md",
    ),
    kinds.CONFIG_CHANGED: (
        "api",
        {"keys": ["providers.main.models", "budget.daily"]},
        "⚙️ configuration changed: providers.main.models, budget.daily",
    ),
    kinds.MCP_CHANGED: (
        "owner",
        {"action": "restart", "server": "time"},
        "🔌 MCP server time: restarted",
    ),
    kinds.OUTBOX_SENT: (
        "kernel",
        {"outbox_id": 7, "kind": "reply", "chat": 42},
        "📤 delivered #7: reply",
    ),
    kinds.OUTBOX_FAILED: (
        "kernel",
        {"outbox_id": 8, "kind": "notice", "reason": "expired"},
        "📤 not delivered #8: notice (expired)",
    ),
    kinds.HISTORY_CUT: (
        "owner",
        {"how": "undo", "count": 2, "branch": 1},
        "✂️ history cut by /undo: 2 messages",
    ),
    kinds.HISTORY_RESTORED: ("kernel", {"branch": 1}, "↩️ cut history restored (1)"),
    kinds.HISTORY_SWITCHED: (
        "owner",
        {"branch": 1, "fork": 4, "restored": 2, "left": [3], "cut": 2},
        "🔀 switched to branch #1 (2 messages) (the history left became branch 3)",
    ),
    kinds.MODE_CHANGED: (
        "owner",
        {"mode": "act", "before": "plan", "how": "confirm"},
        "🧭 mode plan → act (you)",
    ),
    kinds.MEMORY_CHANGED: (
        "api",
        {"action": "moved", "memory": 7, "scope": "global", "before": "project:kernel"},
        "🧠 memory #7 moved to another scope (an API client)",
    ),
    kinds.ARTIFACT_SAVED: (
        "kernel",
        {"artifact_id": 3, "kind": "cli", "size": 2048, "sha256": "99"},
        "📎 file saved #3: cli 2.0 KB",
    ),
    kinds.PRUNED: (
        "kernel",
        {"sessions": [4, 5], "rows": 9, "why": "deleted"},
        "🧹 history deleted: 9 audit rows of 2 sessions emptied",
    ),
    kinds.KEYED: (
        "kernel",
        {"from": 12},
        "🔏 the audit record is sealed with the audit key from here on",
    ),
    kinds.BACKUP_MADE: (
        "kernel",
        {"label": "daily", "size": 3 * 1024 * 1024, "kept": 7, "deleted": 1},
        "💾 daily backup written (3.0 MB); the rotation deleted 1 old ones",
    ),
    kinds.BACKUP_FAILED: (
        "kernel",
        {"label": "daily", "reason": "backup.failed"},
        "💾 daily backup failed: backup.failed",
    ),
}


@pytest.fixture(autouse=True)
def english() -> Iterator[None]:
    before = get_language()
    set_language("en")
    yield
    set_language(before)


def row(
    kind: str, data: dict[str, Any] | None, actor: str = "kernel", *, pruned: bool = False
) -> AuditRow:
    at = "2026-11-26T10:02:07+00:00"
    return AuditRow(5, 2, 3, at, kind, actor, data, "d", "s", "g", pruned, None)


def test_every_kind_has_an_example_and_words_in_both_catalogues() -> None:
    assert set(EXAMPLES) == set(kinds.KINDS)
    for kind in kinds.KINDS:
        zh, en = CATALOG["zh"][f"audit.kind.{kind}"], CATALOG["en"][f"audit.kind.{kind}"]
        names = [{f for _, f, _, _ in string.Formatter().parse(text) if f} for text in (zh, en)]
        assert names[0] == names[1], kind
    for reason in REASONS:
        assert (
            f"audit.broken.{reason}" in CATALOG["zh"] and f"audit.broken.{reason}" in CATALOG["en"]
        )


@pytest.mark.parametrize("kind", kinds.KINDS)
def test_each_kind_in_words(kind: str) -> None:
    actor, facts, expected = EXAMPLES[kind]
    assert words(row(kind, facts, actor)) == expected
    set_language("zh")
    chinese = words(row(kind, facts, actor))
    assert chinese and "{" not in chinese and chinese != expected
    assert words(row(kind, {}, actor))  # a recorder that left every fact out: still a line


def test_time_is_local_and_the_line_holds_no_more_than_the_row() -> None:
    line = describe(
        row(kinds.TOOL_CALL, {"tool": "web_fetch", "ok": False, "error": "timeout", "ms": 30_000}),
        SHANGHAI,
    )
    assert line == "11-26 18:02:07 🔧 tool web_fetch ✗ timeout 30 s"
    assert (
        words(row(kinds.MESSAGE_RECEIVED, {"parts": ["text"]}, "guest:qq"))
        == "🧑 a guest (qq) sent a message"
    )
    assert words(row(kinds.MESSAGE_RECEIVED, {}, "api")) == "🧑 an API client sent a message"


def test_emptied_and_unknown_rows() -> None:
    assert (
        words(row(kinds.TOOL_CALL, None, pruned=True))
        == "🧹 tool.call (emptied with its deleted history)"
    )
    assert words(row("plugin.thing", {"x": 1})) == "• plugin.thing"
    # A fact of an unexpected type is shown, never a crash.
    assert (
        words(row(kinds.MODEL_CALL, {"model": ["a"], "input_tokens": "many"}))
        == "🧠 model a: ? in · ? out"
    )


def test_verdicts() -> None:
    assert verdict_words(Verdict(True, 42)) == "✅ record whole: 42 events"
    assert (
        verdict_words(Verdict(True, 42, 3))
        == "✅ record whole: 42 events (3 emptied with deleted history)"
    )
    assert (
        verdict_words(Verdict(False, 4, 0, 5, "edited"))
        == "⚠️ record broken at #5: the row was changed after it was written"
    )
    for reason, detail in REASONS.items():
        assert verdict_words(Verdict(False, 0, 0, 1, reason)) == f"⚠️ record broken at #1: {detail}"
    set_language("zh")
    assert verdict_words(Verdict(False, 4, 0, 5, "link")).startswith("⚠️ 记录在 #5 处损坏：")


@pytest.mark.parametrize(
    ("kind", "data", "said"),
    [
        # The facts as the recorders write them (kernel/agent/trail.py, telegram/outbox.py,
        # selfops/recording.py, mcp/manager.py, cron/scheduler.py).
        (
            kinds.MODEL_CALL,
            {
                "provider": "main",
                "model": "m",
                "purpose": "turn",
                "outcome": "ok",
                "tokens": {"input": 2200, "output": 9},
            },
            "🧠 model main:m (turn): 2.2K in · 9 out",
        ),
        (
            kinds.OUTBOX_SENT,
            {"row": 1, "action": "send", "chat": 7, "outcome": "sent", "message": 3},
            "📤 delivered #1: a message (Telegram message 3)",
        ),
        (
            kinds.OUTBOX_FAILED,
            {"row": 2, "action": "edit", "outcome": "expired"},
            "📤 not delivered #2: an edit (expired)",
        ),
        (
            kinds.SELFOPS_APPLY,
            {
                "change": "c1",
                "target": "workspace_file",
                "paths": ["SOUL.md"],
                "outcome": "mutation_apply_conflict",
            },
            "🛠 SelfOps change #c1 apply refused (mutation_apply_conflict): workspace_file SOUL.md",
        ),
        (
            kinds.MCP_CHANGED,
            {"action": "remove", "outcome": "mcp_server_not_found"},
            "🔌 MCP server ?: removed (refused: mcp_server_not_found)",
        ),
        (
            kinds.CRON_MISSED,
            {"job": "j1", "outcome": "missed", "reason": "late"},
            "⏰ cron job j1 missed: it was past its grace time",
        ),
    ],
)
def test_the_recorders_facts_in_words(kind: str, data: dict[str, Any], said: str) -> None:
    set_language("en")
    assert describe(row(kind, data), ZoneInfo("UTC")).split(" ", 2)[2] == said
