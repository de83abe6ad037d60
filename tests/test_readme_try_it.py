"""The README's "Try it without any keys", run as written: its two shell blocks are taken
from the README itself, so the day they stop working this test says so.

What a test must change, and only that: the ports (free ones instead of 8787 and 8081, in
the commands and in a copy of ``examples/try-it/config.toml``, so parallel tests never
meet). ``uv run --no-dev`` runs as written, in an environment of its own
(``UV_PROJECT_ENVIRONMENT``, offline: from uv's cache, which the suite's own install
filled), so it holds only what Kernel needs to run, as a newcomer's does: a runtime
dependency declared only for tests fails here. Everything else — the environment
variables, the config file's settings, the ``--say`` client and what the README says it
prints — is the README's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
from pathlib import Path

import pytest

from tests.conftest import free_port, kernel_env

pytestmark = [pytest.mark.slow, pytest.mark.posix]  # real processes, a shell's `&` and `kill`

REPO = Path(__file__).resolve().parents[1]
SECTION = "### Try it without any keys"


def try_it_blocks() -> tuple[str, str]:
    """The section's two ```sh blocks: start everything, then talk."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start = readme.index(SECTION)
    end = readme.index("\n### ", start + len(SECTION))
    blocks = re.findall(r"```sh\n(.*?)```", readme[start:end], flags=re.S)
    assert len(blocks) == 2, "the try-it section should hold two sh blocks: start, talk"
    return blocks[0], blocks[1]


def localized(block: str, ports: dict[str, str], config: Path) -> str:
    for old, new in ports.items():
        block = block.replace(old, new)
    return block.replace("KERNEL_CONFIG=examples/try-it/config.toml", f"KERNEL_CONFIG={config}")


def newcomer_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """uv on PATH (``UV`` is uv itself when the suite runs under ``uv run``), its project
    environment a fresh one of this test's, no download."""
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv, "uv is needed to run the README's commands: install it as the Quickstart says"
    path = f"{Path(uv).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    venv = str(tmp_path / "newcomer-venv")
    return kernel_env(PATH=path, UV_PROJECT_ENVIRONMENT=venv, UV_OFFLINE="1", **extra)


async def read_until(stream: asyncio.StreamReader, marker: str, limit: float) -> str:
    seen: list[str] = []

    async def scan() -> None:
        while line := await stream.readline():
            seen.append(line.decode(errors="replace"))
            if marker in seen[-1]:
                return
        raise AssertionError(f"output ended before {marker!r}:\n{''.join(seen)}")

    try:
        await asyncio.wait_for(scan(), limit)
    except TimeoutError:
        raise AssertionError(f"no {marker!r} within {limit} s:\n{''.join(seen)}") from None
    return "".join(seen)


async def test_the_readme_try_it_commands_answer_in_the_simulated_chat(tmp_path: Path) -> None:
    start, talk = try_it_blocks()
    ports = {"8787": str(free_port()), "8081": str(free_port())}
    config = tmp_path / "config.toml"
    text = (REPO / "examples" / "try-it" / "config.toml").read_text(encoding="utf-8")
    for old, new in ports.items():
        text = text.replace(old, new)
    config.write_text(text, encoding="utf-8")
    talk_lines = [line for line in talk.splitlines() if "--say" in line]
    assert len(talk_lines) == 2 and "kill %3 %2 %1" in talk

    # One shell runs the start block and waits for its jobs, as a terminal would hold them.
    shell = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        localized(start, ports, config) + "\nwait\n",
        cwd=REPO,
        env=newcomer_env(tmp_path, PYTHONUNBUFFERED="1"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        assert shell.stdout is not None
        await read_until(shell.stdout, "telegram channel started", limit=180)
        answers: list[str] = []
        for line in talk_lines:
            said = await asyncio.create_subprocess_exec(
                "bash",
                "-c",
                localized(line, ports, config),
                cwd=REPO,
                env=newcomer_env(tmp_path),
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await asyncio.wait_for(said.communicate(), 180)
            assert said.returncode == 0, out.decode()
            answers.append(out.decode())
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGTERM)
        await asyncio.wait_for(shell.wait(), 60)

    # What the README promises each line prints (its comment), and what the owner reads.
    promised = talk_lines[0].split("#", 1)[1].strip()
    assert answers[0].strip() == promised == "echo: 你好"
    status = answers[1]
    assert "claude-sonnet-5-5" in status and "#1" in status, status
    assert (tmp_path / "data" / "kernel.db").is_file()  # the config copy's own data folder
    venv = tmp_path / "newcomer-venv"
    assert not list(venv.glob("lib/python*/site-packages/pytest"))  # no dev group in it
    assert list(venv.glob("lib/python*/site-packages/telegram"))
