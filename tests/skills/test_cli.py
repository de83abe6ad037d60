"""``kernel skills …`` and ``kernel workspace …``: the real command as a process,
talking to a live sidecar."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from tests.gateway.conftest import API_KEY, SidecarFactory
from tests.gateway.test_cli import kernel
from tests.sim.anthropic_sim import AnthropicSim


async def test_skills_verbs(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    code, out, err = await kernel(sc, "skills", "list")
    assert (code, out, err) == (0, "no skills yet: create one with kernel skills create\n", "")

    code, out, err = await kernel(
        sc, "skills", "create", "tidy", "--description", "sorts lists", "--file", "-",
        stdin="Sort the items.\n",
    )  # fmt: skip
    assert (code, out, err) == (0, "created skill tidy (enabled: yes)\n", "")
    assert (tmp_path / "skills" / "tidy" / "SKILL.md").read_text().endswith("Sort the items.\n")
    code, out, _ = await kernel(
        sc,
        "skills",
        "create",
        "shout",
        "--description",
        "capitals",
        "--content",
        "CAPS",
        "--disabled",
    )
    assert out == "created skill shout (enabled: no)\n"

    code, out, _ = await kernel(sc, "skills", "list")
    assert out.splitlines() == [
        "NAME   ENABLED  DESCRIPTION",
        "shout  no       capitals",
        "tidy   yes      sorts lists",
    ]
    code, out, _ = await kernel(sc, "skills", "enable", "shout")
    assert (code, out) == (0, "enabled skill shout\n")
    code, out, _ = await kernel(sc, "skills", "disable", "tidy", "--json")
    assert json.loads(out)["enabled"] is False
    code, out, _ = await kernel(sc, "skills", "delete", "shout")
    assert (code, out) == (0, "deleted skill shout\n")
    assert not (tmp_path / "skills" / "shout").exists()

    code, out, err = await kernel(sc, "skills", "delete", "shout")
    assert code == 1 and out == "" and "(skill_not_found)" in err and len(err.splitlines()) == 1
    code, _, err = await kernel(
        sc, "skills", "create", "../x", "--description", "d", "--content", "c"
    )
    assert code == 1 and "(skill_invalid_name)" in err
    code, _, err = await kernel(
        sc, "skills", "create", "x", "--description", "d", "--file", str(tmp_path / "missing.md")
    )
    assert code == 2 and "cannot use the local file" in err and "Traceback" not in err


async def test_workspace_verbs(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim, default_workspace="ws")
    ws = tmp_path / "ws"
    ws.mkdir()
    local = tmp_path / "report.txt"
    local.write_text("第一行\nline two\n")

    code, out, err = await kernel(sc, "workspace", "put", str(local), "docs/report.txt")
    assert (code, out, err) == (0, "wrote docs/report.txt (19 bytes)\n", "")
    code, out, _ = await kernel(sc, "workspace", "put", "-", "raw.bin", stdin="bytes")
    assert out == "wrote raw.bin (5 bytes)\n"
    assert (ws / "docs" / "report.txt").read_text() == "第一行\nline two\n"

    code, out, _ = await kernel(sc, "workspace", "ls")
    lines = out.splitlines()
    assert lines[0].split() == ["PATH", "SIZE", "MODIFIED"]
    assert [line.split()[:2] for line in lines[1:]] == [
        ["docs/", "-"],
        ["docs/report.txt", "19"],
        ["raw.bin", "5"],
    ]
    code, out, _ = await kernel(sc, "workspace", "cat", "docs/report.txt")
    assert (code, out) == (0, "第一行\nline two\n")

    code, out, _ = await kernel(sc, "workspace", "export", str(tmp_path / "backup.zip"))
    assert code == 0 and out.startswith(f"exported to {tmp_path / 'backup.zip'} (")
    with zipfile.ZipFile(tmp_path / "backup.zip") as zf:
        assert sorted(zf.namelist()) == ["docs/", "docs/report.txt", "raw.bin"]

    code, out, _ = await kernel(sc, "workspace", "rm", "docs/report.txt", "docs", "raw.bin")
    assert out.splitlines() == ["deleted docs/report.txt", "deleted docs", "deleted raw.bin"]
    assert list(ws.iterdir()) == []
    code, out, _ = await kernel(sc, "workspace", "import", str(tmp_path / "backup.zip"))
    assert out.splitlines() == ["imported 2 file(s):", "  docs/report.txt", "  raw.bin"]
    assert (ws / "raw.bin").read_bytes() == b"bytes"

    slip = io.BytesIO()
    with zipfile.ZipFile(slip, "w") as zf:
        zf.writestr("../escaped.txt", "x")
    (tmp_path / "slip.zip").write_bytes(slip.getvalue())
    code, out, err = await kernel(sc, "workspace", "import", str(tmp_path / "slip.zip"))
    assert code == 1 and "(import_unsafe_entry)" in err and not (tmp_path / "escaped.txt").exists()
    code, _, err = await kernel(sc, "workspace", "cat", "../config.toml")
    assert code == 1 and "(path_invalid)" in err
    code, _, err = await kernel(sc, "workspace", "rm", "nothing.txt")
    assert code == 1 and "(not_found)" in err
