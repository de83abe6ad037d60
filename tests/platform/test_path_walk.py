"""The Windows path walk (kernel.workspace.dirs.PathDirs), run on Linux: reparse points
(junctions) refused by their attributes, names Windows would read as another file
refused, a file swapped between the check and the open refused."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kernel.core.errors import WorkspaceError
from kernel.workspace import dirs
from kernel.workspace.dirs import FILE_ATTRIBUTE_REPARSE_POINT, PathDirs, is_link, windows_alias
from kernel.workspace.files import Workspace

DIRECTORY = 0x10  # FILE_ATTRIBUTE_DIRECTORY


def fake(mode: int, attributes: int | None = None) -> Any:
    info = SimpleNamespace(st_mode=mode)
    if attributes is not None:
        info.st_file_attributes = attributes
    return info


def test_a_reparse_point_or_a_symlink_is_a_link_and_nothing_else_is() -> None:
    folder, regular = stat.S_IFDIR | 0o755, stat.S_IFREG | 0o644
    junction = fake(folder, DIRECTORY | FILE_ATTRIBUTE_REPARSE_POINT)
    assert is_link(junction)
    assert is_link(fake(regular, FILE_ATTRIBUTE_REPARSE_POINT))  # a file symlink's attributes
    assert is_link(fake(stat.S_IFLNK | 0o777))  # POSIX: no attributes at all
    assert not is_link(fake(folder, DIRECTORY))
    assert not is_link(fake(regular, 0x20))  # FILE_ATTRIBUTE_ARCHIVE
    assert not is_link(fake(regular))


@pytest.mark.parametrize(
    "name",
    [
        "data.",
        "config.toml ",
        "a.txt:secret",
        "DATA~1",
        "CONFIG~2.TOM",
        "NUL",
        "nul.txt",
        "COM1",
        "lpt9.log",
        "CON .md",
    ],
)
def test_names_windows_reads_as_another_file_or_a_device_are_aliases(name: str) -> None:
    assert windows_alias(name)


@pytest.mark.parametrize("name", ["notes.txt", "contacts.md", "a~b", "nullable", "com10", "x.y"])
def test_plain_names_are_not_aliases(name: str) -> None:
    assert not windows_alias(name)


class Reparse:
    """An lstat result with the attributes Windows gives a junction."""

    def __init__(self, real: os.stat_result) -> None:
        self._real = real
        self.st_file_attributes = DIRECTORY | FILE_ATTRIBUTE_REPARSE_POINT

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@pytest.fixture
def junction_ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """A workspace walked the Windows way, where ``ws/jn`` shows as a junction."""
    root = tmp_path / "ws"
    (root / "jn").mkdir(parents=True)
    (root / "jn" / "inside.txt").write_text("through the junction")
    (root / "plain.txt").write_text("plain")
    junction = str(root / "jn")
    real = os.lstat

    def lstat(path: Any) -> Any:
        info = real(path)
        return Reparse(info) if os.fspath(path) == junction else info

    monkeypatch.setattr(dirs.os, "lstat", lstat)
    ws = Workspace(root)
    ws.dirs = PathDirs()
    return ws


async def test_a_junction_on_the_way_is_refused_as_a_link(junction_ws: Workspace) -> None:
    with pytest.raises(WorkspaceError) as caught:
        await junction_ws.read("jn/inside.txt")
    assert caught.value.code == "path_denied"
    with pytest.raises(WorkspaceError) as caught:
        await junction_ws.write("jn/planted.txt", b"x")
    assert caught.value.code == "path_denied"
    assert not (junction_ws.root / "jn" / "planted.txt").exists()
    with pytest.raises(WorkspaceError):
        await junction_ws.delete("jn")
    assert (junction_ws.root / "jn" / "inside.txt").exists()


async def test_a_junction_is_left_out_of_the_listing(junction_ws: Workspace) -> None:
    entries, truncated = await junction_ws.listing()
    assert [e.path for e in entries] == ["plain.txt"]
    assert not truncated
    assert await junction_ws.read("plain.txt") == b"plain"


async def test_an_alias_of_the_data_dir_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "data").mkdir(parents=True)
    (root / "data" / "kernel.db").write_bytes(b"secret")
    ws = Workspace(root, [root / "data"])
    ws.dirs = PathDirs()
    for path in ("data/kernel.db", "data./kernel.db", "DATA~1/kernel.db"):
        with pytest.raises(WorkspaceError):
            await ws.read(path)


def test_a_file_swapped_between_the_check_and_the_open_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "f.txt").write_text("checked")
    (tmp_path / "other.txt").write_text("swapped in")
    walk = PathDirs()
    root = walk.root(str(tmp_path))
    real_open = os.open

    def swap_then_open(path: Any, flags: int, mode: int = 0o777) -> int:
        os.replace(tmp_path / "other.txt", tmp_path / "f.txt")  # after lstat, before open
        return real_open(path, flags, mode)

    monkeypatch.setattr(dirs.os, "open", swap_then_open)
    with pytest.raises(OSError) as caught:
        walk.open_file("f.txt", root, dirs.READ)
    assert caught.value.errno == errno.ELOOP


@pytest.mark.posix  # a symbolic link
def test_a_held_folder_replaced_meanwhile_is_gone_not_followed(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    walk = PathDirs()
    root = walk.root(str(tmp_path))
    held = walk.open_dir("a", root)
    (tmp_path / "a").rename(tmp_path / "moved")
    (tmp_path / "a").mkdir()  # another folder by that name
    with pytest.raises(FileNotFoundError):
        walk.listdir(held)
    (tmp_path / "a").rmdir()
    (tmp_path / "a").symlink_to(tmp_path / "moved")
    with pytest.raises(OSError) as caught:
        walk.listdir(held)
    assert not isinstance(caught.value, FileNotFoundError)
    walk.close(held)
    with pytest.raises(OSError):
        walk.listdir(held)  # closed: no longer a handle
