"""What an MCP server may ask of Kernel while one of its tools runs.

- Sampling (``sampling/createMessage``): answered by Kernel's active model through the
  same provider call, retry policy and meter a turn uses (the budget and the usage
  ledger cover it), with the answer capped at ``[mcp] sampling_max_tokens``; with
  ``[mcp] sampling = "ask"`` the owner approves each request first.
- Elicitation (``elicitation/create``, form mode): a question whose fields are all
  choices (``enum``, titled ``oneOf``) or yes/no is put to the owner through the turn's
  ``ask`` (Telegram: inline buttons), one field at a time, with a "decline" option;
  anything else (free text, numbers, URL mode) is declined.

No ``mcp`` import: :mod:`kernel.mcp.requests` translates the SDK's requests into
these values and the answers back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernel.core.i18n import t
from kernel.core.messages import Message, TextBlock
from kernel.core.provider import ChatRequest, Completion
from kernel.spend import CallTag

if TYPE_CHECKING:
    from kernel.agent.agent import Agent

MAX_FIELDS = 5  # an elicitation with more fields is declined: too many questions in a row
MAX_OPTIONS = 8  # as the ask_user tool: what a row of buttons can hold


@dataclass(slots=True)
class SamplingRequest:
    server: str
    system: str
    messages: list[tuple[str, str]]  # (role, text), role "user" or "assistant"
    max_tokens: int  # already capped by the configured ceiling


@dataclass(slots=True)
class SamplingAnswer:
    text: str
    model: str
    stop_reason: str  # "endTurn" or "maxTokens", as MCP spells them


Sampler = Callable[[SamplingRequest], Awaitable[SamplingAnswer]]


def agent_sampler(agent: Agent) -> Sampler:
    """Sampling answered by the agent's active provider and model."""

    async def sample(request: SamplingRequest) -> SamplingAnswer:
        name, model = agent.selection.provider_name, agent.selection.model
        messages = [
            Message("assistant" if role == "assistant" else "user", [TextBlock(text)])
            for role, text in request.messages
        ]
        chat = ChatRequest(model, request.system, messages, [], request.max_tokens)
        completion: Completion | None = None
        async for event in agent.stream_request(name, chat, CallTag("sampling")):
            if isinstance(event, Completion):
                completion = event
        assert completion is not None  # a stream always ends with its Completion
        stop = "maxTokens" if completion.stop_reason in ("max_tokens", "length") else "endTurn"
        return SamplingAnswer(completion.text, model, stop)

    return sample


@dataclass(slots=True)
class Field:
    """One elicitation field asked as one multiple-choice question."""

    name: str
    label: str  # title, else the field name
    description: str
    options: list[str]  # what the buttons say
    values: list[Any]  # what the server gets for each option


def choice_fields(schema: Any) -> list[Field] | None:
    """The fields of a requested schema when every one is a choice; else None."""
    if not isinstance(schema, dict):
        return None
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not 0 < len(properties) <= MAX_FIELDS:
        return None
    fields: list[Field] = []
    for name, prop in properties.items():
        field = _field(str(name), prop)
        if field is None:
            return None
        fields.append(field)
    return fields


def _field(name: str, prop: Any) -> Field | None:
    if not isinstance(prop, dict):
        return None
    label = str(prop.get("title") or name)
    description = str(prop.get("description") or "")
    kind = prop.get("type")
    options: list[str]
    values: list[Any]
    if kind == "boolean":
        options, values = [t("mcp.yes"), t("mcp.no")], [True, False]
    elif kind == "string" and isinstance(prop.get("enum"), list):
        values = [str(v) for v in prop["enum"]]
        names = prop.get("enumNames")
        if isinstance(names, list) and len(names) == len(values):
            options = [str(n) for n in names]
        else:
            options = list(values)
    elif kind == "string" and isinstance(one_of := prop.get("oneOf"), list):
        pairs = [
            (str(o.get("title") or o["const"]), str(o["const"]))
            for o in one_of
            if isinstance(o, dict) and "const" in o
        ]
        if len(pairs) != len(one_of):
            return None
        options, values = [p[0] for p in pairs], [p[1] for p in pairs]
    else:
        return None
    if not 0 < len(options) <= MAX_OPTIONS:
        return None
    return Field(name, label, description, options, values)
