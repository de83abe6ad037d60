"""Storage trouble at start, in process: what it is called, whether waiting can fix it,
and Kernel waiting it out on a real full or read-only tmpfs (the process test is
tests/test_storage_start.py)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.errors import StartupError, StoreError
from kernel.core.logs import LogFile, RedactingFormatter
from kernel.core.redact import Redactor
from kernel.store.db import Store
from kernel.store.trouble import diagnose
from tests.clock import ManualClock
from tests.conftest import write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.storage import fill, free, remount, tmpfs


async def test_a_data_dir_that_is_a_file_is_not_waited_for(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_text("not a folder")
    kernel = Kernel(
        load_config(
            write_config(tmp_path, "http://127.0.0.1:9", "claude", data_dir=str(data)),
            env={},
            require_telegram=False,
        )
    )
    with pytest.raises(StartupError, match="general.data_dir") as info:
        await kernel.wait_for_storage(asyncio.Event())
    assert "file exists" in str(info.value) and "SQLITE" not in str(info.value)
    with pytest.raises(StartupError, match="file exists"):
        await kernel.start()


async def test_a_database_path_that_is_a_folder_is_not_waited_for(tmp_path: Path) -> None:
    (tmp_path / "kernel.db").mkdir()
    store = Store(tmp_path / "kernel.db")
    with pytest.raises(StoreError) as info:
        await store.start()
    trouble = diagnose(info.value, tmp_path)
    assert (trouble.cause, trouble.passing) == ("unable to open database file", False)


async def test_store_start_can_be_tried_again(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("in the way")
    store = Store(blocker / "kernel.db")
    with pytest.raises(StoreError):
        await store.start()
    with pytest.raises(StoreError, match="not started"):
        await store.list_sessions()
    blocker.unlink()
    await store.start()
    try:
        assert await store.list_sessions() == []
    finally:
        await store.close()


def test_sqlite_symptoms_are_named_by_their_cause(tmp_path: Path) -> None:
    """On a full disk SQLite says "disk I/O error" (its -shm file cannot grow); the
    write probe says why."""
    with tmpfs(tmp_path / "mnt") as mount:
        folder = mount / "data"
        folder.mkdir()
        with sqlite3.connect(folder / "kernel.db") as conn:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("CREATE TABLE t (x)")
        conn.close()
        fill(mount)
        with pytest.raises(sqlite3.Error) as info:
            conn = sqlite3.connect(folder / "kernel.db")
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("INSERT INTO t VALUES (1)")
            finally:
                conn.close()
        trouble = diagnose(info.value, folder)
        assert (trouble.cause, trouble.passing) == ("no space left on device", True)
        free(mount)
        remount(mount, "ro")
        trouble = diagnose(StoreError("open database failed"), folder)  # no cause chained
        assert not trouble.passing
        with pytest.raises(OSError) as os_info:
            (folder / "new").mkdir()
        trouble = diagnose(os_info.value, folder)
        assert (trouble.cause, trouble.passing) == ("read-only file system", True)


class Seen(logging.Handler):
    """Keeps the records it sees; ``enough`` is set once ``waits`` came."""

    def __init__(self, waits: int) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []
        self.waits = waits
        self.enough = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        if len(self.records) >= self.waits:
            self.enough.set()


def config_on(folder: Path, sim: AnthropicSim, data: Path) -> Path:
    return write_config(folder, sim.base_url, "claude", data_dir=str(data))


@pytest.mark.parametrize("trouble", ["full", "read-only"])
async def test_kernel_waits_out_storage_trouble_then_starts(
    tmp_path: Path,
    anthropic_sim: AnthropicSim,
    caplog: pytest.LogCaptureFixture,
    trouble: str,
) -> None:
    with tmpfs(tmp_path / "mnt") as mount:
        data = mount / "data"
        store = Store(data / "kernel.db")  # Kernel ran here before the trouble began
        await store.start()
        await store.close()
        if trouble == "full":
            fill(mount)
        else:
            remount(mount, "ro")
        config = load_config(
            config_on(tmp_path, anthropic_sim, data), env={}, require_telegram=False
        )
        clock = ManualClock(datetime(2025, 6, 1, tzinfo=UTC))
        kernel = Kernel(config, clock=clock)
        caplog.set_level(logging.INFO, "kernel.app")
        seen = Seen(waits=0)
        logging.getLogger("kernel.app").addHandler(seen)
        try:
            waiting = asyncio.create_task(kernel.wait_for_storage(asyncio.Event()))
            # The backoff, on the Kernel's clock: 1 s doubling to its 60 s cap.
            for wait in (1, 2, 4, 8, 16, 32, 60, 60):
                await clock.wait_for_sleeper(wait)
                assert not waiting.done()
                clock.advance(wait)
            if trouble == "full":
                free(mount)
            else:
                remount(mount, "rw")
            assert await asyncio.wait_for(waiting, 30) is True  # the try the last advance woke
        finally:
            logging.getLogger("kernel.app").removeHandler(seen)

        cause = "no space left on device" if trouble == "full" else "read-only file system"
        lines = [r.getMessage() for r in seen.records]
        assert lines[0] == f"storage unavailable ({cause}) at {data}; retrying in 1s"
        waits = [line.rsplit(" ", 1)[1] for line in lines[:-1]]
        assert waits == ["1s", "2s", "4s", "8s", "16s", "32s", "60s", "60s"]
        assert clock.slept == [1, 2, 4, 8, 16, 32, 60, 60]
        assert lines[-1] == f"storage available at {data}"
        assert not any("SQLITE" in line for line in lines)
        async with kernel:  # the store is open: the rest starts as always
            assert await kernel.store.list_sessions() is not None


async def test_a_stop_signal_ends_the_wait(tmp_path: Path, anthropic_sim: AnthropicSim) -> None:
    with tmpfs(tmp_path / "mnt") as mount:
        fill(mount)  # not even the data folder can be made
        config = load_config(
            config_on(tmp_path, anthropic_sim, mount / "data"), env={}, require_telegram=False
        )
        kernel = Kernel(config)
        stopped = asyncio.Event()
        waiting = asyncio.create_task(kernel.wait_for_storage(stopped))
        await asyncio.sleep(0)
        stopped.set()
        assert await asyncio.wait_for(waiting, 30) is False
        await kernel.serve(stopped)  # returns at once: nothing started, nothing to stop
        assert kernel.frontends == []


def test_log_file_survives_a_disk_that_refuses_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = [0.0]
    blocker = tmp_path / "logs"
    blocker.write_text("a file where the log folder goes")
    handler = LogFile(blocker / "kernel.log", retry=30.0, clock=lambda: now[0])
    handler.setFormatter(RedactingFormatter(Redactor([])))
    logger = logging.getLogger("test.logfile")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        for n in range(3):
            logger.warning("line %d", n)  # refused: said once, never raised
        assert capsys.readouterr().err.count("cannot write") == 1
        blocker.unlink()
        logger.warning("too soon")  # within the retry window: not even tried
        assert not blocker.exists()
        now[0] = 31.0
        logger.warning("back")
        handler.flush()
        assert (blocker / "kernel.log").read_text().splitlines()[-1].endswith("back")
        assert "cannot write" not in capsys.readouterr().err
    finally:
        logger.removeHandler(handler)
        handler.close()
