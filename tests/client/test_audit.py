"""``kernel audit list|verify`` on a real kernel.db: read-only (the file is byte for byte
the same afterwards), while the Store has it open (WAL) and after it closed; exit 0 on
a whole chain, 1 naming the first broken sequence, 2 when the file cannot be read."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from kernel.__main__ import main
from kernel.audit import AuditLog
from kernel.core.i18n import get_language, set_language
from kernel.core.messages import Message, TextBlock
from kernel.store.db import Store


@pytest.fixture(autouse=True)
def keep_language() -> Iterator[None]:
    before = get_language()
    yield
    set_language(before)


def config(folder: Path) -> Path:
    path = folder / "config.toml"
    # Only [general] is read: the rest may be anything, even a provider with no key.
    path.write_text(
        '[general]\nlanguage = "en"\ntimezone = "UTC"\ndata_dir = "data"\n'
        '[providers.main]\ntype = "claude"\n',
        encoding="utf-8",
    )
    return path


async def fill(store: Store) -> tuple[AuditLog, int]:
    audit = AuditLog(store)
    session = (await store.create_session("telegram")).id
    [asked] = await store.append_messages(session, [Message("user", [TextBlock("hi")])])
    await audit.record("message.received", session_id=session, actor="owner", messages=[asked])
    await audit.record(
        "tool.call", session_id=session, actor="model", tool="memory_search", ok=True, ms=120
    )
    await audit.record("cron.missed", job_id="daily-news", reason="down")
    await audit.record("turn.answered", session_id=session, outcome="answered")
    return audit, session


def cli(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["audit", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def files(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


async def test_list_and_verify_while_kernel_holds_the_database_and_after(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config(tmp_path)  # found in the working directory
    store = Store(tmp_path / "data" / "kernel.db")
    await store.start()
    try:
        _, session = await fill(store)
        # Open (WAL, uncheckpointed): the committed rows are seen.
        code, out, _ = cli("verify", capsys=capsys)
        assert (code, out) == (0, "✅ record whole: 4 events\n")
        code, out, _ = cli("verify", "--session", f"chat-{session}", capsys=capsys)
        assert (code, out) == (0, "✅ record whole: 3 events\n")
        code, out, _ = cli("list", "--session", str(session), capsys=capsys)
        lines = out.splitlines()
        assert code == 0 and lines[0].split() == ["#", "AT", "ACTOR", "EVENT"]
        assert lines[2].startswith("2 ") and " model " in lines[2]
        assert lines[2].endswith("🔧 tool memory_search ✓ 120 ms")
        assert len(lines) == 4
        code, out, _ = cli("list", "-n", "1", "--json", capsys=capsys)
        data = json.loads(out)
        assert code == 0 and data["session_id"] is None
        [item] = data["items"]
        assert (
            item["id"] == 4
            and item["kind"] == "turn.answered"
            and item["text"].endswith("💬 turn answered")
        )
    finally:
        await store.close()

    # Stopped: the same answers, and nothing written (no file changed, none created).
    before = files(tmp_path / "data")
    code, out, _ = cli("list", capsys=capsys)
    assert code == 0 and "⏰ cron job daily-news missed: Kernel was down" in out
    code, out, _ = cli("verify", "--json", capsys=capsys)
    assert code == 0 and json.loads(out) == {
        "ok": True,
        "checked": 4,
        "pruned": 0,
        "session_id": None,
    }
    assert files(tmp_path / "data") == before


@pytest.mark.slow
async def test_verify_as_a_process_exits_1_naming_the_broken_row(tmp_path: Path) -> None:
    path = config(tmp_path)
    store = Store(tmp_path / "data" / "kernel.db")
    await store.start()
    _, session = await fill(store)
    await store.close()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "KERNEL_CONFIG": str(path)}

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kernel", "audit", *argv],
            cwd=tmp_path / "data",  # anywhere: KERNEL_CONFIG names the file
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    done = run("verify", "--session", str(session))
    assert (done.returncode, done.stdout) == (0, "✅ record whole: 3 events\n")
    with closing(sqlite3.connect(store.path)) as conn:
        conn.execute(
            "UPDATE audit_events SET data = replace(data, '120', '12')"
            " WHERE session_id = ? AND seq = 2",
            (session,),
        )
        conn.commit()
    done = run("verify", "--session", str(session))
    assert done.returncode == 1
    assert done.stdout == "⚠️ record broken at #2: the row was changed after it was written\n"
    done = run("verify")  # the global chain: that row is the global #2
    assert (done.returncode, done.stdout.split(":")[0]) == (1, "⚠️ record broken at #2")
    done = run("verify", "--json")
    assert done.returncode == 1
    assert (
        json.loads(done.stdout)["firstBrokenSeq"] == 2
        and json.loads(done.stdout)["reason"] == "edited"
    )
    assert "Traceback" not in done.stderr


async def test_an_unreadable_database_exits_2_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config(tmp_path)
    code, out, err = cli("verify", capsys=capsys)
    assert code == 2 and out == "" and err.startswith("kernel: no database at ")
    assert "general.data_dir" in err and "--db" in err
    assert not (tmp_path / "data").exists()  # nothing created

    old = tmp_path / "old.db"
    with closing(sqlite3.connect(old)) as conn:
        conn.execute("PRAGMA user_version = 15")
        conn.execute("CREATE TABLE sessions (id INTEGER PRIMARY KEY)")
        conn.commit()
    code, _, err = cli("verify", "--db", str(old), capsys=capsys)
    assert code == 2 and "has no audit trail yet (schema version 15): start Kernel once" in err
    assert sqlite3.connect(old).execute("PRAGMA user_version").fetchone() == (15,)  # not migrated

    # A config.toml that cannot be read: named as the problem, unless --db names the file.
    (tmp_path / "config.toml").write_text("[general\n", encoding="utf-8")
    code, _, err = cli("verify", capsys=capsys)
    assert code == 2 and "config.toml" in err
    code, _, err = cli("verify", "--db", str(old), capsys=capsys)
    assert code == 2 and "schema version 15" in err  # read: the file's own problem

    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    code, _, err = cli("list", "--db", str(junk), capsys=capsys)
    assert code == 2 and err.startswith(f"kernel: cannot read the database {junk}")
    assert "Traceback" not in err

    with pytest.raises(SystemExit) as bad:
        main(["audit", "list", "--session", "chat-x"])
    assert bad.value.code == 2
    assert "unknown session chat-x" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["audit", "list", "-n", "1001"])
    assert "from 1 to 1000" in capsys.readouterr().err


async def test_verify_of_a_named_database_without_a_key_says_it_proves_little(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store(tmp_path / "copy" / "kernel.db")
    await store.start()
    await fill(store)
    await store.close()
    db = str(store.path)
    # No config.toml anywhere: --db alone, so no key is known (and the default language).
    code, out, err = cli("verify", "--db", db, capsys=capsys)
    assert (code, out) == (0, "✅ 记录完整：4 条事件\n")
    assert err == (
        "kernel: 未找到审计密钥：没有它，这个结果对能写入 data/ 的人什么也证明不了"
        "（他们能重算每个哈希）；用 --key 指定密钥文件（config.toml 旁的 audit.key）\n"
    )
    code, out, err = cli("verify", "--db", db, "--json", capsys=capsys)
    assert code == 0 and json.loads(out)["ok"] is True and "--key" in err
