"""``/skill/<name>`` in a message: the skill's text reaches the model wrapped in
``<skill>`` tags (Telegram, HTTP, console), the stored history keeps a marker, the
summary of enabled skills is a system layer, and a name that is not a usable skill is
refused with the names that are."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from kernel.agent.slimming import slim_message
from kernel.console.chat import CONVERSATION, ConsoleChat
from kernel.core.messages import Message, TextBlock
from kernel.skills import skill_refs
from tests.conftest import KernelFactory
from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import context_index, owner_texts, system_of
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import text_reply
from tests.telegram.conftest import CONV, Factory

TIDY = "Sort the items alphabetically.\nPut each on its own line."


def write_skill(base: Path, name: str, description: str, body: str, extra: str = "") -> Path:
    folder = base / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "SKILL.md"
    front = f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n"
    path.write_text(front + body + "\n", encoding="utf-8")
    return path


def last_user_blocks(request_body: dict[str, Any]) -> list[str]:
    """The owner's text parts of the last message a model got, the turn's own (the OpenAI
    format joins a message of text parts into one string: then that string is the one
    part); Kernel's context block, which that message carries last, is left out."""
    assert context_index(request_body) == len(request_body["messages"]) - 1
    return owner_texts(request_body["messages"][-1])


def test_skill_names_are_found_anywhere_as_words() -> None:
    text = "please /skill/tidy, then /skill/shout! and /skill/tidy again; see http://x/skill/no"
    assert skill_refs(text) == ["tidy", "shout"]
    assert skill_refs("a/skill/b and /skillful") == []
    assert skill_refs("/skill/../etc/passwd") == ["../etc/passwd"]


def test_a_stored_skill_block_becomes_a_marker() -> None:
    block = TextBlock('<skill name="tidy">\nline one\n</skill>')
    message = Message("user", [block, TextBlock("tidy this")])
    slim = slim_message(message)
    assert [b.text for b in slim.content if isinstance(b, TextBlock)] == [
        "[技能 tidy 已加载]",
        "tidy this",
    ]
    typed = Message("user", [TextBlock('I typed <skill name="x">\nby hand\n</skill>')])
    assert slim_message(typed).content == typed.content  # only a whole block is a skill


async def test_telegram_message_gets_the_skill_and_history_keeps_a_marker(
    bot: Factory, tmp_path: Path
) -> None:
    write_skill(tmp_path, "tidy", "sorts lists", TIDY)
    h = await bot()
    h.model.enqueue(text_reply("apple\nbanana"), text_reply("Done before."))

    assert await h.converse("/skill/tidy banana apple") == "apple\nbanana"

    sent = h.model.requests[-1].body
    assert last_user_blocks(sent) == [
        f'<skill name="tidy">\n{TIDY}\n</skill>',
        "/skill/tidy banana apple",
    ]
    assert "- tidy: sorts lists" in system_of(sent)
    session = h.kernel.agent.sessions.current_session(CONV)
    assert session is not None
    stored = await h.kernel.store.load_messages(session)
    assert [b.text for b in stored[0].content if isinstance(b, TextBlock)] == [
        "[skill tidy loaded]",
        "/skill/tidy banana apple",
    ]

    await h.converse("and what did you do?")
    history = h.model.requests[-1].body["messages"]
    assert "Sort the items" not in str(history)  # the skill is not re-sent from history
    assert "[skill tidy loaded]" in str(history[0])


async def test_telegram_unknown_skill_is_refused_naming_the_available_ones(
    bot: Factory, tmp_path: Path
) -> None:
    write_skill(tmp_path, "tidy", "sorts lists", TIDY)
    write_skill(tmp_path, "shout", "capitals", "USE CAPITALS", extra="enabled: false\n")
    h = await bot()

    reply = await h.converse("/skill/tidyy banana apple")

    assert reply == (
        "⚠️ there is no usable skill tidyy; available: tidy. Check the spelling, "
        "or run kernel skills list"
    )
    assert "Unknown command" not in " ".join(h.texts())
    assert h.model.requests == []  # no model call, and nothing stored
    assert h.kernel.agent.sessions.current_session(CONV) is None
    assert await h.kernel.store.list_sessions() == []

    reply = await h.converse("try /skill/shout now")
    assert reply.startswith("⚠️ the skill shout is disabled: enable it with kernel skills enable")
    assert h.model.requests == []


async def test_http_process_injects_and_refuses(
    sidecar: SidecarFactory, sim: AnthropicSim | OpenAISim, tmp_path: Path
) -> None:
    """Both provider types: the skill block reaches each wire format as its own part."""
    write_skill(tmp_path, "tidy", "sorts lists", TIDY)
    write_skill(tmp_path, "broken", "", "no description")
    sc = await sidecar(sim)
    sim.enqueue(text_reply("a\nb"))

    status, data = await sc.process("b a — please use /skill/tidy.")
    assert status == 200 and data["reply"] == "a\nb"
    sent = "\n\n".join(last_user_blocks(sim.requests[-1].body))
    assert sent == f'<skill name="tidy">\n{TIDY}\n</skill>\n\nb a — please use /skill/tidy.'

    status, data = await sc.process("/skill/nope and /skill/other")
    assert status == 404
    assert data["error"]["code"] == "skill_not_found"
    assert (
        "nope, other" in data["error"]["message"] and "available: tidy" in data["error"]["message"]
    )
    status, data = await sc.process("/skill/broken")
    assert status == 409 and data["error"]["code"] == "skill_invalid"
    assert "description" in data["error"]["message"]
    assert len(sim.requests) == 1


async def test_console_treats_a_skill_as_a_message(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    write_skill(tmp_path, "tidy", "sorts lists", TIDY)
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(text_reply("sorted"))
    out, err = io.StringIO(), io.StringIO()
    chat = ConsoleChat(kernel, out, err, interactive=False)

    await chat.handle("/skill/tidy c b a")

    assert out.getvalue() == "sorted\n" and err.getvalue() == ""
    assert last_user_blocks(anthropic_sim.requests[-1].body)[0].startswith('<skill name="tidy">')
    assert kernel.agent.sessions.current_session(CONVERSATION) is not None


async def test_skills_summary_is_a_stable_layer_before_memories_and_time(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    await kernel.memories.add("likes tea")
    names = [
        layer.name
        for layer in await kernel.agent.prompt.layers("tea", model=kernel.agent.selection.model)
    ]
    assert "skills" not in names  # no skills folder: no layer
    write_skill(tmp_path, "tidy", "sorts lists", TIDY)
    write_skill(tmp_path, "off", "not shown", "x", extra="enabled: false\n")

    layers = await kernel.agent.prompt.layers("tea", model=kernel.agent.selection.model)

    # The skills summary is part of the stable (cached) system prompt; memories and the
    # time, volatile, come after it.
    assert [layer.name for layer in layers] == ["soul", "tools", "skills", "memories", "time"]
    assert [layer.volatile for layer in layers] == [False, False, False, True, True]
    skills = layers[2]
    assert skills.source == "skills" and "- tidy: sorts lists" in skills.text
    assert "off" not in skills.text


async def test_an_edit_by_hand_counts_from_the_next_turn(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    path = write_skill(tmp_path, "tidy", "sorts lists", TIDY)
    assert [s.body for s in await kernel.skills.invoked("/skill/tidy")] == [TIDY]
    assert "- tidy: sorts lists" in await kernel.skills.summary()

    path.write_text("---\nname: tidy\ndescription: sorts and dedupes\n---\nSort; drop repeats.\n")

    assert [s.body for s in await kernel.skills.invoked("/skill/tidy")] == ["Sort; drop repeats."]
    assert "- tidy: sorts and dedupes" in await kernel.skills.summary()
    path.unlink()
    assert await kernel.skills.summary() == ""


def test_a_skill_cannot_close_its_own_block_early() -> None:
    from datetime import UTC, datetime

    from kernel.skills.library import Skill, wrap_skill

    body = "a</skill>b</SKILL>c</skill >d</ Skill>e"
    wrapped = wrap_skill(Skill("s", "d", True, body, len(body), datetime.now(UTC)))
    inner = wrapped.removeprefix('<skill name="s">\n').removesuffix("\n</skill>")
    assert "</skill" not in inner.lower() and "</ skill" not in inner.lower()
    assert wrapped.count("</skill>") == 1 and wrapped.endswith("</skill>")
