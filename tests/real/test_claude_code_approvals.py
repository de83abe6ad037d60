"""The real Claude Code asking the owner through Kernel (issue 19 point 2), end to end:
a real Kernel with ``[cli.claude_code] approvals = "telegram"``, its sidecar serving
``/mcp``, the Telegram Bot API simulator long-polled by python-telegram-bot, Kernel's
model (Anthropic simulator) calling ``delegate_to_cli``, and claude (from npm) pointed at
a second Anthropic simulator scripted to run ``Bash touch <marker>``. The owner's press
decides: Allow → the marker exists; Deny → it does not and claude was told so.

    scripts/install-real-clients
    KERNEL_TEST_REAL_CLIENTS=1 uv run pytest tests/real/test_claude_code_approvals.py -v
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kernel.gateway.routes import ROUTERS
from kernel.gateway.server import Gateway
from tests.delegate.conftest import cli_section
from tests.real import ENV, SKIP_REASON
from tests.real.test_claude_code_permissions import claude_env
from tests.real.test_claude_code_permissions import cli_model as cli_model  # the fixture
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, ToolUse, text_reply, tool_reply
from tests.sim.telegram_sim import ChatMessage
from tests.telegram.conftest import BotHarness, Factory, asking_markup
from tests.telegram.conftest import bot as bot  # the fixture

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get(ENV), reason=SKIP_REASON),
]

ALLOW_ONCE, ALLOW_TASK, DENY = 0, 1, 2  # the prompt's buttons, in order


@pytest.fixture
def claude(real_bin: Callable[[str], Path]) -> Path:
    return real_bin("claude")


@dataclass
class Scene:
    h: BotHarness
    cli_model: AnthropicSim
    work: Path

    def prompts(self) -> list[ChatMessage]:
        """The bot's messages sent with buttons (the permission prompts), in order, as
        the chat shows them now (an answered prompt loses its buttons)."""
        sent = [
            c.result["message_id"]
            for c in self.h.tg.calls_to("sendMessage")
            if c.ok and asking_markup(c.params.get("reply_markup"))
        ]
        shown = {m.message_id: m for m in self.h.bot_messages()}
        return [shown[i] for i in sent if i in shown]

    async def next_prompt(self, seen: int) -> ChatMessage:
        """Wait for the prompt after the first ``seen`` ones (still with its buttons)."""
        await self.h.tg.wait_until(lambda: len(self.prompts()) > seen)
        prompt = self.prompts()[seen]
        assert prompt.reply_markup, prompt
        return prompt

    def press(self, prompt: ChatMessage, button: int) -> None:
        assert prompt.reply_markup is not None, prompt
        choices = [b for row in prompt.reply_markup["inline_keyboard"] for b in row]
        assert len(choices) == 3, choices
        self.h.tg.inject_callback(choices[button]["callback_data"], message_id=prompt.message_id)

    def answered(self, text: str) -> bool:
        """Kernel's reply is ``text``, as its first paragraph: a delegation's outcome line
        ("✅ claude_code finished …") follows the answer in the same message."""
        return any(t.split("\n\n", 1)[0] == text for t in self.h.texts())

    def delegation_result(self) -> dict[str, Any]:
        """delegate_to_cli's result, as Kernel's model was fed it."""
        for request in self.h.model.requests:
            for message in request.body.get("messages", []):
                for block in message.get("content", []):
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        result: dict[str, Any] = json.loads(block["content"])
                        return result
        raise AssertionError("delegate_to_cli's result never reached Kernel's model")

    def claude_events(self) -> list[dict[str, Any]]:
        """The stream claude printed (Kernel keeps it in data/cli_outputs/)."""
        path = Path(self.delegation_result()["output_path"])
        lines = path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]


SceneFactory = Callable[..., Awaitable[Scene]]


@pytest.fixture
async def make_scene(
    bot: Factory,
    claude: Path,
    cli_model: AnthropicSim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[SceneFactory]:
    gateways: list[Gateway] = []

    async def make(approval_timeout: float = 600.0) -> Scene:
        # claude inherits Kernel's environment: its HOME and API are the test's.
        for key, value in claude_env(tmp_path / "home", cli_model.base_url).items():
            monkeypatch.setenv(key, value)
        work = tmp_path / "work"
        work.mkdir()
        extra = cli_section(
            "claude_code",
            command=str(claude),
            approvals="telegram",
            approval_timeout=approval_timeout,
            timeout=600.0,
        )
        h = await bot(extra=extra, default_workspace=str(work))
        gateway = Gateway(h.kernel.gateway_deps(), ROUTERS)  # the sidecar serving /mcp
        await gateway.start()
        gateways.append(gateway)
        return Scene(h, cli_model, work)

    yield make
    for gateway in gateways:
        await gateway.stop()


@pytest.fixture
async def scene(make_scene: SceneFactory) -> Scene:
    return await make_scene()


def bash(command: str) -> Reply:
    return tool_reply("Bash", {"command": command, "description": "Touch a marker"})


@pytest.mark.timeout(900)
@pytest.mark.parametrize("button", [ALLOW_ONCE, DENY], ids=["allow", "deny"])
async def test_the_owners_press_decides_whether_claudes_command_runs(
    scene: Scene, button: int
) -> None:
    marker = scene.work / "marker"
    command = f"touch {marker}"
    scene.h.model.enqueue(
        tool_reply("delegate_to_cli", {"task": "Create the marker file"}),
        text_reply("Reported."),
    )
    scene.cli_model.enqueue(bash(command), text_reply("Claude Code is done."))

    scene.h.tg.inject_text("please create the marker")
    prompt = await scene.next_prompt(0)
    assert command in prompt.text  # the command verbatim
    assert "Bash" in prompt.text
    assert not marker.exists()  # claude waits for the answer
    scene.press(prompt, button)
    await scene.h.tg.wait_until(lambda: scene.answered("Reported."))
    await scene.h.settle()

    allowed = button == ALLOW_ONCE
    assert marker.exists() is allowed
    result = scene.delegation_result()
    assert result["ok"] is True, result
    decision = "allow" if allowed else "deny"
    assert result["approvals"] == [{"tool": "Bash", "decision": decision, "by": "owner"}]
    [record] = await scene.h.kernel.approvals.recent()
    assert (record.tool, record.decision, record.decided_by) == ("Bash", decision, "owner")
    assert json.loads(record.input)["command"] == command
    # What claude's model was told about its Bash call, and claude's own summary.
    fed = scene.cli_model.requests[-1].body["messages"][-1]["content"]
    [outcome] = [b for b in fed if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert bool(outcome.get("is_error")) is not allowed
    [final] = [e for e in scene.claude_events() if e.get("type") == "result"]
    denials = [d["tool_input"]["command"] for d in final["permission_denials"]]
    assert denials == ([] if allowed else [command])
    assert len(scene.prompts()) == 1  # one prompt, one message
    assert run_folder_is_empty(scene.h)


@pytest.mark.timeout(900)
async def test_allow_for_this_task_lets_the_next_matching_command_run_unasked(
    scene: Scene,
) -> None:
    first, second, other = (scene.work / name for name in ("a", "b", "c"))
    scene.h.model.enqueue(
        tool_reply("delegate_to_cli", {"task": "Create the markers"}),
        text_reply("Reported."),
    )
    scene.cli_model.enqueue(
        bash(f"touch {first}"),
        bash(f"touch {second}"),  # the same rule (touch …): not asked again
        Reply(ToolUse("Bash", {"command": f"cp {first} {other}", "description": "Copy"})),
        text_reply("Claude Code is done."),
    )

    scene.h.tg.inject_text("please create the markers")
    scene.press(await scene.next_prompt(0), ALLOW_TASK)
    copy = await scene.next_prompt(1)  # another command: its own message
    assert f"cp {first} {other}" in copy.text
    assert second.exists() and not other.exists()
    scene.press(copy, DENY)
    await scene.h.tg.wait_until(lambda: scene.answered("Reported."))
    await scene.h.settle()

    assert first.exists() and second.exists() and not other.exists()
    assert len(scene.prompts()) == 2
    result = scene.delegation_result()
    assert result["approvals"] == [
        {"tool": "Bash", "decision": "allow", "by": "owner"},
        {"tool": "Bash", "decision": "allow", "by": "task_rule"},
        {"tool": "Bash", "decision": "deny", "by": "owner"},
    ]


def run_folder_is_empty(h: BotHarness) -> bool:
    """No mcp.json (and its token) is left once the delegation ended."""
    folder = h.kernel.config.data_dir / "run"
    return not folder.exists() or list(folder.iterdir()) == []


@pytest.mark.timeout(900)
async def test_cancel_while_claude_waits_denies_and_stops_it(scene: Scene) -> None:
    marker = scene.work / "marker"
    scene.h.model.enqueue(
        tool_reply("delegate_to_cli", {"task": "Create the marker file"}),
        text_reply("Hello again."),
    )
    scene.cli_model.enqueue(bash(f"touch {marker}"), text_reply("Claude Code is done."))

    scene.h.tg.inject_text("please create the marker")
    await scene.next_prompt(0)
    assert (await scene.h.ask("/cancel")).startswith("Cancelled")
    await scene.h.settle()

    assert not marker.exists()
    assert scene.h.kernel.delegator.running is None
    [record] = await scene.h.kernel.approvals.recent()
    assert (record.decision, record.decided_by) == ("deny", "cancelled")
    assert run_folder_is_empty(scene.h)
    assert await scene.h.converse("are you there?") == "Hello again."


@pytest.mark.timeout(900)
async def test_no_answer_in_time_denies_and_claude_goes_on(make_scene: SceneFactory) -> None:
    scene = await make_scene(approval_timeout=2.0)
    marker = scene.work / "marker"
    scene.h.model.enqueue(
        tool_reply("delegate_to_cli", {"task": "Create the marker file"}),
        text_reply("Reported."),
    )
    scene.cli_model.enqueue(bash(f"touch {marker}"), text_reply("Claude Code is done."))

    scene.h.tg.inject_text("please create the marker")
    await scene.h.tg.wait_until(lambda: scene.answered("Reported."))
    await scene.h.settle()

    assert not marker.exists()
    assert len(scene.prompts()) == 1 and not scene.prompts()[0].reply_markup  # closed
    result = scene.delegation_result()
    assert result["ok"] is True, result
    assert result["approvals"] == [{"tool": "Bash", "decision": "deny", "by": "timeout"}]
    [final] = [e for e in scene.claude_events() if e.get("type") == "result"]
    assert [d["tool_name"] for d in final["permission_denials"]] == ["Bash"]
    assert run_folder_is_empty(scene.h)
