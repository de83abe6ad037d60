"""What the review of issue 17 found, each held by a test through the real Kernel and
simulators: a fallback's refusal of the input, a rate-limited key beside a refused one,
stickiness against the owner's own pick, a skipped fallback's switch line, a rule whose
models are all disabled, reasoning without tools, a refused provider picked again."""

from __future__ import annotations

from pathlib import Path

from kernel.core.events import ModelSwitched
from kernel.store.decisions import Decision
from tests.routing.kit import (
    FALLBACK,
    PRIMARY,
    FakeMonotonic,
    error_of,
    overloaded,
    reply_of,
    switches,
    two_models,
)
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error, text_reply

SECOND_KEY = "sk-main-second-0123456789"


async def test_a_fallback_refusing_the_input_keeps_the_owners_message(tmp_path: Path) -> None:
    """The primary is overloaded, the fallback refuses the input (its context is
    shorter): the turn reports the primary's failure, and the owner's message is not set
    aside (the next turn still sends it)."""
    async with two_models(tmp_path) as pair:
        pair.main.enqueue(*overloaded(pair.main))
        pair.backup.enqueue(
            Error(400, "invalid_request_error", "This model's maximum context length is 8k")
        )
        events = await pair.turn("a long question")
        error = error_of(events)
        assert error.code == "overloaded_error"  # the cause, not the fallback's refusal
        decision = await pair.last_decision()
        assert [a.outcome for a in decision.attempts] == [
            "overloaded_error",
            "provider_refused_input",
        ]

        pair.main.enqueue(text_reply("answered"))
        assert reply_of(await pair.turn("again")) == "answered"
        sent = str(pair.main.requests[-1].body["messages"])
        assert "a long question" in sent  # kept in the history the model sees


async def test_a_refused_key_beside_a_rate_limited_one_does_not_mark_the_provider(
    tmp_path: Path,
) -> None:
    """Key 1 is rate-limited, key 2 refused: key 2 is dropped, key 1 retried; the
    provider is not marked unusable (a working key is left)."""
    env = {"KERNEL_PROVIDER_MAIN_API_KEYS": SECOND_KEY}
    async with two_models(tmp_path, env=env) as pair:
        first = pair.main.keys_seen  # the keys of each request, in order
        pair.main.fail_key(SECOND_KEY, Error(401, "authentication_error", "invalid x-api-key"))
        pair.main.enqueue(Error(429, "rate_limit_error", "slow down"), text_reply("key one"))
        events = await pair.turn("hi")
        assert reply_of(events) == "key one" and not switches(events)
        assert pair.kernel.agent.health.state("main") == "closed"
        assert SECOND_KEY in first and first[-1] != SECOND_KEY


async def test_the_owners_pick_ends_a_sessions_stickiness(tmp_path: Path) -> None:
    async with two_models(tmp_path) as pair:
        pair.main.enqueue(*overloaded(pair.main))
        pair.backup.enqueue(
            text_reply("backup"), text_reply("backup again"), text_reply("still backup")
        )
        assert reply_of(await pair.turn("one")) == "backup"
        assert reply_of(await pair.turn("two")) == "backup again"  # sticky
        await pair.kernel.agent.selection.set_provider("main")  # the owner asks for main
        pair.main.enqueue(text_reply("main"))
        assert reply_of(await pair.turn("three")) == "main"
        decision = await pair.last_decision()
        assert decision.why == "owner" and not decision.sticky
        assert len(pair.backup.requests) == 2


async def test_a_fallback_skipped_for_its_circuit_is_said_with_the_model_that_answers(
    tmp_path: Path,
) -> None:
    """Chain main:model-a → backup (another call holds its half-open probe) → main:model-b:
    the one switch line names model-b, the model that answers."""
    routing = {"breaker_failures": 2, "breaker_cooldown": 30}  # main's one failure: closed
    clock = FakeMonotonic()
    fallbacks = [FALLBACK, "main:model-b"]
    async with two_models(tmp_path, routing=routing, clock=clock, fallbacks=fallbacks) as pair:
        health = pair.kernel.agent.health
        for _ in range(2):
            health.failure("backup", "timeout")  # open
        clock.advance(31)  # half-open
        assert health.allow("backup")  # another call holds the probe
        pair.main.enqueue(*overloaded(pair.main), text_reply("from b"))
        events = await pair.turn("hi")
        assert reply_of(events) == "from b"
        [switch] = switches(events)
        assert (switch.from_model, switch.to_model) == (PRIMARY, "main:model-b")
        assert "overloaded" in switch.describe()  # in words, not the raw code
        assert pair.backup.requests == []


async def test_a_fallback_that_cannot_take_an_image_is_passed_over_in_the_switch_line(
    tmp_path: Path,
) -> None:
    backup = {"capabilities": ["stream", "tool_call"]}  # no attachments
    async with two_models(tmp_path, backup=backup, fallbacks=[FALLBACK, "main:model-b"]) as pair:
        from kernel.core.messages import ImageBlock

        pixel = ImageBlock(
            "image/png",
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==",
        )
        pair.main.enqueue(*overloaded(pair.main), text_reply("seen"))
        events = await pair.turn("what is this?", images=[pixel])
        assert reply_of(events) == "seen"
        [switch] = switches(events)
        assert isinstance(switch, ModelSwitched) and switch.to_model == "main:model-b"
        assert pair.backup.requests == []


async def test_a_rule_whose_models_are_all_disabled_falls_back_to_the_active_model(
    tmp_path: Path,
) -> None:
    rules = [
        {"name": "night", "channel": ["console"], "primary": "backup:model-z", "fallbacks": []}
    ]
    async with two_models(tmp_path, rules=rules, backup={"enabled": False}) as pair:
        pair.main.enqueue(text_reply("the usual model"))
        events = await pair.turn("hello", channel="console")
        assert reply_of(events) == "the usual model"
        decision: Decision = await pair.last_decision()
        assert decision.rule == "night" and decision.chosen == PRIMARY
        assert decision.skipped == [(FALLBACK, "disabled")]


async def test_reasoning_reaches_a_provider_that_takes_no_tools(tmp_path: Path) -> None:
    async with two_models(tmp_path, backup={"capabilities": ["stream", "reasoning"]}) as pair:
        await pair.kernel.agent.selection.set_provider("backup")
        # backup is OpenAI-compatible here; its reasoning comes from a rule
        pair.kernel.config.routing.rules.clear()
        pair.kernel.config.providers["backup"].reasoning = "high"
        pair.backup.enqueue(text_reply("thought"))
        assert reply_of(await pair.turn("think")) == "thought"
        body = pair.backup.requests[-1].body
        assert "tools" not in body and body.get("reasoning_effort") == "high"


async def test_a_provider_whose_every_key_was_refused_is_usable_again_when_picked(
    tmp_path: Path,
) -> None:
    env = {"KERNEL_PROVIDER_MAIN_API_KEYS": SECOND_KEY}
    async with two_models(tmp_path, env=env) as pair:
        assert isinstance(pair.main, AnthropicSim)
        refused = Error(401, "authentication_error", "invalid x-api-key")
        for key in pair.kernel.config.providers["main"].keys:
            pair.main.fail_key(key, refused)
        events = await pair.turn("hi")
        assert error_of(events).code == "provider_auth_failed"
        assert pair.kernel.agent.health.state("main") == "unusable"
        for key in pair.kernel.config.providers["main"].keys:
            pair.main.clear_key(key)
        await pair.kernel.agent.selection.set_provider("main")  # the owner fixed it upstream
        pair.main.enqueue(text_reply("back"))
        assert reply_of(await pair.turn("again", conv="console:other")) == "back"


# ----- the second review -------------------------------------------------------------


def test_taking_a_half_open_circuit_says_whether_this_call_holds_the_probe() -> None:
    """One reading of the clock decides: a call that takes the probe knows it (so it
    releases it on any ending), even when the cool-down ends between two readings."""
    from kernel.config import RoutingConfig
    from kernel.routing import Health

    clock = FakeMonotonic()
    health = Health(RoutingConfig(breaker_failures=1, breaker_cooldown=10), clock=clock)
    assert health.take("main") == "closed"
    health.failure("main", "timeout")
    assert health.take("main") is None  # open
    clock.advance(10)
    assert health.take("main") == "probe"
    assert health.take("main") is None  # one probe at a time
    health.release("main")
    assert health.take("main") == "probe"


async def test_a_fallbacks_refused_key_moves_on_to_the_next_model(tmp_path: Path) -> None:
    async with two_models(tmp_path, fallbacks=[FALLBACK, "main:model-b"]) as pair:
        pair.main.enqueue(*overloaded(pair.main), text_reply("from b"))
        pair.backup.enqueue(Error(401, "invalid_request_error", "Incorrect API key provided"))
        events = await pair.turn("hi")
        assert reply_of(events) == "from b"
        assert pair.kernel.agent.health.state("backup") == "unusable"
        assert [(s.from_model, s.to_model) for s in switches(events)] == [
            (PRIMARY, FALLBACK),
            (FALLBACK, "main:model-b"),
        ]


async def test_a_fallbacks_bad_request_reports_the_primarys_failure(tmp_path: Path) -> None:
    async with two_models(tmp_path) as pair:
        pair.main.enqueue(*overloaded(pair.main))
        pair.backup.enqueue(Error(400, "invalid_request_error", "Unknown parameter: x"))
        error = error_of(await pair.turn("hi"))
        assert error.code == "overloaded_error"
        assert pair.kernel.agent.health.state("backup") == "closed"


async def test_a_rule_whose_models_are_all_refused_falls_back_to_the_active_model(
    tmp_path: Path,
) -> None:
    rules = [{"name": "night", "channel": ["console"], "primary": FALLBACK, "fallbacks": []}]
    async with two_models(tmp_path, rules=rules) as pair:
        pair.kernel.agent.health.refused("backup")
        pair.main.enqueue(text_reply("the usual model"))
        assert reply_of(await pair.turn("hello", channel="console")) == "the usual model"
        assert (await pair.last_decision()).skipped == [(FALLBACK, "key_refused")]


async def test_a_guest_is_not_told_about_the_owners_providers(tmp_path: Path) -> None:
    async with two_models(tmp_path, fallbacks=[]) as pair:
        pair.main.enqueue(Error(400, "invalid_request_error", "Unknown parameter: x"))
        error = error_of(await pair.turn("hi", channel="qq", guest=True, conv="qq:guest"))
        assert error.code == "invalid_request_error"
        assert "main" not in error.message and "providers" not in error.message


async def test_a_rule_on_the_input_size_routes_a_long_message_through_a_real_turn(
    tmp_path: Path,
) -> None:
    """The size is estimated from the whole request (system, history, tools, the words)
    whenever a rule bounds it: a long message goes to the rule's model, a short one not."""
    rules = [{"name": "long", "min_input_tokens": 20_000, "primary": FALLBACK}]
    async with two_models(tmp_path, rules=rules) as pair:
        pair.main.enqueue(text_reply("short answer"))
        assert reply_of(await pair.turn("hi")) == "short answer"
        pair.backup.enqueue(text_reply("long answer"))
        events = await pair.turn("word " * 30_000, conv="console:long")
        assert reply_of(events) == "long answer"
        decision = await pair.last_decision()
        assert decision.why == "rule" and decision.rule == "long"
