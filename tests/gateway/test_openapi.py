"""/openapi.json and the server agree both ways, and a schemathesis run against the
live sidecar finds no server error."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from kernel.gateway.server import PUBLIC_PATHS, Gateway
from tests.gateway.conftest import API_KEY, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim


def served_routes(gateway: Gateway) -> set[tuple[str, str]]:
    app = gateway.build_app()
    return {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None and route.method != "HEAD"
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
            for param in op.get("parameters", []):
                if param["in"] == "path":
                    assert "{" + param["name"] + "}" in path
    assert len(operation_ids) == len(set(operation_ids))
    assert {"/agent/process", "/v1/messages", "/chats/batch-delete"} <= set(doc["paths"])


# Thousands of generated requests over every operation: on a loaded two-core machine
# this takes a minute or more, and grows with each route. The bounds only guard a hang.
@pytest.mark.timeout(300)
async def test_schemathesis_finds_no_server_error(sidecar: SidecarFactory, tmp_path: Path) -> None:
    """Generated and mutated requests to every operation (bounded examples, fixed seed):
    whatever comes in, the answer is never a 5xx."""
    model = await AnthropicSim(fallback="echo").start()  # every model request answered
    try:
        sc = await sidecar(model, api_key=API_KEY)
        st = Path(sys.executable).parent / "st"
        process = await asyncio.create_subprocess_exec(
            str(st),
            "run",
            f"{sc.url}/openapi.json",
            "--checks",
            "not_a_server_error",
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
            "10",
            "-H",
            f"X-API-Key: {API_KEY}",
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            output, _ = await asyncio.wait_for(process.communicate(), timeout=270)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    finally:
        await model.stop()
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-4000:]
    assert "passed" in text and "ST101" not in text
