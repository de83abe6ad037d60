"""Shared fixtures: an isolated environment, the model simulators, and a real Kernel
(config file, SQLite on disk) wired to them; Hypothesis's profile."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import getpass
import itertools
import os
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.i18n import set_language
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.zygote import Forked, Zygote, ZygoteGone

SECRET_KEY = "sk-test-SECRET-0123456789abcdef"

# Property tests run the same examples on every run and every machine (derandomized, no
# example database in the checkout), with no timing checks that a busy machine would fail.
# HYPOTHESIS_PROFILE=explore draws new examples each run, to hunt for bugs locally.
_NO_TIMING = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("kernel", derandomize=True, database=None, **_NO_TIMING)
settings.register_profile("explore", database=None, **_NO_TIMING)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "kernel"))

# Hypothesis's caches go to one folder in the temporary directory, not into the checkout,
# where another worker may be copying the tree (tests/test_deploy.py). It is kept from run
# to run and shared by the xdist workers: the constants Hypothesis reads from every module
# at collection (2 s of CPU a worker) are then read once (its files are written whole,
# under their source's hash). The example database is off (the profile above).
# A folder there that is not this user's own (another user made it first) is not used.
_private_home = tempfile.TemporaryDirectory(prefix="kernel-tests-hypothesis-")


def _hypothesis_home() -> str:
    try:
        user = str(os.getuid()) if hasattr(os, "getuid") else getpass.getuser()
        home = Path(tempfile.gettempdir()) / f"kernel-tests-hypothesis-{user}"
        home.mkdir(mode=0o700, exist_ok=True)
        if home.is_symlink() or (hasattr(os, "getuid") and home.stat().st_uid != os.getuid()):
            return _private_home.name
    except Exception:  # no user to name it by (getpass tried every way), or no folder
        return _private_home.name
    return str(home)


set_hypothesis_home_dir(_hypothesis_home())


WORKERS_PER_CPU = 4


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: four workers per CPU, since most tests wait (on sockets, child
    processes, simulators' delays, outages the tests stage), not compute. On the two-core
    machine 8 workers ran the suite in 276 s with 445 s of CPU, 10 in 275 s with 484 s (a
    worker costs ~6 s of CPU to collect). PYTEST_XDIST_AUTO_NUM_WORKERS
    overrides (xdist's own hook reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return WORKERS_PER_CPU * (cpus or 1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``long`` (the soak's shards: minutes each) and ``slow`` (seconds each,
    most of them a real Kernel process) are spread over the workers' first batches, each
    batch opening with its share of them; the rest fill the batches in their order. On
    Windows, a test marked ``posix`` is skipped with the reason (issue 22)."""
    workers = int(getattr(config, "workerinput", {}).get("workercount", 0))
    items[:] = _dealt(items, workers)
    if os.name != "nt":
        return
    skip = pytest.mark.skip(reason="needs POSIX (the posix marker): not run on Windows")
    for item in items:
        if item.get_closest_marker("posix") is not None:
            item.add_marker(skip)


def _dealt(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """The order xdist's ``worksteal`` hands out well: it gives each of ``workers`` a
    contiguous batch at once (the first ``len // workers`` items, then a share of what is
    left, and so on), and an idle worker later steals the back half of a busy one's
    queue. So the long tests are dealt round the batches first, one each, then the slow
    ones round the batches without a long one, and the short ones fill each batch to its
    size: no worker gets two long ones or a long one and slow ones (they would run one
    after the other, the suite's critical path), and what is stolen at the end is
    short. Without workers: long, slow, then the rest."""

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("long") is not None:
            return 0
        return 1 if item.get_closest_marker("slow") is not None else 2

    ordered = sorted(items, key=rank)  # stable
    if workers < 2:
        return ordered
    sizes, left = [], len(ordered)
    for remaining in range(workers, 0, -1):
        sizes.append(left // remaining)
        left -= sizes[-1]
    batches: list[list[pytest.Item]] = [[] for _ in sizes]
    long = [item for item in ordered if rank(item) == 0]
    slow = [item for item in ordered if rank(item) == 1]
    rest = iter(item for item in ordered if rank(item) == 2)
    for index, item in enumerate(long):
        batches[index % workers].append(item)
    # A batch that opens with a long test gets no slow one after it: what follows the
    # long test there is short, and stolen by the other workers as they run out.
    free = [batch for batch in batches if not batch] or batches
    for index, item in enumerate(slow):
        free[index % len(free)].append(item)
    for batch, size in zip(batches, sizes, strict=True):
        batch.extend(itertools.islice(rest, max(0, size - len(batch))))
    batches[-1].extend(rest)  # (only if the heavy ones overfilled a batch)
    return [item for batch in batches for item in batch]


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[None]:
    """Collection imports every test module and what it imports (the SDKs' thousands of
    pydantic models): the cyclic garbage collector, which would walk that growing heap
    again and again meanwhile, is off until it ends (1 s of CPU less a worker), and what
    it built is then frozen, so that the collections during the tests walk only what the
    tests make (as the zygote does with what Kernel imports)."""
    gc.disable()
    try:
        return (yield)
    finally:
        gc.freeze()
        gc.enable()


def pytest_configure(config: pytest.Config) -> None:
    """The process that runs the session (xdist's controller, or ``-n 0``'s only one)
    starts the run's zygote, which every worker forks Kernel processes from."""
    if not hasattr(config, "workerinput") and not config.option.collectonly:
        _zygote.start(kernel_env())


def pytest_unconfigure(config: pytest.Config) -> None:
    _private_home.cleanup()
    _shadows.cleanup()
    _zygote.close()


def kernel_env(**extra: str) -> dict[str, str]:
    """The environment for a Kernel child process: no KERNEL_* from the shell, plus extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNEL_")}
    return env | extra


KernelProcess = asyncio.subprocess.Process | Forked
_zygote = Zygote()


async def spawn_kernel(
    *args: str, cwd: Path, env: dict[str, str], stdin: bool = False, fresh: bool = False
) -> KernelProcess:
    """``python -m kernel ARGS`` as the owner (or systemd) runs it: forked from this
    worker's zygote, which has imported Kernel once (tests/zygote.py), or with ``fresh``
    (or where a fork cannot stand in) a new interpreter."""
    if not fresh and _zygote.can_fork(env):
        with contextlib.suppress(ZygoteGone):
            return await _zygote.spawn(args, cwd=cwd, env=env, stdin=stdin)
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kernel",
        *args,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


REAL_CLIENTS = ("claude", "codex", "gemini")  # a test uses its stand-in, never these
_shadows = tempfile.TemporaryDirectory(prefix="kernel-tests-path-")


@functools.cache
def path_without_real_clients(path: str) -> str:
    """``path`` with every folder holding a real ``claude``, ``codex`` or ``gemini``
    replaced by a folder of links to everything else in it (node, git, … stay found)."""
    folders = []
    for index, entry in enumerate(path.split(os.pathsep)):
        folder = Path(entry)
        if not any((folder / name).exists() for name in REAL_CLIENTS):
            folders.append(entry)
            continue
        shadow = Path(_shadows.name) / str(index)
        shadow.mkdir(exist_ok=True)
        for item in folder.iterdir():
            if item.name not in REAL_CLIENTS and not (shadow / item.name).exists():
                (shadow / item.name).symlink_to(item)
        folders.append(str(shadow))
    return os.pathsep.join(folders)


@pytest.fixture(autouse=True)
def isolated_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Path:
    """No KERNEL_* variable from the developer's shell; cwd is a fresh folder; no real
    Claude Code, Codex or Gemini CLI on PATH (but in tests/real, which drive them)."""
    for name in list(os.environ):
        if name.startswith("KERNEL_"):
            monkeypatch.delenv(name)
    if Path(__file__).parent / "real" not in request.node.path.parents:
        monkeypatch.setenv("PATH", path_without_real_clients(os.environ.get("PATH", "")))
    monkeypatch.chdir(tmp_path)
    return tmp_path


_held_ports: list[socket.socket] = []


def free_port() -> int:
    """A loopback port that stays this test's until it ends, for a server the test starts
    (and restarts) itself or for "nothing listens here": a bound socket that never listens
    holds it, so connections are refused and no other test process (xdist worker) can
    take it, while a server of this test binds it too (SO_REUSEADDR on both)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    _held_ports.append(sock)
    return int(sock.getsockname()[1])


@pytest.fixture(autouse=True)
def _default_language() -> Iterator[None]:
    """Every test starts in the catalogue's default language: a config with
    ``language = "en"`` set it for the process, and prompts follow it."""
    set_language("zh")
    yield
    set_language("zh")


@pytest.fixture(autouse=True)
def _release_free_ports() -> Iterator[None]:
    yield
    while _held_ports:
        _held_ports.pop().close()


@pytest.fixture
async def anthropic_sim() -> AsyncIterator[AnthropicSim]:
    sim = AnthropicSim()
    await sim.start()
    yield sim
    await sim.stop()


@pytest.fixture
async def openai_sim() -> AsyncIterator[OpenAISim]:
    sim = OpenAISim()
    await sim.start()
    yield sim
    await sim.stop()


def toml_value(value: Any) -> str:
    return repr(value).replace("'", '"') if not isinstance(value, bool) else str(value).lower()


def write_config(
    folder: Path,
    base_url: str,
    provider_type: str,
    *,
    gateway: dict[str, Any] | None = None,
    backup: dict[str, Any] | None = None,
    **general: Any,
) -> Path:
    """A config.toml with one provider (named ``main``) pointing at a simulator. The
    sidecar gets any free port (``gateway`` adds or overrides its keys), so a test never
    collides with a Kernel running on 8088."""
    # No preset personas unless a test asks (preset_personas=True): most tests count
    # the personas they write themselves.
    general = {"timezone": "Asia/Shanghai", "preset_personas": False, **general}
    lines = ["[general]", 'default_provider = "main"']
    lines += [f"{k} = {toml_value(v)}" for k, v in general.items()]
    lines += [
        "[gateway]",
        *(f"{k} = {toml_value(v)}" for k, v in {"port": 0, **(gateway or {})}.items()),
    ]
    # The daily backup (issue 40) is on by default; a test Kernel takes none unless asked.
    lines += [
        "[backup]",
        *(f"{k} = {toml_value(v)}" for k, v in {"enabled": False, **(backup or {})}.items()),
    ]
    lines += [
        "[providers.main]",
        f'type = "{provider_type}"',
        f'api_base = "{base_url}"',
        f'api_key = "{SECRET_KEY}"',
        "max_tokens = 1024",
        'default_model = "model-a"',
        'models = ["model-a", "model-b"]',
        "retry_base_delay = 0.01",
        "max_retries = 2",
        "timeout = 10.0",
    ]
    path = folder / "config.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


KernelFactory = Callable[..., Awaitable[Kernel]]


@pytest.fixture
async def make_kernel(tmp_path: Path) -> AsyncIterator[KernelFactory]:
    started: list[Kernel] = []

    async def factory(sim: AnthropicSim | OpenAISim, **general: Any) -> Kernel:
        sleep = general.pop("sleep", asyncio.sleep)
        extra = general.pop("extra", "")  # further tables, appended to config.toml
        kind = "claude" if isinstance(sim, AnthropicSim) else "openai_compat"
        path = write_config(tmp_path, sim.base_url, kind, **general)
        path.write_text(path.read_text(encoding="utf-8") + extra, encoding="utf-8")
        config = load_config(path, env={}, require_telegram=False)
        kernel = Kernel(config, sleep=sleep)
        await kernel.start()
        started.append(kernel)
        return kernel

    yield factory
    for kernel in started:
        await kernel.stop()


@pytest.fixture(params=["anthropic", "openai"])
async def sim(request: pytest.FixtureRequest) -> AsyncIterator[AnthropicSim | OpenAISim]:
    """Each test using this runs once against each provider type."""
    server: AnthropicSim | OpenAISim = (
        AnthropicSim() if request.param == "anthropic" else OpenAISim()
    )
    await server.start()
    yield server
    await server.stop()
