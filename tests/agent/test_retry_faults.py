"""/retry under faults and hostile input (issue 20 review, R1/R2): a retry that ends
without an answer — refused, failed or cancelled — gives the old exchange back; a photo
is sent again as the owner sent it (or the retry is refused after a restart, never run
on a marker); a stored message is not expanded as a template again; a QQ chat's last
message (perhaps a guest's) never runs with the owner's rights; ``/rewind ²`` is a
refusal, not a crash. A real Kernel, SQLite on disk, the strict Anthropic simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel.agent.agent import SessionKey
from kernel.agent.turn_parts import UserInput
from kernel.app import Kernel
from kernel.commands import Commands
from kernel.console.chat import CONVERSATION
from kernel.core.errors import ConversationError
from kernel.core.messages import ImageBlock
from kernel.core.turns import Turn
from tests.conftest import KernelFactory
from tests.gateway.conftest import SidecarFactory
from tests.gateway.conftest import sidecar as sidecar  # noqa: F401 - the fixture, shared
from tests.gateway.test_process import PNG
from tests.prompts.conftest import FLAGS_ON
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error, Reply, Text, text_reply

TEMPLATE = UserInput("", channel="console")


async def finish(turn: Turn) -> list[object]:
    return [event async for event in turn]


async def ask(kernel: Kernel, text: str, **fields: object) -> list[object]:
    # a retry given back is written after its last event, while the chat is still busy
    await kernel.agent.sessions.wait_idle(CONVERSATION, 30)
    return await finish(kernel.agent.start_turn(CONVERSATION, UserInput(text, **fields)))  # type: ignore[arg-type]


def sent(sim: AnthropicSim) -> str:
    return json.dumps(sim.requests[-1].body["messages"], ensure_ascii=False)


async def test_a_retry_the_model_fails_gives_the_old_answer_back(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(
        text_reply("one"),
        text_reply("good enough"),
        Error(400, "invalid_request_error", "refused on retry"),
        text_reply("three"),
    )
    await ask(kernel, "q-one")
    await ask(kernel, "q-two")
    events = await finish(await kernel.agent.retry(CONVERSATION, TEMPLATE))
    assert type(events[-1]).__name__ == "ErrorEvent"

    await ask(kernel, "q-three")
    history = sent(anthropic_sim)
    # the old exchange is seen again, once; the failed copy is not
    assert history.count("q-two") == 1 and "good enough" in history
    session = kernel.agent.sessions.current_session(CONVERSATION)
    assert session is not None
    assert await kernel.agent.control.branches(session) == (
        1,
        1,
    )  # the failed copy, kept as history


@pytest.mark.slow  # seconds of waiting: dealt out first
async def test_a_retry_cancelled_at_once_gives_the_exchange_back(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(
        text_reply("one"),
        text_reply("two"),
        Reply(Text("slow", chunks=["sl", "ow"]), stall_after=3),
        text_reply("three"),
    )
    await ask(kernel, "q-one")
    await ask(kernel, "q-two")
    turn = await kernel.agent.retry(CONVERSATION, TEMPLATE)
    turn.cancel()
    await finish(turn)
    await ask(kernel, "q-three")
    history = sent(anthropic_sim)
    assert history.count("q-two") == 1 and '"two"' in history


async def test_a_retried_photo_is_sent_again_and_refused_after_a_restart(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    anthropic_sim.enqueue(text_reply("a cat?"), text_reply("a tiny image"))
    await ask(kernel, "what is this?", images=[ImageBlock("image/png", PNG)])
    await finish(await kernel.agent.retry(CONVERSATION, TEMPLATE))
    content = anthropic_sim.requests[-1].body["messages"][-1]["content"]
    assert [part["type"] for part in content][0] == "image"
    assert content[0]["source"]["data"] == PNG

    await kernel.stop()  # a restart: what the owner sent is not in memory any more
    again = await make_kernel(anthropic_sim, language="en")
    await again.agent.sessions.resume(CONVERSATION, (await again.store.list_sessions())[0].id)
    try:
        await again.agent.retry(CONVERSATION, TEMPLATE)
    except ConversationError as exc:
        assert exc.code == "retry_input_gone" and "send it again" in str(exc)
    else:
        raise AssertionError("a photo's marker was retried")
    assert len(anthropic_sim.requests) == 2


async def test_a_stored_template_is_not_expanded_again_on_retry(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "echo.md").write_text("{{X}}\n")
    kernel = await make_kernel(anthropic_sim, language="en", extra=FLAGS_ON)
    anthropic_sim.enqueue(text_reply("literal"), text_reply("still literal"))
    await ask(kernel, '/prompts:echo X="/prompts:gone"')
    await kernel.stop()
    again = await make_kernel(anthropic_sim, language="en", extra=FLAGS_ON)
    await again.agent.sessions.resume(CONVERSATION, (await again.store.list_sessions())[0].id)
    events = await finish(await again.agent.retry(CONVERSATION, TEMPLATE))
    assert type(events[-1]).__name__ == "Completed"
    last = anthropic_sim.requests[-1].body["messages"][-1]["content"]
    assert "/prompts:gone" in json.dumps(last)


async def test_retrying_a_qq_chat_over_http_is_refused_and_runs_nothing(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, language="en")
    opened = await sc.kernel.agent.sessions.open_session(SessionKey("qq", "stranger", "g1"))
    assert opened is not None
    guest = UserInput("/prompts:secret tell me", channel="qq", guest=True, guest_tools=())
    anthropic_sim.enqueue(text_reply("hello guest"))
    await finish(sc.kernel.agent.start_turn(opened.conversation, guest))
    status, data, _ = await sc.call("POST", f"/chats/chat-{opened.row.id}/retry")
    assert status == 409 and data["error"]["code"] == "retry_not_owner_chat"
    assert "qq" in data["error"]["message"]
    assert len(anthropic_sim.requests) == 1


async def test_rewind_with_odd_digits_or_nothing_after_is_a_refusal(
    make_kernel: KernelFactory,
    anthropic_sim: AnthropicSim,
    sidecar: SidecarFactory,
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    commands = Commands(kernel)
    for arg in ("²", "٣", "9" * 5000):
        reply = await commands.run(CONVERSATION, "rewind", arg)
        assert reply is not None and reply.error and "as a reply" in reply.text

    sc = await sidecar(anthropic_sim, language="en")
    anthropic_sim.enqueue(text_reply("only answer"))
    status, data = await sc.process("q", session_id="r1")
    assert status == 200
    chat_id = data["chat_id"]
    status, chat, _ = await sc.call("GET", f"/chats/{chat_id}?rounds=100")
    assert status == 200, chat
    answer = [m for m in chat["messages"] if m["role"] == "assistant"][-1]["sequence"]
    body = {"after_sequence": answer}
    status, data, _ = await sc.call("POST", f"/chats/{chat_id}/rewind", body)
    assert status == 409 and data["error"]["code"] == "rewind_nothing_after"


async def test_a_retry_that_fails_or_is_cancelled_after_some_words_gives_the_answer_back(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    """A part of an answer is no answer: the old one is seen again, the part is cut."""
    kernel = await make_kernel(anthropic_sim, language="en")
    half = Text("HALF-ANSWER", chunks=["HALF-", "ANSWER"])
    anthropic_sim.enqueue(
        text_reply("one"),
        text_reply("good enough"),
        Reply(half, error_after=4, error_type="invalid_request_error"),
        Reply(half, stall_after=4),
        text_reply("three"),
    )
    await ask(kernel, "q-one")
    await ask(kernel, "q-two")
    events = await finish(await kernel.agent.retry(CONVERSATION, TEMPLATE))
    assert type(events[-1]).__name__ == "ErrorEvent"
    await kernel.agent.sessions.wait_idle(CONVERSATION, 30)
    turn = await kernel.agent.retry(CONVERSATION, TEMPLATE)
    async for event in turn:  # cancelled once the first words are in
        if type(event).__name__ == "AssistantDelta":
            turn.cancel()
    await ask(kernel, "q-three")
    history = sent(anthropic_sim)
    assert "HALF" not in history
    assert history.count("q-two") == 1 and "good enough" in history
