"""``/agent/artifacts`` (issue 23): the files a session's turns made, listed and served.

A real sidecar over a real Kernel: a delegation to a stand-in CLI (a real child process)
and a long tool output make artifacts through the model simulator's tool calls; the
route serves them byte for byte, refuses them with 410 once a retention sweep deleted
them, and never serves a link swapped in, a path outside the artifact folders or a file
grown since it was recorded.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from kernel.agent.sessions import SessionKey
from kernel.audit.kinds import ARTIFACT_SAVED
from kernel.core.messages import ToolResultBlock
from kernel.retention import DAY
from tests.delegate.conftest import cli_section
from tests.delegate.standins import make_cli
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply, tool_reply

LONG = "line of a long tool output\n" * 40  # over TOOL_RESULT_LIMIT: kept on disk


def long_tool(sc: Sidecar) -> None:
    """A tool registered as an extension would register one, answering at length."""

    async def report() -> str:
        return LONG

    sc.kernel.tools.register("report", "a long report", {"type": "object"}, report)


async def session_of(sc: Sidecar, external: str) -> int:
    opened = await sc.kernel.agent.sessions.open_session(
        SessionKey("console", "demo-user", external), create=False
    )
    assert opened is not None
    return opened.row.id


async def listing(sc: Sidecar, session: int) -> list[dict[str, Any]]:
    status, data, _ = await sc.call("GET", f"/agent/artifacts?session_id={session}")
    assert status == 200, data
    items: list[dict[str, Any]] = data["items"]
    return items


async def fetch(sc: Sidecar, artifact_id: int) -> tuple[int, bytes, dict[str, str]]:
    async with sc.http.get(
        f"{sc.url}/agent/artifacts/{artifact_id}", headers=sc.headers()
    ) as response:
        return response.status, await response.read(), dict(response.headers)


async def with_artifacts(sidecar: SidecarFactory, sim: AnthropicSim, tmp_path: Path) -> Sidecar:
    command = make_cli(tmp_path / "bin", "claude_code")
    sc = await sidecar(
        sim, api_key=API_KEY, extra="\n" + cli_section("claude_code", command=str(command))
    )
    long_tool(sc)
    sim.enqueue(
        tool_reply("delegate_to_cli", {"task": "count the files"}),
        tool_reply("report", {}),
        text_reply("Done."),
    )
    status, data = await sc.process("count my files", session_id="s-art")
    assert status == 200, data
    return sc


@pytest.mark.posix  # the stand-in CLI is a #!python script
async def test_a_delegation_and_a_long_tool_output_are_listed_and_served(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await with_artifacts(sidecar, anthropic_sim, tmp_path)
    session = await session_of(sc, "s-art")

    items = await listing(sc, session)

    assert [i["kind"] for i in items] == ["tool_output", "cli_output"]  # newest first
    data_dir = sc.kernel.config.data_dir
    for item in items:
        assert item["session_id"] == session and item["removed"] is False
        assert item["removed_at"] is None
        rows = sqlite3.connect(sc.kernel.config.db_path).execute(
            "SELECT path FROM artifacts WHERE id = ?", (item["id"],)
        )
        on_disk = (data_dir / rows.fetchone()[0]).read_bytes()
        assert item["size"] == len(on_disk)
        assert item["sha256"] == hashlib.sha256(on_disk).hexdigest()
        status, body, headers = await fetch(sc, item["id"])
        assert status == 200 and body == on_disk
        assert headers["Content-Type"] == "application/octet-stream"
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Content-Disposition"].startswith("attachment; filename=")
        assert "filename*=UTF-8''" in headers["Content-Disposition"]
    tool_file = await fetch(sc, items[0]["id"])
    assert tool_file[1].decode() == LONG
    assert b"Done: count the files" in (await fetch(sc, items[1]["id"]))[1]
    # The history points at the kept tool output; the audit has one event per artifact,
    # with facts only (no name, no path).
    stored = await sc.kernel.store.load_messages(session)
    assert any(isinstance(b, ToolResultBlock) for m in stored for b in m.content)
    events = await sc.kernel.audit.events(session)
    saved = [e for e in events if e.kind == ARTIFACT_SAVED]
    assert sorted(e.data["artifact"] for e in saved if e.data) == sorted(i["id"] for i in items)
    for event in saved:
        assert event.data is not None and set(event.data) == {"artifact", "kind", "size", "sha256"}
        assert event.actor == "model"
    assert (await sc.kernel.audit.verify(session)).ok
    # The key is required like every /agent route; a session without files lists none.
    async with sc.http.get(f"{sc.url}/agent/artifacts?session_id={session}") as response:
        assert response.status == 401
    assert await listing(sc, session + 1000) == []
    status, data, _ = await sc.call("GET", "/agent/artifacts")
    assert status == 400 and data["error"]["code"] == "invalid_request"
    for bad in ("999999", "abc", "1e3", "-1"):
        status, data, _ = await sc.call("GET", f"/agent/artifacts/{bad}")
        assert status == 404 and data["error"]["code"] == "not_found"


@pytest.mark.posix
async def test_after_a_retention_sweep_they_are_listed_removed_and_refused_with_410(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await with_artifacts(sidecar, anthropic_sim, tmp_path)
    session = await session_of(sc, "s-art")
    retention = sc.kernel.retention
    retention.clock = lambda: time.time() + 8 * DAY  # a week and a day later

    result = await retention.run_once()

    assert result.artifacts == 2
    items = await listing(sc, session)
    assert [i["removed"] for i in items] == [True, True]
    assert all(i["removed_at"] for i in items)
    for item in items:
        status, body, _ = await fetch(sc, item["id"])
        assert status == 410
        status, data, _ = await sc.call("GET", f"/agent/artifacts/{item['id']}")
        error = data["error"]
        assert error["code"] == "artifact_removed"
        assert "general.retention_days = 7" in error["message"]
        assert error["details"]["retention_days"] == 7


@pytest.mark.posix
async def test_a_file_deleted_outside_kernel_is_refused_with_410_and_marked(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await with_artifacts(sidecar, anthropic_sim, tmp_path)
    session = await session_of(sc, "s-art")
    first = (await listing(sc, session))[0]
    path = _path_of(sc, first["id"])
    path.unlink()

    status, data, _ = await sc.call("GET", f"/agent/artifacts/{first['id']}")

    assert status == 410 and data["error"]["code"] == "artifact_removed"
    assert (await listing(sc, session))[0]["removed"] is True


def _path_of(sc: Sidecar, artifact_id: int) -> Path:
    with sqlite3.connect(sc.kernel.config.db_path) as db:
        (rel,) = db.execute("SELECT path FROM artifacts WHERE id = ?", (artifact_id,)).fetchone()
    return Path(sc.kernel.config.data_dir) / rel


def _set_path(sc: Sidecar, artifact_id: int, rel: str) -> None:
    with sqlite3.connect(sc.kernel.config.db_path) as db:
        db.execute("UPDATE artifacts SET path = ? WHERE id = ?", (rel, artifact_id))


@pytest.mark.posix
async def test_links_paths_outside_the_folders_and_grown_files_are_never_served(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await with_artifacts(sidecar, anthropic_sim, tmp_path)
    session = await session_of(sc, "s-art")
    tool_item, cli_item = await listing(sc, session)
    secret = tmp_path / "secret.txt"
    secret.write_text("the owner's secret")
    config_text = sc.config_path.read_bytes()

    # 1. The file swapped for a link (to a file of the same size, even).
    path = _path_of(sc, tool_item["id"])
    secret.write_bytes(b"s" * tool_item["size"])
    path.unlink()
    path.symlink_to(secret)
    status, data, _ = await sc.call("GET", f"/agent/artifacts/{tool_item['id']}")
    assert status == 403 and data["error"]["code"] == "artifact_refused"
    assert "link" in data["error"]["message"]

    # 2. A folder on the way swapped for a link.
    cli_path = _path_of(sc, cli_item["id"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / cli_path.name).write_bytes(cli_path.read_bytes())
    moved = cli_path.parent.with_name("cli_outputs.real")
    os.rename(cli_path.parent, moved)
    cli_path.parent.symlink_to(elsewhere, target_is_directory=True)
    status, data, _ = await sc.call("GET", f"/agent/artifacts/{cli_item['id']}")
    assert status == 403 and data["error"]["code"] == "artifact_refused"
    cli_path.parent.unlink()
    os.rename(moved, cli_path.parent)

    # 3. Paths outside the artifact folders, edited into the row.
    for rel in (
        "kernel.db",
        "../config.toml",
        str(sc.config_path),
        "downloads/../kernel.db",
        "cli_outputs/../../config.toml",
        "logs/kernel.log",
    ):
        _set_path(sc, cli_item["id"], rel)
        status, data, _ = await sc.call("GET", f"/agent/artifacts/{cli_item['id']}")
        assert status == 403, rel
        assert data["error"]["code"] == "artifact_refused"
    _set_path(sc, cli_item["id"], cli_path.relative_to(sc.kernel.config.data_dir).as_posix())

    # 4. The file rewritten in place to the same size (review R2), then grown.
    original = cli_path.read_bytes()
    cli_path.write_bytes(bytes(b ^ 1 for b in original))
    status, data, _ = await sc.call("GET", f"/agent/artifacts/{cli_item['id']}")
    assert status == 409 and data["error"]["code"] == "artifact_changed"
    assert "same size, other content" in data["error"]["message"]
    cli_path.write_bytes(original)
    status, body, _ = await fetch(sc, cli_item["id"])
    assert status == 200 and body == original
    with cli_path.open("ab") as fh:
        fh.write(b"appended later")
    status, data, _ = await sc.call("GET", f"/agent/artifacts/{cli_item['id']}")
    assert status == 409 and data["error"]["code"] == "artifact_changed"
    assert "changed since it was recorded" in data["error"]["message"]

    assert sc.config_path.read_bytes() == config_text  # nothing served was ever touched
    assert (await listing(sc, session))[1]["removed"] is False  # refused is not removed
