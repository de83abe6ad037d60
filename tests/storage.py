"""A small tmpfs to put a data directory on, and ways to fill it or make it read-only:
the storage trouble Kernel must wait out at start (issue 15); one file made read-only
by a read-only bind mount over it, which refuses even root's writes (issue 33: chmod
does not stop root). Needs root and mount."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

FILLER = "filler"


@contextmanager
def tmpfs(path: Path, size: str = "1m") -> Iterator[Path]:
    """A ``size`` tmpfs mounted at ``path`` for the block; skipped with the reason where
    this machine does not let the test mount one."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8): the storage tests cannot run")
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"mount -t tmpfs is not permitted here ({mounted.stderr.strip()})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` (a file) read-only for the block, its folder still writable: a read-only
    bind mount over it, so every open for writing fails with EROFS, root's too. Skipped
    with the reason where this machine does not let the test mount."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only bind mount needs root and mount(8)")
    bound = subprocess.run(
        ["mount", "--bind", str(path), str(path)], capture_output=True, text=True, check=False
    )
    if bound.returncode != 0:
        pytest.skip(f"mount --bind is not permitted here ({bound.stderr.strip()})")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True)
        yield path
    finally:
        subprocess.run(["umount", str(path)], capture_output=True, check=False)


def fill(mount: Path) -> None:
    """Fill the file system to the last byte."""
    fd = os.open(mount / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for chunk in (65536, 4096, 1):
            while True:
                try:
                    os.write(fd, bytes(chunk))
                except OSError:
                    break
    finally:
        os.close(fd)


def free(mount: Path) -> None:
    (mount / FILLER).unlink()


def remount(mount: Path, mode: str) -> None:
    """``mode``: "ro" or "rw"."""
    subprocess.run(["mount", "-o", f"remount,{mode}", str(mount)], check=True)
