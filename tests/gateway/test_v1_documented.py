"""The /v1 bodies' nested content is validated by the models that document it: every
example body the routes accept validates against the published model of its route (the
body model with each documented field read as its documented type), and content the
published model refuses the route refuses too, in the API's own words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError, create_model

from kernel.gateway.claude_format import CountBody, MessagesBody, parse_request
from kernel.gateway.openai_format import ChatBody, parse_chat_request
from kernel.gateway.responses_format import ResponsesBody, conversation, parse_responses_request
from kernel.gateway.schema import Documented
from kernel.gateway.v1 import V1Error

FIXTURE = json.loads(
    (Path(__file__).parent / "fixtures" / "claude_code_2.1.197_messages.json").read_text()
)
CODEX = json.loads(
    (Path(__file__).parent / "fixtures" / "codex_0.171.0_responses.json").read_text()
)
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
TOOL = {"name": "now", "description": "the time", "input_schema": {"type": "object"}}

MESSAGES_BODIES: list[dict[str, Any]] = [
    *FIXTURE["requests"],
    {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]},
    {
        "model": "m",
        "max_tokens": 2048,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "more system"}]},
            {"role": "user", "content": [{"type": "text", "text": "look"}, IMAGE]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "use the tool", "signature": "s1"},
                    {"type": "redacted_thinking", "data": "xyz"},
                    {"type": "text", "text": "calling"},
                    {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "9:00"}, IMAGE],
                        "is_error": False,
                    },
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "plain"},
                ],
            },
        ],
        "tools": [TOOL, {"type": "web_search_20250305", "name": "web_search"}],
        "tool_choice": {"type": "tool", "name": "now", "disable_parallel_tool_use": True},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "output_config": {"effort": "high"},
        "metadata": {"user_id": "u"},
        "temperature": 0.5,
        "top_k": 3,
        "stop_sequences": ["END"],
        "stream": True,
    },
    {
        "model": "m",
        "max_tokens": 9,
        "system": "plain system",
        "messages": [{"role": "user", "content": "hi"}],
        "thinking": {"type": "adaptive"},
        "tool_choice": {"type": "auto"},
    },
    {
        "model": "m",
        "max_tokens": 9,
        "messages": [{"role": "user", "content": "hi"}],
        "thinking": {"type": "disabled"},
        "tool_choice": {"type": "none"},
    },
]

CHAT_BODIES: list[dict[str, Any]] = [
    {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": [{"type": "text", "text": "dev"}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {
                        "type": "image_url",
                        "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "now", "arguments": '{"zone": "UTC"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "9:00"},
            {"role": "assistant", "content": [{"type": "text", "text": "It is nine."}]},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "now",
                    "description": "the time",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "now"}},
        "parallel_tool_calls": False,
        "stream": True,
        "stream_options": {"include_usage": True},
        "reasoning_effort": "low",
        "stop": ["END"],
        "temperature": 1.5,
        "max_completion_tokens": 100,
    },
    *(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tool_choice": choice}
        for choice in ("auto", "none", "required")
    ),
]


RESPONSES_BODIES: list[dict[str, Any]] = [
    *CODEX["requests"],
    *CODEX["openai_sdk"]["requests"],
    {
        "model": "m",
        "instructions": "Be brief.",
        "input": [
            {"role": "developer", "content": "more system"},
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "look"},
                    {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
                ],
            },
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "hm"}]},
            {"type": "function_call", "call_id": "c1", "name": "now", "arguments": "{}"},
            {
                "type": "function_call_output",
                "call_id": "c1",
                "output": [{"type": "input_text", "text": "9:00"}],
            },
            {"role": "assistant", "content": [{"type": "output_text", "text": "It is 9."}]},
        ],
        "tools": [
            {"type": "function", "name": "now", "parameters": {"type": "object"}},
            {"type": "custom", "name": "apply_patch"},
            {"type": "web_search"},
        ],
        "tool_choice": {"type": "function", "name": "now"},
        "parallel_tool_calls": False,
        "reasoning": {"effort": "low", "summary": "auto"},
        "text": {"format": {"type": "text"}, "verbosity": "low"},
        "max_output_tokens": 100,
        "temperature": 1.5,
        "top_p": 0.5,
        "store": True,
        "metadata": {"k": "v"},
        "user": "someone",
        "include": ["reasoning.encrypted_content"],
    },
]


def published(model: type[BaseModel]) -> type[BaseModel]:
    """``model`` with each documented field validated as the type that documents it."""
    fields: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        kind = next((m.kind for m in info.metadata if isinstance(m, Documented)), None)
        if kind is not None:
            fields[name] = (kind, info.default if not info.is_required() else ...)
    return create_model(f"Published{model.__name__}", __base__=model, **fields)


@pytest.mark.parametrize("body", MESSAGES_BODIES)
def test_every_accepted_messages_body_fits_the_published_model(body: dict[str, Any]) -> None:
    parse_request(body)
    published(MessagesBody).model_validate(body)
    parse_request(body, count_only=True)
    published(CountBody).model_validate(body)


@pytest.mark.parametrize("body", RESPONSES_BODIES)
def test_every_accepted_responses_body_fits_the_published_model(body: dict[str, Any]) -> None:
    parsed = parse_responses_request(body)
    assert conversation(parsed.items, parsed.tools.namespaces).messages
    published(ResponsesBody).model_validate(body)


@pytest.mark.parametrize("body", CHAT_BODIES)
def test_every_accepted_chat_body_fits_the_published_model(body: dict[str, Any]) -> None:
    parse_chat_request(body)
    published(ChatBody).model_validate(body)


def test_the_published_models_document_every_nested_part() -> None:
    for model in (MessagesBody, ChatBody):
        documented = {
            name
            for name, info in model.model_fields.items()
            if any(isinstance(m, Documented) for m in info.metadata)
        }
        assert {"messages", "tools", "tool_choice"} <= documented, model


BASE = {"model": "m", "max_tokens": 9}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"messages": [{"role": "user", "content": [{"type": "video"}]}]},
            "messages.0.content.0: content block type 'video' is not supported here",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
            "messages.0.content.0: content block type 'text' is not supported here",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "a"},
                            {"type": "image", "source": {"type": "url", "url": "https://x"}},
                        ],
                    }
                ]
            },
            "messages.0.content.1.source: images must be base64",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [IMAGE | {"source": IMAGE["source"] | {"media_type": "x"}}],
                    }
                ]
            },
            "messages.0.content.0.source.media_type: must be one of",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "t", "content": 5}],
                    }
                ]
            },
            "messages.0.content.0.content: must be a string or an array of content blocks",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": "t",
                                "content": [{"type": "tool_use"}],
                            }
                        ],
                    }
                ]
            },
            "messages.0.content.0.content.0: content block type 'tool_use' is not supported in",
        ),
        (
            {"messages": [{"role": "user", "content": 5}]},
            "messages.0.content: must be a string or an array of content blocks",
        ),
        ({"system": [{"type": "text"}]}, "system.0: must be a text block"),
        ({"tools": [{"input_schema": {}}]}, "tools.0: must be a tool object with a name"),
        (
            {"tools": [{"name": "n", "input_schema": 5}]},
            "tools.0.input_schema: must be an object (a JSON schema)",
        ),
        ({"thinking": {"type": "on"}}, "thinking.type: must be one of"),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 5}},
            "thinking.budget_tokens: must be an integer ≥ 1024",
        ),
        ({"tool_choice": {"type": "tool"}}, "tool_choice.name: Field required when type is"),
        ({"tool_choice": {"type": "some"}}, "tool_choice.type: must be one of"),
    ],
)
def test_content_the_published_model_refuses_is_refused_in_the_apis_words(
    extra: dict[str, Any], message: str
) -> None:
    body = BASE | {"messages": [{"role": "user", "content": "hi"}]} | extra
    with pytest.raises(V1Error) as refused:
        parse_request(body)
    assert refused.value.message.startswith(message), refused.value.message
    field = message.split(":")[0]
    assert refused.value.details == {"field": field}
    if field != "tool_choice.name":  # a name is required by the converter, for type "tool"
        with pytest.raises(ValidationError):
            published(MessagesBody).model_validate(body)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"messages": [{"role": "user", "content": [{"type": "audio"}]}]},
            "messages.0.content.0: part type 'audio' is not supported",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": 5}]}]},
            "messages.0.content.0.image_url.url: images must be data: URLs",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]},
                ]
            },
            "messages.1.tool_calls.0: must have an id and a function name",
        ),
        ({"tools": [{"type": "function"}]}, "tools.0: must be {'type': 'function'"),
        ({"tool_choice": "sometimes"}, "tool_choice: must be 'auto', 'none', 'required'"),
        (
            {"tool_choice": {"type": "function", "function": {}}},
            "tool_choice: must be 'auto', 'none', 'required'",
        ),
    ],
)
def test_chat_content_the_published_model_refuses_is_refused_in_the_apis_words(
    extra: dict[str, Any], message: str
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]} | extra
    with pytest.raises(V1Error) as refused:
        parse_chat_request(body)
    assert refused.value.message.startswith(message), refused.value.message
    with pytest.raises(ValidationError):
        published(ChatBody).model_validate(body)
