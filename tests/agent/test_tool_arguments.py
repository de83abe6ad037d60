"""Tool arguments are repaired once per call, by the turn, and that one result is what the
event shows, the history keeps and the tool runs with."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kernel.core.events import Completed, ToolCall, ToolResult
from kernel.tools.registry import ToolRegistry
from tests.agent.test_turns import CONV, Sim, run, sent
from tests.conftest import KernelFactory
from tests.sim.script import Reply, ToolUse, text_reply


@dataclass
class RawToolUse(ToolUse):
    """A tool call whose arguments are sent as this exact text, JSON or not."""

    raw: str = ""

    def arguments(self) -> str:
        return self.raw


def sent_tool_inputs(sim: Sim) -> list[dict[str, Any]]:
    """The tool-call arguments in the assistant messages of the last model request."""
    found: list[dict[str, Any]] = []
    for message in sent(sim):
        if message["role"] != "assistant":
            continue
        if isinstance(message.get("content"), list):  # Anthropic's tool_use blocks
            found += [b["input"] for b in message["content"] if b.get("type") == "tool_use"]
        for call in message.get("tool_calls") or []:  # OpenAI's JSON strings
            found.append(json.loads(call["function"]["arguments"]))
    return found


async def test_one_repair_is_shown_stored_and_run(sim: Sim, make_kernel: KernelFactory) -> None:
    kernel = await make_kernel(sim)
    ran: list[tuple[str, list[str]]] = []

    @kernel.tools.tool
    def search(query: str, tags: list[str]) -> str:
        """Search the notes.

        Args:
            query: what to look for
            tags: labels to narrow it
        """
        ran.append((query, tags))
        return "found 1"

    # A prefixed name, another ecosystem's key and a bare string for an array: all are
    # repaired against the schema of the tool the name resolves to.
    sim.enqueue(
        Reply(ToolUse("functions.search", {"q": "cats", "tags": "pets"})), text_reply("done")
    )
    events = await run(kernel, "find cats")

    repaired = {"query": "cats", "tags": ["pets"]}
    assert ran == [("cats", ["pets"])]
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [c.arguments for c in calls] == [repaired]
    assert [r.ok for r in events if isinstance(r, ToolResult)] == [True]
    session = kernel.agent.sessions.current_session(CONV)
    assert session is not None
    stored = await kernel.store.load_messages(session)
    assert [u.input for m in stored for u in m.tool_uses] == [repaired]
    # the model's next request carries the same arguments back
    assert sent_tool_inputs(sim) == [repaired]


async def test_unrepairable_arguments_are_refused_in_the_registrys_words(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(sim)
    ran: list[str] = []

    @kernel.tools.tool
    def note(text: str) -> str:
        """Take a note.

        Args:
            text: the note
        """
        ran.append(text)
        return "noted"

    sim.enqueue(
        Reply(RawToolUse("note", {}, raw="[1, 2, 3]")),
        text_reply("Sorry, that call was malformed."),
    )
    events = await run(kernel, "note it")

    assert ran == []
    assert [c.arguments for c in events if isinstance(c, ToolCall)] == [{}]
    assert [r.ok for r in events if isinstance(r, ToolResult)] == [False]
    result = json.dumps(sent(sim))
    assert "invalid arguments for note:" in result and "Resend the call" in result
    assert isinstance(events[-1], Completed)
    # the history stays acceptable: the next turn goes through the pairing-strict simulator
    sim.enqueue(text_reply("ok"))
    events = await run(kernel, "again")
    assert isinstance(events[-1], Completed) and events[-1].reply == "ok"


async def test_the_registry_validates_repaired_arguments_without_repairing_again() -> None:
    registry = ToolRegistry()
    received: list[dict[str, Any]] = []

    @registry.tool
    def note(text: str) -> str:
        """Take a note.

        Args:
            text: the note
        """
        received.append({"text": text})
        return "noted"

    wrapped = {"input": {"text": "x"}}  # what a repair would unwrap
    assert (await registry.call("note", dict(wrapped))).ok
    refused = await registry.call("note", dict(wrapped), repaired=True)
    assert not refused.ok and "text" in refused.content
    assert received == [{"text": "x"}]
