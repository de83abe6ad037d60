"""/mcp with the real Telegram channel: notify_owner lands in the owner's chat through
the durable outbox, and an owner's own MCP client's permission prompt is a message with
buttons there (the Bot API simulator, python-telegram-bot long-polling it)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kernel.core.i18n import t
from kernel.gateway.routes import ROUTERS
from kernel.gateway.server import Gateway
from tests.mcp.test_endpoint import BASH, client
from tests.telegram.conftest import BotHarness, Factory
from tests.telegram.conftest import bot as bot  # the fixture


@pytest.fixture
async def served(bot: Factory) -> AsyncIterator[tuple[BotHarness, Gateway]]:
    """The bot, and the sidecar of its Kernel (keyless, on loopback)."""
    h = await bot()
    gateway = Gateway(h.kernel.gateway_deps(), ROUTERS)
    await gateway.start()
    yield h, gateway
    await gateway.stop()


async def test_notify_owner_reaches_the_telegram_chat(
    served: tuple[BotHarness, Gateway],
) -> None:
    h, gateway = served
    async with client(gateway.url, gateway.api_key) as session:
        sent = await session.call_tool("notify_owner", {"text": "The build is green <3 & done"})
    assert not sent.is_error, sent
    await h.tg.wait_until(lambda: any("build is green" in text for text in h.texts()))
    [text] = [text for text in h.texts() if "build is green" in text]
    assert text.startswith("📣 MCP client") and text.endswith("The build is green <3 & done")


def buttons(message: Any) -> list[dict[str, Any]]:
    return [b for row in message.reply_markup["inline_keyboard"] for b in row]


async def test_the_owners_client_prompt_is_answered_with_a_button(
    served: tuple[BotHarness, Gateway],
) -> None:
    h, gateway = served
    async with client(gateway.url, gateway.api_key) as session:
        call = asyncio.create_task(
            session.call_tool("approve", {"tool_name": "Bash", "input": BASH})
        )
        await h.tg.wait_until(lambda: any(m.reply_markup for m in h.bot_messages()))
        asked = next(m for m in h.bot_messages() if m.reply_markup)
        assert "git status" in asked.text
        choices = buttons(asked)  # no task whose rules could keep "allow for this task"
        assert [c["text"] for c in choices] == [t("perm.allow_once"), t("perm.deny")]
        h.tg.inject_callback(choices[0]["callback_data"], message_id=asked.message_id)
        result = await call
    assert json.loads(result.content[0].text) == {"behavior": "allow", "updatedInput": BASH}
