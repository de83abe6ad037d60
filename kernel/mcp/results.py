"""MCP tool results as the text a model reads.

Kernel's tool results are text (``ToolResultBlock.content`` is a string on every
provider path), so content that is not text is described, never silently dropped:
an image becomes a line saying an image was returned and was not shown. Structured
content is added as JSON unless a text block already carries the same value (the
spec asks servers to mirror it as text; MCPServer also wraps plain returns as
``{"result": ...}``). Duck-typed on the SDK's content models, so this module needs
no ``mcp`` import.
"""

from __future__ import annotations

import json
from typing import Any

RESULT_LIMIT = 50_000  # characters the model gets; the head and tail are kept


def render_result(result: Any) -> tuple[bool, str]:
    """(ok, text) for a ``CallToolResult``; ok is False when the server set ``isError``."""
    texts: list[str] = []
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        text = render_block(block)
        if getattr(block, "type", "") == "text":
            texts.append(text)
        if text:
            parts.append(text)
    structured = getattr(result, "structured_content", None)
    if structured is not None and not _mirrored(structured, texts):
        parts.append(json.dumps(structured, ensure_ascii=False, default=str))
    text = "\n".join(parts) if parts else "(the tool returned no content)"
    return not bool(getattr(result, "is_error", False)), clip(text)


def render_block(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        mime = getattr(block, "mime_type", "") or kind
        size = _size(getattr(block, "data", ""))
        return f"[{kind} {mime}, {size}: not shown, tool results reach the model as text only]"
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
