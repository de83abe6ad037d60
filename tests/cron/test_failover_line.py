"""A cron run that failed over (issue 17): the owner's chat is told which model answered
instead, as in a conversation; a webhook (not the owner) gets the result alone."""

from __future__ import annotations

from kernel.store.db import Store
from tests.clock import ManualClock
from tests.cron.test_budget import START, run_now
from tests.cron.test_scheduler import create, texts, webhook_config
from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error, text_reply
from tests.sim.webhook_sim import WebhookSim

# Into [providers.main], the sidecar config's last table before the webhook's.
FALLBACK = 'fallbacks = ["main:model-b"]\n'
OVERLOADED = [Error(529, "overloaded_error", "Overloaded")] * 3  # 1 + max_retries


async def console_texts(store: Store) -> list[str]:
    rows = await store.list_sessions()
    out: list[str] = []
    for row in rows:
        if row.channel == "console":
            out += [m.text for m in await store.load_messages(row.id) if m.role == "assistant"]
    return out


async def test_the_owners_chat_hears_of_the_switch_a_webhook_does_not(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, hook: WebhookSim
) -> None:
    sc = await sidecar(
        anthropic_sim, extra=FALLBACK + webhook_config(hook.url), clock=ManualClock(START)
    )
    to_console = await create(
        sc, name="to me", schedule="every 1d", text="hi", dispatch={"channel": "console"}
    )
    to_hook = await create(sc, name="to a hook", schedule="every 1d", text="hi")

    anthropic_sim.enqueue(*OVERLOADED, text_reply("from model b"))
    done = await run_now(sc, to_console["id"])
    assert done["last_status"] == "succeeded"
    [shown] = [text for text in await console_texts(sc.kernel.store) if "from model b" in text]
    assert shown.startswith("⚠️ main:model-a") and "main:model-b" in shown.splitlines()[0]
    assert shown.splitlines()[-1] == "from model b"

    anthropic_sim.enqueue(*OVERLOADED, text_reply("for the hook"))
    done = await run_now(sc, to_hook["id"])
    assert done["last_status"] == "succeeded"
    await hook.wait_until(lambda: len(hook.posts) == 1)
    assert texts(hook) == ["for the hook"]


async def test_a_webhook_hears_a_run_failed_but_not_why(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, hook: WebhookSim
) -> None:
    sc = await sidecar(anthropic_sim, extra=webhook_config(hook.url), clock=ManualClock(START))
    job = await create(sc, name="digest", schedule="every 1d", text="hi")
    anthropic_sim.enqueue(Error(400, "invalid_request_error", "model-a needs a paid plan"))
    done = await run_now(sc, job["id"])
    assert done["last_status"] == "failed" and "paid plan" in done["last_error"]
    await hook.wait_until(lambda: len(hook.posts) == 1)
    [text] = texts(hook)
    assert "digest" in text and "paid plan" not in text and "main" not in text
