"""Kernel's exception tree.

KernelError
├── ConfigError            bad or missing configuration (start-up refusals carry ``key``)
├── StartupError           the data directory or database cannot be used at start
├── ProviderError          a model provider failed (status/code/message, never secrets)
│   ├── TransientProviderError  5xx, timeouts, dropped connections: worth a retry;
│   │   │                       carries ``retry_after`` seconds when the server sent it
│   │   └── RateLimitedError    429 / overloaded
│   ├── QuotaExceededError the key's quota or credit is used up (another key may serve)
│   ├── ProviderAuthError  the key was refused (401/403): not failed over; the provider
│   │                      is unusable until its configuration changes
│   ├── CapabilityError    the provider lacks what the request needs (no silent downgrade)
│   └── InputRefusedError  a 4xx about the content the owner sent (an image it cannot
│                          read, a prompt too long, a content policy), not the request's
│                          shape: code ``provider_refused_input``
├── ToolError              a tool could not run; becomes a tool result the model reads
├── SpeechError            speech to text or text to speech failed (``cause``: a short tag)
├── StoreError             the SQLite store failed
├── SessionError           unknown session / bad session reference
│   └── ProtectedSessionError  the default chat, which is never deleted
├── BusyError              a turn is already running for this conversation
├── ChannelError           an outbound channel refused or failed (``code``: channel_not_supported,
│                          channel_disabled, channel_dispatch_failed)
├── CronError              a scheduled job request that cannot be done (``code`` names it:
│                          not_found, default_cron_protected, cron_busy, invalid_cron_*)
└── CodedError             a refusal with a stable ``code`` (and ``details``) the sidecar
    │                      returns as is; the text names the problem and the fix
    ├── SkillError         unknown, disabled or badly named skill; skill files
    ├── PromptError        a /prompts:<name> template that is missing or cannot be filled
    ├── WorkspaceError     a workspace path or archive that is refused
    ├── SelfOpsError       SelfOps: session model override, config mutations
    └── BudgetExceededError  a model call the spending limits do not admit (``details``:
                           scope day/month/job, spent, limit, the call's worst case)

Each stable error code's HTTP status is declared once, in :data:`HTTP_STATUS`;
:func:`http_status` reads it (the sidecar answers with it, whichever error carried the
code: a :class:`CodedError`, :class:`ChannelError`, :class:`CronError`, a turn's error
event, or the sidecar's own refusals). :func:`failover_cause` says which provider
errors another model may answer instead of.
"""

from __future__ import annotations


class KernelError(Exception):
    """Root of every error Kernel raises on purpose."""


class ConfigError(KernelError):
    def __init__(self, message: str, key: str = "") -> None:
        super().__init__(message)
        self.key = key


class StartupError(KernelError):
    """Kernel cannot start for a reason outside config.toml; the text names the fix."""


class ProviderError(KernelError):
    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = None,
        code: str = "",
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.code = code
        self.message = message
        self.model = ""  # the model called, when known (set where the call was made)
        self.retries = 0  # how many times the call was retried before this failure

    def __str__(self) -> str:
        parts = [p for p in (self.provider, str(self.status or ""), self.code) if p]
        prefix = " ".join(parts)
        return f"{prefix}: {self.message}" if prefix else self.message


class TransientProviderError(ProviderError):
    """A failure worth retrying: 5xx, timeouts, dropped connections. ``retry_after``:
    the server's Retry-After in seconds, when it sent one (a 503 may)."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.retry_after = retry_after


class RateLimitedError(TransientProviderError):
    """429, or the provider says it is overloaded (Anthropic's 529)."""


class QuotaExceededError(ProviderError):
    """The key's quota or credit is used up (OpenAI's ``insufficient_quota``, a 402,
    Anthropic's "credit balance is too low"): retrying that key does not help, another
    key or another provider may."""

    CODE = "quota_exceeded"

    def __init__(self, message: str, **kw: object) -> None:
        kw["code"] = self.CODE
        super().__init__(message, **kw)  # type: ignore[arg-type]


class ProviderAuthError(ProviderError):
    """The provider refused the key (401, 403): not failed over blindly; the provider is
    unusable until its configuration changes."""

    CODE = "provider_auth_failed"

    def __init__(self, message: str, **kw: object) -> None:
        kw["code"] = self.CODE
        super().__init__(message, **kw)  # type: ignore[arg-type]


def failover_cause(exc: BaseException) -> str | None:
    """Why another model may answer instead, or None when it may not: a transient cause
    (429, 5xx, overloaded, timeout, connection) or a used-up quota may be failed over; a
    refused key, a bad request, a refused input, a missing capability or a budget may
    not (another model would not fix them, or would hide them)."""
    if isinstance(exc, TransientProviderError):
        return exc.code or ("rate_limited" if isinstance(exc, RateLimitedError) else "transient")
    if isinstance(exc, QuotaExceededError):
        return QuotaExceededError.CODE
    return None


class CapabilityError(ProviderError):
    """The active provider cannot do what the request needs."""


class InputRefusedError(ProviderError):
    """The provider refused what the owner sent (the message, its image, its length),
    not how Kernel asked: that message is set aside, the session goes on."""

    CODE = "provider_refused_input"

    def __init__(self, message: str, **kw: object) -> None:
        super().__init__(message, code=self.CODE, **kw)  # type: ignore[arg-type]


class ToolError(KernelError):
    pass


class SpeechError(KernelError):
    """``str()`` is a redacted detail fit for the owner; ``cause`` groups failures so a
    recurring one is logged once (e.g. ``"ffmpeg_missing"``, ``"http_500"``)."""

    def __init__(self, message: str, cause: str) -> None:
        super().__init__(message)
        self.cause = cause


class StoreError(KernelError):
    pass


class SessionError(KernelError):
    pass


class ProtectedSessionError(SessionError):
    pass


class BusyError(KernelError):
    pass


class CodedError(KernelError):
    """A refusal with a stable machine-readable ``code`` (seed 000's error codes)."""

    def __init__(self, code: str, message: str, details: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.details = details or {}


class SkillError(CodedError):
    pass


class ConversationError(CodedError, SessionError):
    """/undo, /rewind or /retry refused (issue 20): nothing to cut, no such answer,
    not the owner's own chat, a message whose photo or file is no longer kept; a
    switch to a branch the session does not have (issue 38)."""


class PromptError(CodedError):
    """A ``/prompts:<name>`` template (issue 20): not found, bad arguments, switched off;
    a prompt mode whose required files are missing (``*_prompt_unavailable``)."""


class ProfileError(CodedError):
    """A persona, project or sub-agent file (issue 18): not found, invalid, exists."""


class WorkspaceError(CodedError):
    pass


class SelfOpsError(CodedError):
    pass


class TaskError(CodedError):
    """A background task (issue 38) refused: unknown, not running, over the cap, or
    what it would run is not available."""


class BudgetExceededError(CodedError):
    """A model call was not made: it could pass a ``[budget]`` limit (or a cron job's)."""

    CODE = "budget_exceeded"

    def __init__(self, message: str, details: dict[str, object] | None = None) -> None:
        super().__init__(self.CODE, message, details)


class ChannelError(KernelError):
    """``code`` is one of the seed's channel error codes; ``details`` are safe to show."""

    NOT_SUPPORTED = "channel_not_supported"
    DISABLED = "channel_disabled"
    DISPATCH_FAILED = "channel_dispatch_failed"

    def __init__(self, code: str, message: str, **details: object) -> None:
        super().__init__(message)
        self.code = code
        self.details = details


class CronError(KernelError):
    """A job request that cannot be done; ``code`` is the API's error code."""

    def __init__(self, code: str, message: str, **details: object) -> None:
        super().__init__(message)
        self.code = code
        self.details = details


# The HTTP status of every stable error code, declared once.
HTTP_STATUS: dict[str, int] = {
    # the sidecar's own refusals
    "invalid_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "forbidden_origin": 403,
    "csrf_failed": 403,  # the web console: a state-changing request without its token
    "too_many_sign_ins": 429,
    "too_many_wrong_keys": 429,  # the sidecar's key guessed too often: Retry-After
    "forbidden_host": 403,
    # issue 33: what can run a program or send a stored secret elsewhere (config/privilege.py)
    "privilege_required": 403,
    "not_found": 404,
    "memory_exists": 409,  # an edit would duplicate another memory
    "method_not_allowed": 405,
    "request_timeout": 408,
    "request_too_large": 413,
    "unsupported_media_type": 415,
    "internal_error": 500,
    "export_failed": 500,  # issue 40: the export could not be written (the words say why)
    # sessions and turns
    "session_busy": 409,
    # background tasks (issue 38, kernel/agent/background.py)
    "task_not_found": 404,
    "task_not_running": 409,
    "task_refused": 409,
    "nothing_to_retry": 409,
    "nothing_to_undo": 409,
    "rewind_target_not_found": 404,
    "rewind_nothing_after": 409,
    "branch_not_found": 404,
    "retry_not_owner_chat": 409,
    "retry_input_gone": 409,
    "default_chat_protected": 400,
    "telegram_not_configured": 409,  # the console's "resume in Telegram" without Telegram
    "tool_disabled": 403,
    "tool_forbidden_in_mode": 403,  # issue 38: the session's plan or read_only mode
    "tool_not_supported": 400,
    # seed 000's tool contract: a direct call the tool could not carry out (its input
    # named a file that is no text, the owner did not approve a shell command…): the
    # request was understood, the tool could not do it; a result no JSON can carry is
    # the tool's own fault
    "tool_invoke_failed": 422,
    "tool_invalid_result": 502,
    "provider_not_supported": 400,
    "provider_not_found": 404,
    "provider_disabled": 400,
    "model_not_found": 400,
    "provider_request_failed": 502,
    InputRefusedError.CODE: 400,
    "rate_limit_error": 429,
    "rate_limited": 429,
    # the upstream refused Kernel's own key or quota: Kernel's configuration, not the caller
    ProviderAuthError.CODE: 502,
    QuotaExceededError.CODE: 502,
    # 402, not 429: waiting does not help, the owner's limit must be raised (SDKs retry 429s)
    BudgetExceededError.CODE: 402,
    # CodedError: skills, workspace, SelfOps
    "profile_not_found": 404,
    "profile_exists": 409,
    "profile_invalid_name": 400,
    "profile_invalid": 409,
    "profile_too_large": 413,
    "skill_not_found": 404,
    "skill_exists": 409,
    "skill_invalid_name": 400,
    "skill_invalid": 409,
    "skill_disabled": 409,
    "skill_too_large": 413,
    "prompt_template_not_found": 404,
    "prompt_template_invalid": 400,
    "prompt_templates_disabled": 409,
    # A prompt mode's required file is missing: the seed's 500, its fix in the message.
    "codex_prompt_unavailable": 500,
    "claude_prompt_unavailable": 500,
    "path_invalid": 400,
    "path_denied": 403,
    "path_conflict": 409,
    "path_is_directory": 400,
    "directory_not_empty": 409,
    "workspace_missing": 404,
    "archive_too_large": 413,
    "import_invalid": 400,
    "import_unsafe_entry": 400,
    "session_not_found": 404,
    "session_model_invalid": 400,
    "session_exists": 409,
    "mutation_not_found": 404,
    "mutation_expired": 410,
    "mutation_hash_mismatch": 409,
    "mutation_sensitive_denied": 403,
    "mutation_path_denied": 403,
    "mutation_apply_conflict": 409,
    # ChannelError
    ChannelError.NOT_SUPPORTED: 400,
    ChannelError.DISABLED: 400,
    ChannelError.DISPATCH_FAILED: 502,
    # CronError
    "cron_busy": 409,
    "cron_job_exists": 409,
    # MCP servers changed at run time
    "mcp_server_exists": 409,
    "mcp_server_not_found": 404,
    "mcp_server_in_config": 409,
    "mcp_stopping": 503,
    # artifacts (issue 23): gone (retention), not served (a link, outside), changed since
    "artifact_removed": 410,
    "artifact_refused": 403,
    "artifact_changed": 409,
}


# The codes a provider adapter gives a request that got no answer of the provider's own
# (refused or dropped connection, no answer in time, an answer that is no API's): the
# sidecar names each as seed 000 does, ``provider_request_failed`` (the adapter's code
# kept in the details as ``cause``). Failover and the owner's words read the adapter's.
UNANSWERED_CODES = frozenset({"connection_error", "timeout", "bad_response"})


def http_status(code: str, default: int) -> int:
    """The HTTP status of ``code``; ``default`` for a code not declared above (a
    provider's own code, an ``invalid_cron_*`` refusal)."""
    return HTTP_STATUS.get(code, default)
