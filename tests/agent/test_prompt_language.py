"""Every word Kernel itself writes into a model request is in ``general.language``
(issue 35, item 4): a real turn through the agent, with the shipped SOUL.md, a recalled
memory, a skill, a persona, a project, the built-in tools, an MCP server, a coding CLI,
a sub-agent (delegate_task) and the title model, against the model simulators. With
``language = "en"`` no request holds a CJK character except the owner's own words
(Chinese on purpose, so the check is exact); with ``"zh"`` the words are today's."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from kernel.agent.agent import UserInput
from kernel.agent.scope import PERSONA, PROJECT
from kernel.agent.slimming import slim_message, wrap_file
from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.events import Completed
from kernel.core.messages import Message, TextBlock, ToolUseBlock
from tests.conftest import write_config
from tests.delegate.conftest import bin_dir as bin_dir  # noqa: F401 - fixtures, shared
from tests.delegate.conftest import cli_section
from tests.delegate.conftest import workspace as workspace  # noqa: F401
from tests.mcp.conftest import mcp_toml, stdio_server
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Reply, Text, ToolUse, text_reply, tool_reply
from tests.waiting import wait_until

pytestmark = pytest.mark.posix  # the coding CLI is a #! stand-in made executable

ROOT = Path(__file__).resolve().parents[2]
CONV = "console:default"
CJK = re.compile(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]")
OWNER_MESSAGE = "我喜欢喝什么茶？"  # the owner's words: the only Chinese allowed in
OWNER_MEMORY = "主人喜欢喝乌龙茶"
OWNER_FILE = "笔记：乌龙茶"
CHILD_ANSWER = "Oolong is a partly oxidised tea."

Run = Callable[[str], Awaitable[Kernel]]


def lay_out(base: Path, workspace: Path, cli: Path) -> None:
    """The owner's files, all in English: SOUL.md as Kernel ships it (Chinese), a
    skill, a persona, a project with a folder, a sub-agent."""
    shutil.copy(ROOT / "SOUL.md", base / "SOUL.md")
    skill = base / "skills" / "tidy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: tidy\ndescription: sorts lists\n---\n\nSort the items.\n", encoding="utf-8"
    )
    for folder, name, front, body in (
        ("personas", "butler", "description: a formal butler", "Speak formally."),
        ("projects", "site", f"description: the site\nfolder: {workspace}", "Hugo."),
        ("agents", "helper", "description: the helper agent\ntools: [memory_search]", "Answer."),
    ):
        (base / folder).mkdir(exist_ok=True)
        text = f"---\nname: {name}\n{front}\n---\n\n{body}\n"
        (base / folder / f"{name}.md").write_text(text, encoding="utf-8")


@pytest.fixture
async def run_kernel(
    tmp_path: Path,
    workspace: Path,
    bin_dir: dict[str, Path],
    anthropic_sim: AnthropicSim,
    openai_sim: OpenAISim,
) -> AsyncIterator[Run]:
    started: list[Kernel] = []

    async def start(language: str) -> Kernel:
        lay_out(tmp_path, workspace, bin_dir["claude_code"])
        path = write_config(
            tmp_path,
            anthropic_sim.base_url,
            "claude",
            language=language,
            default_workspace=str(workspace),
        )
        extra = [
            cli_section("claude_code", command=str(bin_dir["claude_code"])),
            f'[titles]\ntype = "openai_compat"\napi_base = "{openai_sim.base_url}"\n'
            'api_key = "sk-titles-0123456789"\nmodel = "tiny"\n',
            mcp_toml([stdio_server("test")], {}),
        ]
        path.write_text(path.read_text() + "\n" + "\n".join(extra), encoding="utf-8")
        kernel = Kernel(load_config(path, env={}, require_telegram=False))
        await kernel.start()
        started.append(kernel)
        return kernel

    yield start
    for kernel in started:
        await kernel.stop()


async def one_turn(kernel: Kernel, sim: AnthropicSim, openai_sim: OpenAISim) -> None:
    """A turn that calls a tool that does not exist (an error result), a sub-agent and
    a skill, then answers; the title model names the chat."""
    await wait_until(lambda: "mcp_test__echo" in kernel.tools.names())
    await kernel.memories.add(OWNER_MEMORY, "user")
    await kernel.agent.scopes.set(CONV, PERSONA, "butler")
    await kernel.agent.scopes.set(CONV, PROJECT, "site")
    sim.enqueue(
        Reply(Text("Let me check."), ToolUse("no_such_tool", {"x": 1})),
        tool_reply("delegate_task", {"agent": "helper", "task": "What is oolong?"}),
        text_reply(CHILD_ANSWER),  # the sub-agent's own request
        text_reply("Oolong, sir."),
    )
    openai_sim.enqueue(text_reply("Oolong tea"))
    given = UserInput(
        f"/skill/tidy {OWNER_MESSAGE}", attached=(wrap_file("notes.txt", OWNER_FILE),)
    )
    events = [e async for e in kernel.agent.start_turn(CONV, given)]
    final = events[-1]
    assert isinstance(final, Completed) and final.reply.endswith("Oolong, sir.")
    assert len(sim.requests) == 4
    await wait_until(lambda: len(openai_sim.requests) == 1)  # the title, made in the background
    await wait_until(lambda: not kernel.agent.background)


def sent(sim: AnthropicSim | OpenAISim) -> str:
    """Every request the simulator received (system, tools with their descriptions and
    parameters, messages) as one text."""
    return "\n".join(json.dumps(r.body, ensure_ascii=False) for r in sim.requests)


def kernels_words(text: str) -> list[str]:
    """The CJK left once the owner's own words are taken out, with what is around."""
    for own in (OWNER_MESSAGE, OWNER_MEMORY, OWNER_FILE):
        text = text.replace(own, "")
    return [text[max(0, m.start() - 40) : m.end() + 40] for m in CJK.finditer(text)]


async def test_english_requests_hold_no_chinese_but_the_owners(
    run_kernel: Run, anthropic_sim: AnthropicSim, openai_sim: OpenAISim
) -> None:
    kernel = await run_kernel("en")
    await one_turn(kernel, anthropic_sim, openai_sim)

    body = json.dumps(anthropic_sim.requests[0].body, ensure_ascii=False)
    # what the request must hold for the check to mean something
    for part in (
        "## Tools",
        "Current time: ",
        "## Long-term memory (recalled automatically)",
        "You are Kernel, the owner's personal AI assistant.",  # SOUL.md as shipped, in English
        "## Persona: butler",
        "## Current project: site",
        "## Skills",
        "## Sub-agents",
        "mcp_test__echo",
        "delegate_to_cli",
        "[file: notes.txt]",
        OWNER_MESSAGE,
        OWNER_MEMORY,
    ):
        assert part in body, part
    assert "no_such_tool" in json.dumps(anthropic_sim.requests[1].body)  # its error result
    assert kernels_words(sent(anthropic_sim)) == []
    assert kernels_words(sent(openai_sim)) == []  # the title request

    # what the history keeps for later turns, in the same words
    stored = await kernel.store.load_messages(kernel.agent.sessions.current_session(CONV) or 0)
    slimmed = " ".join(
        b.text for m in stored for b in slim_message(m).content if isinstance(b, TextBlock)
    )
    assert "[file notes.txt processed]" in slimmed and kernels_words(slimmed) == []


async def test_chinese_requests_keep_todays_words(
    run_kernel: Run, anthropic_sim: AnthropicSim, openai_sim: OpenAISim
) -> None:
    kernel = await run_kernel("zh")
    await one_turn(kernel, anthropic_sim, openai_sim)

    body = json.dumps(anthropic_sim.requests[0].body, ensure_ascii=False)
    for part in (
        "## 工具\n需要时自己决定调用哪个工具，不要假装已经调用；",
        "当前时间：",
        "（Asia/Shanghai）",
        "## 长期记忆（自动召回）",
        "你是 Kernel，主人的私人 AI 助手。",
        "## 人格：butler",
        "## 当前项目：site",
        "[文件: notes.txt]",
    ):
        assert json.dumps(part, ensure_ascii=False)[1:-1] in body, part
    title = json.dumps(openai_sim.requests[0].body, ensure_ascii=False)
    assert "用不超过 12 个字（或 6 个英文单词）为下面这段对话起一个简短标题" in title
    stored = await kernel.store.load_messages(kernel.agent.sessions.current_session(CONV) or 0)
    slimmed = slim_message(Message("user", stored[0].content))
    assert any(
        "[文件 notes.txt 已处理]" in b.text for b in slimmed.content if isinstance(b, TextBlock)
    )


# English sentences Kernel writes into a request when something goes wrong (a tool the
# model made up, a tool result lost to a crash, a missing SOUL.md), as they read before
# they came from the catalogue: none of them may reach a Chinese prompt.
ENGLISH = (
    "unknown tool",
    "available tools",
    "no result: the tool did not finish",
    "cancelled: the user stopped this turn",
    "failed: the turn ended with an error",
    "You are Kernel, the owner's personal assistant",
    "the owner denied this call",
)


async def test_chinese_requests_hold_none_of_kernels_english(
    run_kernel: Run, anthropic_sim: AnthropicSim, openai_sim: OpenAISim
) -> None:
    kernel = await run_kernel("zh")
    await one_turn(kernel, anthropic_sim, openai_sim)
    # Kernel stopped during a tool call (its result never stored), and SOUL.md is gone.
    session = kernel.agent.sessions.current_session(CONV) or 0
    dangling = Message("assistant", [ToolUseBlock("t9", "memory_search", {"query": "x"})])
    await kernel.store.append_messages(session, [dangling])
    kernel.config.general.soul.unlink()
    anthropic_sim.enqueue(text_reply("好的"))
    events = [e async for e in kernel.agent.start_turn(CONV, UserInput("再来"))]
    assert isinstance(events[-1], Completed)

    text = sent(anthropic_sim)
    assert "no_such_tool" in text and "t9" in text  # the error and the lost result were sent
    assert [english for english in ENGLISH if english in text] == []
    last = json.dumps(anthropic_sim.requests[-1].body, ensure_ascii=False)
    assert "没有结果" in last and "你是 Kernel" in last
