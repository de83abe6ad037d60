"""A model failure in the owner's words (issue 34): what happened and what to do.

:func:`failure_kind` sorts the failures the providers raise into a few kinds, and
:data:`KINDS` names each kind's catalogue text, once. The texts name the model by
:func:`display_name` ("Claude", not ``anthropic 529 overloaded_error``) and, where Kernel
retried, how often. The raw detail (``str(exc)``) is for the log's code fields and
``/status full``, never the owner's message. A failure Kernel words itself (every model's
circuit open, no model enabled, every key refused: no ``provider`` on it) is already in
the owner's words and stays as it is.
"""

from __future__ import annotations

from kernel.core.errors import (
    CapabilityError,
    InputRefusedError,
    ProviderAuthError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
    TransientProviderError,
)
from kernel.core.i18n import t

# kind → its catalogue text; each takes {name} (the model's display name), {provider}
# (the configured provider, for a config key), {retried} (", retried 3 times" or "")
# and {what} (Kernel's own words for a missing capability).
KINDS: dict[str, str] = {
    "overloaded": "failure.overloaded",  # Anthropic's 529 overloaded_error
    "rate_limited": "failure.rate_limited",  # 429
    "quota": "failure.quota",  # the key's credit or quota is used up
    "auth": "failure.auth",  # 401/403: the key was refused
    "too_long": "failure.too_long",  # the conversation passed the model's context
    "timeout": "failure.timeout",
    "connection": "failure.connection",  # refused, reset, no route
    "server": "failure.server",  # 5xx, a malformed answer
    "request": "failure.request",  # any other 4xx: how Kernel asked, not what was sent
    "unsupported": "failure.unsupported",  # the model lacks what the request needs
}

# A model id's family → the name the owner knows it by (the first match wins).
FAMILIES: tuple[tuple[str, str], ...] = (
    ("claude", "Claude"),
    ("gpt", "GPT"),
    ("gemini", "Gemini"),
    ("deepseek", "DeepSeek"),
    ("qwen", "Qwen"),
    ("glm", "GLM"),
    ("kimi", "Kimi"),
    ("moonshot", "Kimi"),
    ("grok", "Grok"),
    ("mistral", "Mistral"),
    ("llama", "Llama"),
)

TOO_LONG_WORDS = (
    "too long",
    "context length",
    "context window",
    "maximum context",
    "context_length_exceeded",
    "too many tokens",
    "input token count",
)


def display_name(provider: str, model: str) -> str:
    """The model's family when its id names one ("claude-sonnet-4" → "Claude"), else the
    provider's configured name."""
    lowered = model.casefold()
    for word, name in FAMILIES:
        if word in lowered:
            return name
    return provider or model or "?"


def failure_kind(exc: ProviderError) -> str:
    """Which of :data:`KINDS` ``exc`` is."""
    if isinstance(exc, RateLimitedError):
        overloaded = exc.status == 529 or exc.code == "overloaded_error"
        return "overloaded" if overloaded else "rate_limited"
    if isinstance(exc, QuotaExceededError):
        return "quota"
    if isinstance(exc, CapabilityError):
        return "unsupported"
    if isinstance(exc, ProviderAuthError):
        return "auth"
    if isinstance(exc, InputRefusedError):
        text = exc.message.casefold()
        return "too_long" if any(w in text for w in TOO_LONG_WORDS) else "request"
    if isinstance(exc, TransientProviderError):
        if exc.code == "timeout" or exc.status == 408:
            return "timeout"
        return "connection" if exc.code == "connection_error" else "server"
    return "request"


def owner_words(exc: ProviderError) -> str:
    """What the owner reads about ``exc``: what happened, with the model's name and the
    retries, and what to do. A refused input other than a too long one is the message's
    own (its content, an image, a file): the owner changes it, or sends it another way."""
    if not exc.provider:  # Kernel's own words already (cooling down, nothing enabled)
        return exc.message
    retried = t("failure.retried", n=exc.retries) if exc.retries else ""
    name = display_name(exc.provider, exc.model)
    kind = failure_kind(exc)
    refused = isinstance(exc, InputRefusedError) and kind != "too_long"
    key = "provider.refused_input" if refused else KINDS[kind]
    return t(key, name=name, provider=exc.provider, retried=retried, what=exc.message)


def log_fields(exc: ProviderError) -> str:
    """The raw detail for the log: provider, model, status, code, retries (no message:
    a provider's message may quote what was sent)."""
    status = exc.status or "-"
    code = exc.code or type(exc).__name__
    return f"{exc.provider or '-'} {exc.model or '-'} {status} {code} retries={exc.retries}"
