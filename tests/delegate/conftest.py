"""Delegation fixtures: stand-in CLIs on disk and a config.toml pointing at them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kernel.config import Config, load_config
from kernel.core.i18n import set_language
from kernel.delegate.delegator import Delegator
from tests.conftest import write_config
from tests.delegate.standins import alive, make_cli
from tests.waiting import wait_until

SHAPES = ("claude_code", "codex", "gemini", "text")


@pytest.fixture
def bin_dir(tmp_path: Path) -> dict[str, Path]:
    """One stand-in executable per CLI shape."""
    return {shape: make_cli(tmp_path / "bin", shape) for shape in SHAPES}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


ConfigFactory = Callable[..., Config]


def cli_section(name: str, **keys: Any) -> str:
    lines = [f"[cli.{name}]"] + [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture
def make_config(tmp_path: Path, workspace: Path) -> ConfigFactory:
    def factory(*sections: str) -> Config:
        path = write_config(
            tmp_path,
            "http://127.0.0.1:9",
            "claude",
            default_workspace=str(workspace),
            language="en",
        )
        path.write_text(path.read_text() + "\n" + "\n".join(sections), encoding="utf-8")
        config = load_config(path, env={}, require_telegram=False)
        set_language(config.general.language)  # as Kernel's entry points do
        return config

    return factory


def delegator_for(config: Config, **kw: Any) -> Delegator:
    return Delegator(config, **kw)


def read(path: Path | str) -> str:
    """A file's text (sync: a test's own small read)."""
    return Path(path).read_text(encoding="utf-8")


def record_of(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


async def wait_dead(*pids: int, timeout: float = 30.0) -> None:  # noqa: ASYNC109
    await wait_until(
        lambda: not any(alive(p) for p in pids), timeout=timeout, what="the processes gone"
    )


JUMP = 1000.0  # seconds the run's clock leaps once the CLI reported trouble


def leap_when_troubled(delegator: Delegator) -> Callable[[], float]:
    """A clock for ``delegator``: real time until the running CLI has printed its first
    retry or API error, then ``JUMP`` seconds later — so a time limit ends the run just
    after that warning, however slowly the loaded machine starts the CLI (no short
    timeout in the test)."""

    def clock() -> float:
        running = delegator.running
        troubled = running is not None and running.trouble is not None
        return time.monotonic() + (JUMP if troubled else 0.0)

    return clock
