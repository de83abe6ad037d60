"""``/workspace/*`` against an attacker on the same machine: hard links to the provider
key (reads, listing, export, overwrites; ``gateway.allow_hard_links``), encodings of
``..`` and of protected or hidden names, a link swapped in while requests run, and
many concurrent writes and deletes of one path (never a 5xx, never a partial file or a
temporary file left behind)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import threading
import zipfile
from pathlib import Path

import pytest

from kernel.core.errors import WorkspaceError
from kernel.workspace import Workspace
from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.workspace.test_files import error_code, names, raw, snapshot

SECRET = b'[providers.main]\napi_key = "sk-ant-hardlinked-secret"\n'


async def test_a_hard_link_to_the_provider_key_is_never_served(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)  # the workspace is the folder of config.toml
    (tmp_path / "data" / "runtime.toml").write_bytes(SECRET)
    (tmp_path / "leak.txt").hardlink_to(tmp_path / "data" / "runtime.toml")  # ln
    (tmp_path / "fine.txt").write_text("plain")

    status, body = await raw(sc, "GET", "/workspace/files/leak.txt")
    assert status == 403 and error_code(body) == "path_denied", body
    assert b"sk-ant" not in body and "hard link" in json.loads(body)["error"]["message"]

    status, body = await raw(sc, "GET", "/workspace/files")
    assert status == 200 and b"leak.txt" not in body and b"fine.txt" in body

    status, body = await raw(sc, "GET", "/workspace/export")
    assert status == 200 and b"sk-ant" not in body
    with zipfile.ZipFile(io.BytesIO(body)) as zf:
        assert "leak.txt" not in zf.namelist() and "fine.txt" in zf.namelist()
        # left out, and said so in the archive's comment (unzip -z)
        assert zf.comment.decode() == (
            "Kernel left out 1 file(s) with more than one hard link "
            "(see gateway.allow_hard_links): leak.txt"
        )

    status, body = await raw(sc, "PUT", "/workspace/files/leak.txt", data=b"replaced")
    assert status == 403 and error_code(body) == "path_denied"
    assert (tmp_path / "leak.txt").samefile(tmp_path / "data" / "runtime.toml")
    assert (tmp_path / "data" / "runtime.toml").read_bytes() == SECRET


async def test_hard_links_outside_the_data_dir_are_refused_unless_allowed(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "shared.txt").write_text("shared by two names")
    (ws / "shared.txt").hardlink_to(tmp_path / "shared.txt")

    sc = await sidecar(anthropic_sim, default_workspace="ws")
    status, body = await raw(sc, "GET", "/workspace/files/shared.txt")
    assert status == 403 and error_code(body) == "path_denied"
    assert "gateway.allow_hard_links" in json.loads(body)["error"]["message"]
    await sc.stop()

    allowed = {"allow_hard_links": True}
    sc = await sidecar(anthropic_sim, default_workspace="ws", gateway=allowed)
    status, body = await raw(sc, "GET", "/workspace/files/shared.txt")
    assert (status, body) == (200, b"shared by two names")
    status, body = await raw(sc, "GET", "/workspace/export")
    with zipfile.ZipFile(io.BytesIO(body)) as zf:
        assert zf.read("shared.txt") == b"shared by two names" and zf.comment == b""

    # Allowed or not, a file of the data directory is not, even one made after start.
    (tmp_path / "data" / "runtime.toml").write_bytes(SECRET)
    (ws / "leak.txt").hardlink_to(tmp_path / "data" / "runtime.toml")
    (ws / "conf.txt").hardlink_to(tmp_path / "config.toml")
    for name in ("leak.txt", "conf.txt"):
        status, body = await raw(sc, "GET", f"/workspace/files/{name}")
        assert status == 403 and error_code(body) == "path_denied", name
        assert b"sk-ant" not in body and b"api_key" not in body
    status, body = await raw(sc, "GET", "/workspace/export")
    with zipfile.ZipFile(io.BytesIO(body)) as zf:
        assert sorted(zf.namelist()) == ["shared.txt"]
    assert b"sk-ant" not in body


async def test_encoded_ways_out_and_lookalike_names_are_refused(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)
    (tmp_path / "data" / "runtime.toml").write_bytes(SECRET)
    before = snapshot(tmp_path)
    attempts = {
        "%2e%2e/x": "path_invalid",  # ..
        "a/%2E%2e/b": "path_invalid",
        "a%2f..%2fb": "path_invalid",
        "a%00.txt": "path_invalid",  # NUL
        "%EF%BC%8E%EF%BC%8E/x": "path_invalid",  # fullwidth ..
        "%E2%80%A5/x": "path_invalid",  # two-dot leader, NFKC ..
        "a%EF%BC%8Fb": "path_invalid",  # fullwidth solidus
        "%EF%BC%8Eenv": "path_denied",  # fullwidth-dot dotfile
        "%EF%B9%92git/config": "path_denied",  # small full stop
        "CONFIG.TOML": "path_denied",  # a case-insensitive file system's config.toml
        "Config.Toml": "path_denied",
        "DATA/runtime.toml": "path_denied",
        "Data": "path_denied",
    }
    for path, code in attempts.items():
        for method in ("GET", "PUT", "DELETE"):
            status, body = await raw(sc, method, f"/workspace/files/{path}", data=b"x")
            assert status in (400, 403), (method, path, status, body)
            assert error_code(body) == code, (method, path, body)
            assert b"sk-ant" not in body
    # An overlong UTF-8 dot is no dot: it stays a plain (percent-sign) name, never "..".
    status, body = await raw(sc, "GET", "/workspace/files/%C0%AE%C0%AE/data/runtime.toml")
    assert status == 404 and error_code(body) == "not_found"
    assert snapshot(tmp_path) == before


@pytest.mark.posix
@pytest.mark.slow
async def test_a_link_swapped_in_while_requests_run_is_never_followed(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    """A thread keeps swapping a folder and a file for links to outside, atomically
    (rename over), while the sidecar reads and writes through them."""
    ws = tmp_path / "ws"
    (ws / "dir").mkdir(parents=True)
    (ws / "dir" / "secret.txt").write_text("inside")
    (ws / "file.txt").write_text("inside")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    (ws / ".dirlink").symlink_to(outside)
    (ws / ".filelink").symlink_to(outside / "secret.txt")
    sc = await sidecar(anthropic_sim, default_workspace="ws")
    stop = threading.Event()
    swaps = 0

    def move(source: str, target: str) -> None:
        # A PUT may have made the name meanwhile (the gap between two renames): then
        # this step is skipped, and the next round tries again.
        with contextlib.suppress(OSError):
            os.rename(ws / source, ws / target)

    def swap() -> None:
        nonlocal swaps
        while not stop.is_set():
            move("dir", ".dirsaved")
            move(".dirlink", "dir")
            move("file.txt", ".filesaved")
            move(".filelink", "file.txt")
            move("dir", ".dirlink")
            move(".dirsaved", "dir")
            move("file.txt", ".filelink")
            move(".filesaved", "file.txt")
            swaps += 1

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        for _ in range(150):
            for method, path in (
                ("GET", "dir/secret.txt"),
                ("GET", "file.txt"),
                ("PUT", "dir/planted.txt"),
                ("PUT", "file.txt"),
            ):
                data = b"inside" if method == "PUT" else None
                status, body = await raw(sc, method, f"/workspace/files/{path}", data=data)
                assert status < 500 and b"top secret" not in body, (method, path, status)
            status, body = await raw(sc, "GET", "/workspace/export")
            assert status < 500 and b"top secret" not in body
    finally:
        stop.set()
        await asyncio.to_thread(swapper.join)
    assert swaps > 0
    assert names(outside) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "top secret"


@pytest.mark.slow
async def test_concurrent_writes_and_deletes_of_one_path_never_fail_the_server(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim, default_workspace="ws")
    ws = tmp_path / "ws"
    ws.mkdir()
    contents = [f"version {i} ".encode() * 2000 for i in range(12)]
    requests = []
    for i, content in enumerate(contents):
        requests += [
            ("PUT", "same.txt", content),
            ("PUT", "a/b/c/deep.txt", content),
            ("PUT", f"a/b/c{i % 3}/x.txt", content),
            ("DELETE", "same.txt", None),
            ("DELETE", "a/b/c/deep.txt", None),
            ("DELETE", "a/b/c", None),
            ("DELETE", f"a/b/c{i % 3}/x.txt", None),
            ("DELETE", f"a/b/c{i % 3}", None),
            ("PUT", "a/b", content),  # a file where a folder may be
        ]
    answers = await asyncio.gather(
        *(raw(sc, method, f"/workspace/files/{path}", data=data) for method, path, data in requests)
    )
    for (method, path, _), (status, body) in zip(requests, answers, strict=True):
        assert status < 500, (method, path, status, body)
        if status >= 400:
            assert error_code(body) in (
                "not_found",
                "path_conflict",
                "path_is_directory",
                "directory_not_empty",
            ), (method, path, body)
    for path in ("same.txt", "a/b/c/deep.txt", "a/b"):
        if (ws / path).is_file():
            assert (ws / path).read_bytes() in contents  # whole, one of those written
    assert names(ws, "**/.kernel-*") == []  # no temporary or backup file left behind


def test_writes_and_deletes_racing_in_threads_give_only_workspace_errors(
    tmp_path: Path,
) -> None:
    """As when another program changes the folder meanwhile (the sidecar's own writes
    take one lock): every failure is a WorkspaceError the sidecar answers with a 4xx."""
    workspace = Workspace(tmp_path)
    unexpected: list[BaseException] = []

    def writer(n: int) -> None:
        for i in range(60):
            try:
                if (i + n) % 3 == 0:
                    workspace._delete(("a", "b", "f.txt"))
                elif (i + n) % 3 == 1:
                    workspace._delete(("a", "b"))
                else:
                    workspace.commit([(("a", "b", "f.txt"), lambda fh: fh.write(b"x" * 1000))])
            except WorkspaceError:
                pass
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                unexpected.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert unexpected == []
    assert names(tmp_path, "**/.kernel-*") == []


@pytest.mark.parametrize("target", [(("a", "b", "f.txt"), b"x"), (("a", "b"), None)])
def test_a_folder_removed_just_before_a_folder_is_made_in_it_is_a_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: tuple[tuple[str, ...], bytes | None]
) -> None:
    """Another program (or a rolled-back write) removes ``a`` after Kernel opened it and
    before it makes ``b`` inside: a path_conflict, not a FileNotFoundError (a 500)."""
    workspace = Workspace(tmp_path)
    (tmp_path / "a").mkdir()
    real_mkdir = os.mkdir

    def mkdir_after_removal(name: str, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        with contextlib.suppress(OSError):
            (tmp_path / "a").rmdir()
        real_mkdir(name, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "mkdir", mkdir_after_removal)
    parts, data = target
    writer = None if data is None else (lambda fh: fh.write(data))
    with pytest.raises(WorkspaceError) as caught:
        workspace.commit([(parts, writer)])
    assert caught.value.code == "path_conflict"
    monkeypatch.undo()
    assert names(tmp_path, "**/.kernel-*") == []


async def test_a_workspace_inside_the_data_dir_judges_its_own_hard_links_apart(
    tmp_path: Path,
) -> None:
    """With hard links allowed, two names inside data/workspace are the owner's; a
    name for data/runtime.toml beside it is not."""
    data = tmp_path / "data"
    (data / "workspace").mkdir(parents=True)
    (data / "runtime.toml").write_bytes(SECRET)
    ws = data / "workspace"
    (ws / "a.txt").write_text("twice")
    (ws / "b.txt").hardlink_to(ws / "a.txt")
    (ws / "leak.txt").hardlink_to(data / "runtime.toml")
    workspace = Workspace(ws, protected=[tmp_path / "config.toml", data], allow_hard_links=True)

    assert await workspace.read("b.txt") == b"twice"
    with pytest.raises(WorkspaceError) as refused:
        await workspace.read("leak.txt")  # data/runtime.toml under another name
    assert refused.value.code == "path_denied"
    entries, _ = await workspace.listing()
    assert [e.path for e in entries] == ["a.txt", "b.txt"]
