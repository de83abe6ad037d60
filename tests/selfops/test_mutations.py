"""``/agent/self/config-mutations``: preview → apply for files, providers and the active
model; expiry (injected clock), hash mismatch, sensitive denial and allowance, path
denial, and a change made between preview and apply."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.conftest import Sidecar, SidecarFactory
from tests.prompts.conftest import FLAGS_ON
from tests.sim.anthropic_sim import AnthropicSim
from tests.workspace.test_files import names

PREVIEW = "/agent/self/config-mutations/preview"
APPLY = "/agent/self/config-mutations/apply"


async def preview(sc: Sidecar, target: str, *ops: dict[str, Any], allow: bool = False) -> Any:
    body = {"target": target, "operations": list(ops), "allow_sensitive": allow}
    status, data, _ = await sc.call("POST", PREVIEW, body)
    assert status == 200, data
    return data


async def apply(sc: Sidecar, p: dict[str, Any], **override: Any) -> tuple[int, Any]:
    body = {
        "mutation_id": p["mutation_id"],
        "confirm_hash": p["confirm_hash"],
        "allow_sensitive": p["allow_sensitive"],
        **override,
    }
    status, data, _ = await sc.call("POST", APPLY, body)
    return status, data


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


async def test_a_prompt_file_is_previewed_then_written(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)
    op = {"kind": "replace", "path": "prompts/style.md", "value": "Be brief.\nUse lists.\n"}

    p = await preview(sc, "workspace_file", op)

    assert len(p["mutation_id"]) == 32 and len(p["confirm_hash"]) == 64
    assert p["requires_sensitive_allow"] is False and p["ttl_seconds"] == 300
    assert p["checks"]["path_whitelist_passed"] is True
    assert p["checks"]["sensitive_fields"] == [] and p["checks"]["risk_level"] == "medium"
    [summary] = p["diff_summary"]
    assert summary["path"] == "prompts/style.md" and summary["created"] is True
    assert (summary["added_lines"], summary["removed_lines"]) == (2, 0)
    assert p["unified_diff"].splitlines() == [
        "--- /dev/null",
        "+++ b/prompts/style.md",
        "@@ -0,0 +1,2 @@",
        "+Be brief.",
        "+Use lists.",
    ]
    assert not (tmp_path / "prompts").exists()  # a preview writes nothing

    status, data = await apply(sc, p)

    assert status == 200
    assert data == {
        "applied": True,
        "mutation_id": p["mutation_id"],
        "target": "workspace_file",
        "applied_targets": ["prompts/style.md"],
    }
    assert (tmp_path / "prompts" / "style.md").read_text() == "Be brief.\nUse lists.\n"
    status, data = await apply(sc, p)
    assert status == 404 and data["error"]["code"] == "mutation_not_found"


async def test_soul_rewrite_takes_effect_on_the_next_turn(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    (tmp_path / "SOUL.md").write_text("You are Kernel.\nBe kind.\n")
    sc = await sidecar(anthropic_sim, extra=FLAGS_ON)  # GET /agent/system-layers below
    op = {"kind": "text_rewrite", "path": "SOUL.md", "search": "Kernel", "replace": "Kay"}

    p = await preview(sc, "workspace_file", op)
    assert "-You are Kernel.\n+You are Kay." in p["unified_diff"]
    status, _ = await apply(sc, p)

    assert status == 200
    _, layers, _ = await sc.call("GET", "/agent/system-layers")
    assert layers["layers"][0]["content_preview"] == "You are Kay.\nBe kind."
    missing = {"kind": "text_rewrite", "path": "SOUL.md", "search": "Kernel", "replace": "x"}
    status, data, _ = await sc.call(
        "POST", PREVIEW, {"target": "workspace_file", "operations": [missing]}
    )
    assert status == 400 and "search" in data["error"]["message"]


async def test_expiry_follows_the_injected_clock(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)
    clock = Clock()
    sc.kernel.selfops.clock = clock
    first = await preview(sc, "file", {"kind": "replace", "path": "prompts/a.md", "value": "A"})
    second = await preview(sc, "file", {"kind": "replace", "path": "prompts/b.md", "value": "B"})
    assert first["expires_at"] == "2026-03-01T09:05:00+00:00"

    clock.now += timedelta(minutes=4, seconds=59)
    status, _ = await apply(sc, first)
    assert status == 200 and (tmp_path / "prompts" / "a.md").read_text() == "A"

    clock.now += timedelta(seconds=2)
    status, data = await apply(sc, second)
    assert status == 410 and data["error"]["code"] == "mutation_expired"
    assert "preview again" in data["error"]["message"]
    assert not (tmp_path / "prompts" / "b.md").exists()
    status, data = await apply(sc, second)
    assert status == 404 and data["error"]["code"] == "mutation_not_found"


async def test_a_wrong_hash_is_refused_and_the_right_one_still_works(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)
    p = await preview(sc, "file", {"kind": "replace", "path": "prompts/a.md", "value": "A"})

    status, data = await apply(sc, p, confirm_hash="0" * 64)

    assert status == 409 and data["error"]["code"] == "mutation_hash_mismatch"
    assert not (tmp_path / "prompts").exists()
    status, _ = await apply(sc, p)
    assert status == 200 and (tmp_path / "prompts" / "a.md").read_text() == "A"


async def test_sensitive_fields_need_allow_sensitive_at_both_steps(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    skill = tmp_path / "skills" / "gh" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: gh\ndescription: GitHub\n---\nUse the gh CLI.\n")
    sc = await sidecar(anthropic_sim)
    secret = "ghp_0123456789abcdefSECRET"
    op = {"kind": "text_rewrite", "path": "skills/gh/SKILL.md", "search": "Use the gh CLI.",
          "replace": f"Use the gh CLI.\nGITHUB_TOKEN = {secret}"}  # fmt: skip

    p = await preview(sc, "workspace_file", op)
    assert p["requires_sensitive_allow"] is True
    assert p["checks"]["sensitive_fields"] == ["GITHUB_TOKEN"]
    assert p["checks"]["risk_level"] == "high"
    assert secret not in p["unified_diff"] and "+GITHUB_TOKEN = ghp_" in p["unified_diff"]

    status, data = await apply(sc, p)
    assert status == 403 and data["error"]["code"] == "mutation_sensitive_denied"
    assert "GITHUB_TOKEN" in data["error"]["message"] and secret not in str(data)
    status, data = await apply(sc, p, allow_sensitive=True)  # not what the preview said
    assert status == 403 and data["error"]["code"] == "mutation_sensitive_denied"
    assert secret not in skill.read_text()

    allowed = await preview(sc, "workspace_file", op, allow=True)
    assert allowed["requires_sensitive_allow"] is True and allowed["allow_sensitive"] is True
    status, data = await apply(sc, allowed)
    assert status == 200 and skill.read_text().endswith(f"GITHUB_TOKEN = {secret}\n")


@pytest.mark.posix
async def test_paths_outside_the_whitelist_are_denied(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)
    before = names(tmp_path)
    config = (tmp_path / "config.toml").read_text()
    for path in (
        "config.toml",
        "data/runtime.toml",
        "notes.md",
        "prompts",
        "../outside.md",
        "prompts/../config.toml",
        "/etc/passwd",
        "prompts/.hidden.md",
        "skills%2F..%2Fconfig.toml",
    ):
        body = {
            "target": "workspace_file",
            "operations": [{"kind": "replace", "path": path, "value": "pwned"}],
        }
        status, data, _ = await sc.call("POST", PREVIEW, body)
        assert status == 403, path
        assert data["error"]["code"] == "mutation_path_denied", path
        assert data["error"]["details"]["denied_paths"] == [path]
    link = tmp_path / "prompts"
    link.symlink_to(tmp_path / "data")
    body = {
        "target": "file",
        "operations": [{"kind": "replace", "path": "prompts/x", "value": "x"}],
    }
    status, data, _ = await sc.call("POST", PREVIEW, body)
    assert status == 403 and data["error"]["code"] == "mutation_path_denied"
    link.unlink()
    assert names(tmp_path) == before
    assert (tmp_path / "config.toml").read_text() == config


async def test_a_change_between_preview_and_apply_is_a_conflict(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    prompt = tmp_path / "prompts" / "a.md"
    prompt.parent.mkdir()
    prompt.write_text("v1\n")
    sc = await sidecar(anthropic_sim)

    p = await preview(sc, "file", {"kind": "replace", "path": "prompts/a.md", "value": "v2\n"})
    prompt.write_text("edited by hand\n")
    status, data = await apply(sc, p)
    assert status == 409 and data["error"]["code"] == "mutation_apply_conflict"
    assert prompt.read_text() == "edited by hand\n"
    status, data = await apply(sc, p)  # a conflicting preview is spent
    assert status == 404

    merge = {"kind": "merge", "value": {"main": {"models": ["model-a", "model-b", "model-c"]}}}
    p = await preview(sc, "provider_config", merge)
    status, _, _ = await sc.call("PUT", "/models/main/config", {"max_tokens": 2048})
    assert status == 200
    status, data = await apply(sc, p)
    assert status == 409 and data["error"]["code"] == "mutation_apply_conflict"
    overlay = tomllib.loads(sc.kernel.config.runtime_path.read_text())
    assert overlay["providers"]["main"] == {"max_tokens": 2048}

    await sc.call("PUT", "/models/main/config", {"models": ["model-a", "model-b", "model-c"]})
    active = {"kind": "replace", "value": {"provider_id": "main", "model": "model-c"}}
    p = await preview(sc, "active_llm", active)
    status, _, _ = await sc.call("PUT", "/models/active", {"provider_id": "main"})
    assert status == 200  # model-a, as it was: the same choice again is not a change
    status, _ = await apply(sc, p)
    assert status == 200
    p = await preview(sc, "active_llm", {"kind": "replace", "value": {"provider_id": "main"}})
    await sc.call("PUT", "/models/active", {"provider_id": "main", "model": "model-b"})
    status, data = await apply(sc, p)
    assert status == 409 and data["error"]["code"] == "mutation_apply_conflict"
    _, now, _ = await sc.call("GET", "/models/active")
    assert now == {"provider_id": "main", "model": "model-b"}


async def test_providers_and_active_model_change_live(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)
    merge = {
        "kind": "merge",
        "value": {
            "main": {"models": ["model-a", "model-b", "model-c"], "aliases": {"big": "model-c"}}
        },
    }
    p = await preview(sc, "provider_config", merge)
    assert p["requires_sensitive_allow"] is False
    assert p["diff_summary"][0]["path"] == "data/runtime.toml"
    assert "+models = [" in p["unified_diff"] and '+big = "model-c"' in p["unified_diff"]
    status, _ = await apply(sc, p)
    assert status == 200
    _, catalog, _ = await sc.call("GET", "/models/catalog")
    assert catalog["providers"][0]["aliases"] == {"big": "model-c"}

    p = await preview(
        sc, "active_llm", {"kind": "replace", "value": {"provider_id": "main", "model": "big"}}
    )
    assert '+model = "model-c"' in p["unified_diff"]
    status, _ = await apply(sc, p)
    assert status == 200
    _, active, _ = await sc.call("GET", "/models/active")
    assert active == {"provider_id": "main", "model": "model-c"}

    key = "sk-new-0123456789abcdefghij"
    op = {"kind": "replace", "path": "main.api_key", "value": key}
    p = await preview(sc, "provider_config", op)
    assert p["checks"]["sensitive_fields"] == ["main.api_key"] and key not in p["unified_diff"]
    status, data = await apply(sc, p)
    assert status == 403 and data["error"]["code"] == "mutation_sensitive_denied"
    p = await preview(sc, "provider_config", op, allow=True)
    status, _ = await apply(sc, p)
    assert status == 200 and sc.kernel.config.providers["main"].api_key == key

    for bad in (
        {"kind": "merge", "value": {"main": {"aliases": {"x": "no-such-model"}}}},
        {"kind": "replace", "path": "main.max_tokens", "value": "lots"},
        {"kind": "text_rewrite", "path": "main", "search": "a"},
    ):
        body = {"target": "provider_config", "operations": [bad]}
        status, data, _ = await sc.call("POST", PREVIEW, body)
        assert status == 400 and data["error"]["code"] == "invalid_request", bad
    body = {
        "target": "active_llm",
        "operations": [{"kind": "replace", "value": {"provider_id": "nope"}}],
    }
    status, data, _ = await sc.call("POST", PREVIEW, body)
    assert status == 400 and "nope" in data["error"]["message"]
    status, data, _ = await sc.call(
        "POST", PREVIEW, {"target": "envs", "operations": [{"kind": "x"}]}
    )
    assert status == 400 and "workspace_file" in data["error"]["message"]


async def test_secrets_in_every_file_shape_need_allowance_and_are_masked(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    secret = "sk-live-9f8e7d6c5b4a39281706"
    for text in (
        f'{{"api_key": "{secret}"}}\n',
        f'"OPENAI_API_KEY": "{secret}",\n',
        f"<api_key>{secret}</api_key>\n",
        f"Authorization: Bearer {secret}\n",
        f"token: {secret}\n",
        f"password = '{secret}'\n",
    ):
        op = {"kind": "replace", "path": "prompts/keys.md", "value": text}
        p = await preview(sc, "workspace_file", op)
        assert p["requires_sensitive_allow"] is True, text
        assert secret not in p["unified_diff"], text
        assert secret[:4] + "…" + secret[-4:] in p["unified_diff"], text


async def test_moving_a_providers_endpoint_is_sensitive_and_unknown_keys_are_refused(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    # The next turn would send the provider's key to this address: as sensitive as a key.
    move = {"kind": "replace", "path": "main.api_base", "value": "http://127.0.0.1:9/evil"}
    p = await preview(sc, "provider_config", move)
    assert p["requires_sensitive_allow"] is True and "main.api_base" in str(p["checks"])
    status, data = await apply(sc, p)
    assert status == 403 and data["error"]["code"] == "mutation_sensitive_denied"

    body = {
        "target": "provider_config",
        "operations": [{"kind": "replace", "path": "main.base_url", "value": "http://x"}],
    }
    status, data, _ = await sc.call("POST", PREVIEW, body)
    assert status == 400 and data["error"]["code"] == "invalid_request"
    assert "providers.main.base_url" in data["error"]["message"]
