"""Every module imports, and Kernel starts and stops, in an interpreter where the
POSIX-only parts of ``os``/``signal`` are gone and the event loop has no signal handlers,
as on Windows (issue 22)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import write_config

# Runs in a fresh interpreter: strip, then import everything, then run `kernel chat`
# (the composition root: Kernel built, started, one command answered, stopped) and
# `kernel check`.
STRIPPED = r"""
import asyncio, asyncio.unix_events, importlib, io, os, pkgutil, signal, sys

for name in ("O_NOFOLLOW", "O_DIRECTORY", "O_CLOEXEC", "O_NONBLOCK", "killpg", "getpgid",
             "setsid", "fchmod"):
    if hasattr(os, name):
        delattr(os, name)
for name in ("SIGALRM", "setitimer", "ITIMER_REAL"):
    if hasattr(signal, name):
        delattr(signal, name)
sys.modules["resource"] = None  # an ImportError, as on Windows

def no_signals(self, *args, **kwargs):
    raise NotImplementedError("no signal handlers on this event loop")

for cls in (asyncio.AbstractEventLoop, asyncio.unix_events._UnixSelectorEventLoop):
    cls.add_signal_handler = no_signals
    cls.remove_signal_handler = no_signals

import kernel
failed = []
def note(name):
    failed.append(f"{name}: {sys.exc_info()[1]!r}")
for info in pkgutil.walk_packages(kernel.__path__, "kernel.", onerror=note):
    try:
        importlib.import_module(info.name)
    except Exception as exc:
        failed.append(f"{info.name}: {type(exc).__name__}: {exc}")
if failed:
    print("IMPORT FAILED", *failed, sep="\n")
    sys.exit(3)
print("imported", len(sys.modules))

from kernel.__main__ import main
sys.stdin = io.StringIO("/help\n")
code = main(["chat", "--local"])
print("chat exit", code)
if code != 0:
    sys.exit(4)
code = main(["check"])
print("check exit", code)
if code not in (0, 1):
    sys.exit(5)

# The service, stopped the Windows way: signal.signal handlers (no add_signal_handler),
# then Ctrl+C raised in this process.
from kernel.core import platform
platform.WINDOWS = True
from kernel.__main__ import _configure, serve

async def service():
    task = asyncio.create_task(serve(_configure(require_telegram=False, to_file=True)))
    while "install_stop" not in getattr(signal.getsignal(signal.SIGINT), "__qualname__", ""):
        assert not task.done(), task
        await asyncio.sleep(0.01)
    signal.raise_signal(signal.SIGINT)
    await asyncio.wait_for(task, 60)

asyncio.run(service())
print("service stopped")
"""


@pytest.mark.posix  # Linux made to look like Windows; on Windows the suite itself is the proof
def test_every_module_imports_and_kernel_starts_without_posix_only_parts(
    tmp_path: Path,
) -> None:
    write_config(tmp_path, "http://127.0.0.1:9/v1", "openai_compat")
    (tmp_path / "workspace").mkdir()
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_")}
    env["PYTHONPATH"] = str(root)
    result = subprocess.run(
        [sys.executable, "-c", STRIPPED],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "chat exit 0" in result.stdout
    assert "service stopped" in result.stdout
    assert (tmp_path / "data" / "logs").is_dir()
