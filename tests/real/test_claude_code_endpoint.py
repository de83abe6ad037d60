"""Claude Code and the official anthropic SDK, unchanged and with default settings,
against Kernel's ``/v1/messages`` (a Claude provider backed by the Anthropic simulator).

Opt-in: ``KERNEL_TEST_REAL_CLIENTS=1`` and ``claude`` from ``scripts/install-real-clients``
(or on PATH). Each test prints the Claude Code version it ran."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anthropic
import pytest

from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory, sidecar  # noqa: F401
from tests.real import run_client
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import text_reply, tool_reply

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("KERNEL_TEST_REAL_CLIENTS"),
        reason="real-client suite: set KERNEL_TEST_REAL_CLIENTS=1 (clients from "
        "scripts/install-real-clients)",
    ),
]


@pytest.fixture
async def echo_sim() -> AsyncIterator[AnthropicSim]:
    """Scripted replies first, then the echo of the last user text: Claude Code may
    retry or ask more than a test scripts, and must never meet an empty queue."""
    sim = AnthropicSim(fallback="echo")
    await sim.start()
    yield sim
    await sim.stop()


RUN_LIMIT = 180.0  # a generous bound on one claude -p run, only so a hang cannot block CI


def claude_env(sc: Sidecar, home: Path) -> dict[str, str]:
    """Claude Code as a new user runs it, pointed at the sidecar and never the internet."""
    keep = ("PATH", "LANG", "TERM", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    return env | {
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": sc.url,
        "ANTHROPIC_API_KEY": sc.api_key or "any",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


async def run(binary: Path, args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    return await run_client(binary, args, env, cwd, RUN_LIMIT)


async def claude_version(binary: Path, tmp_path: Path) -> str:
    _, out = await run(binary, ["--version"], {"PATH": os.environ.get("PATH", "")}, tmp_path)
    print(f"claude --version: {out.strip()}")
    return out.strip()


async def test_claude_p_hi_with_default_settings(
    sidecar: SidecarFactory,  # noqa: F811
    echo_sim: AnthropicSim,
    real_bin: Callable[[str], Path],
    tmp_path: Path,
) -> None:
    binary = real_bin("claude")
    await claude_version(binary, tmp_path)
    sc = await sidecar(echo_sim, api_key=API_KEY)
    echo_sim.enqueue(text_reply("Hello from Kernel's backend"))
    home = tmp_path / "home"
    home.mkdir()
    code, out = await run(binary, ["-p", "hi"], claude_env(sc, home), tmp_path)
    assert code == 0, out
    assert "Hello from Kernel's backend" in out
    # What Claude Code really sent reached the backend through Kernel: its system-role
    # message merged into the system prompt, no role "system" left in messages.
    sent = echo_sim.requests[-1].body
    assert all(m["role"] in ("user", "assistant") for m in sent["messages"])
    assert "hi" in json.dumps(sent["messages"])

    code, out = await run(
        binary,
        ["-p", "hi", "--output-format", "stream-json", "--verbose"],
        claude_env(sc, home),
        tmp_path,
    )
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    result = [e for e in events if e.get("type") == "result"]
    assert code == 0 and result and result[-1]["is_error"] is False, out
    # Nothing scripted: the simulator echoes the prompt (after Claude Code's reminders).
    assert result[-1]["result"].rstrip().endswith("hi")
    assert result[-1]["usage"]["output_tokens"] > 0


async def test_claude_p_tool_round_trip(
    sidecar: SidecarFactory,  # noqa: F811
    echo_sim: AnthropicSim,
    real_bin: Callable[[str], Path],
    tmp_path: Path,
) -> None:
    binary = real_bin("claude")
    await claude_version(binary, tmp_path)
    sc = await sidecar(echo_sim)
    work = tmp_path / "work"
    work.mkdir()
    (work / "note.txt").write_text("the secret word is kumquat\n")
    echo_sim.enqueue(
        tool_reply("Read", {"file_path": str(work / "note.txt")}),
        text_reply("The file says kumquat."),
    )
    home = tmp_path / "home"
    home.mkdir()
    code, out = await run(
        binary, ["-p", "read note.txt", "--allowedTools", "Read"], claude_env(sc, home), work
    )
    assert code == 0, out
    assert "kumquat" in out
    # The tool ran in Claude Code and its result came back through Kernel to the model.
    last = json.dumps(echo_sim.requests[-1].body["messages"])
    assert "tool_result" in last and "the secret word is kumquat" in last


async def test_claude_p_hi_with_an_openai_compatible_backend(
    sidecar: SidecarFactory,  # noqa: F811
    real_bin: Callable[[str], Path],
    tmp_path: Path,
) -> None:
    """Claude Code's adaptive thinking on a backend without reasoning: answered without
    thinking, not refused (the model may always choose not to think)."""
    binary = real_bin("claude")
    await claude_version(binary, tmp_path)
    backend = OpenAISim(fallback="echo")
    await backend.start()
    try:
        sc = await sidecar(backend)
        backend.enqueue(text_reply("Hello through chat completions"))
        home = tmp_path / "home"
        home.mkdir()
        code, out = await run(binary, ["-p", "hi"], claude_env(sc, home), tmp_path)
    finally:
        await backend.stop()
    assert code == 0, out
    assert "Hello through chat completions" in out
    sent = backend.requests[-1].body
    assert sent["messages"][0]["role"] == "system" and "reasoning_effort" not in sent


async def test_sdk_models_list_and_messages(
    sidecar: SidecarFactory,  # noqa: F811
    echo_sim: AnthropicSim,
) -> None:
    print(f"anthropic SDK {anthropic.__version__}")
    sc = await sidecar(echo_sim, api_key=API_KEY)
    async with anthropic.AsyncAnthropic(api_key=API_KEY, base_url=sc.url, max_retries=0) as client:
        ids = [m.id async for m in client.models.list()]
        assert ids == ["model-a", "model-b"]
        echo_sim.enqueue(text_reply("ok"))
        message = await client.messages.create(
            model="claude-opus-4-8",
            max_tokens=100,
            messages=[{"role": "user", "content": "hi"}, {"role": "system", "content": "terse"}],  # type: ignore[misc,list-item]
        )
        assert message.content[0].text == "ok"  # type: ignore[union-attr]
