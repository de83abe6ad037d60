"""Markdown → Telegram HTML, restricted to the tags Telegram's HTML parse mode accepts.

mistune parses the Markdown into an AST; ``TelegramHTMLRenderer`` maps each node onto
b, i, s, code, pre, a and blockquote, and turns everything else (lists, tables, images,
rules, raw HTML) into plain text. Every text node and attribute value is escaped, so the
output is valid Telegram HTML for any input.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mistune import Markdown
    from mistune.core import BlockState

Token = dict[str, Any]


@functools.cache
def _parser() -> Markdown:
    """mistune's parser, made on the first reply (issue 37: 0.5 MiB not held at rest)."""
    import mistune

    return mistune.create_markdown(
        renderer=None, plugins=["strikethrough", "table", "task_lists", "url"]
    )


_WRAP = {"emphasis": "i", "strong": "b", "strikethrough": "s"}
# Nodes whose rendering needs the whole token, not just rendered children.
_WHOLE_TOKEN = frozenset({"heading", "list", "table", "block_quote", "link", "image"})
_SAFE_URL = re.compile(r"https?://[^\s/?#]+\S*|mailto:\S+|tg://\S+", re.IGNORECASE)
_LANG_JUNK = re.compile(r"[^A-Za-z0-9_+-]")
_CHAR_REF = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
# NUL and the other C0/C1 controls Telegram would mangle or reject; \t and \n stay.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
# Only from the start of a run (no rescan of a long run of spaces from each position).
_TRAILING_SPACE = re.compile(r"(?<![^\S\n])[^\S\n]++(?=\n)")
_TAG = re.compile(r"<[^<>]*+>")  # a tag ends before the next "<": "<<<…" stays linear
_ENTITY = re.compile(r"&(?:lt|gt|amp|quot|#[0-9]+|#[xX][0-9a-fA-F]+);")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


def render_markdown(md: str) -> str:
    """Render Markdown as Telegram HTML (b, i, s, code, pre, a, blockquote only)."""
    md = _CONTROL.sub("\ufffd", re.sub(r"\r\n?", "\n", md))
    tokens, state = _parser().parse(md)
    assert isinstance(tokens, list)  # no renderer: the parser returns the AST
    out = TelegramHTMLRenderer()(tokens, state)
    return _TRAILING_SPACE.sub("", out).strip()


def html_to_plain(text: str) -> str:
    """The text Telegram displays for Telegram HTML: tags dropped, entities decoded."""
    return _decode_entities(_TAG.sub("", text))


def _decode_entities(text: str) -> str:
    return _ENTITY.sub(lambda match: decode_entity(match.group()[1:-1]), text)


def decode_entity(body: str) -> str:
    """The character an HTML entity stands for, given what lies between ``&`` and ``;``."""
    if body in _NAMED:
        return _NAMED[body]
    code = int(body[2:], 16) if body[1] in "xX" else int(body[1:])
    return chr(code) if 0 < code < 0x110000 and not 0xD800 <= code < 0xE000 else "\ufffd"


def decode_char_refs(text: str) -> str:
    """Markdown character references (``&amp;``, ``&#60;``) stand for the character."""
    return _CHAR_REF.sub(lambda m: _CONTROL.sub("\ufffd", html.unescape(m.group())), text)


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_attr(text: str) -> str:
    return escape(text).replace('"', "&quot;")


def safe_url(url: str) -> str | None:
    """The URL if Telegram may link to it (http, https, mailto, tg), else None."""
    url = url.strip()
    return url if _SAFE_URL.fullmatch(url) else None


def display_width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


class TelegramHTMLRenderer:
    """Renders a mistune AST as Telegram HTML; one instance per document. (A renderer
    of its own, not a mistune ``BaseRenderer``: no plugin registers methods on it, and
    mistune is then imported only with the parser.)"""

    def __init__(self) -> None:
        # Tags open around the node being rendered: Telegram rejects a link inside a
        # link, and a repeated tag inside itself adds nothing.
        self._open: list[str] = []
        self._quote_depth = 0

    def __call__(self, tokens: Iterable[Token], state: BlockState) -> str:
        return self._blocks(tokens, state, "\n\n")

    def render_token(self, token: Token, state: BlockState) -> str:
        kind = token["type"]
        if kind in _WRAP:
            return self._wrap(_WRAP[kind], token, state)
        if kind in _WHOLE_TOKEN:
            return str(self._get_method(kind)(token, state))
        try:
            func = self._get_method(kind)
        except AttributeError:
            return self._fallback(token, state)
        # The HTMLRenderer convention: raw text or rendered children, then attrs.
        attrs = token.get("attrs") or {}
        if "raw" in token:
            return str(func(token["raw"], **attrs))
        if "children" in token:
            return str(func(self.render_tokens(token["children"], state), **attrs))
        return str(func(**attrs))

    def _get_method(self, name: str) -> Callable[..., str]:
        method: Callable[..., str] = getattr(self, name)  # AttributeError: none
        return method

    def render_tokens(self, tokens: Iterable[Token], state: BlockState) -> str:
        return "".join(self.render_token(token, state) for token in tokens)

    def _fallback(self, token: Token, state: BlockState) -> str:
        """An element Telegram has no tag for shows as its text."""
        if "children" in token:
            return self.render_tokens(token["children"], state)
        return escape(str(token.get("raw", "")))

    def _blocks(self, tokens: Iterable[Token], state: BlockState, sep: str) -> str:
        parts = (self.render_token(tok, state) for tok in tokens if tok["type"] != "blank_line")
        return sep.join(part for part in parts if part.strip())

    def _wrap(self, tag: str, token: Token, state: BlockState) -> str:
        if tag in self._open:
            return self.render_tokens(token["children"], state)
        self._open.append(tag)
        try:
            inner = self.render_tokens(token["children"], state)
        finally:
            self._open.pop()
        return f"<{tag}>{inner}</{tag}>" if inner else ""

    # Inline nodes.

    def text(self, text: str) -> str:
        return escape(decode_char_refs(text))

    def codespan(self, text: str) -> str:
        return f"<code>{escape(text)}</code>" if text else ""

    def linebreak(self) -> str:
        return "\n"

    def softbreak(self) -> str:
        return "\n"

    def inline_html(self, text: str) -> str:
        return escape(text)

    def link(self, token: Token, state: BlockState) -> str:
        url = safe_url(token["attrs"]["url"])
        if url is None or "a" in self._open:
            return self.render_tokens(token["children"], state)
        self._open.append("a")
        try:
            label = self.render_tokens(token["children"], state)
        finally:
            self._open.pop()
        if not html_to_plain(label).strip():
            label = escape(url)
        return f'<a href="{escape_attr(url)}">{label}</a>'

    def image(self, token: Token, state: BlockState) -> str:
        alt = escape(plain_text(token["children"]).strip() or "image")
        url = safe_url(token["attrs"]["url"])
        if url is None or "a" in self._open:
            return alt
        return f'<a href="{escape_attr(url)}">{alt}</a>'

    # Block nodes.

    def paragraph(self, text: str) -> str:
        return text

    def block_text(self, text: str) -> str:
        return text

    def heading(self, token: Token, state: BlockState) -> str:
        return self._wrap("b", token, state)

    def thematic_break(self) -> str:
        return "———"

    def block_html(self, text: str) -> str:
        return escape(text.strip())

    def block_code(self, code: str, info: str | None = None, **attrs: Any) -> str:
        code = escape(code.rstrip("\n"))
        words = (info or "").split()
        lang = _LANG_JUNK.sub("", words[0]) if words else ""
        if lang:
            return f'<pre><code class="language-{lang}">{code}</code></pre>'
        return f"<pre>{code}</pre>"

    def block_quote(self, token: Token, state: BlockState) -> str:
        # Telegram has no nested quotes: an inner quote just continues the outer one.
        self._quote_depth += 1
        try:
            inner = self._blocks(token["children"], state, "\n\n")
        finally:
            self._quote_depth -= 1
        if self._quote_depth or not inner:
            return inner
        return f"<blockquote>{inner}</blockquote>"

    def list(self, token: Token, state: BlockState) -> str:
        attrs = token["attrs"]
        indent = "  " * attrs.get("depth", 0)
        number = attrs.get("start", 1)
        lines = []
        for item in token["children"]:
            if attrs.get("ordered"):
                marker = f"{number}. "
                number += 1
            else:
                marker = "" if item["type"] == "task_list_item" else "• "
            if item["type"] == "task_list_item":
                marker += "☑ " if item["attrs"]["checked"] else "☐ "
            body = self._blocks(item["children"], state, "\n")
            # An item that opens with a nested list shows just that list, indented.
            starts_with_list = bool(item["children"]) and item["children"][0]["type"] == "list"
            lines.append(body if starts_with_list else indent + marker + body)
        return "\n".join(lines)

    def table(self, token: Token, state: BlockState) -> str:
        rows: list[list[str]] = []
        aligns: list[str | None] = []
        for part in token["children"]:
            part_rows = [part] if part["type"] == "table_head" else part["children"]
            for row in part_rows:
                rows.append([plain_text(cell["children"]).strip() for cell in row["children"]])
                aligns = [cell["attrs"].get("align") for cell in row["children"]]
        return "<pre>" + escape(format_table(rows, aligns)) + "</pre>"


def format_table(rows: list[list[str]], aligns: list[str | None]) -> str:
    """A monospace table: columns padded to the widest cell, a rule under the header."""
    cols = max(len(row) for row in rows)
    rows = [row + [""] * (cols - len(row)) for row in rows]
    aligns = aligns + [None] * (cols - len(aligns))
    widths = [max(display_width(row[c]) for row in rows) for c in range(cols)]
    lines = [
        " | ".join(_pad(cell, w, a) for cell, w, a in zip(row, widths, aligns, strict=True))
        for row in rows
    ]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def _pad(cell: str, width: int, align: str | None) -> str:
    gap = width - display_width(cell)
    if align == "right":
        return " " * gap + cell
    if align == "center":
        return " " * (gap // 2) + cell + " " * (gap - gap // 2)
    return cell + " " * gap


def plain_text(tokens: Iterable[Token]) -> str:
    """The visible text of inline tokens, without any markup."""
    parts: list[str] = []
    for tok in tokens:
        if tok["type"] in ("linebreak", "softbreak"):
            parts.append(" ")
        elif tok["type"] == "text":
            parts.append(decode_char_refs(tok["raw"]))
        elif "raw" in tok:
            parts.append(tok["raw"])
        elif "children" in tok:
            parts.append(plain_text(tok["children"]))
    return "".join(parts)
