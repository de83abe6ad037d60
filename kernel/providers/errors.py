"""Translation of SDK exceptions into Kernel's error tree, shared by both adapters.

Both SDKs come from the same generator, so their errors have the same shape:
``APIStatusError`` with ``status_code``/``body``/``response``, plus timeout and
connection errors. Only the message from the body is kept, redacted: never the
request, its headers or the key.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from types import ModuleType
from typing import Any

from kernel.core.errors import (
    InputRefusedError,
    ProviderAuthError,
    ProviderError,
    QuotaExceededError,
    RateLimitedError,
    TransientProviderError,
)
from kernel.core.redact import redact_text

TRANSIENT_TYPES = {"overloaded_error", "api_error", "rate_limit_error", "server_error", "timeout"}

# Error codes saying the provider refused the CONTENT sent (OpenAI and compatible servers:
# Azure's content filter, DashScope's data inspection), whatever the status.
REFUSED_INPUT_CODES = {
    "context_length_exceeded",
    "content_filter",
    "content_policy_violation",
    "data_inspection_failed",
    "invalid_image",
    "invalid_image_format",
    "invalid_image_url",
    "image_parse_error",
    "image_too_large",
    "string_above_max_length",
}
# What a 400/413/422's message says when the content is the problem, not the request's
# shape: Anthropic ("prompt is too long", "Could not process image", "image exceeds 5 MB
# maximum"), OpenAI and vLLM/DeepSeek ("maximum context length"), content policies.
# A shape problem (a tool pairing, a missing field, max_tokens) names none of these.
REFUSED_INPUT_WORDS = (
    "prompt is too long",
    "maximum context length",
    "context length",
    "context window",
    "too many tokens",
    "input token count",
    "image",
    "content policy",
    "content management policy",
    "usage policy",
    "content filter",
    "inappropriate content",
    "high risk",
    "敏感",
)


# A key out of quota or credit: OpenAI's 429 ``insufficient_quota``, 402s, Anthropic's
# 400 "Your credit balance is too low". Waiting does not help; another key may.
QUOTA_CODES = {"insufficient_quota", "billing_hard_limit_reached", "billing_not_active"}
QUOTA_WORDS = ("credit balance is too low", "insufficient_quota", "exceeded your current quota")


def out_of_quota(status: int, code: str, message: str) -> bool:
    if code in QUOTA_CODES or status == 402:
        return True
    text = message.casefold()
    return status in (400, 403, 429) and any(words in text for words in QUOTA_WORDS)


# What a 403's message says when moderation refused the content (not the key).
MODERATION_WORDS = (
    "flagged",
    "moderation",
    "content policy",
    "content management policy",
    "usage policy",
    "inappropriate content",
    "content filter",
)

# Error codes saying the KEY is refused: a 401 always is; a 403 only with one of these
# (a 403 may also refuse the content, or a region: not a reason to drop the provider).
KEY_CODES = {"authentication_error", "permission_error", "invalid_api_key", "invalid_request_key"}


def refuses_key(status: int, code: str) -> bool:
    """Whether the provider refused the key itself (the provider is then unusable until
    its configuration changes), as opposed to this request."""
    return status == 401 or code in KEY_CODES


def refuses_input(status: int, code: str, message: str) -> bool:
    """Whether a 4xx refuses the content sent (an image, the length, a policy) rather
    than how it was asked: Kernel sets that message aside instead of resending it."""
    if code in REFUSED_INPUT_CODES:
        return True
    if status == 413:  # Anthropic's request_too_large: the attachments, not the shape
        return True
    text = message.casefold()
    if status == 403:  # a moderation refusal (OpenRouter's "your input was flagged")
        return any(words in text for words in MODERATION_WORDS)
    if status not in (400, 422):
        return False
    return any(words in text for words in REFUSED_INPUT_WORDS)


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _body_error(body: Any) -> tuple[str, str]:
    """(type/code, message) from an error body of either API."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            code = str(inner.get("type") or inner.get("code") or "")
            return code, str(inner.get("message") or "")
        if isinstance(inner, str):
            return "", inner
    return "", ""


def translate(
    exc: Exception, *, provider: str, secrets: list[str], sdk: ModuleType
) -> ProviderError:
    """``sdk`` is the ``anthropic`` or ``openai`` module: their error classes share names."""
    if isinstance(exc, sdk.APITimeoutError):
        return TransientProviderError("request timed out", provider=provider, code="timeout")
    if isinstance(exc, sdk.APIConnectionError):
        return TransientProviderError(
            "connection failed", provider=provider, code="connection_error"
        )
    if isinstance(exc, sdk.APIStatusError):
        status = int(getattr(exc, "status_code", 0) or 0)
        code, message = _body_error(getattr(exc, "body", None))
        message = redact_text(message or f"HTTP {status}", secrets)[:500]
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        kw: dict[str, Any] = {"provider": provider, "status": status or None, "code": code}
        if out_of_quota(status, code, message):
            return QuotaExceededError(message, **kw)
        # Before the key: a 403 may refuse the content (OpenRouter's moderation).
        if 400 <= status < 500 and refuses_input(status, code, message):
            return InputRefusedError(message, provider=provider, status=status)
        if refuses_key(status, code):
            return ProviderAuthError(message, provider=provider, status=status or None)
        if status == 429 or code in ("rate_limit_error", "overloaded_error") or status == 529:
            return RateLimitedError(message, retry_after=parse_retry_after(headers), **kw)
        if status >= 500 or status == 408 or (status == 200 and code in TRANSIENT_TYPES):
            return TransientProviderError(message, retry_after=parse_retry_after(headers), **kw)
        return ProviderError(message, **kw)
    # Mid-stream, the SDKs let the transport's own errors through unwrapped.
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"TimeoutException", "TimeoutError"}:
        return TransientProviderError("stream timed out", provider=provider, code="timeout")
    if "TransportError" in names:
        return TransientProviderError(
            "connection dropped mid-stream", provider=provider, code="connection_error"
        )
    return TransientProviderError(
        f"malformed response ({type(exc).__name__})", provider=provider, code="bad_response"
    )
