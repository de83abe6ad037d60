"""``Config`` is one model whose fields are the sections: a new section is one model and
one field, and everything that knows the file's shape follows it (issue 36); loading
returns the language instead of setting it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field

from kernel.config import Config, language_of, load_config, unknown_keys
from kernel.config.providers import ProviderConfig
from kernel.config.schema import PosInt, Section
from kernel.config.tree import node_of, schema_keys
from kernel.core.errors import ConfigError
from kernel.core.i18n import get_language

ENV = {"KERNEL_PROVIDER_ANTHROPIC_API_KEY": "sk-ant-0123456789abcdef", "KERNEL_LANGUAGE": "en"}


class LampConfig(Section):
    """``[lamp]``: a section Kernel does not have, standing for the next one."""

    colour: Literal["red", "blue"] = Field("red", description="the light's colour")
    hours: PosInt = Field(3, description="how long it stays on")


class WithLamp(Config):
    """Config and one field: nothing else is edited."""

    lamp: LampConfig = Field(default_factory=LampConfig)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_new_section_is_one_model_and_one_field(tmp_path: Path) -> None:
    path = _write(tmp_path, '[lamp]\ncolour = "blue"\ncolr = "red"\n')
    config = load_config(path, env=ENV, require_telegram=False, model=WithLamp)
    # The loader reads it, defaults filled from the model.
    assert isinstance(config, WithLamp)
    assert (config.lamp.colour, config.lamp.hours) == ("blue", 3)
    # Unknown keys inside it are warned, as in any section.
    assert config.warnings[-1:] == ["unknown key lamp.colr in config.toml ignored (a typo?)"]
    # The schema tree lists its keys (config.example.toml's test walks this tree).
    assert {("lamp", "colour"), ("lamp", "hours")} <= {
        (table, key) for table, key, _ in schema_keys(node_of(WithLamp))
    }
    # Its refusals name the key and the fix, like every section's.
    bad = _write(tmp_path, '[lamp]\ncolour = "green"\n')
    with pytest.raises(ConfigError) as refused:
        load_config(bad, env=ENV, require_telegram=False, model=WithLamp)
    assert refused.value.key == "lamp.colour"
    assert (
        str(refused.value)
        == "lamp.colour must be one of red / blue (got 'green'): fix it in config.toml"
    )
    # Without the field, the same table is an unknown one.
    plain = load_config(path, env=ENV, require_telegram=False)
    assert plain.warnings[-1:] == ["unknown key lamp in config.toml ignored (a typo?)"]


class LitProvider(ProviderConfig):
    region: str = Field("", description="where the endpoint runs")


class WithProviderKey(Config):
    providers: dict[str, LitProvider] = Field(default_factory=dict)


def test_the_keys_selfops_allows_follow_the_model() -> None:
    """SelfOps refuses the [providers] keys :func:`unknown_keys` names for the live
    configuration's model: a key added to the model is allowed with no list to edit."""
    change = {"providers": {"main": {"region": "eu", "regoin": "eu"}}}
    assert unknown_keys(change) == ["providers.main.region", "providers.main.regoin"]
    assert unknown_keys(change, WithProviderKey) == ["providers.main.regoin"]


def test_loading_returns_the_language_and_leaves_the_process_one(tmp_path: Path) -> None:
    path = _write(tmp_path, '[general]\nlanguage = "en"\n[cron]\nmax_jobs = "x"\n')
    before = get_language()
    env = {"KERNEL_PROVIDER_ANTHROPIC_API_KEY": "sk-ant-0123456789abcdef"}
    # A refusal is worded in the language the file asks for …
    with pytest.raises(ConfigError) as refused:
        load_config(path, env=env, require_telegram=False)
    assert str(refused.value) == "cron.max_jobs must be int (got 'x'): fix it in config.toml"
    # … which loading returns, never sets.
    assert get_language() == before == "zh"
    good = _write(tmp_path, '[general]\nlanguage = "en"\n')
    assert load_config(good, env=env, require_telegram=False).general.language == "en"
    assert language_of(good, env={}) == "en"
    assert get_language() == "zh"
