"""Codex, unchanged, with Kernel's ``/v1/responses`` as its model provider (``wire_api =
"responses"``), each provider type behind Kernel: a multi-turn task in which the model
simulator makes Codex run a shell command, Codex sends the output back, the answer
arrives; then a second turn (``codex exec resume``) continues the conversation.

Codex runs with the config.toml the README shows, which also keeps it off the internet
(plugins, apps, analytics and update checks off); every other host it would ask is sent
to a proxy that refuses and records it (the test asserts there was none).

Opt-in: ``KERNEL_TEST_REAL_CLIENTS=1`` and ``codex`` from ``scripts/install-real-clients``
(or on PATH)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory, sidecar  # noqa: F401
from tests.real import ENV, SKIP_REASON, run_client
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Reply, Thinking, ToolUse, text_reply

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get(ENV), reason=SKIP_REASON),
]

CMD = "echo kernel-codex-$((6*7))"
RUN_LIMIT = 300.0  # a generous bound on one codex exec run, only so a hang cannot block CI

REPO = Path(__file__).resolve().parents[2]
MARKER = "<!-- Codex config: tests/real/test_codex_endpoint.py runs Codex with it -->\n```toml\n"
# The README's model; the sidecar here serves the simulators' model-a.
README_MODEL = 'model = "claude-sonnet-5-5"'


def readme_config(url: str) -> str:
    """The README's Codex config.toml, pointed at this sidecar, kept off other hosts."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    text = readme.split(MARKER, 1)[1].split("```", 1)[0]
    assert 'base_url = "http://127.0.0.1:8088/v1"' in text and README_MODEL in text
    for kept_local in ("check_for_update_on_startup = false", "plugins = false", "apps = false"):
        assert kept_local in text  # the README's config keeps Codex off other hosts
    text = text.replace(README_MODEL, 'model = "model-a"')
    return text.replace("http://127.0.0.1:8088", url)


class RefusingProxy:
    """An HTTP(S) proxy that records the first line of each request (``CONNECT
    host:443 …``) and closes: where Codex tried to go besides Kernel."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        self.asked.append(line.decode(errors="replace").strip())
        writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


@pytest.fixture
async def proxy() -> AsyncIterator[RefusingProxy]:
    server = RefusingProxy()
    yield server
    await server.stop()


@pytest.fixture(params=["anthropic", "openai"])
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[AnthropicSim | OpenAISim]:
    """Scripted replies first, then the echo of the last user text: Codex must never
    meet an empty queue."""
    sim = (
        AnthropicSim(fallback="echo")
        if request.param == "anthropic"
        else OpenAISim(fallback="echo")
    )
    await sim.start()
    yield sim
    await sim.stop()


def codex_env(sc: Sidecar, home: Path, proxy_url: str) -> dict[str, str]:
    keep = ("PATH", "LANG", "TERM", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(readme_config(sc.url))
    return env | {
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "KERNEL_API_KEY": sc.api_key,
        "HTTPS_PROXY": proxy_url,
        "HTTP_PROXY": proxy_url,
        "ALL_PROXY": proxy_url,
        "NO_PROXY": "127.0.0.1,localhost",
    }


async def run(binary: Path, args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    return await run_client(binary, args, env, cwd, RUN_LIMIT)


def requests_to(sim: AnthropicSim | OpenAISim) -> list[str]:
    return [json.dumps(r.body, ensure_ascii=False) for r in sim.requests]


async def test_codex_runs_a_shell_command_through_kernel(
    sidecar: SidecarFactory,  # noqa: F811
    backend: AnthropicSim | OpenAISim,
    proxy: RefusingProxy,
    real_bin: Callable[[str], Path],
    tmp_path: Path,
) -> None:
    binary = real_bin("codex")
    _, version = await run(binary, ["--version"], {"PATH": os.environ.get("PATH", "")}, tmp_path)
    print(f"codex --version: {version.strip()}")
    sc = await sidecar(backend, api_key=API_KEY)
    env = codex_env(sc, tmp_path / "home", await proxy.start())
    work = tmp_path / "work"
    work.mkdir()
    backend.enqueue(
        Reply(Thinking("I will run echo"), ToolUse("exec_command", {"cmd": CMD})),
        text_reply("The command printed kernel-codex-42."),
    )
    exec_args = ["exec", "--skip-git-repo-check", "-s", "workspace-write"]
    code, out = await run(binary, [*exec_args, "run the echo"], env, work)

    assert code == 0, out
    assert "The command printed kernel-codex-42." in out
    sent = requests_to(backend)
    assert len(sent) == 2, out
    assert "exec_command" in sent[0] and "run the echo" in sent[0]
    # Codex ran the command and sent its output back through Kernel to the model.
    assert "kernel-codex-42" in sent[1] and CMD in sent[1]
    if isinstance(backend, AnthropicSim):
        # The reasoning item Codex was given came back: the signed thinking reached the
        # provider again (the simulator refuses a signature it did not issue).
        [assistant] = [m for m in backend.requests[1].body["messages"] if m["role"] == "assistant"]
        assert assistant["content"][0]["type"] == "thinking"
        assert assistant["content"][0]["thinking"] == "I will run echo"

    backend.enqueue(text_reply("You are welcome, from Kernel."))
    code, out = await run(binary, [*exec_args, "resume", "--last", "thank you"], env, work)
    assert code == 0, out
    assert "You are welcome, from Kernel." in out
    sent = requests_to(backend)
    assert len(sent) == 3
    # The second turn carries the first whole: the call, its output, the answer.
    assert "kernel-codex-42" in sent[2] and "The command printed" in sent[2]
    assert "thank you" in sent[2]
    assert proxy.asked == []  # Codex asked no host but Kernel
