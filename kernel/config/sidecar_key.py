"""The sidecar's key, written once for the server and every one of Kernel's own clients.

The key in effect is ``[gateway] api_key`` (or ``KERNEL_GATEWAY_API_KEY``) when set; else,
with ``gateway.auth = "key"`` (the default), the one Kernel generated on its first start
into ``<data dir>/gateway.key``; with ``auth = "none"`` there is none (loopback only).

The file is made whole before it has its name (a private temporary file, then a hard
link, which fails if the name exists), so two Kernels starting at once end with one key
and never read a half-written one. It is created with mode 0600; one found with group or
other bits, owned by another account, or not a regular file is refused, never tightened:
whoever could read it may hold the key already, so the owner decides (delete it and a
new key is made at the next start). The key is never logged.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from pathlib import Path

from kernel.config.gateway import GatewayConfig
from kernel.core.errors import ConfigError
from kernel.core.fileio import create_whole
from kernel.core.i18n import t

KEY_FILE = "gateway.key"
_KEY = re.compile(r"[\x21-\x7e]{16,512}")  # printable, no spaces
_POSIX = os.name == "posix"


def key_path(data_dir: Path) -> Path:
    return data_dir / KEY_FILE


def sidecar_key(gateway: GatewayConfig, data_dir: Path, *, create: bool = False) -> str:
    """The key in effect ("" only with ``auth = "none"``, or, when not ``create``, before
    Kernel's first start made one). ``create``: Kernel's own start makes the file when
    there is none. Raises :class:`ConfigError` (one line, naming the file and the fix)
    for a file that cannot be trusted or read."""
    if gateway.api_key:
        return gateway.api_key
    if gateway.auth == "none":
        return ""
    path = key_path(data_dir)
    key = _read(path)
    if key or not create:
        return key
    return _create(path)


def _refuse(path: Path, reason: str) -> ConfigError:
    return ConfigError(t("config.key_file_bad", path=path, reason=reason), key="gateway.api_key")


def _read(path: Path) -> str:
    """The file's key; "" when there is no file."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return ""
    except OSError as exc:  # a symlink (ELOOP), no permission…
        raise _refuse(path, exc.strerror or type(exc).__name__) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(path, t("config.key_file_not_file"))
        if _POSIX and info.st_uid != os.geteuid():
            raise _refuse(path, t("config.key_file_owner"))
        if _POSIX and info.st_mode & 0o077:
            raise _refuse(path, t("config.key_file_mode", mode=f"{stat.S_IMODE(info.st_mode):o}"))
        raw = handle.read(1024)
    text = raw.decode("ascii", "replace").strip()
    if not _KEY.fullmatch(text):
        raise _refuse(path, t("config.key_file_damaged"))
    return text


def _create(path: Path) -> str:
    """A new key in ``path``, or the one a concurrent start put there first."""
    key = secrets.token_urlsafe(32)
    try:
        create_whole(path, key.encode("ascii") + b"\n")
    except FileExistsError:
        return _read(path)  # a concurrent start won: its key is the key
    except OSError as exc:
        raise _refuse(path, exc.strerror or type(exc).__name__) from None
    return key
