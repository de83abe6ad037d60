"""Announced end-of-life dates of the models Kernel may be configured with, and the
notices shown when a configured model is past or near its date: logged once at start,
and a ``warn`` line in ``kernel check``.

The dates are the ones the installed SDKs announce: the anthropic SDK's
``DEPRECATED_MODELS`` (a private module attribute, so it is not read at run time) and the
"Deprecated values" list under the openai SDK's ``ChatModel``. Neither SDK names a
replacement, so this one table keeps date and replacement together;
``tests/providers/test_retirement.py`` fails when the locked SDKs announce a date this
table lacks, so an SDK upgrade brings its new dates here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from kernel.config import Config
from kernel.core.i18n import t

WARN_DAYS = 30  # a configured model this close to its end of life gets a notice

# The current models of each family, from the SDKs' model lists (anthropic 2.17.0's
# ``Model``, openai 3.63.0's ``ChatModel``): the replacements offered below.
SONNET, OPUS, HAIKU, MYTHOS = (
    "claude-sonnet-5-5",
    "claude-opus-5-5",
    "claude-haiku-5-5",
    "claude-mythos-5-2",
)
GPT, GPT_MINI = "gpt-5.5", "gpt-5.4-mini"

# (end of life, replacement, models announced for that date)
_ANNOUNCED: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # anthropic
    ("2024-11-06", SONNET, ("claude-1.3", "claude-1.3-100k")),
    ("2024-11-06", HAIKU, ("claude-instant-1.1", "claude-instant-1.1-100k", "claude-instant-1.2")),
    ("2025-07-21", SONNET, ("claude-2.0", "claude-2.1", "claude-3-sonnet-20240229")),
    ("2026-01-05", OPUS, ("claude-3-opus-20240229",)),
    ("2026-02-19", SONNET, ("claude-3-7-sonnet-latest", "claude-3-7-sonnet-20250219")),
    ("2026-02-19", HAIKU, ("claude-3-5-haiku-latest", "claude-3-5-haiku-20241022")),
    ("2026-06-15", OPUS, ("claude-opus-4-0", "claude-opus-4-20250514")),
    ("2026-06-15", SONNET, ("claude-sonnet-4-0", "claude-sonnet-4-20250514")),
    ("2026-06-30", MYTHOS, ("claude-mythos-preview",)),
    ("2026-11-30", SONNET, ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929")),
    ("2027-01-22", OPUS, ("claude-opus-4-5", "claude-opus-4-5-20251101")),
    # openai
    ("2024-09-13", GPT_MINI, ("gpt-3.5-turbo-16k", "gpt-3.5-turbo-0301", "gpt-3.5-turbo-0613")),
    ("2024-09-13", GPT_MINI, ("gpt-3.5-turbo-16k-0613",)),
    ("2024-12-06", GPT, ("gpt-4-vision-preview",)),
    ("2025-06-06", GPT, ("gpt-4-32k", "gpt-4-32k-0314", "gpt-4-32k-0613")),
    ("2025-07-28", GPT, ("o1-preview", "o1-preview-2024-09-12")),
    ("2025-10-27", GPT_MINI, ("o1-mini", "o1-mini-2024-09-12")),
    ("2026-02-12", GPT, ("codex-mini-latest",)),
    ("2026-02-17", GPT, ("chatgpt-4o-latest",)),
    ("2026-03-26", GPT, ("gpt-4-0125-preview", "gpt-4-turbo-preview", "gpt-4-0314")),
    ("2026-07-23", GPT, ("gpt-5.1-codex", "gpt-5.1-chat-latest", "gpt-5-chat-latest")),
    ("2026-08-10", GPT, ("gpt-5.3-chat-latest", "gpt-5.2-chat-latest")),
    ("2026-09-28", GPT_MINI, ("gpt-3.5-turbo-1106",)),
    (
        "2026-10-23",
        GPT,
        ("o1", "o1-2024-12-17", "gpt-4o-2024-05-13", "gpt-4-turbo", "gpt-4-turbo-2024-04-09"),
    ),
    ("2026-10-23", GPT, ("gpt-4-1106-preview", "gpt-4", "gpt-4-0613")),
    (
        "2026-10-23",
        GPT_MINI,
        ("gpt-4.1-nano", "gpt-4.1-nano-2025-04-14", "o4-mini", "o4-mini-2025-04-16"),
    ),
    ("2026-10-23", GPT_MINI, ("o3-mini", "o3-mini-2025-01-31", "gpt-3.5-turbo")),
    ("2026-10-23", GPT_MINI, ("gpt-3.5-turbo-0125",)),
    ("2026-12-11", GPT, ("gpt-5", "gpt-5-2025-08-07", "o3", "o3-2025-04-16")),
    (
        "2026-12-11",
        GPT_MINI,
        ("gpt-5-mini", "gpt-5-mini-2025-08-07", "gpt-5-nano", "gpt-5-nano-2025-08-07"),
    ),
    ("2027-01-14", GPT, ("gpt-4.1", "gpt-4.1-2025-04-14", "gpt-4o", "gpt-4o-2024-11-20")),
    ("2027-01-14", GPT, ("gpt-4o-2024-08-06",)),
    (
        "2027-01-14",
        GPT_MINI,
        ("gpt-4.1-mini", "gpt-4.1-mini-2025-04-14", "gpt-4o-mini", "gpt-4o-mini-2024-07-18"),
    ),
    ("2027-04-01", GPT, ("gpt-5.1", "gpt-5.1-2025-11-13")),
    ("2027-04-01", GPT_MINI, ("gpt-5.4-nano", "gpt-5.4-nano-2026-03-17")),
)


@dataclass(frozen=True, slots=True)
class Retirement:
    model: str
    end_of_life: date
    replacement: str


RETIREMENTS: dict[str, Retirement] = {
    model: Retirement(model, date.fromisoformat(day), replacement)
    for day, replacement, models in _ANNOUNCED
    for model in models
}


@dataclass(frozen=True, slots=True)
class RetirementNotice:
    """A configured model past or near its end of life, and where it is configured."""

    retirement: Retirement
    where: str  # the config key, e.g. providers.anthropic.default_model
    days_left: int  # negative: already past

    @property
    def model(self) -> str:
        return self.retirement.model

    def describe(self) -> str:
        key = "model.retiring" if self.days_left >= 0 else "model.retired"
        return t(
            key,
            model=self.model,
            where=self.where,
            date=self.retirement.end_of_life.isoformat(),
            days=self.days_left,
            replacement=self.retirement.replacement,
        )


def _configured_models(config: Config) -> list[tuple[str, str]]:
    """(model, config key) for every model Kernel may send requests to."""
    found: list[tuple[str, str]] = []
    for name, provider in config.enabled_providers.items():
        found.append((provider.default_model, f"providers.{name}.default_model"))
        found += [(model, f"providers.{name}.models") for model in provider.models]
    if config.titles is not None:
        found.append((config.titles.model, "titles.model"))
    return found


def retirement_notices(
    config: Config, today: date, within_days: int = WARN_DAYS
) -> list[RetirementNotice]:
    """One notice per configured model that is past its end of life or reaches it
    within ``within_days`` of ``today``; a model configured twice is named once."""
    notices: list[RetirementNotice] = []
    seen: set[str] = set()
    for model, where in _configured_models(config):
        retirement = RETIREMENTS.get(model)
        if retirement is None or model in seen:
            continue
        days_left = (retirement.end_of_life - today).days
        if days_left <= within_days:
            seen.add(model)
            notices.append(RetirementNotice(retirement, where, days_left))
    return notices
