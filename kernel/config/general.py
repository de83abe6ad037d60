"""``[telegram]``, ``[general]``, ``[cron]`` and ``[tools.<name>]``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import BeforeValidator, Field

from kernel.config.schema import (
    PRIVATE_ID,
    SECRET,
    Base,
    Env,
    Label,
    NonNegFloat,
    NonNegInt,
    PathText,
    PosFloat,
    PosInt,
    Section,
    internal,
)

LogLevel = Literal["debug", "info", "warning", "error"]
LOG_LEVELS: tuple[str, ...] = get_args(LogLevel)


def _int_from_text(value: object) -> object:
    """A user id may come as text (the environment, or a quoted TOML value)."""
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise ValueError("not an integer") from None
    return value


class TelegramConfig(Section):
    token: Annotated[str, SECRET, Env("KERNEL_TELEGRAM_TOKEN")] = Field(
        "", description="Bot token from @BotFather; required to run the bot"
    )
    allowed_user: Annotated[
        int,
        BeforeValidator(_int_from_text),
        Label("int"),
        PRIVATE_ID,
        Env("KERNEL_TELEGRAM_ALLOWED_USER"),
    ] = Field(0, description="the numeric Telegram user id answered (the owner)")
    api_base: Base = Field("https://api.telegram.org", description="Bot API server")
    stream: bool = Field(True, description="preview replies while they form")
    show_transcript: bool = Field(
        True, description="show what a voice note was heard as, quoted under it"
    )
    progress_interval: PosFloat = Field(3.0, description="seconds between progress edits")
    poll_timeout: PosInt = Field(30, description="long-poll timeout of getUpdates, seconds")
    watchdog_seconds: PosFloat = Field(120.0, description="restart polling after this silence")
    max_retries_429: int = Field(3, description="retries of a request answered with 429")
    typing_interval: PosFloat = Field(4.0, description="seconds between typing refreshes")
    delivery_expiry_hours: PosFloat = Field(
        24.0, description="hours an undeliverable message is retried before it expires"
    )
    max_parallel_turns: PosInt = Field(
        3, description="turns running at once across the chat's topics"
    )
    proactive_topic: str = Field(
        "", max_length=128, description="topic for deliveries that name none (empty: General)"
    )


class GeneralConfig(Section):
    timezone: str = Field("Asia/Shanghai", description="IANA time zone")
    default_provider: str = Field("anthropic", description="the provider used at start")
    fallbacks: list[str] = Field(
        default_factory=list,
        description='models tried in order when the chosen one fails ("provider:model"), for '
        "those that name none",
    )
    default_workspace: PathText = Field(Path("."), description="delegated CLIs' folder")
    context_rounds: PosInt = Field(50, description="recent rounds the model sees")
    memory_recall_k: PosInt = Field(5, description="memories recalled into each request")
    data_dir: PathText = Field(Path("data"), description="database, downloads, logs")
    language: Annotated[Literal["zh", "en"], Env("KERNEL_LANGUAGE")] = Field(
        "zh", description="language of Kernel's own messages"
    )
    max_tool_calls: PosInt = Field(25, description="tool calls allowed for one message")
    soul: PathText = Field(Path("SOUL.md"), description="the persona file")
    shutdown_timeout: PosFloat = Field(10.0, description="seconds turns get at shutdown")
    disabled_tools: Annotated[
        list[str], Env("KERNEL_DISABLED_TOOLS", append=True, also=("NEXTAI_DISABLED_TOOLS",))
    ] = Field(default_factory=list, description="tools switched off by name")
    preset_personas: bool = Field(
        True,
        description="install the seven preset personas in personas/ at start (an owner's "
        "edit is kept, a removed one stays removed)",
    )
    log_level: LogLevel = Field("info", description="log level of stdout and data/logs/kernel.log")
    log_messages: bool = Field(False, description="message text may reach the log (debugging)")
    retention_days: NonNegInt = Field(
        7, description="days downloads, CLI and tool outputs are kept; 0: forever"
    )
    check_timeout: PosFloat = Field(20.0, description="`kernel check`: seconds per part")
    check_connect_timeout: PosFloat = Field(
        2.0, description="`kernel check`: seconds to connect to a provider"
    )


class CronConfig(Section):
    """``[cron]``: scheduled jobs (times in ``general.timezone``)."""

    enabled: bool = Field(True, description="run scheduled jobs")
    max_jobs: PosInt = Field(50, description="jobs the agent may have created")
    misfire_grace_seconds: NonNegFloat = Field(
        300.0, description="a run missed by at most this much runs at start"
    )
    run_timeout: PosFloat = Field(600.0, description="seconds one run may take")
    delivery_timeout: PosFloat = Field(60.0, description="seconds one delivery may take")
    min_interval_seconds: PosInt = Field(60, description="the shortest fixed interval")


class BudgetConfig(Section):
    """``[budget]``: spending limits in ``currency`` (prices: ``providers.<name>.prices``).
    Checked before every model call with its worst case; 0 is no limit."""

    currency: str = Field("USD", min_length=1, max_length=8, description="what prices are in")
    daily: NonNegFloat = Field(0.0, description="limit per day (general.timezone); 0: none")
    monthly: NonNegFloat = Field(0.0, description="limit per calendar month; 0: none")
    step: PosFloat = Field(1.0, description="what one raise press adds to today's limit")
    warn_at: Annotated[float, Field(gt=0, le=1)] = Field(
        0.8, description="share of a limit at which the owner is warned, once per period"
    )
    cron_job_daily: NonNegFloat = Field(
        0.0, description="limit per cron job per day (a job's runtime may set its own); 0: none"
    )


class ToolPolicy(Section):
    """``[tools.<name>]``: per-tool switches."""

    name: str = internal("")
    enabled: bool = Field(True, description="false switches the tool off")
    approval: bool = Field(False, description="the owner approves each call")
    approval_timeout: PosFloat = Field(300.0, description="seconds to wait for the answer")
