"""A configured model past or near its announced end of life: one warning at start (with
an injected clock) and none for a current model; the table agrees with the dates the
locked SDKs announce."""

from __future__ import annotations

import logging
import re
from datetime import UTC, date, datetime
from pathlib import Path

import anthropic
import openai
import pytest

from kernel.app import Kernel
from kernel.config import load_config
from kernel.core.i18n import set_language
from kernel.providers.retirement import RETIREMENTS, retirement_notices
from tests.clock import ManualClock
from tests.conftest import write_config

REPO = Path(__file__).resolve().parents[2]


def config_with(tmp_path: Path, model: str, titles: str = "") -> Path:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude")
    text = path.read_text().replace('"model-a"', f'"{model}"', 1)
    if titles:
        text += (
            f'[titles]\ntype = "openai_compat"\napi_key = "sk-t-0123456789"\nmodel = "{titles}"\n'
        )
    path.write_text(text)
    return path


def english(path: Path) -> object:
    config = load_config(path, env={"KERNEL_LANGUAGE": "en"}, require_telegram=False)
    set_language(config.general.language)  # loading returns it; kernel check sets it
    return config


@pytest.mark.parametrize(
    ("today", "days"), [(date(2026, 11, 23), 7), (date(2026, 10, 31), 30), (date(2026, 12, 5), -5)]
)
def test_a_model_near_or_past_its_end_of_life_is_named_with_date_and_replacement(
    tmp_path: Path, today: date, days: int
) -> None:
    config = english(config_with(tmp_path, "claude-sonnet-4-5-20250929"))
    [notice] = retirement_notices(config, today)  # type: ignore[arg-type]
    assert notice.days_left == days
    text = notice.describe()
    assert "claude-sonnet-4-5-20250929" in text and "providers.main.default_model" in text
    assert "2026-11-30" in text and "claude-sonnet-5-5" in text
    assert ("days left" in text) == (days >= 0)


def test_no_notice_for_a_current_model_or_one_far_from_its_date(tmp_path: Path) -> None:
    current = english(config_with(tmp_path, "claude-sonnet-5-5"))
    assert retirement_notices(current, date(2026, 11, 23)) == []  # type: ignore[arg-type]
    retiring = english(config_with(tmp_path, "claude-sonnet-4-5"))
    assert retirement_notices(retiring, date(2026, 10, 30)) == []  # type: ignore[arg-type]


def test_the_titles_model_is_checked_too(tmp_path: Path) -> None:
    config = english(config_with(tmp_path, "model-a", titles="gpt-4o-mini"))
    [notice] = retirement_notices(config, date(2026, 12, 20))  # type: ignore[arg-type]
    assert notice.where == "titles.model" and notice.retirement.replacement == "gpt-5.4-mini"


def test_the_shipped_defaults_are_current() -> None:
    keys = {"KERNEL_PROVIDER_ANTHROPIC_API_KEY": "sk-a-0123456789"}
    keys["KERNEL_PROVIDER_OPENAI_API_KEY"] = "sk-o-0123456789"  # every default model
    config = load_config(REPO / "config.example.toml", env=keys, require_telegram=False)
    assert set(config.providers) == {"anthropic", "openai"}
    assert config.providers["anthropic"].default_model == "claude-sonnet-5-5"
    assert retirement_notices(config, date(2026, 11, 23), within_days=365) == []
    assert "gpt-5.4-mini" not in RETIREMENTS  # the commented [titles] example


async def test_kernel_logs_the_warning_once_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = config_with(tmp_path, "claude-sonnet-4-5")
    path.write_text(path.read_text().replace('"model-b"', '"claude-sonnet-4-5"'))
    clock = ManualClock(datetime(2026, 11, 23, 9, 0, tzinfo=UTC))
    with caplog.at_level(logging.WARNING, logger="kernel"):
        async with Kernel(english(path), clock=clock):  # type: ignore[arg-type]
            pass
    warnings = [r.getMessage() for r in caplog.records if "end of life" in r.getMessage()]
    assert warnings == [
        "model claude-sonnet-4-5 (providers.main.default_model) reaches its end of life on "
        "2026-11-30 (7 days left): switch to claude-sonnet-5-5"
    ]


async def test_kernel_starts_without_a_warning_for_a_current_model(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = ManualClock(datetime(2026, 11, 23, 9, 0, tzinfo=UTC))
    with caplog.at_level(logging.WARNING, logger="kernel"):
        async with Kernel(english(config_with(tmp_path, "claude-sonnet-5-5")), clock=clock):  # type: ignore[arg-type]
            pass
    assert not [r for r in caplog.records if "end of life" in r.getMessage()]


def _sdk_date(text: str) -> date:
    """ "November 30th, 2026" as the anthropic SDK writes it."""
    cleaned = re.sub(r"(\d+)(st|nd|rd|th)", r"\1", text)
    return datetime.strptime(cleaned, "%B %d, %Y").replace(tzinfo=UTC).date()


def test_every_date_the_anthropic_sdk_announces_is_in_the_table() -> None:
    from anthropic.resources.messages.messages import DEPRECATED_MODELS

    assert DEPRECATED_MODELS, anthropic.__version__
    for model, when in DEPRECATED_MODELS.items():
        assert model in RETIREMENTS, f"anthropic {anthropic.__version__} retires {model}"
        assert RETIREMENTS[model].end_of_life == _sdk_date(when), model


def test_the_openai_dates_match_the_sdk() -> None:
    source = (Path(openai.__file__).parent / "types/shared/chat_model.py").read_text()
    notes = source.split('"""Deprecated values:', 1)[1]
    announced: dict[str, date] = {}
    for item in re.split(r"\n- ", notes):
        found = re.search(r"shutdown\s+date:\s+(\d{4}-\d{2}-\d{2})", item)
        if found:
            for model in re.findall(r'"([^"]+)"', item.split(":", 1)[0]):
                announced[model] = date.fromisoformat(found.group(1))
    assert len(announced) > 50, openai.__version__
    chat = {m: d for m, d in announced.items() if "audio" not in m and "search" not in m}
    for model, when in chat.items():
        assert model in RETIREMENTS, f"openai {openai.__version__} retires {model}"
        assert RETIREMENTS[model].end_of_life == when, model
