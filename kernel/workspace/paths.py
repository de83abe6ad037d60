"""Where a workspace path may lead: checked as text, then on disk.

A path is checked twice. First as text (:func:`parts_of`): no absolute path, no ``..``
or ``.``, no empty part, no control character or backslash, no dotfile, and none of
these after Unicode compatibility folding either (a fullwidth dot is a dot). Then on
disk (:class:`Root`): every folder on the way is opened relative to the one before with
``O_NOFOLLOW``, so a symbolic link anywhere on the path is refused rather than followed,
even if one appears between a check and the use. ``config.toml``, the data directory and
Kernel's own code (:func:`own_code`) are never listed, read or written, wherever they lie
under the root (names compared without regard to case, for case-insensitive file
systems).

On Windows, where ``openat`` does not exist, the same walk is done by
:class:`kernel.workspace.dirs.PathDirs` (every component checked with ``lstat``, reparse
points refused, each opened file verified to be the one checked); :attr:`Root.dirs` holds
the choice.

Hard links: a file is judged on the descriptor it was opened by (``fstat`` after an
``O_NOFOLLOW`` open, so nothing can be swapped in between). One with more than one
link is refused unless ``gateway.allow_hard_links`` is on; even then, never one that is
the same file (``st_dev``, ``st_ino``) as config.toml or as any file under the data
directory at that moment (walked when such a file is met: :class:`Secrets`). This holds
for reads, the listing, exports and overwrites.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from kernel.core.errors import WorkspaceError
from kernel.core.i18n import t
from kernel.core.surrogates import has_lone, mend
from kernel.workspace.dirs import AliasError, Dirs, choose_dirs, is_link

Parts = tuple[str, ...]

MAX_PATH = 1024


def invalid(path: str, why: str) -> WorkspaceError:
    return WorkspaceError("path_invalid", t("ws.path_invalid", path=path[:200], why=why))


def denied(path: str, why: str) -> WorkspaceError:
    return WorkspaceError("path_denied", t("ws.path_denied", path=path[:200], why=why))


def raced(path: str) -> WorkspaceError:
    return WorkspaceError("path_conflict", t("ws.changed_meanwhile", path=path), {"path": path})


def fold(name: str) -> str:
    """A name as a case-insensitive, normalising file system may see it."""
    return unicodedata.normalize("NFKC", name).casefold()


def parts_of(path: str) -> Parts:
    """The parts of a relative path, refused (WorkspaceError) unless every one is a
    plain name: no way out of the root and no hidden file can be written as text."""
    if not path:
        raise invalid(path, t("ws.why_empty"))
    if len(path) > MAX_PATH or any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise invalid(path, t("ws.why_chars"))
    if has_lone(path):  # a lone surrogate, or a name's bytes that were not UTF-8
        raise invalid(mend(path), t("ws.why_surrogate"))
    if path.startswith("/") or path.startswith("~"):
        raise invalid(path, t("ws.why_absolute"))
    if "\\" in path:
        raise invalid(path, t("ws.why_backslash"))
    parts = tuple(path.split("/"))
    for part in parts:
        if part in ("", ".", ".."):
            raise invalid(path, t("ws.why_dots"))
        if part.startswith("."):
            raise denied(path, t("ws.why_dotfile"))
        if len(part.encode("utf-8", "surrogateescape")) > 255:
            raise invalid(path, t("ws.why_chars"))
        folded = unicodedata.normalize("NFKC", part)
        if folded != part:  # a lookalike, harmless here but not where names get folded
            if folded in (".", "..") or "/" in folded or "\\" in folded:
                raise invalid(path, t("ws.why_lookalike"))
            if folded.startswith("."):
                raise denied(path, t("ws.why_lookalike"))
    return parts


def own_code() -> list[Path]:
    """Kernel's own code: its package folder and, beside it in a checkout (the Quickstart
    layout, where the workspace is that checkout), pyproject.toml and uv.lock. A
    workspace protects them like config.toml: a write there would change what the next
    start runs. (The venv, ``.venv``, is a dotfile: never reachable.)"""
    package = Path(__file__).resolve().parents[1]
    return [package, package.parent / "pyproject.toml", package.parent / "uv.lock"]


class Secrets:
    """The (st_dev, st_ino) of config.toml and of every file under the data directory,
    found on first need (a walk, links not followed, the workspace itself left out) and
    kept for one operation only: a file created there later is found by the next one."""

    def __init__(self, workspace: Root) -> None:
        self.workspace = workspace
        self._named: set[tuple[int, int]] | None = None
        self._found: set[tuple[int, int]] | None = None

    def named(self, info: os.stat_result) -> bool:
        """The same file as config.toml (or another protected file, by its own name)."""
        if self._named is None:
            self._named = set()
            for path in self.workspace.secrets:
                with contextlib.suppress(OSError):
                    other = os.stat(path)
                    self._named.add((other.st_dev, other.st_ino))
        return (info.st_dev, info.st_ino) in self._named

    def __contains__(self, info: os.stat_result) -> bool:
        if self._found is None:
            self._found = self._walk()
        return (info.st_dev, info.st_ino) in self._found

    def _walk(self) -> set[tuple[int, int]]:
        found: set[tuple[int, int]] = set()
        try:
            root = os.stat(self.workspace.root)
            skip = (root.st_dev, root.st_ino)
        except OSError:
            skip = (-1, -1)
        for top in self.workspace.secrets:
            try:
                info = os.stat(top, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(info.st_mode):
                found.add((info.st_dev, info.st_ino))
                continue
            for folder, dirs, files in os.walk(top, followlinks=False):
                here = os.stat(folder, follow_symlinks=False)
                if (here.st_dev, here.st_ino) == skip:
                    dirs.clear()  # the workspace inside the data dir: its own files
                    continue
                for name in files:
                    with contextlib.suppress(OSError):
                        entry = os.stat(os.path.join(folder, name), follow_symlinks=False)
                        if stat.S_ISREG(entry.st_mode) and entry.st_nlink > 1:
                            found.add((entry.st_dev, entry.st_ino))
        return found


class Root:
    """The folder ``root``, reached only without following links, minus ``protected``
    paths (config.toml, the data dir). ``allow_hard_links``: serve files with more than
    one link (never one that is also a protected file)."""

    def __init__(
        self, root: Path, protected: Sequence[Path] = (), *, allow_hard_links: bool = False
    ) -> None:
        self.root = root.resolve()
        # Every protected path, for the hard-link check (a workspace inside the data dir
        # included: the files beside it there are Kernel's).
        self.secrets = [p.resolve() for p in protected]
        # A workspace may live inside the data directory (data/workspace): then only what
        # lies beside it there is Kernel's, and none of that is under the root.
        self.protected = [p for p in self.secrets if p not in self.root.parents]
        self._protected_parts = [
            tuple(fold(name) for name in p.relative_to(self.root).parts)
            for p in self.protected
            if p == self.root or self.root in p.parents
        ]
        self.allow_hard_links = allow_hard_links
        self.dirs: Dirs = choose_dirs()

    def is_protected(self, parts: Parts) -> bool:
        """config.toml, the data directory, anything inside it (whatever the case)."""
        folded = tuple(fold(name) for name in parts)
        return any(folded[: len(p)] == p for p in self._protected_parts)

    def refusal(self, info: os.stat_result, secrets: Secrets | None = None) -> str | None:
        """Why the file ``info`` describes (an ``fstat`` of an open descriptor) may not be
        served or replaced, or None: it is config.toml under another name, has more than
        one hard link while they are not allowed, or is a file of the data directory."""
        secrets = secrets or Secrets(self)
        # Whatever its link count: on a case-insensitive file system, CONFIG.TOML is it.
        if secrets.named(info):
            return t("ws.why_protected")
        if info.st_nlink < 2:
            return None
        if not self.allow_hard_links:
            return t("ws.why_hard_link")
        if info in secrets:
            return t("ws.why_protected")
        return None

    def check(self, path: str) -> Parts:
        parts = parts_of(path)
        if self.is_protected(parts):
            raise denied(path, t("ws.why_protected"))
        if any(self.dirs.refuses(name) for name in parts):  # the Windows walk: "DATA~1"
            raise invalid(path, t("ws.why_alias"))
        return parts

    def _root_fd(self) -> int:
        try:
            return self.dirs.root(str(self.root))
        except OSError:
            raise WorkspaceError(
                "workspace_missing", t("ws.missing", root=str(self.root))
            ) from None

    def _folder(
        self, parts: Parts, *, create: bool = False, made: list[Parts] | None = None
    ) -> int:
        """An open fd of the folder holding ``parts[-1]``, each step taken without
        following links. ``create`` makes missing folders (listed in ``made``)."""
        shown = "/".join(parts)
        fd = self._root_fd()
        try:
            for depth, name in enumerate(parts[:-1], start=1):
                try:
                    step = self.dirs.open_dir(name, fd)
                except FileNotFoundError:
                    if not create:
                        raise WorkspaceError(
                            "not_found", t("ws.not_found", path=shown), {"path": shown}
                        ) from None
                    try:
                        self.dirs.mkdir(name, fd)
                        if made is not None:
                            made.append(parts[:depth])
                    except FileExistsError:  # made meanwhile: fine
                        pass
                    except FileNotFoundError:  # the folder holding it was removed meanwhile
                        raise raced(shown) from None
                    try:
                        step = self.dirs.open_dir(name, fd)
                    except FileNotFoundError:  # removed again meanwhile
                        raise raced(shown) from None
                    except OSError as exc:
                        raise self._blocked(fd, name, shown, exc) from None
                except OSError as exc:
                    raise self._blocked(fd, name, shown, exc) from None
                self.dirs.close(fd)
                fd = step
            return fd
        except BaseException:
            self.dirs.close(fd)
            raise

    def _blocked(self, fd: int, name: str, shown: str, exc: OSError) -> WorkspaceError:
        if isinstance(exc, AliasError):
            return invalid(shown, t("ws.why_alias"))
        try:
            linked = is_link(self.dirs.lstat(name, fd))
        except OSError:
            linked = False
        if linked or exc.errno == errno.ELOOP:
            return denied(shown, t("ws.why_symlink"))
        return WorkspaceError("path_conflict", t("ws.not_a_folder", path=shown), {"path": shown})

    def _lstat(self, fd: int, name: str) -> os.stat_result | None:
        """None: no such file. A name the walk refuses (:meth:`Dirs.refuses`) is a
        WorkspaceError, never a bare OSError (which the gateway would answer with a 500)."""
        try:
            return self.dirs.lstat(name, fd)
        except FileNotFoundError:
            return None
        except AliasError:
            raise invalid(name, t("ws.why_alias")) from None

    def _open_dir(self, parts: Parts) -> int:
        if not parts:
            return self._root_fd()
        shown = "/".join(parts)
        folder = self._folder(parts)
        try:
            return self.dirs.open_dir(parts[-1], folder)
        except FileNotFoundError:
            raise WorkspaceError(
                "not_found", t("ws.not_found", path=shown), {"path": shown}
            ) from None
        except OSError as exc:
            raise self._blocked(folder, parts[-1], shown, exc) from None
        finally:
            self.dirs.close(folder)

    def check_target(self, parts: Parts, *, folder: bool) -> None:
        """Refuse (before anything is written) a target whose folders are links or
        files, or that is itself a link, or a folder where a file should go."""
        shown = "/".join(parts)
        if any(self.dirs.refuses(name) for name in parts):  # an import's entry: "DATA~1"
            raise invalid(shown, t("ws.why_alias"))
        fd = self._root_fd()
        try:
            for depth, name in enumerate(parts):
                info = self._lstat(fd, name)
                if info is None:
                    return  # the rest is created
                last = depth == len(parts) - 1
                if is_link(info):
                    raise denied(shown, t("ws.why_symlink"))
                if last and not folder:
                    if stat.S_ISDIR(info.st_mode):
                        raise WorkspaceError("path_is_directory", t("ws.is_directory", path=shown))
                    if not stat.S_ISREG(info.st_mode):
                        raise denied(shown, t("ws.why_special"))
                    why = self.refusal(info)  # checked again on the open file when written
                    if why is not None:
                        raise denied(shown, why)
                    return
                if not stat.S_ISDIR(info.st_mode):
                    raise WorkspaceError(
                        "path_conflict", t("ws.not_a_folder", path=shown), {"path": shown}
                    )
                try:
                    step = self.dirs.open_dir(name, fd)
                except FileNotFoundError:
                    return  # removed meanwhile: the rest is created
                except OSError as exc:
                    raise self._blocked(fd, name, shown, exc) from None
                self.dirs.close(fd)
                fd = step
        finally:
            self.dirs.close(fd)
