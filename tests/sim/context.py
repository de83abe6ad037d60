"""Reading a recorded model request the way Kernel builds it: the stable system prompt,
the volatile context block (``<context>\\n…\\n</context>``: the time, recalled
memories) Kernel appends to the turn's own user message, and the owner's words
without that block.

Both wire formats are understood:

- Anthropic Messages: ``system`` (a string, or a list of text blocks); the context is
  the LAST text block of the turn's user message.
- OpenAI chat: the system prompt is a leading ``system`` message; the context is the
  last text part of the turn's user message, and a message whose parts are all text is
  sent as one string, the parts joined with ``"\\n\\n"``.

    context_of(body)      -> "当前时间：…" (the block's inner text; "" when none was sent)
    owner_parts(message)  -> the message's content parts without the context block
    owner_texts(message)  -> the text of those parts, in order
    owner_words(body)     -> the last of those texts in the request's last message, which
                             must be the turn's own (it carries the context block)
    system_of(body)       -> the system prompt
    recalled_of(body)     -> the recalled-memories lines of the context ("" when none)
"""

from __future__ import annotations

from typing import Any

from kernel.core.i18n import CATALOG, LANGUAGES
from tests.sim.script import CONTEXT_OPEN, RecordedRequest

CONTEXT_CLOSE = "\n</context>"
MEMORY_HEADER = CATALOG["zh"]["prompt.memories"]  # the recalled-memories layer's first line
MEMORY_HEADERS = tuple(CATALOG[language]["prompt.memories"] for language in LANGUAGES)
JOIN = "\n\n"  # how the OpenAI adapter joins the text parts of one message


def _body(request: RecordedRequest | dict[str, Any]) -> dict[str, Any]:
    body = request.body if isinstance(request, RecordedRequest) else request
    assert isinstance(body, dict), "not a JSON model request"
    return body


def is_context(text: str) -> bool:
    """True for a whole context block as Kernel sends it."""
    return text.startswith(CONTEXT_OPEN) and text.endswith(CONTEXT_CLOSE)


def split_context(text: str) -> tuple[str, str | None]:
    """(the owner's part, the context block) of a string that may end with the block
    (the OpenAI string form: owner + "\\n\\n" + block); (text, None) when it does not."""
    if is_context(text):
        return "", text
    if not text.endswith(CONTEXT_CLOSE):
        return text, None
    at = text.rfind(JOIN + CONTEXT_OPEN)
    if at == -1:
        return text, None
    return text[:at], text[at + len(JOIN) :]


def parts_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A wire message's content as a list of parts (a string is one text part)."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [part for part in content or [] if isinstance(part, dict)]


def _context_and_owner(message: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    parts = parts_of(message)
    if message.get("role") != "user" or not parts or parts[-1].get("type") != "text":
        return parts, None
    owner, block = split_context(str(parts[-1].get("text", "")))
    if block is None:
        return parts, None
    rest = parts[:-1] + ([{"type": "text", "text": owner}] if owner else [])
    return rest, block


def owner_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The message's content parts without Kernel's context block."""
    return _context_and_owner(message)[0]


def owner_texts(message: dict[str, Any]) -> list[str]:
    """The text of the message's own parts (the context block left out), in order."""
    return [str(p.get("text", "")) for p in owner_parts(message) if p.get("type") == "text"]


def owner_words(request: RecordedRequest | dict[str, Any]) -> str:
    """The owner's last text part of the request's last message; asserts that message is
    the turn's own one (it carries the context block, after the owner's parts)."""
    messages = _body(request)["messages"]
    assert context_index(request) == len(messages) - 1, "the last message has no context"
    texts = owner_texts(messages[-1])
    assert texts, "the turn's message has no text of the owner's"
    return texts[-1]


def context_index(request: RecordedRequest | dict[str, Any]) -> int | None:
    """The index in ``messages`` of the message carrying the context block (None: none).
    Asserts that at most one message carries one."""
    found = [
        index
        for index, message in enumerate(_body(request).get("messages", []))
        if _context_and_owner(message)[1] is not None
    ]
    assert len(found) <= 1, f"the context block is in messages {found}"
    return found[0] if found else None


def context_block(request: RecordedRequest | dict[str, Any]) -> str:
    """The whole context block as sent ("" when the request carried none)."""
    index = context_index(request)
    if index is None:
        return ""
    block = _context_and_owner(_body(request)["messages"][index])[1]
    return block or ""


def context_of(request: RecordedRequest | dict[str, Any]) -> str:
    """The inner text of the request's context block ("" when it carried none)."""
    block = context_block(request)
    return block[len(CONTEXT_OPEN) : -len(CONTEXT_CLOSE)] if block else ""


def turn_message(request: RecordedRequest | dict[str, Any]) -> dict[str, Any]:
    """The turn's own user message: the one carrying the context block."""
    index = context_index(request)
    assert index is not None, "the request carried no context block"
    message: dict[str, Any] = _body(request)["messages"][index]
    return message


def system_of(request: RecordedRequest | dict[str, Any]) -> str:
    """The system prompt of an Anthropic or OpenAI request ("" when none was sent)."""
    body = _body(request)
    if "system" in body:
        system = body["system"]
        if isinstance(system, list):
            return JOIN.join(str(b.get("text", "")) for b in system if isinstance(b, dict))
        return str(system)
    messages = body.get("messages", [])
    if messages and messages[0].get("role") == "system":
        texts = [str(p.get("text", "")) for p in parts_of(messages[0]) if p.get("type") == "text"]
        return JOIN.join(texts)
    return ""


def recalled_of(request: RecordedRequest | dict[str, Any]) -> str:
    """The recalled-memories layer of the request's context, without its header ("" when
    none was recalled). Asserts the system prompt carries no memories."""
    system = system_of(request)
    assert not any(h in system for h in MEMORY_HEADERS), "memories in the (cached) system prompt"
    context = context_of(request)
    header = next((h for h in MEMORY_HEADERS if h in context), None)  # the Kernel's language
    if header is None:
        return ""
    return context.split(header, 1)[1].split(JOIN, 1)[0].strip()
