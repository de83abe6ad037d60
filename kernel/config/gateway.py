"""``[gateway]``: the local HTTP sidecar."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from kernel.config.schema import SECRET, Env, Label, NonNegInt, PosFloat, PosInt, Section, StrMap

DEFAULT_MODEL_ALIASES = {"claude-*": "active"}
GuessLimit = Annotated[int, Field(ge=1, le=100_000)]
MODEL_PATTERN_MAX = 100


def _origins(values: list[str]) -> list[str]:
    return [o.rstrip("/") for o in values]


def model_alias_target(target: str) -> tuple[str, str]:
    """("provider", "model") of an alias target; ("", "") for "active"."""
    if target == "active":
        return "", ""
    provider, _, model = target.partition(":")
    return provider, model


class GatewayConfig(Section):
    enabled: bool = Field(True, description="serve the sidecar")
    host: str = Field("127.0.0.1", description="a non-loopback host requires api_key")
    port: Annotated[int, Field(ge=0, le=65535), Label(suffix=" 0-65535")] = Field(
        8088, description="0: any free port (the bound one is logged)"
    )
    api_key: Annotated[str, SECRET, Env("KERNEL_GATEWAY_API_KEY")] = Field(
        "", description="sent as X-API-Key or Authorization: Bearer"
    )
    auth: Literal["key", "none"] = Field(
        "key",
        description='"none": no key at all (loopback only; any local user may then call it)',
    )
    read_header_timeout: PosFloat = Field(10.0, description="seconds to receive headers")
    read_timeout: PosFloat = Field(120.0, description="seconds to receive a body")
    idle_timeout: PosFloat = Field(120.0, description="seconds an idle connection is kept")
    shutdown_timeout: PosFloat = Field(30.0, description="seconds requests get at shutdown")
    max_body_bytes: PosInt = Field(32 * 1024 * 1024, description="larger bodies: 413")
    queue_timeout: PosFloat = Field(
        300.0, description="a request waits this long for its chat's running turn"
    )
    allowed_origins: Annotated[list[str], AfterValidator(_origins)] = Field(
        default_factory=list, description="browser origins allowed to call the sidecar"
    )
    archive_max_bytes: PosInt = Field(
        256 * 1024 * 1024, description="workspace zip export/import, uncompressed"
    )
    archive_max_files: PosInt = Field(10000, description="entries in a workspace zip")
    # /v1/messages and /v1/models: a requested model name that is no configured model or
    # alias is matched against these patterns in order ("*" matches any run of
    # characters) and answered by the target: "active" or "<provider>:<model>".
    model_aliases: StrMap = Field(
        default_factory=lambda: dict(DEFAULT_MODEL_ALIASES),
        description="model name pattern → target; writing the table replaces the default",
    )
    allow_hard_links: bool = Field(
        False, description="serve workspace files with more than one hard link"
    )
    max_connections: NonNegInt = Field(0, description="open at once; 0: from the files limit")
    max_connections_per_client: NonNegInt = Field(
        0, description="from one address; 0: half of max_connections"
    )
    selfops_max_bytes: PosInt = Field(256 * 1024, description="a file a SelfOps preview makes")
    # Guesses of the key (a wrong X-API-Key or Bearer, a console sign-in) a minute; over
    # either, keys are not compared: 429 with Retry-After. A right key is never counted.
    max_key_guesses: GuessLimit = Field(
        30, description="a minute, all addresses together (then a short key waits)"
    )
    max_key_guesses_per_client: GuessLimit = Field(
        10, description="a minute, from one address (an IPv6 /64)"
    )
    console: bool = Field(True, description="serve the web console at /console/")
    console_session_hours: PosFloat = Field(
        12.0, description="a console sign-in lasts this long (then sign in again)"
    )
    confirm_timeout: PosFloat = Field(
        300.0,
        description="seconds the owner has in Telegram to confirm a console's change of what "
        "runs programs or where a key is sent",
    )

    @property
    def client_host(self) -> str:
        """Where a local client reaches the sidecar (a wildcard bind is reached locally)."""
        if self.host in ("0.0.0.0", ""):
            return "127.0.0.1"
        if self.host == "::":
            return "::1"
        return self.host

    @property
    def url(self) -> str:
        host = self.client_host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"
