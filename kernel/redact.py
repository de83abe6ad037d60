"""Masking of secrets in anything that may reach a log or a user (seed 004 "安全")."""

from __future__ import annotations

from collections.abc import Iterable


def mask_secret(secret: str) -> str:
    """First 4 + last 4 characters; anything of 8 or fewer is masked whole."""
    if len(secret) <= 8:
        return "*" * len(secret)
    return f"{secret[:4]}…{secret[-4:]}"


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """Replace every occurrence of each secret (and its longer tails) in ``text``.

    Values under 8 characters are not searched for: they are not real keys, and masking
    every "1" or "Kernel" in a log line would destroy it."""
    for secret in sorted((s for s in secrets if len(s) >= 8), key=len, reverse=True):
        text = text.replace(secret, mask_secret(secret))
        if len(secret) > 12:
            # Servers often echo a key partly masked: hide any long visible tail too.
            tail = secret[-12:]
            text = text.replace(tail, "…" + tail[-4:])
    return text
