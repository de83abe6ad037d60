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

# Run first in a fresh interpreter: what Windows lacks, taken away. POSIX-only ``os`` and
# ``signal`` attributes deleted (``os.supports_dir_fd`` emptied, so the workspace picks
# the Windows walk), and POSIX-only modules refused to Kernel's code and its tests.
STRIP = r"""
import asyncio, asyncio.unix_events, builtins, importlib, os, signal, sys

# Libraries that choose their branch by sys.platform ("linux" here) import their POSIX
# branch before it is taken away: on Windows they take their own (platformdirs, which
# textual uses for `kernel tui`, imports os.getuid off win32).
for name in ("platformdirs", "platformdirs._runtime", "platformdirs.unix"):
    try:
        importlib.import_module(name)
    except ImportError:
        pass

for name in ("O_NOFOLLOW", "O_DIRECTORY", "O_CLOEXEC", "O_NONBLOCK", "killpg", "getpgid",
             "setsid", "setpgid", "fchmod", "getuid", "geteuid", "getgid", "fork", "WNOHANG",
             "mkfifo"):
    if hasattr(os, name):
        delattr(os, name)
os.supports_dir_fd = set()
for name in ("SIGKILL", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCHLD", "SIGALRM",
             "setitimer", "ITIMER_REAL"):
    if hasattr(signal, name):
        delattr(signal, name)

# POSIX-only modules, refused to Kernel's own code and its tests (a library that imports
# one only off Windows, by sys.platform, keeps it: that is its own Windows branch).
POSIX_ONLY = {"resource", "fcntl", "pwd", "grp", "termios", "pty"}
_import = builtins.__import__

def _no_posix(name, globals=None, locals=None, fromlist=(), level=0):
    ours = ((globals or {}).get("__name__") or "").split(".")[0] in ("kernel", "tests")
    if ours and level == 0 and name.split(".")[0] in POSIX_ONLY:
        raise ModuleNotFoundError(f"No module named {name!r} (as on Windows)", name=name)
    return _import(name, globals, locals, fromlist, level)

builtins.__import__ = _no_posix
"""

# Then import everything, run `kernel chat` (the composition root: Kernel built, started,
# one command answered, stopped) and `kernel check`.
STRIPPED = (
    STRIP
    + r"""
import importlib, io, pkgutil

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
)


ROOT = Path(__file__).resolve().parents[2]


def run_stripped(code: str, cwd: Path, *, timeout: float) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter (the repository importable, no KERNEL_ settings);
    it must exit 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_")}
    env["PYTHONPATH"] = str(ROOT)
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.mark.posix  # Linux made to look like Windows; on Windows the suite itself is the proof
@pytest.mark.timeout(360)  # every module imported (textual's too) and Kernel run: a minute alone
@pytest.mark.slow  # seconds of waiting: dealt out first
def test_every_module_imports_and_kernel_starts_without_posix_only_parts(
    tmp_path: Path,
) -> None:
    write_config(tmp_path, "http://127.0.0.1:9/v1", "openai_compat")
    (tmp_path / "workspace").mkdir()
    result = run_stripped(STRIPPED, tmp_path, timeout=300)
    assert "chat exit 0" in result.stdout
    assert "service stopped" in result.stdout
    assert (tmp_path / "data" / "logs").is_dir()


COLLECT = (
    STRIP
    + r"""
import pytest
sys.exit(pytest.main(["--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider", "tests"]))
"""
)


@pytest.mark.posix  # Linux made to look like Windows; on Windows the CI run is the proof
@pytest.mark.timeout(660)  # the whole suite collected in a fresh interpreter
@pytest.mark.slow  # seconds of waiting: dealt out first
def test_the_whole_suite_is_collected_without_posix_only_parts() -> None:
    """A test module importing ``resource`` (or reading ``signal.SIGKILL``) at its top is
    a collection error on Windows, which stops the whole run there."""
    result = run_stripped(COLLECT, ROOT, timeout=600)
    assert " collected" in result.stdout
