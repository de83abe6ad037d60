"""/openapi.json and the server agree both ways, and a schemathesis run against the
live sidecar, with every check on, finds no failure."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from hypothesis.configuration import storage_directory

from kernel.gateway.console import is_console
from kernel.gateway.server import PUBLIC_PATHS, Gateway
from tests.gateway.conftest import API_KEY, SidecarFactory
from tests.prompts.test_modes import claude_files, codex_files
from tests.sim.anthropic_sim import AnthropicSim


def served_routes(gateway: Gateway) -> set[tuple[str, str]]:
    """Every API route served (the web console's own pages, sign-in and static files
    under /console/ are not the API: the console calls the documented routes)."""
    app = gateway.build_app()
    return {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
        and route.method != "HEAD"
        and not is_console(route.resource.canonical)
    }


async def test_every_route_is_documented_and_every_documented_route_exists(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    status, doc, _ = await sc.call("GET", "/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.")
    documented = {(method.upper(), path) for path, item in doc["paths"].items() for method in item}
    assert documented == served_routes(sc.gateway)
    operation_ids = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            operation_ids.append(op["operationId"])
            assert op["summary"] and op["tags"], (method, path)
            ok = [code for code in op["responses"] if code.startswith("2")]
            assert ok, (method, path)
            if path in PUBLIC_PATHS:
                assert op["security"] == [] and "401" not in op["responses"]
            elif path == "/channels/qq/inbound":  # signed by the platform, no key
                assert op["security"] == [] and "401" in op["responses"]
            else:
                assert op["security"] and "401" in op["responses"], (method, path)
            if "requestBody" in op:
                assert {"400", "413"} <= set(op["responses"]), (method, path)
                if "application/json" in op["requestBody"]["content"]:
                    assert "415" in op["responses"], (method, path)  # read_json refuses
            for param in op.get("parameters", []):
                if param["in"] == "path":
                    assert "{" + param["name"] + "}" in path
    assert len(operation_ids) == len(set(operation_ids))
    assert {"/agent/process", "/v1/messages", "/chats/batch-delete"} <= set(doc["paths"])
    # OpenAI's routes document OpenAI's error shape ({error: {message, type, param, code}}).
    responses = doc["paths"]["/v1/responses"]["post"]
    assert "text/event-stream" in responses["responses"]["200"]["content"]
    for path, method in (("/v1/responses", "post"), ("/v1/responses/{response_id}", "delete")):
        error = doc["paths"][path][method]["responses"]["404"]["content"]["application/json"]
        assert error["schema"]["$ref"] == "#/components/schemas/OpenAIError"


async def test_what_the_document_says_of_media_types_and_nulls(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    (tmp_path / "ws").mkdir()
    sc = await sidecar(anthropic_sim, default_workspace=str(tmp_path / "ws"))
    _, doc, _ = await sc.call("GET", "/openapi.json")
    paths = doc["paths"]
    read = paths["/workspace/files/{path}"]["get"]["responses"]["200"]["content"]
    assert list(read) == ["application/octet-stream"]
    upload = paths["/workspace/uploads"]["post"]["requestBody"]["content"]
    assert list(upload) == ["multipart/form-data"]
    job = paths["/cron/jobs/{job_id}"]["get"]["responses"]["200"]["content"]
    assert job["application/json"]["schema"]["properties"]["workflow"]["nullable"] is True
    assert set(paths["/chats"]["post"]["responses"]) >= {"200", "201", "415"}
    # What the server does: a picture is served as a download, as documented.
    octets = {"Content-Type": "application/octet-stream"}
    await sc.call("PUT", "/workspace/files/a.png", data=b"\x89PNG", headers=octets)
    async with sc.http.get(sc.url + "/workspace/files/a.png") as response:
        assert response.status == 200
        assert response.content_type == "application/octet-stream"
    status, job_data, _ = await sc.call("GET", "/cron/jobs/cron-default")
    assert status == 200 and job_data["workflow"] is None
    # PUT on the channel types list is not a channel, and OPTIONS lists only real methods.
    status, data, _ = await sc.call("PUT", "/config/channels/types", {"enabled": True})
    assert status == 405 and data["error"]["details"]["allowed"] == ["GET"]
    status, data, response = await sc.call("OPTIONS", "/chats/batch-delete")
    assert status == 405 and response.headers["Allow"] == "POST"


ST_CONFIG = """
[checks]
not_a_server_error.enabled = true
status_code_conformance.enabled = true
content_type_conformance.enabled = true
response_schema_conformance.enabled = true
response_headers_conformance.enabled = true
negative_data_rejection.enabled = true
use_after_free.enabled = true
ensure_resource_availability.enabled = true
missing_required_header.enabled = true
ignored_auth.enabled = true
unsupported_method.enabled = true
allow_header_conformance.enabled = true
# Off: schema-valid requests the server still refuses (a workspace path with control
# characters, a cron expression that does not parse): the schemas do not say every rule.
positive_data_acceptance.enabled = false

# /v1/messages mirrors Anthropic's Messages API, as lenient as Anthropic's own server
# with fields its schema types more narrowly (an SDK sends them anyway).
[[operations]]
include-path-regex = "^/v1/messages"
checks.negative_data_rejection.enabled = false

# Adding an MCP server starts its command (stdio): generated definitions must never run
# whatever executable a fuzzed name happens to match. Its refusals have their own tests.
[[operations]]
include-name = "POST /mcp/servers"
enabled = false

# /mcp speaks the MCP protocol (JSON-RPC over SSE): the document describes its messages
# and every kind of answer (tests/mcp/test_endpoint_refusals.py checks each against it),
# but a generated tools/call of approve waits for the owner. Its refusals have their own
# tests there too.
[[operations]]
include-path-regex = "^/mcp$"
enabled = false
"""


@pytest.mark.slow
@pytest.mark.long  # minutes on a loaded machine: a worker of its own
@pytest.mark.timeout(600)  # about a minute alone; the default 60 s is for a busy machine too
async def test_schemathesis_finds_no_failure_with_every_check(
    sidecar: SidecarFactory, tmp_path: Path
) -> None:
    """Generated and mutated requests to every operation (bounded examples, fixed seed),
    with every check on (ST_CONFIG): no 5xx, and every status code, content type, header
    and body is the one /openapi.json documents; invalid data is refused.
    Phases: coverage (boundary values of every keyword), fuzzing, stateful (links)."""
    model = await AnthropicSim(fallback="echo").start()  # every model request answered
    (tmp_path / "schemathesis.toml").write_text(ST_CONFIG)
    # The prompt modes' files are there: without them a request for prompt_mode codex or
    # claude is the seed's documented 500 *_prompt_unavailable (tests/prompts/test_modes.py).
    codex_files(tmp_path)
    claude_files(tmp_path)
    try:
        # ignored_auth sends wrong keys: throttled at the shipped limits, the key itself
        # would wait a minute (tests/gateway/test_key_guesses.py); the 429 is documented.
        guesses = {"max_key_guesses": 100_000, "max_key_guesses_per_client": 100_000}
        sc = await sidecar(model, api_key=API_KEY, gateway=guesses)
        st = Path(sys.executable).parent / "st"
        hypothesis_home = storage_directory(intent_to_write=False)
        process = await asyncio.create_subprocess_exec(
            str(st),
            "--config-file",
            str(tmp_path / "schemathesis.toml"),
            "run",
            f"{sc.url}/openapi.json",
            "--phases",
            "coverage,fuzzing,stateful",
            "--max-examples",
            "8",
            "--seed",
            "7",
            "--generation-database",
            "none",
            "--workers",
            "1",
            "--no-color",
            "--request-timeout",
            "30",
            "-H",
            f"X-API-Key: {API_KEY}",
            cwd=tmp_path,
            # Hypothesis's Unicode tables (2 s of CPU to build) from the run's shared
            # folder (tests/conftest.py), where the suite's own property tests keep them.
            env=os.environ | {"HYPOTHESIS_STORAGE_DIRECTORY": str(hypothesis_home.path)},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            output, _ = await asyncio.wait_for(process.communicate(), timeout=560)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    finally:
        await model.stop()
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-6000:]
    assert "passed" in text and "ST1" not in text and "ST2" not in text
