"""The service's event loop (kernel.core.platform.run_service): uvloop where it can be
imported (a dependency on Linux), asyncio's own otherwise; and on uvloop, what Kernel
asks of a loop works as on asyncio's: a child in a session of its own ended with its
whole group, a stop signal through ``install_stop``, ``asyncio.to_thread``. The real
service runs on it in the end-to-end tests (``python -m kernel``)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
import threading

import pytest

from kernel.core import platform

needs_uvloop = pytest.mark.skipif(
    importlib.util.find_spec("uvloop") is None, reason="uvloop is not installed here"
)


async def loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


@needs_uvloop
def test_the_service_runs_on_uvloop_where_it_is_installed() -> None:
    assert platform.run_service(loop_module()).startswith("uvloop")


def test_without_uvloop_asyncios_own_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # its import fails: not installed
    assert platform.run_service(loop_module()).startswith("asyncio")


async def group_killed_stop_signalled_thread_run() -> tuple[int | None, bytes, bool, str]:
    # A child in its own session starts a grandchild that holds the pipe open: end of
    # file means kill_tree ended the whole group.
    code = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(600)']); print('up', flush=True); time.sleep(600)"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL, **platform.group_spawn_kwargs(),
    )  # fmt: skip
    assert proc.stdout is not None
    try:
        assert await proc.stdout.readline() == b"up\n"
        assert os.getpgid(proc.pid) == proc.pid  # leads a group (a new session)
        platform.kill_tree(proc.pid, force=True)
        code_ = await proc.wait()
        rest = await proc.stdout.read()
    finally:
        if proc.returncode is None:
            platform.kill_tree(proc.pid, force=True)
            await proc.wait()
    # The stop signal, as `kernel run` installs it (SIGUSR2 here: pytest keeps SIGINT).
    stopped = asyncio.Event()
    restore = platform.install_stop(asyncio.get_running_loop(), stopped.set, signals=["SIGUSR2"])
    try:
        os.kill(os.getpid(), signal.SIGUSR2)
        await asyncio.wait_for(stopped.wait(), 30)
    finally:
        restore()
    name = await asyncio.to_thread(lambda: threading.current_thread().name)
    return code_, rest, stopped.is_set(), name


@needs_uvloop
@pytest.mark.posix
def test_on_uvloop_a_group_is_killed_a_stop_signal_arrives_a_thread_runs() -> None:
    code, rest, stopped, thread = platform.run_service(group_killed_stop_signalled_thread_run())
    assert code == -signal.SIGKILL
    assert rest == b"", "a grandchild still holds the pipe"
    assert stopped
    assert thread != threading.main_thread().name


class _BusyLoop(asyncio.SelectorEventLoop):
    """A loop whose close fails as libuv's does with a handle still open (EBUSY)."""

    def close(self) -> None:
        super().close()
        raise OSError(16, "Device or resource busy")


def test_a_loop_that_will_not_close_leaves_the_stop_clean(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake = type(sys)("uvloop")
    fake.new_event_loop = _BusyLoop  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "uvloop", fake)

    async def service() -> str:
        return "stopped"

    assert platform.run_service(service()) == "stopped"  # no crash: a clean exit
    assert "the event loop did not close cleanly: Device or resource busy" in caplog.text
