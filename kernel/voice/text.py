"""What of a Markdown reply is worth speaking: prose, not code, links or table rules,
and only its beginning (``[tts] max_chars``): a voice note of a long answer is useless,
and the full reply is always there as text."""

from __future__ import annotations

import re

_FENCE = re.compile(r"^ {0,3}(```|~~~).*?(^ {0,3}\1[^\n]*$|\Z)", re.DOTALL | re.MULTILINE)
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_URL = re.compile(r"<?https?://[^\s>)]*[^\s>).,;:!?，。]>?")
# Linear: a tag's body stops at the next "<", and blank space never spans lines (the
# model writes the text: "<a<a<a…" or a run of newlines must not backtrack).
_TAG = re.compile(r"</?[A-Za-z][^<>\n]*+>")
_TABLE_RULE = re.compile(
    r"^[ \t]*+\|?[ \t]*+:?-{2,}+:?[ \t]*+(?:\|[ \t]*+:?-{2,}+:?[ \t]*+)*+\|?[ \t]*+$", re.MULTILINE
)
_LINE_MARK = re.compile(r"^\s{0,3}(#{1,6}\s+|>\s?|[-*+]\s+(\[[ xX]\]\s+)?)", re.MULTILINE)
_EMPHASIS = re.compile(r"(\*\*|__|~~|`)")
_STAR = re.compile(r"\*(?=\S)([^*\n]*?\S)\*")  # *emphasis*, not the * of 2*3
_SENTENCE_END = re.compile(r"[。！？!?…\n]|[.;；](?=\s)")


def speakable(markdown: str, limit: int) -> str:
    """Plain text to speak, at most ``limit`` characters (cut at a sentence end when one
    falls in the second half of the limit, marked with …); empty if nothing is left."""
    text = _FENCE.sub(" ", markdown)
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub(" ", text)
    text = _TAG.sub("", text)
    text = _TABLE_RULE.sub("", text)
    text = _LINE_MARK.sub("", text)
    text = _STAR.sub(r"\1", _EMPHASIS.sub("", text)).replace("|", " ")
    lines = [" ".join(line.split()) for line in text.splitlines()]
    text = "\n".join(line for line in lines if line)
    if len(text) <= limit:
        return text
    head = text[:limit]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    cut = ends[-1] if ends and ends[-1] >= limit // 2 else limit
    return head[:cut].rstrip() + "…"
