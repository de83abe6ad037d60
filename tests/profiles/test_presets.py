"""The seven preset personas (issue 38, item 6; seed 001): installed at start into
personas/ as files the owner edits or deletes; an upgrade that ships new wording
updates only the presets the owner never changed and never brings back a deleted one."""

from __future__ import annotations

import json
from pathlib import Path

from kernel.profiles.presets import NAMES, RECORD, install_presets, shipped
from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim


def newer(texts: dict[str, str]) -> dict[str, str]:
    """The next release's wording: every preset says one more thing."""
    return {name: text + "\nNEW-WORDING\n" for name, text in texts.items()}


async def test_presets_edited_and_hidden_stay_so_across_an_upgrade(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim, language="zh", preset_personas=True)
    folder = tmp_path / "personas"
    status, data, _ = await sc.call("GET", "/agent/personas")
    assert status == 200
    listed = {p["name"]: p for p in data["personas"]}
    assert sorted(listed) == sorted(NAMES)
    assert all(p["usable"] for p in listed.values())
    assert listed["translator"]["tools"] == [] and listed["general"]["tools"] is None
    assert listed["writer"]["description"].startswith("写作助手")  # the owner's language

    edit = {"description": "my own editor", "body": "Cut every needless word."}
    status, _, _ = await sc.call("PUT", "/agent/personas/writer", edit)
    assert status == 200
    status, _, _ = await sc.call("DELETE", "/agent/personas/translator")
    assert status == 200

    # The upgrade: the installer runs again with the next release's wording.
    done = install_presets(folder, newer(shipped("zh")))
    assert sorted(done.updated) == sorted(set(NAMES) - {"writer", "translator"})
    assert done.kept == ["writer"] and done.hidden == ["translator"]
    assert not (folder / "translator.md").exists()
    assert "Cut every needless word." in (folder / "writer.md").read_text(encoding="utf-8")
    assert (folder / "general.md").read_text(encoding="utf-8").endswith("NEW-WORDING\n")

    # and a restart (the installer at start, with this release's wording) keeps both
    await sc.stop()
    sc = await sidecar(anthropic_sim, language="zh", preset_personas=True)
    _, data, _ = await sc.call("GET", "/agent/personas")
    listed = {p["name"]: p for p in data["personas"]}
    assert sorted(listed) == sorted(set(NAMES) - {"translator"})
    assert listed["writer"]["description"] == "my own editor"
    assert listed["general"]["body"] == shipped("zh")["general"].split("---\n\n", 1)[1].strip()
    record = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    assert sorted(record["presets"]) == sorted(NAMES)  # the hidden one stays recorded


def test_an_owners_own_file_of_a_presets_name_is_never_touched(tmp_path: Path) -> None:
    folder = tmp_path / "personas"
    folder.mkdir()
    mine = "---\nname: writer\ndescription: mine\n---\n\nMine.\n"
    (folder / "writer.md").write_text(mine, encoding="utf-8")
    texts = shipped("en")
    done = install_presets(folder, texts)
    assert "writer" not in done.written and (folder / "writer.md").read_text() == mine
    assert (folder / "general.md").read_text(encoding="utf-8") == texts["general"]
    install_presets(folder, newer(texts))
    assert (folder / "writer.md").read_text() == mine  # still not Kernel's to update
    assert "NEW-WORDING" in (folder / "general.md").read_text(encoding="utf-8")


async def test_no_presets_when_switched_off(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim, preset_personas=False)
    _, data, _ = await sc.call("GET", "/agent/personas")
    assert data == {"personas": []} and not (tmp_path / "personas").exists()
