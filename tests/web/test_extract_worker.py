"""web_fetch's extraction in a worker process (kernel.web.worker): the same text as in a
thread, the loop free meanwhile, and every way the worker can stop: killed between
pages, killed or stalled during one, idle, cancelled, at interpreter exit."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kernel.config.web import WebConfig
from kernel.core.errors import ToolError
from kernel.core.untrusted import untrusted
from kernel.web.extract import readable
from kernel.web.fetch import fetch
from kernel.web.worker import EXTRACTOR, THREAD_LIMIT, Extractor, command
from tests.conftest import free_port
from tests.waiting import wait_until
from tests.web.site import Site, big_html

ROOT = Path(__file__).resolve().parents[2]
WAIT = 30.0  # the ceiling of every wait for a process to change state
PAGE = big_html(300_000)
SMALL = (
    "<html><head><title>Harbour news | The Daily</title></head><body><article><p>The harbour "
    "reopened on Monday after the dredging works, and the first ferry left at seven.</p>"
    "</article></body></html>"
)


# The worker is watched through /proc (its threads, children, state, environment).
pytestmark = pytest.mark.posix


def children() -> set[int]:
    """This process's child processes (not yet reaped)."""
    found: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            with open(task / "children") as listing:
                found.update(int(pid) for pid in listing.read().split())
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended between the listing and the read
    return found


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie counts: its memory is given back)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def cpu_ticks(pid: int) -> int:
    """User plus system CPU time of ``pid`` so far, in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def environ(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


@pytest.fixture
def extractor() -> Iterator[Extractor]:
    before = children()
    running = Extractor()
    yield running
    running.close()
    assert children() <= before, "the worker outlived its test"


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    async with Site(port=free_port()) as running:
        yield running
    EXTRACTOR.close()


async def test_the_worker_gives_the_same_text_as_the_thread(extractor: Extractor) -> None:
    pages: list[str | bytes] = [
        PAGE,
        PAGE.encode(),
        SMALL,
        # The charset the page declares inside itself, read from its bytes.
        '<html><head><meta charset="gbk"><title>港口新闻</title></head><body><article><p>'
        f"{'港口周一重新开放，第一班渡轮七点出发。' * 5}</p></article></body></html>".encode("gbk"),
        "<html><body><ul><li><a href='/a'>Only</a></li><li><a href='/b'>links</a></li></ul>",
        "",
        b"\x00\x01\x02",
        "<p>a lone surrogate \ud800 and more</p>",
    ]
    for page in pages:
        assert await extractor.readable(page, within=WAIT) == readable(page)
    assert extractor.pid is not None and extractor.pid != os.getpid()


async def test_web_fetch_of_a_large_page_reads_it_in_the_worker_and_the_loop_ticks(
    site: Site,
) -> None:
    url = site.url("/html?size=2000000")
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0.001)
            ticks += 1

    await fetch(site.url("/html?size=100000"), WebConfig(allow_private=True))  # starts it
    pid = EXTRACTOR.pid
    assert pid is not None and pid != os.getpid()
    spent = cpu_ticks(pid)
    counting = asyncio.create_task(ticker())
    result = await fetch(url, WebConfig(allow_private=True, max_chars=10**6))
    done.set()
    await counting
    assert EXTRACTOR.pid == pid
    assert cpu_ticks(pid) > spent, "the page was read in the worker process"
    assert ticks >= 20, "the event loop kept running while the page was read"
    expected = readable(big_html(2_000_000)).text
    assert result["chars"] == len(expected)
    assert result["text"] == untrusted(url, expected[: 10**6])


async def test_a_small_page_stays_in_a_thread(site: Site) -> None:
    assert len(SMALL) < THREAD_LIMIT
    EXTRACTOR.close()
    result = await fetch(site.url("/article"), WebConfig(allow_private=True))
    assert "# Tide pools" in result["text"]
    assert not EXTRACTOR.running


async def test_a_worker_killed_between_pages_is_replaced_unseen(extractor: Extractor) -> None:
    first = await extractor.readable(PAGE, within=WAIT)
    pid = extractor.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    await wait_until(lambda: gone(pid), timeout=WAIT, what="the worker to die")
    assert await extractor.readable(PAGE, within=WAIT) == first
    assert extractor.pid not in (None, pid)


async def test_a_worker_killed_during_a_page_fails_that_page_only(extractor: Extractor) -> None:
    await extractor.readable(SMALL, within=WAIT)
    pid = extractor.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # it cannot answer before it is killed
    reading = asyncio.create_task(extractor.readable(PAGE, within=WAIT))
    await wait_until(lambda: extractor.busy, timeout=WAIT, what="the page to be sent")
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(ToolError, match="the extraction worker stopped"):
        await reading
    assert gone(pid)
    assert await extractor.readable(PAGE, within=WAIT) == readable(PAGE)
    assert extractor.pid not in (None, pid)


async def test_a_page_not_read_in_time_gets_the_worker_killed_and_replaced(
    extractor: Extractor,
) -> None:
    await extractor.readable(SMALL, within=WAIT)
    pid = extractor.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # a page it would never finish
    with pytest.raises(
        ToolError, match=r"could not be read within 0.5 s \(\[web\] fetch_timeout\)"
    ):
        await extractor.readable(PAGE, within=0.5)
    assert gone(pid)
    assert extractor.pid is None
    assert await extractor.readable(SMALL, within=WAIT) == readable(SMALL)


async def test_a_cancelled_read_returns_at_once_and_the_worker_goes_on(
    extractor: Extractor,
) -> None:
    await extractor.readable(SMALL, within=WAIT)
    pid = extractor.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    started = asyncio.create_task(extractor.readable(PAGE, within=WAIT))
    await wait_until(lambda: extractor.busy, timeout=WAIT, what="the page to be sent")
    queued = asyncio.create_task(extractor.readable(SMALL, within=WAIT))
    await asyncio.sleep(0)
    for task in (started, queued):
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    os.kill(pid, signal.SIGCONT)  # the page being read finishes in the background
    await wait_until(lambda: not extractor.busy, timeout=WAIT, what="the background page to finish")
    assert extractor.pid == pid
    assert await extractor.readable(SMALL, within=WAIT) == readable(SMALL)


async def test_an_idle_worker_ends_and_the_next_page_starts_another() -> None:
    before = children()
    extractor = Extractor(idle=0.2)
    try:
        await extractor.readable(SMALL, within=WAIT)
        pid = extractor.pid
        assert pid is not None
        await wait_until(lambda: not extractor.running, timeout=WAIT, what="the idle worker to end")
        assert gone(pid)
        assert children() <= before
        assert await extractor.readable(SMALL, within=WAIT) == readable(SMALL)
        # Another worker read it; on a loaded machine it may have idled out (pid None)
        # before this line runs: 0.2 s is its idle time, not a bound on the test.
        assert extractor.pid != pid
    finally:
        extractor.close()
    assert children() <= before


async def test_the_worker_writes_no_log_and_the_parent_logs_no_page_text(
    extractor: Extractor, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNEL_WEB_SEARCH_API_KEY", "key-of-the-parent")
    caplog.set_level(logging.DEBUG)
    marker = "<p>SECRET-MARKER-IN-THE-PAGE</p>"
    page = PAGE.replace("<p>", marker, 1)
    assert "SECRET-MARKER" in (await extractor.readable(page, within=WAIT)).text
    pid = extractor.pid
    assert pid is not None
    assert os.readlink(f"/proc/{pid}/fd/2") == "/dev/null"
    assert b"key-of-the-parent" not in environ(pid)
    os.kill(pid, signal.SIGSTOP)
    with pytest.raises(ToolError):
        await extractor.readable(page, within=0.5)
    assert "SECRET-MARKER" not in caplog.text
    messages = [record.getMessage() for record in caplog.records]
    assert any("extraction worker started" in message for message in messages)
    assert any("worker killed" in message for message in messages)


STAND_IN = """
import json, sys
request = json.loads(sys.stdin.buffer.readline())
sys.stdin.buffer.read(request["size"])
sys.stdout.buffer.write(sys.argv[1].encode("latin-1"))
sys.stdout.buffer.flush()
"""


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ("not json\n", "the extraction worker stopped"),
        ('{"title": 1000000000000, "text": 0}\n', "the extraction worker stopped"),
        ('{"title": 5, "text": 3}\nab', "the extraction worker stopped"),
        ('{"title": 1, "text": 1}\n\xff\xfe', "the extraction worker stopped"),
        ('["title", "text"]\n', "the extraction worker stopped"),
        ('{"error": "Bad name: <b>page text</b>"}\n', r"could not be read: an error$"),
        ('{"error": "RecursionError"}\n', r"could not be read: RecursionError$"),
        ("x" * 10_000, "the extraction worker stopped"),
    ],
)
async def test_a_worker_answering_nonsense_is_not_believed(
    extractor: Extractor, monkeypatch: pytest.MonkeyPatch, answer: str, error: str
) -> None:
    monkeypatch.setattr(
        "kernel.web.worker.command", lambda: [sys.executable, "-c", STAND_IN, answer]
    )
    with pytest.raises(ToolError, match=error):
        await extractor.readable(PAGE, within=WAIT)


def test_a_worker_past_its_time_ends_itself_even_with_nobody_to_kill_it() -> None:
    # What the parent asks for is the page's seconds + 1; -0.999 leaves 1 ms, far less
    # than any machine takes for this page: SIGALRM's default action ends the worker.
    page = big_html(2_000_000).encode()
    with subprocess.Popen(command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE) as child:
        assert child.stdin is not None
        header = json.dumps({"kind": "bytes", "size": len(page), "seconds": -0.999})
        with contextlib.suppress(BrokenPipeError):
            child.stdin.write(header.encode() + b"\n" + page)
            child.stdin.flush()
        assert child.wait(WAIT) == -signal.SIGALRM
        assert child.stdout is not None and child.stdout.read() == b""


def test_the_interpreter_exits_while_a_page_is_being_read_and_its_worker_ends() -> None:
    script = """
import asyncio, os, signal, sys
from kernel.web.worker import EXTRACTOR
from tests.web.site import big_html

async def main():
    await EXTRACTOR.readable("<p>warm</p>", within=30)
    print(EXTRACTOR.pid, flush=True)
    os.kill(EXTRACTOR.pid, signal.SIGSTOP)  # this page would never finish
    asyncio.get_running_loop().create_task(EXTRACTOR.readable(big_html(300_000), within=600))
    while not EXTRACTOR.busy:
        await asyncio.sleep(0.01)

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT * 4,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    pid = int(done.stdout.split()[0])
    deadline = time.monotonic() + WAIT
    while not gone(pid):
        assert time.monotonic() < deadline, "the worker outlived its parent"
        time.sleep(0.01)
