"""``[providers.<name>]`` (the model providers) and ``[titles]`` (the small titling model)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import BeforeValidator, Field

from kernel.config.routing import ModelOptions, Reasoning
from kernel.config.schema import (
    SECRET,
    SECRET_HEADERS,
    SECRET_LIST,
    Base,
    Env,
    Label,
    NonNegFloat,
    PosFloat,
    PosInt,
    Section,
    StrMap,
    Url,
    internal,
    one_of,
)

# A provider type is whatever a plugin registers (kernel.plugins: Plugins.add_provider_type);
# the configuration layer cannot see the plugins, so it checks the form here and the
# composition root checks the name (Plugins.check_config), with the same refusal.
ProviderType = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]*$")]
Capability = Literal["stream", "tool_call", "attachments", "reasoning"]
CAPABILITIES: tuple[str, ...] = get_args(Capability)
# What each built-in type can do when ``capabilities`` is unset; a plugin's type does
# only what the owner lists. OpenAI-compatible servers differ in whether they take
# ``reasoning_effort``, so "reasoning" is declared for one by listing it.
TYPE_CAPABILITIES: dict[str, tuple[str, ...]] = {
    "claude": CAPABILITIES,
    "openai_compat": ("stream", "tool_call", "attachments"),
}


def provider_env_key(name: str) -> str:
    return "KERNEL_PROVIDER_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper() + "_API_KEY"


def provider_env_keys(name: str) -> str:
    """The variable adding keys (a comma list) to ``api_keys``."""
    return provider_env_key(name) + "S"


class ModelPrice(Section):
    """``[providers.<name>.prices."<model>"]``: what one model costs, per million tokens,
    in ``budget.currency``. Cache prices left out are unknown: a call that read or wrote
    the cache is then recorded with an unknown cost, never a guessed one."""

    input: NonNegFloat = Field(description="fresh input tokens")
    output: NonNegFloat = Field(description="output tokens")
    cache_read: NonNegFloat | None = Field(None, description="input read from the prompt cache")
    cache_write: NonNegFloat | None = Field(None, description="input written to the prompt cache")


Prices = dict[str, ModelPrice]


def _switched_off(value: Any) -> Any:
    """The table says ``enabled``; Kernel keeps whether it was switched off."""
    return not value if isinstance(value, bool) else value


class ProviderConfig(Section):
    name: str = internal("")
    type: ProviderType = Field(
        "openai_compat",
        description="the API the endpoint speaks: a type a plugin provides (built in: claude, "
        "openai_compat)",
    )
    api_base: Url = Field("", description="the endpoint's base URL")
    api_key: Annotated[str, SECRET, Env(provider_env_key)] = Field(
        "", description="without one the provider is disabled"
    )
    api_keys: Annotated[list[str], SECRET_LIST, Env(provider_env_keys, append=True)] = Field(
        default_factory=list,
        description="more keys, used in turn when one is rate-limited or out of quota",
    )
    max_tokens: PosInt | None = Field(None, description="required for type claude")
    default_model: str = Field("", description="the model used first; default: models[0]")
    models: list[str] = Field(default_factory=list, description="what /model picks from")
    headers: Annotated[StrMap, SECRET_HEADERS] = Field(
        default_factory=dict, description="extra HTTP headers"
    )
    timeout: PosFloat = Field(120.0, description="seconds per request")
    max_retries: int = Field(3, description="retries of 429/5xx/timeouts")
    retry_base_delay: float = Field(1.0, description="first backoff in seconds, doubled")
    capabilities: Annotated[list[str], one_of(CAPABILITIES), Label(choices=CAPABILITIES)] | None = (
        Field(
            None, description='what the endpoint can do ("stream" required); unset: all of its type'
        )
    )
    aliases: StrMap = Field(default_factory=dict, description="alias → one of models")
    prices: Prices = Field(
        default_factory=dict, description="model → its price (see ModelPrice); unset: unknown"
    )
    fallbacks: list[str] | None = Field(
        None,
        description='models tried in order when this one fails ("provider:model"); unset: '
        "general.fallbacks",
    )
    reasoning: Reasoning | None = Field(
        None, description='reasoning for its models: "off", "low", "medium", "high" or tokens'
    )
    model_options: dict[str, ModelOptions] = Field(
        default_factory=dict, description="model → its own fallbacks and reasoning"
    )
    switched_off: Annotated[bool, BeforeValidator(_switched_off)] = Field(
        False, validation_alias="enabled", description="`enabled = false`: kept but not used"
    )

    @property
    def env_key(self) -> str:
        return provider_env_key(self.name)

    @property
    def keys(self) -> list[str]:
        """Every key, ``api_key`` first, each once."""
        return list(dict.fromkeys(k for k in (self.api_key, *self.api_keys) if k))

    @property
    def enabled(self) -> bool:
        return bool(self.keys) and not self.switched_off

    def declares(self, capability: str) -> bool:
        """Whether the endpoint can do ``capability``: as listed, else as its type can."""
        declared = self.capabilities
        if declared is None:
            declared = list(TYPE_CAPABILITIES.get(self.type, ("stream",)))
        return capability in declared

    def resolve(self, model: str) -> str | None:
        """A configured model name, or the model an alias points at; else None."""
        if model in self.models:
            return model
        return self.aliases.get(model)


class TitlesConfig(Section):
    type: ProviderType = Field(
        "openai_compat", description="the API the endpoint speaks (as providers.<name>.type)"
    )
    api_base: Base = Field("", description="the endpoint's base URL")
    api_key: Annotated[str, SECRET, Env("KERNEL_TITLES_API_KEY")] = Field(
        "", description="without one (or a model) sessions are not titled"
    )
    model: str = Field("", description="the small model that names sessions")
    max_tokens: PosInt = Field(100, description="the ceiling on one title")
    headers: Annotated[StrMap, SECRET_HEADERS] = Field(
        default_factory=dict, description="extra HTTP headers"
    )
    prices: Prices = Field(
        default_factory=dict, description="model → its price (see ModelPrice); unset: unknown"
    )


DEFAULT_PROVIDERS: dict[str, dict[str, Any]] = {
    "anthropic": {
        "type": "claude",
        "api_base": "https://api.anthropic.com",
        "max_tokens": 16384,
        "default_model": "claude-sonnet-5-5",
        "models": ["claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-5-5"],
    },
    "openai": {
        "type": "openai_compat",
        "api_base": "https://api.openai.com/v1",
        "default_model": "gpt-5.5",
        "models": ["gpt-5.5", "gpt-5.4-mini"],
        "capabilities": ["stream", "tool_call", "attachments", "reasoning"],
    },
}
