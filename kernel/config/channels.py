"""``[channels.<type>]``: the channels beyond Telegram, one small model each."""

from __future__ import annotations

from typing import Annotated, Literal, cast, get_args

from pydantic import BeforeValidator, Field

from kernel.config.schema import (
    SECRET,
    Env,
    NonNegInt,
    PosFloat,
    PosInt,
    Section,
    Url,
)
from kernel.core.backoff import Backoff

QQTargetType = Literal["c2c", "group", "guild", "dm"]
QQ_TARGET_TYPES: tuple[str, ...] = get_args(QQTargetType)


def _id_text(value: object) -> object:
    """An app id may be written as a number."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value.strip() if isinstance(value, str) else value


class ConsoleChannelConfig(Section):
    """``[channels.console]``: replies over HTTP (``/agent/process``); as a delivery
    target (cron), the text is added to a console chat."""

    enabled: bool = Field(True, description="false refuses deliveries to console chats")


class WebhookChannelConfig(Section):
    """``[channels.webhook]``: each final text POSTed as JSON to ``url``."""

    enabled: bool = Field(False, description="deliver to the webhook")
    url: Url = Field("", description="required when enabled, http(s)")
    secret: Annotated[str, SECRET, Env("KERNEL_WEBHOOK_SECRET")] = Field(
        "", description="HMAC-SHA256 key; empty: requests are not signed"
    )
    timeout_seconds: PosFloat = Field(10.0, description="per attempt")
    max_retries: NonNegInt = Field(3, description="after the first attempt")
    retry_base_delay: PosFloat = Field(
        1.0, description="seconds; doubled each retry (at most 300 s, ±20 % jitter)"
    )


class QQChannelConfig(Section):
    """``[channels.qq]``: the official QQ bot open platform (webhook events in, REST out)."""

    enabled: bool = Field(False, description="answer QQ callbacks")
    app_id: Annotated[str, BeforeValidator(_id_text)] = Field("", description="the bot's id")
    client_secret: Annotated[str, SECRET, Env("KERNEL_QQ_CLIENT_SECRET")] = Field(
        "", description="the bot secret (AppSecret)"
    )
    bot_prefix: str = Field("", description="put before every reply")
    target_type: QQTargetType = Field("c2c", description="where a reply with no event goes")
    target_id: str = Field("", description="the id of that target")
    api_base: Url = Field("https://api.sgroup.qq.com", description="the QQ API")
    token_url: Url = Field(
        "https://bots.qq.com/app/getAppAccessToken", description="the access-token endpoint"
    )
    timeout_seconds: PosFloat = Field(10.0, description="per API request")
    allowed_users: list[str] = Field(
        default_factory=list, description="sender ids answered; empty: nobody"
    )
    # Senders who are the owner: the owner's memories and every tool. Everyone else answered
    # is a guest: no memories, and only ``guest_tools``.
    owner_users: list[str] = Field(default_factory=list, description="senders who are you")
    guest_tools: list[str] = Field(default_factory=list, description="what guests may use")
    callback_max_age: PosFloat = Field(
        300.0, description="seconds a callback's signed timestamp may be off"
    )
    max_concurrent_turns: PosInt = Field(4, description="QQ messages answered at once")
    turn_timeout: PosFloat = Field(240.0, description="seconds one QQ turn may take")


class ChannelsConfig(Section):
    """``[channels.<type>]``: each field is one channel type's section (declared once)."""

    console: ConsoleChannelConfig = Field(default_factory=ConsoleChannelConfig)
    webhook: WebhookChannelConfig = Field(default_factory=WebhookChannelConfig)
    qq: QQChannelConfig = Field(default_factory=QQChannelConfig)


CHANNEL_MODELS: dict[str, type[Section]] = {
    name: cast(type[Section], info.annotation) for name, info in ChannelsConfig.model_fields.items()
}
CHANNEL_TYPES: tuple[str, ...] = tuple(CHANNEL_MODELS)  # configurable under [channels.<type>]


WEBHOOK_BACKOFF_CAP = 300.0  # seconds: the longest wait between two webhook attempts
WEBHOOK_BACKOFF_JITTER = 0.2  # each wait spread over 80 %–120 %, so receivers are not hit at once


def webhook_backoff(w: WebhookChannelConfig) -> Backoff:
    """The wait between webhook attempts: ``retry_base_delay`` doubled per retry, capped
    and jittered."""
    cap = max(WEBHOOK_BACKOFF_CAP, w.retry_base_delay)
    return Backoff(first=w.retry_base_delay, cap=cap, jitter=WEBHOOK_BACKOFF_JITTER)


def webhook_worst_case(w: WebhookChannelConfig) -> float:
    """Seconds one webhook delivery may take: every attempt timing out, plus the longest
    backoff (the jitter at its top)."""
    backoff = webhook_backoff(w)
    counted = min(w.max_retries, 64)  # past 64 doublings every wait is the cap
    waits = sum(backoff.delay(n, rand=lambda: 1.0) for n in range(1, counted + 1))
    waits += (w.max_retries - counted) * backoff.cap
    return round((1 + w.max_retries) * w.timeout_seconds + waits, 3)
