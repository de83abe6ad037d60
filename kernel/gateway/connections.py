"""How many connections the sidecar holds open, in total and per client address.

Every open connection is a file descriptor, and the process has a fixed number of them
(``LimitNOFILE``, 1024 by default under systemd), shared with the database, the logs,
Telegram, the model APIs and child processes. Left alone, a few hundred idle sockets
exhaust them: accepts fail, new clients wait in the listen queue until the idle ones
time out, and the rest of Kernel cannot open files either. So the sidecar holds at
most ``gateway.max_connections`` (by default half of what the descriptor limit leaves
after a reserve and the accept bursts in flight), and
``gateway.max_connections_per_client`` from one address.
Near the cap it closes the connections that have waited idle longest (never one in
the middle of a request) to make room for new ones; when none is idle a new
connection is closed at once, before any work is done for it.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from typing import Protocol

RESERVE = 96  # descriptors left for everything but the sidecar (idle Kernel: ~15)
AUTO_CEILING = 1024  # connections: plenty for a personal assistant's sidecar
# The listen queue, and so how many connections asyncio accepts in one go. Accepted
# sockets hold descriptors for a few loop turns before a refusal or an eviction closes
# them, so about four bursts are in flight at worst under a flood.
ACCEPT_BURST = 32
IN_FLIGHT = 4 * ACCEPT_BURST


class Closable(Protocol):
    def force_close(self) -> None: ...


def open_files_limit() -> int:
    """The soft RLIMIT_NOFILE (1024 where it cannot be read, e.g. on Windows)."""
    if sys.platform == "win32":
        return 1024
    try:
        import resource
    except ImportError:
        return 1024
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else int(soft)


def default_limits(total: int, per_client: int, nofile: int | None = None) -> tuple[int, int]:
    """The configured limits, with 0 meaning "derive it": total from the descriptor
    limit, per client half of the total."""
    if total <= 0:
        files = open_files_limit() if nofile is None else nofile
        total = max(8, min(AUTO_CEILING, (files - RESERVE - IN_FLIGHT) // 2))
    if per_client <= 0:
        per_client = max(4, total // 2)
    return total, min(per_client, total)


class ConnectionTable:
    """Open connections by client address, with the idle ones in the order they
    became idle (oldest first)."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total = total
        self.per_client = per_client
        # Close idle ones from here on, so a new client finds room without waiting.
        self.high_water = max(1, total - max(1, total // 10))
        self._peer: dict[Closable, str] = {}
        self._count: dict[str, int] = {}
        # Idle: nothing received since the connection or its last response; reading:
        # part of a request head in (closed by read_header_timeout if it stalls). Both
        # oldest first; idle ones are closed first.
        self._idle: OrderedDict[Closable, None] = OrderedDict()
        self._reading: OrderedDict[Closable, None] = OrderedDict()
        self._idle_by_peer: dict[str, OrderedDict[Closable, None]] = {}
        self._reading_by_peer: dict[str, OrderedDict[Closable, None]] = {}
        self.refused = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._peer)

    def count(self, peer: str) -> int:
        return self._count.get(peer, 0)

    def admit(self, conn: Closable, peer: str) -> bool:
        """Room for a new connection from ``peer`` (closing idle ones for it), or False:
        close it."""
        if len(self._peer) >= self.high_water:
            self._evict_oldest(self._idle, self._reading)
        if self._count.get(peer, 0) >= self.per_client:
            self._evict_oldest(self._idle_by_peer.get(peer), self._reading_by_peer.get(peer))
        if len(self._peer) >= self.total or self._count.get(peer, 0) >= self.per_client:
            self.refused += 1
            return False
        self._peer[conn] = peer
        self._count[peer] = self._count.get(peer, 0) + 1
        self.idle(conn)
        return True

    def busy(self, conn: Closable) -> None:
        """In a request: never closed to make room."""
        self._set(conn, None)

    def reading(self, conn: Closable) -> None:
        """Request bytes arrived: closed to make room only when nothing is idle."""
        self._set(conn, "reading")

    def idle(self, conn: Closable) -> None:
        self._set(conn, "idle")

    def _set(self, conn: Closable, state: str | None) -> None:
        peer = self._peer.get(conn)
        if peer is None:
            return
        self._forget(conn, peer)
        if state is not None:
            queue, by_peer = (
                (self._idle, self._idle_by_peer)
                if state == "idle"
                else (self._reading, self._reading_by_peer)
            )
            queue[conn] = None
            by_peer.setdefault(peer, OrderedDict())[conn] = None

    def _forget(self, conn: Closable, peer: str) -> None:
        for queue, by_peer in (
            (self._idle, self._idle_by_peer),
            (self._reading, self._reading_by_peer),
        ):
            queue.pop(conn, None)
            mine = by_peer.get(peer)
            if mine is not None:
                mine.pop(conn, None)
                if not mine:
                    del by_peer[peer]

    def release(self, conn: Closable) -> None:
        """Forget a closed connection (again is harmless)."""
        peer = self._peer.pop(conn, None)
        if peer is None:
            return
        self._forget(conn, peer)
        left = self._count[peer] - 1
        if left:
            self._count[peer] = left
        else:
            del self._count[peer]

    def _evict_oldest(self, *queues: OrderedDict[Closable, None] | None) -> None:
        queue = next((q for q in queues if q), None)
        if queue is None:
            return
        oldest = next(iter(queue))
        self.release(oldest)
        self.evicted += 1
        oldest.force_close()
