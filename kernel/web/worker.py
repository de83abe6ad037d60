"""web_fetch's HTML → text in a worker process, so the event loop never waits on it.

trafilatura holds the GIL in long C calls (lxml XPath over the whole tree, ``str.split``
of the whole text): in a thread it still stalls the loop, ~0.26 s on a 2 MB page
(bench/README.md, web_fetch). So a page of :data:`THREAD_LIMIT` bytes or more is read by
ONE long-lived child process (``python -c``: a fresh interpreter, nothing forked from a
parent that has threads), started on the first such page, ended after :data:`IDLE_SECONDS`
without work (its memory given back) or when Kernel's interpreter exits. Smaller pages
stay in a thread: their stall is a few ms and the hop is not worth a process.

One page at a time, in order, from a dedicated daemon thread that owns the child. The
child reads one request from its stdin (a JSON header line, then the page's bytes) and
answers on stdout (a JSON header line with sizes, then UTF-8 bytes): nothing in the
answer is code (no pickle), so a child compromised by a hostile page can hand back only
text. It gets a minimal environment (no API keys), logs nothing, writes nothing to
stderr, and ends on end-of-file (the parent stopped or died).

Faults: a page not read within its time (``[web] fetch_timeout``, counted from the
request) gets the child killed, and the child also arms SIGALRM (default action:
terminate) for the same time, so not even a stopped parent leaves it spinning; a child
that dies (killed, segfault) fails the page being read with a clear ToolError, and the
next page starts a fresh one; a child found dead between pages is replaced before the
page is sent, so nobody sees it. A caller that is cancelled (the owner's /cancel)
returns at once: a page not yet started is dropped, a page being read finishes in the
background, bounded by its time.

Public API: :func:`extract`, :class:`Extractor`, :data:`EXTRACTOR`, :func:`command`,
:func:`main` (the worker's side), :data:`THREAD_LIMIT`, :data:`IDLE_SECONDS`.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kernel.core.errors import ToolError
from kernel.web.extract import Readable, readable

log = logging.getLogger(__name__)

# Below this many bytes (or characters) a page is read in a thread: there the loop's
# worst stall measured < 4 ms idle, < 17 ms with both cores busy; from 128 KB 22-34 ms
# (bench/README.md, web_fetch). The hop itself costs ~nothing: this saves the memory.
THREAD_LIMIT = 64 * 1024
IDLE_SECONDS = 300.0  # a worker with no page for this long ends
STOP_SECONDS = 5.0  # after closing its stdin, a worker not gone by then is killed
_HEADER_LIMIT = 4096
_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding the kernel package
_ENVIRONMENT = (
    *("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SYSTEMROOT"),
    *("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH"),
)
_CHILD = "import sys; sys.path.insert(0, sys.argv[1]); from kernel.web.worker import main; main()"


@dataclass(frozen=True)
class _Job:
    html: str | bytes
    seconds: float  # its whole budget, for the error message
    deadline: float  # time.monotonic()
    future: concurrent.futures.Future[Readable]


class Extractor:
    """One worker process and the daemon thread that feeds it; see the module docstring.
    ``idle``: seconds without a page before both end."""

    def __init__(self, *, idle: float = IDLE_SECONDS) -> None:
        self.idle = idle
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._busy = False
        self._retiring = 0  # idle workers being waited for

    @property
    def pid(self) -> int | None:
        """The worker process's id while one runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    @property
    def busy(self) -> bool:
        """Whether a page is being read (sent to the worker, or about to be)."""
        return self._busy

    @property
    def running(self) -> bool:
        """Whether a worker process or its thread is still there."""
        with self._lock:
            return self._proc is not None or self._thread is not None or self._retiring > 0

    async def readable(self, html: str | bytes, *, within: float) -> Readable:
        """:func:`kernel.web.extract.readable` of ``html`` in the worker; ToolError when
        it is not done ``within`` seconds (from now) or the worker stopped meanwhile."""
        future: concurrent.futures.Future[Readable] = concurrent.futures.Future()
        self._submit(_Job(html, within, time.monotonic() + within, future))
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Kill the worker now and wait (briefly) for its thread to end: the page being
        read fails, queued pages too; a later page starts a fresh worker. (Called at
        interpreter exit for :data:`EXTRACTOR`.)"""
        stopped = ToolError("the page could not be read: the extraction worker was shut down")
        with self._lock:
            proc, thread = self._proc, self._thread
            while True:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not None and job.future.set_running_or_notify_cancel():
                    job.future.set_exception(stopped)
            if thread is not None:
                self._jobs.put(None)  # the thread ends, unless a page came meanwhile
        if proc is not None:
            _kill(proc)
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_SECONDS)

    def _submit(self, job: _Job) -> None:
        with self._lock:
            self._jobs.put(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="web-extract", daemon=True)
                self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self.idle)
            except queue.Empty:
                job = None
            if job is None:
                with self._lock:
                    if not self._jobs.empty():
                        continue
                    self._thread = None
                    proc, self._proc = self._proc, None
                    self._retiring += proc is not None
                if proc is not None:
                    log.info("web: extraction worker stopped (idle or shut down)")
                    _retire(proc)
                    with self._lock:
                        self._retiring -= 1
                return
            if not job.future.set_running_or_notify_cancel():
                continue  # cancelled before it started
            self._busy = True
            try:
                job.future.set_result(self._run(job))
            except ToolError as exc:
                job.future.set_exception(exc)
            except Exception as exc:  # a bug here must not leave the caller waiting
                log.exception("web: extraction failed")
                job.future.set_exception(exc)
            finally:
                self._busy = False

    def _run(self, job: _Job) -> Readable:
        remaining = job.deadline - time.monotonic()
        if remaining <= 0:
            raise _too_slow(job.seconds)
        proc = self._worker()
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            proc.kill()

        watchdog = threading.Timer(remaining, expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            reply = _exchange(proc, job.html, remaining)
        finally:
            watchdog.cancel()
        if reply is not None:
            return reply
        _kill(proc)
        with self._lock:
            if self._proc is proc:
                self._proc = None
        if expired.is_set():
            log.warning("web: extraction took over %g s; worker killed", job.seconds)
            raise _too_slow(job.seconds)
        log.warning("web: extraction worker stopped (exit %s)", proc.returncode)
        raise ToolError(
            "the page could not be read: the extraction worker stopped (the page may be "
            "malformed); try again, or another source"
        )

    def _worker(self) -> subprocess.Popen[bytes]:
        """The running worker; a new one when there is none or it died since."""
        with self._lock:
            proc = self._proc
        if proc is not None and proc.poll() is None:
            return proc
        if proc is not None:
            _close_pipes(proc)
            log.info(
                "web: extraction worker found stopped (exit %s); starting another", proc.returncode
            )
        env = {name: os.environ[name] for name in _ENVIRONMENT if name in os.environ}
        try:
            proc = subprocess.Popen(
                command(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=_ROOT,
                env=env,
            )
        except OSError as exc:
            log.warning("web: extraction worker did not start: %s", type(exc).__name__)
            raise ToolError(
                "the page could not be read: the extraction worker did not start"
            ) from None
        log.info("web: extraction worker started (pid %d)", proc.pid)
        with self._lock:
            self._proc = proc
        return proc


def _exchange(proc: subprocess.Popen[bytes], html: str | bytes, seconds: float) -> Readable | None:
    """Send one page, read its answer; None when the worker stopped or answered nonsense."""
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None
    if isinstance(html, str):
        kind, data = "text", html.encode("utf-8", "surrogatepass")
    else:
        kind, data = "bytes", html
    header = {"kind": kind, "size": len(data), "seconds": seconds}
    try:
        stdin.write(json.dumps(header).encode() + b"\n")
        stdin.write(data)
        stdin.flush()
        line = stdout.readline(_HEADER_LIMIT)
        answer = json.loads(line) if line.endswith(b"\n") else None
        if not isinstance(answer, dict):
            return None
        if isinstance(answer.get("error"), str):
            raise ToolError(f"the page could not be read: {_named(answer['error'])}")
        sizes = answer.get("title"), answer.get("text")
        bound = 8 * len(data) + 65536
        if not all(isinstance(n, int) and 0 <= n <= bound for n in sizes):
            return None
        title = _read(stdout, int(answer["title"]))
        text = _read(stdout, int(answer["text"]))
    except (OSError, ValueError):  # a broken pipe; invalid JSON or UTF-8
        return None
    if title is None or text is None:
        return None
    return Readable(title, text, plain=answer.get("plain") is True)


def _read(stream: IO[bytes], size: int) -> str | None:
    data = stream.read(size)
    return data.decode("utf-8", "surrogatepass") if len(data) == size else None


def _named(error: str) -> str:
    """An exception's type name from the worker, fit to show."""
    return error if error.isidentifier() and len(error) <= 60 else "an error"


def _too_slow(seconds: float) -> ToolError:
    return ToolError(
        f"the page could not be read within {seconds:g} s ([web] fetch_timeout): it is too "
        "large or too complex. Look for a smaller page (a summary, an API, a text version)"
    )


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    _close_pipes(proc)


def _retire(proc: subprocess.Popen[bytes]) -> None:
    """Let an idle worker end on end-of-file (its memory given back); kill it if it lingers."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    try:
        proc.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    _close_pipes(proc)


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def command() -> list[str]:
    """How the worker process is started: this interpreter, :func:`main`."""
    return [sys.executable, "-c", _CHILD, _ROOT]


EXTRACTOR = Extractor()
atexit.register(EXTRACTOR.close)


async def extract(html: str | bytes, *, within: float) -> Readable:
    """The readable text of ``html``: in a thread when small, else in :data:`EXTRACTOR`'s
    worker process ``within`` seconds (ToolError past it)."""
    if len(html) < THREAD_LIMIT:
        page = await asyncio.to_thread(readable, html)
    else:
        page = await EXTRACTOR.readable(html, within=within)
    if page.plain:
        log.info("web: no main content found, plain text instead")
    return page


def _alarm(seconds: float) -> None:
    """Past its time, SIGALRM's default action ends this process, even inside lxml (0:
    disarm). Windows has no SIGALRM: there the parent's kill after the time is all."""
    if sys.platform != "win32" and hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, seconds)


def main() -> None:
    """The worker process: one page at a time from stdin, each answer on stdout."""
    logging.disable(logging.CRITICAL)  # nothing about pages leaves this process in a log
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C: the parent decides
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = stdin.readline(_HEADER_LIMIT)
        if not line.endswith(b"\n"):
            return  # end of file: the parent closed the pipe, stopped or died
        request = json.loads(line)
        data = stdin.read(int(request["size"]))
        if len(data) < int(request["size"]):
            return
        html = data.decode("utf-8", "surrogatepass") if request["kind"] == "text" else data
        _alarm(float(request["seconds"]) + 1.0)
        answer: dict[str, Any]
        try:
            page = readable(html)
        except Exception as exc:
            answer, parts = {"error": type(exc).__name__}, []
        else:
            parts = [
                page.title.encode("utf-8", "surrogatepass"),
                page.text.encode("utf-8", "surrogatepass"),
            ]
            answer = {"title": len(parts[0]), "text": len(parts[1]), "plain": page.plain}
        _alarm(0)
        stdout.write(json.dumps(answer).encode() + b"\n")
        for part in parts:
            stdout.write(part)
        stdout.flush()
