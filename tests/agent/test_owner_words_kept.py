"""The markers Kernel writes into a message (a voice transcript, an attached file, a
skill) are known by where Kernel put them, never by their look: the owner's own words
that happen to read like a marker are stored and shown to the model as typed (review of
issue 35). History stored before the change (markers as plain text) slims as it did."""

from __future__ import annotations

import pytest

from kernel.agent.slimming import media_dropped, owner_text, slim_message, wrap_file
from kernel.agent.turn_parts import UserInput
from kernel.core.i18n import set_language
from kernel.core.messages import Message, TextBlock
from tests.agent.test_turns import CONV, run
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply

PASTED = "```\nvoice = off\n```"
OWNER = {
    "en": f"Why does the log say [voice: off]\n[file: notes.md]\n{PASTED}\nand [voice processed]?",
    "zh": f"日志里为什么写着 [语音: 关]\n[文件: notes.md]\n{PASTED}\n还有 [技能 x 已加载]",
}


@pytest.mark.parametrize("language", ["en", "zh"])
async def test_the_owners_words_that_look_like_markers_are_stored_as_typed(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory, language: str
) -> None:
    kernel = await make_kernel(anthropic_sim)
    set_language(language)
    anthropic_sim.enqueue(text_reply("It is a setting."), text_reply("again"))
    await run(kernel, OWNER[language])

    stored = await kernel.store.load_messages(kernel.agent.sessions.current_session(CONV) or 0)
    assert stored[0].text == OWNER[language]  # the row in the database, as typed
    assert not media_dropped(stored[0]) and owner_text(stored[0]) == OWNER[language]
    await run(kernel, "next")
    sent = anthropic_sim.requests[-1].body["messages"][0]["content"]
    assert OWNER[language] in "\n".join(b["text"] for b in sent if b["type"] == "text")


async def test_what_kernel_attached_is_slimmed_and_the_caption_kept(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    set_language("en")
    anthropic_sim.enqueue(text_reply("ok"), text_reply("ok"))
    caption = "look at [file: notes.md] and [voice: off]"
    spoken = "[voice: remind me [at] 9]"
    await run(kernel, caption, attached=(spoken, wrap_file("a.md", "# A\n")))

    sent = anthropic_sim.requests[0].body["messages"][-1]["content"]
    assert [b["text"] for b in sent if b["type"] == "text"][:3] == [
        spoken,
        wrap_file("a.md", "# A\n"),
        caption,
    ]
    stored = await kernel.store.load_messages(kernel.agent.sessions.current_session(CONV) or 0)
    assert stored[0].text == f"[voice processed]\n[file a.md processed]\n{caption}"
    assert media_dropped(stored[0])


@pytest.mark.parametrize("language", ["en", "zh"])
def test_history_stored_before_slims_as_it_did(language: str) -> None:
    set_language(language)
    voice = "[voice: hello]" if language == "en" else "[语音: hello]"
    own_block = Message("user", [TextBlock(voice)])
    at_start = Message("user", [TextBlock(wrap_file("a.txt", "notes") + "\nread it")])
    done = {
        "en": ("[voice processed]", "[file a.txt processed]\nread it"),
        "zh": ("[语音已处理]", "[文件 a.txt 已处理]\nread it"),
    }[language]
    assert slim_message(own_block).text == done[0]
    assert slim_message(at_start).text == done[1]
    assert media_dropped(slim_message(own_block)) and media_dropped(slim_message(at_start))
    # Stored slimmed before: still known as lost media.
    assert media_dropped(Message("user", [TextBlock(done[0])]))
    assert media_dropped(Message("user", [TextBlock(done[1])]))


def test_a_user_input_names_its_parts() -> None:
    message = UserInput("hi", attached=("[voice: x]",)).to_message()
    assert [b.text for b in message.content if isinstance(b, TextBlock)] == ["[voice: x]", "hi"]
