"""MCP tool results as what a model reads: each piece once, never base64 as text.

Servers say the same thing several ways, and a model should read it once:

- Structured content and its text mirror. The spec asks a server that returns
  ``structuredContent`` to put its JSON serialisation in a text block too; SDK-built
  servers wrap non-object returns as ``{"result": value}``; the reference filesystem
  server wraps as ``{"content": text}`` and, for media, ``{"content": [the content
  blocks]}``. Structured content is added only when nothing in the text blocks or
  content blocks already carries it (compared as JSON values, so whitespace and key
  order do not matter, and as concatenated text).
- Embedded binary. An image in a format the model APIs take (PNG, JPEG, GIF, WebP; up
  to IMAGE_LIMIT), as an image block or an embedded blob resource, reaches the model as
  an image after the tool results; a blob with a text MIME type is decoded; everything
  else (audio, an oversized or odd image, other blobs) is described by name, MIME type
  and size. Base64 never reaches the model as text, also not inside structured content.
- Resource links are described (name, URI, MIME type, description).

Duck-typed on the SDK's content models (and on their JSON form, for content nested in
structured content), so this module needs no ``mcp`` import.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from kernel.core.messages import ImageBlock

RESULT_LIMIT = 50_000  # characters the model gets; the head and tail are kept

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
IMAGE_LIMIT = 5 * 1024 * 1024  # bytes: the model APIs' own per-image limit
TEXT_BLOB_LIMIT = 200_000  # bytes of a text-typed blob decoded for the model
BASE64_MIN = 256  # a string this long that is all base64 alphabet is taken as binary

_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")  # one class, fullmatch: linear time
_TEXT_MIME = re.compile(
    r"text/[\w.+-]+|application/(?:[\w.+-]+\+)?(?:json|xml|yaml|x-yaml|javascript|x-sh|toml|sql)"
)
_WRAPPERS = ("content", "result", "text", "value", "output")


def render_result(result: Any) -> tuple[bool, str, list[ImageBlock]]:
    """(ok, text, images) for a ``CallToolResult``; ok is False when the server set
    ``isError``."""
    blocks = list(getattr(result, "content", None) or [])
    rendered = _Rendered()
    for block in blocks:
        rendered.add(_as_dict(block))
    structured = getattr(result, "structured_content", None)
    if structured is not None and not _carried(structured, blocks, rendered):
        nested = _nested_blocks(structured)
        if nested is not None:
            for block in nested:
                if block.get("type") != "text" or block.get("text") not in rendered.texts:
                    rendered.add(block)
        else:
            rendered.parts.append(json.dumps(_scrub(structured), ensure_ascii=False, default=str))
    text = "\n".join(rendered.parts) if rendered.parts else "(the tool returned no content)"
    return not bool(getattr(result, "is_error", False)), clip(text), rendered.images


class _Rendered:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.texts: list[str] = []  # the plain text blocks, for the mirror checks
        self.images: list[ImageBlock] = []
        self._seen_images: set[str] = set()

    def add(self, block: dict[str, Any]) -> None:
        kind = block.get("type", "")
        if kind == "text":
            text = str(block.get("text", ""))
            if any(text == image.data for image in self.images):
                return  # the image's own data pasted as text
            self.texts.append(text)
            if text:
                self.parts.append(_scrub_text(text))
            return
        if kind in ("image", "audio"):
            self._binary(kind, block.get("mimeType") or "", str(block.get("data") or ""), "")
            return
        if kind == "resource":
            self._resource(block.get("resource") or {})
            return
        if kind == "resource_link":
            self.parts.append(_link(block))
            return
        self.parts.append(f"[{kind or 'unknown'} content not shown]")

    def _binary(self, kind: str, mime: str, data: str, name: str) -> None:
        mime = mime.lower()
        data = "".join(data.split())
        size = _size(data)
        label = f"{kind} {name + ', ' if name else ''}{mime or 'unknown type'}, {size}"
        if mime in IMAGE_TYPES and data and _decoded_len(data) <= IMAGE_LIMIT:
            if data in self._seen_images:
                return  # the same image twice (a mirror of the content): shown once
            self._seen_images.add(data)
            self.images.append(ImageBlock(mime, data))
            self.parts.append(f"[{label}]")
            return
        if kind == "audio":
            self.parts.append(f"[{label}: not shown (audio is not passed to models)]")
        elif kind == "image":
            self.parts.append(f"[{label}: not shown (format or size not taken)]")
        else:
            self.parts.append(f"[{label}: binary content not shown]")

    def _resource(self, resource: dict[str, Any]) -> None:
        uri = str(resource.get("uri", ""))
        mime = str(resource.get("mimeType") or "")
        text = resource.get("text")
        blob = resource.get("blob")
        head = f"[resource {uri}{' (' + mime + ')' if mime else ''}]"
        if isinstance(text, str):
            if mime and not _is_text_mime(mime) and _looks_base64(text):
                self._binary("resource", mime, text, uri)
                return
            self.parts.append(f"{head}\n{_scrub_text(text)}")
            return
        if isinstance(blob, str):
            if _is_text_mime(mime):
                decoded = _decode_text(blob)
                if decoded is not None:
                    self.parts.append(f"{head}\n{decoded}")
                    return
            kind = "image" if mime.lower() in IMAGE_TYPES else "resource"
            self._binary(kind, mime, blob, uri)
            return
        self.parts.append(f"{head} (no content)")


def _as_dict(block: Any) -> dict[str, Any]:
    """A content block (SDK model or already JSON) as its wire JSON."""
    if isinstance(block, dict):
        return block
    dump = getattr(block, "model_dump", None)
    if callable(dump):
        value = dump(by_alias=True, mode="json", exclude_none=True)
        if isinstance(value, dict):
            return value
    return {"type": str(getattr(block, "type", ""))}


def _link(block: dict[str, Any]) -> str:
    name = str(block.get("title") or block.get("name") or "")
    details = [str(block.get("uri", ""))]
    if block.get("mimeType"):
        details.append(str(block["mimeType"]))
    if isinstance(block.get("size"), int):
        details.append(_size_bytes(block["size"]))
    where = ", ".join(details)
    text = f"[resource link: {name} ({where})]" if name else f"[resource link: {where}]"
    description = block.get("description")
    return f"{text} {description}" if description else text


# ---------------------------------------------------------------------- mirrors


def _carried(structured: Any, blocks: list[Any], rendered: _Rendered) -> bool:
    """Does the content already say what ``structured`` says?"""
    texts = rendered.texts
    candidates = [structured]
    if isinstance(structured, dict) and len(structured) == 1:
        ((key, inner),) = structured.items()
        if key in _WRAPPERS:
            candidates.append(inner)
    joined = ["\n".join(texts), "".join(texts)] if len(texts) > 1 else []
    for value in candidates:
        if isinstance(value, str):
            stripped = value.strip()
            if any(stripped == t.strip() for t in [*texts, *joined]):
                return True
        for text in [*texts, *joined]:
            if _json_equal(text, value):
                return True
        if isinstance(value, list) and blocks and value == [_as_dict(b) for b in blocks]:
            return True
    return False


def _json_equal(text: str, value: Any) -> bool:
    stripped = text.strip()
    if not stripped or stripped[0] not in '[{"-0123456789tfn':
        return False
    try:
        return bool(json.loads(stripped) == value)
    except ValueError:
        return False


def _nested_blocks(structured: Any) -> list[dict[str, Any]] | None:
    """``{"content": [content blocks]}`` not mirrored by the content: the blocks."""
    inner = structured
    if isinstance(structured, dict) and len(structured) == 1:
        inner = next(iter(structured.values()))
    if (
        isinstance(inner, list)
        and inner
        and all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in inner)
        and all(b["type"] in ("text", "image", "audio", "resource", "resource_link") for b in inner)
    ):
        return inner
    return None


# ---------------------------------------------------------------------- base64


def _looks_base64(text: str) -> bool:
    if len(text) < BASE64_MIN or " " in text.strip():
        return False
    return _BASE64.fullmatch(text) is not None


def _scrub_text(text: str) -> str:
    """A text block that is nothing but a long base64 run is described, not pasted."""
    if _looks_base64(text):
        return f"[base64 data, {_size(''.join(text.split()))}, not shown]"
    return text


def _scrub(value: Any) -> Any:
    """Structured content with any base64 string replaced by a description."""
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, str) and _looks_base64(value):
        return f"[base64 data, {_size(''.join(value.split()))}, not shown]"
    return value


def _is_text_mime(mime: str) -> bool:
    return _TEXT_MIME.fullmatch(mime.lower().split(";")[0].strip()) is not None


def _decode_text(blob: str) -> str | None:
    data = "".join(blob.split())
    if _decoded_len(data) > TEXT_BLOB_LIMIT:
        return None
    try:
        return base64.b64decode(data, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def _decoded_len(data: str) -> int:
    data = data.rstrip()
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))


def _size(base64_data: str) -> str:
    return _size_bytes(_decoded_len(base64_data or ""))


def _size_bytes(n: int) -> str:
    return f"{n / 1024:.1f} KB" if n >= 1024 else f"{n} bytes"


def clip(text: str, limit: int = RESULT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    keep = limit // 2
    omitted = len(text) - 2 * keep
    return f"{text[:keep]}\n… [{omitted} characters omitted] …\n{text[-keep:]}"
