"""``kernel tui --local`` as the owner runs it: a real process on a pseudo-terminal, the
Anthropic simulator behind it, keys typed, Ctrl+Q to leave."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import kernel_env, write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply
from tests.tui.conftest import TEXTUAL_MISSING
from tests.waiting import wait_until

pytest.importorskip("textual", reason=TEXTUAL_MISSING)
pty = pytest.importorskip("pty", reason="needs a pseudo-terminal (POSIX)")

pytestmark = [pytest.mark.slow, pytest.mark.posix]  # a real Kernel process

ESCAPES = re.compile(r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07]*\x07|[@-Z\\-_])")


class Screen:
    """What the process drew, as text without the terminal's escape sequences: a thread
    reads the terminal until the process closes it (a full terminal would block it)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.raw = b""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the process closed the terminal
                return
            if not chunk:
                return
            self.raw += chunk

    def text(self) -> str:
        return ESCAPES.sub("", self.raw.decode("utf-8", "replace"))

    async def until(self, word: str, seconds: float = 60) -> None:
        await wait_until(lambda: word in self.text(), timeout=seconds, what=repr(word))

    def type(self, data: bytes) -> None:
        os.write(self.fd, data)


async def test_a_message_answered_on_a_terminal_and_ctrl_q_quits(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    write_config(tmp_path, anthropic_sim.base_url, "claude", language="en")
    anthropic_sim.enqueue(text_reply("Hello from [bold]Kernel[/bold]"))
    main, child = pty.openpty()
    env = kernel_env(TERM="xterm-256color", COLUMNS="100", LINES="30")
    proc = subprocess.Popen(  # noqa: ASYNC220 - the terminal is read off-loop below
        [sys.executable, "-m", "kernel", "tui", "--local"],
        cwd=tmp_path,
        env=env,
        stdin=child,
        stdout=child,
        stderr=child,
        start_new_session=True,
    )
    os.close(child)
    screen = Screen(main)
    try:
        await screen.until("In-process Kernel")
        screen.type(b"hi there")
        await screen.until("hi there")
        screen.type(b"\r")
        await screen.until("Kernel[/bold]")  # drawn literally, not as bold
        screen.type(b"\x11")  # Ctrl+Q
        code = await asyncio.to_thread(proc.wait, 60)
        await asyncio.to_thread(screen.reader.join, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)
    assert code == 0
    assert "Hello from [bold]Kernel[/bold]" in screen.text()
    log = (tmp_path / "data" / "logs" / "kernel.log").read_text(encoding="utf-8")
    assert "kernel stopped" in log  # the in-process Kernel logs to its file, not the screen
