"""A project's working folder is where delegate_to_cli runs: without ``cwd`` the CLI
starts there, a relative ``cwd`` is taken from it, a missing folder is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel.core.errors import ToolError
from tests.delegate.conftest import ConfigFactory, cli_section, delegator_for, record_of


def make_dirs(*paths: Path) -> None:
    for path in paths:
        path.mkdir(parents=True)


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_the_project_folder_is_the_default_and_the_base_of_a_relative_cwd(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = tmp_path / "src" / "site"
    make_dirs(project / "docs")
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    config = make_config(cli_section("claude_code", command=str(bin_dir["claude_code"])))
    delegator = delegator_for(config)

    result = await delegator.delegate("build", folder=str(project))
    assert result["ok"] is True and result["cwd"] == str(project)
    assert record_of(record)["cwd"] == str(project)

    result = await delegator.delegate("build", cwd="docs", folder=str(project))
    assert result["cwd"] == str(project / "docs")
    assert record_of(record)["cwd"] == str(project / "docs")

    # A folder written relative to config.toml's folder; an absolute cwd wins.
    result = await delegator.delegate("build", folder="src/site")
    assert result["cwd"] == str(project)
    result = await delegator.delegate("build", cwd=str(workspace), folder=str(project))
    assert result["cwd"] == str(workspace)
    # Without a project: the workspace, as before.
    assert (await delegator.delegate("build"))["cwd"] == str(workspace)


@pytest.mark.posix  # a stand-in CLI: a #! script made executable
async def test_a_missing_project_folder_is_named_and_nothing_runs(
    bin_dir: dict[str, Path],
    make_config: ConfigFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = tmp_path / "record.json"
    monkeypatch.setenv("STANDIN_RECORD", str(record))
    config = make_config(cli_section("claude_code", command=str(bin_dir["claude_code"])))
    delegator = delegator_for(config)
    with pytest.raises(ToolError, match="gone"):
        await delegator.delegate("build", folder=str(tmp_path / "gone"))
    assert not record.exists() and delegator.running is None
