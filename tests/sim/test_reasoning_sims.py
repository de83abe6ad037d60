"""The simulators' thinking rules and per-key faults, through the bare SDKs: what the
real APIs refuse about thinking and reasoning effort (in their words), signatures the
Anthropic simulator issues and checks, and faults scripted per API key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import openai
import pytest

from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import Error, Reply, Text, Thinking, ToolUse, text_reply

TOOL = {"name": "now", "description": "the time", "input_schema": {"type": "object"}}
LOOP: list[dict[str, Any]] = [
    {"role": "user", "content": "what time is it"},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "now", "input": {}}],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "9"}]},
]


@pytest.fixture
async def claude(anthropic_sim: AnthropicSim) -> AsyncIterator[anthropic.AsyncAnthropic]:
    client = anthropic.AsyncAnthropic(api_key="k1", base_url=anthropic_sim.base_url, max_retries=0)
    yield client
    await client.close()


async def create(client: anthropic.AsyncAnthropic, **kwargs: Any) -> anthropic.types.Message:
    params: dict[str, Any] = {"model": "m", "max_tokens": 4096}
    params.update(kwargs)
    params.setdefault("messages", [{"role": "user", "content": "hi"}])
    return await client.messages.create(**params)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1000}},
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        ),
        (
            {"max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 2048}},
            "`max_tokens` must be greater than `thinking.budget_tokens`",
        ),
        (
            {"output_config": {"effort": "extreme"}},
            "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'",
        ),
        (
            {"thinking": {"type": "adaptive"}, "extra_body": {"temperature": 0.7}},
            "`temperature` may only be set to 1 when thinking is enabled",
        ),
        (
            {"thinking": {"type": "adaptive"}, "extra_body": {"top_k": 5}},
            "`top_k` must be unset when thinking is enabled",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1024}, "messages": LOOP},
            "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
            "`tool_use`. When `thinking` is enabled, a final `assistant` message must start",
        ),
    ],
    ids=["small-budget", "budget-over-max", "effort", "temperature", "top_k", "unthought-loop"],
)
async def test_anthropic_thinking_refusals(
    claude: anthropic.AsyncAnthropic,
    anthropic_sim: AnthropicSim,
    kwargs: dict[str, Any],
    words: str,
) -> None:
    if "messages" in kwargs:
        kwargs["tools"] = [TOOL]
    with pytest.raises(anthropic.BadRequestError) as caught:
        await create(claude, **kwargs)
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    assert words in caught.value.body["error"]["message"]
    assert anthropic_sim.pending == 0 and len(anthropic_sim.requests) == 1


async def test_anthropic_accepts_what_the_api_accepts(
    claude: anthropic.AsyncAnthropic, anthropic_sim: AnthropicSim
) -> None:
    anthropic_sim.enqueue(*(text_reply("ok") for _ in range(4)))
    # Adaptive thinking may have skipped thinking before a tool call (Claude Code sends
    # such a continuation, recorded in tests/gateway/fixtures).
    await create(claude, thinking={"type": "adaptive"}, messages=LOOP, tools=[TOOL])
    await create(claude, messages=LOOP, tools=[TOOL])  # no thinking: no requirement
    await create(claude, thinking={"type": "adaptive"}, output_config={"effort": "max"})
    enabled = {"type": "enabled", "budget_tokens": 1024}
    await create(claude, thinking=enabled, extra_body={"temperature": 1})
    assert anthropic_sim.pending == 0


async def test_anthropic_signs_thinking_and_checks_it_back(
    claude: anthropic.AsyncAnthropic, anthropic_sim: AnthropicSim
) -> None:
    script = Reply(Thinking("use the tool"), ToolUse("now", {}, id="t1"))
    anthropic_sim.enqueue(script, script)
    first = await create(claude, tools=[TOOL])  # non-streamed JSON: signed too
    again = await create(claude, tools=[TOOL])
    block, other = first.content[0], again.content[0]
    assert block.type == "thinking" and other.type == "thinking"
    assert block.signature != other.signature  # a fresh signature per answer
    assert anthropic_sim.signatures[block.signature] == "use the tool"
    assert script.blocks[0].signature == ""  # the script itself is left as written
    loop = [LOOP[0], {"role": "assistant", "content": [b.model_dump() for b in first.content]}]
    loop.append(LOOP[2])
    thinking = {"type": "enabled", "budget_tokens": 1024}
    anthropic_sim.enqueue(text_reply("nine"))
    answer = await create(claude, thinking=thinking, messages=loop, tools=[TOOL])
    assert answer.content[0].type == "text"
    loop[1]["content"][0]["signature"] = "forged"
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature` in `thinking`"):
        await create(claude, thinking=thinking, messages=loop, tools=[TOOL])
    # A scripted signature is issued as written.
    anthropic_sim.enqueue(Reply(Thinking("hm", signature="sig-fixed"), Text("a")))
    assert (await create(claude)).content[0].signature == "sig-fixed"  # type: ignore[union-attr]
    assert anthropic_sim.signatures["sig-fixed"] == "hm"


async def test_openai_refuses_an_unknown_reasoning_effort(openai_sim: OpenAISim) -> None:
    async with openai.AsyncOpenAI(
        api_key="k", base_url=openai_sim.base_url, max_retries=0
    ) as client:
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "hi"}],
                extra_body={"reasoning_effort": "extreme"},
            )
        error = caught.value.body
        assert isinstance(error, dict)
        assert error["param"] == "reasoning_effort" and error["code"] == "invalid_value"
        assert error["message"].startswith("Invalid value: 'extreme'. Supported values are: 'none'")
        openai_sim.enqueue(text_reply("ok"))
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], reasoning_effort="xhigh"
        )


async def test_faults_per_key(anthropic_sim: AnthropicSim, openai_sim: OpenAISim) -> None:
    for sim in (anthropic_sim, openai_sim):
        sim.fail_key("bad", Error(429, "rate_limit_error", "slow down", retry_after=1))
        sim.enqueue(text_reply("good"), text_reply("good again"))
    bad = anthropic.AsyncAnthropic(api_key="bad", base_url=anthropic_sim.base_url, max_retries=0)
    good = anthropic.AsyncAnthropic(api_key="good", base_url=anthropic_sim.base_url, max_retries=0)
    async with bad, good:
        with pytest.raises(anthropic.RateLimitError) as caught:
            await create(bad)
        assert caught.value.response.headers["retry-after"] == "1"
        assert (await create(good)).content[0].type == "text"
        anthropic_sim.clear_key("bad")
        assert (await create(bad)).content[0].type == "text"  # cleared
    assert anthropic_sim.keys_seen == ["bad", "good", "bad"]
    async with openai.AsyncOpenAI(
        api_key="bad", base_url=openai_sim.base_url, max_retries=0
    ) as client:
        with pytest.raises(openai.RateLimitError):
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}]
            )
    assert (
        openai_sim.keys_seen == ["bad"] and openai_sim.pending == 2
    )  # the script was not consumed
    openai_sim.reset()
    assert openai_sim.keys_seen == [] and openai_sim.pending == 0
