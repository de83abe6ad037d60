"""``GET /runtime-config`` (issue 20, point 5): seed 000's flags come from ``[features]``
with the seed's environment overrides, and switch what they name."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel.config import load_config
from kernel.core.errors import ConfigError
from tests.conftest import write_config
from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim

SEED_FLAGS = ("prompt_templates", "prompt_context_introspect", "codex_mode_v2")


async def test_the_flags_follow_the_configuration(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    _, data, _ = await sc.call("GET", "/runtime-config")
    # seed 000's defaults (issue 38): all three off
    assert {k: data["features"][k] for k in SEED_FLAGS} == {
        "prompt_templates": False,
        "prompt_context_introspect": False,
        "codex_mode_v2": False,
    }
    # what the flags switch is switched
    status, body, _ = await sc.call("GET", "/agent/system-layers")
    assert status == 404 and "prompt_context_introspect" in body["error"]["message"]
    status, body = await sc.process("/prompts:anything")
    assert status == 409 and body["error"]["code"] == "prompt_templates_disabled"
    assert anthropic_sim.requests == []
    await sc.stop()

    flipped = (
        "\n[features]\nprompt_templates = true\nprompt_context_introspect = true\n"
        "codex_mode_v2 = true\n"
    )
    sc = await sidecar(anthropic_sim, extra=flipped)
    _, data, _ = await sc.call("GET", "/runtime-config")
    assert {k: data["features"][k] for k in SEED_FLAGS} == {
        "prompt_templates": True,
        "prompt_context_introspect": True,
        "codex_mode_v2": True,
    }
    status, body, _ = await sc.call("GET", "/agent/system-layers")
    assert status == 200 and body["layers"][0]["name"] == "soul"


def test_the_seeds_environment_variables_win_over_the_keys(tmp_path: Path) -> None:
    path = write_config(tmp_path, "http://127.0.0.1:9", "claude", language="en")
    path.write_text(path.read_text() + "\n[features]\nprompt_templates = false\n")
    env = {
        "NEXTAI_ENABLE_PROMPT_TEMPLATES": "true",
        "NEXTAI_ENABLE_PROMPT_CONTEXT_INTROSPECT": "0",
        "NEXTAI_ENABLE_CODEX_MODE_V2": "on",
    }
    features = load_config(path, env=env, require_telegram=False).features
    assert features.prompt_templates is True
    assert features.prompt_context_introspect is False
    assert features.codex_mode_v2 is True
    assert load_config(path, env={}, require_telegram=False).features.prompt_templates is False

    with pytest.raises(ConfigError, match="features.codex_mode_v2"):
        load_config(path, env={"NEXTAI_ENABLE_CODEX_MODE_V2": "maybe"}, require_telegram=False)
    # A bad value from the environment names the variable (not config.toml) as the fix.
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={"NEXTAI_CODEX_PROMPT_SOURCE": "cloud"}, require_telegram=False)
    message = str(caught.value)
    assert message.startswith("The environment variable NEXTAI_CODEX_PROMPT_SOURCE")
    assert "features.codex_prompt_source" in message and "unset the variable" in message
