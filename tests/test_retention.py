"""Retention: downloads, CLI outputs and tool outputs older than retention_days go; the
database, logs, other folders and anything behind a symbolic link stay."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.errors import ConfigError
from kernel.retention import DAY, RetentionJob, sweep
from kernel.store.decisions import Decision
from kernel.store.mailbox import InboxState, OutboxItem
from tests.conftest import write_config

NOW = 1_900_000_000.0  # a fixed "now" for the sweep, far from the real clock


def _file(path: Path, age_days: float, now: float = NOW) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    when = now - age_days * DAY
    os.utime(path, (when, when))
    return path


def _age(path: Path, age_days: float, now: float = NOW) -> None:
    when = now - age_days * DAY
    os.utime(path, (when, when), follow_symlinks=False)


def test_sweep_deletes_only_old_files_in_its_folders(tmp_path: Path) -> None:
    data = tmp_path / "data"
    old_download = _file(data / "downloads" / "AgAD_report.txt", 8)
    new_download = _file(data / "downloads" / "AgAD_fresh.txt", 6.9)
    old_cli = _file(data / "cli_outputs" / "2025" / "run-1.log", 30)
    old_tool = _file(data / "tool_outputs" / "s1-abc-0.txt", 7.01)
    kept = [
        _file(data / "kernel.db", 400),
        _file(data / "logs" / "kernel.log.3", 400),
        _file(data / "workspace" / "notes.md", 400),
        _file(data / "runtime.toml", 400),
        new_download,
    ]
    _age(data / "cli_outputs" / "2025", 30)

    result = sweep(data, 7 * DAY, NOW)

    assert not old_download.exists() and not old_cli.exists() and not old_tool.exists()
    assert all(p.exists() for p in kept)
    assert not (data / "cli_outputs" / "2025").exists()  # emptied by the sweep, removed
    assert (data / "cli_outputs").is_dir()  # the folders themselves stay
    assert result.deleted == {"downloads": 1, "cli_outputs": 1, "tool_outputs": 1}
    assert (result.total, result.folders_removed, result.failures) == (3, 1, 0)


@pytest.mark.posix
def test_sweep_never_follows_links_out_of_its_folders(tmp_path: Path) -> None:
    data = tmp_path / "data"
    outside = tmp_path / "home"
    precious = _file(outside / "thesis.tex", 100)
    precious_dir_file = _file(outside / "photos" / "2019.jpg", 100)
    downloads = data / "downloads"
    downloads.mkdir(parents=True)
    (downloads / "link-to-file").symlink_to(precious)
    (downloads / "link-to-dir").symlink_to(outside / "photos", target_is_directory=True)
    _age(downloads / "link-to-file", 10)
    (downloads / "fresh-link").symlink_to(precious)  # a new link: kept
    _age(downloads / "fresh-link", 1)
    # The whole folder replaced by a link: not cleaned at all.
    (data / "tool_outputs").symlink_to(outside, target_is_directory=True)

    result = sweep(data, 7 * DAY, NOW)

    assert precious.read_text() == "x" and precious_dir_file.read_text() == "x"
    assert not (downloads / "link-to-file").is_symlink()  # the old link itself went
    assert (downloads / "fresh-link").is_symlink()
    assert result.skipped == ["tool_outputs"]
    assert (outside / "photos").is_dir()


def test_sweep_without_folders_does_nothing(tmp_path: Path) -> None:
    result = sweep(tmp_path / "missing", 7 * DAY, NOW)
    assert result.total == 0 and result.failures == 0


class Sleeps:
    """An injected sleep that waits until the test lets it go; each call is recorded, so
    the n-th call also says the job finished what came before it."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self._gate: asyncio.Queue[None] = asyncio.Queue()
        self._called = asyncio.Event()

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self._called.set()
        await self._gate.get()

    def release(self) -> None:
        self._gate.put_nowait(None)

    async def until_called(self, count: int) -> None:
        async with asyncio.timeout(30):
            while len(self.waits) < count:
                self._called.clear()
                await self._called.wait()


async def test_job_runs_first_soon_then_daily_with_its_clock(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    a = _file(data / "downloads" / "secret-plans.txt", 8)
    b = _file(data / "cli_outputs" / "run.log", 6)
    clock = [NOW]
    sleeps = Sleeps()
    job = RetentionJob(data, 7, first_run=30.0, clock=lambda: clock[0], sleep=sleeps)
    caplog.set_level(logging.INFO, logger="kernel.retention")
    job.start()
    assert job.running
    await sleeps.until_called(1)
    assert sleeps.waits == [30.0] and a.exists()  # nothing before the first run is due

    sleeps.release()
    await sleeps.until_called(2)  # the first sweep is done
    assert job.runs == 1 and not a.exists() and b.exists()
    assert sleeps.waits[1] == DAY

    clock[0] += 2 * DAY  # two days later b is 8 days old
    sleeps.release()
    await sleeps.until_called(3)
    assert job.runs == 2 and not b.exists()

    await job.stop()
    assert not job.running
    lines = [r.getMessage() for r in caplog.records if r.name == "kernel.retention"]
    assert lines and all("secret-plans" not in line and "run.log" not in line for line in lines)
    assert "deleted 1 files older than 7 days (downloads 1, cli_outputs 0" in lines[0]


async def test_kernel_starts_the_job_and_stops_it(tmp_path: Path) -> None:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude")
    old = _file(tmp_path / "data" / "downloads" / "old.bin", 8, now=time.time())
    kernel = Kernel(load_config(path, env={}, require_telegram=False))
    sleeps = Sleeps()
    kernel.retention.sleep = sleeps
    await kernel.start()
    try:
        assert kernel.retention.running
        await sleeps.until_called(1)
        sleeps.release()
        await sleeps.until_called(2)  # the first sweep is done
        assert not old.exists()
    finally:
        await kernel.stop()
    assert not kernel.retention.running


async def test_retention_days_zero_keeps_everything(tmp_path: Path) -> None:
    """The files and the mailbox are kept; the job still runs for the decisions log,
    which keeps its own age (routing.decisions_days)."""
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", retention_days=0)
    old = _file(tmp_path / "data" / "downloads" / "old.bin", 4000, now=time.time())
    kernel = Kernel(load_config(path, env={}, require_telegram=False))
    sleeps = Sleeps()
    kernel.retention.sleep = sleeps
    await kernel.start()
    try:
        assert kernel.retention.running
        await sleeps.until_called(1)
        sleeps.release()
        await sleeps.until_called(2)  # the first sweep is done
        assert old.exists()
        assert kernel.retention.last is not None and kernel.retention.last.total == 0
    finally:
        await kernel.stop()


async def test_the_decisions_log_is_pruned_after_its_own_days(tmp_path: Path) -> None:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", retention_days=0)
    path.write_text(path.read_text() + "[routing]\ndecisions_days = 10\n")
    kernel = Kernel(load_config(path, env={}, require_telegram=False))
    await kernel.store.start()
    try:
        store = kernel.agent.decisions
        now = datetime.now(UTC)
        for days in (11, 9):
            at = now - timedelta(days=days)
            await store.record(Decision(at, "default", ["main:model-a"], "main:model-a"))
        result = await kernel.retention.run_once()
        assert result.decisions == 1
        (kept,) = await store.recent()
        assert abs(kept.at - (now - timedelta(days=9))) < timedelta(seconds=1)
    finally:
        await kernel.store.close()


def test_negative_retention_days_is_refused(tmp_path: Path) -> None:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", retention_days=-1)
    with pytest.raises(ConfigError) as refused:
        load_config(path, env={}, require_telegram=False)
    assert "general.retention_days" in str(refused.value)


async def test_the_mailbox_is_pruned_with_the_same_age(tmp_path: Path) -> None:
    """Settled inbox rows and finished outbox rows older than retention_days go; open,
    waiting and undelivered rows stay whatever their age."""
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude")
    kernel = Kernel(load_config(path, env={}, require_telegram=False))
    await kernel.store.start()
    try:
        mailbox = kernel.retention.mailbox
        assert mailbox is not None
        now = datetime.now(UTC)
        old, recent = now - timedelta(days=8), now - timedelta(days=6)

        async def row(update_id: int, when: datetime, state: InboxState | None) -> int:
            taken = await mailbox.take_in(
                "telegram",
                "1",
                update_id=update_id,
                message_id=update_id,
                kind="text",
                payload={"update_id": update_id},
                now=when,
            )
            assert taken is not None
            if state is not None:
                await mailbox.settle(taken.id, state, when)
            return taken.id

        gone = await row(1, old, "answered")
        kept = [await row(2, recent, "failed"), await row(3, old, None)]
        kept.append(await row(4, old, "waiting"))
        item = [OutboxItem("send", {"text": "x"})]
        sent, pending = (
            await mailbox.put("telegram", "1", item, now=old, expires_at=now),
            await mailbox.put("telegram", "1", item, now=old, expires_at=now),
        )
        await mailbox.sent(sent[0], 10, old)
        result = await kernel.retention.run_once()
        assert result.mailbox_rows == 2
        assert await mailbox.inbox_row(gone) is None
        assert all([await mailbox.inbox_row(i) for i in kept])
        assert await mailbox.outbox_row(sent[0]) is None
        assert await mailbox.outbox_row(pending[0]) is not None
    finally:
        await kernel.store.close()
