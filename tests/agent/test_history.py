"""What is stored and what the model is told: slimming on write, system layers, the
volatile context block."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from kernel.agent.slimming import slim_message, summarize_tool_result
from kernel.core.events import Completed
from kernel.core.i18n import set_language
from kernel.core.messages import ImageBlock, Message, TextBlock, ToolResultBlock, content_to_json
from tests.agent.test_turns import CONV, Sim, run, system_of
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import context_block, context_index, context_of
from tests.sim.script import text_reply, tool_reply


async def test_long_tool_result_is_slimmed_with_an_artifact(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory, tmp_path: Path
) -> None:
    kernel = await make_kernel(anthropic_sim)
    report = "line of a very long report\n" * 200

    @kernel.tools.tool
    def build_report() -> str:
        """Build the weekly report."""
        return report

    anthropic_sim.enqueue(tool_reply("build_report", {}), text_reply("Report ready."))
    events = await run(kernel, "weekly report please")
    assert isinstance(events[-1], Completed)

    # during the turn the model saw everything
    second = anthropic_sim.requests[1].body["messages"][-1]["content"][0]
    assert second["content"] == report
    # the database keeps one line and the path of the full text
    stored = await kernel.store.load_messages(kernel.agent.sessions.current_session(CONV) or 0)
    result = stored[2].tool_results[0]
    assert "\n" not in result.content and len(result.content) < 200
    artifact = result.content.rsplit("详见 ", 1)[1]
    assert (tmp_path / artifact).read_text(encoding="utf-8") == report


def test_slimming_rules() -> None:
    file_text = "[文件: main.py]\n```\nprint('hi')\n```\n请看看这个文件"
    message = Message("user", [TextBlock(file_text), TextBlock("[语音: 明天提醒我开会]")])
    slim = slim_message(message)
    assert slim.content == [
        TextBlock("[文件 main.py 已处理]\n请看看这个文件"),
        TextBlock("[语音已处理]"),
    ]
    # A transcript may hold "]"; the tag ends at its line's end, the caption is kept.
    spoken = TextBlock("[语音: set [x] to 3]\n[注] caption")
    assert slim_message(Message("user", [spoken])).content == [
        TextBlock("[语音已处理]\n[注] caption")
    ]
    short = ToolResultBlock("t1", "ok")
    assert slim_message(Message("user", [short])).content == [short]
    cli = json.dumps(
        {"ok": True, "cli": "claude_code", "exit_code": 0, "output_path": "data/cli_outputs/a.txt"}
    )
    assert summarize_tool_result(cli) == "claude_code 已完成(成功)，详见 data/cli_outputs/a.txt"
    killed = json.dumps(
        {"ok": False, "cli": "gemini", "exit_code": None, "signal": "SIGKILL", "output_path": "o"}
    )
    assert summarize_tool_result(killed) == "gemini 已完成(失败, 被 SIGKILL 结束)，详见 o"
    failed = json.dumps({"ok": False, "cli": "codex", "exit_code": 3, "output_path": "o"})
    assert summarize_tool_result(failed) == "codex 已完成(失败, exit_code=3)，详见 o"
    # Gemini traps Kernel's SIGTERM and exits 0: the signal is named, with who sent it.
    trapped = {"ok": False, "cli": "gemini", "exit_code": 0, "signal": "SIGTERM"}
    stopped = json.dumps(trapped | {"kernel_signals": ["SIGTERM"], "output_path": "o"})
    assert (
        summarize_tool_result(stopped)
        == "gemini 已完成(失败, Kernel 发出 SIGTERM, 退出码 0)，详见 o"
    )
    outside = json.dumps(trapped | {"kernel_signals": [], "output_path": "o"})
    assert (
        summarize_tool_result(outside) == "gemini 已完成(失败, 被 SIGTERM 结束, 退出码 0)，详见 o"
    )
    set_language("en")
    assert (
        summarize_tool_result(stopped)
        == "gemini finished (failed, SIGTERM from Kernel, exit 0); see o"
    )
    assert summarize_tool_result(killed) == "gemini finished (failed, ended by SIGKILL); see o"
    set_language("zh")


async def test_system_layers_in_order(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory, tmp_path: Path
) -> None:
    (tmp_path / "SOUL.md").write_text("# Soul\nYou are Testy.", encoding="utf-8")
    kernel = await make_kernel(anthropic_sim)
    await kernel.store.add_memory("The owner's cat is called Miso")
    anthropic_sim.enqueue(text_reply("hi"))
    await run(kernel, "what is my cat called?")

    # Stable layers (soul, tools) make the system prompt; volatile ones (memories, the
    # time) the context block of the turn's message, in that order.
    system = system_of(anthropic_sim)
    order = [system.index(s) for s in ("You are Testy.", "## 工具")]  # soul, tool guide
    assert order == sorted(order)
    assert "Miso" not in system and "当前时间" not in system
    context = context_of(anthropic_sim.requests[-1])
    order = [context.index(s) for s in ("Miso", "当前时间")]
    assert order == sorted(order)
    layers = await kernel.agent.prompt.layers("cat", model=kernel.agent.selection.model)
    assert [layer.name for layer in layers] == ["soul", "tools", "memories", "time"]
    assert [layer.volatile for layer in layers] == [False, False, True, True]
    assert all(len(layer.sha256) == 16 and layer.token_estimate > 0 for layer in layers)


def test_a_file_with_its_own_code_fences_is_slimmed_whole() -> None:
    from kernel.agent.slimming import without_files, wrap_file

    content = "# Notes\n\n```python\nprint('inside')\n```\n\nmore text\n" + "x" * 800
    wrapped = wrap_file("notes.md", content)
    assert wrapped.splitlines()[1] == "````"  # longer than any fence inside
    text = wrapped + "\nwhat do you think?"
    slimmed = slim_message(Message("user", [TextBlock(text)]))
    assert slimmed.text == "[文件 notes.md 已处理]\nwhat do you think?"
    # The owner's own words without the file (a skill named in the file is not invoked).
    assert without_files(wrap_file("a.md", "use /skill/x here") + "\nhi").strip() == "hi"


async def test_the_context_follows_the_owners_words_and_is_never_stored(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    """The volatile context (memories, the time) is the last part of the turn's own
    message, after the owner's words and image, in each step of the turn; the history
    keeps the owner's words only, so an earlier turn's message is sent without it."""
    kernel = await make_kernel(sim)
    await kernel.memories.add("The owner's cat is called Miso")
    png = base64.b64encode(b"\x89PNG\r\n\x1a\nfake-image-bytes").decode()
    sim.enqueue(tool_reply("memory_list", {}), text_reply("Miso."), text_reply("Still Miso."))

    await run(kernel, "what is my cat called?", images=[ImageBlock("image/png", png)])
    await run(kernel, "and again?")

    first, step, second = (r.body for r in sim.requests)
    system = system_of(sim, 0)
    assert system == system_of(sim, 1) == system_of(sim, 2)  # one stable prefix
    assert "Miso" not in system and "当前时间" not in system
    offset = 0 if isinstance(sim, AnthropicSim) else 1  # OpenAI: the system message
    for body in (first, step):  # the tool step too: on the turn's message, not the result
        assert context_index(body) == offset
        assert "Miso" in context_of(body) and "当前时间" in context_of(body)
        own = body["messages"][offset]
        if isinstance(sim, AnthropicSim):
            assert [b["type"] for b in own["content"]] == ["image", "text", "text"]
            assert own["content"][1]["text"] == "what is my cat called?"
            assert own["content"][2]["text"] == context_block(body)
        else:
            assert [p["type"] for p in own["content"]] == ["image_url", "text", "text"]
            assert own["content"][1]["text"] == "what is my cat called?"
            assert own["content"][2]["text"] == context_block(body)
    assert context_block(first).startswith("<context>\n")
    assert context_block(first).endswith("\n</context>")

    # The second turn: its own message carries the context, the first one's no longer.
    assert context_index(second) == len(second["messages"]) - 1
    own = second["messages"][-1]
    if isinstance(sim, AnthropicSim):
        # (types and texts: a cache breakpoint may mark a block, the order is the point)
        assert [(b["type"], b["text"]) for b in own["content"]] == [
            ("text", "and again?"),
            ("text", context_block(second)),
        ]
    else:  # all text: one string, the parts joined by a blank line
        assert own["content"] == "and again?\n\n" + context_block(second)
    assert "当前时间" not in json.dumps(second["messages"][:-1], ensure_ascii=False)

    session = kernel.agent.sessions.current_session(CONV)
    assert session is not None
    stored = await kernel.store.load_messages(session)
    assert stored[0].role == "user" and stored[-2].text == "and again?"
    dumped = json.dumps([content_to_json(m.content) for m in stored], ensure_ascii=False)
    assert "<context>" not in dumped and "当前时间" not in dumped
    assert [m.text for m in stored if m.role == "user" and m.text] == [
        "[图片已处理]\nwhat is my cat called?",
        "and again?",
    ]
