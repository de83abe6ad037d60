"""Reasoning on the wire, through the real SDKs against the simulators: Claude thinking
(adaptive with an effort, or a budget), OpenAI-compatible ``reasoning_effort`` only for an
endpoint declared to reason, and thinking blocks round-tripped through a tool loop as the
Messages API requires (the simulator refuses what the real API refuses)."""

from __future__ import annotations

import pytest

from kernel.core.errors import CapabilityError, InputRefusedError, ProviderError, failover_cause
from kernel.core.messages import Message, TextBlock, ToolResultBlock, ToolSpec, ToolUseBlock
from kernel.core.provider import Sampling, Thinking, thinking_blocks, thinking_for
from tests.providers.wire import Call, Factory, ask, body
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Reply, Text, ToolUse, text_reply
from tests.sim.script import Thinking as Thought

NOW = ToolSpec("now", "the time", {"type": "object", "properties": {}})


# ---------------------------------------------------------------------- Claude


async def test_claude_level_is_adaptive_thinking_with_its_effort(
    anthropic_sim: AnthropicSim, make_provider: Factory
) -> None:
    provider = make_provider(anthropic_sim)
    anthropic_sim.enqueue(Reply(Thought("weighing it"), Text("42")))
    completion = await Call().completion(provider, ask(thinking=thinking_for("high")))
    sent = body(anthropic_sim)
    assert sent["thinking"] == {"type": "adaptive"}
    assert sent["output_config"] == {"effort": "high"}
    # A turn sets no sampling: nothing the API refuses with thinking is sent.
    assert not {"temperature", "top_k", "top_p"} & sent.keys()
    assert completion.text == "42"
    [part] = completion.thinking
    assert part.text == "weighing it"
    assert anthropic_sim.signatures[part.signature] == "weighing it"


async def test_claude_budget_keeps_max_tokens_above_it(
    anthropic_sim: AnthropicSim, make_provider: Factory
) -> None:
    provider = make_provider(anthropic_sim, max_tokens=4096)
    anthropic_sim.enqueue(text_reply("ok"), text_reply("ok"), text_reply("ok"))
    call = Call()
    await call.completion(provider, ask(thinking=thinking_for(8000)))
    sent = body(anthropic_sim)
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 8000}
    assert sent["max_tokens"] == 8000 + 4096  # the answer keeps its own room
    assert "output_config" not in sent
    # Below the provider's max_tokens: sent as asked.
    await call.completion(provider, ask(thinking=Thinking("enabled", budget_tokens=2048)))
    assert body(anthropic_sim)["max_tokens"] == 4096
    assert body(anthropic_sim)["thinking"]["budget_tokens"] == 2048
    # Under the API's minimum (a /v1 budget cut to a small cap): raised to it.
    await call.completion(
        provider, ask(max_tokens=1024, thinking=Thinking("enabled", budget_tokens=1000))
    )
    assert body(anthropic_sim)["thinking"]["budget_tokens"] == 1024
    assert body(anthropic_sim)["max_tokens"] == 2048


async def test_claude_without_the_reasoning_capability_sends_no_thinking(
    anthropic_sim: AnthropicSim, make_provider: Factory
) -> None:
    provider = make_provider(anthropic_sim, capabilities=["stream", "tool_call"])
    assert not provider.capabilities.reasoning
    anthropic_sim.enqueue(text_reply("plain"))
    await Call().completion(provider, ask(thinking=thinking_for("low")))
    assert not {"thinking", "output_config"} & body(anthropic_sim).keys()
    with pytest.raises(CapabilityError):
        await Call().completion(provider, ask(thinking=thinking_for(2048)))
    assert len(anthropic_sim.requests) == 1  # refused before anything was sent


async def test_v1_sampling_with_thinking_is_sent_as_set_and_refused_by_the_api(
    anthropic_sim: AnthropicSim, make_provider: Factory
) -> None:
    """A /v1 client's temperature goes on as the client set it: the API's refusal is the
    client's to read, not silently dropped."""
    provider = make_provider(anthropic_sim)
    request = ask(thinking=thinking_for("medium"), sampling=Sampling(temperature=0.5))
    with pytest.raises(ProviderError, match="`temperature` may only be set to 1") as caught:
        await Call().completion(provider, request)
    assert caught.value.status == 400 and failover_cause(caught.value) is None
    assert body(anthropic_sim)["temperature"] == 0.5
    with pytest.raises(ProviderError, match="`top_k` must be unset"):
        request = ask(thinking=thinking_for(2048), sampling=Sampling(top_k=5))
        await Call().completion(provider, request)
    anthropic_sim.enqueue(text_reply("fine"))
    request = ask(thinking=thinking_for("medium"), sampling=Sampling(temperature=1.0))
    assert (await Call().completion(provider, request)).text == "fine"


def _tool_loop(call_id: str) -> list[Message]:
    return [
        Message("user", [TextBlock("what time is it")]),
        Message("assistant", [ToolUseBlock(call_id, "now", {})]),
        Message("user", [ToolResultBlock(call_id, "9:00")]),
    ]


@pytest.mark.parametrize("reasoning", ["high", 2048], ids=["adaptive", "budget"])
async def test_thinking_round_trips_through_a_tool_loop(
    anthropic_sim: AnthropicSim, reasoning: str | int, make_provider: Factory
) -> None:
    provider = make_provider(anthropic_sim, max_tokens=4096)
    thinking = thinking_for(reasoning)
    anthropic_sim.enqueue(Reply(Thought("I should call now"), ToolUse("now", {}, id="toolu_1")))
    first = await Call().completion(provider, ask(tools=[NOW], thinking=thinking))
    [call] = first.tool_calls
    blocks = thinking_blocks(first.thinking)
    anthropic_sim.enqueue(text_reply("It is nine."))
    request = ask(tools=[NOW], thinking=thinking, history_thinking={1: blocks})
    request.messages = _tool_loop(call.id)
    second = await Call().completion(provider, request)
    assert second.text == "It is nine."
    # The thinking block opens its assistant message, exactly as it came.
    assert body(anthropic_sim)["messages"][1]["content"][0] == blocks[0]
    assert blocks[0]["type"] == "thinking" and blocks[0]["thinking"] == "I should call now"


async def test_thinking_blocks_not_sent_back_or_changed_are_refused(
    anthropic_sim: AnthropicSim, make_provider: Factory
) -> None:
    provider = make_provider(anthropic_sim, max_tokens=4096)
    thinking = thinking_for(2048)
    anthropic_sim.enqueue(Reply(Thought("plan"), ToolUse("now", {}, id="toolu_1")))
    first = await Call().completion(provider, ask(tools=[NOW], thinking=thinking))
    blocks = thinking_blocks(first.thinking)

    # Left out: the API wants the tool loop's assistant message to start with thinking.
    request = ask(tools=[NOW], thinking=thinking)
    request.messages = _tool_loop("toolu_1")
    with pytest.raises(ProviderError, match="Expected `thinking` or `redacted_thinking`") as caught:
        await Call().completion(provider, request)
    # A request Kernel got wrong: neither the owner's content nor another model's business.
    assert not isinstance(caught.value, InputRefusedError)
    assert failover_cause(caught.value) is None

    # Changed: the signature no longer matches the text.
    changed = [{**blocks[0], "thinking": "plan, edited"}]
    request.history_thinking = {1: changed}
    with pytest.raises(ProviderError, match="Invalid `signature` in `thinking` block"):
        await Call().completion(provider, request)

    # Without thinking, the same history is fine (a turn that went on without it).
    anthropic_sim.enqueue(text_reply("nine"))
    request.thinking, request.history_thinking = None, {}
    assert (await Call().completion(provider, request)).text == "nine"


# ---------------------------------------------------------------------- OpenAI-compatible


async def test_openai_reasoning_effort_only_when_declared(
    openai_sim: OpenAISim, make_provider: Factory
) -> None:
    declared = make_provider(openai_sim, capabilities=["stream", "tool_call", "reasoning"])
    undeclared = make_provider(openai_sim)  # openai_compat: no reasoning unless listed
    assert declared.capabilities.reasoning and not undeclared.capabilities.reasoning
    openai_sim.enqueue(Reply(Thought("pondering"), Text("42")), text_reply("a"), text_reply("b"))
    completion = await Call().completion(declared, ask(thinking=thinking_for("high")))
    assert body(openai_sim)["reasoning_effort"] == "high"
    assert [p.text for p in completion.thinking] == ["pondering"]
    await Call().completion(declared, ask(thinking=thinking_for(8000)))
    assert body(openai_sim)["reasoning_effort"] == "medium"  # a budget, as an effort
    await Call().completion(undeclared, ask(thinking=thinking_for("high")))
    assert "reasoning_effort" not in body(openai_sim)


async def test_openai_sim_refuses_an_unknown_effort(
    openai_sim: OpenAISim, make_provider: Factory
) -> None:
    provider = make_provider(openai_sim, capabilities=["stream", "reasoning"])
    request = ask(thinking=Thinking("adaptive", effort="extreme"))
    with pytest.raises(ProviderError, match="Invalid value: 'extreme'. Supported values") as caught:
        await Call().completion(provider, request)
    assert caught.value.status == 400


async def test_capabilities_come_from_the_configuration(
    anthropic_sim: AnthropicSim, openai_sim: OpenAISim, make_provider: Factory
) -> None:
    claude = make_provider(anthropic_sim).capabilities
    assert claude.stream and claude.tool_call and claude.attachments and claude.reasoning
    compat = make_provider(openai_sim).capabilities
    assert compat.stream and compat.tool_call and compat.attachments and not compat.reasoning
    narrowed = make_provider(openai_sim, capabilities=["stream"]).capabilities
    assert not (narrowed.tool_call or narrowed.attachments or narrowed.reasoning)
