"""What SelfOps treats as sensitive: the keys a settings change sets and the lines a file
change adds, judged by the one rule of :mod:`kernel.config.secrets` (names) and
:func:`kernel.core.redact.secret_assignment` (free text); and the masking of what a
preview shows."""

from __future__ import annotations

from typing import Any

from kernel.config.providers import ProviderConfig
from kernel.config.secrets import is_sensitive, secret_fields
from kernel.core.redact import mask_secret, secret_assignment


def mask_lines(text: str) -> str:
    """What follows a sensitive-looking assignment masked, so a diff never shows a secret."""
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        found = secret_assignment(body)
        if found is not None and found[2] > found[1]:
            _, start, end = found
            body = body[:start] + mask_secret(body[start:end]) + body[end:]
        out.append(body + line[len(line.rstrip("\r\n")) :])
    return "".join(out)


def added_sensitive(before: str, after: str) -> list[str]:
    """Names of sensitive-looking assignments on lines the change adds."""
    old = set(before.splitlines())
    found: list[str] = []
    for line in after.splitlines():
        match = None if line in old else secret_assignment(line)
        if match:
            found.append(match[0])
    return found


def sensitive_keys(value: Any, path: str) -> list[str]:
    """Dotted names (``<provider>.<key>…``) of sensitive keys an operation sets: the
    provider keys the schema marks secret (``api_key``, every header: a header often
    carries a credential), and any name the secret-name rule accepts (``*_KEY`` …)."""
    found: list[str] = []
    parts = path.split(".") if path else []
    name = parts[-1] if parts else ""
    # An endpoint change decides where the provider's key is sent: as sensitive as the key.
    redirect = name in ("api_base", "base_url")
    marked = any(part in secret_fields(ProviderConfig) for part in parts[1:])
    if path and (is_sensitive(name) or redirect or marked):
        found.append(path)
    if isinstance(value, dict):
        for key, item in value.items():
            found += sensitive_keys(item, f"{path}.{key}" if path else str(key))
    return found


def masked(value: Any, under_headers: bool = False) -> Any:
    """A ``[providers]`` table as a preview shows it: secrets and header values masked."""
    if isinstance(value, dict):
        return {
            k: (
                mask_secret(v)
                if isinstance(v, str) and (under_headers or is_sensitive(str(k)))
                else masked(v, under_headers or k == "headers")
            )
            for k, v in value.items()
        }
    return value
