"""The webhook channel against the receiver simulator: signed JSON, retries on 5xx and
timeouts, and a delivery that finally fails is recorded and visible, never silent."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from collections.abc import AsyncIterator
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from kernel.core.delivery import ChannelRegistry, Target
from kernel.core.errors import ChannelError
from tests.clock import InstantClock, ManualClock
from tests.cron.test_scheduler import webhook_config
from tests.gateway.conftest import Sidecar, SidecarFactory, message
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.webhook_sim import WebhookSim

SECRET = "whsec-0123456789abcdef"
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=ZoneInfo("Asia/Shanghai"))


@pytest.fixture
async def hook() -> AsyncIterator[WebhookSim]:
    async with WebhookSim() as sim:
        yield sim


async def start(
    sidecar: SidecarFactory, hook: WebhookSim, clock: InstantClock, **settings: object
) -> Sidecar:
    model = await AnthropicSim(fallback="echo").start()
    extra = webhook_config(hook.url, secret=SECRET, max_retries=2, **settings)
    return await sidecar(model, extra=extra, clock=clock)


async def process(sc: Sidecar, text: str) -> tuple[int, dict[str, object]]:
    body = {"input": [message(text)], "channel": "webhook", "user_id": "u7", "session_id": "s7"}
    status, data, _ = await sc.call("POST", "/agent/process", body)
    return status, data


async def test_a_reply_is_posted_signed_with_hmac(
    sidecar: SidecarFactory, hook: WebhookSim
) -> None:
    clock = InstantClock(NOW)
    sc = await start(sidecar, hook, clock)
    try:
        status, data = await process(sc, "hello hook")
        assert status == 200 and data["reply"] == "echo: hello hook"
        [post] = hook.posts
        payload = post.json
        assert {k: payload[k] for k in ("user_id", "session_id", "channel", "text")} == {
            "user_id": "u7",
            "session_id": "s7",
            "channel": "webhook",
            "text": "echo: hello hook",
        }
        assert payload["timestamp"] == "2025-06-01T12:00:00+08:00"
        stamp = post.headers["X-Kernel-Timestamp"]
        assert stamp == str(int(NOW.timestamp()))
        expected = hmac.new(SECRET.encode(), stamp.encode() + b"." + post.raw, hashlib.sha256)
        assert post.headers["X-Kernel-Signature"] == "sha256=" + expected.hexdigest()
        assert post.headers["X-Kernel-Delivery"] == payload["delivery_id"]
    finally:
        await sc.stop()
        await sc.model.stop()


async def test_a_500_is_retried_with_backoff_and_then_delivered(
    sidecar: SidecarFactory, hook: WebhookSim
) -> None:
    clock = InstantClock(NOW)
    sc = await start(sidecar, hook, clock, retry_base_delay=1.5)
    try:
        hook.fail_next(500)
        hook.fail_next(503)
        status, data = await process(sc, "retry me")
        assert status == 200
        assert [p.status for p in hook.posts] == [500, 503, 200]
        assert len({p.json["delivery_id"] for p in hook.posts}) == 1  # one delivery, retried
        waits = [s for s in clock.slept if 1.0 <= s <= 4.0]  # not the 60 s loops' sleeps
        assert len(waits) == 2  # doubled backoff, each jittered by at most ±20 %
        assert 1.5 * 0.8 <= waits[0] <= 1.5 * 1.2 and 3.0 * 0.8 <= waits[1] <= 3.0 * 1.2
        _, state, _ = await sc.call("GET", "/channels/webhook/state")
        assert (state["delivered"], state["failed"]) == (1, 0)
    finally:
        await sc.stop()
        await sc.model.stop()


async def test_the_backoff_is_capped_and_jittered(
    sidecar: SidecarFactory, hook: WebhookSim
) -> None:
    # 200 s doubled would wait 400 s and 800 s; the cap (300 s) holds every wait, and
    # the jitter spreads the first waits of separate deliveries apart.
    clock = InstantClock(NOW)
    model = await AnthropicSim(fallback="echo").start()
    extra = webhook_config(hook.url, max_retries=3, retry_base_delay=200.0)
    sc = await sidecar(model, extra=extra + "\n[cron]\ndelivery_timeout = 3600\n", clock=clock)
    try:
        hook.fail_always(503)
        firsts = []
        for n in range(5):
            clock.slept.clear()
            status, data = await process(sc, f"again {n}")
            assert status == 502 and "4 attempt(s)" in data["error"]["message"]
            waits = [s for s in clock.slept if s >= 150.0]  # not the 60 s loops' sleeps
            assert len(waits) == 3 and 160.0 <= waits[0] <= 240.0
            assert all(240.0 <= w <= 300.0 for w in waits[1:])  # the cap, jittered below it
            firsts.append(waits[0])
        assert len(set(firsts)) > 1
        assert len(hook.posts) == 20
    finally:
        await sc.stop()
        await sc.model.stop()


async def test_a_timeout_is_retried(sidecar: SidecarFactory, hook: WebhookSim) -> None:
    clock = InstantClock(NOW)
    sc = await start(sidecar, hook, clock, timeout_seconds=0.2)
    try:
        hook.stall_next(1.0)
        status, data = await process(sc, "slow receiver")
        assert status == 200
        await hook.wait_until(lambda: len(hook.posts) == 2)
        assert [p.json["text"] for p in hook.posts] == ["echo: slow receiver"] * 2
    finally:
        await sc.stop()
        await sc.model.stop()


async def test_a_delivery_failing_every_retry_is_recorded(
    sidecar: SidecarFactory, hook: WebhookSim, caplog: pytest.LogCaptureFixture
) -> None:
    clock = InstantClock(NOW)
    sc = await start(sidecar, hook, clock)
    try:
        hook.fail_always(502)
        caplog.set_level(logging.WARNING, logger="kernel.channels.webhook")
        status, data = await process(sc, "secret words")
        assert status == 502
        error = data["error"]
        assert error["code"] == "channel_dispatch_failed"
        assert "3 attempt(s)" in error["message"] and "HTTP 502" in error["message"]
        assert error["details"]["reply"] == "echo: secret words"  # the reply is not lost
        assert len(hook.posts) == 3  # the first try and max_retries = 2
        _, state, _ = await sc.call("GET", "/channels/webhook/state")
        assert (state["delivered"], state["failed"], state["last_error"]) == (0, 1, "HTTP 502")
        [failure] = state["recent_failures"]
        assert (failure["attempts"], failure["delivery_id"]) == (3, error["details"]["delivery_id"])
        logged = [r.getMessage() for r in caplog.records]
        assert any("failed after 3 attempt(s)" in line for line in logged)
        assert not any("secret words" in line or hook.url in line for line in logged)
    finally:
        await sc.stop()
        await sc.model.stop()


async def test_a_4xx_is_not_retried(sidecar: SidecarFactory, hook: WebhookSim) -> None:
    sc = await start(sidecar, hook, InstantClock(NOW))
    try:
        hook.fail_next(404)
        status, data = await process(sc, "lost")
        assert status == 502 and len(hook.posts) == 1
    finally:
        await sc.stop()
        await sc.model.stop()


async def test_unknown_and_disabled_channels_are_refused_before_the_turn(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    body = {"input": [message("hi")], "channel": "webhook"}
    status, data, _ = await sc.call("POST", "/agent/process", body)
    assert status == 400 and data["error"]["code"] == "channel_disabled"
    assert "channels.webhook.enabled" in data["error"]["message"]
    status, data, _ = await sc.call("POST", "/agent/process", {**body, "channel": "pigeon"})
    assert status == 400 and data["error"]["code"] == "channel_not_supported"
    assert "console" in data["error"]["message"] and "qq" in data["error"]["message"]
    status, data, _ = await sc.call("POST", "/agent/process", {**body, "channel": "telegram"})
    assert status == 400 and data["error"]["code"] == "channel_disabled"
    assert anthropic_sim.requests == []


class SlowChannel:
    """An extension channel that takes its time: the registry must bound and cancel it."""

    name = "slow"

    def __init__(self) -> None:
        self.cancelled = False

    def unavailable(self) -> str:
        return ""

    async def send_text(self, target: Target, text: str) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled = True
            raise


async def test_the_registry_bounds_deliveries_and_passes_cancellation() -> None:
    registry = ChannelRegistry()
    slow = SlowChannel()
    registry.register(slow)
    with pytest.raises(ChannelError) as info:
        await registry.send("slow", Target(), "x", timeout=0.05)
    assert info.value.code == "channel_dispatch_failed" and slow.cancelled

    slow.cancelled = False
    task = asyncio.ensure_future(registry.send("slow", Target(), "x", timeout=30))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slow.cancelled
    with pytest.raises(ChannelError) as info:
        await registry.send("SLOW", Target(), "x", timeout=1)
    assert info.value.code == "channel_not_supported"
    with pytest.raises(ValueError):
        registry.register(type("Bad", (SlowChannel,), {"name": "Bad Name"})())
    assert json.dumps(info.value.details)


async def test_a_delivery_cut_short_by_the_delivery_timeout_is_recorded(
    sidecar: SidecarFactory, hook: WebhookSim
) -> None:
    # The backoff waits on a clock nobody advances, so the registry's bound
    # (cron.delivery_timeout) cancels the delivery between two attempts.
    clock = ManualClock(NOW)
    model = await AnthropicSim(fallback="echo").start()
    extra = webhook_config(hook.url, max_retries=3) + "\n[cron]\ndelivery_timeout = 0.3\n"
    sc = await sidecar(model, extra=extra, clock=clock)
    try:
        [warning] = [w for w in sc.kernel.config.warnings if "channels.webhook" in w]
        assert "48.4 s" in warning and "cron.delivery_timeout" in warning and "0.3 s" in warning
        hook.fail_always(500)
        status, data = await process(sc, "cut short")
        assert status == 502 and data["error"]["code"] == "channel_dispatch_failed"
        assert "0.3 s" in data["error"]["message"] and len(hook.posts) == 1
        _, state, _ = await sc.call("GET", "/channels/webhook/state")
        assert (state["delivered"], state["failed"]) == (0, 1)
        [failure] = state["recent_failures"]
        assert (
            failure["attempts"] == 1 and failure["delivery_id"] == hook.posts[0].json["delivery_id"]
        )
        assert "cron.delivery_timeout" in failure["error"] and "HTTP 500" in failure["error"]
    finally:
        await sc.stop()
        await model.stop()


async def test_failed_deliveries_are_still_listed_after_a_restart(
    sidecar: SidecarFactory, hook: WebhookSim
) -> None:
    clock = ManualClock(NOW)
    model = await AnthropicSim(fallback="echo").start()
    # The second one is cut short by cron.delivery_timeout (the backoff waits on a clock
    # nobody advances): recorded by a task of its own while the delivery is cancelled.
    extra = webhook_config(hook.url, secret=SECRET, max_retries=1)
    sc = await sidecar(model, extra=extra + "\n[cron]\ndelivery_timeout = 0.5\n", clock=clock)
    try:
        hook.fail_next(404)  # not retried: failed at once
        status, first = await process(sc, "private words")
        assert status == 502
        hook.fail_always(503)
        status, _ = await process(sc, "more private words")
        assert status == 502
        _, before, _ = await sc.call("GET", "/channels/webhook/state")
        assert before["failed"] == 2
        await sc.stop()

        sc = await sidecar(model, keep_config=True, clock=clock)  # the same data directory
        status, state, _ = await sc.call("GET", "/channels/webhook/state")
        assert status == 200
        assert state["recent_failures"] == before["recent_failures"]
        newest, oldest = state["recent_failures"]
        assert newest["delivery_id"] == hook.posts[-1].json["delivery_id"]
        assert oldest["delivery_id"] == first["error"]["details"]["delivery_id"]  # type: ignore[index]
        assert (oldest["attempts"], oldest["error"], oldest["origin"]) == (1, "HTTP 404", "webhook")
        assert "cron.delivery_timeout" in newest["error"] and "HTTP 503" in newest["error"]
        assert set(oldest) == {"delivery_id", "at", "attempts", "error", "origin", "session_id"}
        assert oldest["session_id"] == "s7" and oldest["at"] == NOW.isoformat(timespec="seconds")
        assert state["last_error"] == newest["error"]
        shown = json.dumps(state)
        assert "private words" not in shown and SECRET not in shown and hook.url not in shown
    finally:
        await sc.stop()
        await model.stop()
