"""``/workspace/*?project=NAME``: paths relative to the project's working folder when it
lies inside the workspace (same checks, same lock); a folder outside the workspace, a
dotfolder or a link out of it is refused with nothing written; a project without a
folder works in the workspace; an unknown project is a 404 naming the others."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.workspace.test_files import raw, snapshot


def lay_out(base: Path) -> Path:
    ws = base / "ws"
    (ws / "src" / "site").mkdir(parents=True)
    (ws / "src" / "site" / "index.md").write_text("# home")
    (ws / "top.txt").write_text("top")
    (ws / ".hidden").mkdir()
    (base / "outside").mkdir()
    (base / "outside" / "secret.txt").write_text("top secret")
    (ws / "link").symlink_to(base / "outside")
    projects = base / "projects"
    projects.mkdir()
    for name, folder in (
        ("site", "ws/src/site"),
        ("out", "outside"),
        ("hidden", "ws/.hidden"),
        ("linked", "ws/link"),
        ("gone", "ws/nothing-here"),
    ):
        (projects / f"{name}.md").write_text(f"---\ndescription: d\nfolder: {folder}\n---\n")
    (projects / "plain.md").write_text("---\ndescription: no folder\n---\n")
    return ws


@pytest.mark.posix
async def test_a_projects_folder_inside_the_workspace_is_served_relative_to_it(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    ws = lay_out(tmp_path)
    sc = await sidecar(anthropic_sim, default_workspace="ws")
    status, data, _ = await sc.call("GET", "/workspace/files?project=site")
    assert status == 200
    assert [e["path"] for e in data["entries"]] == ["index.md"]
    status, body = await raw(sc, "GET", "/workspace/files/index.md?project=site")
    assert (status, body) == (200, b"# home")
    status, body = await raw(sc, "PUT", "/workspace/files/notes/a.md?project=site", b"hi")
    assert status == 200, body
    assert (ws / "src" / "site" / "notes" / "a.md").read_bytes() == b"hi"
    status, body = await raw(sc, "GET", "/workspace/files/..%2Ftop.txt?project=site")
    assert status == 400 and json.loads(body)["error"]["code"] == "path_invalid"
    status, body = await raw(sc, "DELETE", "/workspace/files/notes/a.md?project=site")
    assert status == 200
    # Without a folder: the workspace itself.
    status, data, _ = await sc.call("GET", "/workspace/files?project=plain")
    assert "top.txt" in [e["path"] for e in data["entries"]]


@pytest.mark.posix
async def test_folders_outside_hidden_linked_or_gone_are_refused(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    lay_out(tmp_path)
    sc = await sidecar(anthropic_sim, default_workspace="ws")
    before = snapshot(tmp_path)
    for project, code in (
        ("out", "path_denied"),
        ("linked", "path_denied"),
        ("hidden", "path_denied"),
        ("gone", "not_found"),
        ("nobody", "profile_not_found"),
        ("../x", "profile_not_found"),
    ):
        for method, path in (
            ("GET", "/workspace/files"),
            ("GET", "/workspace/files/secret.txt"),
            ("PUT", "/workspace/files/new.txt"),
            ("DELETE", "/workspace/files/secret.txt"),
        ):
            data = b"x" if method == "PUT" else None
            status, body = await raw(sc, method, f"{path}?project={project}", data=data)
            assert status in (403, 404), (project, method, path, status)
            assert json.loads(body)["error"]["code"] == code, (project, method, path)
            assert b"top secret" not in body
    assert snapshot(tmp_path) == before
