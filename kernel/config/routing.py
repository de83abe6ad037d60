"""``[routing]``: failover, the circuit breaker, stickiness and the routing rules (issue 17).

A model is named by a *reference*, ``"provider:model"`` (the model may be one of the
provider's aliases) or ``"provider"`` (its default model); :func:`parse_ref` splits one,
the loader checks that each names a configured provider and model. ``reasoning`` is
``"off" | "low" | "medium" | "high"`` or a thinking budget in tokens (at least 1024).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from kernel.config.schema import Label, NonNegFloat, NonNegInt, PosFloat, PosInt, Section
from kernel.core.provider import MIN_THINKING_BUDGET

REASONING_LEVELS: tuple[str, ...] = ("off", "low", "medium", "high")
Reasoning = Annotated[
    Literal["off", "low", "medium", "high"] | Annotated[int, Field(ge=MIN_THINKING_BUDGET)],
    Label('"off", "low", "medium", "high" or a token budget of at least 1024'),
]
RULE_PATTERN_MAX = 500  # characters of a rule's pattern


def parse_ref(ref: str) -> tuple[str, str]:
    """``"provider:model"`` → (provider, model); ``"provider"`` → (provider, "") (its
    default model). Only the first colon splits: a model name may hold more."""
    provider, _, model = ref.strip().partition(":")
    return provider.strip(), model.strip()


def compile_pattern(pattern: str) -> Any:
    """A rule's pattern, compiled by RE2: matching takes time linear in the text (the
    owner's words are outside input), and what RE2 cannot promise that for
    (backreferences, lookaround) is refused. Raises ValueError naming the problem.

    RE2 (its library and libstdc++, ~2.5 MiB) is imported here, on the first pattern:
    a configuration without routing patterns never loads it (issue 37)."""
    import re2

    options = re2.Options()
    options.log_errors = False  # RE2 would print the pattern to stderr itself
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else ""
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise ValueError(str(detail) or "not a valid RE2 pattern") from None


class ModelOptions(Section):
    """``[providers.<name>.model_options."<model>"]``: what differs for one model."""

    fallbacks: list[str] | None = Field(
        None,
        description='models tried when this one fails ("provider:model"); unset: the '
        "provider's fallbacks",
    )
    reasoning: Reasoning | None = Field(None, description="this model's reasoning level")


class RoutingRule(Section):
    """``[[routing.rules]]``: when every condition set holds, the turn's model call goes
    to ``primary`` (then ``fallbacks``) with ``reasoning``. Rules are tried in order;
    the first that matches decides."""

    name: str = Field(min_length=1, max_length=64, description="shown in the decisions log")
    channel: list[str] = Field(
        default_factory=list, description="the turn's channel is one of these (telegram, …)"
    )
    cron_job: list[str] = Field(default_factory=list, description="the cron job's id is one of")
    skill: list[str] = Field(default_factory=list, description="one of these skills is invoked")
    image: bool | None = Field(None, description="true: an image is attached; false: none is")
    persona: list[str] = Field(
        default_factory=list, description="the chat's persona is one of these (personas/<name>.md)"
    )
    pattern: str = Field(
        "",
        max_length=RULE_PATTERN_MAX,
        description="a regular expression (RE2 syntax, linear time) found in the owner's words",
    )
    min_input_tokens: NonNegInt = Field(0, description="the request's estimated input is at least")
    max_input_tokens: NonNegInt = Field(0, description="… and at most (0: no bound)")
    primary: str = Field("", description='"provider:model" to use; "": the usual choice')
    fallbacks: list[str] | None = Field(
        None, description="tried in order when primary fails; unset: primary's own fallbacks"
    )
    reasoning: Reasoning | None = Field(None, description="the reasoning level for this turn")


class RoutingConfig(Section):
    """``[routing]``: how a failing model is left and come back to."""

    sticky_minutes: NonNegFloat = Field(
        30.0,
        description="a session that failed over stays on its fallback this long (its prompt "
        "cache stays warm); 0: back to the primary at the next call",
    )
    breaker_failures: PosInt = Field(
        3, description="failed calls in a row (after their retries) that open a provider's circuit"
    )
    breaker_cooldown: PosFloat = Field(
        60.0, description="seconds an open circuit skips the provider before one probe call"
    )
    decisions_days: PosInt = Field(30, description="days the decisions log is kept")
    # [[routing.rules]], read one by one (each refusal names its index).
    rules: list[RoutingRule] = Field(default_factory=list, json_schema_extra={"toml": False})
