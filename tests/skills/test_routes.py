"""``/skills``: listing (with problems), create, enable/disable (the file and the system
layer follow), delete; names that could be paths are refused and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gateway.conftest import SidecarFactory
from tests.prompts.conftest import FLAGS_ON
from tests.sim.anthropic_sim import AnthropicSim
from tests.skills.test_injection import write_skill
from tests.workspace.test_files import names


async def layer_text(sc: object) -> str:
    status, data, _ = await sc.call("GET", "/agent/system-layers")  # type: ignore[attr-defined]
    assert status == 200
    found = [layer for layer in data["layers"] if layer["name"] == "skills"]
    return found[0]["content_preview"] if found else ""


async def test_list_create_toggle_delete(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    write_skill(tmp_path, "tidy", "sorts lists", "Sort them.")
    (tmp_path / "skills" / "notes").mkdir()  # a folder without SKILL.md is not a skill
    bad = tmp_path / "skills" / "bad" / "SKILL.md"
    bad.parent.mkdir()
    bad.write_text("no front matter here\n")
    sc = await sidecar(anthropic_sim, extra=FLAGS_ON)  # layer_text reads system-layers

    status, data, _ = await sc.call("GET", "/skills")
    assert status == 200
    listed = {s["name"]: s for s in data["skills"]}
    assert sorted(listed) == ["bad", "tidy"]
    assert listed["tidy"]["usable"] is True and listed["tidy"]["problem"] == ""
    assert listed["bad"]["usable"] is False and "front matter" in listed["bad"]["problem"]

    body = {"name": "shout", "description": "answers in capitals", "content": "USE CAPITALS."}
    status, created, _ = await sc.call("POST", "/skills", body)
    assert status == 201 and created["enabled"] is True and created["content"] == "USE CAPITALS."
    on_disk = (tmp_path / "skills" / "shout" / "SKILL.md").read_text()
    assert on_disk.startswith("---\nname: shout\ndescription: answers in capitals\nenabled: true\n")
    assert on_disk.rstrip().endswith("USE CAPITALS.")
    assert "- shout: answers in capitals" in await layer_text(sc)

    status, data, _ = await sc.call("POST", "/skills", body)
    assert status == 409 and data["error"]["code"] == "skill_exists"

    status, data, _ = await sc.call("PUT", "/skills/shout/disable")
    assert status == 200 and data["enabled"] is False and data["usable"] is False
    assert "enabled: false" in (tmp_path / "skills" / "shout" / "SKILL.md").read_text()
    assert "shout" not in await layer_text(sc)
    assert "- tidy: sorts lists" in await layer_text(sc)
    status, data, _ = await sc.call("PUT", "/skills/shout/enable")
    assert status == 200 and data["usable"] is True
    assert "- shout" in await layer_text(sc)
    status, data, _ = await sc.call("PUT", "/skills/bad/enable")
    assert status == 409 and data["error"]["code"] == "skill_invalid"

    status, data, _ = await sc.call("GET", "/skills/tidy")
    assert status == 200 and data["content"] == "Sort them."

    status, data, _ = await sc.call("DELETE", "/skills/shout")
    assert status == 200 and data == {"deleted": True, "name": "shout"}
    assert not (tmp_path / "skills" / "shout").exists()
    status, data, _ = await sc.call("DELETE", "/skills/shout")
    assert status == 404 and data["error"]["code"] == "skill_not_found"
    assert "available: tidy" in data["error"]["message"]


async def test_names_that_are_paths_are_refused(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)
    before = names(tmp_path)
    for name in ("../evil", "a/b", ".hidden", "x" * 65, "a.b", ""):
        body = {"name": name, "description": "d", "content": "c"}
        status, data, _ = await sc.call("POST", "/skills", body)
        assert status == 400, name
        assert data["error"]["code"] in ("skill_invalid_name", "invalid_request"), name
    for path in ("/skills/..%2Fconfig.toml", "/skills/a.b/enable"):
        status, data, _ = await sc.call("DELETE" if "enable" not in path else "PUT", path)
        assert status == 400 and data["error"]["code"] == "skill_invalid_name", path
    status, data, _ = await sc.call(
        "POST", "/skills", {"name": "ok", "description": "two\nlines", "content": "c"}
    )
    assert status == 400 and "one non-empty line" in data["error"]["message"]
    assert names(tmp_path) == before  # no skills/ folder, no evil
    assert (tmp_path / "config.toml").is_file()


@pytest.mark.posix
async def test_a_linked_skill_folder_is_unlinked_not_emptied(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "shared"
    write_skill(elsewhere, "tidy", "sorts lists", "Sort them.")
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "tidy").symlink_to(elsewhere / "skills" / "tidy")
    sc = await sidecar(anthropic_sim)
    status, data, _ = await sc.call("GET", "/skills/tidy")
    assert status == 200 and data["usable"] is True

    status, _, _ = await sc.call("DELETE", "/skills/tidy")

    assert status == 200
    assert not (tmp_path / "skills" / "tidy").exists()
    assert (elsewhere / "skills" / "tidy" / "SKILL.md").is_file()
