"""``prompts/`` beside config.toml (the folder SelfOps writes, issue 20): ``AGENTS.md``
and the ``[prompts] layers`` files as system layers after ``SOUL.md``, and
``prompts/<name>.md`` as ``/prompts:<name> KEY=VALUE …`` templates.

Every file is read fresh for each turn, through a cache keyed by its inode, size and
modification time (a stat per file per turn), so a change made through SelfOps is in the
very next request. A file that cannot be read (missing, a symlink loop, not UTF-8, over
256 KiB) is skipped as a layer and neither listed nor filled in as a template. The
layers keep one stable order (the provider's prompt cache holds them from turn to
turn): a later prompt mode swaps the list of :class:`LayerFile` it asks for, not the
way they are read. A guest's turn gets none of them (:mod:`~kernel.agent.prompt`).
"""

from __future__ import annotations

import errno
import logging
import re
import shlex
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from kernel.agent.context import Layer
from kernel.config import Config
from kernel.config.prompts import layer_paths
from kernel.core.errors import PromptError
from kernel.core.i18n import t

log = logging.getLogger(__name__)

FOLDER = "prompts"
AGENTS_FILE = "AGENTS.md"
PREFIX = "/prompts:"
MAX_FILE_BYTES = 256 * 1024  # a larger prompt file is skipped (layer) or refused (template)
# A template's name: Unicode letters and digits (周报), then also "_" and "-"; never a dot,
# a slash, a backslash, a space or a control character (matched whole, NFC-normalised).
NAME = re.compile(r"[^\W_][\w-]{0,63}")
KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# What separates the arguments: ASCII whitespace and the ideographic space (a zh IME's).
SPACES = " \t\r\n\x0b\x0c\u3000"
# {{KEY}} (any identifier, spaces allowed inside the braces), $KEY (capitals, as Codex's
# custom prompts write it), $$ for a literal dollar sign.
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}|\$\$|\$([A-Z][A-Z0-9_]*)")


@dataclass(frozen=True, slots=True)
class LayerFile:
    """A system layer read from ``path``; ``source`` is how it is shown (relative to
    config.toml's folder). ``required``: a missing or empty file is an error for the
    caller to word (a prompt mode's own files), else it is skipped."""

    name: str
    path: Path
    source: str
    required: bool = False


@dataclass(frozen=True, slots=True)
class Template:
    name: str
    first_line: str


class PromptFiles:
    def __init__(self, config: Config) -> None:
        self.config = config
        self._cache: dict[Path, tuple[tuple[int, int, int], str]] = {}
        self._warned: set[Path] = set()  # missing or unreadable files already logged

    @property
    def folder(self) -> Path:
        return self.config.base_dir / FOLDER

    # ----- layers -----------------------------------------------------------------------

    def default_files(self) -> list[LayerFile]:
        """``prompts/AGENTS.md`` then the configured layers, each file once."""
        base = self.config.base_dir
        files = [LayerFile("agents_md", self.folder / AGENTS_FILE, f"{FOLDER}/{AGENTS_FILE}")]
        prompts = self.config.prompts
        for index, (name, path) in enumerate(
            zip(prompts.layers, layer_paths(prompts, base), strict=True)
        ):
            files.append(LayerFile(f"prompt_layer_{index + 1}", path, name))
        if len(files) == 1:  # AGENTS.md alone (no layers configured): nothing to compare
            return files
        seen: set[Path] = set()
        unique: list[LayerFile] = []
        for file in files:
            key = _identity(file.path)
            if key not in seen:
                seen.add(key)
                unique.append(file)
        return unique

    def layers(self, files: list[LayerFile] | None = None) -> list[Layer]:
        """The layers of ``files`` (default: :meth:`default_files`) present and not empty,
        in order. Blocking (stat and read): call it in a thread."""
        out: list[Layer] = []
        for file in self.default_files() if files is None else files:
            text = self.read(file.path, configured=file.name != "agents_md")
            if text:
                out.append(Layer(file.name, text, file.source))
        return out

    def unavailable(self, files: list[LayerFile]) -> list[LayerFile]:
        """The ``required`` files of ``files`` missing or empty now (a prompt mode answers
        its ``*_prompt_unavailable`` for them). Blocking: call it in a thread."""
        return [f for f in files if f.required and not self.read(f.path, configured=False)]

    def read(self, path: Path, *, configured: bool = True) -> str:
        """The stripped text of ``path``; "" when it is missing, a symlink loop, empty,
        too large or not UTF-8 (logged once per file while it stays so; a missing one
        only when it was ``configured``)."""
        try:
            st = path.stat()
        except OSError as exc:  # missing, or a symlink loop (ELOOP), or no permission
            self._cache.pop(path, None)
            if configured or exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                self._warn(path, "missing" if exc.errno == errno.ENOENT else "unreadable")
            return ""
        if not path.is_file() or st.st_size > MAX_FILE_BYTES:
            self._warn(path, "not a file or too large")
            return ""
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._cache.get(path)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            self._warn(path, "unreadable")
            return ""
        self._warned.discard(path)
        self._cache[path] = (key, text)
        return text

    def _warn(self, path: Path, why: str) -> None:
        if path not in self._warned:
            self._warned.add(path)
            log.warning("prompt layer %s skipped: %s", path.name, why)

    # ----- templates --------------------------------------------------------------------

    def templates(self) -> list[Template]:
        """``prompts/<name>.md`` with a plain name (AGENTS.md is a layer) that reads as a
        template (non-empty UTF-8 text within 256 KiB), sorted by name."""
        out: list[Template] = []
        for name, path in sorted(self._named().items()):
            text = self.read(path, configured=False)
            if text:
                first = next(line.strip() for line in text.splitlines() if line.strip())
                out.append(Template(name, first[:120]))
        return out

    def _named(self) -> dict[str, Path]:
        """The ``prompts/*.md`` files by their name (NFC), those with a plain one; a name
        is only ever looked up here, never joined to a path."""
        try:
            entries = list(self.folder.glob("*.md"))
        except OSError:
            return {}
        named: dict[str, Path] = {}
        for path in entries:
            name = unicodedata.normalize("NFC", path.stem)
            if path.name != AGENTS_FILE and NAME.fullmatch(name) and path.is_file():
                named[name] = path
        return named

    def expand(self, text: str) -> str:
        """``text`` when it is not a ``/prompts:<name> KEY=VALUE …`` message, else the
        template filled in. The name ends at the first whitespace of any kind (a space, a
        tab, a new line). Refused (PromptError, naming the templates there are) when the
        template is missing or does not read as one, an argument is malformed, a
        placeholder has no value or a value has no placeholder. Blocking: call it in a
        thread."""
        if not names_template(text):
            return text
        stripped = text.strip()
        if not self.config.features.prompt_templates:
            raise PromptError("prompt_templates_disabled", t("prompts.disabled"))
        head, *tail = re.split(r"\s", stripped[len(PREFIX) :], maxsplit=1)
        rest = tail[0] if tail else ""
        name = unicodedata.normalize("NFC", head)
        path = self._named().get(name)
        if path is None:
            raise self._refusal("prompt_template_not_found", "prompts.not_found", name)
        body = self.read(path, configured=False)
        if not body:
            raise self._refusal("prompt_template_invalid", "prompts.unreadable", name)
        values = _arguments(rest, name)
        wanted = {k for m in PLACEHOLDER.finditer(body) if (k := m.group(1) or m.group(2))}
        missing = sorted(k for k in wanted if k not in values)
        unknown = sorted(k for k in values if k not in wanted)
        if missing or unknown:
            raise PromptError(
                "prompt_template_invalid",
                t(
                    "prompts.placeholders",
                    name=name,
                    missing=", ".join(missing) or "-",
                    unknown=", ".join(unknown) or "-",
                    wanted=", ".join(sorted(wanted)) or "-",
                ),
                {
                    "template": name,
                    "missing": missing,
                    "unknown": unknown,
                    "templates": [tpl.name for tpl in self.templates()],
                },
            )

        def fill(match: re.Match[str]) -> str:
            key = match.group(1) or match.group(2)
            return "$" if key is None else values[key]

        return PLACEHOLDER.sub(fill, body)

    def _refusal(self, code: str, key: str, name: str) -> PromptError:
        names = [tpl.name for tpl in self.templates()]
        name = name if len(name) <= 64 else name[:64] + "…"  # what was typed, echoed back
        return PromptError(
            code,
            t(key, name=name or "-", names=", ".join(names) or "-"),
            {"template": name, "templates": names},
        )


def names_template(text: str) -> bool:
    """Whether ``text`` is a ``/prompts:<name> …`` message (only then is there a
    template to read: ``PromptFiles.expand``). No I/O."""
    return text.lstrip().startswith(PREFIX)


def _identity(path: Path) -> Path:
    """What makes two layer paths the same file: the resolved path, or the absolute one
    when it cannot be resolved (a symlink loop: then skipped as unreadable)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python 3.11)
        return path.absolute()


def _arguments(rest: str, name: str) -> dict[str, str]:
    """``KEY=VALUE`` words (a value may be quoted: ``TOPIC="a b"``), each key once. A
    backslash is kept as it is (``PATTERN=\\d+`` and ``FILE=C:\\Users\\a.py``), and ``#``
    starts no comment."""
    lexer = shlex.shlex(rest, posix=True)
    lexer.whitespace_split = True
    lexer.whitespace = SPACES
    lexer.escape = ""
    lexer.commenters = ""
    try:
        words = list(lexer)
    except ValueError:  # an unclosed quote
        raise PromptError(
            "prompt_template_invalid", t("prompts.bad_argument", name=name, word=rest.strip())
        ) from None
    values: dict[str, str] = {}
    for word in words:
        key, eq, value = word.partition("=")
        if not eq or not KEY.match(key) or key in values:
            raise PromptError(
                "prompt_template_invalid", t("prompts.bad_argument", name=name, word=word)
            )
        values[key] = value
    return values
