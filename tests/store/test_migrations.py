"""Schema migrations: fresh databases, upgrades from every version, atomic failure."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable, Callable
from contextlib import closing
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from kernel.audit import AuditLog
from kernel.core.errors import StoreError
from kernel.core.messages import Message, TextBlock
from kernel.core.usage import Usage
from kernel.store.approvals import ApprovalStore
from kernel.store.channels import ChannelStore, WebhookFailure
from kernel.store.cron import KEEP_RUNS, CronRun, CronStore
from kernel.store.db import Store
from kernel.store.decisions import Attempt, DecisionStore
from kernel.store.mailbox import Mailbox
from kernel.store.migrations import MIGRATIONS, Migration, get_version, migrate
from kernel.store.responses import ResponseStore
from kernel.store.tasks import TaskStore
from kernel.store.usage import UsageFilter, UsageStore
from kernel.store.vectors import pack

TS = "2024-05-01T12:00:00+00:00"


def connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def version_of(path: Path) -> int:
    with closing(connect(path)) as conn:
        return get_version(conn)


def tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    )
    return {r[0] for r in rows}


def schema(path: Path) -> dict[tuple[str, str], str]:
    with closing(connect(path)) as conn:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
        ).fetchall()
    return {(t, n): " ".join((sql or "").split()) for t, n, sql in rows}


# Sample data per schema version: inserted right after reaching that version by hand,
# checked through the Store after upgrading to the latest. A new migration needs an entry.


def insert_v1(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO sessions (id, channel, title, meta, created_at, updated_at)"
        " VALUES (1, 'telegram', 'old chat', ?, ?, ?)",
        (json.dumps({"chat_id": 42}), TS, TS),
    )
    conn.execute(
        "INSERT INTO messages (session_id, role, content, starts_round, created_at)"
        " VALUES (1, 'user', ?, 1, ?)",
        (json.dumps([{"type": "text", "text": "hello"}]), TS),
    )
    conn.execute(
        "INSERT INTO settings (key, value, updated_at) VALUES ('model', 'claude', ?)", (TS,)
    )


async def check_v1(store: Store) -> None:
    session = await store.get_session(1)
    assert session is not None
    assert (session.channel, session.title) == ("telegram", "old chat")
    assert (session.meta, session.message_count) == ({"chat_id": 42}, 1)
    assert await store.load_messages(1) == [Message("user", [TextBlock("hello")])]
    assert await store.count_rounds(1) == 1
    assert await store.get_setting("model") == "claude"


def insert_v2(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO memories (text, category, created_at) VALUES ('likes green tea', 'user', ?)",
        (TS,),
    )


async def check_v2(store: Store) -> None:
    memories = await store.list_memories()
    assert [(m.text, m.category) for m in memories][-1] == ("likes green tea", "user")
    assert [m.text for m in await store.search_memories_like(["tea"])] == ["likes green tea"]
    # the dedupe key was filled in for the old row
    row, created = await store.add_memory("Likes  GREEN tea")
    assert (row.text, created) == ("likes green tea", False)


def insert_v3(conn: sqlite3.Connection) -> None:
    # As Kernel v3 writes it: the row with its key and tokens, the tokens in the index.
    text = "我喜欢昭和时期的音乐"
    conn.execute(
        "INSERT INTO memories (text, category, created_at, key, tokens) VALUES (?, NULL, ?, ?, ?)",
        (text, TS, text, "我 喜欢 昭和 时期 的 音乐"),
    )
    conn.execute(
        "INSERT INTO memories_fts (rowid, tokens) SELECT id, tokens FROM memories"
        " WHERE tokens IS NOT NULL"
    )


async def check_v3(store: Store) -> None:
    assert store.fts5_available
    [found] = await store.search_memories_fts('"昭和"')
    assert found.text == "我喜欢昭和时期的音乐"
    assert await store.delete_memories([found.id]) == 1
    assert await store.search_memories_fts('"昭和"') == []


def insert_v4(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO sessions (id, channel, user_id, external_id, title, meta, created_at,"
        " updated_at) VALUES (7, 'console', 'u1', 's1', NULL, '{}', ?, ?)",
        (TS, TS),
    )


async def check_v4(store: Store) -> None:
    found, created = await store.open_session("console", "u1", "s1", create=False)
    assert found is not None and found.id == 7 and not created
    assert (found.user_id, found.external_id) == ("u1", "s1")


def insert_v5(conn: sqlite3.Connection) -> None:
    spec = {"schedule": "every 1h", "task_type": "text", "text": "drink water"}
    conn.execute(
        "INSERT INTO cron_jobs (id, name, enabled, spec, created_by, created_at, updated_at,"
        " next_run_at, last_status) VALUES ('job-1', 'water', 1, ?, 'agent', ?, ?, ?, 'succeeded')",
        (json.dumps(spec), TS, TS, TS),
    )


async def check_v5(store: Store) -> None:
    [row] = [r for r in await CronStore(store).list() if r.id == "job-1"]
    assert (row.name, row.enabled, row.created_by) == ("water", True, "agent")
    assert row.spec["text"] == "drink water" and row.last_status == "succeeded"
    assert row.next_run_at is not None and row.next_run_at.isoformat() == TS


def insert_v6(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO inbound_events (channel, event_id, seen_at) VALUES ('qq', 'ev-1', ?)", (TS,)
    )
    conn.execute(
        "INSERT INTO webhook_failures (delivery_id, at, attempts, error, origin, session_id)"
        " VALUES ('d-1', ?, 3, 'HTTP 502', 'cron', 's-1')",
        (TS,),
    )


async def check_v6(store: Store) -> None:
    records = ChannelStore(store)
    when = datetime.fromisoformat(TS)
    # Seen within the window: a repeat. Forgotten once the window has passed.
    assert not await records.claim_event("qq", "ev-1", when, forget_before=when)
    assert await records.claim_event("qq", "ev-2", when, forget_before=when)
    later = when + timedelta(hours=1)
    assert await records.claim_event("qq", "ev-1", later, forget_before=later)
    failures = await records.webhook_failures(limit=10)
    assert failures[-1] == WebhookFailure("d-1", TS, 3, "HTTP 502", "cron", "s-1")


def insert_v7(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO inbox (channel, chat_id, update_id, message_id, kind, payload, state,"
        " received_at) VALUES ('telegram', '42', 9, 3, 'text', '{}', 'open', ?)",
        (TS,),
    )
    conn.execute(
        "INSERT INTO outbox (channel, chat_id, kind, body, state, next_at, expires_at,"
        " created_at, inbox_id) VALUES ('telegram', '42', 'send', '{\"text\": \"hi\"}',"
        " 'sending', ?, ?, ?, 1)",
        (TS, TS, TS),
    )


async def check_v7(store: Store) -> None:
    mailbox = Mailbox(store)
    (row,) = await mailbox.inbox_rows("telegram", ["open"])
    assert (row.update_id, row.kind, row.payload) == (9, "text", {})
    assert not await mailbox.take_in(
        "telegram",
        "42",
        update_id=9,
        message_id=3,
        kind="text",
        payload={},
        now=datetime.fromisoformat(TS),
    )
    assert await mailbox.recover("telegram") == 1
    (unsent,) = await mailbox.unsent("telegram")
    assert unsent.body == {"text": "hi"} and unsent.ambiguous and unsent.inbox_id == row.id


def insert_v8(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO sessions (id, channel, user_id, external_id, title, meta, created_at,"
        " updated_at) VALUES (8, 'telegram', '', 'session-8', NULL, '{}', ?, ?)",
        (TS, TS),
    )
    for text, failed in (("kept", 0), ("refused", 1)):
        conn.execute(
            "INSERT INTO messages (session_id, role, content, starts_round, created_at, failed)"
            " VALUES (8, 'user', ?, 1, ?, ?)",
            (json.dumps([{"type": "text", "text": text}]), TS, failed),
        )


async def check_v8(store: Store) -> None:
    assert [m.text for m in await store.load_messages(8)] == ["kept"]
    transcript = await store.load_transcript(8)
    assert [(s.message.text, s.failed) for s in transcript] == [("kept", False), ("refused", True)]
    # Messages written before the column existed were never refused.
    assert [m.text for m in await store.load_messages(1)] == ["hello"]


USAGE_AT = "2024-05-01T12:00:00.000+00:00"  # the ledger's one stamp format


def insert_v9(conn: sqlite3.Connection) -> None:
    # A priced turn call (a retry, with cache reads) and an unpriced title call whose
    # session is gone (the ledger keeps spend without a foreign key).
    conn.execute(
        "INSERT INTO usage (at, provider, model, purpose, session_id, channel, job_id,"
        " turn_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,"
        " retries, cost) VALUES (?, 'main', 'model-a', 'turn', 8, 'telegram', '', 't-1',"
        " 120, 30, 900, 40, 1, 0.0125)",
        (USAGE_AT,),
    )
    conn.execute(
        "INSERT INTO usage (at, provider, model, purpose, session_id, input_tokens,"
        " output_tokens) VALUES (?, 'titles', 'tiny', 'title', 999, 50, 6)",
        (USAGE_AT,),
    )


async def check_v9(store: Store) -> None:
    ledger = UsageStore(store)
    [title] = await ledger.entries(UsageFilter(purpose="title"))
    [turn] = await ledger.entries(UsageFilter(purpose="turn"))
    assert (turn.provider, turn.model, turn.purpose, turn.session_id, turn.channel) == (
        "main",
        "model-a",
        "turn",
        8,
        "telegram",
    )
    assert (turn.usage, turn.retries, turn.cost, turn.turn_id) == (
        Usage(120, 30, 900, 40),
        1,
        0.0125,
        "t-1",
    )
    assert turn.at == datetime.fromisoformat(TS)
    assert (title.purpose, title.session_id, title.cost, title.channel) == ("title", 999, None, "")
    total = await ledger.total(UsageFilter(since=datetime.fromisoformat(TS)))
    assert (total.calls, total.usage, total.cost, total.unpriced) == (
        2,
        Usage(170, 36, 900, 40),
        0.0125,
        1,
    )
    by_model = await ledger.grouped(UsageFilter(since=datetime.fromisoformat(TS)), by="model")
    assert [(g.key, g.calls) for g in by_model] == [("main:model-a", 1), ("titles:tiny", 1)]
    # A row written after the upgrade lands beside them.
    later = datetime.fromisoformat(TS) + timedelta(minutes=1)
    await ledger.record(replace(turn, at=later, id=0, cost=None))
    assert (await ledger.total(UsageFilter(since=later))).unpriced == 1


EARLIER = "2024-04-30T12:00:00.000+00:00"  # before the v9 rows: their sums stay theirs


def insert_v10(conn: sqlite3.Connection) -> None:
    # A call cancelled while the model read the prompt: usage unknown, a bound to count.
    conn.execute(
        "INSERT INTO usage (at, provider, model, purpose, input_tokens, output_tokens,"
        " cost_bound, usage_known) VALUES (?, 'main', 'model-a', 'api', 0, 0, 0.5, 0)",
        (EARLIER,),
    )


async def check_v10(store: Store) -> None:
    ledger = UsageStore(store)
    rows = await ledger.entries(UsageFilter())
    [cut] = [r for r in rows if r.purpose == "api"]
    assert (cut.usage_known, cut.cost, cut.bound, cut.charged) == (False, None, 0.5, 0.5)
    # rows from before the column: usage known, no bound
    assert all(r.usage_known and r.bound is None for r in rows if r.purpose != "api")
    total = await ledger.total(UsageFilter(purpose="api"))
    assert (total.cost, total.unpriced, total.charged) == (0.0, 1, 0.5)


def insert_v11(conn: sqlite3.Connection) -> None:
    # A turn's call that failed over (the primary overloaded, then the fallback
    # answered), with a rule and a reasoning level; and a cron call of a session since
    # deleted, whose only candidate answered, at an unknown cost.
    conn.execute(
        "INSERT INTO routing_decisions (at, session_id, turn_id, step, channel, why, rule,"
        " sticky, candidates, skipped, chosen, reasoning, attempts, latency_ms, input_tokens,"
        " output_tokens, cache_read_tokens, cache_write_tokens, cost) VALUES (?, 8, 't-1', 2,"
        " 'telegram', 'rule', 'think', 0, ?, ?, 'spare:gpt-a', 'high', ?, 1830, 120, 30, 900,"
        " 40, 0.0125)",
        (
            USAGE_AT,
            json.dumps(["main:model-a", "spare:gpt-a"]),
            json.dumps([{"model": "deep:r1", "why": "circuit_open"}]),
            json.dumps(
                [
                    {
                        "model": "main:model-a",
                        "outcome": "overloaded",
                        "seconds": 1.5,
                        "status": 529,
                    },
                    {"model": "spare:gpt-a", "outcome": "ok", "seconds": 0.33},
                ]
            ),
        ),
    )
    conn.execute(
        "INSERT INTO routing_decisions (at, session_id, channel, job_id, why, candidates,"
        " chosen, attempts) VALUES (?, 999, 'cron', 'digest', 'default', '[\"main:model-a\"]',"
        ' \'main:model-a\', \'[{"model": "main:model-a", "outcome": "ok"}]\')',
        (EARLIER,),
    )


async def check_v11(store: Store) -> None:
    log = DecisionStore(store)
    [cron] = await log.recent(session_id=999)
    assert (cron.channel, cron.job_id, cron.why, cron.chosen, cron.cost) == (
        "cron",
        "digest",
        "default",
        "main:model-a",
        None,
    )
    assert (cron.rule, cron.sticky, cron.skipped, cron.reasoning, cron.usage) == (
        "",
        False,
        [],
        "",
        Usage(),
    )
    assert cron.attempts == [Attempt("main:model-a", "ok")] and cron.failovers == 0
    [turn] = await log.recent(session_id=8)
    assert (turn.turn_id, turn.step, turn.rule, turn.reasoning, turn.latency_ms) == (
        "t-1",
        2,
        "think",
        "high",
        1830,
    )
    assert turn.candidates == ["main:model-a", "spare:gpt-a"]
    assert turn.skipped == [("deep:r1", "circuit_open")]
    assert turn.attempts == [
        Attempt("main:model-a", "overloaded", 1.5, 529),
        Attempt("spare:gpt-a", "ok", 0.33),
    ]
    assert (turn.failovers, turn.usage, turn.cost) == (1, Usage(120, 30, 900, 40), 0.0125)
    assert turn.at == datetime.fromisoformat(TS)
    assert turn.as_json()["attempts"][0] == {
        "model": "main:model-a",
        "outcome": "overloaded",
        "seconds": 1.5,
        "status": 529,
    }
    # A decision recorded after the upgrade lands beside them; pruning keeps the newer.
    later = datetime.fromisoformat(TS) + timedelta(minutes=1)
    await log.record(replace(turn, at=later, id=0, step=3))
    assert [d.step for d in await log.recent(session_id=8)] == [3, 2]
    assert await log.prune(datetime.fromisoformat(TS)) == 1  # the cron row, a day older
    assert await log.recent(session_id=999) == []


def insert_v12(conn: sqlite3.Connection) -> None:
    # A project's memory and a persona's, as Kernel v12 writes them (indexed).
    for text, tokens, scope in (
        ("the repo lives in ~/src/kernel", "the repo lives in src kernel", "project:kernel"),
        ("answers in haiku", "answers in haiku", "persona:poet"),
    ):
        conn.execute(
            "INSERT INTO memories (text, category, created_at, key, tokens, scope)"
            " VALUES (?, 'project', ?, ?, ?, ?)",
            (text, TS, text, tokens, scope),
        )
    conn.execute(
        "INSERT INTO memories_fts (rowid, tokens) SELECT id, tokens FROM memories"
        " WHERE scope != 'global'"
    )


async def check_v12(store: Store) -> None:
    project, persona = ("global", "project:kernel"), ("global", "persona:poet")
    assert await store.search_memories_fts('"repo"', scopes=("global",)) == []
    assert await store.search_memories_fts('"repo"', scopes=persona) == []
    [repo] = await store.search_memories_fts('"repo"', scopes=project)
    assert (repo.text, repo.scope) == ("the repo lives in ~/src/kernel", "project:kernel")
    [haiku] = await store.search_memories_like(["haiku"], scopes=persona)
    assert haiku.scope == "persona:poet"
    assert await store.search_memories_like(["haiku"], scopes=project) == []
    # The memories from before the scopes (v2, v3) are global: every chat sees them.
    earlier = await store.list_memories(scopes=("global",))
    assert earlier and {m.scope for m in earlier} == {"global"}
    assert await store.count_memories(scopes=project) == len(earlier) + 1
    assert await store.delete_memories([repo.id], scopes=persona) == 0
    assert await store.delete_memories([repo.id], scopes=project) == 1


def insert_v13(conn: sqlite3.Connection) -> None:
    # A delegation whose second Bash prompt the owner's "allow for this task" rule passed.
    for by, rule in (("owner", "Bash(git status:*)"), ("task_rule", "Bash(git status:*)")):
        conn.execute(
            "INSERT INTO delegation_approvals (delegation_id, conversation, session_id, cli,"
            " tool, input, rule, decision, decided_by, asked_at, answered_at)"
            " VALUES ('20240501-120000-abc123', 'telegram:42', 7, 'claude_code', 'Bash',"
            " '{\"command\": \"git status\"}', ?, 'allow', ?, ?, ?)",
            (rule, by, TS, TS),
        )


async def check_v13(store: Store) -> None:
    records = ApprovalStore(store)
    first, second = reversed(await records.recent("20240501-120000-abc123"))
    assert (first.decided_by, second.decided_by) == ("owner", "task_rule")
    assert (first.tool, first.decision, first.session_id) == ("Bash", "allow", 7)
    assert json.loads(first.input) == {"command": "git status"}
    assert first.asked_at == datetime.fromisoformat(TS)
    assert await records.recent("another") == []
    with (
        pytest.raises(sqlite3.IntegrityError),  # only allow or deny
        closing(sqlite3.connect(store.path)) as conn,
        conn,
    ):
        conn.execute(
            "INSERT INTO delegation_approvals (delegation_id, tool, decision, decided_by,"
            " asked_at, answered_at) VALUES ('x', 'Bash', 'maybe', 'owner', ?, ?)",
            (TS, TS),
        )


def insert_v14(conn: sqlite3.Connection) -> None:
    # One exchange kept, one undone (branch 1): both stay in the history.
    conn.execute(
        "INSERT INTO sessions (id, channel, user_id, external_id, title, meta, created_at,"
        " updated_at) VALUES (14, 'telegram', '', 'session-14', NULL, '{}', ?, ?)",
        (TS, TS),
    )
    for role, text, starts, cut in (
        ("user", "q1", 1, 0),
        ("assistant", "a1", 0, 0),
        ("user", "q2", 1, 1),
        ("assistant", "a2", 0, 1),
    ):
        conn.execute(
            "INSERT INTO messages (session_id, role, content, starts_round, created_at, cut)"
            " VALUES (14, ?, ?, ?, ?, ?)",
            (role, json.dumps([{"type": "text", "text": text}]), starts, TS, cut),
        )


async def check_v14(store: Store) -> None:
    assert [m.text for m in await store.load_messages(14)] == ["q1", "a1"]
    transcript = await store.load_transcript(14)
    assert [(s.message.text, s.cut) for s in transcript] == [
        ("q1", 0),
        ("a1", 0),
        ("q2", 1),
        ("a2", 1),
    ]
    assert await store.count_rounds(14) == 1
    assert await store.count_branches(14) == (1, 2)
    # Messages written before the column existed were never cut.
    assert [m.text for m in await store.load_messages(1)] == ["hello"]


def insert_v15(conn: sqlite3.Connection) -> None:
    # The job of sample 5 ran once and then missed a run while Kernel was down.
    for outcome, reason, result in (("succeeded", None, "done"), ("missed", "was down", None)):
        conn.execute(
            "INSERT INTO cron_runs (job_id, at, outcome, reason, result) VALUES (?, ?, ?, ?, ?)",
            ("job-1", TS, outcome, reason, result),
        )


async def check_v15(store: Store) -> None:
    cron = CronStore(store)
    runs = await cron.runs("job-1")
    assert [(r.outcome, r.reason, r.result) for r in runs] == [
        ("missed", "was down", None),
        ("succeeded", None, "done"),
    ]
    assert runs[0].at == datetime.fromisoformat(TS)
    assert await cron.runs("job-1", 1) == runs[:1]
    # Saving a run keeps the newest KEEP_RUNS; deleting the job deletes its runs.
    [row] = [r for r in await cron.list() if r.id == "job-1"]
    for n in range(KEEP_RUNS):
        await cron.save(row, CronRun(datetime.fromisoformat(TS), "failed", f"#{n}"))
    kept = await cron.runs("job-1")
    assert len(kept) == KEEP_RUNS and kept[0].reason == f"#{KEEP_RUNS - 1}"
    assert {r.outcome for r in kept} == {"failed"}
    assert await cron.delete("job-1")
    assert await cron.runs("job-1") == []


def insert_v16(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO artifacts (session_id, kind, name, path, size, created_at)"
        " VALUES (1, 'cli_output', 'out.log', 'cli_outputs/out.log', 3, ?)",
        (TS,),
    )


async def check_v16(store: Store) -> None:
    # The audit trail starts empty and whole; an event appended links to the genesis.
    audit = AuditLog(store)
    assert (await audit.verify()).ok
    row = await audit.record("config.changed", sections=["providers"])
    assert row is not None and row.id == 1 and row.seq is None
    assert (await audit.verify()).as_json() == {"ok": True, "checked": 1, "pruned": 0}


def insert_v17(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO inbox (channel, chat_id, update_id, message_id, kind, payload, state,"
        " received_at, session_id) VALUES ('telegram', '42', 17, 4, 'text', '{}', 'answered',"
        " ?, 5)",
        (TS,),
    )


async def check_v17(store: Store) -> None:
    # A message remembers the session its turn ran in; one from before has none.
    mailbox = Mailbox(store)
    [row] = await mailbox.inbox_rows("telegram", ["answered"])
    assert (row.update_id, row.session_id) == (17, 5)
    await mailbox.set_session(row.id, 8)
    again = await mailbox.inbox_row(row.id)
    assert again is not None and again.session_id == 8
    assert all(r.session_id is None for r in await mailbox.inbox_rows("telegram", ["open"]))


def insert_v18(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO v1_responses (id, created_at, response, context, size)"
        ' VALUES (\'resp_1\', ?, \'{"id": "resp_1", "output": []}\', \'["hi"]\', 40)',
        (TS,),
    )


async def check_v18(store: Store) -> None:
    # A stored /v1 response is found by its id with its context; a deleted one is gone.
    responses = ResponseStore(store)
    stored = await responses.get("resp_1")
    assert stored is not None and stored.context == ["hi"]
    assert stored.response == {"id": "resp_1", "output": []}
    assert await responses.delete("resp_1") and await responses.get("resp_1") is None


def insert_v19(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO agent_tasks (kind, session_id, conversation, title, spec, status,"
        " created_at, started_at) VALUES ('agent', 1, 'telegram:1', 'worker: dig',"
        " '{\"tool\": \"delegate_task\"}', 'running', ?, ?)",
        (TS, TS),
    )


async def check_v19(store: Store) -> None:
    # A task a killed process left running reads back, and start-up marks it interrupted
    # (to be offered again).
    tasks = TaskStore(store)
    [row] = await tasks.listed()
    assert (row.title, row.status, row.spec) == (
        "worker: dig",
        "running",
        {"tool": "delegate_task"},
    )
    assert await tasks.interrupt_running() == 1
    [cut] = await tasks.unoffered()
    assert cut.id == row.id and cut.status == "interrupted"


def insert_v20(conn: sqlite3.Connection) -> None:
    # A session switched to its branch 1 once; what it left is branch 2, after a1.
    conn.execute(
        "INSERT INTO sessions (id, channel, user_id, external_id, title, meta, created_at,"
        " updated_at, branch) VALUES (19, 'telegram', '', 'session-19', NULL, '{}', ?, ?, 1)",
        (TS, TS),
    )
    for id_, role, text, starts, cut in (
        (1901, "user", "q1", 1, 0),
        (1902, "assistant", "a1", 0, 0),
        (1903, "user", "q2", 1, 2),
        (1904, "assistant", "a2", 0, 2),
    ):
        conn.execute(
            "INSERT INTO messages (id, session_id, role, content, starts_round, created_at,"
            " cut) VALUES (?, 19, ?, ?, ?, ?, ?)",
            (id_, role, json.dumps([{"type": "text", "text": text}]), starts, TS, cut),
        )
    conn.execute(
        "INSERT INTO branches (session_id, branch, fork, how, at)"
        " VALUES (19, 2, 1902, 'switch', ?)",
        (TS,),
    )


async def check_v20(store: Store) -> None:
    listed = await store.list_branches(19)
    assert listed.active == 1
    assert [(b.branch, b.fork, b.how, b.first_words) for b in listed.rows] == [
        (2, 1902, "switch", "q2")
    ]
    # A branch cut before branches were named (sample 14) forks after the last message
    # before it; switching to it works like to any other.
    a1 = (await store.load_transcript(14))[1]
    [old] = (await store.list_branches(14)).rows
    assert (old.branch, old.fork, old.how, old.messages) == (1, a1.id, "cut", 2)
    switched = await store.switch_branch(14, 1)
    assert switched is not None and switched.left == ()
    assert [m.text for m in await store.load_messages(14)] == ["q1", "a1", "q2", "a2"]


def insert_v21(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO sessions (channel, title, meta, created_at, updated_at, mode)"
        " VALUES ('telegram', 'planning', '{}', ?, ?, 'plan')",
        (TS, TS),
    )


async def check_v21(store: Store) -> None:
    # A session keeps its mode; the ones from before are in act; only the three exist.
    rows = {row.title: row for row in await store.list_sessions(limit=100)}
    assert rows["planning"].mode == "plan"
    assert {row.mode for title, row in rows.items() if title != "planning"} <= {"act"}
    assert await store.set_mode(rows["planning"].id, "read_only") == "plan"
    again = await store.get_session(rows["planning"].id)
    assert again is not None and again.mode == "read_only"
    with pytest.raises(StoreError):
        await store.set_mode(rows["planning"].id, "yolo")


def insert_v22(conn: sqlite3.Connection) -> None:
    # Two memories with vectors of one model (as Kernel v22 stores them), a third without.
    for id_, text in (
        (2201, "the cat is called Mochi"),
        (2202, "four o'clock walks"),
        (2203, "rain"),
    ):
        conn.execute(
            "INSERT INTO memories (id, text, created_at, key, scope) VALUES (?, ?, ?, ?, ?)",
            (id_, text, TS, text, "project:vec22"),
        )
    for id_, vector in ((2201, [1.0, 0.0]), (2202, [0.0, 1.0])):
        blob, bits = pack(vector)
        conn.execute(
            "INSERT INTO memory_vectors (memory_id, model, vector, bits) VALUES (?, 'm@0', ?, ?)",
            (id_, blob, bits),
        )


async def check_v22(store: Store) -> None:
    scope = ("project:vec22",)
    [near] = (
        await store.recall_ranked([], "", [0.8, 0.6], "m@0", limit=1, newest=9, scopes=scope)
    ).meaning
    assert near[0].text == "the cat is called Mochi" and abs(near[1] - 0.8) < 1e-6
    assert [i for i, _ in await store.vector_backlog("m@0", 10) if i in (2201, 2202, 2203)] == [
        2203
    ]
    # New text loses the vector (embedded again), a deleted memory too.
    await store.update_memory(2201, text="the cat is called Tofu")
    await store.delete_memories([2202])
    assert [i for i, _ in await store.vector_backlog("m@0", 10) if i in (2201, 2202, 2203)] == [
        2203,
        2201,
    ]
    again = await store.recall_ranked([], "", [0.8, 0.6], "m@0", limit=1, newest=9, scopes=scope)
    assert again.meaning == []
    assert await store.put_vectors("m@0", [(2201, "the cat is called Mochi", [1.0, 0.0])]) == 0


def insert_v23(conn: sqlite3.Connection) -> None:
    # An edited memory as Kernel v23 keeps it: the text now, the one before as a version.
    cur = conn.execute(
        "INSERT INTO memories (text, category, created_at, key, scope)"
        " VALUES ('lives in Lisbon', 'user', ?, 'lives in lisbon', 'global')",
        (TS,),
    )
    conn.execute(
        "INSERT INTO memory_versions (memory_id, text, category, scope, saved_at,"
        " replaced_at, how) VALUES (?, 'lives in Porto', 'user', 'global', ?, ?, 'superseded')",
        (cur.lastrowid, TS, TS),
    )


async def check_v23(store: Store) -> None:
    # Each memory keeps its versions, the latest first; a memory deleted takes them along.
    memories = {m.text: m for m in await store.list_memories(limit=500)}
    lisbon = memories["lives in Lisbon"]
    [porto] = await store.memory_versions(lisbon.id)
    assert (porto.text, porto.how) == ("lives in Porto", "superseded")
    assert await store.update_memory(lisbon.id, text="lives in Faro", how="edited") is not None
    versions = await store.memory_versions(lisbon.id)
    assert [(v.text, v.how) for v in versions] == [
        ("lives in Lisbon", "edited"),
        ("lives in Porto", "superseded"),
    ]
    assert versions[0].saved_at == porto.replaced_at  # Lisbon began when Porto ended
    assert await store.delete_memories([lisbon.id]) == 1
    assert await store.memory_versions(lisbon.id) == []
    # The memories from before have no versions (but the one step 22's check edited).
    for memory in memories.values():
        assert memory.id in (lisbon.id, 2201) or await store.memory_versions(memory.id) == []


SAMPLES: dict[
    int, tuple[Callable[[sqlite3.Connection], None], Callable[[Store], Awaitable[None]]]
] = {
    1: (insert_v1, check_v1),
    2: (insert_v2, check_v2),
    3: (insert_v3, check_v3),
    4: (insert_v4, check_v4),
    5: (insert_v5, check_v5),
    6: (insert_v6, check_v6),
    7: (insert_v7, check_v7),
    8: (insert_v8, check_v8),
    9: (insert_v9, check_v9),
    10: (insert_v10, check_v10),
    11: (insert_v11, check_v11),
    12: (insert_v12, check_v12),
    13: (insert_v13, check_v13),
    14: (insert_v14, check_v14),
    15: (insert_v15, check_v15),
    16: (insert_v16, check_v16),
    17: (insert_v17, check_v17),
    18: (insert_v18, check_v18),
    19: (insert_v19, check_v19),
    20: (insert_v20, check_v20),
    21: (insert_v21, check_v21),
    22: (insert_v22, check_v22),
    23: (insert_v23, check_v23),
}


def test_every_version_has_sample_data() -> None:
    assert sorted(SAMPLES) == list(range(1, len(MIGRATIONS) + 1))


def test_migration_names_are_unique() -> None:
    names = [m.name for m in MIGRATIONS]
    assert len(set(names)) == len(names)


async def test_fresh_database_gets_every_migration(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "kernel.db"
    store = Store(path)
    await store.start()
    try:
        assert store.schema_version == len(MIGRATIONS)
    finally:
        await store.close()
    assert version_of(path) == len(MIGRATIONS)
    with closing(connect(path)) as conn:
        assert {"sessions", "messages", "settings", "memories", "memories_fts"} <= tables(conn)


@pytest.mark.parametrize("start_version", range(len(MIGRATIONS) + 1))
async def test_upgrade_from_every_version_keeps_data(tmp_path: Path, start_version: int) -> None:
    path = tmp_path / "old.db"
    with closing(connect(path)) as conn:
        for version in range(1, start_version + 1):
            assert migrate(conn, MIGRATIONS[:version]) == version
            insert, _ = SAMPLES[version]
            insert(conn)
        assert get_version(conn) == start_version

    store = Store(path)
    await store.start()
    try:
        assert store.schema_version == len(MIGRATIONS)
        for version in range(1, start_version + 1):
            _, check = SAMPLES[version]
            await check(store)
    finally:
        await store.close()

    fresh = tmp_path / "fresh.db"
    with closing(connect(fresh)) as conn:
        migrate(conn)
    assert schema(path) == schema(fresh)


def broken(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE half_done (x INTEGER)")
    conn.execute("INSERT INTO half_done (x) VALUES (1)")
    raise RuntimeError("boom")


def test_failing_migration_rolls_back_completely(tmp_path: Path) -> None:
    path = tmp_path / "kernel.db"
    with closing(connect(path)) as conn:
        migrate(conn)
        conn.execute("INSERT INTO settings (key, value, updated_at) VALUES ('k', 'v', ?)", (TS,))

        def also_writes(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE settings SET value = 'changed'")
            broken(conn)

        with pytest.raises(StoreError, match=rf"migration {len(MIGRATIONS) + 1} \(broken\)"):
            migrate(conn, [*MIGRATIONS, Migration("broken", also_writes)])
        assert not conn.in_transaction
        assert get_version(conn) == len(MIGRATIONS)
        assert "half_done" not in tables(conn)
        assert conn.execute("SELECT value FROM settings").fetchone() == ("v",)


def test_failure_keeps_the_migrations_before_it(tmp_path: Path) -> None:
    with closing(connect(tmp_path / "kernel.db")) as conn:
        with pytest.raises(StoreError):
            migrate(conn, [MIGRATIONS[0], Migration("broken", broken)])
        assert get_version(conn) == 1
        assert tables(conn) == {"sessions", "messages", "settings"}


def test_sqlite_error_in_a_migration_becomes_store_error(tmp_path: Path) -> None:
    def clashes(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x INTEGER)")
        conn.execute("CREATE TABLE sessions (x INTEGER)")  # already exists

    with closing(connect(tmp_path / "kernel.db")) as conn:
        with pytest.raises(StoreError, match="SQLITE_ERROR") as info:
            migrate(conn, [*MIGRATIONS, Migration("clashes", clashes)])
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        assert get_version(conn) == len(MIGRATIONS)
        assert "half_done" not in tables(conn)


async def test_store_start_with_failing_migration_leaves_db_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "kernel.db"
    with closing(connect(path)) as conn:
        migrate(conn)
    monkeypatch.setattr("kernel.store.db.MIGRATIONS", [*MIGRATIONS, Migration("broken", broken)])
    store = Store(path)
    with pytest.raises(StoreError, match="broken"):
        await store.start()
    with pytest.raises(StoreError, match="not started"):  # start() may be tried again
        await store.list_sessions()
    await store.close()
    assert version_of(path) == len(MIGRATIONS)
    with closing(connect(path)) as conn:
        assert "half_done" not in tables(conn)


async def test_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "kernel.db"
    newer = len(MIGRATIONS) + 1
    with closing(connect(path)) as conn:
        migrate(conn)
        conn.execute(f"PRAGMA user_version = {newer}")

    store = Store(path)
    expected = (
        f"database schema v{newer} is newer than this Kernel (v{len(MIGRATIONS)}); upgrade Kernel"
    )
    with pytest.raises(StoreError) as info:
        await store.start()
    assert str(info.value) == expected
    with pytest.raises(StoreError):
        await store.get_setting("x")
    await store.close()
    assert version_of(path) == newer

    with closing(connect(path)) as conn, pytest.raises(StoreError, match="newer"):
        migrate(conn)


async def test_wal_and_connection_pragmas(tmp_path: Path) -> None:
    path = tmp_path / "kernel.db"
    store = Store(path)
    await store.start()
    try:
        with closing(connect(path)) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)

        def pragmas(conn: sqlite3.Connection) -> tuple[int, int, int]:
            return (
                conn.execute("PRAGMA foreign_keys").fetchone()[0],
                conn.execute("PRAGMA busy_timeout").fetchone()[0],
                conn.execute("PRAGMA synchronous").fetchone()[0],
            )

        assert await store._run("pragmas", pragmas) == (1, 5000, 1)  # 1 = NORMAL
    finally:
        await store.close()
