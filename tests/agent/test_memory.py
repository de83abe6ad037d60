"""Long-term memory through the agent: the model calls the memory tools, recalled
memories reach it in the context block of the turn's message, and <remember> tags are
saved and never shown."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernel.app import Kernel
from kernel.core.events import AssistantDelta, Completed, ToolResult
from tests.agent.test_turns import CONV, Sim, run, sent
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import recalled_of
from tests.sim.script import Reply, Text, ToolUse, text_reply, tool_reply


def last_tool_result(sim: Sim, index: int = -1) -> Any:
    """The JSON of the last tool result the model received in a recorded request."""
    last = sent(sim, index)[-1]
    if isinstance(sim, AnthropicSim):
        content = last["content"][-1]["content"]
    else:
        assert last["role"] == "tool"
        content = last["content"]
    return json.loads(content) if content.startswith(("{", "[")) else content


async def stored_texts(kernel: Kernel) -> list[tuple[str, str]]:
    session = kernel.agent.sessions.current_session(CONV)
    assert session is not None
    return [(m.role, m.text) for m in await kernel.store.load_messages(session) if m.text]


def recalled(sim: Sim, index: int = -1) -> str:
    """The recalled memories a request carried in its context block ("" if none)."""
    return recalled_of(sim.requests[index])


async def test_memory_tools_and_recall_in_chinese_and_english(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(sim)
    sim.enqueue(
        Reply(
            Text("好的，记下了。"),
            ToolUse("memory_add", {"text": "我喜欢昭和时期的音乐", "category": "user"}),
            ToolUse("memory_add", {"text": "The owner drinks oolong tea every morning"}),
        ),
        text_reply("记住了。"),
    )
    await run(kernel, "记住：我喜欢昭和时期的音乐，还有我每天早上喝乌龙茶")
    assert recalled(sim, 0) == ""  # nothing to recall yet
    assert set(last_tool_result(sim)) == {"id"}  # seed 004: memory_add -> {id}

    # A message about 昭和: the fact is in the context layer the model receives, and the
    # model can also search for it.
    sim.enqueue(
        tool_reply("memory_search", {"query": "昭和 音乐"}), text_reply("推荐《真夜中のドア》")
    )
    await run(kernel, "推荐一首昭和的歌")
    layer = recalled(sim, 2)
    assert "我喜欢昭和时期的音乐" in layer
    assert layer.splitlines()[0].endswith("我喜欢昭和时期的音乐")  # the best match first
    [found] = last_tool_result(sim)
    assert found["text"] == "我喜欢昭和时期的音乐" and found["category"] == "user"
    # seed 004's row, with the scope it belongs to (issue 18)
    assert set(found) == {"id", "text", "created_at", "category", "scope"}
    assert found["scope"] == "global"

    # English: recalled for a message about tea, first in the layer, ahead of a newer,
    # unrelated memory (so the most-recent fallback could not pass this)
    cat, _ = await kernel.memories.add("The owner's cat is called Mochi")
    sim.enqueue(text_reply("Try a Tieguanyin."))
    await run(kernel, "Which TEA should I brew today?")
    lines = recalled(sim).splitlines()
    assert "The owner drinks oolong tea every morning" in lines[0]
    await kernel.store.delete_memories([cat.id])

    # list, delete, delete again (an error the model reads), list again
    sim.enqueue(
        tool_reply("memory_list", {}),
        tool_reply("memory_delete", {"id": found["id"]}),
        tool_reply("memory_delete", {"id": found["id"]}),
        tool_reply("memory_list", {"limit": 5}),
        text_reply("Done."),
    )
    events = await run(kernel, "forget the music one")
    listed = last_tool_result(sim, -4)
    assert [m["text"] for m in listed] == [
        "The owner drinks oolong tea every morning",
        "我喜欢昭和时期的音乐",
    ]
    assert last_tool_result(sim, -3) == {"ok": True}
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.ok for r in results] == [True, True, False, True]
    assert "no memory with id" in results[2].summary
    assert [m["text"] for m in last_tool_result(sim, -1)] == [
        "The owner drinks oolong tea every morning"
    ]
    assert [m.text for m in await kernel.memories.recent()] == [
        "The owner drinks oolong tea every morning"
    ]


async def test_recall_falls_back_to_the_most_recent(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim, memory_recall_k=2)
    for text in ("likes green tea", "has a cat called Miso", "works on Kernel"):
        await kernel.memories.add(text)
    anthropic_sim.enqueue(text_reply("hi"), text_reply("hi"))
    await run(kernel, "zebra crossing")  # matches nothing: the two most recent
    assert recalled(anthropic_sim).splitlines() == [
        "- [3] works on Kernel",
        "- [2] has a cat called Miso",
    ]
    await run(kernel, "what is my cat's name?")
    assert recalled(anthropic_sim).splitlines()[0] == "- [2] has a cat called Miso"


async def test_remember_tags_are_saved_and_never_shown(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(sim)
    await kernel.memories.add("Likes oolong tea")
    chunks = [
        "Nice to meet you, Ada. <",
        'remember category="us',
        'er">Name is Ada</remem',
        "ber><remember>likes OOLONG tea</remember>",  # already known
        "<remember category='project'>Works on the Kernel repo</remember>",
        "<remember>name is  ada</remember>",  # a repeat within the turn
        '<remember category="feedback">Wants short answers</remember>',
        "<remember>a fourth new fact: over the limit</remember> See you!",
    ]
    sim.enqueue(Reply(Text("".join(chunks), chunks=chunks)))
    events = await run(kernel, "I'm Ada. I work on Kernel. Keep answers short.")

    shown = "Nice to meet you, Ada.  See you!"
    deltas = [e.delta for e in events if isinstance(e, AssistantDelta)]
    assert "".join(deltas) == shown
    assert not any("<" in d or "remember" in d or "Ada</" in d for d in deltas)
    final = events[-1]
    assert isinstance(final, Completed) and final.reply == shown
    # the history keeps what the owner saw
    assert (await stored_texts(kernel))[-1] == ("assistant", shown)
    memories = {(m.text, m.category) for m in await kernel.memories.recent()}
    assert memories == {
        ("Likes oolong tea", None),
        ("Name is Ada", "user"),
        ("Works on the Kernel repo", "project"),
        ("Wants short answers", "feedback"),
    }

    # the next request: no tag in the history, the facts in the memory layer
    sim.enqueue(text_reply("Hi again."))
    await run(kernel, "what's my name, Ada?")
    assert "<remember" not in json.dumps(sent(sim), ensure_ascii=False)
    assert "Name is Ada" in recalled(sim)


async def test_remember_tags_across_tool_steps_share_the_limit(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    anthropic_sim.enqueue(
        Reply(
            Text("<remember>one</remember><remember>two</remember>Checking."),
            ToolUse("memory_list", {}),
        ),
        text_reply("<remember>three</remember><remember>four</remember>Done."),
    )
    events = await run(kernel, "go")
    final = events[-1]
    assert isinstance(final, Completed) and final.reply == "Checking.\n\nDone."
    assert sorted(m.text for m in await kernel.memories.recent()) == ["one", "three", "two"]
    assert [t for t in await stored_texts(kernel) if t[0] == "assistant"] == [
        ("assistant", "Checking."),
        ("assistant", "Done."),
    ]


async def test_an_unclosed_remember_tag_does_not_swallow_the_reply(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    text = "Sure. <remember>likes tea\n\nHere is the rest of the answer."
    anthropic_sim.enqueue(Reply(Text(text, chunks=[text[:10], text[10:25], text[25:]])))
    events = await run(kernel, "hi")
    assert "".join(e.delta for e in events if isinstance(e, AssistantDelta)) == text
    final = events[-1]
    assert isinstance(final, Completed) and final.reply == text
    assert await kernel.memories.count() == 0


async def test_like_fallback_through_the_agent(
    sim: Sim, make_kernel: KernelFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Detection at start says no FTS5: the store, the tools and recall use LIKE.
    monkeypatch.setattr("kernel.store.db.fts5_supported", lambda conn: False)
    kernel = await make_kernel(sim)
    assert not kernel.store.fts5_available and kernel.memories.search_mode == "like"
    sim.enqueue(
        tool_reply("memory_add", {"text": "我喜欢昭和时期的音乐"}),
        text_reply("ok"),
        tool_reply("memory_search", {"query": "昭和的歌"}),
        text_reply("ok"),
    )
    await run(kernel, "记住我喜欢昭和时期的音乐")
    await kernel.memories.add("likes green tea")
    await run(kernel, "昭和有什么好歌")
    assert "我喜欢昭和时期的音乐" in recalled(sim)
    assert [m["text"] for m in last_tool_result(sim)] == ["我喜欢昭和时期的音乐"]


async def test_the_agent_recalls_from_the_kernels_one_memory_service(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    # One Memories (one index lock, one jieba) for tools, commands and recall alike.
    kernel = await make_kernel(anthropic_sim)
    assert kernel.agent.memories is kernel.memories
