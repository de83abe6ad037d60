"""Context truncation, tool-pair integrity, the tool-call cap, sessions and settings."""

from __future__ import annotations

import json
from pathlib import Path

from kernel.agent.context import repair_history
from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.events import Completed, ToolResult
from kernel.core.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from tests.agent.test_turns import CONV, Sim, run, sent
from tests.conftest import KernelFactory, write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import context_index, owner_parts
from tests.sim.script import Reply, Text, ToolUse, text_reply, tool_reply


async def test_truncation_keeps_tool_pairs_at_the_boundary(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(sim, context_rounds=2)

    @kernel.tools.tool
    def note(text: str) -> str:
        """Take a note.

        Args:
            text: the note
        """
        return "noted " + text

    sim.enqueue(text_reply("r1 answer"))
    await run(kernel, "round one")
    sim.enqueue(Reply(Text("noting"), ToolUse("note", {"text": "x"})), text_reply("r2 answer"))
    await run(kernel, "round two")
    sim.enqueue(text_reply("r3 answer"))
    await run(kernel, "round three")

    messages = sent(sim)  # the request of round three: rounds two and three only
    dumped = json.dumps(messages)
    assert "round one" not in dumped and "r1 answer" not in dumped
    assert "round two" in json.dumps(messages[0]) and "round three" in dumped
    # The time goes with round three's own message, after the owner's words.
    body = sim.requests[-1].body
    assert context_index(body) == len(body["messages"]) - 1
    if isinstance(sim, AnthropicSim):
        kinds = [[b["type"] for b in owner_parts(m)] for m in messages]
        assert kinds == [["text"], ["text", "tool_use"], ["tool_result"], ["text"], ["text"]]
    else:
        roles = [m["role"] for m in messages]
        assert roles == ["user", "assistant", "tool", "assistant", "user"]


def test_repair_units() -> None:
    use = ToolUseBlock("t1", "note", {})
    msgs = [
        Message("user", [TextBlock("a")]),
        Message("assistant", [use]),
        Message("user", [ToolResultBlock("t1", "ok")]),
        Message("assistant", [TextBlock("done")]),
        Message("user", [TextBlock("b")]),
        Message("assistant", [ToolUseBlock("t2", "note", {})]),  # crashed: no result
    ]
    repaired = repair_history([*msgs, Message("user", [TextBlock("c")])])
    last = repaired[-1]
    assert last.role == "user"
    assert [b.tool_use_id for b in last.tool_results] == ["t2"] and last.text == "c"
    # an orphan tool_result (its tool_use truncated away) is dropped
    orphan = repair_history([Message("user", [ToolResultBlock("zz", "x"), TextBlock("hi")])])
    assert orphan == [Message("user", [TextBlock("hi")])]


async def test_tool_call_cap(anthropic_sim: AnthropicSim, make_kernel: KernelFactory) -> None:
    kernel = await make_kernel(anthropic_sim, max_tool_calls=25)
    calls: list[int] = []

    @kernel.tools.tool
    def tick() -> int:
        """Count one tick."""
        calls.append(1)
        return len(calls)

    anthropic_sim.enqueue(*(tool_reply("tick", {}) for _ in range(26)))
    events = await run(kernel, "tick forever")

    assert len(calls) == 25
    assert len(anthropic_sim.requests) == 26
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.ok for r in results] == [True] * 25 + [False]  # the 26th call was refused
    final = events[-1]
    assert isinstance(final, Completed) and "25" in final.reply
    # the history is valid: the next turn is accepted by the pairing-strict simulator
    assert anthropic_sim.pending == 0
    anthropic_sim.enqueue(text_reply("stopped"))
    events = await run(kernel, "ok stop")
    assert isinstance(events[-1], Completed) and events[-1].reply == "stopped"


async def test_provider_and_model_choice_persist(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    from kernel.agent.agent import SelectionError

    kernel = await make_kernel(anthropic_sim)
    await kernel.agent.selection.set_model("model-b")
    try:
        await kernel.agent.selection.set_model("model-z")
    except SelectionError as exc:
        assert "model-a" in str(exc) and "model-b" in str(exc)
    else:
        raise AssertionError("an unlisted model was accepted")
    try:
        await kernel.agent.selection.set_provider("nope")
    except SelectionError as exc:
        assert "main" in str(exc)
    else:
        raise AssertionError("an unknown provider was accepted")
    anthropic_sim.enqueue(text_reply("hi"))
    await run(kernel, "hi")
    assert anthropic_sim.requests[-1].body["model"] == "model-b"
    await kernel.stop()

    again = await make_kernel(anthropic_sim)  # a restart: same database
    assert again.agent.selection.model == "model-b"
    assert again.agent.sessions.current_session(CONV) is None  # a restart starts a new conversation


async def test_sessions_new_list_resume_delete(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    anthropic_sim.enqueue(text_reply("one"), text_reply("two"), text_reply("three"))
    await run(kernel, "first session")
    first = kernel.agent.sessions.current_session(CONV)
    kernel.agent.sessions.new_session(CONV)
    await run(kernel, "second session")
    second = kernel.agent.sessions.current_session(CONV)
    assert first != second

    rows = await kernel.agent.sessions.list_sessions()
    assert [r.id for r in rows] == [second, first]
    assert first is not None
    await kernel.agent.sessions.resume(CONV, first)
    await run(kernel, "back to first")
    assert "first session" in json.dumps(sent(anthropic_sim))
    assert "second session" not in json.dumps(sent(anthropic_sim))

    assert await kernel.agent.sessions.delete_sessions([first]) == 1
    assert kernel.agent.sessions.current_session(CONV) is None
    assert [r.id for r in await kernel.agent.sessions.list_sessions()] == [second]
    await kernel.agent.sessions.retitle(second or 0, "Second")
    assert (await kernel.agent.sessions.list_sessions())[0].title == "Second"


async def test_provider_switch_restore_and_fallback(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    from tests.sim.openai_sim import OpenAISim

    openai_sim = await OpenAISim().start()
    try:
        path = write_config(tmp_path, anthropic_sim.base_url, "claude")
        second = (
            f'[providers.other]\ntype = "openai_compat"\napi_base = "{openai_sim.base_url}"\n'
            'api_key = "sk-other-0123456789"\ndefault_model = "gpt-x"\n'
        )
        path.write_text(path.read_text() + second)
        async with Kernel(load_config(path, env={}, require_telegram=False)) as kernel:
            assert await kernel.agent.selection.set_provider("other") == "gpt-x"
            openai_sim.enqueue(text_reply("from the other provider"))
            events = await run(kernel, "hi")
            assert events[-1] == Completed(1, "from the other provider")
        async with Kernel(load_config(path, env={}, require_telegram=False)) as kernel:
            assert (kernel.agent.selection.provider_name, kernel.agent.selection.model) == (
                "other",
                "gpt-x",
            )
        # the saved provider loses its key: back to default_provider, with its default model
        path.write_text(path.read_text().replace('api_key = "sk-other-0123456789"\n', ""))
        async with Kernel(load_config(path, env={}, require_telegram=False)) as kernel:
            assert (kernel.agent.selection.provider_name, kernel.agent.selection.model) == (
                "main",
                "model-a",
            )
    finally:
        await openai_sim.stop()
