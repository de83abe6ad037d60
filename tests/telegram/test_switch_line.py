"""A failover in the Telegram chat (issue 17): the view turns the ``model_switch`` event
into one line the owner sees once and that stays, above the reply and never inside it,
through the real PTB bot, the outbox and the Telegram simulator."""

from __future__ import annotations

from kernel.core.events import AssistantDelta, Completed, ErrorEvent, ModelRetrying, ModelSwitched
from kernel.telegram.outbox import plain_items
from tests.sim.telegram_sim import OWNER
from tests.telegram.conftest import Factory
from tests.telegram.test_outbox import Make, open_row, outcome, run, view
from tests.telegram.test_outbox import rig as rig  # noqa: F401 - the fixture, shared

SWITCH = ModelSwitched(1, "main:model-a", "backup:gpt-x", "overloaded_error")
RETRYING = ModelRetrying(1, "main:model-a", 1, 1, "overloaded_error")


async def test_the_placeholder_becomes_the_switch_line_and_the_reply_comes_below(
    rig: Make,
) -> None:
    r = await rig()
    inbox_id = await open_row(r)
    await run(
        view(r, inbox_id),  # drafts off: the retry line comes in a silent placeholder
        RETRYING,
        SWITCH,
        AssistantDelta(1, "Hello "),
        AssistantDelta(1, "there"),
        Completed(1, "Hello there"),
    )
    state, placeholder = await outcome(r, inbox_id)
    assert state == "answered"
    messages = r.tg.chat(OWNER, from_bot=True)
    assert [m.text for m in messages] == [SWITCH.describe(), "Hello there"]
    # the switch line is the placeholder (it said "retrying"), edited: no message of the
    # turn is left over
    first = r.tg.calls_to("sendMessage")[0]
    assert first.params["text"] == RETRYING.describe()
    assert messages[0].message_id == first.result["message_id"]
    # a crash from here must not overwrite the switch line
    assert placeholder != messages[0].message_id


async def test_two_switches_are_two_lines_each_shown_once(rig: Make) -> None:
    r = await rig()
    inbox_id = await open_row(r)
    second = ModelSwitched(1, "backup:gpt-x", "spare:claude-y", "timeout")
    await run(view(r, inbox_id), SWITCH, second, Completed(1, "Done"))
    await outcome(r, inbox_id)
    assert [m.text for m in r.tg.chat(OWNER, from_bot=True)] == [
        SWITCH.describe(),
        second.describe(),
        "Done",
    ]


async def test_a_switch_then_an_error_or_a_cancel_keeps_the_line(rig: Make) -> None:
    r = await rig()
    inbox_id = await open_row(r)
    await run(view(r, inbox_id), SWITCH, ErrorEvent(1, "overloaded_error", "every model failed"))
    state, _ = await outcome(r, inbox_id)
    assert state == "failed"
    texts = [m.text for m in r.tg.chat(OWNER, from_bot=True)]
    assert texts[0] == SWITCH.describe() and "every model failed" in texts[1]

    cancelled = await open_row(r, update_id=2)
    await run(view(r, cancelled), SWITCH, Completed(1, "", cancelled=True))
    state, _ = await outcome(r, cancelled)
    assert state == "cancelled"
    assert [m.text for m in r.tg.chat(OWNER, from_bot=True)][2:] == [SWITCH.describe()]


async def test_without_a_placeholder_the_line_comes_in_order(rig: Make) -> None:
    r = await rig()
    r.tg.fail("sendMessage", status=429, retry_after=1)
    await r.outbox.put(OWNER, plain_items("earlier"))  # a backlog: no placeholder is sent
    await r.tg.wait_until(lambda: any(c.status == 429 for c in r.tg.calls))
    inbox_id = await open_row(r)
    await run(view(r, inbox_id), SWITCH, Completed(1, "later"))
    state, placeholder = await outcome(r, inbox_id)
    assert (state, placeholder) == ("answered", None)
    assert [m.text for m in r.tg.chat(OWNER, from_bot=True)] == [
        "earlier",
        SWITCH.describe(),
        "later",
    ]


async def test_status_and_model_auto_in_the_chat(bot: Factory) -> None:
    h = await bot()
    assert not any(line.startswith("main:") for line in (await h.ask("/status")).splitlines())
    h.kernel.agent.health.refused("main")
    status = (await h.ask("/status")).splitlines()
    assert "Problems: main: key refused — fix providers.main.api_key (or api_keys)" in status
    assert await h.ask("/model model-b") == "Switched to model model-b"
    assert (await h.ask("/model auto")).startswith("Automatic choice again")
    assert not h.kernel.agent.selection.chosen
