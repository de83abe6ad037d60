"""SelfOps under hostile input (issue 12): a preview of one huge line leaves the event
loop answering, an over-large result is refused before it is built, and secrets are seen
in every shape a prompt file may hold them (JSON inside strings, command-line flags,
Markdown tables, camelCase names), while prose that merely mentions them is not."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kernel.selfops.mutations import MAX_FILE_BYTES, _added_sensitive, _mask_lines
from tests.gateway.conftest import SidecarFactory
from tests.selfops.test_mutations import PREVIEW, preview
from tests.sim.anthropic_sim import AnthropicSim

SECRET = "sk-live-9f8e7d6c5b4a39281706"
MASKED = SECRET[:4] + "…" + SECRET[-4:]


async def test_a_200_kb_line_is_previewed_while_the_loop_keeps_answering(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    # 200 KB of name characters: the old pattern backtracked quadratically on it
    # (minutes, with the loop frozen); /healthz is asked while the preview runs.
    sc = await sidecar(anthropic_sim)
    line = "x" * 200_000
    op = {"kind": "replace", "path": "SOUL.md", "value": line + "\n"}
    body = {"target": "workspace_file", "operations": [op]}
    previewing = asyncio.create_task(sc.call("POST", PREVIEW, body))
    health, _, _ = await sc.call("GET", "/healthz")
    status, data, _ = await previewing
    assert health == 200
    assert status == 200, data
    assert data["requires_sensitive_allow"] is False
    assert data["diff_summary"][0]["added_lines"] == 1


async def test_a_preview_larger_than_the_limit_is_refused_naming_it(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, gateway={"max_body_bytes": 2 * MAX_FILE_BYTES})
    op = {"kind": "replace", "path": "SOUL.md", "value": "y" * (MAX_FILE_BYTES + 1)}
    status, data, _ = await sc.call(
        "POST", PREVIEW, {"target": "workspace_file", "operations": [op]}
    )
    assert status == 400, data
    assert str(MAX_FILE_BYTES) in data["error"]["message"]
    # A rewrite that would grow past the limit is refused before it is built: one
    # character replaced by 64 KB, 100 times over, would be 6.4 MB.
    seed = {"kind": "replace", "path": "prompts/p.md", "value": "a" * 100}
    grow = {"kind": "text_rewrite", "path": "prompts/p.md", "search": "a", "replace": "b" * 65536}
    status, data, _ = await sc.call(
        "POST", PREVIEW, {"target": "workspace_file", "operations": [seed, grow]}
    )
    assert status == 400, data
    assert str(MAX_FILE_BYTES) in data["error"]["message"]


SHAPES = {
    "json": f'{{"api_key": "{SECRET}"}}',
    "json inside a string": f'config = "{{\\"api_key\\": \\"{SECRET}\\"}}"',
    "flag and value": f"claude --api-key {SECRET} -p hi",
    "flag=value": f"curl --token={SECRET} https://example.com",
    "markdown table": f"| api_key | {SECRET} |",
    "camelCase accessToken": f"accessToken: {SECRET}",
    "camelCase clientSecret": f'clientSecret = "{SECRET}"',
    "camelCase apiKey in JSON": f'{{"apiKey": "{SECRET}"}}',
    "bearer header": f"Authorization: Bearer {SECRET}",
    "x-api-key header": f"x-api-key: {SECRET}",
    "xml": f"<clientSecret>{SECRET}</clientSecret>",
}


@pytest.mark.parametrize("text", SHAPES.values(), ids=SHAPES.keys())
def test_each_shape_of_a_secret_is_seen_and_masked(text: str) -> None:
    assert _added_sensitive("", text), text
    masked = _mask_lines(text)
    assert SECRET not in masked and MASKED in masked


@pytest.mark.parametrize(
    "text",
    [
        "Use your token when asked, and keep the password safe.",
        "The tokenizer splits text: it is fast.",
        "max_tokens = 4096",
        "call --token --verbose",
        "| name | description |",
    ],
)
def test_prose_that_mentions_a_secret_is_not_sensitive(text: str) -> None:
    assert _added_sensitive("", text) == []
    assert _mask_lines(text) == text


async def test_new_shapes_need_allowance_through_the_sidecar(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    for name in ("flag and value", "markdown table", "camelCase accessToken"):
        op = {"kind": "replace", "path": "prompts/keys.md", "value": SHAPES[name] + "\n"}
        p = await preview(sc, "workspace_file", op)
        assert p["requires_sensitive_allow"] is True, name
        assert SECRET not in p["unified_diff"] and MASKED in p["unified_diff"], name


HOSTILE = {
    "name characters": "a" * 200_000,
    "dotted names": "a." * 100_000 + "=",
    "flags": "--a " * 50_000,
    "table bars": "| " * 100_000,
    "a name then spaces": "token" + " " * 200_000,
    "escaped quotes": 'k\\"' * 60_000,
}


@pytest.mark.parametrize("line", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_scan_is_linear_on_hostile_lines(line: str) -> None:
    # In a thread with a generous bound: a quadratic scan of 200 KB takes minutes.
    done = threading.Event()

    def scan() -> None:
        _added_sensitive("", line)
        _mask_lines(line)
        done.set()

    threading.Thread(target=scan, daemon=True).start()
    assert done.wait(30)
