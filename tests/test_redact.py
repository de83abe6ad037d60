"""The masking rules (seed 004 "安全"): tokens first 4 + last 4 (whole when ≤ 8),
credential headers always [REDACTED], in every shape a library prints them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel.core.redact import Redactor, hide_quoted, mask_secret, redact_text

KEY = "sk-test-SECRET-0123456789abcdef"
BOT = "7123456789:AAHk3rnelTestTokenSecretPart_0123456"


@pytest.mark.parametrize(
    ("secret", "masked"),
    [
        ("", ""),
        ("abc", "***"),
        ("12345678", "********"),  # 8 characters: masked whole
        ("123456789", "*********"),  # 4 + 4 would show 8 of its 9: masked whole
        ("123456789012345", "***************"),
        ("1234567890123456", "1234…3456"),  # long enough that the edges say little
        (KEY, "sk-t…cdef"),
    ],
)
def test_mask_secret(secret: str, masked: str) -> None:
    assert mask_secret(secret) == masked


def test_known_secrets_are_masked_wherever_they_appear() -> None:
    r = Redactor([KEY, BOT])
    assert r(f"bad key {KEY}, retry") == "bad key sk-t…cdef, retry"
    assert r(f"{KEY}{KEY}") == "sk-t…cdefsk-t…cdef"
    # A server that echoes the key partly starred still shows no long tail of it.
    assert "456789abcdef" not in r("key ****************456789abcdef rejected")
    assert r(f"token={BOT[:10]}") == f"token={BOT[:10]}"  # the bot id alone is public


def test_pasted_key_with_a_newline_is_masked_in_its_escaped_forms() -> None:
    r = Redactor([KEY + "\n"])
    for text in (f"Illegal header value b'Bearer {KEY}\\n'", f"key {KEY} end", KEY + "\n"):
        assert "0123456789" not in r(text), text


def test_words_of_a_header_value_are_secrets_too() -> None:
    r = Redactor(["Bearer mcp-token-0f0e0d0c0b0a"])
    assert r("server said mcp-token-0f0e0d0c0b0a is invalid") == (
        "server said mcp-…0b0a is invalid"
    )
    assert r("a Bearer of good news") == "a Bearer of good news"  # the scheme word is not


def test_short_secrets_only_as_whole_words() -> None:
    r = Redactor(["k3y9x"])
    assert r("key k3y9x used") == "key ***** used"
    assert r("xk3y9x and k3y9x1") == "xk3y9x and k3y9x1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abcdefghijkl", "Authorization: [REDACTED]"),
        ("authorization=Basic dXNlcjpwYXNz", "authorization=[REDACTED]"),
        ("Cookie: a=1; session=xyz", "Cookie: [REDACTED]"),
        ("set-cookie: id=1", "set-cookie: [REDACTED]"),
        ("X-API-Key: k", "X-API-Key: [REDACTED]"),
        (
            "headers={'Authorization': 'Bearer zzz', 'Accept': 'json'}",
            "headers={'Authorization': '[REDACTED]', 'Accept': 'json'}",
        ),
        ('{"x-api-key": "sekrit", "n": 1}', '{"x-api-key": "[REDACTED]", "n": 1}'),
        ("[(b'cookie', b'a=1'), (b'host', b'x')]", "[(b'cookie', b'[REDACTED]'), (b'host', b'x')]"),
        ("sent Bearer abcdefgh12345 upstream", "sent Bearer [REDACTED] upstream"),
        ("GET /v1/models?key=AIzaSyA-secret&alt=json", "GET /v1/models?key=[REDACTED]&alt=json"),
        (
            "no secrets here: provider=main model=m tools=5",
            "no secrets here: provider=main model=m tools=5",
        ),
        ("bearer token missing", "bearer token missing"),
    ],
)
def test_credential_shapes_are_redacted_whole(text: str, expected: str) -> None:
    assert Redactor()(text) == expected


def test_configured_header_names_are_redacted_whole() -> None:
    r = Redactor([], ["X-Notes-Key"])
    assert r("x-notes-key: anything at all") == "x-notes-key: [REDACTED]"
    assert Redactor()("x-notes-key: anything") == "x-notes-key: anything"


def test_telegram_tokens_are_masked_even_when_unknown() -> None:
    r = Redactor()
    url = f"POST https://api.telegram.org/bot{BOT}/getUpdates"
    assert r(url) == "POST https://api.telegram.org/bot7123…3456/getUpdates"
    assert r("GET /file/bot123:short-test-token/photos/1.jpg") == (
        "GET /file/bot123:…oken/photos/1.jpg"
    )
    assert BOT not in r(f"token {BOT} revoked")


def test_redaction_is_idempotent() -> None:
    r = Redactor([KEY, BOT], ["X-Notes-Key"])
    text = f"Authorization: Bearer {KEY} /bot{BOT}/x X-Notes-Key: v {KEY}"
    once = r(text)
    assert r(once) == once
    assert KEY not in once and BOT not in once


def test_redact_text_shares_the_rules() -> None:
    assert redact_text(f"Cookie: a=1 {KEY}", [KEY]) == "Cookie: [REDACTED]"
    assert redact_text(f"x {KEY}", []) == f"x {KEY}"


def test_hide_quoted_keeps_the_shape_and_drops_the_values() -> None:
    text = (
        "fts5: syntax error near \"昭和\"; No such file or directory: '/data/downloads/a b.txt'"
        "; can't parse b'raw' won't"
    )
    assert hide_quoted(text) == (
        "fts5: syntax error near \"…\"; No such file or directory: '…'; can't parse b'…' won't"
    )
    assert hide_quoted("'He said \"hi\"'") == "'…'"


def test_header_values_are_never_shown_even_in_part() -> None:
    value = "mcp-HEADERkey-1a2b3c4d5e6f7a8b"
    redactor = Redactor([value], opaque=[value])
    shown = redactor(f"server echoed {value} and {value}\n in its error")
    assert shown == "server echoed [REDACTED] and [REDACTED]\n in its error"
    # Without being opaque, a secret keeps its first and last four (seed 004's rule).
    assert Redactor([value])(value) == f"{value[:4]}…{value[-4:]}"
    # Added secrets keep the opaque ones opaque.
    assert redactor.with_secrets(["sk-another-0123456789"])(value) == "[REDACTED]"


def test_every_configured_header_table_feeds_the_redactor(tmp_path: Path) -> None:
    from kernel.config import load_config
    from kernel.config.secrets import header_names_of, header_values_of

    path = tmp_path / "config.toml"
    path.write_text(
        '[general]\ndefault_provider = "p"\n'
        '[providers.p]\ntype = "openai_compat"\napi_key = "k"\ndefault_model = "m"\n'
        'headers = { User-Agent = "Kernel", X-Relay = "relay-value-123456" }\n'
        '[stt]\napi_key = "s"\nheaders = { X-Stt = "stt-value-123456" }\n'
        '[tts]\ntype = "openai"\napi_key = "t"\nheaders = { X-Tts = "tts-value-123456" }\n',
        encoding="utf-8",
    )
    config = load_config(path, env={}, require_telegram=False)
    assert {"X-Relay", "X-Stt", "X-Tts"} <= set(header_names_of(config))
    assert "User-Agent" not in header_names_of(config)
    values = set(header_values_of(config))
    assert {"relay-value-123456", "stt-value-123456", "tts-value-123456"} <= values
    assert "Kernel" not in values
