"""The message catalogue itself: both languages have the same keys with the same
placeholders, and every text is a valid format string (a literal brace written single,
as in "${VAR}", made a refusal crash into a 500 once)."""

from __future__ import annotations

import re
import string

import pytest

from kernel.core.i18n import CATALOG


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("language", sorted(CATALOG))
def test_every_text_is_a_valid_format_string(language: str) -> None:
    for key, text in CATALOG[language].items():
        try:
            names = fields(text)
        except ValueError as exc:  # a lone { or }
            pytest.fail(f"{language} {key}: {exc}")
        for name in names:
            assert name.isidentifier(), f"{language} {key}: placeholder {{{name}}}"
        assert "${" not in text.replace("${{", ""), f"{language} {key}: write $${{{{VAR}}}}"


def test_both_languages_have_the_same_keys_and_placeholders() -> None:
    zh, en = CATALOG["zh"], CATALOG["en"]
    assert sorted(set(zh) ^ set(en)) == []
    for key in zh:
        assert fields(zh[key]) == fields(en[key]), key


CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
WORD = re.compile(r"[A-Za-z]{4,}")
PLACEHOLDER = re.compile(r"\{[^{}]*\}")
# The same text in both languages on purpose: product names, file kinds, symbols around a
# placeholder, and words the model (not the owner) reads.
SAME_ON_PURPOSE = frozenset(
    {
        "audit.who.kernel",
        "turn.guest_tool",
        "tg.kind.word",
        "tg.kind.excel",
        "tg.kind.powerpoint",
        "tg.kind.opendocument",
        "tg.kind.epub",
    }
)


def test_every_text_is_written_in_both_languages() -> None:
    """A text added in one language only and copied into the other is caught: English
    carries no Chinese, and Chinese is not the English text copied (issue 34: every new
    word of the owner's chat exists in both)."""
    zh, en = CATALOG["zh"], CATALOG["en"]
    untranslated = [key for key, text in en.items() if CJK.search(text)]
    assert untranslated == [], "English texts with Chinese in them"
    copied = [
        key
        for key, text in zh.items()
        if text == en[key] and WORD.search(PLACEHOLDER.sub("", text)) and key not in SAME_ON_PURPOSE
    ]
    assert copied == [], "Chinese texts that are the English text copied"
