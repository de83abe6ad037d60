"""One QQ message event, as kernel/channels/qq_inbound.py parses it and
kernel/channels/qq.py's state names a refused one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class InboundMessage:
    event_type: str
    kind: str  # c2c, group, guild, dm: where the reply goes
    target_id: str  # openid, group_openid, channel_id or guild_id
    user_id: str  # the sender
    msg_id: str
    text: str

    @property
    def session_id(self) -> str:
        """One conversation per place and sender."""
        if self.kind == "c2c":
            return f"c2c:{self.target_id}"
        return f"{self.kind}:{self.target_id}:{self.user_id}"
