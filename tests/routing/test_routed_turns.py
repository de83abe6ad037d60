"""Routing rules and reasoning end to end (issue 17): a rule by channel or by image
sends the turn to its model (the right simulator gets the request, the decisions log
says why); the owner's /model wins over the rules in the owner's own chat but not for
cron, and ``/model auto`` hands the choice back; a rule's reasoning reaches the wire
in each provider's own form, and only for providers that declare it."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from kernel.core.messages import ImageBlock
from tests.routing.kit import FALLBACK, PRIMARY, overloaded, reply_of, switches, two_models
from tests.sim.script import text_reply

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake-image-bytes").decode()
TO_BACKUP = {"primary": FALLBACK}
REASONING = ["stream", "tool_call", "attachments", "reasoning"]


def body(requests: list[Any], index: int = -1) -> dict[str, Any]:
    found = requests[index].body
    assert isinstance(found, dict)
    return found


async def test_a_rule_by_channel_routes_cron_to_its_model(tmp_path: Path) -> None:
    rules = [{"name": "cron-cheap", "channel": ["cron"], **TO_BACKUP}]
    async with two_models(tmp_path, rules=rules) as pair:
        pair.backup.enqueue(text_reply("digest"))
        events = await pair.turn("daily digest", conv="cron:digest", channel="cron")
        assert reply_of(events) == "digest"
        assert pair.main.requests == [] and len(pair.backup.requests) == 1
        decision = await pair.last_decision()
        assert (decision.why, decision.rule, decision.chosen) == ("rule", "cron-cheap", FALLBACK)
        assert decision.channel == "cron"

        # The owner's console does not match: the default model answers.
        pair.main.enqueue(text_reply("hello"))
        assert reply_of(await pair.turn("hi")) == "hello"
        decision = await pair.last_decision()
        assert (decision.why, decision.rule, decision.chosen) == ("default", "", PRIMARY)


async def test_a_rule_by_image_routes_to_its_model(tmp_path: Path) -> None:
    rules = [{"name": "vision", "image": True, **TO_BACKUP}]
    async with two_models(tmp_path, rules=rules) as pair:
        pair.backup.enqueue(text_reply("a cat"))
        events = await pair.turn("what is this?", images=[ImageBlock("image/png", PNG)])
        assert reply_of(events) == "a cat"
        assert pair.main.requests == []
        sent = str(body(pair.backup.requests)["messages"])
        assert PNG in sent  # the image went to the rule's model
        decision = await pair.last_decision()
        assert (decision.why, decision.rule, decision.chosen) == ("rule", "vision", FALLBACK)

        pair.main.enqueue(text_reply("text only"))
        assert reply_of(await pair.turn("no picture")) == "text only"
        assert (await pair.last_decision()).why == "default"


async def test_the_owners_model_choice_wins_in_their_chat_not_for_cron(tmp_path: Path) -> None:
    rules = [{"name": "everything", "channel": ["console", "cron"], **TO_BACKUP}]
    async with two_models(tmp_path, rules=rules) as pair:
        agent = pair.kernel.agent
        pair.backup.enqueue(text_reply("rule"))
        assert reply_of(await pair.turn("one")) == "rule"

        await agent.selection.set_model("model-b")
        pair.main.enqueue(text_reply("owner's pick"))
        assert reply_of(await pair.turn("two")) == "owner's pick"
        assert body(pair.main.requests)["model"] == "model-b"
        decision = await pair.last_decision()
        assert (decision.why, decision.chosen) == ("owner", "main:model-b")

        pair.backup.enqueue(text_reply("cron by rule"))
        events = await pair.turn("job", conv="cron:job", channel="cron")
        assert reply_of(events) == "cron by rule"
        assert (await pair.last_decision()).why == "rule"
        assert len(pair.main.requests) == 1

        # /model auto: the rules decide again in the owner's chat.
        await agent.selection.clear_choice()
        pair.backup.enqueue(text_reply("rule again"))
        assert reply_of(await pair.turn("three")) == "rule again"
        decision = await pair.last_decision()
        assert (decision.why, decision.rule) == ("rule", "everything")
        assert len(pair.main.requests) == 1


async def test_a_rules_reasoning_reaches_claude_as_adaptive_thinking(tmp_path: Path) -> None:
    rules = [{"name": "deep", "pattern": "(?i)think hard", "reasoning": "high"}]
    async with two_models(tmp_path, rules=rules) as pair:
        pair.main.enqueue(text_reply("thought about it"))
        assert reply_of(await pair.turn("Think hard: why?")) == "thought about it"
        assert body(pair.main.requests)["thinking"] == {"type": "adaptive"}
        assert body(pair.main.requests)["output_config"] == {"effort": "high"}
        decision = await pair.last_decision()
        assert (decision.rule, decision.reasoning, decision.chosen) == ("deep", "high", PRIMARY)

        pair.main.enqueue(text_reply("plain"))
        await pair.turn("hello")
        assert "thinking" not in body(pair.main.requests)
        assert "output_config" not in body(pair.main.requests)
        assert (await pair.last_decision()).reasoning == ""


async def test_a_rules_reasoning_reaches_openai_as_reasoning_effort(tmp_path: Path) -> None:
    rules = [{"name": "deep", "pattern": "think hard", "reasoning": "high", **TO_BACKUP}]
    backup = {"capabilities": REASONING}
    async with two_models(tmp_path, rules=rules, backup=backup) as pair:
        pair.backup.enqueue(text_reply("thought about it"))
        assert reply_of(await pair.turn("think hard, please")) == "thought about it"
        assert body(pair.backup.requests)["reasoning_effort"] == "high"
        assert (await pair.last_decision()).reasoning == "high"


async def test_a_fallback_without_reasoning_gets_none(tmp_path: Path) -> None:
    # The rule asks for reasoning; main (Claude) declares it, backup does not.
    rules = [{"name": "deep", "pattern": "think hard", "reasoning": "high"}]
    async with two_models(tmp_path, rules=rules) as pair:
        pair.main.enqueue(*overloaded(pair.main))
        pair.backup.enqueue(text_reply("no reasoning here"))
        events = await pair.turn("think hard")
        assert reply_of(events) == "no reasoning here" and len(switches(events)) == 1
        assert body(pair.main.requests)["thinking"] == {"type": "adaptive"}
        assert "reasoning_effort" not in body(pair.backup.requests)
        decision = await pair.last_decision()
        assert decision.chosen == FALLBACK and decision.reasoning == ""
