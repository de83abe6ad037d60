"""A running Telegram channel: the real PTB Application long-polling the Bot API
simulator, the real anthropic SDK talking to the model simulator, SQLite on disk."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kernel.app import Kernel
from kernel.config import load_config
from kernel.telegram.budget import REAL_PACE
from kernel.telegram.channel import TelegramChannel
from tests.clock import WarpPace
from tests.conftest import write_config
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.telegram_sim import DEFAULT_TOKEN, OWNER, ChatMessage, TelegramSim

CONV = f"telegram:{OWNER}"


@dataclass
class BotHarness:
    tg: TelegramSim
    model: AnthropicSim
    kernel: Kernel
    channel: TelegramChannel

    def bot_messages(self, chat_id: int = OWNER) -> list[ChatMessage]:
        return self.tg.chat(chat_id, from_bot=True)

    def texts(self, chat_id: int = OWNER) -> list[str]:
        return [m.text for m in self.bot_messages(chat_id)]

    async def ask(self, text: str, **kw: Any) -> str:
        """Send a command or message and return the text of the bot's next new message."""
        before = len(self.tg.calls_to("sendMessage"))
        self.tg.inject_text(text, **kw)
        await self.tg.wait_until(lambda: len(self.tg.calls_to("sendMessage")) > before)
        call = self.tg.calls_to("sendMessage")[before]
        return str(call.params["text"])

    async def ask_update(self, update: dict[str, Any]) -> str:
        before = len(self.tg.calls_to("sendMessage"))
        self.tg.inject_update(update)
        await self.tg.wait_until(lambda: len(self.tg.calls_to("sendMessage")) > before)
        return str(self.tg.calls_to("sendMessage")[before].params["text"])

    async def ask_document(self, data: bytes, name: str, **kw: Any) -> str:
        before = len(self.tg.calls_to("sendMessage"))
        self.tg.inject_document(data, name, **kw)
        await self.tg.wait_until(lambda: len(self.tg.calls_to("sendMessage")) > before)
        return str(self.tg.calls_to("sendMessage")[before].params["text"])

    async def settle(self) -> None:
        """Wait until no turn runs and the outbox has delivered everything (the 🔁
        tidy-ups too: no progress message is left in the chat)."""
        await self.tg.wait_until(
            lambda: (
                not self.kernel.agent.sessions.is_busy(CONV)
                and not self.channel._tasks
                and not self.channel.outbox.undelivered(OWNER)
            ),
            timeout=30,
        )

    async def under_way(self, requests: int = 1) -> None:
        """Until the model has had ``requests`` requests and a turn is shown in the
        chat (its view runs; no placeholder marks that moment: issue 37)."""
        views = self.channel.deps.views
        await self.tg.wait_until(lambda: len(self.model.requests) >= requests and views.busy(OWNER))

    async def converse(self, text: str) -> str:
        """Send a message; return the last bot message once the turn is shown."""
        before = len(self.tg.calls_to("sendMessage"))
        self.tg.inject_text(text)
        await self.tg.wait_until(lambda: len(self.tg.calls_to("sendMessage")) > before)
        await self.settle()
        return self.texts()[-1]


Factory = Callable[..., Awaitable[BotHarness]]


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Factory]:
    running: list[tuple[TelegramChannel, Kernel, TelegramSim, AnthropicSim]] = []

    async def start(
        *,
        extra: str = "",
        tg: TelegramSim | None = None,
        model: AnthropicSim | None = None,
        clock: Any = None,
        real_pace: bool = False,
        **general: Any,
    ) -> BotHarness:
        """``real_pace``: the chat's rate budget waits its real seconds (a test of 429s,
        whose ``retry_after`` the simulator keeps in real time); else its waits are
        compressed (tests/clock.py ``WarpPace``)."""
        tg = tg or await TelegramSim().start()
        model = model or await AnthropicSim().start()
        path = write_config(tmp_path, model.base_url, "claude", **{"language": "en", **general})
        path.write_text(
            path.read_text() + f'\n[telegram]\ntoken = "{DEFAULT_TOKEN}"\nallowed_user = {OWNER}\n'
            f'api_base = "{tg.api_base}"\npoll_timeout = 1\nwatchdog_seconds = 2.0\n' + extra
        )
        kernel = Kernel(load_config(path, env={}), clock=clock)
        await kernel.start()
        channel = TelegramChannel(
            kernel.telegram_services(), pace=REAL_PACE if real_pace else WarpPace()
        )
        await channel.start()
        running.append((channel, kernel, tg, model))
        return BotHarness(tg, model, kernel, channel)

    yield start
    servers: dict[int, TelegramSim | AnthropicSim] = {}
    for channel, kernel, tg, model in reversed(running):
        await channel.stop()
        await kernel.stop()
        servers |= {id(tg): tg, id(model): model}
    for server in servers.values():
        await server.stop()


def asking(message: ChatMessage) -> bool:
    """A message with buttons other than the 🔁 every final reply carries (issue 20)."""
    return asking_markup(message.reply_markup)


def asking_markup(markup: dict[str, Any] | str | None) -> bool:
    """The same for a ``reply_markup`` as sent (a dict, or its JSON)."""
    if isinstance(markup, str):
        markup = json.loads(markup)
    if not markup:
        return False
    buttons = [b for row in markup.get("inline_keyboard", []) for b in row]
    return not all(str(b.get("callback_data", "")).startswith("retry:") for b in buttons)
