"""What differs between POSIX and Windows, each difference in one place.

Public API: ``WINDOWS``; ``group_spawn_kwargs`` (start a child in its own process
group), ``kill_tree`` (end a child and everything it started), ``which`` (find an
executable, honouring ``PATHEXT`` on Windows so ``claude`` finds ``claude.cmd``),
``launch_argv`` (a ``.cmd`` shim started as the program it wraps, so cmd.exe never
parses a task), ``install_stop`` (call back on Ctrl+C / SIGTERM / Ctrl+Break),
``replace`` (os.replace that waits out a reader holding the target open on Windows),
``flag`` (an ``os.O_*`` flag, 0 where the platform has none), ``set_blocking``,
``taskkill_argv`` and ``system_program`` (a Windows program by its full path),
``run_service`` (the service's event loop: uvloop where it is installed, on Linux).

Every Windows branch takes ``windows=`` (None: :data:`WINDOWS`, read at the call) so the
tests run it on Linux with fakes; nothing here reads a POSIX-only attribute at import.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ntpath
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = [
    "WINDOWS",
    "BatchArgumentError",
    "flag",
    "group_spawn_kwargs",
    "install_stop",
    "kill_tree",
    "launch_argv",
    "replace",
    "run_service",
    "set_blocking",
    "system_program",
    "taskkill_argv",
    "which",
]

WINDOWS = os.name == "nt"

# subprocess.CREATE_NEW_PROCESS_GROUP's value, for the Windows branch run elsewhere.
CREATE_NEW_PROCESS_GROUP = 0x00000200
CREATE_NO_WINDOW = 0x08000000
DEFAULT_PATHEXT = ".COM;.EXE;.BAT;.CMD"
DEFAULT_SYSTEM_ROOT = "C:\\Windows"
REPLACE_TRIES = 50  # about 5 s of a reader holding the target open on Windows
REPLACE_PAUSE = 0.1


def _on_windows(windows: bool | None) -> bool:
    return WINDOWS if windows is None else windows


def flag(name: str) -> int:
    """``os.<name>`` (e.g. "O_NOFOLLOW"), or 0 where this platform lacks it."""
    value = getattr(os, name, 0)
    return value if isinstance(value, int) else 0


def set_blocking(fd: int, blocking: bool) -> None:
    """os.set_blocking where it exists (POSIX; Windows files are always blocking)."""
    setter = getattr(os, "set_blocking", None)
    if setter is not None and not WINDOWS:
        setter(fd, blocking)


def run_service(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on uvloop's event loop (libuv, in C) when uvloop can be
    imported (a dependency on Linux only), else on asyncio's own. The long-running
    service's loop: an exchange costs ~9 % fewer instructions on it (issue 37)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    try:
        return runner.run(main)
    finally:
        try:
            runner.close()
        except OSError as exc:
            # libuv refuses to close a loop with a handle still open (EBUSY: a child's
            # pipe another party holds): the service's work is done and its database
            # closed, so the stop stays a clean one, told in the log.
            logging.getLogger(__name__).warning(
                "the event loop did not close cleanly: %s", exc.strerror
            )


def group_spawn_kwargs(*, windows: bool | None = None) -> dict[str, Any]:
    """Keyword arguments for subprocess/asyncio spawns that put the child in a process
    group of its own, so :func:`kill_tree` can end it with everything it starts."""
    if _on_windows(windows):
        return {"creationflags": CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


def system_program(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The full path of the Windows program ``name`` in ``%SystemRoot%\\System32``. A
    bare name would be searched for in the current folder first (CreateProcess), where
    a planted ``taskkill.exe`` would run instead. SystemRoot not an absolute path with a
    drive (unset, empty, relative): ``C:\\Windows``."""
    env = os.environ if environ is None else environ
    root = env.get("SystemRoot") or env.get("SYSTEMROOT") or ""
    drive, rest = ntpath.splitdrive(root)
    if not drive or not rest.startswith(("\\", "/")):
        root = DEFAULT_SYSTEM_ROOT
    return ntpath.join(root, "System32", name)


def taskkill_argv(pid: int, *, force: bool, environ: Mapping[str, str] | None = None) -> list[str]:
    """The taskkill command line that ends ``pid`` and its descendants (``/T``)."""
    taskkill = system_program("taskkill.exe", environ)
    return [taskkill, "/T", *(["/F"] if force else []), "/PID", str(pid)]


def _run_detached(argv: list[str]) -> None:
    """Run ``argv`` to its end on a thread of its own, so no caller (the event loop,
    a ``finally`` being cancelled) waits for it."""

    def run() -> None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                creationflags=CREATE_NO_WINDOW if WINDOWS else 0,
                timeout=30,
                check=False,
            )

    threading.Thread(target=run, name="kill-tree", daemon=True).start()


def kill_tree(
    pid: int,
    *,
    force: bool,
    leader_gone: bool = False,
    windows: bool | None = None,
    run: Callable[[list[str]], None] = _run_detached,
) -> None:
    """End the process group ``pid`` leads (started with :func:`group_spawn_kwargs`):
    ``force`` kills at once, otherwise it is asked to stop. Never blocks, never raises
    for a process already gone. On Windows ``taskkill /T`` walks the tree (``/F`` when
    forced; the gentle step is only a request a console program may ignore, and the
    forced one follows it after the grace anyway). ``leader_gone`` (its exit reaped):
    POSIX still signals the group, whose other members may live on; Windows does
    nothing, since taskkill finds a tree only through a living leader and the PID may
    already be another process's."""
    if _on_windows(windows):
        if not leader_gone:
            run(taskkill_argv(pid, force=force))
        return
    if sys.platform != "win32":  # always here; tells the type checker too
        sig = signal.SIGKILL if force else signal.SIGTERM
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)


def _names(name: str, pathext: str) -> list[str]:
    exts = [e for e in pathext.split(";") if e]
    if any(name.lower().endswith(e.lower()) for e in exts):
        return [name]  # already has its extension: only the name itself
    return [name + e for e in exts]


def which(
    name: str,
    path: str | None = None,
    *,
    pathext: str | None = None,
    windows: bool | None = None,
) -> str | None:
    """The executable ``name`` resolves to on ``path`` (default: PATH), or None.

    On Windows a name without an extension is tried with each of ``PATHEXT``'s (so
    ``claude`` finds ``claude.cmd``), and the current folder is NOT searched first (the
    shell habit that runs a planted ``claude.exe`` from the working folder)."""
    if not _on_windows(windows):
        return shutil.which(name, path=path)
    if pathext is None:
        pathext = os.environ.get("PATHEXT") or DEFAULT_PATHEXT
    candidates = _names(name, pathext)
    if os.path.dirname(name):  # a path: only that file, with an extension added
        return next((c for c in candidates if os.path.isfile(c)), None)
    search = os.environ.get("PATH", "") if path is None else path
    for folder in search.split(";"):
        folder = folder.strip().strip('"')
        if not folder:
            continue
        for candidate in candidates:
            full = os.path.join(folder, candidate)
            if os.path.isfile(full):
                return full
    return None


class BatchArgumentError(ValueError):
    """An argument cmd.exe would read as syntax, for a batch file Kernel cannot bypass."""


# npm's cmd-shim ends with: "%_prog%"  "%dp0%\node_modules\<pkg>\cli.js" %*
_NPM_SHIM = re.compile(r'"%(?:dp0%|~dp0)\\(?P<script>[^"%\r\n]+)"\s+%\*')
# What cmd.exe reads as syntax in a command line (a newline ends the command).
_BATCH_SYNTAX = frozenset('"%!^&|<>()\r\n')


def _read_small(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read(65536)


def launch_argv(
    argv: Sequence[str],
    *,
    windows: bool | None = None,
    read: Callable[[str], str] = _read_small,
    node: Callable[[], str | None] = lambda: which("node"),
) -> list[str]:
    """``argv`` as it can be started safely. Windows runs a ``.cmd``/``.bat`` through
    cmd.exe, which would read a task's ``&``, ``|``, ``%VAR%`` or newline as its own
    syntax: an npm shim (how claude, codex and gemini install) is started as the
    ``node <script>`` it wraps instead; another batch file only with arguments free of
    that syntax (:class:`BatchArgumentError` otherwise). Blocking (reads the shim)."""
    argv = list(argv)
    if not _on_windows(windows) or not argv:
        return argv
    executable = argv[0]
    if not executable.lower().endswith((".cmd", ".bat")):
        return argv
    try:
        found = _NPM_SHIM.search(read(executable))
    except OSError:
        found = None
    if found is not None:
        folder = os.path.dirname(executable)
        script = os.path.join(folder, *found.group("script").split("\\"))
        local = os.path.join(folder, "node.exe")  # the shim prefers a node beside it
        program = local if os.path.isfile(local) else node()
        if program is not None and os.path.isfile(script):
            return [program, script, *argv[1:]]
    if any(_BATCH_SYNTAX.intersection(arg) for arg in argv[1:]):
        raise BatchArgumentError(executable)
    return argv


def install_stop(
    loop: asyncio.AbstractEventLoop,
    callback: Callable[[], None],
    *,
    signals: Sequence[str] = ("SIGINT", "SIGTERM"),
    windows: bool | None = None,
    install: Callable[[int, Any], Any] = signal.signal,
) -> Callable[[], None]:
    """Call ``callback`` on the loop when the process is asked to stop; returns the
    function that puts the previous handling back.

    POSIX: ``loop.add_signal_handler`` for ``signals``. Windows (whose event loop has
    no signal handlers): ``signal.signal`` for SIGINT (Ctrl+C) and SIGBREAK
    (Ctrl+Break, and what a service wrapper sends), each calling ``callback`` through
    ``loop.call_soon_threadsafe``. Must be called from the main thread."""
    if not _on_windows(windows):
        installed: list[int] = []
        for name in signals:
            sig = getattr(signal, name, None)
            if sig is None:
                continue
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, callback)
                installed.append(sig)

        def restore_posix() -> None:
            for sig in installed:
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)

        return restore_posix

    def handler(signum: int, frame: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(callback)

    previous: list[tuple[int, Any]] = []
    for name in ("SIGINT", "SIGBREAK"):
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            previous.append((sig, install(sig, handler)))

    def restore_windows() -> None:
        for sig, old in previous:
            with contextlib.suppress(ValueError, OSError, TypeError):
                install(sig, old)

    return restore_windows


def replace(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    windows: bool | None = None,
    tries: int = REPLACE_TRIES,
    pause: Callable[[float], None] = time.sleep,
    move: Callable[[Any, Any], None] = os.replace,
) -> None:
    """os.replace. On Windows a target another process holds open refuses the rename
    (PermissionError) until it is closed: tried again a few times, briefly. Blocking."""
    if not _on_windows(windows):
        move(src, dst)
        return
    for attempt in range(tries):
        try:
            move(src, dst)
            return
        except PermissionError:
            if attempt == tries - 1:
                raise
            pause(REPLACE_PAUSE)
