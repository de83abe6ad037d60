"""The ``console`` channel: HTTP clients get their replies from ``/agent/process``
itself; as a delivery target (a cron job's result) the text is added to a console chat,
where ``GET /chats/{id}`` and ``kernel chats get`` show it."""

from __future__ import annotations

from kernel.config import Config
from kernel.core.delivery import Target
from kernel.core.i18n import t
from kernel.core.messages import Message, TextBlock
from kernel.store.db import Store

# The sidecar's protected default chat (kernel/gateway/routes/chats.py DEFAULT_KEY).
DEFAULT_USER = "demo-user"
DEFAULT_SESSION = "session-default"


class ConsoleChannel:
    name = "console"

    def __init__(self, config: Config, store: Store) -> None:
        self.config = config
        self.store = store

    def unavailable(self) -> str:
        if not self.config.channels.console.enabled:
            return t("channel.disabled", name=self.name, key="channels.console.enabled")
        return ""

    async def send_text(self, target: Target, text: str) -> None:
        row, _ = await self.store.open_session(
            self.name, target.user_id or DEFAULT_USER, target.session_id or DEFAULT_SESSION
        )
        assert row is not None
        await self.store.append_messages(row.id, [Message("assistant", [TextBlock(text)])])
