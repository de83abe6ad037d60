"""Kernel processes for the tests, forked from one that has already imported Kernel.

The suite starts Kernel as a process about 170 times (the service, ``kernel check``, the
CLI verbs, ``kernel chat``), and each start spent 0.5-2 s of CPU importing the same
libraries (the Anthropic SDK alone is 3,800 modules) before it did anything a test looks
at: on the two-core machine that was a third of the suite's CPU. So the run keeps one
*zygote*, shared by xdist's workers: a process that has imported what ``python -m kernel``
imports, and forks a child per start. The child is what ``python -m kernel ARGS`` would be:

- its standard streams are the test's pipes (or /dev/null), every other descriptor closed;
- its working directory, environment (``TZ`` applied), ``sys.argv`` and ``sys.path[0]``
  are those of the requested start, and what the imports set in the environment
  (``PTB_TIMEDELTA``) is set again as they would set it;
- it runs ``kernel``'s ``__main__`` with ``runpy`` and ends as the interpreter ends
  (``SystemExit``'s code, a traceback and 1 for an uncaught error, atexit handlers run);
- signals reach it by its pid; its exit code (negative for a signal) comes back to the
  test over the request's socket, since the zygote is its parent.

What a fork cannot reproduce falls back to a real ``python -m kernel``: an environment
whose interpreter settings (``PYTHON*``, ``LANG``, ``LC_*``) differ from the zygote's, a
platform without ``fork`` or Unix sockets, and any start a test asks to be real
(``spawn_kernel(fresh=True)``: what Kernel imports at start, how long a start takes).

The process that runs the session starts the zygote at ``pytest_configure``
(tests/conftest.py) and ends it at ``pytest_unconfigure``; the zygote also ends when that
process is gone. A worker waits for it to listen on its first start.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# What ``python -m kernel`` imports to run the service with a Claude provider, Telegram and
# the sidecar (kernel.__main__ itself is run fresh as ``__main__`` in each child), and what
# the tests' MCP server imports (tests/mcp/stdio_server.py, started through
# tests/mcp/launch.py).
PRELOAD = (
    "kernel.app",
    "kernel.config",
    "kernel.providers.claude",
    "kernel.telegram.channel",
    "kernel.gateway.server",
    "kernel.client.http",
    "mcp.server.mcpserver",
)
# Environment variables the interpreter reads when it starts: a fork inherits the
# zygote's reading of them, so a start that sets them differently is a real one.
INTERPRETER = ("PYTHON", "LANG", "LC_")


def _interpreter_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(INTERPRETER)}


# ---- the zygote --------------------------------------------------------------------------


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    fds = array.array("i")
    data, ancillary, _, _ = conn.recvmsg(1 << 20, socket.CMSG_LEN(4 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    while not data.endswith(b"\n"):
        more = conn.recv(1 << 20)
        if not more:
            break
        data += more
    return json.loads(data), list(fds)


def _same(request: dict[str, Any], interpreter: dict[str, str]) -> bool:
    """Whether the start's interpreter settings are the zygote's. A test MCP server
    (``script``) is started by Kernel with the MCP SDK's few variables (no PYTHON*, no
    LANG; its launcher's Python adds LC_CTYPE when it coerces the C locale) and reads
    its streams as UTF-8 whatever the locale: the locale and a PYTHON* setting it lacks
    do not matter, a PYTHON* setting of its own (a PYTHONPATH) does."""
    asked = _interpreter_env(request["env"])
    if request.get("script"):
        own = {name: value for name, value in asked.items() if name.startswith("PYTHON")}
        return all(interpreter.get(name) == value for name, value in own.items())
    return asked == interpreter


def _become(request: dict[str, Any], fds: list[int], added: dict[str, str]) -> None:
    """In the forked child: the streams, folder, environment and argv of the start, and
    for a script with a lifeline (a fourth descriptor), its end with its launcher's."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    first_free = 3
    if len(fds) == 4:
        os.dup2(fds[3], LIFELINE, inheritable=False)
        first_free = LIFELINE + 1
    os.closerange(first_free, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024)
    if first_free > LIFELINE:
        threading.Thread(target=_follow_launcher, name="lifeline", daemon=True).start()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for name, value in added.items():
        os.environ.setdefault(name, value)
    time.tzset()
    tempfile.tempdir = None  # found again from TMPDIR & co., as a new process would
    if script := request.get("script"):  # python SCRIPT ARGS
        sys.argv = [script, *request["args"]]
        sys.path[0] = os.path.dirname(os.path.abspath(script))
    else:  # python -m kernel ARGS
        sys.argv = [sys.modules["kernel"].__path__[0] + "/__main__.py", *request["args"]]
        sys.path[0] = os.getcwd()


LIFELINE = 3  # the child's descriptor of its lifeline


def _follow_launcher() -> None:
    """A launcher (tests/mcp/launch.py) holds the only writing end of the lifeline and
    never writes: end of file means it is gone, also killed with SIGKILL (a kill of its
    process group, which this child is not in), and the child goes the same way."""
    while True:
        try:
            if not os.read(LIFELINE, 1):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    os.kill(os.getpid(), signal.SIGKILL)


def serve(path: str, watched: int) -> dict[str, Any] | None:
    """Serve starts at ``path`` until process ``watched`` is gone. Returns (in the forked
    child only) the start to run."""
    before = dict(os.environ)
    import gc
    import importlib

    gc.disable()  # no collections while the imports build the heap (0.5 s of CPU less)
    for name in PRELOAD:
        importlib.import_module(name)
    added = {k: v for k, v in os.environ.items() if k not in before}
    interpreter = _interpreter_env(before)
    gc.collect()
    gc.freeze()  # the children's collections leave the shared pages alone
    gc.enable()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    while True:
        events = selector.select(timeout=1.0)
        try:
            os.kill(watched, 0)
        except ProcessLookupError:
            return None
        for key, _ in events:
            if key.fileobj is listener:
                conn, _ = listener.accept()
                conn.settimeout(10)  # a caller that never says what to start ends here
                try:
                    request, fds = _receive(conn)
                except (OSError, ValueError):  # a caller gone, or not one of ours
                    conn.close()
                    continue
                conn.settimeout(None)
                env = request.get("env") if isinstance(request, dict) else None
                counts = (3, 4) if isinstance(request, dict) and request.get("script") else (3,)
                if (
                    len(fds) not in counts
                    or not isinstance(env, dict)
                    or not _same(request, interpreter)
                ):
                    for fd in fds:
                        os.close(fd)
                    with contextlib.suppress(OSError):
                        conn.sendall(b"-\n")  # not forked: the caller starts it anew
                    conn.close()
                    continue
                try:
                    pid = os.fork()
                except OSError:  # no process to be had: the caller starts it anew
                    pid = -1
                if pid == 0:
                    selector.close()
                    for held in (listener, conn, *children.values()):
                        held.detach()  # closed below by number, never again by object
                    _become(request, fds, added)
                    return request
                for fd in fds:
                    os.close(fd)
                with contextlib.suppress(OSError):  # a caller gone: the child runs on
                    conn.sendall(f"{pid}\n".encode() if pid > 0 else b"-\n")
                if pid > 0:
                    children[pid] = conn
                else:
                    conn.close()
            else:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid)
            with contextlib.suppress(OSError):
                conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            conn.close()


def _zygote_main() -> None:
    path, watched = sys.argv[1], int(sys.argv[2])
    start = serve(path, watched)
    if start is None:
        return
    import runpy

    if script := start.get("script"):
        runpy.run_path(script, run_name="__main__")
    else:
        runpy.run_module("kernel", run_name="__main__", alter_sys=True)


# ---- the test's side ---------------------------------------------------------------------


class Forked:
    """A forked Kernel, as ``asyncio.subprocess.Process`` is used by the tests."""

    def __init__(
        self,
        pid: int,
        status: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        stdin: asyncio.StreamWriter | None,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
    ) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._status = status
        self._writer = writer
        self._exited: asyncio.Task[int] = asyncio.ensure_future(self._await_exit())

    async def _await_exit(self) -> int:
        line = await self._status.readline()
        self._writer.close()
        if not line.strip():
            raise RuntimeError(f"the zygote ended before Kernel process {self.pid} did")
        self.returncode = int(line)
        return self.returncode

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    async def communicate(self, data: bytes | None = None) -> tuple[bytes, bytes]:
        if self.stdin is not None:
            if data:
                self.stdin.write(data)
                with contextlib.suppress(ConnectionError):
                    await self.stdin.drain()
            self.stdin.close()
        out, err = await asyncio.gather(self.stdout.read(), self.stderr.read())
        await self.wait()
        return out, err


ADDRESS = "TESTS_ZYGOTE_ADDRESS"  # "pid:socket" of the run's zygote, for xdist's workers
# (not KERNEL_*: every test strips those from its environment, tests/conftest.py)


LAUNCH = Path(__file__).resolve().parent / "mcp" / "launch.py"


def python_script(script: Path, *args: str) -> tuple[str, list[str]]:
    """The command and arguments that run ``python SCRIPT ARGS`` for Kernel (a test MCP
    server): through tests/mcp/launch.py, forked from the run's zygote, when there is
    one; else as written."""
    address = os.environ.get(ADDRESS, "")
    if not address:
        return sys.executable, [str(script), *args]
    return sys.executable, [str(LAUNCH), address.split(":", 1)[1], str(script), *args]


class ZygoteGone(Exception):
    """The zygote is not there to fork: the start is made the ordinary way."""


class Zygote:
    """The run's zygote: started (without waiting for it) by the process that runs the
    session, xdist's controller or ``-n 0``'s only process, which names it to its workers
    in the environment (``ADDRESS``) and ends it with the session; the zygote also ends
    if that process is gone."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._folder: str | None = None
        self.address = os.environ.get(ADDRESS, "")
        self.broken = not (hasattr(os, "fork") and hasattr(socket, "AF_UNIX"))

    def start(self, env: dict[str, str]) -> None:
        """Start the zygote in ``env`` (the environment for Kernel) and name it."""
        if self.broken or self.address:
            return
        self._folder = tempfile.mkdtemp(prefix="kernel-tests-zygote-")
        path = str(Path(self._folder) / "zygote.sock")
        self._process = subprocess.Popen(
            [sys.executable, "-c", "from tests.zygote import _zygote_main; _zygote_main()"]
            + [path, str(os.getpid())],
            env=env,
            cwd=Path(__file__).resolve().parents[1],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.address = os.environ[ADDRESS] = f"{self._process.pid}:{path}"

    def can_fork(self, env: dict[str, str]) -> bool:
        """Whether a start in ``env`` can be forked: there is a zygote, and ``env`` sets
        what the interpreter reads at start as the zygote's does (this process's)."""
        return (
            not self.broken
            and bool(self.address)
            and _interpreter_env(env) == _interpreter_env(dict(os.environ))
        )

    async def _connect(self) -> socket.socket:
        """A connection to the zygote, once it listens (it imports for a few seconds
        after the session starts; a hang guard, not a bound)."""
        pid, path = self.address.split(":", 1)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + 120
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(path)
                return sock
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                self.broken = True
                raise ZygoteGone(f"the zygote {pid} ended") from None
            if loop.time() > give_up:
                self.broken = True
                raise ZygoteGone(f"the zygote {pid} did not listen within 120 s")
            await asyncio.sleep(0.05)

    async def spawn(
        self, args: tuple[str, ...], *, cwd: Path, env: dict[str, str], stdin: bool
    ) -> Forked:
        loop = asyncio.get_running_loop()
        sock = await self._connect()
        ends: list[int] = []
        theirs: list[int] = []
        try:
            if stdin:
                their_in, our_in = os.pipe()
            else:
                their_in, our_in = os.open(os.devnull, os.O_RDONLY), -1
            our_out, their_out = os.pipe()
            our_err, their_err = os.pipe()
            theirs = [their_in, their_out, their_err]
            ends = [fd for fd in (our_in, our_out, our_err) if fd >= 0]
            request = {"args": list(args), "cwd": str(cwd), "env": env}
            socket.send_fds(sock, [json.dumps(request).encode() + b"\n"], theirs)
        except BaseException:
            sock.close()
            for fd in ends:
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        sock.setblocking(False)
        status, writer = await asyncio.open_unix_connection(sock=sock)
        said = await status.readline()
        if said.strip() in (b"", b"-"):
            writer.close()
            raise ZygoteGone("the zygote did not fork it")
        pid = int(said)
        stdout = await _reader(loop, our_out)
        stderr = await _reader(loop, our_err)
        writer_in = await _writer(loop, our_in) if our_in >= 0 else None
        return Forked(pid, status, writer, writer_in, stdout, stderr)

    def close(self) -> None:
        """End the zygote this process started (its forked Kernels are the tests')."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


class _PipeReader(asyncio.StreamReaderProtocol):
    """A pipe's reader whose transport closes at the end of the pipe: asyncio's closes
    itself there whatever ``eof_received`` returns, uvloop's only when it returns false
    (and a loop with a transport still open cannot close: libuv's EBUSY)."""

    def eof_received(self) -> bool:
        super().eof_received()
        return False


async def _reader(loop: asyncio.AbstractEventLoop, fd: int) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()  # asyncio's subprocess limit (64 KiB lines)
    await loop.connect_read_pipe(lambda: _PipeReader(reader), os.fdopen(fd, "rb", buffering=0))
    return reader


async def _writer(loop: asyncio.AbstractEventLoop, fd: int) -> asyncio.StreamWriter:
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(fd, "wb", buffering=0)
    )
    return asyncio.StreamWriter(transport, protocol, None, loop)
