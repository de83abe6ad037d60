"""``/workspace/files``: write, read, list, delete; every way out of the workspace
(``..``, ``%2e%2e``, absolute paths, links, dotfiles, config.toml, the data dir) refused
with nothing written; uploads all or nothing."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from yarl import URL

import kernel
from tests.gateway.conftest import Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim


async def raw(
    sc: Sidecar, method: str, path: str, data: Any = None, **headers: str
) -> tuple[int, bytes]:
    """One request with the path sent exactly as written (no client normalisation)."""
    url = URL(sc.url + path, encoded=True)
    async with sc.http.request(method, url, data=data, headers=sc.headers(**headers)) as resp:
        return resp.status, await resp.read()


def error_code(body: bytes) -> str:
    return str(json.loads(body)["error"]["code"])


def names(folder: Path, pattern: str = "*") -> list[str]:
    """The sorted names in ``folder`` matching ``pattern`` (``**/…`` for any depth)."""
    return sorted(p.name for p in folder.glob(pattern))


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (links not followed) with its content."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and "data" not in p.relative_to(root).parts
    }


@pytest.mark.posix
async def test_write_read_list_delete(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    (tmp_path / ".env").write_text("SECRET=1")
    (tmp_path / "outside.txt").write_text("x")
    (tmp_path / "link.txt").symlink_to(tmp_path / "outside.txt")
    sc = await sidecar(anthropic_sim)

    status, body = await raw(sc, "PUT", "/workspace/files/notes/day%201.md", data=b"# Monday\n")
    assert status == 200
    entry = json.loads(body)
    assert entry["path"] == "notes/day 1.md" and entry["size"] == 9 and entry["type"] == "file"
    assert (tmp_path / "notes" / "day 1.md").read_text() == "# Monday\n"
    status, body = await raw(sc, "PUT", "/workspace/files/notes/day%201.md", data=b"# Tuesday\n")
    assert status == 200 and (tmp_path / "notes" / "day 1.md").read_text() == "# Tuesday\n"

    status, body = await raw(sc, "GET", "/workspace/files/notes/day%201.md")
    assert (status, body) == (200, b"# Tuesday\n")

    status, data, _ = await sc.call("GET", "/workspace/files")
    assert status == 200 and data["truncated"] is False
    listed = {e["path"]: e for e in data["entries"]}
    # config.toml, the data dir, dotfiles and links are not part of the workspace
    assert sorted(listed) == ["notes", "notes/day 1.md", "outside.txt"]
    assert listed["notes"]["type"] == "dir" and listed["notes/day 1.md"]["size"] == 10
    assert listed["notes/day 1.md"]["modified"].endswith("+00:00")
    status, data, _ = await sc.call("GET", "/workspace/files?path=notes&limit=1")
    assert [e["path"] for e in data["entries"]] == ["notes/day 1.md"]
    status, data, _ = await sc.call("GET", "/workspace/files?limit=1")
    assert data["truncated"] is True and len(data["entries"]) == 1

    status, body = await raw(sc, "GET", "/workspace/files/notes")
    assert status == 400 and error_code(body) == "path_is_directory"
    status, body = await raw(sc, "DELETE", "/workspace/files/notes")
    assert status == 409 and error_code(body) == "directory_not_empty"
    status, body = await raw(sc, "DELETE", "/workspace/files/notes/day%201.md")
    assert status == 200 and not (tmp_path / "notes" / "day 1.md").exists()
    status, body = await raw(sc, "DELETE", "/workspace/files/notes")
    assert status == 200 and not (tmp_path / "notes").exists()
    status, body = await raw(sc, "GET", "/workspace/files/notes/day%201.md")
    assert status == 404 and error_code(body) == "not_found"


@pytest.mark.posix
async def test_every_way_out_is_refused_and_nothing_is_written(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    (ws / "inner").symlink_to(outside)  # a folder link
    (ws / "s.txt").symlink_to(outside / "secret.txt")  # a file link
    (ws / "real").mkdir()
    (ws / "real" / "deeper").symlink_to(outside)
    sc = await sidecar(anthropic_sim, default_workspace="ws")
    before = snapshot(tmp_path)

    attempts = {
        "/workspace/files/../outside/secret.txt": "path_invalid",
        "/workspace/files/%2e%2e/outside/secret.txt": "path_invalid",
        "/workspace/files/..%2Foutside%2Fsecret.txt": "path_invalid",
        "/workspace/files/real/%2E%2E/%2E%2E/outside/secret.txt": "path_invalid",
        "/workspace/files/%2F" + str(outside / "secret.txt").lstrip("/"): "path_invalid",
        "/workspace/files//etc/passwd": "path_invalid",
        "/workspace/files/~/x": "path_invalid",
        "/workspace/files/a%5C..%5Cb": "path_invalid",
        "/workspace/files/a%00b": "path_invalid",
        "/workspace/files/inner/secret.txt": "path_denied",
        "/workspace/files/real/deeper/secret.txt": "path_denied",
        "/workspace/files/s.txt": "path_denied",
        "/workspace/files/.env": "path_denied",
        "/workspace/files/.git/config": "path_denied",
    }
    for path, code in attempts.items():
        for method in ("GET", "PUT", "DELETE"):
            data = b"overwritten" if method == "PUT" else None
            status, body = await raw(sc, method, path, data=data)
            assert status in (400, 403), (method, path, status, body)
            assert error_code(body) == code, (method, path)
            assert b"top secret" not in body

    status, body = await raw(sc, "GET", "/workspace/files?path=inner")
    assert status == 403 and error_code(body) == "path_denied"
    assert snapshot(tmp_path) == before  # nothing written or removed, inside or out
    assert (ws / "s.txt").is_symlink() and (ws / "inner").is_symlink()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_config_and_data_dir_are_never_served_or_overwritten(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)  # the workspace is the folder of config.toml
    config = (tmp_path / "config.toml").read_bytes()
    for path in ("config.toml", "data/kernel.db", "data/runtime.toml", "data"):
        for method in ("GET", "PUT", "DELETE"):
            status, body = await raw(sc, method, f"/workspace/files/{path}", data=b"x")
            assert status == 403 and error_code(body) == "path_denied", (method, path)
            assert b"api_key" not in body
    status, body = await raw(sc, "GET", "/workspace/files?path=data")
    assert status == 403
    assert (tmp_path / "config.toml").read_bytes() == config
    assert not (tmp_path / "data" / "runtime.toml").exists()

    # config.toml under another name (a hard link) is the same file: not served either.
    (tmp_path / "copy.txt").hardlink_to(tmp_path / "config.toml")
    status, body = await raw(sc, "GET", "/workspace/files/copy.txt")
    assert status == 403 and error_code(body) == "path_denied" and b"api_key" not in body
    status, body = await raw(sc, "GET", "/workspace/files")
    assert status == 200 and b"copy.txt" not in body


def multipart(files: list[tuple[str, bytes]]) -> aiohttp.FormData:
    form = aiohttp.FormData()
    for name, data in files:
        form.add_field("file", data, filename=name, content_type="application/octet-stream")
    return form


BOUNDARY = "kernel-test-boundary"


def handmade(files: list[tuple[str, bytes]]) -> bytes:
    """A multipart body with the file names exactly as given (a client library would
    percent-encode a slash)."""
    out = b""
    for name, data in files:
        out += f"--{BOUNDARY}\r\n".encode()
        out += f'Content-Disposition: form-data; name="file"; filename="{name}"\r\n\r\n'.encode()
        out += data + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


async def test_uploads_are_written_all_or_none(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim, default_workspace="ws", gateway={"max_body_bytes": 4096})
    (tmp_path / "ws").mkdir()

    form = multipart([("a.txt", b"alpha"), ("b.bin", bytes(range(256)))])
    status, body = await raw(sc, "POST", "/workspace/uploads?path=in%20box", data=form)
    assert status == 201
    assert [e["path"] for e in json.loads(body)["files"]] == ["in box/a.txt", "in box/b.bin"]
    assert (tmp_path / "ws" / "in box" / "b.bin").read_bytes() == bytes(range(256))

    before = snapshot(tmp_path)
    kind = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    for bad in ("../escape.txt", ".hidden", "sub/dir.txt", "a\\\\b", ".."):
        form = handmade([("ok.txt", b"fine"), (bad, b"evil")])
        status, body = await raw(sc, "POST", "/workspace/uploads", data=form, **kind)
        assert status in (400, 403) and error_code(body) in ("path_invalid", "path_denied"), bad
    status, body = await raw(sc, "POST", "/workspace/uploads?path=..", data=multipart([("x", b"")]))
    assert status == 400 and error_code(body) == "path_invalid"
    big = multipart([("big.bin", b"z" * 5000)])
    status, body = await raw(sc, "POST", "/workspace/uploads", data=big)
    assert status == 413 and error_code(body) == "request_too_large"
    status, body = await raw(
        sc, "POST", "/workspace/uploads", data=b"{}", **{"Content-Type": "application/json"}
    )
    assert status == 400
    assert snapshot(tmp_path) == before


async def test_a_workspace_inside_the_data_dir_works(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim, default_workspace="data/workspace")
    (tmp_path / "data" / "workspace").mkdir()

    status, _ = await raw(sc, "PUT", "/workspace/files/a.txt", data=b"inside")
    assert status == 200 and (tmp_path / "data" / "workspace" / "a.txt").read_bytes() == b"inside"
    status, data, _ = await sc.call("GET", "/workspace/files")
    assert [e["path"] for e in data["entries"]] == ["a.txt"]
    status, body = await raw(sc, "GET", "/workspace/files/..%2Fkernel.db")
    assert status == 400 and error_code(body) == "path_invalid"


async def test_a_page_in_the_workspace_is_never_rendered_by_a_browser(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    """An HTML file served inline from the sidecar's own origin could drive the sidecar."""
    (tmp_path / "evil.html").write_text("<script>fetch('/envs',{method:'PUT'})</script>")
    sc = await sidecar(anthropic_sim)
    async with sc.http.get(sc.url + "/workspace/files/evil.html", headers=sc.headers()) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Disposition"].startswith("attachment;")
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
        assert resp.headers["Content-Security-Policy"] == "sandbox"


CHECKOUT = Path(kernel.__file__).resolve().parent.parent  # the Quickstart's workspace


async def test_kernels_own_code_is_never_served_or_overwritten(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """The Quickstart layout: the workspace is Kernel's own checkout. Its package,
    pyproject.toml and uv.lock are refused like config.toml (a write would change what
    the next start runs); the venv is a dotfile. Nothing here changes a file's bytes."""
    sc = await sidecar(anthropic_sim, default_workspace=str(CHECKOUT))
    before = {
        n: (CHECKOUT / n).read_bytes() for n in ("kernel/app.py", "pyproject.toml", "uv.lock")
    }
    for name, data in before.items():
        status, body = await raw(sc, "PUT", f"/workspace/files/{name}", data=data)
        assert status == 403 and error_code(body) == "path_denied", (name, body)
        assert b"Kernel's own code" in body
    for method, path in (("DELETE", "kernel/no_such.py"), ("PUT", ".venv/bin/python")):
        status, body = await raw(sc, method, f"/workspace/files/{path}", data=b"x")
        assert status in (400, 403) and error_code(body) in ("path_denied", "path_invalid")
    status, body = await raw(sc, "GET", "/workspace/files?path=kernel")
    assert status == 403 and error_code(body) == "path_denied"
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("kernel/zz_added.py", "print('next start')\n")
    status, body = await raw(sc, "POST", "/workspace/import", data=archive.getvalue())
    assert status == 400 and error_code(body) == "import_unsafe_entry", body
    assert not (CHECKOUT / "kernel" / "zz_added.py").exists()
    assert {n: (CHECKOUT / n).read_bytes() for n in before} == before
