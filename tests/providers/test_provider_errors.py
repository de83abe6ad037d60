"""Provider failure modes through the real SDKs: malformed and stalled streams, 529
overload, capability refusals, and what reaches the user."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.events import AssistantDelta, Completed, ErrorEvent
from kernel.core.messages import ImageBlock
from kernel.tools.registry import ToolReply
from tests.agent.test_turns import CONV, Sim, run
from tests.conftest import KernelFactory, write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error, Reply, Text, text_reply, tool_reply


async def test_malformed_stream_before_output_is_retried(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(sim)
    sim.enqueue(Reply(Text("never seen"), malformed_after=1), text_reply("clean answer"))

    events = await run(kernel, "hi")

    assert isinstance(events[-1], Completed) and events[-1].reply == "clean answer"
    assert len(sim.requests) == 2


async def test_malformed_stream_after_output_is_an_error_not_a_replay(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(sim)
    sim.enqueue(Reply(Text("half of it", chunks=["half ", "of it"]), malformed_after=3))

    events = await run(kernel, "hi")

    assert [e.delta for e in events if isinstance(e, AssistantDelta)][:1] == ["half "]
    assert isinstance(events[-1], ErrorEvent)
    assert len(sim.requests) == 1  # text was already shown: no silent second answer
    sim.enqueue(text_reply("fine now"))
    assert (await run(kernel, "again"))[-1] == Completed(1, "fine now")


async def test_stalled_stream_times_out_into_an_error(
    anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    path = write_config(tmp_path, anthropic_sim.base_url, "claude")
    path.write_text(
        path.read_text()
        .replace("timeout = 10.0", "timeout = 0.5")
        .replace("max_retries = 2", "max_retries = 0")
    )
    anthropic_sim.enqueue(Reply(Text("stuck"), stall_after=1))
    async with Kernel(load_config(path, env={}, require_telegram=False)) as kernel:
        events = await run(kernel, "hi")
    error = events[-1]
    assert isinstance(error, ErrorEvent)
    assert "timed out" in error.message or "timeout" in error.code


async def test_overloaded_529_is_retried(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim)
    anthropic_sim.enqueue(Error(529, "overloaded_error", "Overloaded"), text_reply("made it"))
    events = await run(kernel, "hi")
    assert isinstance(events[-1], Completed) and events[-1].reply == "made it"


async def test_client_error_is_not_retried_and_names_status_and_message(
    sim: Sim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(sim)
    sim.enqueue(Error(400, "invalid_request_error", "max_tokens: too large"))
    events = await run(kernel, "hi")
    error = events[-1]
    assert isinstance(error, ErrorEvent)
    assert "400" in error.meta["detail"] and "max_tokens: too large" in error.meta["detail"]
    assert "max_tokens" not in error.message and "/model" in error.message  # issue 34
    assert len(sim.requests) == 1


async def test_declared_text_only_endpoint_refuses_images_by_name(
    openai_sim: OpenAISim, tmp_path: Path
) -> None:
    path = write_config(tmp_path, openai_sim.base_url, "openai_compat")
    path.write_text(path.read_text() + 'capabilities = ["stream"]\n')
    async with Kernel(
        load_config(path, env={"KERNEL_LANGUAGE": "en"}, require_telegram=False)
    ) as kernel:
        png = base64.b64encode(b"img").decode()
        turn = kernel.agent.start_turn(
            CONV, UserInput("see", images=[ImageBlock("image/png", png)])
        )
        error = await turn.wait()
        assert isinstance(error, ErrorEvent)
        assert "main" in error.message and "/provider" in error.message
        assert openai_sim.requests == []  # refused before anything was sent
        # without tool_call, no tools are offered to the endpoint
        openai_sim.enqueue(text_reply("plain"))
        await run(kernel, "hello")
        assert "tools" not in (openai_sim.requests[-1].body or {})


async def test_disabled_tools_are_not_offered(
    anthropic_sim: AnthropicSim, make_kernel: KernelFactory
) -> None:
    kernel = await make_kernel(anthropic_sim, disabled_tools=["memory_delete"])
    anthropic_sim.enqueue(text_reply("ok"))
    await run(kernel, "hi")
    names = [t["name"] for t in anthropic_sim.requests[-1].body["tools"]]
    assert "memory_add" in names and "memory_delete" not in names


async def test_images_from_a_tool_are_noted_not_sent_to_a_text_only_endpoint(
    openai_sim: OpenAISim, tmp_path: Path
) -> None:
    path = write_config(tmp_path, openai_sim.base_url, "openai_compat")
    path.write_text(path.read_text() + 'capabilities = ["stream", "tool_call"]\n')
    async with Kernel(
        load_config(path, env={"KERNEL_LANGUAGE": "en"}, require_telegram=False)
    ) as kernel:

        @kernel.tools.tool
        def snapshot() -> ToolReply:
            """Take a picture."""
            return ToolReply("one picture", [ImageBlock("image/png", "iVBORw0KGgo=")])

        openai_sim.enqueue(tool_reply("snapshot", {}), text_reply("Described."))
        final = await kernel.agent.start_turn(CONV, UserInput("look")).wait()
        assert isinstance(final, Completed) and final.reply == "Described."
        messages = openai_sim.requests[1].body["messages"]
        [tool] = [m for m in messages if m["role"] == "tool"]
        assert "not shown: the current provider takes no images" in tool["content"]
        assert "image_url" not in json.dumps(messages)
