"""One CLI child process, start to reaped: its own session and process group, stdout and
stderr read concurrently, the full output written to disk as it comes, and the whole
group killed on timeout, idle timeout, cancellation or Kernel's stop.

A CLI that reports retries or API errors (its formatter's ``trouble``) and then makes no
progress for ``no_progress_timeout`` seconds, counted from its first retry or error since
its last progress step, is ended early (reason ``no_progress``): retries are not progress,
so a CLI that cannot reach its API is reported within that limit, not at the 10-minute
timeout, while a long silent tool run before a passing hiccup is not held against it.

While the CLI waits for the owner (a permission prompt, :meth:`CLIProcess.hold`) its
clock stops: the total, idle and no-progress limits count only the time it is not held,
so the owner's thinking time is never the CLI's timeout.

Killing is SIGTERM to the group, then SIGKILL after a short grace, so a child that
ignores SIGTERM dies too. Whatever ended the run, the group gets a final SIGKILL (a
grandchild left behind by a CLI that exited must not outlive the delegation) and the
leader is reaped before :meth:`CLIProcess.run` returns.

Every signal Kernel sends while the leader lives is noted, with when: the report's
:class:`~kernel.delegate.ending.ExitStatus` tells Kernel's kill (and which signal) from
a CLI that exited by itself or was killed from outside (:meth:`CLIProcess.exit_status`,
also after a cancellation).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from kernel.core.platform import group_spawn_kwargs, kill_tree
from kernel.delegate.ending import SIGKILL, SIGTERM, ExitStatus
from kernel.delegate.formats import Formatter

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
FLUSH_AT = 256 * 1024  # bytes of stdout buffered before a write to disk
MAX_LINE = 8 * 1024 * 1024  # a longer "line" is handed on in pieces
MAX_STDERR_LINE = 4096  # characters of one stderr line the formatter sees
REAP_WAIT = 5.0  # seconds to wait for the leader after SIGKILL
POLL = 0.1  # seconds between checks for a leader that exited while its pipes stay open
DRAIN_WAIT = 2.0  # seconds to wait for the pipes to close after the group is gone
OUTPUT_LIMIT = 50_000  # characters of output the model gets (seed 004)
HALF = 24_500  # head and tail kept of a longer output; the rest holds the marker


class HeadTail:
    """Keeps the first ``head`` and last ``tail`` characters of a growing text."""

    def __init__(self, head: int, tail: int) -> None:
        self.head_limit = head
        self.tail_limit = tail
        self.head: list[str] = []
        self.head_len = 0
        self._tail: list[str] = []
        self._tail_len = 0
        self.total = 0

    def add(self, text: str) -> None:
        self.total += len(text)
        room = self.head_limit - self.head_len
        if room > 0:
            self.head.append(text[:room])
            self.head_len += len(text[:room])
            text = text[room:]
        if text and self.tail_limit:
            self._tail.append(text)
            self._tail_len += len(text)
            if self._tail_len > 2 * self.tail_limit:  # trim now and then, not per line
                self._tail = [self.tail]
                self._tail_len = len(self._tail[0])

    @property
    def tail(self) -> str:
        return "".join(self._tail)[-self.tail_limit :] if self.tail_limit else ""

    @property
    def omitted(self) -> int:
        return self.total - self.head_len - min(self._tail_len, self.tail_limit)

    def text(self, marker: Callable[[int], str] = lambda n: f"\n…[{n} omitted]…\n") -> str:
        head = "".join(self.head)
        if self.omitted <= 0:
            return head + "".join(self._tail)
        return head + marker(self.omitted) + self.tail


@dataclass
class RunRequest:
    argv: list[str]
    cwd: Path
    env: dict[str, str]
    timeout: float
    idle_timeout: float
    formatter: Formatter
    output_path: Path
    no_progress_timeout: float = 60.0


@dataclass
class RunReport:
    reason: str  # exit | completed | timeout | idle | no_progress | stopped
    exit_code: int | None  # the raw return code (asyncio's -N for signal N)
    stdout: HeadTail
    stderr: HeadTail
    killed_after_done: bool = False  # the CLI said it was done but did not exit in time
    status: ExitStatus = field(default_factory=ExitStatus)  # its code or signal, Kernel's


class CLIProcess:
    def __init__(
        self,
        request: RunRequest,
        *,
        on_step: Callable[[str], None] = lambda step: None,
        on_start: Callable[[int], None] = lambda pid: None,
        on_trouble: Callable[[], None] = lambda: None,
        kill_grace: float = 0.8,
        done_grace: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.request = request
        self.on_step = on_step
        self.on_start = on_start
        self.on_trouble = on_trouble
        self.kill_grace = kill_grace
        self.done_grace = done_grace
        self.clock = clock
        self.proc: asyncio.subprocess.Process | None = None
        self.stdout = HeadTail(HALF, HALF)
        self.stderr = HeadTail(10_000, 10_000)
        self.last_display: float | None = None
        self.troubled = False  # a retry or API error came after the last progress
        self.trouble_since = 0.0  # when the first of them came
        self._trouble_seq = 0
        self._activity = asyncio.Event()
        self._buffer = bytearray()
        self._file: BinaryIO | None = None
        self._err_file: BinaryIO | None = None
        self._err_failed = False
        self._stopped = False
        self._holds = 0  # prompts open now: while any is, the CLI's clock stands still
        self._held_since = 0.0
        self._held_total = 0.0
        self._started = 0.0
        self.sent: list[str] = []  # the signals Kernel sent the living leader, in order
        self.sent_after: float | None = None  # the CLI's seconds at the first of them

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """The CLI waits for the owner meanwhile: its limits do not run."""
        if self._holds == 0:
            self._held_since = self.clock()
        self._holds += 1
        try:
            yield
        finally:
            self._holds -= 1
            if self._holds == 0:
                self._held_total += self.clock() - self._held_since
                self._activity.set()  # the supervisor recomputes its deadlines

    def _now(self) -> float:
        """The CLI's own clock: real time less the time it was held."""
        now = self.clock()
        held = self._held_total + (now - self._held_since if self._holds else 0.0)
        return now - held

    def kill(self) -> None:
        """Kernel is stopping: SIGKILL the whole group now; ``run`` then returns. A leader
        already reaped is said so: on Windows its PID may be another process's now."""
        self._stopped = True
        self._activity.set()  # wake the supervisor
        if self.proc is not None:
            self._note_signal(SIGKILL)
            kill_tree(self.proc.pid, force=True, leader_gone=self.proc.returncode is not None)

    async def run(self) -> RunReport:
        """Run to the end. Raises OSError if the process cannot be started; re-raises
        CancelledError after the group is killed."""
        req = self.request
        self._file = await asyncio.to_thread(_open, req.output_path)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *req.argv,
                cwd=req.cwd,
                env=req.env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                **group_spawn_kwargs(),  # its own group, so the whole tree can be killed
            )
        except BaseException:
            await asyncio.to_thread(_discard, self._file, req.output_path)
            raise
        proc = self.proc
        started = self._started = self._now()
        if self._stopped:  # Kernel began stopping while this was being started
            self._note_signal(SIGKILL)
            kill_tree(proc.pid, force=True)
        self.on_start(proc.pid)
        assert proc.stdout is not None and proc.stderr is not None
        out = asyncio.create_task(self._pump_stdout(proc.stdout), name=f"cli-out-{proc.pid}")
        err = asyncio.create_task(self._pump_stderr(proc.stderr), name=f"cli-err-{proc.pid}")
        exited = asyncio.create_task(proc.wait(), name=f"cli-wait-{proc.pid}")
        killed_after_done = False
        try:
            reason = await self._supervise(started, exited)
            if reason in ("timeout", "idle", "no_progress"):
                await self._terminate()
            elif reason == "completed":
                killed_after_done = not await self._exits_within(self.done_grace)
        except asyncio.CancelledError:
            await self._terminate()
            raise
        finally:
            # Leftovers (grandchildren, a leader past its grace) die here, in every path.
            self._note_signal(SIGKILL)
            kill_tree(proc.pid, force=True, leader_gone=proc.returncode is not None)
            await self._finish(out, err, exited)
        if self._stopped:
            reason = "stopped"
        return RunReport(
            reason=reason,
            exit_code=proc.returncode,
            stdout=self.stdout,
            stderr=self.stderr,
            killed_after_done=killed_after_done,
            status=self.exit_status(),
        )

    def exit_status(self) -> ExitStatus:
        """How the process ended (so far): its code or signal, and Kernel's signals."""
        code = self.proc.returncode if self.proc is not None else None
        return ExitStatus.of(code, self.sent, self.sent_after)

    def _note_signal(self, name: str) -> None:
        """Kernel is about to send ``name``: noted while the leader still lives (a
        final sweep of the group after its own exit is not a kill of the CLI)."""
        if self.proc is None or self.proc.returncode is not None:
            return
        if self.sent_after is None:
            self.sent_after = self._now() - self._started
        if not self.sent or self.sent[-1] != name:
            self.sent.append(name)

    async def _supervise(self, started: float, exited: asyncio.Task[int]) -> str:
        req = self.request
        proc = self.proc
        assert proc is not None
        while True:
            if self._stopped:
                return "stopped"
            if req.formatter.done:
                return "completed"
            if exited.done() or proc.returncode is not None:
                # asyncio's wait() also waits for the pipes, which a grandchild may
                # hold open: the leader's own exit is what counts.
                return "exit"
            now = self._now()
            deadline = started + req.timeout
            if now >= deadline:
                return "timeout"
            if self.last_display is not None:
                idle_deadline = self.last_display + req.idle_timeout
                if now >= idle_deadline:
                    return "idle"
                deadline = min(deadline, idle_deadline)
            if self.troubled:
                stuck_deadline = self.trouble_since + req.no_progress_timeout
                if now >= stuck_deadline:
                    return "no_progress"
                deadline = min(deadline, stuck_deadline)
            self._activity.clear()
            waiter = asyncio.create_task(self._activity.wait())
            try:
                await asyncio.wait(
                    {waiter, exited},
                    timeout=min(deadline - now, POLL),
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                waiter.cancel()

    async def _terminate(self) -> None:
        """SIGTERM, a short grace, then SIGKILL, which is sent even if this is cancelled."""
        assert self.proc is not None
        try:
            self._note_signal(SIGTERM)
            kill_tree(self.proc.pid, force=False)
            await self._exits_within(self.kill_grace)
        finally:
            self._note_signal(SIGKILL)
            kill_tree(self.proc.pid, force=True, leader_gone=self.proc.returncode is not None)

    async def _exits_within(self, seconds: float) -> bool:
        """Whether the leader exits within ``seconds`` (its pipes may stay open)."""
        assert self.proc is not None
        end = self.clock() + seconds
        while self.proc.returncode is None:
            left = end - self.clock()
            if left <= 0:
                return False
            await asyncio.sleep(min(left, POLL / 4))
        return True

    async def _finish(
        self, out: asyncio.Task[None], err: asyncio.Task[None], exited: asyncio.Task[int]
    ) -> None:
        try:
            await asyncio.wait({exited}, timeout=REAP_WAIT)
            await asyncio.wait({out, err}, timeout=DRAIN_WAIT)
        finally:
            for task in (out, err, exited):
                task.cancel()
            await self._close_file()

    def _line(self, line: str) -> None:
        self.stdout.add(line + "\n")
        formatter = self.request.formatter
        steps = formatter.feed(line)
        if steps:
            self.last_display = self._now()
            self.troubled = False
            for step in steps:
                self.on_step(step)
        self._check_trouble()
        if steps or formatter.done:
            self._activity.set()

    def _check_trouble(self) -> None:
        formatter = self.request.formatter
        if formatter.trouble_seq != self._trouble_seq:
            self._trouble_seq = formatter.trouble_seq
            if not self.troubled:
                self.trouble_since = self._now()
            self.troubled = True
            self.on_trouble()
            self._activity.set()

    async def _pump_stdout(self, stream: asyncio.StreamReader) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        while chunk := await stream.read(CHUNK):
            await self._write(chunk)
            text = pending + decoder.decode(chunk)
            lines = text.split("\n")
            pending = lines.pop()
            for line in lines:
                self._line(line.rstrip("\r"))
            if len(pending) > MAX_LINE:
                self._line(pending)
                pending = ""
        pending += decoder.decode(b"", final=True)
        if pending:
            self._line(pending)

    async def _pump_stderr(self, stream: asyncio.StreamReader) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        while chunk := await stream.read(CHUNK):
            text = decoder.decode(chunk)
            self.stderr.add(text)
            await self._write_stderr(chunk)
            # Gemini CLI reports its retries here: lines go to the formatter too.
            lines = (pending + text).split("\n")
            pending = lines.pop()[-MAX_STDERR_LINE:]
            for line in lines:
                self.request.formatter.feed_stderr(line[:MAX_STDERR_LINE])
            self._check_trouble()
        self.stderr.add(decoder.decode(b"", final=True))

    async def _write_stderr(self, chunk: bytes) -> None:
        """All of stderr goes to its own file beside the output (a CLI in text mode may
        put its whole progress there); the output file keeps its head and tail."""
        if self._err_failed:
            return
        try:
            if self._err_file is None:
                self._err_file = await asyncio.to_thread(_open, self.stderr_path)
            await asyncio.to_thread(self._err_file.write, chunk)
        except OSError as exc:
            self._err_failed = True
            log.warning("cli stderr file write failed (%s); stderr not saved", exc.strerror)

    @property
    def stderr_path(self) -> Path:
        return self.request.output_path.with_name(self.request.output_path.stem + ".stderr.txt")

    async def _write(self, chunk: bytes) -> None:
        if self._file is None:  # the file was given up: nothing to buffer for
            return
        self._buffer += chunk
        if len(self._buffer) >= FLUSH_AT and self._file is not None:
            data, self._buffer = bytes(self._buffer), bytearray()
            try:
                await asyncio.to_thread(self._file.write, data)
            except OSError as exc:
                # A full disk must not stop the reading (the CLI would block on a full
                # pipe): keep draining, give up the file, say so once.
                log.warning("cli output file write failed (%s); output not saved", exc.strerror)
                file, self._file = self._file, None
                with contextlib.suppress(OSError):
                    await asyncio.to_thread(file.close)

    async def _close_file(self) -> None:
        err_file, self._err_file = self._err_file, None
        if err_file is not None:
            await asyncio.to_thread(err_file.close)
            if self.stderr.omitted <= 0:  # all of it fits in the output file below
                await asyncio.to_thread(self.stderr_path.unlink, True)
        file, self._file = self._file, None
        if file is None:
            return
        data = bytes(self._buffer)
        if self.stderr.total:
            title = "stderr"
            if self.stderr.omitted > 0 and not self._err_failed:
                title = f"stderr, head and tail; all of it in {self.stderr_path.name}"
            data += f"\n----- {title} -----\n".encode() + self.stderr.text().encode(
                "utf-8", "replace"
            )
        try:
            await asyncio.to_thread(_write_and_close, file, data)
        finally:
            if not file.closed:  # cancelled while writing: do not leak the descriptor
                file.close()


def _open(path: Path) -> BinaryIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("wb")


def _discard(file: BinaryIO, path: Path) -> None:
    file.close()
    path.unlink(missing_ok=True)


def _write_and_close(file: BinaryIO, data: bytes) -> None:
    with file:
        file.write(data)
