"""``kernel chat``: /retry shows the new answer like a message's turn, /undo and
/rewind N cut from what the model sees (issue 20; an in-process Kernel, SQLite on disk)."""

from __future__ import annotations

import io
import json

from kernel.console.chat import CONVERSATION, ConsoleChat
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply


async def test_retry_undo_and_rewind_in_the_terminal(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    out, err = io.StringIO(), io.StringIO()
    chat = ConsoleChat(kernel, out, err, interactive=False)
    anthropic_sim.enqueue(
        text_reply("one"), text_reply("two"), text_reply("two again"), text_reply("three")
    )
    assert await chat.handle("q-one")
    assert await chat.handle("q-two")
    assert await chat.handle("/retry")
    assert out.getvalue().splitlines()[-1] == "two again"
    sent = json.dumps(anthropic_sim.requests[-1].body["messages"])
    assert '"two"' not in sent and sent.count("q-two") == 1

    assert await chat.handle("/undo")
    assert out.getvalue().splitlines()[-1].startswith("Undone: the last exchange (2 messages)")
    session_id = kernel.agent.sessions.current_session(CONVERSATION)
    assert session_id is not None
    live = await kernel.store.load_transcript(session_id)
    answer = next(s.id for s in live if s.message.text == "one")
    assert await chat.handle(f"/rewind {answer}")
    assert "Nothing comes after" in out.getvalue().splitlines()[-1]
    assert await chat.handle("q-three")
    sent = json.dumps(anthropic_sim.requests[-1].body["messages"])
    assert "q-two" not in sent and "one" in sent
    assert await chat.handle(f"/rewind {answer}")
    assert out.getvalue().splitlines()[-1].startswith("Rewound: 2 messages")
    assert await chat.handle("/rewind")
    assert "as a reply" in out.getvalue().splitlines()[-1]


async def test_branches_in_the_terminal_keep_what_retry_replaced(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    """/retry's replaced answer is a branch like /undo's cut (issue 38): /branches lists
    it with the command that switches to it, and /branches N brings it back."""
    kernel = await make_kernel(anthropic_sim, language="en")
    out, err = io.StringIO(), io.StringIO()
    chat = ConsoleChat(kernel, out, err, interactive=False)
    anthropic_sim.enqueue(text_reply("first take"), text_reply("second take"), text_reply("ok"))
    assert await chat.handle("/branches")
    assert "no branches yet" in out.getvalue()
    assert await chat.handle("q")
    assert await chat.handle("/retry")
    assert await chat.handle("/branches")
    listing = out.getvalue().split("Branches of this conversation")[-1]
    assert "#1 · " in listing and "replaced by 🔁" in listing and "at the start" in listing
    assert "/branches 1" in listing
    assert await chat.handle("/branches 1")
    assert "Switched to branch #1" in out.getvalue() and "first take" in out.getvalue()
    assert await chat.handle("q2")
    sent = json.dumps(anthropic_sim.requests[-1].body["messages"])
    assert "first take" in sent and "second take" not in sent and sent.count('"q"') == 1
