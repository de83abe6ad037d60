"""SelfOps previews of large content and the sensitive-value scan (issue 12, items 2 and
6): a 200 KB single line previews without freezing the process, content over
``gateway.selfops_max_bytes`` is refused clearly, the event loop keeps answering while a
preview is being worked out, and secrets are found in every shape a prompt file holds
them (JSON, command-line flags, Markdown tables, camelCase names, Bearer headers)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

import kernel.selfops.mutations as mutations
from tests.gateway.conftest import SidecarFactory
from tests.selfops.test_mutations import PREVIEW, apply, preview
from tests.sim.anthropic_sim import AnthropicSim

SECRET = "sk-live-9f8e7d6c5b4a39281706"


def _soul(value: str) -> dict[str, Any]:
    return {"kind": "replace", "path": "SOUL.md", "value": value}


async def test_a_200kb_single_line_previews_and_a_larger_one_is_refused(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    sc = await sidecar(anthropic_sim)
    # A run of name characters: what made the old scan backtrack for minutes.
    line = "a" * 200_000
    p = await preview(sc, "workspace_file", _soul(line + "\n"))
    assert p["diff_summary"][0]["added_lines"] == 1
    assert p["requires_sensitive_allow"] is False

    over = "b" * (256 * 1024 + 1)
    status, data, _ = await sc.call(
        "POST", PREVIEW, {"target": "workspace_file", "operations": [_soul(over)]}
    )
    assert status == 400 and data["error"]["code"] == "invalid_request"
    assert "selfops_max_bytes" in data["error"]["message"]
    assert data["error"]["details"]["limit"] == 256 * 1024
    assert data["error"]["details"]["setting"] == "gateway.selfops_max_bytes"
    assert not (tmp_path / "SOUL.md").exists() or over not in (tmp_path / "SOUL.md").read_text()

    # A text_rewrite that would multiply past the limit is refused before it is built.
    (tmp_path / "prompts").mkdir(exist_ok=True)
    (tmp_path / "prompts" / "x.md").write_text("x" * 200_000)
    op = {"kind": "text_rewrite", "path": "prompts/x.md", "search": "x", "replace": "yy"}
    status, data, _ = await sc.call(
        "POST", PREVIEW, {"target": "workspace_file", "operations": [op]}
    )
    assert status == 400 and data["error"]["details"]["path"] == "prompts/x.md"


async def test_the_event_loop_answers_while_a_preview_is_worked_out(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, monkeypatch: pytest.MonkeyPatch
) -> None:
    sc = await sidecar(anthropic_sim)
    entered, release = threading.Event(), threading.Event()
    real = mutations.added_sensitive

    def gated(before: str, after: str) -> list[str]:
        entered.set()
        # On the event loop (the old code) this wait blocks everything, /healthz included,
        # until it gives up; in a worker thread only this preview waits.
        release.wait(10)
        return real(before, after)

    monkeypatch.setattr(mutations, "added_sensitive", gated)
    task = asyncio.create_task(preview(sc, "workspace_file", _soul("c" * 100_000 + "\n")))
    try:
        await asyncio.to_thread(entered.wait, 30)
        status, _, _ = await sc.call("GET", "/healthz", headers={})
        assert status == 200
        assert not task.done(), "the preview held the event loop until it finished"
    finally:
        release.set()
    p = await task
    assert p["diff_summary"][0]["added_lines"] == 1


_ESCAPE = re.compile(r'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])')


def _readings(text: str) -> list[str]:
    """``text`` and what it reads as with its JSON string escapes decoded, 4 times over."""
    out = [text]
    for _ in range(4):
        out.append(_ESCAPE.sub(lambda m: json.loads(f'"{m[0]}"'), out[-1]))
    return out


@pytest.mark.parametrize(
    ("text", "name"),
    [
        (f'{{"api_key": "{SECRET}"}}\n', "api_key"),  # JSON
        (f"gh-tool --api-key {SECRET} list\n", "api-key"),  # flag, value after a space
        (f"curl --token={SECRET} https://example.com\n", "token"),  # flag=value
        (f"| name | value |\n|---|---|\n| api_key | {SECRET} |\n", "api_key"),  # table
        (f"accessToken: {SECRET}\n", "accessToken"),  # camelCase
        (f'clientSecret = "{SECRET}"\n', "clientSecret"),
        (f'const cfg = {{ apiKey: "{SECRET}" }}\n', "apiKey"),
        (f"Authorization: Bearer {SECRET}\n", "Authorization"),
        # JSON inside JSON (issue 33): a key hidden in an escaped string, twice nested.
        (json.dumps({"env": json.dumps({"OPENAI_API_KEY": SECRET})}) + "\n", "OPENAI_API_KEY"),
        (
            json.dumps({"a": json.dumps({"b": json.dumps({"token": SECRET})})}) + "\n",
            "token",
        ),
        # Escapes json.dumps never writes: the value is not found re-escaped.
        (
            '{"env": "{\\"OPENAI_API_KEY\\": \\"' + SECRET[:20] + "\\/" + SECRET[20:] + '\\"}"}\n',
            "OPENAI_API_KEY",
        ),
        (
            '{"env": "{\\"OPENAI_API_KEY\\": \\"sk\\u002d' + SECRET[3:] + '\\"}"}\n',
            "OPENAI_API_KEY",
        ),
    ],
)
async def test_a_secret_in_each_shape_needs_allow_sensitive(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path, text: str, name: str
) -> None:
    sc = await sidecar(anthropic_sim)
    op = {"kind": "replace", "path": "prompts/tools.md", "value": text}
    p = await preview(sc, "workspace_file", op)
    assert p["requires_sensitive_allow"] is True
    assert p["checks"]["sensitive_fields"] == [name]
    for reading in _readings(p["unified_diff"]):
        assert SECRET not in reading.replace("/", "")
    assert SECRET[:4] + "…" + SECRET[-4:] in p["unified_diff"]
    status, data = await apply(sc, p)
    assert status == 403 and data["error"]["code"] == "mutation_sensitive_denied"
    assert not (tmp_path / "prompts" / "tools.md").exists()


@pytest.mark.parametrize(
    "text",
    [
        "Keep the API token secret and never paste it into a chat.\n",
        "Run the tool with --token and it asks for the value.\n",
        "| setting | meaning |\n|---|---|\n| token | the bot token from BotFather |\n",
        "The accessToken field is filled in by the app.\n",
    ],
)
async def test_prose_about_tokens_without_a_value_is_not_sensitive(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path, text: str
) -> None:
    sc = await sidecar(anthropic_sim)
    op = {"kind": "replace", "path": "prompts/howto.md", "value": text}
    p = await preview(sc, "workspace_file", op)
    assert p["requires_sensitive_allow"] is False and p["checks"]["sensitive_fields"] == []
    status, _ = await apply(sc, p)
    assert status == 200 and (tmp_path / "prompts" / "howto.md").read_text() == text


def _nested(inner: str) -> str:
    """A JSON document 99 arrays deep holding ``inner`` as a string."""
    return "[" * 99 + json.dumps(inner) + "]" * 99


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("headers", {"X-A": "[" * 5000}),  # not JSON, too deep for json.loads to say so
        ("default_model", "[" * 990 + "]" * 990),  # JSON, deeper than the sidecar reads
        # Documents inside documents, each as deep as allowed: past what is read, the
        # value counts as sensitive (unread), never a RecursionError.
        ("default_model", _nested(_nested(_nested("x")))),
    ],
)
async def test_a_deeply_nested_value_previews_not_a_500(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, key: str, value: Any
) -> None:
    sc = await sidecar(anthropic_sim)
    op = {"kind": "merge", "value": {"main": {key: value}}}
    status, data, _ = await sc.call(
        "POST", PREVIEW, {"target": "provider_config", "operations": [op]}
    )
    assert status == 200, data
    if key == "headers":
        assert data["checks"]["sensitive_fields"] == ["main.headers", "main.headers.X-A"]
    elif value.startswith("[" * 990):
        assert data["requires_sensitive_allow"] is False, data
    else:
        assert data["checks"]["sensitive_fields"] == ["main.default_model"], data
