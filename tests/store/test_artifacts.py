"""kernel/store/artifacts.py: rows with their audit event in one transaction, listings
newest first and bounded, marks of removal, and the recording of a file on disk."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from kernel.audit import AuditLog
from kernel.retention import DAY, sweep
from kernel.store.artifacts import MAX_LIMIT, ArtifactStore
from kernel.store.db import Store


@pytest.fixture
async def store(tmp_path: Path) -> Store:
    db = Store(tmp_path / "data" / "kernel.db")
    await db.start()
    yield db  # type: ignore[misc]
    await db.close()


async def test_add_list_get_and_the_audit_event(store: Store) -> None:
    artifacts = ArtifactStore(store)
    session = (await store.create_session("console")).id
    first = await artifacts.add(
        session_id=session,
        kind="download",
        name="report\u202e.txt\n",
        path="downloads/a_report.txt",
        size=5,
        sha256="ab" * 32,
        actor="owner",
    )
    second = await artifacts.add(
        session_id=session,
        kind="tool_output",
        name="s1-x-0.txt",
        path="tool_outputs/s1-x-0.txt",
        size=7,
        sha256=None,
    )

    assert [a.id for a in await artifacts.list(session)] == [second.id, first.id]
    assert await artifacts.get(first.id) == first
    assert "\n" not in first.name and "\u202e" not in first.name  # printable only
    assert await artifacts.get(10_000) is None
    assert await artifacts.list(session + 1) == []
    events = await AuditLog(store).events(session)
    assert [(e.kind, e.actor, e.data) for e in events] == [
        (
            "artifact.saved",
            "owner",
            {"artifact": first.id, "kind": "download", "size": 5, "sha256": "ab" * 32},
        ),
        (
            "artifact.saved",
            "kernel",
            {"artifact": second.id, "kind": "tool_output", "size": 7},
        ),
    ]
    assert (await AuditLog(store).verify(session)).ok


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("download", "cli_outputs/x.txt"),  # another kind's folder
        ("download", "../downloads/x"),
        ("download", "/etc/passwd"),
        ("download", "downloads/../kernel.db"),
        ("report", "downloads/x"),
    ],
)
async def test_add_refuses_paths_outside_the_kinds_folder(
    store: Store, kind: str, path: str
) -> None:
    with pytest.raises(ValueError):
        await ArtifactStore(store).add(
            session_id=None, kind=kind, name="x", path=path, size=1, sha256=None
        )
    assert await AuditLog(store).events() == []  # nothing half-written


async def test_listing_is_bounded(store: Store) -> None:
    artifacts = ArtifactStore(store)
    for n in range(MAX_LIMIT + 5):
        await artifacts.add(
            session_id=1, kind="download", name=f"{n}", path=f"downloads/{n}", size=n, sha256=None
        )
    found = await artifacts.list(1, limit=10_000)
    assert len(found) == MAX_LIMIT and found[0].name == str(MAX_LIMIT + 4)


async def test_save_reads_size_and_hash_and_never_raises(store: Store, tmp_path: Path) -> None:
    artifacts = ArtifactStore(store)
    data_dir = tmp_path / "data"
    file = data_dir / "cli_outputs" / "run.txt"
    file.parent.mkdir(parents=True)
    file.write_bytes(b"hello artifacts")

    saved = await artifacts.save(data_dir, file, session_id=3, kind="cli_output", actor="model")

    assert saved is not None
    assert (saved.path, saved.name, saved.size) == ("cli_outputs/run.txt", "run.txt", 15)
    assert saved.sha256 == hashlib.sha256(b"hello artifacts").hexdigest()
    # Gone, outside its folder, a link: not recorded, no exception.
    assert (
        await artifacts.save(data_dir, file.with_name("gone"), session_id=3, kind="cli_output")
        is None
    )
    assert await artifacts.save(data_dir, file, session_id=3, kind="download") is None
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("x")
    assert await artifacts.save(data_dir, outside, session_id=3, kind="cli_output") is None
    link = file.with_name("link.txt")
    link.symlink_to(file)
    assert await artifacts.save(data_dir, link, session_id=3, kind="cli_output") is None
    assert len(await artifacts.list(3)) == 1


async def test_what_a_sweep_deletes_is_marked_removed(store: Store, tmp_path: Path) -> None:
    artifacts = ArtifactStore(store)
    data_dir = tmp_path / "data"
    now = 1_900_000_000.0
    paths = {}
    for rel, age in (
        ("downloads/old.txt", 8),
        ("tool_outputs/deep/old.txt", 9),
        ("downloads/new.txt", 1),
    ):
        full = data_dir / rel
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text("x")
        os.utime(full, (now - age * DAY, now - age * DAY))
        kind = "download" if rel.startswith("downloads") else "tool_output"
        paths[rel] = await artifacts.add(
            session_id=1, kind=kind, name=rel, path=rel, size=1, sha256=None
        )

    result = sweep(data_dir, 7 * DAY, now)

    assert sorted(result.removed) == ["downloads/old.txt", "tool_outputs/deep/old.txt"]
    assert await artifacts.mark_removed(result.removed) == 2
    assert await artifacts.mark_removed(result.removed) == 0  # the first time is kept
    listed = {a.path: a for a in await artifacts.list(1)}
    assert listed["downloads/old.txt"].removed and listed["tool_outputs/deep/old.txt"].removed
    assert not listed["downloads/new.txt"].removed
    assert listed["downloads/old.txt"].as_json()["removed"] is True


async def test_a_deleted_or_cleared_history_takes_its_artifact_list(store: Store) -> None:
    artifacts = ArtifactStore(store)
    a, b, c = [(await store.create_session("telegram")).id for _ in range(3)]
    for session in (a, b, c):
        await artifacts.add(
            session_id=session,
            kind="download",
            name="n.txt",
            path="downloads/n.txt",
            size=1,
            sha256=None,
        )
    assert await store.delete_sessions([a]) == 1
    await store.clear_messages(b)
    assert await artifacts.list(a) == [] and await artifacts.list(b) == []
    assert len(await artifacts.list(c)) == 1
    assert (await AuditLog(store).verify()).ok  # their audit rows emptied, recorded


async def test_a_sweep_reconciles_files_an_earlier_sweep_left_listed(
    store: Store, tmp_path: Path
) -> None:
    """Review R2: a sweep whose marking failed (or was cut short) left its files listed
    as present forever; the next sweep marks every listed file that is gone."""
    from kernel.retention import RetentionJob

    artifacts = ArtifactStore(store)
    data_dir = tmp_path / "data"
    now = 1_900_000_000.0
    for rel, age in (("downloads/old.txt", 8), ("downloads/new.txt", 1)):
        full = data_dir / rel
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text("x")
        os.utime(full, (now - age * DAY, now - age * DAY))
        await artifacts.add(session_id=1, kind="download", name=rel, path=rel, size=1, sha256=None)

    class Failing(ArtifactStore):
        async def mark_removed(self, paths: object) -> int:
            raise RuntimeError("database busy")

    first = RetentionJob(data_dir, 7, clock=lambda: now, artifacts=Failing(store))
    assert (await first.run_once()).failures == 1
    assert not (data_dir / "downloads/old.txt").exists()
    second = RetentionJob(data_dir, 7, clock=lambda: now, artifacts=artifacts)
    assert (await second.run_once()).artifacts == 1
    listed = {a.path: a.removed for a in await artifacts.list(1)}
    assert listed == {"downloads/old.txt": True, "downloads/new.txt": False}
