"""Polling that cannot wedge: unparseable updates, starved polls, outages, the bound."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

import pytest
from aiohttp import web
from telegram import Update
from telegram._utils.defaultvalue import DEFAULT_NONE
from telegram.ext._utils import networkloop

from kernel.telegram.polling import (
    BACKOFF_CAP,
    POLL_GRACE,
    BackedOffError,
    PollingBot,
    UnreadableUpdatesError,
    poll_request,
    recovery_bound,
)
from tests.sim.script import text_reply
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, TelegramSim
from tests.telegram.conftest import BotHarness, Factory

STRANGER = 999
SECRET = "Wer-hat-den-Kuchen"  # the bad update's words: never in the log


def old_server_poll(sim: TelegramSim) -> dict[str, Any]:
    """A stranger's poll as a Bot API server before 9.6 sends it: its options have no
    ``persistent_id``, which python-telegram-bot 22 requires."""
    sim.add_chat(STRANGER)
    return {
        "message": {
            "message_id": 1,
            "date": int(time.time()),
            "chat": {"id": STRANGER, "type": "private", "first_name": "S"},
            "from": sim.user_json(STRANGER),
            "poll": {
                "id": "5012",
                "question": f"{SECRET}?",
                "options": [
                    {"text": f"{SECRET} A", "voter_count": 0},
                    {"text": f"{SECRET} B", "voter_count": 0},
                ],
                "total_voter_count": 0,
                "is_closed": False,
                "is_anonymous": True,
                "type": "regular",
                "allows_multiple_answers": False,
            },
        }
    }


def delivered(sim: TelegramSim, update_id: int) -> int:
    """How many getUpdates answers carried the update."""
    return sum(
        1
        for poll in sim.polls
        if isinstance(poll.result, list) and any(u["update_id"] == update_id for u in poll.result)
    )


async def test_the_old_server_poll_really_breaks_ptb() -> None:
    update = {"update_id": 1, **old_server_poll(TelegramSim())}
    with pytest.raises(TypeError):
        Update.de_json(update, None)


async def test_an_unparseable_update_is_skipped_and_polling_goes_on(
    bot: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    h = await bot()
    h.model.enqueue(text_reply("first"), text_reply("second"))
    assert await h.converse("before") == "first"

    bad = h.tg.inject_update(old_server_poll(h.tg))
    assert await h.converse("after") == "second"

    assert delivered(h.tg, bad["update_id"]) == 1  # the offset moved past it at once
    assert bad not in h.tg.pending_updates
    skipped = [r.getMessage() for r in caplog.records if "unparseable" in r.getMessage()]
    assert skipped == [
        f"skipped an unparseable update (id={bad['update_id']}, kind=message): TypeError"
    ]
    assert not [r for r in caplog.records if r.levelno >= logging.CRITICAL]
    assert SECRET not in caplog.text
    assert h.tg.chat(STRANGER, from_bot=True) == []
    await h.tg.wait_until(lambda: h.channel.polling_state().detail["last_update_id"] is not None)
    state = h.channel.polling_state()
    assert state.state == "running"
    assert state.detail["unparseable_updates"] == 1
    assert state.detail["last_update_id"] > bad["update_id"]


async def test_updates_without_a_usable_shape_never_stop_the_offset() -> None:
    bot = PollingBot(DEFAULT_TOKEN)
    good = {"update_id": 7, "message": {"bad": True}}  # unparseable, but numbered
    parsed = bot._parse(["junk", {"no_id": 1}, {"update_id": True}, good])
    assert [u.update_id for u in parsed] == [7]
    assert parsed[0].message is None  # a bare Update: the gate drops it
    assert bot.stats.unparseable == 4
    with pytest.raises(UnreadableUpdatesError):
        bot._parse({"update_id": 1})
    with pytest.raises(UnreadableUpdatesError):
        bot._parse([{"no_id": 1}])  # nothing to move the offset by: PTB backs off
    assert bot._parse([]) == ()


async def test_a_hostile_update_kind_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    bot = PollingBot(DEFAULT_TOKEN)
    bot._parse([{"update_id": 3, "<script>" + SECRET: {}, "message": {"text": SECRET}}])
    assert "kind=unknown" in caplog.text and SECRET not in caplog.text


class StarvingSim(TelegramSim):
    """Answers long polls on starved connections with nothing while updates wait, as a
    poll wedged behind a proxy or a server bug would; others are served normally."""

    def __init__(self) -> None:
        super().__init__()
        self.starve_all = False
        self.starved: set[int] = set()  # client ports
        self.ports: set[int] = set()

    async def _get_updates(self, request: web.Request, params: Any) -> list[Any]:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        port = int(peer[1]) if peer else 0
        self.ports.add(port)
        if self.starve_all or port in self.starved:
            await asyncio.sleep(min(float(params.get("timeout", 0)), 1.0))
            return []
        return await super()._get_updates(request, params)


async def test_updates_waiting_but_not_consumed_restart_polling(bot: Factory) -> None:
    tg = await StarvingSim().start()
    h = await bot(tg=tg)
    h.model.enqueue(text_reply("got it"))
    await h.tg.wait_until(lambda: len(tg.polls) >= 1)
    tg.starve_all = True
    polls = len(tg.polls)
    await h.tg.wait_until(lambda: len(tg.polls) > polls)  # the poll in flight is over
    update = tg.inject_text("hello?")

    # Every poll is answered (HTTP 200, nothing in it), but the update waits: degraded.
    await tg.wait_until(lambda: h.channel.poll_restarts >= 1)
    await tg.wait_until(lambda: h.channel.polling_state().state == "degraded")
    state = h.channel.polling_state()
    assert state.detail["pending_updates"] == 1
    assert "got it" not in h.texts()

    # The wedge stays on the connections it had: the next restart opens a fresh one.
    tg.starved, tg.starve_all = set(tg.ports), False
    await tg.wait_until(lambda: "got it" in h.texts())
    await h.settle()
    await tg.wait_until(lambda: h.channel.polling_state().state == "running")
    assert h.channel.polling_state().detail["last_update_id"] == update["update_id"]


async def test_the_watchdog_leaves_a_healthy_quiet_poll_alone(bot: Factory) -> None:
    h = await bot()
    checks = h.tg.calls_to("getWebhookInfo")
    await h.tg.wait_until(lambda: len(h.tg.calls_to("getWebhookInfo")) >= len(checks) + 4)
    assert h.channel.poll_restarts == 0
    assert h.channel.polling_state().state == "running"
    assert h.channel.polling_state().detail["pending_updates"] == 0


async def test_a_watchdog_round_that_saw_updates_consumed_asks_telegram_nothing(
    bot: Factory,
) -> None:
    """Updates being consumed cannot be starved: getWebhookInfo is asked only in a round
    that consumed none (issue 37: one call less for a busy chat)."""
    h = await bot()
    poller = h.channel.poller
    await h.channel._watchdog.close()  # noqa: SLF001 (only this test's rounds ask)
    await poller.check()  # whatever came before is seen
    asked = len(h.tg.calls_to("getWebhookInfo"))
    h.model.enqueue(text_reply("here"))
    assert await h.converse("anyone?") == "here"
    await poller.check()  # the round saw the message consumed
    assert len(h.tg.calls_to("getWebhookInfo")) == asked
    await poller.check()  # a quiet round asks
    assert len(h.tg.calls_to("getWebhookInfo")) == asked + 1
    assert poller.restarts == 0


async def recovered(h: BotHarness, reply: str) -> None:
    """A message sent after the outage is answered and the channel is running again."""
    h.model.enqueue(text_reply(reply))
    h.tg.inject_text("are you back?")
    await h.tg.wait_until(lambda: reply in h.texts())
    await h.settle()
    await h.tg.wait_until(lambda: h.channel.polling_state().state == "running")


async def test_polling_resumes_after_refused_connections(
    bot: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    h = await bot()
    await h.tg.wait_until(lambda: len(h.tg.polls) >= 1)
    stats = h.channel.poller.stats
    failures = stats.failures
    await h.tg.stop()  # the port now refuses connections
    await h.tg.wait_until(lambda: stats.failures >= failures + 3)
    await h.tg.wait_until(lambda: h.channel.polling_state().state == "degraded")
    await h.tg.start()  # the same port again

    await recovered(h, "back after refusal")
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("kernel.")]
    assert not [line for line in ours if DEFAULT_TOKEN in line]
    waits = [
        float(m[1])
        for line in ours
        if (m := re.match(r"getUpdates failed: \w+; retrying in (\S+)s", line))
    ]
    assert waits[:3] == [1.0, 1.5, 2.2]  # rounded in the log
    assert max(waits) <= BACKOFF_CAP


async def test_polling_resumes_after_502s_and_the_message_sent_meanwhile_is_answered(
    bot: Factory,
) -> None:
    h = await bot()
    h.model.enqueue(text_reply("answered after the outage"))
    h.tg.fail("getUpdates", status=502, times=6)
    await h.tg.wait_until(lambda: sum(p.status == 502 for p in h.tg.polls) >= 1)
    h.tg.inject_text("sent during the outage")
    await h.tg.wait_until(lambda: sum(p.status == 502 for p in h.tg.polls) == 6)

    await h.tg.wait_until(lambda: "answered after the outage" in h.texts())
    await recovered(h, "and the next one too")


@pytest.mark.slow  # seconds of waiting: dealt out first
async def test_a_hang_longer_than_the_read_timeout_ends_without_the_watchdog(
    bot: Factory,
) -> None:
    h = await bot()
    h.channel.poller.limit = 3600.0  # as if watchdog_seconds were large: PTB must cope
    await h.tg.wait_until(lambda: len(h.tg.polls) >= 1)
    polls = len(h.tg.polls)
    h.tg.hang_get_updates(3600)  # the next poll gets no answer at all
    # Nothing is pending meanwhile (a waiting update would make the watchdog restart):
    # only the read timeout can end the hung poll and let the next one start.
    await h.tg.wait_until(lambda: len(h.tg.polls) > polls + 1, timeout=30 + POLL_GRACE)

    await recovered(h, "back after the hang")
    assert h.channel.poll_restarts == 0


async def test_after_kernels_backoff_ptb_retries_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bound rests on PTB retrying a BackedOffError (a TimedOut) without a wait of
    its own, which would be up to 30 s."""
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(networkloop.asyncio, "sleep", record)
    attempts = 0

    async def poll() -> None:
        nonlocal attempts
        attempts += 1
        if attempts <= 3:
            raise BackedOffError("NetworkError")

    await networkloop.network_retry_loop(
        action_cb=poll, description="test", interval=0, max_retries=-1
    )
    assert attempts == 4 and not [w for w in waits if w > 0]


def test_the_bound() -> None:
    assert recovery_bound(30, 120.0) == 30  # the defaults: two checks 15 s apart
    assert recovery_bound(1, 2.0) == BACKOFF_CAP
    assert recovery_bound(5, 600.0) == 5 + POLL_GRACE
    bot = PollingBot(DEFAULT_TOKEN, get_updates_request=poll_request())
    # A long poll of 30 s is given up POLL_GRACE later, not twice the timeout.
    assert bot._poll_read_timeout(DEFAULT_NONE, 30) == 30 + POLL_GRACE


async def test_the_owners_own_unreadable_message_is_told_not_dropped(
    bot: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    h = await bot()
    raw = old_server_poll(h.tg)
    raw["message"]["chat"] = {"id": OWNER, "type": "private", "first_name": "Owner"}
    raw["message"]["from"] = h.tg.user_json(OWNER)
    notice = await h.ask_update(raw)
    assert "cannot read (poll)" in notice  # the content's kind, never its text
    assert SECRET not in caplog.text and SECRET not in notice
    h.model.enqueue(text_reply("still here"))
    assert await h.converse("hello?") == "still here"
    assert h.model.requests[-1].raw.decode().count(SECRET) == 0
