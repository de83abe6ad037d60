"""/remember, /memory and /forget within a chat's scopes (issue 18), on a real Kernel
with project and persona files beside config.toml: /remember saves into the chat's
project, /memory shows each memory's scope and only those the chat may see."""

from __future__ import annotations

from pathlib import Path

from kernel.agent.scope import PERSONA, PROJECT
from kernel.app import Kernel
from kernel.commands import Commands
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim

KERNEL_CHAT, GARDEN_CHAT, PLAIN_CHAT = "console:kernel", "console:garden", "console:plain"


def write(base: Path, folder: str, name: str, description: str) -> None:
    path = base / folder / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\nBe brief.\n")


async def scoped_kernel(make_kernel: KernelFactory, sim: AnthropicSim) -> Kernel:
    kernel = await make_kernel(sim, language="en")
    base = kernel.config.base_dir
    write(base, "projects", "kernel", "the Kernel repo")
    write(base, "projects", "garden", "the garden")
    write(base, "personas", "poet", "answers in verse")
    await kernel.agent.scopes.set(KERNEL_CHAT, PROJECT, "kernel")
    await kernel.agent.scopes.set(KERNEL_CHAT, PERSONA, "poet")
    await kernel.agent.scopes.set(GARDEN_CHAT, PROJECT, "garden")
    return kernel


async def say(commands: Commands, conversation: str, line: str) -> str:
    name, _, arg = line.lstrip("/").partition(" ")
    reply = await commands.run(conversation, name, arg)
    assert reply is not None
    return reply.text


def rows(listing: str) -> list[str]:
    """The listing's rows without their number and date."""
    return [line.split(" ", 2)[2] for line in listing.splitlines()[1:]]


async def test_remember_goes_to_the_chat_project_and_memory_lists_what_it_sees(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await scoped_kernel(make_kernel, anthropic_sim)
    commands = Commands(kernel)
    assert await say(commands, PLAIN_CHAT, "/remember likes green tea") == (
        "Remembered (/memory lists them all)"
    )
    assert await say(commands, KERNEL_CHAT, "/remember the repo is ~/src/kernel") == (
        "Remembered for project kernel (/memory lists them all)"
    )
    assert await say(commands, GARDEN_CHAT, "/remember water the roses on Sunday") == (
        "Remembered for project garden (/memory lists them all)"
    )
    # already a global memory: the same fact in a project is no new one
    assert await say(commands, GARDEN_CHAT, "/remember Likes GREEN tea") == (
        "Already remembered (/memory lists them all)"
    )
    await kernel.memories.add("answers in haiku", "feedback", "persona:poet")

    assert rows(await say(commands, KERNEL_CHAT, "/memory")) == [
        "(persona poet) [feedback] answers in haiku",
        "(project kernel) the repo is ~/src/kernel",
        "(global) likes green tea",
    ]
    assert rows(await say(commands, GARDEN_CHAT, "/memory")) == [
        "(project garden) water the roses on Sunday",
        "(global) likes green tea",
    ]
    assert rows(await say(commands, PLAIN_CHAT, "/memory")) == ["(global) likes green tea"]

    # /forget #n counts in this chat's own listing
    await say(commands, KERNEL_CHAT, "/memory")
    assert await say(commands, KERNEL_CHAT, "/forget #2") == "Deleted 1 memory(ies)"
    assert sorted(m.scope for m in await kernel.memories.recent()) == [
        "global",
        "persona:poet",
        "project:garden",
    ]

    # leaving the project: the chat sees global and its persona's only, saves globally
    await kernel.agent.scopes.set(KERNEL_CHAT, PROJECT, None)
    assert await say(commands, KERNEL_CHAT, "/remember plays go") == (
        "Remembered (/memory lists them all)"
    )
    assert rows(await say(commands, KERNEL_CHAT, "/memory")) == [
        "(global) plays go",
        "(persona poet) [feedback] answers in haiku",
        "(global) likes green tea",
    ]


async def test_the_listing_in_chinese_names_each_scope(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim)
    write(kernel.config.base_dir, "projects", "kernel", "Kernel 仓库")
    await kernel.agent.scopes.set(KERNEL_CHAT, PROJECT, "kernel")
    commands = Commands(kernel)
    assert "项目 kernel" in await say(commands, KERNEL_CHAT, "/remember 仓库在 ~/src/kernel")
    await kernel.memories.add("喜欢乌龙茶", "user")
    assert rows(await say(commands, KERNEL_CHAT, "/memory")) == [
        "（全局） [用户] 喜欢乌龙茶",
        "（项目 kernel） 仓库在 ~/src/kernel",
    ]


async def test_forget_deletes_only_what_the_chat_sees_now(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await scoped_kernel(make_kernel, anthropic_sim)
    commands = Commands(kernel)
    await say(commands, KERNEL_CHAT, "/remember the repo is ~/src/kernel")
    await say(commands, KERNEL_CHAT, "/memory")  # #1 is the kernel project's
    await kernel.agent.scopes.set(KERNEL_CHAT, PROJECT, "garden")  # switched since the listing
    await say(commands, KERNEL_CHAT, "/forget 1")
    assert [m.text for m in await kernel.store.list_memories()] == ["the repo is ~/src/kernel"]


async def test_status_counts_the_memories_the_chat_sees(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await scoped_kernel(make_kernel, anthropic_sim)
    commands = Commands(kernel)
    await say(commands, PLAIN_CHAT, "/remember likes green tea")
    await say(commands, KERNEL_CHAT, "/remember the repo is ~/src/kernel")
    await say(commands, GARDEN_CHAT, "/remember water the roses on Sunday")
    # global + its project's: 2 of the 3; the plain chat sees the global one only
    assert ", 2 memories" in await say(commands, KERNEL_CHAT, "/status full")
    assert ", 1 memories" in await say(commands, PLAIN_CHAT, "/status full")
