"""``/workspace/export`` and ``/workspace/import``: a round trip restores files and
folders; zip-slip, links, dotfiles, protected paths, bombs by size and by count, and
damaged entries (every compression method, damaged or unsupported) are refused with
nothing written; a failing write is rolled back."""

from __future__ import annotations

import io
import json
import random
import stat
import warnings
import zipfile
from pathlib import Path

import pytest

from kernel.core.errors import WorkspaceError
from kernel.workspace import Workspace
from kernel.workspace.archive import Archives
from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.workspace.test_files import error_code, names, raw, snapshot


def make_zip(*entries: tuple[str | zipfile.ZipInfo, bytes], stored: bool = False) -> bytes:
    buffer = io.BytesIO()
    method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w", compression=method) as zf:
        warnings.simplefilter("ignore")  # a duplicate name is one of the cases
        for name, data in entries:
            zf.writestr(name, data)
    return buffer.getvalue()


def link_entry(name: str, target: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target.encode()


def mark_encrypted(archive: bytes, name: str) -> bytes:
    """Set the "encrypted" flag of ``name``'s central directory record (zipfile writes
    no encrypted entries itself)."""
    data = bytearray(archive)
    at = data.index(b"PK\x01\x02")
    while True:
        name_length = int.from_bytes(data[at + 28 : at + 30], "little")
        if data[at + 46 : at + 46 + name_length] == name.encode():
            data[at + 8] |= 0x1
            return bytes(data)
        at = data.index(b"PK\x01\x02", at + 4)


@pytest.mark.posix
async def test_export_then_import_restores_the_workspace(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "docs" / "deep").mkdir(parents=True)
    (tmp_path / "docs" / "b.md").write_text("# 标题\n")
    (tmp_path / "docs" / "deep" / "c.bin").write_bytes(bytes(range(256)) * 10)
    (tmp_path / "empty").mkdir()
    (tmp_path / ".env").write_text("TOKEN=x")
    (tmp_path / "link").symlink_to(tmp_path / "a.txt")
    sc = await sidecar(anthropic_sim)

    status, body = await raw(sc, "GET", "/workspace/export")
    assert status == 200
    with zipfile.ZipFile(io.BytesIO(body)) as zf:
        members = sorted(zf.namelist())
        assert zf.read("docs/deep/c.bin") == bytes(range(256)) * 10
    assert members == ["a.txt", "docs/", "docs/b.md", "docs/deep/", "docs/deep/c.bin", "empty/"]
    assert not names(tmp_path / "data" / "tmp")  # the temporary zip is gone

    original = snapshot(tmp_path)
    (tmp_path / "a.txt").write_text("changed since")
    (tmp_path / "docs" / "b.md").unlink()
    (tmp_path / "docs" / "deep" / "c.bin").unlink()
    (tmp_path / "docs" / "deep").rmdir()
    (tmp_path / "empty").rmdir()
    (tmp_path / "new.txt").write_text("kept")

    status, answer = await raw(sc, "POST", "/workspace/import", data=body)

    assert status == 200
    assert json.loads(answer) == {
        "imported": ["a.txt", "docs/b.md", "docs/deep/c.bin"],
        "count": 3,
    }
    assert snapshot(tmp_path) == {**original, "new.txt": b"kept"}
    assert (tmp_path / "empty").is_dir()
    assert (tmp_path / ".env").read_text() == "TOKEN=x"
    leftovers = names(tmp_path, "**/.kernel-*")
    assert leftovers == [] and not names(tmp_path / "data" / "tmp")


UNSAFE: list[tuple[str, list[tuple[str | zipfile.ZipInfo, bytes]]]] = [
    ("dot-dot", [("../evil.txt", b"x")]),
    ("nested dot-dot", [("a/../../evil.txt", b"x")]),
    ("absolute", [("/tmp/evil.txt", b"x")]),
    ("backslash", [("..\\evil.txt", b"x")]),
    ("dotfile", [(".bashrc", b"x")]),
    ("dot folder", [(".git/hooks/pre-commit", b"x")]),
    ("config", [("config.toml", b"x")]),
    ("data dir", [("data/runtime.toml", b"x")]),
    ("symlink", [link_entry("link", "../outside/secret.txt")]),
    ("encrypted", [("secret.txt", b"ciphertext")]),
    ("duplicate", [("twice.txt", b"1"), ("twice.txt", b"2")]),
    ("file and folder", [("clash", b"1"), ("clash/inner.txt", b"2")]),
    ("through a link", [("inner/planted.txt", b"x")]),
]


@pytest.mark.posix
@pytest.mark.parametrize("case", UNSAFE, ids=[c[0] for c in UNSAFE])
async def test_unsafe_archives_are_refused_with_nothing_written(
    sidecar: SidecarFactory,
    anthropic_sim: AnthropicSim,
    tmp_path: Path,
    case: tuple[str, list[tuple[str | zipfile.ZipInfo, bytes]]],
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    (tmp_path / "inner").symlink_to(outside)
    sc = await sidecar(anthropic_sim)
    before = snapshot(tmp_path)
    archive = make_zip(("fine.txt", b"would be fine"), *case[1])
    if case[0] == "encrypted":
        archive = mark_encrypted(archive, "secret.txt")

    status, body = await raw(sc, "POST", "/workspace/import", data=archive)

    assert status == 400 and error_code(body) == "import_unsafe_entry", body
    assert "nothing was written" in json.loads(body)["error"]["message"]
    assert snapshot(tmp_path) == before
    assert not (tmp_path / "fine.txt").exists() and not (tmp_path.parent / "evil.txt").exists()
    assert names(outside) == ["secret.txt"]


async def test_bombs_by_size_and_count_and_damaged_archives_are_refused(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    limits = {"archive_max_bytes": 10_000, "archive_max_files": 5}
    sc = await sidecar(anthropic_sim, default_workspace="ws", gateway=limits)
    (tmp_path / "ws").mkdir()
    before = snapshot(tmp_path)

    bomb = make_zip(("fine.txt", b"ok"), ("zeros.bin", bytes(1_000_000)))
    assert len(bomb) < 5_000  # small on the wire, a megabyte unpacked
    status, body = await raw(sc, "POST", "/workspace/import", data=bomb)
    assert status == 413 and error_code(body) == "archive_too_large"
    assert "10000" in json.loads(body)["error"]["message"]

    many = make_zip(*[(f"f{i}.txt", b"x") for i in range(6)])
    status, body = await raw(sc, "POST", "/workspace/import", data=many)
    assert status == 413 and error_code(body) == "archive_too_large"

    damaged = bytearray(make_zip(("fine.txt", b"ok"), ("data.txt", b"A" * 500), stored=True))
    damaged[damaged.index(b"A" * 500) + 250] ^= 0xFF  # the CRC no longer matches
    status, body = await raw(sc, "POST", "/workspace/import", data=bytes(damaged))
    assert status == 400 and error_code(body) == "import_unsafe_entry"
    assert "damaged" in json.loads(body)["error"]["message"]

    for junk in (b"not a zip at all", b"PK\x03\x04" + b"\x00" * 40, b""):
        status, body = await raw(sc, "POST", "/workspace/import", data=junk)
        assert status == 400 and error_code(body) in ("import_invalid", "invalid_request")
    assert snapshot(tmp_path) == before

    (tmp_path / "ws" / "big.bin").write_bytes(bytes(20_000))
    status, body = await raw(sc, "GET", "/workspace/export")
    assert status == 413 and error_code(body) == "archive_too_large"


def test_a_failing_write_puts_everything_back(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("original")
    workspace = Workspace(tmp_path)

    def fails(fh: object) -> None:
        raise OSError(28, "No space left on device")

    def writes(text: str) -> object:
        return lambda fh: fh.write(text.encode())

    planned = [
        (("keep.txt",), writes("replaced")),
        (("new", "made.txt"), writes("new file")),
        (("new", "sub"), None),
        (("last.txt",), fails),
    ]
    with pytest.raises(OSError):
        workspace.commit(planned)  # type: ignore[arg-type]

    assert (tmp_path / "keep.txt").read_text() == "original"
    assert names(tmp_path) == ["keep.txt"]

    workspace.commit(planned[:3])  # type: ignore[arg-type]
    assert (tmp_path / "keep.txt").read_text() == "replaced"
    assert (tmp_path / "new" / "made.txt").read_text() == "new file"
    assert names(tmp_path) == ["keep.txt", "new"]


def test_paths_are_checked_as_text_before_the_disk(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path, protected=[tmp_path / "data"])
    for bad in ("", "/etc", "a//b", "a/./b", "a/../b", "..", "~root", "a\\b", "x\x00y"):
        with pytest.raises(WorkspaceError) as refused:
            workspace.check(bad)
        assert refused.value.code == "path_invalid", bad
    for denied in (".env", "a/.git/x", "data", "data/kernel.db"):
        with pytest.raises(WorkspaceError) as refused:
            workspace.check(denied)
        assert refused.value.code == "path_denied", denied
    assert workspace.check("a b/c.d") == ("a b", "c.d")


def packed(method: int, data: bytes) -> bytes:
    """A zip of ``fine.txt`` (stored) and ``entry.bin`` compressed with ``method``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("fine.txt", b"would be fine", compress_type=zipfile.ZIP_STORED)
        zf.writestr("entry.bin", data, compress_type=method)
    return buffer.getvalue()


def patched(archive: bytes, *, local: int, central: int, value: bytes) -> bytes:
    """``value`` written at ``local`` in entry.bin's local header and at ``central`` in
    its central directory record."""
    data = bytearray(archive)
    for magic, offset, name_at in ((b"PK\x03\x04", local, 30), (b"PK\x01\x02", central, 46)):
        at = data.index(magic)
        while data[at + name_at : at + name_at + 9] != b"entry.bin":
            at = data.index(magic, at + 4)
        data[at + offset : at + offset + len(value)] = value
    return bytes(data)


def damaged(method: int) -> bytes:
    """entry.bin's compressed bytes overwritten in the middle."""
    text = bytes(range(256)) * 64
    archive = bytearray(packed(method, text))
    header = archive.index(b"entry.bin") + len(b"entry.bin")
    middle = header + 40
    archive[middle : middle + 64] = b"\xa5" * 64
    return bytes(archive)


CORRUPT: list[tuple[str, bytes, int, str, str]] = [
    # (case, archive, status, code, what the message names)
    ("bzip2", damaged(zipfile.ZIP_BZIP2), 400, "import_unsafe_entry", "damaged"),
    ("deflate", damaged(zipfile.ZIP_DEFLATED), 400, "import_unsafe_entry", "damaged"),
    ("lzma", damaged(zipfile.ZIP_LZMA), 400, "import_unsafe_entry", "damaged"),
    ("crc", damaged(zipfile.ZIP_STORED), 400, "import_unsafe_entry", "damaged"),
    (
        "unsupported method",
        patched(packed(zipfile.ZIP_STORED, b"x" * 100), local=8, central=10, value=b"\x63\x00"),
        400,
        "import_unsafe_entry",
        "compression method 99",
    ),
    (
        "header lies about the size (bomb ratio)",
        patched(
            packed(zipfile.ZIP_DEFLATED, bytes(2_000_000)),
            local=22,
            central=24,
            value=(100).to_bytes(4, "little"),
        ),
        400,
        "import_unsafe_entry",
        "damaged",
    ),
    ("truncated", packed(zipfile.ZIP_DEFLATED, b"y" * 5000)[:-30], 400, "import_invalid", "zip"),
]


@pytest.mark.parametrize("case", CORRUPT, ids=[c[0] for c in CORRUPT])
async def test_damaged_and_unsupported_entries_are_refused_naming_the_entry(
    sidecar: SidecarFactory,
    anthropic_sim: AnthropicSim,
    tmp_path: Path,
    case: tuple[str, bytes, int, str, str],
) -> None:
    _, archive, status, code, named = case
    sc = await sidecar(anthropic_sim, default_workspace="ws")
    (tmp_path / "ws").mkdir()
    before = snapshot(tmp_path)

    answer, body = await raw(sc, "POST", "/workspace/import", data=archive)

    assert (answer, error_code(body)) == (status, code), body
    error = json.loads(body)["error"]
    assert named in error["message"]
    if code == "import_unsafe_entry":
        assert error["details"] == {"entry": "entry.bin"} and "entry.bin" in error["message"]
    assert snapshot(tmp_path) == before and not names(tmp_path / "data" / "tmp")


def test_any_damage_to_an_archive_is_a_workspace_error(tmp_path: Path) -> None:
    """Seeded damage (bytes changed, cut short, overwritten) to an archive holding every
    supported method: each import ends written whole or refused with a WorkspaceError
    (a 4xx), never another exception (a 5xx)."""
    buffer = io.BytesIO()
    methods = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)
    with zipfile.ZipFile(buffer, "w") as zf:
        for i, method in enumerate(methods):
            zf.writestr(f"d/f{i}.txt", f"content {i} ".encode() * 300, compress_type=method)
    base = buffer.getvalue()
    (tmp_path / "ws").mkdir()
    archives = Archives(Workspace(tmp_path / "ws"), tmp_path / "tmp", max_bytes=10**6, max_files=50)
    unexpected: list[tuple[int, BaseException]] = []
    for seed in range(600):
        rnd = random.Random(seed)
        data = bytearray(base)
        if seed % 3 == 0:
            for _ in range(rnd.randint(1, 8)):
                data[rnd.randrange(len(data))] = rnd.randrange(256)
        elif seed % 3 == 1:
            data = data[: rnd.randrange(len(data))]
        else:
            at = rnd.randrange(len(data))
            data[at : at + 4] = rnd.randbytes(4)
        try:
            archives._import(bytes(data))
        except WorkspaceError:
            pass
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            unexpected.append((seed, exc))
    assert unexpected == []
    assert names(tmp_path / "tmp") == [] and names(tmp_path / "ws", "**/.kernel-*") == []
