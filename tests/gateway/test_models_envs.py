"""``/models`` and ``/envs``: changes land in data/runtime.toml (config.toml untouched),
take effect without a restart, and survive one."""

from __future__ import annotations

import stat
import tomllib

from kernel.runtime import child_env
from tests.conftest import SECRET_KEY
from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.openai_sim import OpenAISim
from tests.sim.script import text_reply
from tests.waiting import wait_until

NEW_KEY = "sk-new-key-abcdefghijklmnop"


async def test_catalog_masks_keys(sidecar: SidecarFactory, anthropic_sim: AnthropicSim) -> None:
    sc = await sidecar(anthropic_sim)
    status, data, response = await sc.call("GET", "/models/catalog")
    assert status == 200
    (main,) = data["providers"]
    assert main["id"] == "main" and main["type"] == "claude" and main["enabled"] is True
    assert main["models"] == ["model-a", "model-b"] and main["has_api_key"] is True
    assert main["api_key"] == SECRET_KEY[:4] + "…" + SECRET_KEY[-4:]
    assert data["active_llm"] == {"provider_id": "main", "model": "model-a"}
    assert SECRET_KEY not in await response.text()


async def test_provider_change_applies_at_once_and_only_in_runtime_toml(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    config_before = sc.config_path.read_bytes()
    other = await AnthropicSim().start()
    try:
        body = {"base_url": other.base_url, "api_key": NEW_KEY, "models": ["model-a", "model-c"]}
        status, data, _ = await sc.call("PUT", "/models/main/config", body)
        assert status == 200
        assert data["base_url"] == other.base_url and data["models"] == ["model-a", "model-c"]
        other.enqueue(text_reply("from the other endpoint"))
        status, reply = await sc.process("hi")
        assert (status, reply["reply"]) == (200, "from the other endpoint")
        headers = other.requests[-1].headers  # the client was rebuilt with the new key
        assert NEW_KEY in (headers.get("x-api-key", ""), headers.get("Authorization", "")[7:])
        assert anthropic_sim.requests == []
        # The replaced client was closed once no turn used it (no pool left open).
        await wait_until(lambda: not sc.kernel.agent.selection.retiring())
    finally:
        await other.stop()
    assert sc.config_path.read_bytes() == config_before
    runtime = sc.kernel.config.runtime_path
    assert stat.S_IMODE(runtime.stat().st_mode) == 0o600
    overlay = tomllib.loads(runtime.read_text())
    assert overlay["providers"]["main"] == {
        "api_base": body["base_url"],
        "api_key": NEW_KEY,
        "models": ["model-a", "model-c"],
    }
    assert [p.name for p in runtime.parent.iterdir() if p.name.startswith(".runtime.toml-")] == []


async def test_runtime_changes_survive_a_restart(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, openai_sim: OpenAISim
) -> None:
    sc = await sidecar(anthropic_sim)
    local = {
        "type": "openai_compat",
        "base_url": openai_sim.base_url,
        "api_key": NEW_KEY,
        "models": ["gpt-x", "gpt-y"],
        "aliases": {"small": "gpt-y"},
    }
    assert (await sc.call("PUT", "/models/local/config", local))[0] == 200
    status, data, _ = await sc.call(
        "PUT", "/models/active", {"provider_id": "local", "model": "small"}
    )
    assert (status, data) == (200, {"provider_id": "local", "model": "gpt-y"})
    assert (await sc.call("PUT", "/envs/GITHUB_TOKEN", {"value": "ghp_abcdefghijklmnop"}))[0] == 200
    await sc.stop()

    again = await sidecar(anthropic_sim, keep_config=True)
    _, active, _ = await again.call("GET", "/models/active")
    assert active == {"provider_id": "local", "model": "gpt-y"}
    _, catalog, _ = await again.call("GET", "/models/catalog")
    local_entry = next(p for p in catalog["providers"] if p["id"] == "local")
    assert local_entry["aliases"] == {"small": "gpt-y"} and local_entry["enabled"] is True
    openai_sim.enqueue(text_reply("answered by local"))
    status, reply = await again.process("hi")
    assert reply["reply"] == "answered by local"
    assert openai_sim.requests[-1].body["model"] == "gpt-y"
    _, envs, _ = await again.call("GET", "/envs")
    assert [(e["key"], e["source"]) for e in envs["envs"]] == [("GITHUB_TOKEN", "runtime")]
    assert child_env(again.kernel.config, {})["GITHUB_TOKEN"] == "ghp_abcdefghijklmnop"


async def test_model_refusals(sidecar: SidecarFactory, anthropic_sim: AnthropicSim) -> None:
    sc = await sidecar(anthropic_sim)
    cases = [
        ("PUT", "/models/ghost/config", {"enabled": True}, 404, "provider_not_found"),
        ("PUT", "/models/active", {"provider_id": "ghost"}, 404, "provider_not_found"),
        (
            "PUT",
            "/models/active",
            {"provider_id": "main", "model": "gpt-9"},
            400,
            "model_not_found",
        ),
        ("PUT", "/models/main/config", {}, 400, "invalid_request"),
        ("PUT", "/models/main/config", {"enabled": False}, 400, "invalid_request"),
        ("PUT", "/models/main/config", {"aliases": {"x": "nope"}}, 400, "invalid_request"),
        ("PUT", "/models/main/config", {"type": "gemini"}, 400, "invalid_request"),
        ("PUT", "/models/bad name/config", {"type": "claude"}, 400, "invalid_request"),
    ]
    for method, path, body, status, code in cases:
        got, data, _ = await sc.call(method, path, body)
        assert (got, data["error"]["code"]) == (status, code), (path, body, data)
    # A provider without a key is kept but disabled, and cannot be made active.
    spare = {"type": "openai_compat", "base_url": "http://127.0.0.1:9/v1", "models": ["m"]}
    status, data, _ = await sc.call("PUT", "/models/spare/config", spare)
    assert status == 200 and data["enabled"] is False
    status, data, _ = await sc.call("PUT", "/models/active", {"provider_id": "spare"})
    assert (status, data["error"]["code"]) == (400, "provider_disabled")
    _, data, _ = await sc.call("PUT", "/models/main/config", {"aliases": {"x": "nope"}})
    assert "providers.main.aliases.x" in data["error"]["message"]
    assert not sc.kernel.config.runtime_path.read_text().count("nope")  # refused: not written


async def test_env_key_from_the_environment_wins(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    sc.kernel.config.source_env["KERNEL_PROVIDER_MAIN_API_KEY"] = SECRET_KEY
    status, data, _ = await sc.call("PUT", "/models/main/config", {"api_key": NEW_KEY})
    assert status == 400 and "KERNEL_PROVIDER_MAIN_API_KEY" in data["error"]["message"]


async def test_envs_crud_and_masking(sidecar: SidecarFactory, anthropic_sim: AnthropicSim) -> None:
    sc = await sidecar(anthropic_sim, extra='[envs]\nFROM_CONFIG = "c"\n')
    for key, value in (("OPENAI_API_KEY", "sk-abcdefghijklmnop"), ("PLAIN", "v1")):
        status, data, _ = await sc.call("PUT", f"/envs/{key}", {"value": value})
        assert status == 200
    status, data, response = await sc.call("GET", "/envs")
    listed = {e["key"]: e for e in data["envs"]}
    assert listed["OPENAI_API_KEY"]["value"] == "sk-a…mnop"
    assert listed["OPENAI_API_KEY"]["sensitive"] is True
    assert listed["PLAIN"] == {
        "key": "PLAIN",
        "value": "v1",
        "sensitive": False,
        "source": "runtime",
    }
    assert listed["FROM_CONFIG"]["source"] == "config"
    assert "sk-abcdefghijklmnop" not in await response.text()
    env = sc.kernel.runtime.child_env({"PATH": "/bin"})
    assert env == {
        "PATH": "/bin",
        "FROM_CONFIG": "c",
        "OPENAI_API_KEY": "sk-abcdefghijklmnop",
        "PLAIN": "v1",
    }
    status, one, _ = await sc.call("GET", "/envs/PLAIN")
    assert (status, one["value"]) == (200, "v1")
    assert (await sc.call("DELETE", "/envs/PLAIN"))[0] == 200
    assert "PLAIN" not in sc.kernel.config.envs
    status, data, _ = await sc.call("DELETE", "/envs/PLAIN")
    assert (status, data["error"]["code"]) == (404, "not_found")
    status, data, _ = await sc.call("DELETE", "/envs/FROM_CONFIG")
    assert status == 400 and "config.toml" in data["error"]["message"]
    status, data, _ = await sc.call("PUT", "/envs/1BAD-NAME", {"value": "x"})
    assert (status, data["error"]["code"]) == (400, "invalid_request")
    status, data, _ = await sc.call("PUT", "/envs", {"envs": {"ONLY": "this"}})
    assert status == 200
    assert sorted(e["key"] for e in data["envs"]) == ["FROM_CONFIG", "ONLY"]
    overlay = tomllib.loads(sc.kernel.config.runtime_path.read_text())
    assert overlay["envs"] == {"ONLY": "this"}
