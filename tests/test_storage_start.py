"""`python -m kernel` started on a full or read-only data directory waits it out and
comes up once the disk is fixed, with nobody restarting it (issue 15); a stop signal
ends the wait cleanly; a data directory no wait can fix still refuses with exit 2, and
so does an existing database file that refuses writes (issue 33): one line naming the
file and the fix, no traceback; `kernel check` names it too."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from kernel.store.db import Store
from tests.conftest import KernelProcess, kernel_env, spawn_kernel, write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim
from tests.storage import fill, free, read_only, remount, tmpfs

pytestmark = [pytest.mark.slow, pytest.mark.posix]  # real `python -m kernel` processes
# posix: ordered shutdown on SIGTERM

RETRY = "storage unavailable ({cause}) at {data}; retrying in"


class Service:
    """A running `python -m kernel` whose stdout is read line by line as it comes."""

    def __init__(self, proc: KernelProcess) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._more = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))
            self._more.set()
        self._more.set()

    async def wait_for(self, check: Callable[[list[str]], bool]) -> None:
        async with asyncio.timeout(30):
            while not check(self.lines):
                if self._reader.done():
                    raise AssertionError("kernel exited:\n" + "\n".join(self.lines[-20:]))
                self._more.clear()
                await self._more.wait()

    async def stop(self, *, terminate: bool = True) -> tuple[int, str]:
        """SIGTERM (unless it ends by itself); the exit code and stderr."""
        if terminate:
            self.proc.send_signal(signal.SIGTERM)
        assert self.proc.stderr is not None
        err = await asyncio.wait_for(self.proc.stderr.read(), 30)
        await asyncio.wait_for(self.proc.wait(), 30)
        await self._reader
        return int(self.proc.returncode or 0), err.decode(errors="replace")


@contextlib.asynccontextmanager
async def service(
    folder: Path, data: Path, model: AnthropicSim
) -> AsyncIterator[tuple[Service, TelegramSim]]:
    tg = await TelegramSim().start()
    path = write_config(folder, model.base_url, "claude", data_dir=str(data))
    path.write_text(
        path.read_text() + f'[telegram]\napi_base = "{tg.api_base}"\npoll_timeout = 1\n'
    )
    env = kernel_env(KERNEL_TELEGRAM_TOKEN=DEFAULT_TOKEN, KERNEL_TELEGRAM_ALLOWED_USER=str(OWNER))
    running = Service(await spawn_kernel(cwd=folder, env=env))
    try:
        yield running, tg
    finally:
        if running.proc.returncode is None:
            running.proc.kill()
            await running.proc.wait()
        await tg.stop()


async def earlier_run(data: Path) -> None:
    """The database as a previous run of Kernel left it."""
    store = Store(data / "kernel.db")
    await store.start()
    await store.close()


def retrying(cause: str, data: Path, times: int) -> Callable[[list[str]], bool]:
    words = RETRY.format(cause=cause, data=data)
    return lambda lines: sum(words in line for line in lines) >= times


@pytest.mark.parametrize("trouble", ["full", "read-only"])
async def test_kernel_comes_up_once_the_data_directory_takes_writes_again(
    tmp_path: Path, anthropic_sim: AnthropicSim, trouble: str
) -> None:
    cause = "no space left on device" if trouble == "full" else "read-only file system"
    with tmpfs(tmp_path / "mnt") as mount:
        data = mount / "data"
        await earlier_run(data)
        if trouble == "full":
            fill(mount)  # to the last byte
        else:
            remount(mount, "ro")
        async with service(tmp_path, data, anthropic_sim) as (kernel, tg):
            await kernel.wait_for(retrying(cause, data, 2))  # waited 1 s, now 2 s
            assert tg.get_updates_completed == 0  # not started while the disk refuses
            if trouble == "full":
                free(mount)
            else:
                remount(mount, "rw")
            await tg.wait_until(lambda: tg.get_updates_completed >= 1, timeout=30)
            anthropic_sim.enqueue(text_reply("back on my feet"))
            tg.inject_text("are you there?")
            await tg.wait_until(
                lambda: "back on my feet" in [m.text for m in tg.chat(OWNER, from_bot=True)],
                timeout=30,
            )
            code, err = await kernel.stop()
        output = "\n".join(kernel.lines)
        assert code == 0, err
        first = next(line for line in kernel.lines if "storage unavailable" in line)
        assert first.endswith(f"storage unavailable ({cause}) at {data}; retrying in 1s")
        assert f"storage available at {data}" in output and "kernel started" in output
        assert "SQLITE" not in output and "SQLITE" not in err


async def test_a_stop_signal_ends_the_wait_cleanly(
    tmp_path: Path, anthropic_sim: AnthropicSim
) -> None:
    with tmpfs(tmp_path / "mnt") as mount:
        data = mount / "data"
        await earlier_run(data)
        fill(mount)
        async with service(tmp_path, data, anthropic_sim) as (kernel, tg):
            await kernel.wait_for(retrying("no space left on device", data, 1))
            code, err = await kernel.stop()
        assert code == 0, err
        assert "stop signal received while waiting for storage; not started" in kernel.lines[-1]
        assert tg.get_updates_completed == 0


async def test_a_data_directory_that_is_a_file_still_refuses_with_exit_2(
    tmp_path: Path, anthropic_sim: AnthropicSim
) -> None:
    data = tmp_path / "data"
    data.write_text("not a folder")
    async with service(tmp_path, data, anthropic_sim) as (kernel, tg):
        code, err = await kernel.stop(terminate=False)
    assert code == 2  # RestartPreventExitStatus=2: restarting cannot fix it
    assert "general.data_dir" in err and "not a directory" in err.lower()
    assert tg.get_updates_completed == 0


# A run that ended without closing the database: its -wal and -shm stay beside it.
CRASHED_RUN = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("CREATE TABLE IF NOT EXISTS crashed (at TEXT)")
conn.execute("INSERT INTO crashed VALUES ('now')")
conn.commit()
os._exit(0)
"""


async def crashed_run(data: Path) -> None:
    """The database as a previous run of Kernel left it when it died mid-work."""
    await earlier_run(data)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CRASHED_RUN, str(data / "kernel.db")
    )
    assert await proc.wait() == 0
    assert (data / "kernel.db-wal").exists() and (data / "kernel.db-shm").exists()


@pytest.mark.parametrize("name", ["kernel.db", "kernel.db-wal", "kernel.db-shm"])
async def test_a_read_only_database_file_is_named_in_one_line_with_exit_2(
    tmp_path: Path, anthropic_sim: AnthropicSim, name: str
) -> None:
    data = tmp_path / "data"
    await crashed_run(data)
    with read_only(data / name) as refusing:
        async with service(tmp_path, data, anthropic_sim) as (kernel, tg):
            code, err = await kernel.stop(terminate=False)
    assert code == 2  # RestartPreventExitStatus=2: a person must fix the file
    assert err.splitlines() == [
        f"kernel: 无法写入数据库文件 {refusing}（read-only file system）：请让运行 Kernel 的"
        "用户能写它（例如 chown 给该用户或 chmod u+w，同目录的 -wal、-shm 文件也一样），"
        "或把 general.data_dir 指向别处"
    ]
    output = "\n".join(kernel.lines)
    assert "Traceback" not in output and "SQLITE" not in output
    assert tg.get_updates_completed == 0


async def test_kernel_check_names_a_read_only_database_file(
    tmp_path: Path, anthropic_sim: AnthropicSim
) -> None:
    data = tmp_path / "data"
    await crashed_run(data)
    write_config(tmp_path, anthropic_sim.base_url, "claude", data_dir=str(data))
    with read_only(data / "kernel.db") as refusing:
        proc = await spawn_kernel("check", cwd=tmp_path, env=kernel_env(KERNEL_LANGUAGE="en"))
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=120)
    [line] = [x for x in out.decode().splitlines() if "data_dir:" in x]
    assert line == (
        f"[FAIL] data_dir: cannot write the database file {refusing} (read-only file system):"
        " make it writable by the user Kernel runs as (chown it to that user or chmod u+w it,"
        " and the -wal and -shm files beside it), or point general.data_dir elsewhere"
    )
    assert proc.returncode == 1
