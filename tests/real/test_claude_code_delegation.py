"""The real Claude Code CLI (``@anthropic-ai/claude-code`` from the npm registry)
delegated to by Kernel, pointed at the Anthropic simulator with ANTHROPIC_BASE_URL.

    scripts/install-real-clients
    KERNEL_TEST_REAL_CLIENTS=1 uv run pytest tests/real/test_claude_code_delegation.py -v
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import tests.sim.anthropic_sim as anthropic_sim
from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.events import Completed
from tests.conftest import write_config
from tests.delegate.conftest import cli_section
from tests.real import SKIP_REASON
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply, tool_reply

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("KERNEL_TEST_REAL_CLIENTS"), reason=SKIP_REASON),
]


@pytest.fixture
def claude(real_bin: Callable[[str], Path]) -> Path:
    return real_bin("claude")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def _without_system_role(validate: Any) -> Any:
    """Claude Code 2.x sends extra ``role: "system"`` messages, which the strict simulator
    rejects; the simulator checks the rest of the request as usual."""

    def relaxed(body: dict[str, Any]) -> str | None:
        messages = [m for m in body.get("messages", []) if m.get("role") != "system"]
        return validate({**body, "messages": messages})  # type: ignore[no-any-return]

    return relaxed


@pytest.fixture
async def cli_model(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[AnthropicSim]:
    monkeypatch.setattr(
        anthropic_sim, "validate_request", _without_system_role(anthropic_sim.validate_request)
    )
    async with AnthropicSim(fallback="echo") as sim:
        yield sim


@pytest.mark.timeout(900)
async def test_kernel_delegates_one_task_to_the_real_claude_code(
    claude: Path,
    cli_model: AnthropicSim,
    tmp_path: Path,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for key, value in {
        "HOME": str(home),  # Claude Code's own settings and sessions stay in the test
        "ANTHROPIC_BASE_URL": cli_model.base_url,
        "ANTHROPIC_API_KEY": "sk-test-claude-code-0123456789",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }.items():
        monkeypatch.setenv(key, value)
    async with AnthropicSim() as kernel_model:
        path = write_config(
            tmp_path,
            kernel_model.base_url,
            "claude",
            language="en",
            default_workspace=str(workspace),
        )
        path.write_text(
            path.read_text() + "\n" + cli_section("claude_code", command=str(claude)),
            encoding="utf-8",
        )
        kernel = Kernel(load_config(path, env={}, require_telegram=False))
        await kernel.start()
        try:
            kernel_model.enqueue(
                tool_reply("delegate_to_cli", {"task": "Say hello to the owner"}),
                text_reply("Claude Code said hello."),
            )
            final = await kernel.agent.start_turn("console:default", UserInput("hi")).wait()
        finally:
            await kernel.stop()

        assert isinstance(final, Completed) and final.reply == "Claude Code said hello."
        fed = kernel_model.requests[1].body["messages"][-1]["content"][0]
        result = json.loads(fed["content"])
    assert result["ok"] is True, result
    assert result["exit_code"] == 0
    assert result["output"].startswith("echo: ") and "Say hello to the owner" in result["output"]
    asked = [r for r in cli_model.requests if r.path == "/v1/messages"]
    assert asked and "Say hello to the owner" in json.dumps(asked[0].body)
    saved = Path(result["output_path"]).read_text(encoding="utf-8")  # noqa: ASYNC240
    assert '"subtype":"init"' in saved and '"type":"result"' in saved
