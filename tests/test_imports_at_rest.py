"""A resting Kernel carries only what its configuration uses (issue 37 item 1), checked
in the real service: ``python -m kernel`` in a new interpreter (never the tests' zygote,
which has imported everything once) against the Telegram and model simulators. The child
writes the names in its ``sys.modules`` to a file on SIGUSR1: once it polls Telegram (at
rest), and again after it has answered the owner once.

- The provider's SDK loads on the first call, and only the configured one's: a Claude
  Kernel never imports ``openai``, an OpenAI-compatible one never ``anthropic``.
- Without the sidecar, no ``aiohttp`` server (its client is Telegram's) and no
  ``kernel.gateway``; with it, no console or client code beyond the routes.
- Without ``[stt]``/``[tts]``, no ``kernel.voice``; never the TUI, the command-line
  client, an MCP client without servers, or ``cryptography`` (python-telegram-bot's
  optional Passport support); never Playwright, even with ``[browser]`` enabled, until
  a browser tool runs; never sqlite-vec or the embeddings client without
  ``[memory.embeddings]`` (issue 39); never croniter while no cron job is planned, at
  the first start or a later one (its stored jobs loaded); never RE2 (``re2``: its
  library and libstdc++) without routing patterns, nor after a plain exchange (slimming
  compiles its markers' patterns for the first text that may hold one)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.conftest import kernel_env, write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import SimServer
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim

pytestmark = [pytest.mark.slow, pytest.mark.posix]

# `python -m kernel`, plus: SIGUSR1 writes sys.modules' names to KERNEL_TEST_MODULES.
WRAPPER = """
import os, runpy, signal, sys
def dump(signum, frame):
    path = os.environ["KERNEL_TEST_MODULES"]
    with open(path + ".part", "w") as out:
        out.write("\\n".join(sorted(sys.modules)))
    os.replace(path + ".part", path)
signal.signal(signal.SIGUSR1, dump)
sys.argv = ["kernel"]
runpy.run_module("kernel", run_name="__main__", alter_sys=True)
"""
NEVER_AT_REST = (
    "anthropic",
    "openai",
    "edge_tts",
    "kernel.voice",
    "textual",
    "kernel.tui",
    "kernel.client",
    "kernel.backup",
    "mcp",
    "cryptography",
    "click",
    "playwright",
    "sqlite_vec",
    "kernel.memory.vectors",
    "kernel.memory.embeddings",
    "croniter",  # only a planned cron job needs it; the default job is disabled
    "dateutil",
    "mistune",  # the first reply renders Markdown
    "re2",  # routing patterns (none by default) and slimming's markers, on first need
)


class Service:
    def __init__(self, folder: Path, proc: asyncio.subprocess.Process, tg: TelegramSim) -> None:
        self.folder, self.proc, self.tg = folder, proc, tg
        self.dumps = 0

    async def modules(self) -> set[str]:
        listing = self.folder / "modules.txt"
        listing.unlink(missing_ok=True)
        os.kill(self.proc.pid, signal.SIGUSR1)
        await self.tg.wait_until(lambda: listing.exists() or self.proc.returncode is not None)
        return set(listing.read_text(encoding="utf-8").split())


def loaded(modules: set[str], package: str) -> list[str]:
    return sorted(m for m in modules if m == package or m.startswith(package + "."))


@contextlib.asynccontextmanager
async def service(tmp_path: Path, provider: str, extra: str = "", **gateway: object):  # type: ignore[no-untyped-def]
    model: SimServer = (
        AnthropicSim(fallback="echo") if provider == "claude" else OpenAISim(fallback="echo")
    )
    async with contextlib.AsyncExitStack() as stack:
        tg = await TelegramSim().start()
        stack.push_async_callback(tg.stop)
        await model.start()
        stack.push_async_callback(model.stop)
        path = write_config(tmp_path, model.base_url, provider, gateway=dict(gateway))
        with path.open("a", encoding="utf-8") as config:
            config.write(f'[telegram]\napi_base = "{tg.api_base}"\npoll_timeout = 1\n{extra}')
        env = kernel_env(
            KERNEL_TELEGRAM_TOKEN=DEFAULT_TOKEN,
            KERNEL_TELEGRAM_ALLOWED_USER=str(OWNER),
            KERNEL_TEST_MODULES=str(tmp_path / "modules.txt"),
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", WRAPPER, cwd=tmp_path, env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip

        async def stop() -> None:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), 60)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()

        stack.push_async_callback(stop)
        # At rest: the first poll answered, the second one waiting.
        await tg.wait_until(lambda: len(tg.polls) >= 2 or proc.returncode is not None, 120)
        assert proc.returncode is None, f"kernel exited with {proc.returncode}"
        yield Service(tmp_path, proc, tg)


async def answered_once(svc: Service) -> set[str]:
    svc.tg.inject_text("hello there")
    await svc.tg.wait_until(
        lambda: any("echo" in str(m.text) for m in svc.tg.chat(OWNER, from_bot=True)), 120
    )
    return await svc.modules()


async def test_a_claude_kernel_with_the_sidecar_rests_without_sdk_voice_or_clients(
    tmp_path: Path,
) -> None:
    # The browser is enabled: its tools are offered, but neither Playwright nor Chromium
    # is there until the model first uses one (issue 38).
    async with service(tmp_path, "claude", extra="[browser]\nenabled = true\n") as svc:
        resting = await svc.modules()
        assert {p: loaded(resting, p) for p in NEVER_AT_REST} == {p: [] for p in NEVER_AT_REST}
        assert "kernel.browser.tools" in resting  # registered: enabled
        assert loaded(resting, "kernel.gateway.routes")  # the sidecar is on: its routes are
        assert "aiohttp.web" in resting
        after = await answered_once(svc)
    assert loaded(after, "anthropic")  # loaded by the first call, not before
    assert loaded(after, "openai") == []
    assert loaded(after, "re2") == []  # "hello there" may hold no history marker


async def test_without_the_sidecar_no_aiohttp_server_and_no_gateway(tmp_path: Path) -> None:
    async with service(tmp_path, "claude", enabled=False) as svc:
        resting = await svc.modules()
    # aiohttp's client is the Telegram channel's (kernel/telegram/aio_request.py); its
    # server, the sidecar's, is not there.
    assert loaded(resting, "kernel.telegram.aio_request")
    assert [m for m in loaded(resting, "aiohttp") if m.startswith("aiohttp.web")] == []
    # Only the composition root's declaration of what the sidecar would get.
    assert loaded(resting, "kernel.gateway") == ["kernel.gateway", "kernel.gateway.deps"]
    assert loaded(resting, "anthropic") == []
    if sys.platform == "linux":  # the service's loop is uvloop's (a Linux dependency)
        assert "uvloop" in resting


async def test_an_openai_compatible_kernel_never_imports_anthropic(tmp_path: Path) -> None:
    async with service(tmp_path, "openai_compat", enabled=False) as svc:
        resting = await svc.modules()
        assert loaded(resting, "openai") == []
        after = await answered_once(svc)
    assert loaded(after, "openai")
    assert loaded(after, "anthropic") == []


async def test_a_second_start_loads_its_stored_cron_jobs_without_croniter(
    tmp_path: Path,
) -> None:
    """The disabled default job is stored at the first start and loaded at the next:
    loading checks its expression's shape, not croniter's parse (0.9 MiB at rest)."""
    async with service(tmp_path, "claude", enabled=False):
        pass
    async with service(tmp_path, "claude", enabled=False) as svc:
        resting = await svc.modules()
    assert loaded(resting, "kernel.cron.scheduler")
    assert loaded(resting, "croniter") == [] and loaded(resting, "dateutil") == []
