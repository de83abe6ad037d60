"""Descriptor exhaustion: the real ``kernel`` process under a low open-files limit,
flooded with more idle sockets than it has descriptors, still serves a new client, and
its log stays small."""

from __future__ import annotations

import asyncio
import resource
import signal
import socket
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from kernel.gateway.connections import ConnectionTable, default_limits
from tests.conftest import kernel_env, write_config
from tests.gateway.test_service import started
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim

pytestmark = pytest.mark.posix  # RLIMIT_NOFILE and SIGTERM

LIMIT = 512  # descriptors the child may open: at most 144 connections
FLOOD = 700  # idle sockets opened against it


def _low_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def _health(url: str) -> Any:
    # A generous bound: what is asserted is that it is served, not how fast.
    with urllib.request.urlopen(url + "/healthz", timeout=30) as response:  # noqa: S310
        return response.status


def _flood(port: int, count: int) -> list[socket.socket]:
    """Open ``count`` connections that never send a byte (non-blocking connects, so a
    full listen queue does not stall the test)."""
    sockets = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        sockets.append(sock)
    return sockets


@pytest.mark.slow
async def test_a_socket_flood_past_the_descriptor_limit_does_not_lock_clients_out(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < FLOOD + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, FLOOD + 1000), hard))
    tg = await TelegramSim().start()
    path = write_config(tmp_path, anthropic_sim.base_url, "claude", language="en")
    path.write_text(
        path.read_text() + f'[telegram]\napi_base = "{tg.api_base}"\npoll_timeout = 1\n'
    )
    env = kernel_env(KERNEL_TELEGRAM_TOKEN=DEFAULT_TOKEN, KERNEL_TELEGRAM_ALLOWED_USER=str(OWNER))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kernel",
        cwd=tmp_path,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=_low_limit,
    )
    sockets: list[socket.socket] = []
    try:
        url, _ = await started(process)
        assert await asyncio.to_thread(_health, url) == 200
        port = int(url.rsplit(":", 1)[1])
        # Drain the child's pipes meanwhile, so its stdout logging never blocks it.
        drain = asyncio.gather(process.stdout.read(), process.stderr.read())  # type: ignore[union-attr]
        sockets = _flood(port, FLOOD)
        for _ in range(3):  # the flood lasts a few seconds; clients are served meanwhile
            assert await asyncio.to_thread(_health, url) == 200
            sockets += _flood(port, FLOOD // 6)
            await asyncio.sleep(1)
        assert await asyncio.to_thread(_health, url) == 200
    finally:
        for sock in sockets:
            sock.close()
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), timeout=30)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        await tg.stop()
    await drain
    log = tmp_path / "data" / "logs" / "kernel.log"
    size = sum(f.stat().st_size for f in log.parent.glob("kernel.log*"))
    assert size < 1024 * 1024, size
    text = log.read_text()
    assert "gateway listening" in text and "gateway stopped" in text


class Conn:
    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    def force_close(self) -> None:
        self.closed = True


def test_near_the_cap_the_oldest_idle_connection_makes_room() -> None:
    table = ConnectionTable(total=10, per_client=4)
    assert table.high_water == 9
    a = [Conn(f"a{i}") for i in range(4)]
    for conn in a:
        assert table.admit(conn, "10.0.0.1")
    table.busy(a[0])  # in a request: never closed to make room
    table.reading(a[1])  # bytes in: closed only when nothing is idle
    new = Conn("a4")
    assert table.admit(new, "10.0.0.1")  # per client: a2, the oldest idle, goes
    assert [c.closed for c in a] == [False, False, True, False]
    assert table.count("10.0.0.1") == 4
    fifth = Conn("a5")
    assert table.admit(fifth, "10.0.0.1")
    assert a[3].closed and not new.closed
    table.busy(new)
    table.busy(fifth)
    table.release(a[3])  # closing one that was closed already is harmless
    last = Conn("a6")
    assert table.admit(last, "10.0.0.1")  # nothing idle left: the reading one goes
    assert a[1].closed
    table.busy(last)
    # Another address: its fifth and sixth each close its own oldest idle (per client).
    others = [Conn(f"b{i}") for i in range(6)]
    for conn in others:
        assert table.admit(conn, "10.0.0.2")
    assert [c.closed for c in others] == [True, True] + [False] * 4 and len(table) == 8
    for conn in others[2:]:
        table.busy(conn)
    for name in ("c0", "c1"):  # none idle, but below the cap
        conn = Conn(name)
        assert table.admit(conn, "10.0.0.3")
        table.busy(conn)
    refused = Conn("c2")
    assert not table.admit(refused, "10.0.0.3") and table.refused == 1 and len(table) == 10
    assert not any(c.closed for c in (a[0], new, fifth))  # busy ones stayed open


def test_the_default_caps_follow_the_descriptor_limit() -> None:
    assert default_limits(0, 0, nofile=1024) == (400, 200)
    assert default_limits(0, 0, nofile=512) == (144, 72)
    assert default_limits(0, 0, nofile=100) == (8, 4)
    assert default_limits(0, 0, nofile=1 << 20) == (1024, 512)
    assert default_limits(50, 0) == (50, 25)
    assert default_limits(50, 80) == (50, 50)
