"""What Kernel does on its own or for the owner, in the audit trail (issue 23, point 1):
a delegation with an approval in the delegating chat's session, cron runs (fired,
skipped, interrupted, missed), SelfOps previews and applies, configuration and MCP
changes. Real parts: the Telegram and model simulators, the stand-in Claude Code asking
through the sidecar's MCP endpoint, the scheduler on a driven clock, the sidecar's
routes, SQLite on disk. Each test ends by editing and deleting a row of each kind in the
file: verification names that row."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import AsyncIterator, Iterable
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from kernel.audit import AuditLog
from kernel.gateway.server import Gateway
from kernel.store.audit import AuditRow
from tests.clock import ManualClock
from tests.cron.conftest import echo as echo  # noqa: F401 - the fixtures, shared
from tests.cron.conftest import hook as hook  # noqa: F401
from tests.cron.test_budget import PRICED
from tests.cron.test_scheduler import TZ, create, settled, state, texts, webhook_config
from tests.delegate.claude_permission import make_permission_cli
from tests.delegate.conftest import cli_section
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.gateway.conftest import sidecar as sidecar  # noqa: F401 - the fixture, shared
from tests.mcp.conftest import stdio_server
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, Text, text_reply, tool_reply
from tests.sim.telegram_sim import ChatMessage
from tests.sim.webhook_sim import WebhookSim
from tests.telegram.conftest import Factory
from tests.telegram.conftest import bot as bot  # noqa: F401 - the fixture, shared
from tests.waiting import wait_until

TASK = "Audit-me task: summarise the ledger in billing/ and fix the flaky rounding test"
ASKED = "git status --porcelain"
OPS = (
    "delegation.started",
    "approval.asked",
    "approval.answered",
    "delegation.ended",
)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def one(rows: Iterable[AuditRow], kind: str) -> AuditRow:
    [row] = [r for r in rows if r.kind == kind]
    return row


def facts(row: AuditRow) -> dict[str, Any]:
    assert row.data is not None
    return row.data


def audit_file_bytes(db: Path, into: Path) -> bytes:
    """The raw bytes of a copy of the database holding the audit's tables alone (the
    history itself holds the owner's words, the audit must not)."""
    others = (
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        " AND name NOT IN ('audit_events', 'audit_heads')"
    )
    with closing(sqlite3.connect(db)) as source, closing(sqlite3.connect(into)) as copy:
        source.backup(copy)
        for _ in range(5):  # a full-text index's own tables go with it: a second pass
            for (name,) in copy.execute(others).fetchall():
                with contextlib.suppress(sqlite3.OperationalError):
                    copy.execute(f'DROP TABLE "{name}"')
            copy.commit()
        assert copy.execute(others).fetchall() == []
        copy.execute("VACUUM")
    return into.read_bytes()


async def tampering_is_named(audit: AuditLog, db: Path, rows: Iterable[AuditRow]) -> None:
    """Edit, then delete, each row directly in SQLite: the global chain (and the row's
    session's) names it as the first broken; put back, everything verifies again."""
    for row in rows:
        with closing(sqlite3.connect(db)) as conn:
            original = conn.execute("SELECT * FROM audit_events WHERE id = ?", (row.id,)).fetchone()
            conn.execute(
                "UPDATE audit_events SET data = ? WHERE id = ?", ('{"forged":true}', row.id)
            )
            conn.commit()
        whole = await audit.verify()
        assert (whole.ok, whole.first_broken_seq, whole.reason) == (False, row.id, "edited"), row
        if row.session_id is not None:
            session = await audit.verify(row.session_id)
            assert (session.first_broken_seq, session.reason) == (row.seq, "edited")
        with closing(sqlite3.connect(db)) as conn:
            conn.execute("DELETE FROM audit_events WHERE id = ?", (row.id,))
            conn.commit()
        whole = await audit.verify()
        assert (whole.ok, whole.first_broken_seq, whole.reason) == (False, row.id, "missing"), row
        with closing(sqlite3.connect(db)) as conn:
            marks = ", ".join("?" * len(original))
            conn.execute(f"INSERT INTO audit_events VALUES ({marks})", original)
            conn.commit()
        assert (await audit.verify()).ok
    assert (await audit.verify()).ok


# ----- a delegation asking the owner, in Telegram ------------------------------------------


def buttons(message: ChatMessage) -> list[str]:
    assert message.reply_markup is not None
    return [b["callback_data"] for row in message.reply_markup["inline_keyboard"] for b in row]


@pytest.fixture
async def asking_cli(
    bot: Factory,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Any]:
    """A Telegram Kernel whose Claude Code (the stand-in) asks before one Bash call,
    through the sidecar's MCP endpoint."""
    command = make_permission_cli(tmp_path / "bin")
    call = {"name": "Bash", "input": {"command": ASKED, "description": "Status"}}
    monkeypatch.setenv("STANDIN_CALLS", json.dumps([call]))
    monkeypatch.setenv("STANDIN_RAN", str(tmp_path / "ran.jsonl"))
    extra = cli_section(
        "claude_code", command=str(command), approvals="telegram", approval_timeout=60.0
    )
    h = await bot(extra=extra)
    gateway = Gateway(h.kernel.gateway_deps(), h.kernel.plugins.routers())
    await gateway.start()
    try:
        yield h
    finally:
        await gateway.stop()


@pytest.mark.posix  # the stand-in CLI is a #!python script made executable
async def test_a_delegation_and_its_approval_are_in_the_delegating_session(
    asking_cli: Any, tmp_path: Path
) -> None:
    h = asking_cli
    h.model.enqueue(tool_reply("delegate_to_cli", {"task": TASK}), text_reply("Clean."))
    h.tg.inject_text("is my repo clean?")

    def live() -> list[ChatMessage]:
        return [m for m in h.bot_messages() if "asks to use" in m.text and m.reply_markup]

    await h.tg.wait_until(lambda: bool(live()))
    prompt = live()[-1]
    h.tg.inject_callback(buttons(prompt)[0], message_id=prompt.message_id)  # Allow once
    await h.settle()
    assert h.texts()[-1].startswith("Clean.\n\n✅ claude_code finished")  # the run folded in

    kernel = h.kernel
    audit: AuditLog = kernel.audit
    started = one(await audit.events(limit=1000), "delegation.started")
    session = started.session_id
    assert session is not None
    with closing(sqlite3.connect(kernel.config.db_path)) as conn:
        chats = conn.execute(
            "SELECT DISTINCT session_id FROM messages WHERE content LIKE '%is my repo clean%'"
        ).fetchall()
    assert chats == [(session,)]  # the owner's chat that delegated
    rows = [r for r in await audit.events(session, limit=1000) if r.kind in OPS]
    assert [r.kind for r in rows] == list(OPS)
    started, asked, answered, ended = rows

    run = facts(started)
    delegation = run["delegation"]
    assert started.actor == "model" and run["cli"] == "claude_code"
    assert run["cwd"] == "."  # the workspace itself
    assert run["argv"][0] == "claude" and run["argv"][-2:] == [
        "--",
        f"<task sha256:{sha(TASK)} chars:{len(TASK)}>",
    ]
    assert "--permission-prompt-tool" in run["argv"]
    config_file = run["argv"][run["argv"].index("--mcp-config") + 1]
    assert config_file == f"data/run/{delegation}/mcp.json"
    assert "version" in run

    [record] = await kernel.approvals.recent()
    question = facts(asked)
    assert asked.actor == "model" and question["delegation"] == delegation
    assert question["tool"] == "Bash" and question["cli"] == "claude_code"
    assert question["args_sha256"] == sha(
        json.dumps(
            {"command": ASKED, "description": "Status"},
            ensure_ascii=False,
            sort_keys=True,
            separators=(",", ":"),
        )
    )
    answer = facts(answered)
    assert answered.actor == "owner"
    assert (answer["decision"], answer["by"], answer["record"]) == ("allow", "owner", record.id)
    assert (answer["rule_used"], answer["rule_added"]) == (False, False)
    assert answer["delegation"] == delegation == record.delegation_id

    end = facts(ended)
    assert ended.actor == "model" and end["delegation"] == delegation
    assert (end["ok"], end["exit_code"], end["reason"]) == (True, 0, "completed")
    assert end["output"].startswith("data/cli_outputs/") and end["seconds"] >= 0

    assert (await audit.verify(session)).ok and (await audit.verify()).ok
    raw = audit_file_bytes(kernel.config.db_path, tmp_path / "audit-only.db")
    assert sha(TASK).encode() in raw  # the task is there as its hash …
    for secret in (TASK, "billing/", ASKED, "is my repo clean", str(tmp_path)):
        assert secret.encode() not in raw  # … and nowhere as text, nor the outside paths
    await tampering_is_named(audit, kernel.config.db_path, rows)


# ----- cron: fired, skipped, interrupted, missed ------------------------------------------


def cron_runs(db: Path, job_id: str) -> list[str]:
    with closing(sqlite3.connect(db)) as conn:
        return [
            o
            for (o,) in conn.execute(
                "SELECT outcome FROM cron_runs WHERE job_id = ? ORDER BY id", (job_id,)
            )
        ]


async def cron_rows(audit: Any, count: int) -> list[Any]:
    """The audit's cron rows once ``count`` are written."""

    async def rows() -> list[Any]:
        await audit.settled()
        return [r for r in await audit.events(limit=1000) if r.kind.startswith("cron.")]

    await wait_until(lambda: _at_least(rows(), count), what=f"{count} cron audit rows")
    return await rows()


async def _at_least(rows: Any, count: int) -> bool:
    return len(await rows) >= count


async def test_every_recorded_cron_run_has_its_audit_row(
    sidecar: SidecarFactory,  # noqa: F811 - the fixture imported above
    echo: AnthropicSim,
    hook: WebhookSim,
) -> None:
    clock = ManualClock(datetime(2025, 6, 1, 7, 0, tzinfo=TZ))
    sc = await sidecar(echo, extra=webhook_config(hook.url), clock=clock)
    job = await create(sc, name="hourly", schedule="every 1h", text="tick")
    job_id = job["id"]

    clock.advance(to=datetime(2025, 6, 1, 8, 0, tzinfo=TZ))  # fires and answers
    await hook.wait_until(lambda: texts(hook) == ["echo: tick"])
    await settled(sc, clock)
    echo.enqueue(Reply(Text("slow", chunks=["s", "low"]), stall_after=1))
    clock.advance(to=datetime(2025, 6, 1, 9, 0, tzinfo=TZ))  # hangs on the model …
    await echo.wait_for_requests(2)
    clock.advance(to=datetime(2025, 6, 1, 10, 0, tzinfo=TZ))  # … so this one is skipped
    # The skip's audit row follows its saved state (the next run planned for 11:00):
    # the stop comes after both.
    await cron_rows(sc.kernel.audit, 2)
    session = sc.kernel.cron.runner.sessions[job_id]
    await sc.stop()  # the hanging run is cut short: interrupted

    clock = ManualClock(datetime(2025, 6, 1, 12, 30, tzinfo=TZ))  # 11:00 missed by 90 min
    sc = await sidecar(echo, extra=webhook_config(hook.url), clock=clock, keep_config=True)
    assert (await state(sc, job_id))["last_status"] == "skipped"

    audit = sc.kernel.audit
    rows = await cron_rows(audit, 4)  # the missed run's row is noted after the start
    assert [(r.kind, facts(r)["outcome"], facts(r).get("reason")) for r in rows] == [
        ("cron.fired", "succeeded", None),
        ("cron.skipped", "skipped", "running"),
        ("cron.interrupted", "interrupted", "stop"),
        ("cron.missed", "missed", "late"),
    ]
    assert all(r.actor == "cron" and facts(r)["job"] == job_id for r in rows)
    fired, skipped, interrupted, missed = rows
    with closing(sqlite3.connect(sc.kernel.config.db_path)) as conn:
        asked = conn.execute(
            "SELECT DISTINCT session_id FROM messages WHERE content LIKE '%tick%'"
        ).fetchall()
    assert fired.session_id == session and asked == [(session,)]  # the run's own session
    assert skipped.session_id is interrupted.session_id is missed.session_id is None
    late = facts(missed)
    assert late["due"] == "2025-06-01T03:00:00+00:00"  # 11:00 in Shanghai
    assert (late["late_seconds"], late["grace_seconds"]) == (5400, 300)
    # One audit row for each outcome cron_runs keeps, in the same order.
    outcomes = cron_runs(sc.kernel.config.db_path, job_id)
    assert outcomes == ["succeeded", "skipped", "interrupted", "missed"]
    assert (await audit.verify()).ok and (await audit.verify(session)).ok
    await tampering_is_named(audit, sc.kernel.config.db_path, rows)


async def test_a_run_the_budget_refuses_is_recorded_as_skipped_with_its_reason(
    sidecar: SidecarFactory,  # noqa: F811 - the fixture imported above
    echo: AnthropicSim,
    hook: WebhookSim,
) -> None:
    extra = webhook_config(hook.url) + PRICED.format(daily=0.0, job=0.0)
    sc = await sidecar(echo, extra=extra, clock=ManualClock(datetime(2025, 6, 1, 7, tzinfo=TZ)))
    job = await create(
        sc, name="digest", schedule="every 1d", text="hi", runtime={"budget_daily": 0.5}
    )
    status, _, _ = await sc.call("POST", f"/cron/jobs/{job['id']}/run")
    assert status == 202
    await wait_until(lambda: not sc.kernel.cron._runs)
    assert echo.requests == []  # refused before the first call

    [row] = [r for r in await sc.kernel.audit.events(limit=1000) if r.kind.startswith("cron.")]
    assert (row.kind, row.actor, row.session_id) == ("cron.skipped", "cron", None)
    assert facts(row) == {"job": job["id"], "outcome": "skipped", "reason": "budget"}
    assert cron_runs(sc.kernel.config.db_path, job["id"]) == ["skipped"]


# ----- SelfOps through the sidecar --------------------------------------------------------

BODY = "Be brief. The owner's private brief: call me Captain.\n"
PREVIEW = "/agent/self/config-mutations/preview"
APPLY = "/agent/self/config-mutations/apply"


async def preview_file(sc: Sidecar, value: str) -> dict[str, Any]:
    op = {"kind": "replace", "path": "prompts/brief.md", "value": value}
    status, data, _ = await sc.call(
        "POST", PREVIEW, {"target": "workspace_file", "operations": [op]}
    )
    assert status == 200, data
    return dict(data)


async def test_selfops_previews_and_applies_are_recorded_with_their_hashes(
    sidecar: SidecarFactory,  # noqa: F811 - the fixture imported above
    anthropic_sim: AnthropicSim,
    tmp_path: Path,
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    preview = await preview_file(sc, BODY)
    status, applied, _ = await sc.call(
        "POST",
        APPLY,
        {"mutation_id": preview["mutation_id"], "confirm_hash": preview["confirm_hash"]},
    )
    assert status == 200 and applied["applied"] is True
    target = sc.config_path.parent / "prompts" / "brief.md"
    assert target.read_text() == BODY
    again = await preview_file(sc, "Be briefer.\n")
    target.write_text("changed by hand\n")  # after the preview: the apply is refused
    status, refused, _ = await sc.call(
        "POST", APPLY, {"mutation_id": again["mutation_id"], "confirm_hash": again["confirm_hash"]}
    )
    assert (status, refused["error"]["code"]) == (409, "mutation_apply_conflict")
    status, gone, _ = await sc.call(
        "POST", APPLY, {"mutation_id": "../../etc/passwd", "confirm_hash": "x"}
    )
    assert (status, gone["error"]["code"]) == (404, "mutation_not_found")

    audit = sc.kernel.audit
    rows = [r for r in await audit.events(limit=1000) if r.kind.startswith("selfops.")]
    assert [(r.kind, facts(r)["outcome"]) for r in rows] == [
        ("selfops.preview", "previewed"),
        ("selfops.apply", "applied"),
        ("selfops.preview", "previewed"),
        ("selfops.apply", "mutation_apply_conflict"),
        ("selfops.apply", "mutation_not_found"),
    ]
    assert all(r.actor == "api" and r.session_id is None for r in rows)
    first, done, second, conflict, unknown = (facts(r) for r in rows)
    assert first["change"] == done["change"] == preview["mutation_id"]
    assert (done["target"], done["paths"], done["sensitive"]) == (
        "workspace_file",
        ["prompts/brief.md"],
        False,
    )
    [shown] = preview["diff_summary"]
    assert done["hashes"] == [
        {"path": "prompts/brief.md", "before_sha256": None, "after_sha256": sha(BODY)}
    ]
    assert shown["after_hash"] == sha(BODY)
    assert conflict["change"] == again["mutation_id"]
    assert conflict["hashes"] == [
        {
            "path": "prompts/brief.md",
            "before_sha256": sha(BODY),
            "after_sha256": sha("Be briefer.\n"),
        }
    ]
    assert set(unknown) == {"outcome"}  # an id that is not one is not kept
    raw = audit_file_bytes(sc.kernel.config.db_path, tmp_path / "audit-only.db")
    for secret in ("Captain", "Be briefer", "changed by hand", "passwd"):
        assert secret.encode() not in raw
    assert (await audit.verify()).ok
    await tampering_is_named(audit, sc.kernel.config.db_path, [rows[0], rows[1], rows[3]])


# ----- configuration and MCP servers --------------------------------------------------------


async def test_configuration_and_mcp_changes_are_recorded_by_name(
    sidecar: SidecarFactory,  # noqa: F811 - the fixture imported above
    anthropic_sim: AnthropicSim,
    tmp_path: Path,
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    rotated = "sk-rotated-0123456789abcdef"
    status, data, _ = await sc.call(
        "PUT", "/models/main/config", {"default_model": "model-b", "api_key": rotated}
    )
    assert status == 200, data
    status, data, _ = await sc.call("PUT", "/models/active", {"provider_id": "main"})
    assert status == 200, data
    status, data, _ = await sc.call("POST", "/mcp/servers", stdio_server("local"))
    assert status == 201 and data["state"] == "connected"
    status, _, _ = await sc.call("DELETE", "/mcp/servers/local")
    assert status == 200
    status, data, _ = await sc.call("DELETE", "/mcp/servers/local")
    assert (status, data["error"]["code"]) == (404, "mcp_server_not_found")

    audit = sc.kernel.audit
    rows = [
        r for r in await audit.events(limit=1000) if r.kind in ("config.changed", "mcp.changed")
    ]
    assert [(r.kind, r.actor) for r in rows] == [
        ("config.changed", "api"),
        ("config.changed", "api"),  # the active model
        ("config.changed", "api"),
        ("mcp.changed", "api"),
        ("config.changed", "api"),
        ("mcp.changed", "api"),
        ("mcp.changed", "api"),
    ]
    model, active, added_keys, added, removed_keys, removed, refused = (facts(r) for r in rows)
    assert model == {
        "sections": ["providers"],
        "keys": ["providers.main.api_key", "providers.main.default_model"],
    }
    assert active == {"sections": ["active"], "keys": ["active.model", "active.provider"]}
    assert added_keys == removed_keys == {"sections": ["mcp"], "keys": ["mcp.servers"]}
    assert added == {
        "action": "add",
        "server": "local",
        "transport": "stdio",
        "outcome": "ok",
        "state": "connected",
    }
    assert removed == {
        "action": "remove",
        "server": "local",
        "transport": "stdio",
        "outcome": "ok",
    }
    assert refused == {"action": "remove", "outcome": "mcp_server_not_found"}
    raw = audit_file_bytes(sc.kernel.config.db_path, tmp_path / "audit-only.db")
    assert rotated.encode() not in raw and b"stdio_server.py" not in raw
    assert (await audit.verify()).ok
    await tampering_is_named(audit, sc.kernel.config.db_path, [rows[0], rows[3]])


async def test_the_owners_model_switch_in_telegram_is_recorded_as_theirs(
    bot: Factory,  # noqa: F811 - the fixture imported above
) -> None:
    h = await bot()
    assert "model-b" in await h.ask("/model model-b")
    assert "model-x" in await h.ask("/model model-x")  # refused: not recorded
    await h.ask("/model auto")

    rows = [r for r in await h.kernel.audit.events(limit=1000) if r.kind == "config.changed"]
    assert [(r.actor, r.session_id, facts(r)["keys"]) for r in rows] == [
        ("owner", None, ["active.model", "active.provider"]),
        ("owner", None, ["active.model", "active.provider"]),
    ]
