"""Telegram's entity parsing, as the Bot API applies it to `parse_mode` text.

    visible, entities = parse_html("<b>bold <i>both</i></b> &amp; plain")

`parse_html` follows Telegram's HTML rules (tdlib's parser) and adds a few strict checks
the Bot API documents but the server does not always enforce, so output that passes
here renders as intended on Telegram:

* allowed tags: b strong i em u ins s strike del a(href) code pre blockquote(expandable)
  span(class="tg-spoiler") tg-spoiler tg-emoji(emoji-id); `<pre><code class="language-x">`;
* any other tag, an unclosed or stray end tag, misnested tags, a bare `<` or a bare `&`
  are errors, as are (strict) `<code class="language-x">` outside `pre`, tags inside
  `code`/`pre` (except `code` directly in `pre`) and `a` inside `a`;
* entities `&lt; &gt; &amp; &quot;` and `&#NN;`/`&#xHH;` are decoded in text and attribute
  values (a named entity's `;` may be omitted, as Telegram allows).

Errors read like Telegram's: "Bad Request: can't parse entities: Unsupported start tag
"h1" at byte offset 0". Offsets and lengths of entities are in UTF-16 code units.

`parse_markdown_v2` and `parse_markdown` cover the two Markdown parse modes the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MAX_MESSAGE_LENGTH = 4096
MAX_CAPTION_LENGTH = 1024

Entity = dict[str, Any]

ALLOWED_TAGS = frozenset(
    {
        "a",
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "code",
        "pre",
        "blockquote",
        "span",
        "tg-spoiler",
        "tg-emoji",
    }
)
SIMPLE_TYPES = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "span": "spoiler",
    "tg-spoiler": "spoiler",
}
NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
URL_SCHEMES = ("http", "https", "tg", "ton", "ftp")
SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]*):(?!\d)")


class EntityParseError(ValueError):
    """Text Telegram refuses to send; `str()` is the Bot API's error description."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"Bad Request: can't parse entities: {detail}")
        self.detail = detail


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's offsets and limits."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def parse_entities(text: str, parse_mode: str | None) -> tuple[str, list[Entity]]:
    """Dispatch on a Bot API `parse_mode` (case-insensitive); None or "" = plain text."""
    mode = (parse_mode or "").lower()
    if not mode:
        return text, []
    if mode == "html":
        return parse_html(text)
    if mode == "markdownv2":
        return parse_markdown_v2(text)
    if mode == "markdown":
        return parse_markdown(text)
    raise ValueError(f"unsupported parse_mode {parse_mode!r}")


def sort_entities(entities: list[Entity]) -> list[Entity]:
    """Telegram's order: by offset, outer (longer) entities first."""
    return sorted(entities, key=lambda entity: (entity["offset"], -entity["length"]))


# --------------------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------------------


@dataclass
class _OpenTag:
    name: str
    argument: str
    offset: int  # UTF-16 offset in the visible text
    text_index: int  # index into the visible-text pieces, for `<a>` without href
    byte_offset: int
    entity_count: int  # len(entities) when the tag opened


def parse_html(text: str) -> tuple[str, list[Entity]]:
    """(visible text, entities) of `text` sent with `parse_mode=HTML`."""
    return _HtmlParser(text).parse()


def _is_space(char: str) -> bool:
    return char in " \t\n\r\f\v"


class _HtmlParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.pieces: list[str] = []
        self.utf16 = 0
        self.stack: list[_OpenTag] = []
        self.entities: list[Entity] = []

    def parse(self) -> tuple[str, list[Entity]]:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char == "&":
                decoded, self.pos = decode_entity(text, self.pos)
                self.emit(decoded)
            elif char != "<":
                end = len(text)
                for special in "<&":
                    found = text.find(special, self.pos)
                    if found != -1:
                        end = min(end, found)
                self.emit(text[self.pos : end])
                self.pos = end
            elif text.startswith("</", self.pos):
                self.end_tag()
            else:
                self.start_tag()
        if self.stack:
            raise EntityParseError(
                f'Can\'t find end tag corresponding to start tag "{self.stack[-1].name}"'
            )
        return "".join(self.pieces), sort_entities(self.entities)

    def emit(self, visible: str) -> None:
        self.pieces.append(visible)
        self.utf16 += utf16_len(visible)

    def byte_offset(self, index: int) -> int:
        return len(self.text[:index].encode("utf-8"))

    def error(self, message: str, index: int) -> EntityParseError:
        return EntityParseError(f"{message} at byte offset {self.byte_offset(index)}")

    # ---- start tags -------------------------------------------------------------------

    def start_tag(self) -> None:
        text, begin = self.text, self.pos
        pos = begin + 1
        while pos < len(text) and not _is_space(text[pos]) and text[pos] != ">":
            pos += 1
        if pos >= len(text):
            raise self.error("Unclosed start tag", begin)
        name = text[begin + 1 : pos].lower()
        if name not in ALLOWED_TAGS:
            raise self.error(f'Unsupported start tag "{name}"', begin)
        argument, language, pos = self.attributes(name, begin, pos)
        self.pos = pos
        self.check_nesting(name, language, begin)
        if name == "span" and argument != "spoiler":
            raise self.error('Tag "span" must have class "tg-spoiler"', begin)
        if name == "code" and language:
            argument = language
        self.stack.append(
            _OpenTag(name, argument, self.utf16, len(self.pieces), begin, len(self.entities))
        )

    def attributes(self, name: str, begin: int, pos: int) -> tuple[str, str, int]:
        """Parse attributes up to and including `>`: (argument, code language, new pos)."""
        text = self.text
        argument = language = ""
        while True:
            while pos < len(text) and _is_space(text[pos]):
                pos += 1
            if pos >= len(text):
                raise self.error(f'Unclosed start tag "{name}"', begin)
            if text[pos] == ">":
                return argument, language, pos + 1
            name_start = pos
            while pos < len(text) and not _is_space(text[pos]) and text[pos] not in "=>/":
                pos += 1
            attribute = text[name_start:pos]
            if not attribute:
                raise self.error(f'Empty attribute name in the tag "{name}"', begin)
            while pos < len(text) and _is_space(text[pos]):
                pos += 1
            if pos >= len(text) or text[pos] != "=":
                if name == "blockquote" and attribute == "expandable":
                    argument = "expandable"
                continue
            pos += 1
            while pos < len(text) and _is_space(text[pos]):
                pos += 1
            if pos >= len(text):
                raise self.error(f'Unclosed start tag "{name}"', begin)
            value, pos = self.attribute_value(begin, pos)
            if name == "a" and attribute == "href":
                argument = value
            elif name == "code" and attribute == "class" and value.startswith("language-"):
                language = value.removeprefix("language-")
            elif name == "span" and attribute == "class" and value.startswith("tg-"):
                argument = value.removeprefix("tg-")
            elif name == "tg-emoji" and attribute == "emoji-id":
                argument = value
            elif name == "blockquote" and attribute == "expandable":
                argument = "expandable"

    def attribute_value(self, begin: int, pos: int) -> tuple[str, int]:
        text = self.text
        quote = text[pos]
        if quote not in "\"'":
            # A name token: letters, digits, periods and hyphens, case-insensitive.
            start = pos
            while pos < len(text) and (text[pos].isalnum() or text[pos] in ".-"):
                pos += 1
            if pos >= len(text) or not (_is_space(text[pos]) or text[pos] == ">"):
                raise self.error("Unexpected end of name token", start)
            return text[start:pos].lower(), pos
        pos += 1
        parts: list[str] = []
        while pos < len(text) and text[pos] != quote:
            if text[pos] == "&":
                decoded, pos = decode_entity(text, pos)
                parts.append(decoded)
            else:
                parts.append(text[pos])
                pos += 1
        if pos >= len(text):
            raise self.error("Unclosed start tag", begin)
        return "".join(parts), pos + 1

    def check_nesting(self, name: str, language: str, begin: int) -> None:
        parent = self.stack[-1].name if self.stack else None
        for tag in self.stack:
            if tag.name == "code" or (
                tag.name == "pre" and not (name == "code" and parent == "pre")
            ):
                raise self.error(f'Tag "{name}" can\'t be nested in "{tag.name}"', begin)
            if tag.name == "a" and name == "a":
                raise self.error('Tag "a" can\'t be nested in "a"', begin)
        if name == "code" and language and parent != "pre":
            raise self.error('Tag "code" with a language class must be inside "pre"', begin)

    # ---- end tags ---------------------------------------------------------------------

    def end_tag(self) -> None:
        text, begin = self.text, self.pos
        if not self.stack:
            raise self.error("Unexpected end tag", begin)
        pos = begin + 2
        while pos < len(text) and not _is_space(text[pos]) and text[pos] != ">":
            pos += 1
        name = text[begin + 2 : pos].lower()
        while pos < len(text) and _is_space(text[pos]):
            pos += 1
        if pos >= len(text) or text[pos] != ">":
            raise self.error("Unclosed end tag", begin)
        expected = self.stack[-1].name
        if name and name != expected:
            raise EntityParseError(
                f"Unmatched end tag at byte offset {self.byte_offset(begin)}, "
                f'expected "</{expected}>", found "</{name}>"'
            )
        self.pos = pos + 1
        self.close(self.stack.pop())

    def close(self, tag: _OpenTag) -> None:
        length = self.utf16 - tag.offset
        if tag.name == "tg-emoji" and not (tag.argument.isdigit() and int(tag.argument) > 0):
            raise EntityParseError("Invalid custom emoji identifier specified")
        if length <= 0:
            return
        entity: Entity = {"offset": tag.offset, "length": length}
        if tag.name in SIMPLE_TYPES:
            entity["type"] = SIMPLE_TYPES[tag.name]
        elif tag.name == "a":
            url = tag.argument or "".join(self.pieces[tag.text_index :])
            if not is_valid_url(url):
                return
            entity |= {"type": "text_link", "url": url}
        elif tag.name == "code":
            entity["type"] = "code"
            if tag.argument:
                entity["language"] = tag.argument  # kept only if it spans the whole `pre`
        elif tag.name == "pre":
            inner = self.entities[tag.entity_count :]
            del self.entities[tag.entity_count :]  # Telegram drops entities inside `pre`
            entity["type"] = "pre"
            full = [e for e in inner if e["offset"] == tag.offset and e["length"] == length]
            if full and full[0].get("language"):
                entity["language"] = full[0]["language"]
        elif tag.name == "blockquote":
            entity["type"] = "expandable_blockquote" if tag.argument else "blockquote"
        elif tag.name == "tg-emoji":
            entity |= {"type": "custom_emoji", "custom_emoji_id": tag.argument}
        self.entities.append(_ordered(entity))


def _ordered(entity: Entity) -> Entity:
    """`type` first, like the Bot API's JSON."""
    return {"type": entity["type"], **{k: v for k, v in entity.items() if k != "type"}}


def decode_entity(text: str, pos: int) -> tuple[str, int]:
    """Decode the character reference at `text[pos] == "&"`: (character, position after)."""
    end = pos + 1
    if text.startswith("#", end):
        end += 1
        hexadecimal = text.startswith(("x", "X"), end)
        if hexadecimal:
            end += 1
        digits_start = end
        allowed = "0123456789abcdefABCDEF" if hexadecimal else "0123456789"
        while end < len(text) and text[end] in allowed:
            end += 1
        digits = text[digits_start:end]
        code = int(digits, 16 if hexadecimal else 10) if digits and len(digits) < 8 else 0
        if not text.startswith(";", end) or not _is_scalar(code):
            raise _bad_ampersand(text, pos, end)
        return chr(code), end + 1
    while end < len(text) and text[end].isascii() and text[end].isalpha():
        end += 1
    name = text[pos + 1 : end]
    if name not in NAMED_ENTITIES:
        raise _bad_ampersand(text, pos, end)
    if text.startswith(";", end):
        end += 1
    return NAMED_ENTITIES[name], end


def _is_scalar(code: int) -> bool:
    return 0 < code < 0x110000 and not 0xD800 <= code <= 0xDFFF


def _bad_ampersand(text: str, pos: int, end: int) -> EntityParseError:
    offset = len(text[:pos].encode("utf-8"))
    if end == pos + 1:
        return EntityParseError(f'Character "&" must be escaped as "&amp;" at byte offset {offset}')
    reference = text[pos : end + 1] if text.startswith(";", end) else text[pos:end]
    return EntityParseError(f'Unsupported HTML entity "{reference}" at byte offset {offset}')


def is_valid_url(url: str) -> bool:
    """What Telegram keeps as a link: http(s)/tg/ton/ftp URLs, or a host without scheme."""
    url = url.strip()
    if not url or any(_is_space(char) for char in url):
        return False
    scheme = SCHEME.match(url)
    if scheme is None:
        url = f"http://{url}"
    elif scheme.group(1).lower() not in URL_SCHEMES:
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme.lower() in ("tg", "ton") or bool(parts.hostname)


# --------------------------------------------------------------------------------------
# MarkdownV2 and legacy Markdown
# --------------------------------------------------------------------------------------

MARKDOWN_V2_RESERVED = "_*[]()~`>#+-=|{}.!"
TYPE_NAMES = {
    "bold": "Bold",
    "italic": "Italic",
    "underline": "Underline",
    "strikethrough": "Strikethrough",
    "spoiler": "Spoiler",
    "code": "Code",
    "pre": "Pre",
    "text_link": "TextUrl",
    "custom_emoji": "CustomEmoji",
}


@dataclass
class _OpenMarkdown:
    type: str
    argument: str
    offset: int
    byte_offset: int
    text_index: int


class _Visible:
    """The visible text being built, with its UTF-16 length."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.utf16 = 0

    def emit(self, text: str) -> None:
        self.pieces.append(text)
        self.utf16 += utf16_len(text)

    def since(self, index: int) -> str:
        return "".join(self.pieces[index:])

    def text(self) -> str:
        return "".join(self.pieces)


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-8"))


def _skip_pre_newline(text: str, pos: int) -> int:
    """Telegram drops one line break right after an opening ``` (and its language)."""
    if text.startswith(("\r\n", "\n\r"), pos):
        return pos + 2
    if text.startswith(("\n", "\r"), pos):
        return pos + 1
    return pos


def _pre_language(text: str, pos: int) -> tuple[str, int]:
    end = pos
    while end < len(text) and not _is_space(text[end]) and text[end] != "`":
        end += 1
    if end != pos and end < len(text) and text[end] != "`":
        return text[pos:end], end
    return "", pos


def _closes(top: _OpenMarkdown, text: str, pos: int) -> bool:
    char = text[pos]
    return {
        "bold": char == "*",
        "italic": char == "_" and not text.startswith("_", pos + 1),
        "underline": text.startswith("__", pos),
        "strikethrough": char == "~",
        "spoiler": text.startswith("||", pos),
        "code": char == "`",
        "pre": text.startswith("```", pos),
        "text_link": char == "]",
        "custom_emoji": char == "]",
    }[top.type]


def _link_target(text: str, pos: int) -> tuple[str | None, int]:
    """At `pos` just after `]`: the `(url)` if any (backslash escapes honoured)."""
    if not text.startswith("(", pos):
        return None, pos
    begin = pos = pos + 1
    url: list[str] = []
    while pos < len(text) and text[pos] != ")":
        if text[pos] == "\\" and pos + 1 < len(text) and 0 < ord(text[pos + 1]) <= 126:
            url.append(text[pos + 1])
            pos += 2
            continue
        url.append(text[pos])
        pos += 1
    if pos >= len(text):
        raise EntityParseError(
            f"Can't find end of a URL at byte offset {_byte_offset(text, begin)}"
        )
    return "".join(url), pos + 1


def parse_markdown_v2(text: str) -> tuple[str, list[Entity]]:
    """(visible text, entities) of `text` sent with `parse_mode=MarkdownV2`."""
    visible = _Visible()
    entities: list[Entity] = []
    stack: list[_OpenMarkdown] = []
    quote_start: int | None = None
    pos = 0
    while pos < len(text):
        char = text[pos]
        following = text[pos + 1] if pos + 1 < len(text) else ""
        if char == "\\" and following and 0 < ord(following) <= 126:
            visible.emit(following)
            pos += 2
            continue
        in_code = bool(stack) and stack[-1].type in ("code", "pre")
        if char == ">" and not in_code and (pos == 0 or text[pos - 1] == "\n"):
            if quote_start is None:
                quote_start = visible.utf16
            pos += 1
            continue
        if char not in ("`" if in_code else MARKDOWN_V2_RESERVED):
            if char == "\n" and quote_start is not None and following != ">":
                entities.append(_quote(quote_start, visible.utf16))
                quote_start = None
            visible.emit(char)
            pos += 1
            continue
        if stack and _closes(stack[-1], text, pos):
            pos = _close_markdown_v2(text, pos, stack.pop(), visible, entities)
            continue
        begin, argument = pos, ""
        if char == "_" and following == "_":
            kind, pos = "underline", pos + 2
        elif char in "_*~":
            kind, pos = {"_": "italic", "*": "bold", "~": "strikethrough"}[char], pos + 1
        elif char == "|" and following == "|":
            kind, pos = "spoiler", pos + 2
        elif char == "[":
            kind, pos = "text_link", pos + 1
        elif char == "!" and following == "[":
            kind, pos = "custom_emoji", pos + 2
        elif char == "`" and text.startswith("```", pos):
            argument, pos = _pre_language(text, pos + 3)
            kind, pos = "pre", _skip_pre_newline(text, pos)
        elif char == "`":
            kind, pos = "code", pos + 1
        else:
            raise EntityParseError(
                f"Character '{char}' is reserved and must be escaped with the preceding '\\'"
            )
        stack.append(
            _OpenMarkdown(
                kind, argument, visible.utf16, _byte_offset(text, begin), len(visible.pieces)
            )
        )
    if stack:
        top = stack[-1]
        name = "PreCode" if top.type == "pre" and top.argument else TYPE_NAMES[top.type]
        raise EntityParseError(f"Can't find end of {name} entity at byte offset {top.byte_offset}")
    if quote_start is not None:
        entities.append(_quote(quote_start, visible.utf16))
    return visible.text(), sort_entities([e for e in entities if e["length"] > 0])


def _quote(start: int, end: int) -> Entity:
    return {"type": "blockquote", "offset": start, "length": end - start}


def _close_markdown_v2(
    text: str, pos: int, top: _OpenMarkdown, visible: _Visible, entities: list[Entity]
) -> int:
    """Close `top` at its end marker at `pos`; return the position after the marker."""
    entity: Entity = {
        "type": top.type,
        "offset": top.offset,
        "length": visible.utf16 - top.offset,
    }
    pos += {"underline": 2, "spoiler": 2, "pre": 3}.get(top.type, 1)
    if top.type == "pre" and top.argument:
        entity["language"] = top.argument
    elif top.type in ("text_link", "custom_emoji"):
        target, pos = _link_target(text, pos)
        if top.type == "custom_emoji":
            emoji_id = (target or "").removeprefix("tg://emoji?id=")
            if target is None or not emoji_id.isdigit():
                raise EntityParseError("Custom emoji entity must contain a tg://emoji URL")
            entity["custom_emoji_id"] = emoji_id
        else:
            url = visible.since(top.text_index) if target is None else target
            if not is_valid_url(url):
                return pos
            entity["url"] = url
    if entity["length"] > 0:
        entities.append(entity)
    return pos


def parse_markdown(text: str) -> tuple[str, list[Entity]]:
    """(visible text, entities) of `text` sent with the legacy `parse_mode=Markdown`."""
    visible = _Visible()
    entities: list[Entity] = []
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char == "\\" and pos + 1 < len(text) and text[pos + 1] in "_*`[":
            visible.emit(text[pos + 1])
            pos += 2
            continue
        if char not in "_*`[":
            visible.emit(char)
            pos += 1
            continue
        begin, end_char, language = pos, "]" if char == "[" else char, ""
        is_pre = text.startswith("```", pos)
        pos += 3 if is_pre else 1
        if is_pre:
            language, pos = _pre_language(text, pos)
            pos = _skip_pre_newline(text, pos)
        offset, first_piece = visible.utf16, len(visible.pieces)
        while pos < len(text) and (
            text[pos] != end_char or (is_pre and not text.startswith("```", pos))
        ):
            visible.emit(text[pos])
            pos += 1
        if pos >= len(text):
            raise EntityParseError(
                f"Can't find end of the entity starting at byte offset {_byte_offset(text, begin)}"
            )
        pos += 3 if is_pre else 1
        entity: Entity = {"type": "", "offset": offset, "length": visible.utf16 - offset}
        if char == "[":
            target, pos = _link_target(text, pos)
            url = visible.since(first_piece) if target is None else target
            if not is_valid_url(url):
                continue
            entity |= {"type": "text_link", "url": url}
        elif is_pre:
            entity["type"] = "pre"
            if language:
                entity["language"] = language
        else:
            entity["type"] = {"_": "italic", "*": "bold", "`": "code"}[char]
        if entity["length"] > 0:
            entities.append(entity)
    return visible.text(), sort_entities(entities)
