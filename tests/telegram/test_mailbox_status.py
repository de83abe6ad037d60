"""/status and /healthz show the inbox and the outbox: turns open, messages waiting for
delivery and the oldest one's age, polling's last consumed update."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from kernel.gateway.routes import ROUTERS
from kernel.gateway.server import Gateway
from kernel.telegram import channel as channel_module
from tests.sim.script import Reply, Text, text_reply
from tests.telegram.conftest import CONV, Factory


async def _health(url: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(url + "/healthz") as response:
        assert response.status == 200
        data: dict[str, Any] = await response.json()
        return data["channels"]["telegram"]


async def test_healthz_and_status_show_open_turns_and_undelivered_messages(
    bot: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = await bot()
    gateway = Gateway(h.kernel.gateway_deps(), ROUTERS)
    await gateway.start()
    try:
        calm = await _health(gateway.url)
        assert calm["state"] == "running"
        assert calm["inbox"] == {"open_turns": 0, "waiting": 0}
        assert calm["outbox"]["undelivered"] == 0

        # A turn at the model is an open inbox row.
        h.model.enqueue(Reply(Text("slow", chunks=["sl", "ow"]), stall_after=1))
        h.tg.inject_text("think slowly")
        await h.model.wait_for_requests(1)
        await h.tg.wait_until(lambda: h.kernel.agent.sessions.is_busy(CONV))
        assert (await _health(gateway.url))["inbox"]["open_turns"] == 1
        await h.ask("/cancel")
        await h.settle()
        assert (await _health(gateway.url))["inbox"]["open_turns"] == 0

        # A reply the Bot API will not take yet waits in the outbox: shown, and /healthz
        # says degraded once it waits longer than the limit (0 s here).
        monkeypatch.setattr(channel_module, "UNDELIVERED_DEGRADED", 0.0)
        h.tg.fail("sendMessage", status=502, times=3)
        h.model.enqueue(text_reply("late but sure"))
        h.tg.inject_text("hello")
        await h.tg.wait_until(lambda: h.channel.outbox.stats()["undelivered"] > 0)
        waiting = await _health(gateway.url)
        assert waiting["state"] == "degraded"
        assert waiting["outbox"]["undelivered"] >= 1
        assert waiting["inbox"]["open_turns"] == 0  # queued: the turn is answered
        await h.settle()
        # A 502 may come after Telegram took the message: the re-send is marked.
        assert h.texts()[-1] == "↻ late but sure"
        status = await h.ask("/status full")
        assert "outbox: 0 undelivered" in status
        assert "Polling: last update" in status and "unreadable 0" in status
        assert (await _health(gateway.url))["state"] == "running"
    finally:
        await gateway.stop()
