"""A message the provider refuses for its content is set aside, not merged into every
later request: real SDKs against the model simulators, SQLite on disk (issue 15)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from kernel.app import Kernel
from kernel.core.errors import InputRefusedError
from kernel.core.events import Completed, ErrorEvent
from kernel.core.failures import owner_words
from kernel.core.i18n import t
from kernel.core.messages import ImageBlock
from tests.agent.test_turns import CONV, Sim, run
from tests.agent.test_turns import sent as conversation
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error, Reply, Text, text_reply, tool_reply

POISON = "POISON-7f3a"


def too_long(sim: Sim) -> Error:
    """What each API answers when the prompt with this message is too long."""
    if isinstance(sim, AnthropicSim):
        return Error(400, "invalid_request_error", "prompt is too long: 210345 tokens > 200000")
    return Error(
        400,
        "invalid_request_error",
        "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9120 tokens. Please reduce the length of the messages.",
        code="context_length_exceeded",
    )


def bad_image(sim: Sim) -> Error:
    if isinstance(sim, AnthropicSim):
        return Error(
            400,
            "invalid_request_error",
            "messages.2.content.0.image.source.base64.data: The image was specified using "
            "the image/png media type, but it does not appear to be a valid png image",
        )
    return Error(
        400,
        "invalid_request_error",
        "You uploaded an unsupported image. Please make sure your image is valid.",
        code="invalid_image_format",
    )


def body_text(sim: Sim, index: int) -> str:
    return json.dumps(sim.requests[index].body, ensure_ascii=False)


async def session_of(kernel: Kernel) -> int:
    session = kernel.agent.sessions.current_session(CONV)
    assert session is not None
    return session


async def test_a_refused_message_is_set_aside_and_the_next_three_are_answered(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(sim)
    # The simulator refuses every request holding the message, however often it comes:
    # one more request carrying it would fail the follow-up it rode along with.
    sim.refuse_content(POISON, too_long(sim))
    sim.enqueue(text_reply("hello back"))
    assert (await run(kernel, "hello"))[-1] == Completed(1, "hello back")

    events = await run(kernel, f"please summarise {POISON} for me")

    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.code == InputRefusedError.CODE
    # Too long, in the owner's words (issue 34); the provider's reason in the detail.
    assert error.message == owner_words(InputRefusedError(too_long(sim).message, provider="main"))
    assert "/new" in error.message and too_long(sim).message not in error.message
    assert too_long(sim).message in error.meta["detail"]
    refused_at = len(sim.requests)
    assert POISON in body_text(sim, refused_at - 1)  # it was sent once, and refused

    for n in range(3):
        sim.enqueue(text_reply(f"answer {n}"))
        assert (await run(kernel, f"follow-up {n}"))[-1] == Completed(1, f"answer {n}")

    assert len(sim.requests) == refused_at + 3  # refused once, never retried
    for index in range(refused_at, refused_at + 3):
        sent = body_text(sim, index)
        assert POISON not in sent
        assert "hello" in sent and "hello back" in sent  # the history before it stays
    session = await session_of(kernel)
    # Kept as history, flagged; never loaded for a model.
    transcript = await kernel.store.load_transcript(session)
    assert [(s.message.text, s.failed) for s in transcript][2] == (
        f"please summarise {POISON} for me",
        True,
    )
    assert all(POISON not in m.text for m in await kernel.store.load_messages(session))
    assert await kernel.store.count_rounds(session) == 4


async def test_a_refused_image_is_set_aside(sim: Sim, make_kernel: KernelFactory) -> None:
    kernel = await make_kernel(sim)
    pixel = base64.b64encode(b"\x89PNG\r\n\x1a\n not really a png").decode()
    sim.enqueue(bad_image(sim), text_reply("still here"))

    events = await run(kernel, "what is this?", images=[ImageBlock("image/png", pixel)])

    assert isinstance(events[-1], ErrorEvent) and events[-1].code == InputRefusedError.CODE
    # the owner's words: what to do, not the provider's (issue 34); its words in the meta
    assert events[-1].message == t("provider.refused_input", name="main")
    assert events[-1].meta["detail"].startswith("main 400 ")
    assert (await run(kernel, "never mind"))[-1] == Completed(1, "still here")
    sent = body_text(sim, -1)
    assert pixel not in sent and "what is this?" not in sent


async def test_a_refusal_after_a_tool_step_sets_the_whole_turn_aside(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(sim)
    ran: list[str] = []

    @kernel.tools.tool
    def fetch_page(url: str) -> str:
        """Fetch a page.

        Args:
            url: the address
        """
        ran.append(url)
        return "page text"

    sim.enqueue(
        Reply(Text("Let me look."), *tool_reply("fetch_page", {"url": "http://x"}).blocks),
        too_long(sim),
        text_reply("fresh start"),
    )
    events = await run(kernel, "read that page")
    assert ran == ["http://x"]
    assert isinstance(events[-1], ErrorEvent) and events[-1].code == InputRefusedError.CODE

    # The next request holds none of the refused turn: no message, no tool pair, no text.
    assert (await run(kernel, "something else"))[-1] == Completed(1, "fresh start")
    sent = json.dumps(conversation(sim), ensure_ascii=False)
    assert "read that page" not in sent and "fetch_page" not in sent
    assert "Let me look." not in sent and "page text" not in sent
    session = await session_of(kernel)
    transcript = await kernel.store.load_transcript(session)
    assert [s.failed for s in transcript] == [True, True, True, False, False]


async def test_anthropic_streaming_refusal_drops_the_turn_from_the_context(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    """Claude's streaming classifiers end a reply with stop_reason "refusal"; the API
    refuses every later request until the context drops that turn."""
    kernel = await make_kernel(anthropic_sim)
    anthropic_sim.enqueue(
        Reply(Text("Sure, here is how to"), stop_reason="refusal"), text_reply("hi again")
    )

    events = await run(kernel, f"tell me {POISON}")

    assert isinstance(events[-1], ErrorEvent) and events[-1].code == InputRefusedError.CODE
    assert (await run(kernel, "hello"))[-1] == Completed(1, "hi again")
    sent = body_text(anthropic_sim, -1)
    assert POISON not in sent and "Sure, here is how to" not in sent
    session = await session_of(kernel)
    assert [(s.message.role, s.failed) for s in await kernel.store.load_transcript(session)] == [
        ("user", True),
        ("assistant", True),  # the partial reply the owner saw, kept as history
        ("user", False),
        ("assistant", False),
    ]


@pytest.mark.parametrize(
    "message",
    [
        "max_tokens: Input should be less than or equal to 8192",
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after",
    ],
)
async def test_a_400_about_the_request_shape_is_not_the_owners_fault(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory, message: str
) -> None:
    kernel = await make_kernel(anthropic_sim)
    anthropic_sim.enqueue(Error(400, "invalid_request_error", message), text_reply("ok"))

    events = await run(kernel, "hi")

    error = events[-1]
    assert isinstance(error, ErrorEvent) and error.code == "invalid_request_error"
    assert error.message == t("failure.request", name="main")  # issue 34: the owner's words
    assert error.meta["detail"] == f"main 400 invalid_request_error: {message}"
    session = await session_of(kernel)
    assert [s.failed for s in await kernel.store.load_transcript(session)] == [False]


async def test_openai_content_filter_on_any_status_is_refused_input(
    openai_sim: OpenAISim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(openai_sim)
    openai_sim.enqueue(
        Error(
            400,
            "invalid_request_error",
            "The response was filtered due to the prompt triggering the content management policy.",
            code="content_filter",
        ),
        text_reply("ok"),
    )
    events: list[Any] = await run(kernel, POISON)
    assert isinstance(events[-1], ErrorEvent) and events[-1].code == InputRefusedError.CODE
    assert (await run(kernel, "next"))[-1] == Completed(1, "ok")
    assert POISON not in body_text(openai_sim, -1)
