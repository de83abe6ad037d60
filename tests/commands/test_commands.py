"""The channel-neutral command set on a real Kernel (SQLite on disk, the model
simulator): replies, refusals, and one ``#n`` listing per conversation."""

from __future__ import annotations

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.commands import Choice, Commands
from kernel.commands.status import ChannelReport
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply

A, B = "console:a", "console:b"


async def converse(kernel: Kernel, conversation: str, text: str) -> None:
    async for _ in kernel.agent.start_turn(conversation, UserInput(text, channel="console")):
        pass


async def text_of(commands: Commands, conversation: str, line: str) -> str:
    name, _, arg = line.lstrip("/").partition(" ")
    reply = await commands.run(conversation, name, arg)
    assert reply is not None
    return reply.text


async def test_a_session_number_is_its_own_and_memory_listings_are_per_conversation(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(text_reply("one"), text_reply("two"))
    commands = Commands(kernel)
    await converse(kernel, A, "first")
    await commands.run(A, "new", "")
    await converse(kernel, A, "second")

    listing = await text_of(commands, A, "/history")
    assert [line[:3] for line in listing.splitlines()[1:]] == ["#2 ", "#1 "]
    # A session's number is its own: B, which never listed, names the same session
    assert (await text_of(commands, B, "/resume #1")).startswith("Resumed session #1 “first”")
    refused = await commands.run(B, "resume", "#3")
    assert refused is not None and refused.error
    assert refused.text == "Session #3 does not exist: list sessions with /history"
    assert (await text_of(commands, A, "/resume #1")).startswith("Resumed session #1")
    # a bare /resume lists like /history, each session a choice, the current one marked
    listed = await commands.run(B, "resume", "")
    assert listed is not None and not listed.error
    assert listed.text.startswith("Sessions (continue one with /resume #n):")
    assert [c.command for c in listed.choices] == ["/resume #2", "/resume #1"]
    assert [c.current for c in listed.choices] == [False, True]  # B resumed #1 above
    mine = await commands.run(A, "resume", "")
    assert mine is not None
    current = kernel.agent.sessions.current_session(A)
    assert [c.command for c in mine.choices if c.current] == [f"/resume #{current}"]

    await text_of(commands, A, "/remember tea")
    assert (await text_of(commands, A, "/memory")).splitlines()[1].endswith(" tea")
    assert (await text_of(commands, B, "/forget #1")).startswith("Invalid memory number #1")
    assert await text_of(commands, A, "/forget #1") == "Deleted 1 memory(ies)"
    # the numbers changed: A lists again before the next #n
    assert (await text_of(commands, A, "/forget #1")).startswith("Invalid memory number #1")


async def test_memory_commands_and_their_usage(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    commands = Commands(kernel)
    usage = await commands.run(A, "remember", "  ")
    assert usage is not None and usage.error and usage.text == "Usage: /remember what to keep"
    assert await text_of(commands, A, "/remember jasmine tea") == (
        "Remembered (/memory lists them all)"
    )
    assert await text_of(commands, A, "/remember jasmine tea") == (
        "Already remembered (/memory lists them all)"
    )
    assert await text_of(commands, A, "/forget") == (
        "Usage: /forget #n[/#m…] (list them with /memory first)"
    )
    await text_of(commands, A, "/memory")
    assert await text_of(commands, A, "/forget #1") == "Deleted 1 memory(ies)"
    assert await text_of(commands, A, "/memory") == "No long-term memories yet"


async def test_status_cancel_provider_and_unknown(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    commands = Commands(kernel)

    # issue 34: the owner's short view, then the operator's view with the channel's lines
    short = (await commands.status(A, ChannelReport(["CHANNEL LINE"]))).text.splitlines()
    assert short == [
        f"Model: main / {kernel.agent.selection.model}",
        "Session: new (no messages yet)",
        "State: idle",
        "Spend: today $0.00 / no limit",
        "Health: OK",
    ]
    full = (await commands.status(A, ChannelReport(["CHANNEL LINE"]), "full")).text
    status = full.splitlines()
    assert status[:5] == short
    assert status[5] == "Budget: today $0.00 / no limit · month $0.00 / no limit"
    assert status[6] == "CLI delegation: idle"
    assert status[8].startswith("Memory search:")
    assert status[9:] == ["CHANNEL LINE", "Next scheduled job: none", "Last error: —"]
    assert (await commands.status(A, arg="fulll")).text.startswith("Usage: /status")

    assert await text_of(commands, A, "/cancel") == "Nothing is running"
    provider = await commands.run(A, "provider", "")
    assert provider is not None and provider.text.startswith("Current provider: main")
    assert Choice("main", "/provider main", current=True) in provider.choices
    model = await commands.run(A, "model", "")
    assert model is not None
    assert [c.command for c in model.choices] == [
        f"/model {m}" for m in kernel.agent.selection.models
    ]
    assert [c.label for c in model.choices if c.current] == [kernel.agent.selection.model]
    titles = await commands.run(A, "retitle", "")  # nothing to name yet
    assert titles is not None and titles.error and titles.text.startswith("There is no current")
    assert await commands.run(A, "bogus", "") is None
