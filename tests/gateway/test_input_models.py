"""The models of ``/agent/process``'s ``input``, ``/envs`` and the SelfOps bodies say what
their handlers accept: every body the other tests send validates against the published
schema and the model, and a refused one is refused by the model in the sidecar's words."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from kernel.core.i18n import get_language, set_language
from kernel.gateway.routes.agent import ProcessBody
from kernel.gateway.routes.envs import EnvBody, EnvsBody
from kernel.gateway.routes.selfops import BootstrapBody, PreviewBody
from kernel.gateway.routes.skills import NewSkill
from kernel.gateway.schema import problem
from tests.gateway.conftest import SidecarFactory, message
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply

PNG = base64.b64encode(bytes.fromhex("89504e470d0a1a0a")).decode()
IMAGE = {"type": "image", "media_type": "image/png", "data": PNG}
NESTED = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}


def published(model: type[BaseModel]) -> dict[str, Any]:
    return TypeAdapter(model).json_schema()


ACCEPTED: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (ProcessBody, {"input": [message("x")], "stream": True, "session_id": "p1"}),
    (ProcessBody, {"input": [{"role": "user", "content": [IMAGE, {"type": "text", "text": "?"}]}]}),
    (ProcessBody, {"input": [{"content": "a plain string"}]}),
    (ProcessBody, {"input": [{"role": "user", "type": "message", "content": [NESTED]}]}),
    (ProcessBody, {"input": [message("x")], "biz_params": {"prompt_mode": "default"}}),
    (ProcessBody, {"input": [message("")], "biz_params": {"tool": {"name": "memory_add"}}}),
    (ProcessBody, {"biz_params": {"tool": {"name": "memory_add", "input": {"text": "a cat"}}}}),
    (BootstrapBody, {"input": [message("hi")], "name": "first", "model": "model-a"}),
    (EnvsBody, {"envs": {"ONLY": "this", "_X1": ""}}),
    (EnvBody, {"value": "ghp_abcdefghijklmnop"}),
    (
        PreviewBody,
        {
            "target": "workspace_file",
            "operations": [
                {"kind": "replace", "path": "prompts/a.md", "value": "A"},
                {"kind": "text_rewrite", "path": "SOUL.md", "search": "Kernel", "replace": "K"},
            ],
            "allow_sensitive": False,
        },
    ),
    (
        PreviewBody,
        {
            "target": "provider_config",
            "operations": [{"kind": "merge", "value": {"main": {"models": ["model-a"]}}}],
        },
    ),
    (
        PreviewBody,
        {
            "target": "active_llm",
            "operations": [{"kind": "replace", "value": {"provider_id": "main", "model": "m"}}],
        },
    ),
    (NewSkill, {"name": "gh", "description": "GitHub", "content": "Use the gh CLI."}),
]


@pytest.mark.parametrize(("model", "body"), ACCEPTED)
def test_what_the_handlers_accept_validates_against_the_published_model(
    model: type[BaseModel], body: dict[str, Any]
) -> None:
    jsonschema.validate(body, published(model))
    model.model_validate(body, context={"key": "GITHUB_TOKEN"})


@pytest.fixture
def english() -> Iterator[None]:
    before = get_language()
    set_language("en")
    yield
    set_language(before)


REFUSED: list[tuple[type[BaseModel], dict[str, Any], str, str]] = [
    (ProcessBody, {"input": "hi"}, "input", "input must be array"),
    (ProcessBody, {"input": []}, "input", "input is missing"),
    (ProcessBody, {"input": [5]}, "input[0]", "input[0] must be object"),
    (ProcessBody, {"input": [{"role": "assistant", "content": "x"}]}, "input[0].role", "user"),
    (ProcessBody, {"input": [{"content": 5}]}, "input[0].content", "must be array"),
    (ProcessBody, {"input": [{}]}, "input[0].content", "must be array"),
    (
        ProcessBody,
        {"input": [{"content": ["x", {"type": "video"}]}]},
        "input[0].content[0]",
        '{"type":"text","text":…}',
    ),
    (
        ProcessBody,
        {"input": [message("x"), {"content": [{"type": "text", "text": 5}]}]},
        "input[1].content[0]",
        '{"type":"text","text":…}',
    ),
    (
        ProcessBody,
        {"input": [{"content": [{**IMAGE, "media_type": "image/bmp"}]}]},
        "input[0].content[0]",
        "must be one of image/jpeg",
    ),
    (
        ProcessBody,
        {"input": [{"content": [{"type": "image", "source": {"media_type": "image/png"}}]}]},
        "input[0].content[0]",
        "non-empty base64",
    ),
    (EnvsBody, {"envs": {"1BAD-NAME": "x"}}, "key", "'1BAD-NAME' is not a valid variable name"),
    (EnvsBody, {"envs": {"OK": 5}}, "OK", "the value of OK must be a string without NUL"),
    (EnvsBody, {"envs": {"OK": "x" * 40_000}}, "OK", "at most 32768 characters"),
    (EnvBody, {"value": "a\0b"}, "GITHUB_TOKEN", "the value of GITHUB_TOKEN must be"),
    (EnvBody, {}, "GITHUB_TOKEN", "the value of GITHUB_TOKEN must be"),
]


@pytest.mark.parametrize(("model", "body", "field", "words"), REFUSED)
def test_the_model_refuses_in_the_sidecars_words(
    english: None, model: type[BaseModel], body: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(body, context={"key": "GITHUB_TOKEN"})
    message_, named = problem(caught.value)
    assert named == field
    assert words in message_, message_


@pytest.mark.parametrize(
    ("model", "body"),
    [
        (ProcessBody, {"input": "hi"}),
        (ProcessBody, {"input": []}),
        (ProcessBody, {"input": [{"role": "assistant", "content": "x"}]}),
        (ProcessBody, {"input": [{"content": [{"type": "video"}]}]}),
        (ProcessBody, {"input": [{"role": "user"}]}),
        (ProcessBody, {"input": [{"content": [{**IMAGE, "media_type": "image/bmp"}]}]}),
        (EnvsBody, {"envs": {"OK": 5}}),
        (EnvBody, {}),
        (PreviewBody, {"target": "workspace_file", "operations": []}),
        (PreviewBody, {"target": "x", "operations": [{"kind": "merge"}]}),
        (PreviewBody, {"target": "active_llm", "operations": [{"kind": "delete"}]}),
    ],
)
def test_what_the_handlers_refuse_the_published_schema_refuses(
    model: type[BaseModel], body: dict[str, Any]
) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(body, published(model))


async def test_a_string_content_and_a_nested_image_source_reach_the_model(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    png = base64.b64encode(
        bytes.fromhex(
            "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
            "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
        )
    ).decode()
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(text_reply("seen"))
    nested = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
    body = {"input": [{"content": "what is this?"}, {"type": "message", "content": [nested]}]}
    status, data, _ = await sc.call("POST", "/agent/process", body)
    assert status == 200 and data["reply"] == "seen", data
    sent = anthropic_sim.requests[-1].body["messages"][-1]["content"]
    assert sent[0]["type"] == "image" and sent[0]["source"]["data"] == png
    assert any(part.get("text") == "what is this?" for part in sent)
