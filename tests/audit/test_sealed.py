"""The audit trail cannot be rewritten by whoever can write ``data/`` (issue 33, item 8).

A real Kernel makes the audit key beside config.toml at its first start (0600, outside
the data directory) and seals the chain and the anchor with it; ``kernel audit verify``
(the real verb, reading the files) then names every rewrite someone with only ``data/``
can make: a forged row with recomputed hashes, a middle row rewritten with the chain and
the anchor recomputed, a wipe of the record and its anchor (with Kernel started again or
not), the anchor deleted alone. A record chained before the key verifies whole."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import sqlite3
import stat
from contextlib import closing
from pathlib import Path

import pytest

from kernel.__main__ import main
from kernel.app import Kernel
from kernel.audit import AuditLog
from kernel.audit.anchor import ANCHOR_FILE, write_anchor
from kernel.config import load_config
from kernel.core.errors import StartupError, WorkspaceError
from kernel.core.messages import Message, TextBlock
from kernel.store.audit import digest_of, link, sha256
from kernel.store.db import Store
from tests.conftest import write_config


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", language="en")
    monkeypatch.setenv("KERNEL_CONFIG", str(path))
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    return path


async def run_kernel(config: Path, events: int = 3) -> int:
    """Start the real Kernel, record ``events`` events (one session), stop it; the session."""
    async with Kernel(load_config(config, env={}, require_telegram=False)) as kernel:
        session = (await kernel.store.create_session("telegram")).id
        [asked] = await kernel.store.append_messages(session, [Message("user", [TextBlock("hi")])])
        await kernel.audit.record(
            "message.received", session_id=session, actor="owner", messages=[asked]
        )
        for n in range(events - 1):
            await kernel.audit.record(
                "tool.call", session_id=session, actor="model", tool=f"t{n}", ok=True
            )
    return session


def verify(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["audit", "verify", *argv])
    out, err = capsys.readouterr()
    return code, out + err


def db(config: Path) -> Path:
    return config.parent / "data" / "kernel.db"


def rows(path: Path) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT id, session_id, seq, at, kind, actor, data, shash, ghash FROM audit_events"
            " ORDER BY id"
        ).fetchall()


async def test_the_first_start_makes_a_0600_key_beside_config_outside_data(
    config: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await run_kernel(config)
    key_file = config.parent / "audit.key"
    assert key_file.is_file()
    data = config.parent / "data"
    assert not key_file.resolve().is_relative_to(data.resolve())
    assert not list(data.rglob("*.key"))
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    body = json.loads(key_file.read_text())
    assert body["from"] == 1 and len(bytes.fromhex(body["key"])) == 32
    assert body["key"] not in caplog.text
    # Row 1 is the key's own row; the anchor is sealed.
    assert rows(db(config))[0][4] == "audit.keyed"
    assert "mac" in json.loads((data / ANCHOR_FILE).read_text())
    assert verify(capsys) == (0, "✅ record whole: 4 events\n")
    # A second start keeps the key as it is.
    before = key_file.read_bytes()
    await run_kernel(config)
    assert key_file.read_bytes() == before
    assert verify(capsys) == (0, "✅ record whole: 7 events\n")  # no second key row


def _hash(text: str, key: bytes | None) -> str:
    if key is None:
        return hashlib.sha256(text.encode()).hexdigest()
    return hmac.new(key, text.encode(), "sha256").hexdigest()


def forge_row(path: Path, session: int, key: bytes | None) -> tuple[int, str]:
    """Append a row the way the chain is built (canonical JSON, digest, both links,
    both heads), with ``key`` (None: SHA-256 as before the key); its (id, ghash)."""
    with closing(sqlite3.connect(path)) as conn:
        (gseq, gprev), (sseq, sprev) = (
            conn.execute("SELECT seq, hash FROM audit_heads WHERE chain = ?", (c,)).fetchone()
            for c in ("global", f"session:{session}")
        )
        rid, seq, at = gseq + 1, sseq + 1, "2026-01-01T00:00:00+00:00"
        data = '{"ok":true,"tool":"rm -rf"}'
        data_sha = hashlib.sha256(data.encode()).hexdigest()
        canon = json.dumps(
            [rid, session, seq, at, "tool.call", "owner", data_sha], separators=(",", ":")
        )
        digest = _hash(canon, key)
        shash, ghash = _hash(sprev + digest, key), _hash(gprev + digest, key)
        conn.execute(
            "INSERT INTO audit_events (id, session_id, seq, at, kind, actor, data, data_sha256,"
            " digest, shash, ghash, pruned) VALUES (?, ?, ?, ?, 'tool.call', 'owner', ?, ?, ?,"
            " ?, ?, 0)",
            (rid, session, seq, at, data, data_sha, digest, shash, ghash),
        )
        conn.execute(
            "UPDATE audit_heads SET seq = ?, hash = ? WHERE chain = 'global'", (rid, ghash)
        )
        conn.execute(
            "UPDATE audit_heads SET seq = ?, hash = ? WHERE chain = ?",
            (seq, shash, f"session:{session}"),
        )
        conn.commit()
    return rid, ghash


async def test_a_forged_row_with_recomputed_hashes_is_found(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = await run_kernel(config)
    # Hashed as the chain was before the key: all anyone without the key can do.
    forged_id, forged_ghash = forge_row(db(config), session, None)
    write_anchor(config.parent / "data" / ANCHOR_FILE, forged_id, forged_ghash)
    code, out = verify(capsys)
    edited = "the row was changed after it was written"
    assert (code, out) == (1, f"⚠️ record broken at #{forged_id}: {edited}\n")
    code, out = verify(capsys, "--session", str(session))
    assert (code, out) == (1, f"⚠️ record broken at #4: {edited}\n")  # its 4th row


async def test_a_middle_row_rewritten_with_the_chain_and_anchor_recomputed_is_found(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await run_kernel(config, events=4)
    path = db(config)
    # What a forger with today's code does: change row 3, recompute every digest and
    # link from it on (SHA-256, as before the key), the heads and the anchor.
    with closing(sqlite3.connect(path)) as conn:
        conn.execute('UPDATE audit_events SET data = \'{"ok":false,"tool":"t0"}\' WHERE id = 3')
        previous = {"global": "0" * 64}
        last = 0
        for rid, sid, seq, at, kind, actor, data, old_shash, old_ghash in conn.execute(
            "SELECT id, session_id, seq, at, kind, actor, data, shash, ghash FROM audit_events"
            " ORDER BY id"
        ).fetchall():
            chain = f"session:{sid}"
            if rid < 3:  # kept as they are
                previous[chain], previous["global"] = old_shash, old_ghash
                continue
            data_sha = sha256(data)
            digest = digest_of(rid, sid, seq, at, kind, actor, data_sha)
            shash = link(previous.get(chain, "0" * 64), digest)
            ghash = link(previous["global"], digest)
            previous[chain], previous["global"], last = shash, ghash, rid
            conn.execute(
                "UPDATE audit_events SET data_sha256 = ?, digest = ?, shash = ?, ghash = ?"
                " WHERE id = ?",
                (data_sha, digest, shash if sid is not None else None, ghash, rid),
            )
            conn.execute(
                "UPDATE audit_heads SET seq = ?, hash = ? WHERE chain = ?",
                (seq if sid is not None else rid, shash if sid is not None else ghash, chain),
            )
        conn.execute(
            "UPDATE audit_heads SET seq = ?, hash = ? WHERE chain = 'global'",
            (last, previous["global"]),
        )
        conn.commit()
    write_anchor(config.parent / "data" / ANCHOR_FILE, last, previous["global"])
    code, out = verify(capsys)
    assert (code, out) == (1, "⚠️ record broken at #3: the row was changed after it was written\n")


def wipe(config: Path) -> None:
    data = config.parent / "data"
    for name in ("kernel.db", "kernel.db-wal", "kernel.db-shm", ANCHOR_FILE):
        (data / name).unlink(missing_ok=True)


async def test_a_wiped_record_and_anchor_are_found(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await run_kernel(config)
    # Every row and head deleted, the anchor with them.
    with closing(sqlite3.connect(db(config))) as conn:
        conn.execute("DELETE FROM audit_events")
        conn.execute("DELETE FROM audit_heads")
        conn.commit()
    (config.parent / "data" / ANCHOR_FILE).unlink()
    code, out = verify(capsys)
    assert code == 1
    assert out == (
        "⚠️ record broken at #1: the record ends before the row its key file says was"
        " written with the key: it was cut or wiped\n"
    )


async def test_a_wiped_data_directory_then_a_restart_is_found(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await run_kernel(config)
    wipe(config)  # the database file and the anchor gone
    await run_kernel(config)  # Kernel starts again on an empty data directory
    assert not (config.parent / "data" / ANCHOR_FILE).exists()  # never made anew
    code, out = verify(capsys)
    assert code == 1
    assert out == (
        "⚠️ record broken at #1: the row was written after the record was wiped and started"
        " again (the key file is older than this record)\n"
    )


async def test_a_wipe_of_an_upgraded_record_then_a_restart_is_found(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await older_record(config)
    await run_kernel(config)  # the key begins at #4
    wipe(config)
    await run_kernel(config)
    code, out = verify(capsys)
    assert code == 1 and out.startswith(
        "⚠️ record broken at #1: the row was written after the record was wiped"
    )


async def test_the_anchor_deleted_alone_is_found_and_not_made_anew(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await run_kernel(config)
    anchor = config.parent / "data" / ANCHOR_FILE
    anchor.unlink()
    gone = (
        "⚠️ record broken at #4: the anchor kept outside the database (data/audit.anchor)"
        " is gone: it was deleted, or the record was wiped with it\n"
    )
    assert verify(capsys) == (1, gone)
    # Kernel started again does not write a new one over the deletion.
    await run_kernel(config, events=1)
    assert not anchor.exists()
    assert verify(capsys) == (1, gone.replace("#4", "#5"))
    # An anchor written as before the key (not sealed) is found too.
    write_anchor(anchor, 5, str(rows(db(config))[-1][8]))
    code, out = verify(capsys)
    assert (code, out) == (
        1,
        "⚠️ record broken at #5: the anchor (data/audit.anchor) is not sealed with the audit"
        " key: it was replaced or reset\n",
    )


async def older_record(config: Path) -> int:
    """A record as Kernel left it before the key: three rows chained with SHA-256, one
    session emptied by a deleted history, the anchor unsealed."""
    store = Store(db(config))
    await store.start()
    audit = AuditLog(store, anchor=config.parent / "data" / ANCHOR_FILE, anchor_every=0)
    a = (await store.create_session("telegram")).id
    b = (await store.create_session("telegram")).id
    await audit.record("message.received", session_id=a, actor="owner")
    await audit.record("message.received", session_id=b, actor="owner")
    await store.delete_sessions([a])  # row 3: audit.pruned
    await audit.close()
    await store.close()
    return b


async def test_a_record_chained_before_the_key_still_verifies_whole(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    older = await older_record(config)
    assert verify(capsys) == (0, "✅ record whole: 3 events (1 emptied with deleted history)\n")
    session = await run_kernel(config)  # the new Kernel: the key is made, from #4
    assert json.loads((config.parent / "audit.key").read_text())["from"] == 4
    assert [r[4] for r in rows(db(config))][3] == "audit.keyed"
    assert verify(capsys) == (0, "✅ record whole: 7 events (1 emptied with deleted history)\n")
    assert verify(capsys, "--session", str(session)) == (0, "✅ record whole: 3 events\n")
    # A session chain across the key's beginning, then emptied with the key: still whole.
    async with Kernel(load_config(config, env={}, require_telegram=False)) as kernel:
        await kernel.audit.record("message.received", session_id=older, actor="owner")
        await kernel.store.delete_sessions([older])
    assert verify(capsys, "--session", str(older)) == (
        0,
        "✅ record whole: 2 events (2 emptied with deleted history)\n",
    )
    code, out = verify(capsys)
    assert (code, out) == (0, "✅ record whole: 9 events (3 emptied with deleted history)\n")


async def test_a_missing_key_file_is_a_finding(
    config: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    await run_kernel(config)
    key_file = config.parent / "audit.key"
    moved = tmp_path / "elsewhere.key"
    os.replace(key_file, moved)
    code, out = verify(capsys)
    assert code == 1 and out.startswith(
        "⚠️ record broken at #1: the record is sealed from this row on, but its key file is"
        " not there"
    )
    assert "nothing from here on can be proven" in out
    # Given where it is, the record is whole.
    assert verify(capsys, "--key", str(moved)) == (0, "✅ record whole: 4 events\n")


async def test_a_key_from_the_systemd_credential_seals_the_record(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As deploy/setup.sh makes it: a key with no first row; the service cannot write it.
    creds = tmp_path / "credentials"
    creds.mkdir()
    (creds / "kernel-audit-key").write_text('{"v":1,"key":"' + "ab" * 32 + '"}\n')
    (creds / "kernel-audit-key").chmod(0o400)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    older = await older_record(config)  # an installation that ran before the key
    await run_kernel(config)
    assert not (config.parent / "audit.key").exists()  # the credential, not a new key
    assert [r[4] for r in rows(db(config))][3] == "audit.keyed"
    assert verify(capsys) == (0, "✅ record whole: 7 events (1 emptied with deleted history)\n")
    # A rewrite of the whole record as before the key, its row gone: the sealed anchor.
    with closing(sqlite3.connect(db(config))) as conn:
        conn.execute("DELETE FROM audit_events WHERE id > 3")
        conn.execute(
            "UPDATE audit_heads SET seq = 3, hash = (SELECT ghash FROM audit_events"
            " WHERE id = 3) WHERE chain = 'global'"
        )
        conn.execute(
            "DELETE FROM audit_heads WHERE chain NOT IN ('global', ?)", (f"session:{older}",)
        )
        conn.commit()
    code, out = verify(capsys)
    assert code == 1 and out.startswith("⚠️ record broken at #4: a row is missing")


async def test_the_workspace_never_serves_or_replaces_the_key(config: Path) -> None:
    # The default workspace is config.toml's folder, where the key lies.
    async with Kernel(load_config(config, env={}, require_telegram=False)) as kernel:
        key_file = config.parent / "audit.key"
        before = key_file.read_bytes()
        names = [entry.path for entry in (await kernel.workspace.listing())[0]]
        assert "audit.key" not in names and "config.toml" not in names
        for attempt in (
            kernel.workspace.read("audit.key"),
            kernel.workspace.write("audit.key", b"{}"),
            kernel.workspace.delete("audit.key"),
        ):
            with pytest.raises(WorkspaceError):
                await attempt
        assert key_file.read_bytes() == before


async def test_a_key_file_that_is_not_a_key_stops_the_start_naming_it(config: Path) -> None:
    key_file = config.parent / "audit.key"
    key_file.write_text("not a key\n")
    kernel = Kernel(load_config(config, env={}, require_telegram=False))
    with pytest.raises(StartupError) as refused:
        await kernel.start()
    await kernel.stop()
    assert str(refused.value).startswith(
        f"cannot use the audit key file {key_file} (not a key file): run as a user who can read it"
    )
    assert key_file.read_text() == "not a key\n"  # never replaced


async def test_an_anchor_whose_mac_is_no_hmac_is_unsealed_not_a_crash(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await run_kernel(config)
    anchor = config.parent / "data" / ANCHOR_FILE
    fields = json.loads(anchor.read_text())
    anchor.write_text(json.dumps(fields | {"mac": "\u00e9"}))  # "é" written as the \u00e9 escape
    assert verify(capsys) == (
        1,
        "⚠️ record broken at #4: the anchor (data/audit.anchor) is not sealed with the audit"
        " key: it was replaced or reset\n",
    )
