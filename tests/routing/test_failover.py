"""Failover end to end (issue 17): a real Kernel, the real SDKs, two simulators. A model
that fails after its retries hands the call to its fallback (one switch line, before
the fallback's first words; a tool loop's pairs whole in the other provider's format);
a refused key, a bad request or a half-shown answer is not failed over; the circuit
breaker opens, skips and probes on a clock the test drives; a session sticks to the
model that answered it; a cancel during a failover leaves no stuck probe."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.core.events import AssistantDelta, Completed, ModelSwitched
from kernel.store.usage import UsageFilter
from tests.conftest import SECRET_KEY
from tests.routing.kit import (
    CONV,
    FALLBACK,
    PRIMARY,
    RETRIES,
    FakeMonotonic,
    Kind,
    Pair,
    deltas,
    error_of,
    overloaded,
    reply_of,
    switches,
    two_models,
)
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error, Reply, Text, ToolUse, text_reply


def add_lookup(kernel: Kernel) -> list[str]:
    seen: list[str] = []

    @kernel.tools.tool
    def lookup(city: str) -> str:
        """The weather in a city.

        Args:
            city: the city name
        """
        seen.append(city)
        return f"sunny in {city}"

    return seen


def first_delta(events: list[Any]) -> int:
    return next(i for i, e in enumerate(events) if isinstance(e, AssistantDelta))


def conversation_of(pair: Pair, index: int = -1) -> list[dict[str, Any]]:
    """The backup's recorded request's messages, the system message left out."""
    body = pair.backup.requests[index].body
    assert isinstance(body, dict)
    return [m for m in body["messages"] if m.get("role") != "system"]


# ----- 1. the fallback answers ----------------------------------------------------------


@pytest.mark.parametrize(
    ("primary", "cause", "status"),
    [("claude", "overloaded_error", 529), ("openai_compat", "server_error", 503)],
)
async def test_a_primary_failing_after_its_retries_hands_the_call_to_its_fallback(
    tmp_path: Path, primary: Kind, cause: str, status: int
) -> None:
    async with two_models(tmp_path, primary=primary) as pair:
        pair.main.enqueue(*overloaded(pair.main))
        pair.backup.enqueue(Reply(Text("from the fallback", chunks=["from ", "the fallback"])))

        events = await pair.turn("hello")

        assert reply_of(events) == "from the fallback"
        assert deltas(events) == "from the fallback"
        [switch] = switches(events)
        assert (switch.from_model, switch.to_model, switch.reason) == (PRIMARY, FALLBACK, cause)
        assert switch.step == 1
        assert events.index(switch) < first_delta(events)
        assert PRIMARY in switch.describe() and FALLBACK in switch.describe()
        assert len(pair.main.requests) == RETRIES + 1 and len(pair.backup.requests) == 1

        [decision] = await pair.decisions()
        assert [(a.model, a.outcome, a.status) for a in decision.attempts] == [
            (PRIMARY, cause, status),
            (FALLBACK, "ok", None),
        ]
        assert decision.chosen == FALLBACK and decision.failovers == 1
        assert decision.candidates == [PRIMARY, FALLBACK] and decision.why == "default"
        assert decision.step == 1 and decision.channel == "console"
        assert decision.usage.output > 0
        assert decision.as_json()["failovers"] == 1

        ledger = await pair.kernel.agent.meter.ledger.entries(UsageFilter())
        assert [(e.provider, e.model) for e in ledger] == [("backup", "model-z")]
        assert ledger[0].usage == decision.usage
        # The breaker counted the failure; the primary is still closed (threshold 3).
        main, backup = pair.kernel.agent.health.states(["main", "backup"])
        assert (main.state, main.failures, main.last_error) == ("closed", 1, cause)
        assert (backup.state, backup.failures) == ("closed", 0)
        # The stored history is what the owner saw, in Kernel's own shape.
        session = pair.kernel.agent.sessions.current_session(CONV)
        assert session is not None
        stored = await pair.kernel.store.load_messages(session)
        assert [(m.role, m.text) for m in stored] == [
            ("user", "hello"),
            ("assistant", "from the fallback"),
        ]


async def test_a_used_up_quota_fails_over_too(tmp_path: Path) -> None:
    async with two_models(tmp_path) as pair:
        # Anthropic words a used-up credit as a 400; not retried, failed over at once.
        pair.main.enqueue(
            Error(400, "invalid_request_error", "Your credit balance is too low to access the API")
        )
        pair.backup.enqueue(text_reply("still here"))
        events = await pair.turn("hello")
        assert reply_of(events) == "still here"
        [switch] = switches(events)
        assert switch.reason == "quota_exceeded"
        assert len(pair.main.requests) == 1


async def test_a_primary_that_is_down_fails_over_on_connection_errors(tmp_path: Path) -> None:
    async with two_models(tmp_path) as pair:
        await pair.main.stop()  # nothing listens there now: connections are refused
        pair.backup.enqueue(text_reply("I am up"))
        events = await pair.turn("hello")
        assert reply_of(events) == "I am up"
        [switch] = switches(events)
        assert switch.reason == "connection_error"
        decision = await pair.last_decision()
        assert [a.outcome for a in decision.attempts] == ["connection_error", "ok"]


# ----- 2. a tool loop goes on in the other provider's format ----------------------------


@pytest.mark.parametrize("primary", ["claude", "openai_compat"])
async def test_a_failover_mid_tool_loop_keeps_the_tool_pairs_whole(
    tmp_path: Path, primary: Kind
) -> None:
    async with two_models(tmp_path, primary=primary) as pair:
        seen = add_lookup(pair.kernel)
        call = ToolUse("lookup", {"city": "Paris"}, id="call_paris_1")
        pair.main.enqueue(Reply(Text("Checking."), call), *overloaded(pair.main))
        pair.backup.enqueue(text_reply("It is sunny in Paris."))

        events = await pair.turn("weather in Paris?")

        assert seen == ["Paris"]
        assert reply_of(events) == "Checking.\n\nIt is sunny in Paris."
        [switch] = switches(events)
        assert switch.step == 2 and switch.to_model == FALLBACK
        messages = conversation_of(pair)
        # The simulators reject an orphan tool call or result with a 400 (the real APIs
        # do); that the backup answered proves the pair arrived whole. Check its shape.
        if isinstance(pair.backup, AnthropicSim):
            assistant, results = messages[-2], messages[-1]
            uses = [b for b in assistant["content"] if b["type"] == "tool_use"]
            assert [(u["id"], u["name"], u["input"]) for u in uses] == [
                ("call_paris_1", "lookup", {"city": "Paris"})
            ]
            assert results["role"] == "user"
            [result] = [b for b in results["content"] if b["type"] == "tool_result"]
            assert result["tool_use_id"] == "call_paris_1"
            assert "sunny in Paris" in json.dumps(result["content"])
        else:
            assistant, result = messages[-2], messages[-1]
            [tool_call] = assistant["tool_calls"]
            assert tool_call["id"] == "call_paris_1"
            assert tool_call["function"]["name"] == "lookup"
            assert json.loads(tool_call["function"]["arguments"]) == {"city": "Paris"}
            assert result == {
                "role": "tool",
                "tool_call_id": "call_paris_1",
                "content": result["content"],
            }
            assert "sunny in Paris" in result["content"]
        decisions = await pair.decisions()
        assert [(d.step, d.chosen, d.failovers) for d in decisions] == [
            (1, PRIMARY, 0),
            (2, FALLBACK, 1),
        ]

        # The session goes on with the fallback, its history accepted as a whole.
        pair.backup.enqueue(text_reply("Still sunny."))
        events = await pair.turn("and now?")
        assert reply_of(events) == "Still sunny." and not switches(events)
        assert len(pair.backup.requests) == 2


# ----- 3. a refused key ------------------------------------------------------------------


async def test_a_refused_key_is_reported_not_failed_over_and_its_provider_skipped(
    tmp_path: Path,
) -> None:
    async with two_models(tmp_path) as pair:
        pair.main.enqueue(Error(401, "authentication_error", "invalid x-api-key"))

        events = await pair.turn("hello")

        error = error_of(events)
        assert error.code == "provider_auth_failed"
        assert "main" in error.message and "providers.main.api_key" in error.message
        assert not switches(events)
        assert pair.backup.requests == [] and len(pair.main.requests) == 1
        health = pair.kernel.agent.health
        assert health.state("main") == "unusable"
        [decision] = await pair.decisions()
        assert decision.chosen == "" and decision.attempts[0].outcome == "provider_auth_failed"

        # The next turn leaves main out: the fallback answers, the turn says why once,
        # before its first words.
        pair.backup.enqueue(text_reply("backup here"))
        events = await pair.turn("again")
        assert reply_of(events) == "backup here"
        [switch] = switches(events)
        assert (switch.from_model, switch.to_model, switch.reason) == (
            PRIMARY,
            FALLBACK,
            "key_refused",
        )
        assert events.index(switch) < first_delta(events)
        assert len(pair.main.requests) == 1
        decision = await pair.last_decision()
        assert decision.skipped == [(PRIMARY, "key_refused")]
        assert decision.candidates == [FALLBACK] and decision.chosen == FALLBACK

        # The owner picks main again with /provider: its key is tried again.
        await pair.kernel.agent.selection.set_provider("main")
        assert health.state("main") == "closed"
        health.refused("main")

        # The owner fixes main's configuration: it is used again.
        pair.kernel.agent.selection.providers_changed({"main"})
        assert health.state("main") == "closed"
        pair.main.enqueue(text_reply("main is back"))
        events = await pair.turn("and now?", conv="console:other")
        assert reply_of(events) == "main is back"
        assert len(pair.main.requests) == 2


async def test_every_candidate_refused_is_one_clear_error(tmp_path: Path) -> None:
    async with two_models(tmp_path) as pair:
        health = pair.kernel.agent.health
        health.refused("main")
        health.refused("backup")
        events = await pair.turn("hello")
        error = error_of(events)
        assert error.code == "provider_auth_failed"
        assert PRIMARY in error.message and FALLBACK in error.message
        assert pair.main.requests == [] and pair.backup.requests == []


# ----- 4. what is never failed over ------------------------------------------------------


async def test_a_bad_request_is_reported_not_failed_over(tmp_path: Path) -> None:
    async with two_models(tmp_path) as pair:
        pair.main.enqueue(Error(400, "invalid_request_error", "tools.0.name: invalid"))
        events = await pair.turn("hello")
        error = error_of(events)
        assert "tools.0.name" in error.meta["detail"]
        assert not switches(events) and pair.backup.requests == []
        assert len(pair.main.requests) == 1  # not retried either
        main = pair.kernel.agent.health.states(["main"])[0]
        assert (main.state, main.failures) == ("closed", 0)  # not the provider's health


async def test_an_answer_already_shown_is_not_replayed_on_the_fallback(tmp_path: Path) -> None:
    async with two_models(tmp_path) as pair:
        # Two text deltas reach the owner, then the stream reports overloaded.
        pair.main.enqueue(
            Reply(Text("partial answer", chunks=["partial ", "answer"]), error_after=4)
        )
        events = await pair.turn("tell me")
        error = error_of(events)
        assert error.code == "overloaded_error"
        assert deltas(events) == "partial answer"
        assert not switches(events) and pair.backup.requests == []
        session = pair.kernel.agent.sessions.current_session(CONV)
        assert session is not None
        stored = await pair.kernel.store.load_messages(session)
        assert [(m.role, m.text) for m in stored] == [
            ("user", "tell me"),
            ("assistant", "partial answer"),
        ]
        decision = await pair.last_decision()
        assert decision.chosen == "" and decision.attempts[-1].outcome == "overloaded_error"


async def test_the_last_candidate_failing_reports_its_error(tmp_path: Path) -> None:
    async with two_models(tmp_path) as pair:
        pair.main.enqueue(*overloaded(pair.main))
        pair.backup.enqueue(Error(503, "server_error", "down too"))
        events = await pair.turn("hello")
        error = error_of(events)
        assert error.code == "server_error"
        assert len(switches(events)) == 1
        decision = await pair.last_decision()
        assert [a.outcome for a in decision.attempts] == ["overloaded_error", "server_error"]
        assert decision.chosen == ""


# ----- 5. the circuit breaker -------------------------------------------------------------


async def test_the_breaker_opens_skips_then_probes_and_closes(tmp_path: Path) -> None:
    clock = FakeMonotonic()
    routing = {"breaker_failures": 2, "breaker_cooldown": 60, "sticky_minutes": 0}
    async with two_models(tmp_path, routing=routing, clock=clock) as pair:
        health = pair.kernel.agent.health
        for n in (1, 2):
            pair.main.enqueue(*overloaded(pair.main))
            pair.backup.enqueue(text_reply(f"backup {n}"))
            assert reply_of(await pair.turn(f"turn {n}")) == f"backup {n}"
        assert health.state("main") == "open"
        sent = len(pair.main.requests)
        assert sent == 2 * (RETRIES + 1)

        # Open: straight to the fallback, the primary gets no request; the turn says
        # why it starts there, once.
        pair.backup.enqueue(text_reply("backup 3"))
        events = await pair.turn("turn 3")
        assert reply_of(events) == "backup 3"
        assert [(s.to_model, s.reason) for s in switches(events)] == [(FALLBACK, "circuit_open")]
        assert len(pair.main.requests) == sent
        decision = await pair.last_decision()
        assert decision.skipped == [(PRIMARY, "circuit_open")]
        assert decision.candidates == [FALLBACK]

        # After the cool-down one probe reaches the primary; its success closes it.
        clock.advance(61)
        assert health.state("main") == "half_open"
        pair.main.enqueue(text_reply("main again"))
        events = await pair.turn("turn 4")
        assert reply_of(events) == "main again" and not switches(events)
        assert len(pair.main.requests) == sent + 1
        assert health.state("main") == "closed"
        assert health.states(["main"])[0].failures == 0


async def test_a_failed_probe_opens_the_circuit_for_another_cooldown(tmp_path: Path) -> None:
    clock = FakeMonotonic()
    routing = {"breaker_failures": 1, "breaker_cooldown": 60, "sticky_minutes": 0}
    async with two_models(tmp_path, routing=routing, clock=clock) as pair:
        health = pair.kernel.agent.health
        pair.main.enqueue(*overloaded(pair.main))
        pair.backup.enqueue(text_reply("backup 1"))
        await pair.turn("one")
        assert health.state("main") == "open"
        clock.advance(61)
        pair.main.enqueue(*overloaded(pair.main))
        pair.backup.enqueue(text_reply("backup 2"))
        events = await pair.turn("two")
        assert reply_of(events) == "backup 2" and len(switches(events)) == 1
        assert health.state("main") == "open"
        assert health.states(["main"])[0].retry_in == 60


async def test_every_circuit_open_still_tries_them_all(tmp_path: Path) -> None:
    routing = {"breaker_failures": 1, "sticky_minutes": 0}
    async with two_models(tmp_path, routing=routing, clock=FakeMonotonic()) as pair:
        health = pair.kernel.agent.health
        health.failure("main", "overloaded_error")
        health.failure("backup", "overloaded_error")
        pair.main.enqueue(text_reply("better slow than none"))
        events = await pair.turn("hello")
        assert reply_of(events) == "better slow than none"
        decision = await pair.last_decision()
        assert decision.candidates == [PRIMARY, FALLBACK] and decision.chosen == PRIMARY


# ----- 6. stickiness -------------------------------------------------------------------


async def test_a_session_that_failed_over_sticks_to_the_fallback_a_while(tmp_path: Path) -> None:
    clock = FakeMonotonic()
    async with two_models(tmp_path, routing={"sticky_minutes": 30}, clock=clock) as pair:
        pair.main.enqueue(*overloaded(pair.main))
        pair.backup.enqueue(text_reply("backup 1"))
        await pair.turn("one")
        sent = len(pair.main.requests)

        pair.backup.enqueue(text_reply("backup 2"))
        events = await pair.turn("two")
        assert reply_of(events) == "backup 2" and not switches(events)
        assert len(pair.main.requests) == sent
        decision = await pair.last_decision()
        assert decision.sticky and decision.candidates == [FALLBACK, PRIMARY]

        # Another session starts on the primary.
        pair.main.enqueue(text_reply("main for another chat"))
        assert reply_of(await pair.turn("hi", conv="console:other")) == "main for another chat"
        assert not (await pair.last_decision()).sticky

        # Once sticky_minutes have passed, the session is back on the primary.
        clock.advance(31 * 60)
        pair.main.enqueue(text_reply("main again"))
        assert reply_of(await pair.turn("three")) == "main again"
        assert not (await pair.last_decision()).sticky


async def test_no_stickiness_when_sticky_minutes_is_zero(tmp_path: Path) -> None:
    async with two_models(tmp_path, routing={"sticky_minutes": 0}) as pair:
        pair.main.enqueue(*overloaded(pair.main))
        pair.backup.enqueue(text_reply("backup 1"))
        await pair.turn("one")
        pair.main.enqueue(text_reply("main again"))
        events = await pair.turn("two")
        assert reply_of(events) == "main again"
        assert pair.backup.requests[1:] == []


# ----- 10. cancel during a failover -------------------------------------------------------


async def _cancel_after(pair: Pair, seen: type, conv: str = CONV) -> list[Any]:
    """Start a turn, press /cancel once an event of type ``seen`` arrived, then drain."""
    turn = pair.kernel.agent.start_turn(conv, UserInput("go on"))
    events: list[Any] = []
    async for event in turn:
        events.append(event)
        if isinstance(event, seen):
            assert pair.kernel.agent.sessions.cancel(conv)
    return events


@pytest.mark.parametrize("when", ["streaming", "before_its_first_byte"])
async def test_cancel_while_the_fallback_answers(tmp_path: Path, when: str) -> None:
    async with two_models(tmp_path) as pair:
        pair.main.enqueue(*overloaded(pair.main))
        if when == "streaming":
            pair.backup.enqueue(Reply(Text("half of it", chunks=["half ", "of it"]), stall_after=3))
            events = await _cancel_after(pair, AssistantDelta)
        else:
            pair.backup.enqueue(Reply(Text("never sent"), stall_after=0))
            events = await _cancel_after(pair, ModelSwitched)
        final = events[-1]
        assert isinstance(final, Completed) and final.cancelled
        assert len(switches(events)) == 1
        assert not pair.kernel.agent.sessions.is_busy(CONV)

        decision = await pair.last_decision()
        assert [(a.model, a.outcome) for a in decision.attempts] == [
            (PRIMARY, "overloaded_error"),
            (FALLBACK, "cancelled"),
        ]
        assert decision.chosen == ""
        health = pair.kernel.agent.health
        assert [s.state for s in health.states(["main", "backup"])] == ["closed", "closed"]
        assert health.states(["backup"])[0].failures == 0

        # The history was closed: the next turn is accepted (the main answers it).
        pair.main.enqueue(text_reply("fine"))
        async with asyncio.timeout(30):
            events = await pair.turn("next")
        assert reply_of(events) == "fine"


async def test_a_cancelled_probe_leaves_the_circuit_probeable(tmp_path: Path) -> None:
    clock = FakeMonotonic()
    routing = {"breaker_failures": 1, "breaker_cooldown": 60, "sticky_minutes": 0}
    async with two_models(tmp_path, routing=routing, clock=clock) as pair:
        health = pair.kernel.agent.health
        health.failure("main", "overloaded_error")
        clock.advance(61)
        # The probe call streams, then the owner cancels it.
        pair.main.enqueue(Reply(Text("probing", chunks=["pro", "bing"]), stall_after=3))
        events = await _cancel_after(pair, AssistantDelta)
        assert isinstance(events[-1], Completed) and events[-1].cancelled
        assert health.state("main") == "half_open"
        # Not stuck: the next turn probes the primary again, and closes it.
        pair.main.enqueue(text_reply("probe ok"))
        events = await pair.turn("again")
        assert reply_of(events) == "probe ok"
        assert health.state("main") == "closed"


# ----- several keys: a key's trouble is not a failover ------------------------------------

# The simulators' per-key faults: ``sim.fail_key(key, error)``, ``sim.keys_seen``.
SECOND_KEY = "sk-second-0123456789abcdef"
TWO_KEYS = {"KERNEL_PROVIDER_MAIN_API_KEYS": SECOND_KEY}


async def test_a_rate_limited_key_hands_the_call_to_the_next_key_not_the_fallback(
    tmp_path: Path,
) -> None:
    async with two_models(tmp_path, env=TWO_KEYS) as pair:
        main: Any = pair.main
        main.fail_key(SECRET_KEY, Error(429, "rate_limit_error", "Number of requests exceeded"))
        main.enqueue(text_reply("the second key answers"))
        events = await pair.turn("hello")
        assert reply_of(events) == "the second key answers" and not switches(events)
        assert main.keys_seen == [SECRET_KEY, SECOND_KEY]
        assert pair.backup.requests == []
        assert pair.kernel.agent.health.state("main") == "closed"


async def test_every_key_refused_marks_the_provider_unusable_without_failover(
    tmp_path: Path,
) -> None:
    async with two_models(tmp_path, env=TWO_KEYS) as pair:
        main: Any = pair.main
        for key in (SECRET_KEY, SECOND_KEY):
            main.fail_key(key, Error(401, "authentication_error", "invalid x-api-key"))
        events = await pair.turn("hello")
        assert error_of(events).code == "provider_auth_failed" and not switches(events)
        assert main.keys_seen == [SECRET_KEY, SECOND_KEY]
        assert pair.backup.requests == []
        assert pair.kernel.agent.health.state("main") == "unusable"


async def test_every_key_out_of_quota_fails_over(tmp_path: Path) -> None:
    async with two_models(tmp_path, env=TWO_KEYS) as pair:
        main: Any = pair.main
        quota = Error(400, "invalid_request_error", "Your credit balance is too low")
        for key in (SECRET_KEY, SECOND_KEY):
            main.fail_key(key, quota)
        pair.backup.enqueue(text_reply("backup pays"))
        events = await pair.turn("hello")
        assert reply_of(events) == "backup pays"
        [switch] = switches(events)
        assert switch.reason == "quota_exceeded"
        assert main.keys_seen[:2] == [SECRET_KEY, SECOND_KEY]
