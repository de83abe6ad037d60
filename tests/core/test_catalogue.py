"""The message catalogue itself: both languages have the same keys with the same
placeholders, and every text is a valid format string (a literal brace written single,
as in "${VAR}", made a refusal crash into a 500 once)."""

from __future__ import annotations

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
