"""The suite's own machinery: a Kernel forked from the worker's zygote is what a new
``python -m kernel`` would be, as far as a test can see (tests/zygote.py), and the order
the tests are handed to xdist's workers in (tests/conftest.py ``_dealt``)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from mcp.client.stdio import get_default_environment

from tests import conftest
from tests.conftest import KernelProcess, _dealt, kernel_env, spawn_kernel, write_config
from tests.delegate.conftest import wait_dead
from tests.delegate.standins import alive
from tests.gateway.test_service import started
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim
from tests.zygote import Forked, python_script


async def ran(process: KernelProcess, data: bytes | None = None) -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(process.communicate(data), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.slow  # Kernel processes
@pytest.mark.posix  # fork
@pytest.mark.parametrize(
    ("args", "env"),
    [
        (("--version",), {}),
        (("no-such-verb",), {}),  # argparse: exit 2, the usage on stderr
        (("check",), {"KERNEL_LANGUAGE": "en"}),  # no configuration here: says where to put one
        (("check",), {"KERNEL_LANGUAGE": "zh"}),  # the environment is the start's own
        (("audit", "verify"), {"KERNEL_CONFIG": "missing.toml", "TZ": "America/New_York"}),
    ],
)
async def test_a_forked_start_says_and_exits_as_a_fresh_one(
    args: tuple[str, ...], env: dict[str, str], tmp_path: Path
) -> None:
    forked = await spawn_kernel(*args, cwd=tmp_path, env=kernel_env(**env))
    assert isinstance(forked, Forked)
    fresh = await spawn_kernel(*args, cwd=tmp_path, env=kernel_env(**env), fresh=True)
    assert not isinstance(fresh, Forked)
    assert await ran(forked) == await ran(fresh)


@pytest.mark.slow
@pytest.mark.posix  # fork, signals
async def test_a_forked_service_dies_by_its_pid_and_says_how(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    tg = await TelegramSim().start()
    path = write_config(tmp_path, anthropic_sim.base_url, "claude")
    path.write_text(path.read_text() + f'[telegram]\napi_base = "{tg.api_base}"\n')
    env = kernel_env(KERNEL_TELEGRAM_TOKEN=DEFAULT_TOKEN, KERNEL_TELEGRAM_ALLOWED_USER=str(OWNER))
    service = await spawn_kernel(cwd=tmp_path, env=env)
    try:
        assert isinstance(service, Forked)
        await started(service)  # it runs: the sidecar listens
        service.send_signal(signal.SIGKILL)
        assert await asyncio.wait_for(service.wait(), timeout=60) == -signal.SIGKILL
    finally:
        service.kill()
        await tg.stop()


class Item:
    """What ``_dealt`` reads of a test item: its markers."""

    def __init__(self, name: str, marker: str | None = None) -> None:
        self.name, self.marker = name, marker

    def get_closest_marker(self, name: str) -> object:
        return self if name == self.marker else None

    def __repr__(self) -> str:
        return self.name


def batches(order: list[Item], workers: int) -> list[list[Item]]:
    """How xdist's worksteal hands ``order`` out to ``workers`` idle workers at once."""
    pending, handed = list(order), []
    for remaining in range(workers, 0, -1):
        size = len(pending) // remaining
        handed.append(pending[:size])
        del pending[:size]
    return handed


def test_long_and_slow_tests_open_different_workers_batches() -> None:
    items = [Item(f"t{i}") for i in range(100)]
    items[40].marker = items[90].marker = "long"
    for index in (3, 5, 7, 50, 51, 52, 53, 95):
        items[index].marker = "slow"
    order = _dealt(items, 4)  # type: ignore[arg-type]
    assert sorted(order, key=lambda item: item.name) == sorted(items, key=lambda i: i.name)
    handed = batches(order, 4)
    assert [batch[0].name for batch in handed] == ["t40", "t90", "t3", "t5"]
    heavy = [[item.marker for item in batch if item.marker] for batch in handed]
    assert heavy == [["long"], ["long"], ["slow"] * 4, ["slow"] * 4]  # a long one alone
    for batch, marks in zip(handed, heavy, strict=True):
        assert [item.marker for item in batch[: len(marks)]] == marks  # heavy ones first
    rest = [item.name for item in order if item.marker is None]
    assert rest == [item.name for item in items if item.marker is None]  # in their order
    ranked = sorted(items, key=lambda item: {"long": 0, "slow": 1}.get(item.marker or "", 2))
    assert _dealt(items, 0) == ranked  # type: ignore[arg-type]


@pytest.mark.slow
@pytest.mark.posix  # fork
async def test_a_garbled_or_silent_caller_does_not_end_the_zygote(tmp_path: Path) -> None:
    zygote = conftest._zygote
    if not zygote.can_fork(kernel_env()):
        pytest.skip("no zygote in this run")
    garbled = await zygote._connect()
    garbled.sendall(b"not a request\n")
    garbled.close()
    silent = await zygote._connect()  # says nothing, then goes
    silent.close()
    forked = await spawn_kernel("--version", cwd=tmp_path, env=kernel_env())
    assert isinstance(forked, Forked)
    code, out, _ = await ran(forked)
    assert code == 0 and out.startswith("kernel ")


@pytest.mark.slow
@pytest.mark.posix  # fork
async def test_a_test_mcp_server_is_forked_from_the_zygote(tmp_path: Path) -> None:
    """As Kernel starts a test MCP server (the MCP SDK's few variables, in a test that
    stripped KERNEL_*), the server is the zygote's child, not a fresh interpreter."""
    zygote = conftest._zygote
    if not zygote.can_fork(kernel_env()):
        pytest.skip("no zygote in this run")
    (await zygote._connect()).close()  # listening
    script = tmp_path / "parent.py"
    script.write_text("import os\nprint(os.getppid())\n")
    command, args = python_script(script)
    process = await asyncio.create_subprocess_exec(
        command, *args, env=get_default_environment(), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    assert process.returncode == 0
    assert int(out) == int(zygote.address.split(":", 1)[0])


@pytest.mark.slow
@pytest.mark.posix  # fork, process groups
async def test_a_launched_script_ends_with_its_launcher_and_its_sigkill_comes_back(
    tmp_path: Path,
) -> None:
    """A script forked through tests/mcp/launch.py is not in the launcher's process group
    (a Delegator's kill of it cannot reach it): its lifeline ends it when the launcher is
    killed with SIGKILL; and a SIGKILL of the script ends the launcher by SIGKILL too."""
    zygote = conftest._zygote
    if not zygote.can_fork(kernel_env()):
        pytest.skip("no zygote in this run")
    (await zygote._connect()).close()  # listening
    script = tmp_path / "wait.py"
    script.write_text("import os, sys, time\nprint(os.getpid(), flush=True)\ntime.sleep(600)\n")
    for victim in ("launcher", "script"):
        command, args = python_script(script)
        launcher = await asyncio.create_subprocess_exec(
            command, *args, stdout=asyncio.subprocess.PIPE, start_new_session=True
        )
        assert launcher.stdout is not None
        pid = int(await asyncio.wait_for(launcher.stdout.readline(), timeout=60))
        assert pid != launcher.pid and alive(pid)
        if victim == "launcher":
            os.killpg(launcher.pid, signal.SIGKILL)  # as Kernel ends a coding CLI's group
        else:
            os.kill(pid, signal.SIGKILL)
        assert await asyncio.wait_for(launcher.wait(), timeout=60) == -signal.SIGKILL
        await wait_dead(pid)
