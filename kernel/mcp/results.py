"""MCP tool results as what a model reads: text, plus images.

An image in a format the model APIs take (PNG, JPEG, GIF, WebP; up to IMAGE_LIMIT)
reaches the model as an image after the tool results; other content that is not text
(audio, an oversized or odd image, binary resources) is described, never silently
dropped. Structured
content is added as JSON unless a text block already carries the same value (the
spec asks servers to mirror it as text; MCPServer also wraps plain returns as
``{"result": ...}``). Duck-typed on the SDK's content models, so this module needs
no ``mcp`` import.
"""

from __future__ import annotations

import json
from typing import Any

from kernel.agent.messages import ImageBlock

RESULT_LIMIT = 50_000  # characters the model gets; the head and tail are kept


IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
IMAGE_LIMIT = 5 * 1024 * 1024  # bytes: the model APIs' own per-image limit


def render_result(result: Any) -> tuple[bool, str, list[ImageBlock]]:
    """(ok, text, images) for a ``CallToolResult``; ok is False when the server set
    ``isError``."""
    texts: list[str] = []
    parts: list[str] = []
    images: list[ImageBlock] = []
    for block in getattr(result, "content", None) or []:
        image = _image(block)
        if image is not None:
            images.append(image)
            parts.append(f"[image {image.media_type}, {_size(image.data)}]")
            continue
        text = render_block(block)
        if getattr(block, "type", "") == "text":
            texts.append(text)
        if text:
            parts.append(text)
    structured = getattr(result, "structured_content", None)
    if structured is not None and not _mirrored(structured, texts):
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    text = "\n".join(parts) if parts else "(the tool returned no content)"
    return not bool(getattr(result, "is_error", False)), clip(text), images


def _image(block: Any) -> ImageBlock | None:
    if getattr(block, "type", "") != "image":
        return None
    mime = (getattr(block, "mime_type", "") or "").lower()
    data = "".join((getattr(block, "data", "") or "").split())
    if mime not in IMAGE_TYPES or not data or len(data) * 3 // 4 > IMAGE_LIMIT:
        return None
    return ImageBlock(mime, data)


def render_block(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        mime = getattr(block, "mime_type", "") or kind
        size = _size(getattr(block, "data", ""))
        why = "audio is not passed to models" if kind == "audio" else "format or size not taken"
        return f"[{kind} {mime}, {size}: not shown ({why})]"
    if kind == "resource":
        resource = block.resource
        uri = getattr(resource, "uri", "")
        text = getattr(resource, "text", None)
        if text is not None:
            return f"[resource {uri}]\n{text}"
        mime = getattr(resource, "mime_type", None) or "binary"
        size = _size(getattr(resource, "blob", ""))
        return f"[resource {uri}: {mime}, {size}, binary content not shown]"
    if kind == "resource_link":
        name = getattr(block, "name", "") or ""
        return f"[resource link: {name} {getattr(block, 'uri', '')}]".replace("  ", " ")
    return f"[{kind or 'unknown'} content not shown]"


def _mirrored(structured: Any, texts: list[str]) -> bool:
    single = isinstance(structured, dict) and len(structured) == 1
    wrapped = structured.get("result") if single else None
    for text in texts:
        if wrapped is not None and text == wrapped:
            return True
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if value == structured or (wrapped is not None and value == wrapped):
            return True
    return False


def _size(base64_data: str) -> str:
    data = (base64_data or "").rstrip()
    n = len(data) * 3 // 4 - data[-2:].count("=")
    return f"{n / 1024:.1f} KB" if n >= 1024 else f"{n} bytes"


def clip(text: str, limit: int = RESULT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    keep = limit // 2
    omitted = len(text) - 2 * keep
    return f"{text[:keep]}\n… [{omitted} characters omitted] …\n{text[-keep:]}"
