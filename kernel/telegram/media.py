"""Photos and documents from Telegram into model input (seed 004 "图片理解", "文件上传处理").

Only UTF-8 text and code are read; PDF, Office, archives, media and unknown types are
refused with the reason, never guessed at. Sizes are checked before downloading, when
declared, and while downloading (``download.py``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Literal

from kernel.agent.slimming import wrap_file
from kernel.core.i18n import t
from kernel.core.messages import ImageBlock

MAX_BYTES = 20 * 1024 * 1024  # what Telegram's cloud Bot API serves at most
Kind = Literal["photo", "file", "voice"]  # what a too-big refusal calls it
MAX_TEXT = 50_000

TEXT_EXTENSIONS = frozenset(
    [
        "txt",
        "md",
        "markdown",
        "rst",
        "log",
        "csv",
        "tsv",
        "json",
        "jsonl",
        "yaml",
        "yml",
        "toml",
        "ini",
        "cfg",
        "conf",
        "env",
        "properties",
        "xml",
        "html",
        "htm",
        "css",
        "scss",
        "less",
        "js",
        "mjs",
        "cjs",
        "ts",
        "tsx",
        "jsx",
        "vue",
        "svelte",
        "py",
        "pyi",
        "ipynb",
        "rb",
        "php",
        "java",
        "kt",
        "kts",
        "scala",
        "go",
        "rs",
        "c",
        "h",
        "cc",
        "cpp",
        "cxx",
        "hpp",
        "hh",
        "cs",
        "swift",
        "m",
        "mm",
        "sh",
        "bash",
        "zsh",
        "fish",
        "ps1",
        "bat",
        "cmd",
        "sql",
        "graphql",
        "proto",
        "lua",
        "pl",
        "r",
        "dart",
        "ex",
        "exs",
        "erl",
        "hs",
        "ml",
        "clj",
        "el",
        "vim",
        "tf",
        "hcl",
        "gradle",
        "cmake",
        "mk",
        "diff",
        "patch",
        "srt",
        "vtt",
        "tex",
        "bib",
        "org",
        "adoc",
        "gitignore",
        "dockerignore",
        "editorconfig",
    ]
)
KNOWN_NAMES = frozenset(
    [
        "Makefile",
        "Dockerfile",
        "Containerfile",
        "Jenkinsfile",
        "Vagrantfile",
        "Procfile",
        "Gemfile",
        "Rakefile",
        "Brewfile",
        "Justfile",
        "LICENSE",
        "README",
        "CHANGELOG",
        "CODEOWNERS",
        ".gitignore",
        ".dockerignore",
        ".env.example",
        ".editorconfig",
        ".bashrc",
        ".zshrc",
    ]
)
REFUSED_KINDS = {  # extension → catalogue key tg.kind.<kind>
    "pdf": "pdf",
    "doc": "word",
    "docx": "word",
    "xls": "excel",
    "xlsx": "excel",
    "ppt": "powerpoint",
    "pptx": "powerpoint",
    "odt": "opendocument",
    "ods": "opendocument",
    "odp": "opendocument",
    "rtf": "rtf",
    "epub": "epub",
    "zip": "archive",
    "rar": "archive",
    "7z": "archive",
    "tar": "archive",
    "gz": "archive",
    "exe": "executable",
    "dll": "executable",
    "so": "executable",
    "bin": "binary",
    "mp3": "audio",
    "mp4": "video",
    "mov": "video",
}
IMAGE_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp"}


class MediaRefused(Exception):
    """The file cannot be used; ``str()`` is the user-facing reason from the catalogue."""


@dataclass(slots=True)
class TextFile:
    name: str
    text: str
    truncated: bool

    def attachment(self) -> str:
        """The seed's format, which history slimming recognises: ``[文件: name]`` + fence."""
        note = t("tg.file_truncated", limit=MAX_TEXT) if self.truncated else ""
        return wrap_file(self.name, self.text) + note


def check_size(size: int | None, kind: Kind) -> None:
    """Refuse a declared size over the limit (undeclared: the download counts)."""
    if size is not None and size > MAX_BYTES:
        raise too_big(kind, size)


def too_big(kind: Kind, size: int | None) -> MediaRefused:
    """The refusal of a file over MAX_BYTES: its size when known, the limit, the fix."""
    limit = MAX_BYTES // 1024 // 1024
    if size is None:  # stopped at the limit: how big it was is not known
        return MediaRefused(t(f"tg.{kind}_over_limit", limit=limit))
    return MediaRefused(t(f"tg.{kind}_too_big", size=f"{size / 1024 / 1024:.1f}", limit=limit))


def classify_document(name: str, mime_type: str | None) -> str:
    """``"text"``, ``"image"``, or raise MediaRefused with the reason."""
    if mime_type in IMAGE_TYPES:
        return "image"
    base = PurePath(name).name
    ext = base.rsplit(".", 1)[-1].lower() if "." in base.strip(".") else ""
    if base in KNOWN_NAMES or (ext and ext in TEXT_EXTENSIONS):
        return "text"
    if ext in REFUSED_KINDS:
        kind = t(f"tg.kind.{REFUSED_KINDS[ext]}")
        raise MediaRefused(t("tg.file_unsupported", name=base, kind=kind))
    raise MediaRefused(t("tg.file_unknown", name=base))


def read_text(name: str, data: bytes) -> TextFile:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise MediaRefused(t("tg.file_not_utf8", name=name)) from None
    if "\x00" in text:
        raise MediaRefused(t("tg.file_not_utf8", name=name))
    return TextFile(name, text[:MAX_TEXT], truncated=len(text) > MAX_TEXT)


def image_block(data: bytes, media_type: str = "image/jpeg") -> ImageBlock:
    return ImageBlock(media_type, base64.b64encode(data).decode("ascii"))


def download_path(folder: Path, unique_id: str, name: str) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in PurePath(name).name)
    return folder / f"{unique_id}_{safe or 'file'}"
