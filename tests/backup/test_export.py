"""``kernel export`` and ``kernel import`` (issue 40): the owner's data in open formats and
Kernel's own JSON Lines read back, through the command line (``kernel.__main__.main``)
against real SQLite files: an export of a filled database imported into a new one holds
the same memories, sessions (messages, marks, branches) and jobs; importing again adds
nothing."""

from __future__ import annotations

import csv
import json
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from kernel.__main__ import main
from kernel.core.i18n import t
from kernel.core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from kernel.store.cron import CronRow, CronStore
from kernel.store.db import Store

FENCED = "found ```x``` there"  # a tool's output with a fence of its own


async def fill(db: Path) -> None:
    """Memories in two scopes, a Telegram chat with a tool call, a message set aside and
    a cut branch, a console chat with its own id, a job and its runs' sessions and a
    usage row; every session and message began in the same second."""
    store = Store(db)
    await store.start()
    await store.add_memory("喜欢 neovim，不用 vim", "user")
    await store.add_memory("Kernel keeps\nits data in SQLite", "project", scope="project:kernel")
    chat = await store.create_session("telegram", title="Trip", user_id="42")
    ids = await store.append_messages(
        chat.id,
        [
            Message("user", [TextBlock("plan a trip to 成都", by="owner")]),
            Message("assistant", [TextBlock("searching"), ToolUseBlock("t1", "web_search", {})]),
            Message("user", [ToolResultBlock("t1", FENCED)]),
            Message("assistant", [TextBlock("Go in April.")]),
            Message("user", [TextBlock("and in May?", by="owner")]),
            Message("assistant", [TextBlock("Warmer.")]),
        ],
    )
    await store.mark_failed(chat.id, [ids[5]])
    await store.cut_after(chat.id, ids[3])  # "and in May?" and its answer: branch 1
    await store.append_messages(chat.id, [Message("user", [TextBlock("thanks", by="owner")])])
    console = await store.create_session("console", user_id="demo-user", external_id="s-abc")
    await store.append_messages(console.id, [Message("user", [TextBlock("hello")])])
    now = datetime(2026, 12, 1, 8, tzinfo=UTC)
    spec = {"schedule": {"type": "cron", "cron": "0 9 * * *"}, "task_type": "text", "text": "早报"}
    await CronStore(store).insert(CronRow("job-1", "早报", True, spec, "api", now, now))
    for job in ("job-1", "job-2"):  # two jobs' sessions, begun in the same second
        run = await store.create_session("cron", external_id=job)
        await store.append_messages(run.id, [Message("user", [TextBlock("早报")])])
    await store.close()
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE sessions SET created_at = '2026-12-01T09:00:00+00:00'")
        conn.execute("UPDATE messages SET created_at = '2026-12-01T09:00:00+00:00'")
        conn.execute(
            "INSERT INTO usage (at, provider, model, purpose, input_tokens, output_tokens, cost)"
            " VALUES ('2026-12-01T08:00:00+00:00', 'main', 'model-a', 'turn', 120, 30, 0.002)"
        )


def dump(db: Path) -> dict[str, Any]:
    """What the owner keeps, without the row numbers a database gives."""
    with closing(sqlite3.connect(db)) as conn:
        memories = conn.execute(
            "SELECT text, category, scope, created_at FROM memories ORDER BY text"
        ).fetchall()
        sessions = []
        for sid, *row in conn.execute(
            "SELECT id, channel, user_id, title, mode, created_at, updated_at, branch,"
            " CASE WHEN external_id GLOB 'session-*' THEN '' ELSE external_id END AS own"
            " FROM sessions ORDER BY created_at, channel, own"
        ).fetchall():
            messages = conn.execute(
                "SELECT id, role, content, starts_round, failed, cut, created_at FROM messages"
                " WHERE session_id = ? ORDER BY id",
                (sid,),
            ).fetchall()
            place = {m[0]: n for n, m in enumerate(messages)}
            branches = [
                (branch, place.get(fork), how, at)
                for branch, fork, how, at in conn.execute(
                    "SELECT branch, fork, how, at FROM branches WHERE session_id = ?", (sid,)
                )
            ]
            kept = [(*m[1:2], json.loads(m[2]), *m[3:]) for m in messages]
            sessions.append((row, kept, branches))
        jobs = [
            (*row[:3], json.loads(row[3]), *row[4:])
            for row in conn.execute(
                "SELECT id, name, enabled, spec, created_by, created_at FROM cron_jobs ORDER BY id"
            )
        ]
    return {"memories": memories, "sessions": sessions, "jobs": jobs}


def done(
    memories: int = 0, sessions: int = 0, messages: int = 0, jobs: int = 0, present: int = 0
) -> str:
    """``kernel import``'s line for one file."""
    counts = {"memories": memories, "sessions": sessions, "messages": messages, "jobs": jobs}
    return t("import.done", present=present, **counts)


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def test_export_then_import_round_trip_is_whole_and_idempotent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new, out = tmp_path / "old" / "kernel.db", tmp_path / "new" / "kernel.db", tmp_path / "x"
    await fill(old)

    code, said, _ = run(capsys, "export", "--db", old, "--out", out)
    assert code == 0
    counts = {"memories": 2, "sessions": 4, "messages": 10, "jobs": 1, "usage": 1}
    assert said == t("export.done", path=out, **counts) + "\n"
    assert (out / "memories.md").read_text().count("\n- ") == 2
    assert "  its data in SQLite _(project" in (out / "memories.md").read_text()
    chat = next(p.read_text() for p in (out / "sessions").iterdir() if "Trip" in p.read_text())
    assert "plan a trip to 成都" in chat and f"````\n{FENCED}\n````" in chat
    assert t("export.cut", branch=1) in chat and t("export.failed") in chat
    with (out / "usage.csv").open() as table:
        assert [r[3:5] for r in csv.reader(table)] == [["model", "purpose"], ["model-a", "turn"]]
    files = [out / "memories.jsonl", out / "sessions.jsonl", out / "cron_jobs.jsonl"]

    # A new machine: no database yet.
    code, said, _ = run(capsys, "import", *files, "--db", new)
    assert code == 0
    assert said.splitlines() == [
        done(memories=2),
        done(sessions=4, messages=10),
        done(jobs=1),
        t("import.restart"),
    ]
    assert dump(new) == dump(old)
    store = Store(new)  # Kernel opens it, and reads the imported history as its own
    await store.start()
    found = await store.sessions_by_external_id("s-abc", channel="console", user_id="demo-user")
    assert [m.message.text for m in await store.load_transcript(found[0].id)] == ["hello"]
    await store.close()

    # Again, and into the database it came from: nothing is added twice.
    for db in (new, old):
        code, said, _ = run(capsys, "import", *files, "--db", db)
        assert code == 0
        assert said.splitlines() == [done(present=2), done(present=4), done(present=1)]
    assert dump(new) == dump(old)


async def test_import_refuses_what_is_not_an_export_and_counts_bad_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, out = tmp_path / "kernel.db", tmp_path / "x"
    await fill(db)
    code, _, said = run(capsys, "export", "--db", db, "--out", out)
    assert code == 0
    code, _, said = run(capsys, "export", "--db", db, "--out", out)  # not over an export
    assert (code, said) == (2, f"kernel: {t('export.not_empty', path=out)}\n")
    before = dump(db)

    stray = tmp_path / "notes.jsonl"
    stray.write_text('{"text": "not an export"}\n')
    code, _, said = run(capsys, "import", stray, "--db", db)
    assert (code, said) == (2, f"kernel: {t('import.not_export', path=stray)}\n")
    newer = tmp_path / "newer.jsonl"  # from a Kernel that writes a later format
    newer.write_text('{"type": "kernel_export", "version": 99, "schema": 99}\n')
    code, _, said = run(capsys, "import", newer, "--db", db)
    assert (code, said) == (2, f"kernel: {t('import.newer', path=newer, version=99)}\n")

    lines = (out / "memories.jsonl").read_text().splitlines()
    mixed = tmp_path / "mixed.jsonl"
    good = json.dumps({"type": "memory", "text": "新的事实", "category": None, "scope": "global",
                       "created_at": "2026-12-02T00:00:00+00:00"})  # fmt: skip
    astray = good.replace('"global"', '"project:../../etc"')  # no scope Kernel has
    mixed.write_text(
        "\n".join([lines[0], "{oops", '{"type": "memory", "text": ""}', astray, good]) + "\n"
    )
    code, said, err = run(capsys, "import", mixed, "--db", db)
    assert code == 1
    assert said.splitlines()[0] == done(memories=1)
    assert err == t("import.refused", refused=3, line=2) + "\n"
    after = dump(db)
    assert after["memories"] == sorted([*before["memories"], ("新的事实", None, "global",
                                        "2026-12-02T00:00:00+00:00")])  # fmt: skip
    assert after["sessions"] == before["sessions"]


async def test_a_session_whose_id_is_taken_here_is_imported_once_under_a_new_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another machine's console chat ``s-abc``, begun at another time than this one's
    ``s-abc``: imported beside it under an id of its own, and found again next time by its
    first message."""
    db, out = tmp_path / "kernel.db", tmp_path / "x"
    await fill(db)
    assert run(capsys, "export", "--db", db, "--out", out)[0] == 0
    head, *records = (out / "sessions.jsonl").read_text().splitlines()
    [theirs] = [json.loads(r) for r in records if '"s-abc"' in r]
    theirs["created_at"] = "2026-11-30T10:00:00+00:00"
    other = tmp_path / "other.jsonl"
    other.write_text(f"{head}\n{json.dumps(theirs)}\n")

    for present, added in ((0, 1), (1, 0)):
        code, said, _ = run(capsys, "import", other, "--db", db)
        assert (code, said) == (0, done(sessions=added, messages=added, present=present) + "\n")
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "SELECT external_id, created_at FROM sessions WHERE channel = 'console' ORDER BY id"
        ).fetchall()
    assert rows[0] == ("s-abc", "2026-12-01T09:00:00+00:00")
    assert rows[1:] == [("session-5", "2026-11-30T10:00:00+00:00")]  # the 5th row here
