"""Claude Code's permission prompts answered in Telegram (issue 19 point 2).

The whole flow on real parts: the model simulator scripts ``delegate_to_cli``; the
Delegator starts the stand-in Claude Code (``tests/delegate/claude_permission.py``) with
``--mcp-config`` and ``--permission-prompt-tool mcp__kernel__approve``; the stand-in
calls ``approve`` on the sidecar's ``/mcp`` with the mcp SDK's client; the owner's
prompt arrives in the Telegram simulator as one message with three buttons; a press
(an injected callback query, through real python-telegram-bot) decides whether the
stand-in "runs" the call (a line in ``ran``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from kernel.config.sidecar_key import sidecar_key
from kernel.core.events import AskUser
from kernel.gateway.server import Gateway
from kernel.telegram.asks import NOTE_ROOM, question_body
from kernel.telegram.render import html_to_plain
from kernel.telegram.split import utf16_len
from tests.delegate.claude_permission import make_permission_cli
from tests.delegate.conftest import cli_section, wait_dead
from tests.delegate.standins import alive
from tests.sim.script import text_reply, tool_reply
from tests.sim.telegram_sim import OWNER, ChatMessage
from tests.telegram.conftest import CONV, BotHarness, Factory

pytestmark = pytest.mark.posix  # stand-in CLIs: #!python scripts made executable

INTERVAL = 0.2
ALLOW_ONCE, ALLOW_TASK, DENY = 0, 1, 2


def buttons(message: ChatMessage) -> list[str]:
    """A live prompt's callback data, in order (the simulator's message changes on edits)."""
    assert message.reply_markup is not None
    return [b["callback_data"] for row in message.reply_markup["inline_keyboard"] for b in row]


def exists(path: Path) -> bool:
    return path.exists()


def bash(command: str) -> dict[str, Any]:
    return {"name": "Bash", "input": {"command": command, "description": f"Run {command}"}}


@dataclass
class Run:
    h: BotHarness
    folder: Path

    @property
    def ran(self) -> list[dict[str, Any]]:
        """The calls the stand-in ran (allowed), in order."""
        path = self.folder / "ran.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def prompts(self) -> list[ChatMessage]:
        """The bot's permission prompts (live or closed), in order."""
        return [m for m in self.h.bot_messages() if "asks to use" in m.text]

    def live(self) -> list[ChatMessage]:
        return [m for m in self.prompts() if m.reply_markup]

    async def prompt(self, count: int = 1) -> ChatMessage:
        """Wait until ``count`` prompts are live; the newest."""
        await self.h.tg.wait_until(lambda: len(self.live()) >= count)
        return self.live()[-1]

    def press(self, message: ChatMessage, choice: int) -> None:
        self.h.tg.inject_callback(buttons(message)[choice], message_id=message.message_id)

    def shown(self, message: ChatMessage) -> ChatMessage:
        now = self.h.tg.message(OWNER, message.message_id)
        assert now is not None
        return now

    def fed_back(self) -> dict[str, Any]:
        """delegate_to_cli's result as the model got it."""
        blocks = self.h.model.requests[1].body["messages"][-1]["content"]
        [result] = [b for b in blocks if b["type"] == "tool_result"]
        return dict(json.loads(result["content"]))


RunFactory = Any


@pytest.fixture
async def run(
    bot: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[RunFactory]:
    gateways: list[Gateway] = []

    async def start(calls: list[dict[str, Any]], *, seconds: float = 60.0, **env: str) -> Run:
        command = make_permission_cli(tmp_path / "bin")
        monkeypatch.setenv("STANDIN_CALLS", json.dumps(calls))
        monkeypatch.setenv("STANDIN_RAN", str(tmp_path / "ran.jsonl"))
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        extra = f"progress_interval = {INTERVAL}\n" + cli_section(
            "claude_code", command=str(command), approvals="telegram", approval_timeout=seconds
        )
        h = await bot(extra=extra)
        gateway = Gateway(h.kernel.gateway_deps(), h.kernel.plugins.routers())
        await gateway.start()  # the sidecar, serving /mcp
        gateways.append(gateway)
        return Run(h, tmp_path)

    yield start
    for gateway in gateways:
        await gateway.stop()


def delegate(h: BotHarness, task: str, reply: str) -> None:
    h.model.enqueue(tool_reply("delegate_to_cli", {"task": task}), text_reply(reply))


def answer(r: Run) -> str:
    """The model's answer, without the line of what ran that is folded into it (the
    delegation's outcome: issue 34)."""
    reply, _, ran = r.h.texts()[-1].partition("\n\n")
    assert ran.startswith(("✅", "❌", "⏱", "⏹", "⚠️")), ran
    return reply


async def test_allow_once_runs_the_command_and_the_reply_follows(run: RunFactory) -> None:
    r: Run = await run([bash("git status")])
    delegate(r.h, "check the repo", "The tree is clean.")
    r.h.tg.inject_text("is my repo clean?")

    asked = await r.prompt()
    # One message: the tool, the command verbatim in a code block, the rule, 3 buttons.
    sent = [c for c in r.h.tg.calls_to("sendMessage") if "asks to use" in str(c.params["text"])]
    assert len(sent) == 1 and sent[0].params["parse_mode"] == "HTML"
    assert '<pre><code class="language-sh">git status</code></pre>' in str(sent[0].params["text"])
    assert "Bash(git status:*)" in asked.text
    labels = [b["text"] for row in asked.reply_markup["inline_keyboard"] for b in row]  # type: ignore[index]
    assert labels == ["Allow once", "Allow for this task", "Deny"]
    assert r.ran == []  # the CLI waits
    # The progress message says what the CLI waits for.
    await r.h.tg.wait_until(
        lambda: any(
            "Waiting for your approval (1 open)" in str(c.params["text"])
            for c in r.h.tg.calls_to("editMessageText")
        )
    )

    r.press(asked, ALLOW_ONCE)
    await r.h.settle()

    assert r.ran == [bash("git status")]
    closed = r.shown(asked)
    assert closed.reply_markup is None and closed.text.endswith("✅ Allowed once")
    assert closed.parse_mode == "HTML"  # the code block survived the closing edit
    assert answer(r) == "The tree is clean."
    result = r.fed_back()
    assert result["approvals"] == [{"tool": "Bash", "decision": "allow", "by": "owner"}]
    assert "1 of 1 tool calls ran" in result["output"]
    [record] = await r.h.kernel.approvals.recent()
    assert (record.tool, record.decision, record.decided_by) == ("Bash", "allow", "owner")
    assert record.conversation == CONV and json.loads(record.input)["command"] == "git status"
    failed = [c for c in r.h.tg.calls if c.method != "getUpdates" and not c.ok]
    assert failed == []  # every HTML message and edit was accepted


async def test_deny_runs_nothing_and_the_model_hears_why(run: RunFactory) -> None:
    r: Run = await run([bash("rm -rf build")])
    delegate(r.h, "clean up", "I did not clean up: you said no.")
    r.h.tg.inject_text("clean up my build")

    asked = await r.prompt()
    r.press(asked, DENY)
    await r.h.settle()

    assert r.ran == []
    assert r.shown(asked).text.endswith("⛔ Denied")
    assert r.shown(asked).reply_markup is None
    result = r.fed_back()
    assert result["approvals"] == [{"tool": "Bash", "decision": "deny", "by": "owner"}]
    assert "0 of 1 tool calls ran" in result["output"]
    assert answer(r) == "I did not clean up: you said no."
    [record] = await r.h.kernel.approvals.recent()
    assert (record.decision, record.decided_by) == ("deny", "owner")


async def test_allow_for_this_task_skips_the_same_pattern_but_asks_a_new_one(
    run: RunFactory,
) -> None:
    edit = {
        "name": "Edit",
        "input": {"file_path": "/w/app.py", "old_string": "a = 1\n", "new_string": "a = 2\n"},
    }
    calls = [bash("git status"), bash("git status --short"), edit]
    r: Run = await run(calls)
    delegate(r.h, "tidy", "Tidied.")
    r.h.tg.inject_text("tidy the repo")

    first = await r.prompt()
    assert "git status" in first.text
    r.press(first, ALLOW_TASK)
    await r.h.tg.wait_until(lambda: len(r.prompts()) == 2 and len(r.live()) == 1)
    second = r.live()[0]
    assert "Edit" in second.text and "/w/app.py" in second.text
    assert "-a = 1\n+a = 2" in second.text  # the edit as a diff
    r.press(second, ALLOW_ONCE)
    await r.h.settle()

    assert [c["input"] for c in r.ran] == [c["input"] for c in calls]
    assert len(r.prompts()) == 2  # "git status --short" was never asked
    assert r.shown(first).text.endswith("✅ Allowed for this task")
    records = list(reversed(await r.h.kernel.approvals.recent()))
    assert [(x.tool, x.decided_by, x.rule) for x in records] == [
        ("Bash", "owner", "Bash(git status:*)"),
        ("Bash", "task_rule", "Bash(git status:*)"),
        ("Edit", "owner", ""),
    ]
    assert r.fed_back()["approvals"][1] == {"tool": "Bash", "decision": "allow", "by": "task_rule"}
    failed = [c for c in r.h.tg.calls if c.method != "getUpdates" and not c.ok]
    assert failed == []


async def test_two_prompts_at_once_get_a_message_each_and_each_press_counts(
    run: RunFactory,
) -> None:
    # Claude Code 2.1.332 asks one at a time, but prompts can still be open together
    # (an owner's own MCP client beside a run, a later release): none may be dropped.
    r: Run = await run([bash("make test"), bash("make lint")], STANDIN_PARALLEL="1")
    delegate(r.h, "check", "Tests ran; lint was skipped.")
    r.h.tg.inject_text("check everything")

    await r.prompt(2)
    tests, lint = sorted(r.live(), key=lambda m: "make lint" in m.text)
    assert "make test" in tests.text and "make lint" in lint.text
    await r.h.tg.wait_until(
        lambda: any(
            "Waiting for your approval (2 open)" in str(c.params["text"])
            for c in r.h.tg.calls_to("editMessageText")
        )
    )
    r.press(lint, DENY)  # the later one first
    await r.h.tg.wait_until(lambda: r.shown(lint).reply_markup is None)
    assert r.shown(tests).reply_markup is not None  # still waiting
    r.press(tests, ALLOW_ONCE)
    await r.h.settle()

    assert [c["input"]["command"] for c in r.ran] == ["make test"]
    assert r.shown(tests).text.endswith("✅ Allowed once")
    assert r.shown(lint).text.endswith("⛔ Denied")


async def test_timeout_denies_and_closes_the_message_while_the_run_goes_on(
    run: RunFactory, tmp_path: Path
) -> None:
    hold = tmp_path / "go"
    r: Run = await run([bash("git push")], seconds=0.5, STANDIN_HOLD=str(hold))
    delegate(r.h, "push", "Not pushed: no answer.")
    r.h.tg.inject_text("push it")

    # The prompt may close before a poll sees it live: its buttons come from the send.
    await r.h.tg.wait_until(lambda: bool(r.prompts()))
    [asked] = r.prompts()
    [sent] = [c for c in r.h.tg.calls_to("sendMessage") if "asks to use" in c.params["text"]]
    allow = sent.params["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
    await r.h.tg.wait_until(lambda: r.shown(asked).reply_markup is None)

    # Closed at once, though the delegation still runs.
    assert r.shown(asked).text.endswith("⌛ Timed out: denied")
    assert r.h.kernel.delegator.current(CONV) is not None
    hold.write_text("go")
    await r.h.settle()

    assert r.ran == []
    assert r.fed_back()["approvals"] == [{"tool": "Bash", "decision": "deny", "by": "timeout"}]
    # A late press changes nothing.
    r.h.tg.inject_callback(allow, message_id=asked.message_id)
    await r.h.tg.wait_until(lambda: bool(r.h.tg.calls_to("answerCallbackQuery")))
    assert "expired" in str(r.h.tg.calls_to("answerCallbackQuery")[-1].params["text"])
    assert r.ran == []


async def test_cancel_while_a_prompt_is_open_denies_kills_the_cli_and_closes_it(
    run: RunFactory, tmp_path: Path
) -> None:
    record = tmp_path / "record.json"
    r: Run = await run([bash("git push --force")], STANDIN_RECORD=str(record))
    r.h.model.enqueue(tool_reply("delegate_to_cli", {"task": "push"}), text_reply("Hello again."))
    r.h.tg.inject_text("force push")

    asked = await r.prompt()
    info = json.loads(record.read_text())
    config = Path(info["argv"][info["argv"].index("--mcp-config") + 1])
    assert exists(config)

    assert await r.h.ask("/cancel") == "Cancelled; stopped claude_code"
    await r.h.settle()

    await wait_dead(info["pid"])
    assert not alive(info["pid"])
    assert not exists(config)  # the run's token file went with the run
    closed = r.shown(asked)
    assert closed.reply_markup is None and closed.text.endswith("⏹ Cancelled: denied")
    assert r.ran == []
    [decision] = await r.h.kernel.approvals.recent()
    assert (decision.decision, decision.decided_by) == ("deny", "cancelled")
    assert await r.h.converse("are you there?") == "Hello again."


async def test_a_hostile_command_is_shown_verbatim_in_one_valid_message(run: RunFactory) -> None:
    # Backtick runs, HTML-ish text, entities and a fence of its own: nothing formats the
    # message, Telegram accepts it, and the owner reads the command exactly.
    command = "echo '<b>&amp;</b>' ``` `whoami` && cat x | sh # " + "<&>" * 600
    r: Run = await run([bash(command)])
    delegate(r.h, "do it", "Done.")
    r.h.tg.inject_text("run it")

    asked = await r.prompt()
    r.press(asked, DENY)
    await r.h.settle()

    shown = r.shown(asked).text
    assert "echo '<b>&amp;</b>' ``` `whoami` && cat x | sh # <&><&>" in shown
    assert shown.endswith("⛔ Denied")
    failed = [c for c in r.h.tg.calls if c.method != "getUpdates" and not c.ok]
    assert failed == []
    assert r.ran == []


async def test_an_owners_own_mcp_client_is_asked_in_telegram(run: RunFactory) -> None:
    r: Run = await run([])
    endpoint = r.h.kernel.approvals.endpoint_url
    assert endpoint is not None
    config = r.h.kernel.config  # the owner's client sends the key Kernel generated
    owner = {"Authorization": f"Bearer {sidecar_key(config.gateway, config.data_dir)}"}
    async with (
        httpx2.AsyncClient(headers=owner, timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(endpoint, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        call = asyncio.ensure_future(
            session.call_tool("approve", {"tool_name": "Bash", "input": {"command": "uptime"}})
        )
        asked = await r.prompt()
        assert asked.text.startswith("🔌 From Kernel's MCP endpoint")
        assert "uptime" in asked.text
        r.press(asked, ALLOW_ONCE)
        result = await call

    text = next(c.text for c in result.content if c.type == "text")
    assert json.loads(text) == {"behavior": "allow", "updatedInput": {"command": "uptime"}}
    await r.h.tg.wait_until(lambda: r.shown(asked).reply_markup is None)
    assert r.shown(asked).text.endswith("✅ Allowed once")


def test_a_question_too_long_for_one_message_leaves_room_for_its_note() -> None:
    event = AskUser(1, "q1", "c1", "**big**\n\n" + "x <y> " * 2000, ["a", "b"], "permission", True)
    chunks, mode = question_body(event)
    assert mode == "HTML" and len(chunks) > 1
    assert all(utf16_len(html_to_plain(c)) <= 4096 - NOTE_ROOM for c in chunks)
    assert chunks[0].startswith("<b>big</b>")
    assert question_body(AskUser(1, "q", "c", "<b>", ["a"])) == (["<b>"], None)


async def test_kernel_stopping_while_a_prompt_is_open_closes_it_denied(
    run: RunFactory, tmp_path: Path
) -> None:
    record = tmp_path / "record.json"
    r: Run = await run([bash("git push")], STANDIN_RECORD=str(record))
    delegate(r.h, "push", "never")
    r.h.tg.inject_text("push it")
    asked = await r.prompt()
    pid = json.loads(record.read_text())["pid"]

    await r.h.channel.stop()  # as at a SIGTERM: Telegram stops first, its turns cancelled

    closed = r.shown(asked)
    assert closed.reply_markup is None and closed.text.endswith("⏹ Cancelled: denied")
    await wait_dead(pid)
    assert r.ran == []
    [decision] = await r.h.kernel.approvals.recent()
    assert (decision.decision, decision.decided_by) == ("deny", "cancelled")


async def test_a_prompt_that_ends_before_telegram_took_it_is_closed_once_it_lands(
    run: RunFactory, tmp_path: Path
) -> None:
    gate = tmp_path / "start"
    r: Run = await run([bash("git push")], seconds=0.5, STANDIN_START=str(gate))
    delegate(r.h, "push", "Not pushed.")
    r.h.tg.inject_text("push it")
    await r.h.tg.wait_until(lambda: any(t.startswith("⏳") for t in r.h.texts()))
    release = r.h.tg.hold("sendMessage")  # the prompt's send hangs in Telegram
    gate.write_text("go")

    await r.h.tg.wait_until(lambda: bool(r.h.kernel.agent.asks.waiting(CONV)))
    await r.h.tg.wait_until(lambda: not r.h.kernel.agent.asks.waiting(CONV))  # timed out
    assert r.prompts() == [] or r.live()  # not closed yet: Telegram has not answered
    release.set()
    await r.h.settle()

    [asked] = r.prompts()
    assert asked.reply_markup is None and asked.text.endswith("⌛ Timed out: denied")
    assert r.ran == []
    assert r.fed_back()["approvals"] == [{"tool": "Bash", "decision": "deny", "by": "timeout"}]


async def test_the_cli_dying_while_a_prompt_is_open_closes_it_and_the_chat_goes_on(
    run: RunFactory, tmp_path: Path
) -> None:
    record = tmp_path / "record.json"
    r: Run = await run([bash("make deploy")], STANDIN_RECORD=str(record))
    delegate(r.h, "deploy", "The CLI crashed; nothing was deployed.")
    r.h.tg.inject_text("deploy")
    asked = await r.prompt()
    pid = json.loads(record.read_text())["pid"]

    os.kill(pid, signal.SIGKILL)  # the CLI dies on its own, its request cut off
    await r.h.settle()

    closed = r.shown(asked)
    assert closed.reply_markup is None and closed.text.endswith("⏹ Cancelled: denied")
    assert r.ran == []
    assert answer(r) == "The CLI crashed; nothing was deployed."
    assert r.fed_back()["approvals"] == [{"tool": "Bash", "decision": "deny", "by": "cancelled"}]
    assert not r.h.kernel.agent.asks.waiting()
