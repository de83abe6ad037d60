"""The suite runs on every core (pytest-xdist): what keeps one test process from
disturbing another, and the `slow` marker kept true."""

from __future__ import annotations

import errno
import inspect
import socket
from pathlib import Path

import pytest
from hypothesis.configuration import storage_directory

from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[1]
STARTS_KERNEL = "spawn_kernel("


def test_a_free_port_is_this_tests_own_and_nobody_listens_on_it() -> None:
    port = free_port()
    other = socket.socket()  # another worker asking for this very port
    with other, pytest.raises(OSError) as taken:
        other.bind(("127.0.0.1", port))
    assert taken.value.errno == errno.EADDRINUSE
    probe = socket.socket()
    with probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", port))
    server = socket.socket()  # the test's own server takes it (and may again, after a stop)
    with server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()
        with socket.create_connection(("127.0.0.1", port), timeout=30):
            pass


def test_hypothesis_keeps_nothing_in_the_checkout() -> None:
    home = storage_directory("examples", intent_to_write=False).path
    assert not home.is_relative_to(REPO)


def test_tests_that_start_kernel_processes_are_marked_slow(request: pytest.FixtureRequest) -> None:
    unmarked = [
        item.nodeid
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and STARTS_KERNEL in inspect.getsource(item.function)
        and item.get_closest_marker("slow") is None
    ]
    assert unmarked == []
