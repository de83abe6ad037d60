"""``kernel backup`` and ``kernel restore`` (issue 40), in process on a tmp data folder:
a backup taken while the store writes restores to a consistent database holding every
acknowledged message; a damaged archive (a byte flipped, a part missing, the wrong
passphrase) is refused with nothing changed; an archive of an older schema is migrated
forward; secrets are in an archive only when asked; a disk that fills during a backup
(RLIMIT_FSIZE in a forked child) leaves the data untouched and says so."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import sqlite3
import tarfile
import warnings
from contextlib import closing
from pathlib import Path

import pytest

from kernel.__main__ import main
from kernel.audit.anchor import ANCHOR_FILE, load_anchor
from kernel.audit.key import KEY_FILE, read_key
from kernel.audit.kinds import CONFIG_CHANGED
from kernel.audit.log import AuditLog
from kernel.audit.verify import verify_chain
from kernel.backup.archive import create_backup
from kernel.backup.crypto import Protection
from kernel.backup.format import HEADER_BYTES, BackupError, header_bytes, parse_header
from kernel.backup.restore import restore_backup
from kernel.config import Config, load_config
from kernel.core.messages import Message, TextBlock
from kernel.store.audit import read_chain
from kernel.store.db import Store
from kernel.store.migrations import MIGRATIONS, migrate
from tests.conftest import write_config

TOKEN = "sk-ant-very-secret-token-4242"


@pytest.fixture
def config(tmp_path: Path) -> Config:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude")
    text = path.read_text(encoding="utf-8").replace('api_key = "', f'api_key = "{TOKEN}" #"', 1)
    path.write_text(text, encoding="utf-8")
    (tmp_path / "personas").mkdir()
    (tmp_path / "personas" / "coach.md").write_text("You coach.\n", encoding="utf-8")
    (tmp_path / "skills" / "notes").mkdir(parents=True)
    (tmp_path / "skills" / "notes" / "SKILL.md").write_text("notes\n", encoding="utf-8")
    return load_config(path, env={}, require_telegram=False)


async def _store_with(config: Config, count: int) -> tuple[Store, int, list[int]]:
    store = Store(config.db_path)
    await store.start()
    session = await store.create_session("telegram")
    ids = await store.append_messages(session.id, [_message(i) for i in range(count)])
    return store, session.id, ids


def _message(i: int) -> Message:
    return Message("user", [TextBlock(f"message {i} " + "x" * 2000)])


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _message_ids(db: Path) -> set[int]:
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return {row[0] for row in conn.execute("SELECT id FROM messages")}


async def test_backup_during_writes_restores_every_acknowledged_message(config: Config) -> None:
    store, session_id, acknowledged = await _store_with(config, 300)
    stop, under_way = asyncio.Event(), asyncio.Event()

    async def writes() -> None:
        i = 0
        while not stop.is_set():
            acknowledged.extend(await store.append_messages(session_id, [_message(i)]))
            i += 1
            if i == 20:
                under_way.set()

    writer = asyncio.create_task(writes())
    await under_way.wait()
    before = list(acknowledged)  # acknowledged before the backup began
    made = await asyncio.to_thread(create_backup, config)
    stop.set()
    await writer
    after = len(acknowledged)
    await store.close()
    assert after > len(before)  # the store kept writing meanwhile

    done = restore_backup(config, made.path)

    restored = _message_ids(config.db_path)
    assert set(before) <= restored
    assert restored == set(acknowledged[: len(restored)])  # a prefix: no torn write
    assert done.manifest.counts["messages"] == len(restored)
    assert (done.aside / "data" / "kernel.db").is_file()  # the data before, kept
    assert _message_ids(done.aside / "data" / "kernel.db") == set(acknowledged)
    assert str(len(restored)) in done.describe()


def _rewrite_without(archive: Path, name: str) -> None:
    """The archive with one part left out and its header's hash made to match: a whole
    archive of one part fewer than its manifest lists."""
    raw = archive.read_bytes()
    header = parse_header(raw[:HEADER_BYTES])
    assert header is not None
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(raw[HEADER_BYTES:]), mode="r|") as src,
        tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as dst,
    ):
        for member in src:
            data = src.extractfile(member)
            if member.name != name:
                dst.addfile(member, data)
    body = out.getvalue()
    header["body_sha256"] = hashlib.sha256(body).hexdigest()
    archive.write_bytes(header_bytes(header) + body)


@pytest.mark.parametrize("damage", ["flipped", "part_missing"])
async def test_a_damaged_archive_is_refused_before_anything_changes(
    config: Config, damage: str
) -> None:
    store, _, _ = await _store_with(config, 20)
    await store.close()
    made = create_backup(config)
    if damage == "flipped":
        raw = bytearray(made.path.read_bytes())
        raw[len(raw) // 2] ^= 0x01
        made.path.write_bytes(bytes(raw))
    elif damage == "part_missing":
        _rewrite_without(made.path, "config/personas/coach.md")
    # What is there now, and then changed so that a restore would show.
    store, session_id, _ = await _store_with(config, 5)
    await store.close()
    persona = config.base_dir / "personas" / "coach.md"
    persona.write_text("You coach, version 2.\n", encoding="utf-8")
    db_before, persona_before = _digest(config.db_path), persona.read_text(encoding="utf-8")

    with pytest.raises(BackupError) as refused:
        restore_backup(config, made.path)

    assert refused.value.key == "backup.damaged"
    assert str(made.path) in str(refused.value)
    if damage == "part_missing":
        assert "config/personas/coach.md" in str(refused.value)
    assert _digest(config.db_path) == db_before
    assert persona.read_text(encoding="utf-8") == persona_before
    leftovers = [p.name for p in config.data_dir.iterdir() if p.name.startswith(".restore-")]
    assert leftovers == []
    assert not any(p.name.startswith("before-restore-") for p in made.path.parent.iterdir())


async def test_an_encrypted_archive_opens_with_its_passphrase_only(config: Config) -> None:
    store, _, ids = await _store_with(config, 10)
    await store.close()
    made = create_backup(config, protection=Protection.passphrase("right horse"))
    assert b"message 3" not in made.path.read_bytes()  # sealed
    store, _, _ = await _store_with(config, 2)  # changed since
    await store.close()
    before = _digest(config.db_path)

    with pytest.raises(BackupError) as refused:
        restore_backup(config, made.path, Protection.passphrase("wrong horse"))

    assert refused.value.key == "backup.wrong_key" and str(made.path) in str(refused.value)
    assert _digest(config.db_path) == before
    assert not any(p.name.startswith(".restore-") for p in config.data_dir.iterdir())

    restore_backup(config, made.path, Protection.passphrase("right horse"))

    assert _message_ids(config.db_path) == set(ids)


async def test_an_archive_of_an_older_schema_is_migrated_forward(config: Config) -> None:
    config.data_dir.mkdir(parents=True)
    with closing(sqlite3.connect(config.db_path, isolation_level=None)) as conn:
        migrate(conn, MIGRATIONS[:15])
        conn.execute(
            "INSERT INTO sessions (channel, title, created_at, updated_at, external_id)"
            " VALUES ('telegram', 'old chat', 't', 't', 'session-1')"
        )
    made = create_backup(config)
    assert made.manifest.schema == 15
    config.db_path.unlink()

    done = restore_backup(config, made.path)

    assert done.schema == len(MIGRATIONS)
    with closing(sqlite3.connect(config.db_path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert conn.execute("SELECT title FROM sessions").fetchone()[0] == "old chat"
    assert f"v{len(MIGRATIONS)}" in done.describe() and "v15" in done.describe()


async def test_a_newer_schema_is_refused(config: Config) -> None:
    config.data_dir.mkdir(parents=True)
    with closing(sqlite3.connect(config.db_path, isolation_level=None)) as conn:
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    made = create_backup(config)
    before = _digest(config.db_path)

    with pytest.raises(BackupError) as refused:
        restore_backup(config, made.path)

    assert refused.value.key == "backup.newer_schema"
    assert _digest(config.db_path) == before


async def _audited(config: Config, events: int) -> None:
    """Kernel's audit log on its store: ``events`` events recorded, sealed with the key
    beside config.toml, the anchor written at close."""
    store = Store(config.db_path)
    await store.start()
    audit = AuditLog(store, anchor=config.data_dir / ANCHOR_FILE)
    await audit.start(config.base_dir / KEY_FILE)
    for i in range(events):
        await audit.record(CONFIG_CHANGED, keys=[f"key{i}"])
    await audit.close()
    await store.close()


async def test_the_audit_trail_verifies_after_a_restore(config: Config) -> None:
    await _audited(config, 3)
    made = create_backup(config)
    await _audited(config, 2)  # more events after the backup: the anchor moves on

    restore_backup(config, made.path)

    key = read_key(config.base_dir / KEY_FILE)
    with closing(sqlite3.connect(config.db_path)) as conn:
        chain = read_chain(conn, None)
    assert len(chain.rows) >= 4  # the key's row and three events: the record as it was
    assert verify_chain(chain, load_anchor(config.data_dir / ANCHOR_FILE), key=key).ok


async def test_a_restore_is_refused_while_kernel_runs(config: Config) -> None:
    store, _, _ = await _store_with(config, 3)
    await store.close()
    made = create_backup(config)
    store, _, _ = await _store_with(config, 2)  # Kernel runs again
    try:
        with pytest.raises(BackupError) as refused:
            await asyncio.to_thread(restore_backup, config, made.path)
        assert refused.value.key == "backup.restore_running"
        assert len(await store.load_messages(1)) + len(await store.load_messages(2)) == 5
    finally:
        await store.close()


def _members(archive: Path) -> set[str]:
    raw = archive.read_bytes()
    with tarfile.open(fileobj=io.BytesIO(raw[HEADER_BYTES:]), mode="r|") as tar:
        return {m.name for m in tar}


async def test_secrets_are_in_an_archive_only_when_asked(config: Config) -> None:
    store, _, _ = await _store_with(config, 3)
    await store.close()
    (config.base_dir / KEY_FILE).write_text('{"v": 1, "key": "' + "ab" * 32 + '"}\n')
    (config.base_dir / "kernel.env").write_text("KERNEL_TELEGRAM_TOKEN=123:secret-env\n")

    plain = create_backup(config, config.base_dir / "plain.kbackup")
    full = create_backup(config, config.base_dir / "full.kbackup", with_secrets=True)

    raw = plain.path.read_bytes()
    assert TOKEN.encode() not in raw and b"secret-env" not in raw and b"ab" * 32 not in raw
    secret_parts = {"config/config.toml", "config/kernel.env", "config/audit.key"}
    assert not secret_parts & _members(plain.path)
    assert secret_parts <= _members(full.path)
    assert TOKEN.encode() in full.path.read_bytes()
    manifest = full.manifest.as_json()
    assert {p["name"] for p in manifest["parts"] if p["secret"]} >= secret_parts


@pytest.mark.posix
def test_a_disk_that_fills_during_a_backup_leaves_the_data_untouched(config: Config) -> None:
    import resource
    import signal

    async def fill() -> None:
        store, _, _ = await _store_with(config, 600)  # ~1.5 MB of messages
        await store.close()

    asyncio.run(fill())
    before = _digest(config.db_path)
    folder = config.base_dir / "out"
    folder.mkdir()
    read, write = os.pipe()
    with warnings.catch_warnings():  # 3.12+ warns of threads (the child uses none)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: files may grow to 256 KiB, then writes fail (EFBIG)
        os.close(read)
        code = 0
        try:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))
            create_backup(config, folder)
            os.write(write, b"written")
        except BackupError as exc:
            os.write(write, json.dumps([exc.key, str(exc)]).encode())
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        told = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    key, words = json.loads(told)

    assert key == "backup.failed"
    assert str(folder) in words and "你的数据没有被改动" in words  # told: nothing changed
    assert _digest(config.db_path) == before
    assert list(folder.iterdir()) == []  # no partial archive, no temporary copy


def test_the_command_line_verbs(
    config: Config, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KERNEL_CONFIG", str(config.path))
    monkeypatch.setenv("KERNEL_LANGUAGE", "en")
    asyncio.run(_closed_store(config))
    key = config.base_dir / "backup.key"
    key.write_bytes(os.urandom(32))

    assert main(["backup", "--key-file", str(key)]) == 0
    written = capsys.readouterr().out
    assert written.startswith("✅ backup written to ") and "4 messages" in written
    snapshot = config.data_dir / "backups" / "pre-upgrade-v20-to-v21-20261201T080000Z.db"
    snapshot.write_bytes(config.db_path.read_bytes())
    os.utime(snapshot, (1_764_576_000, 1_764_576_000))  # taken at an upgrade days ago
    assert main(["backup", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0] == f"backups in {config.data_dir / 'backups'} (newest first):"
    assert f"-manual.kbackup  v{len(MIGRATIONS)} manual · encrypted" in listed[1]
    assert listed[2].endswith(f"{snapshot.name}  automatic snapshot before an upgrade")
    archive = next((config.data_dir / "backups").glob("*.kbackup"))
    assert main(["restore", str(archive)]) == 1
    assert "is encrypted" in capsys.readouterr().err
    missing = config.base_dir / "nope.kbackup"  # a typo: named as such, not "damaged"
    assert main(["restore", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"kernel: cannot read {missing} (No such file or directory): nothing was changed;"
        " check the backup file's path and permissions\n"
    )
    assert main(["restore", str(archive), "--key-file", str(key)]) == 0
    assert capsys.readouterr().out.startswith(f"✅ restored from {archive}: database v")


async def _closed_store(config: Config) -> None:
    store, _, _ = await _store_with(config, 4)
    await store.close()
