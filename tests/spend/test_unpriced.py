"""``kernel check`` names the models no budget can stop: with a ``[budget]`` set, each
enabled provider's models (and the titles model) that have no price."""

from __future__ import annotations

from pathlib import Path

from kernel.check import unpriced
from kernel.config import load_config
from kernel.core.i18n import set_language
from tests.conftest import write_config

TITLES = (
    '[titles]\ntype = "openai_compat"\napi_base = "http://127.0.0.1:9"\napi_key = "k"\n'
    'model = "tiny"\n'
)


def config(tmp_path: Path, extra: str) -> list[str]:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", language="en")
    path.write_text(path.read_text() + extra)
    loaded = load_config(path, env={}, require_telegram=False)
    set_language(loaded.general.language)  # loading returns it; kernel check sets it
    return [line.render() for line in unpriced(loaded)]


def test_without_a_budget_nothing_is_said(tmp_path: Path) -> None:
    assert config(tmp_path, TITLES) == []


def test_with_a_budget_each_unpriced_model_is_named(tmp_path: Path) -> None:
    extra = "[providers.main.prices.model-a]\ninput = 1.0\noutput = 2.0\n"
    lines = config(tmp_path, extra + TITLES + "[budget]\ndaily = 5.0\n")
    assert len(lines) == 3
    assert lines[0].startswith("[warn] prices main: no price for model-b:")
    assert "[providers.main.prices" in lines[0] and "model-a" not in lines[0]
    # a Claude model priced without its cache prices: named, its calls counted at a bound
    assert lines[1].startswith("[warn] cache prices main: no cache prices")
    assert "for model-a:" in lines[1] and "model-b" not in lines[1]
    assert lines[2].startswith("[warn] prices titles: no price for tiny:")


def test_a_cron_limit_alone_also_asks_for_prices(tmp_path: Path) -> None:
    lines = config(tmp_path, "[budget]\ncron_job_daily = 1.0\n")
    assert lines == [lines[0]] and "model-a, model-b" in lines[0]


def test_everything_priced_is_ok(tmp_path: Path) -> None:
    prices = "".join(
        f"[providers.main.prices.{m}]\ninput = 1.0\noutput = 2.0\ncache_read = 0.1\n"
        "cache_write = 1.25\n"
        for m in ("model-a", "model-b")
    )
    lines = config(tmp_path, prices + "[budget]\nmonthly = 50.0\n")
    assert lines == [
        "[ok  ] budget: every enabled model has a price: the [budget] limits count every call"
    ]
