"""A cron turn whose tool needs the owner's approval asks in Telegram (inline buttons);
with no channel able to ask, the tool is refused at once and the model is told why."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from kernel.core.i18n import t
from tests.clock import ManualClock
from tests.cron.test_scheduler import state, texts, webhook_config
from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply, tool_reply
from tests.sim.webhook_sim import WebhookSim
from tests.telegram.conftest import Factory
from tests.telegram.test_approval import buttons, question
from tests.waiting import wait_until

TZ = ZoneInfo("Asia/Shanghai")
START = datetime(2025, 6, 1, 8, 0, tzinfo=TZ)
APPROVAL = "\n[tools.memory_add]\napproval = true\napproval_timeout = 30\n"


async def test_a_cron_turn_asks_the_owner_in_telegram(bot: Factory) -> None:
    clock = ManualClock(START)
    h = await bot(clock=clock, extra=APPROVAL)
    job = await h.kernel.cron.create(
        {"name": "tea", "schedule": "2025-06-01T08:05", "text": "remember that I like tea"}
    )
    h.model.enqueue(tool_reply("memory_add", {"text": "likes tea"}), text_reply("Saved."))
    clock.advance(to=datetime(2025, 6, 1, 8, 5, tzinfo=TZ))

    asked = await question(h)
    assert asked.text.startswith('The scheduled job "tea" needs your answer:')
    assert "Remember something" in asked.text
    approve, _ = buttons(asked)
    h.tg.inject_callback(approve["callback_data"], message_id=asked.message_id)
    await h.tg.wait_until(lambda: "Saved." in h.texts())
    assert [m.text for m in await h.kernel.store.list_memories()] == ["likes tea"]
    await h.tg.wait_until(lambda: job.row.last_status == "succeeded")
    closed = h.tg.message(asked.chat_id, asked.message_id)
    assert closed is not None and closed.reply_markup is None


async def test_with_nobody_to_ask_the_tool_is_refused_at_once(
    sidecar: SidecarFactory,
) -> None:
    async with AnthropicSim() as model, WebhookSim() as hook:
        clock = ManualClock(START)
        sc = await sidecar(model, extra=webhook_config(hook.url) + APPROVAL, clock=clock)
        model.enqueue(
            tool_reply("memory_add", {"text": "likes tea"}), text_reply("I could not save it.")
        )
        body = {
            "name": "tea",
            "schedule": "every 1d",
            "text": "remember tea",
            "dispatch": {"channel": "webhook"},
        }
        _, job, _ = await sc.call("POST", "/cron/jobs", body)
        await sc.call("POST", f"/cron/jobs/{job['id']}/run")
        await hook.wait_until(lambda: texts(hook) == ["I could not save it."])
        result = model.requests[1].body["messages"][-1]["content"][0]
        assert result["is_error"] is True and t("tool.no_approver", name="memory_add") in str(
            result["content"]
        )
        assert await sc.kernel.store.list_memories() == []
        await wait_until(lambda: not sc.kernel.cron._runs)
        assert (await state(sc, job["id"]))["last_status"] == "succeeded"
