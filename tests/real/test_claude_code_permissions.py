"""The real Claude Code (``@anthropic-ai/claude-code`` from npm) asking a permission-prompt
tool over MCP (issue 19 point 2), pointed at the Anthropic simulator scripted to call
``Bash``.

First against a tiny recording MCP server written here with the SDK's ``MCPServer``: what
claude sends to ``--permission-prompt-tool`` (the wire shape docs/cli-wire.md records)
and which answers make the command run. A new claude release that changes either fails
here first.

    scripts/install-real-clients
    KERNEL_TEST_REAL_CLIENTS=1 uv run pytest tests/real/test_claude_code_permissions.py -v
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer

import tests.sim.anthropic_sim as anthropic_sim
from tests.conftest import free_port
from tests.real import ENV, SKIP_REASON
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Reply, ToolUse, text_reply, tool_reply

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get(ENV), reason=SKIP_REASON),
]

RUN_LIMIT = 300.0  # a generous bound on one claude -p run, only so a hang cannot block CI
TOKEN = "run-token-0123456789abcdef"
PERMISSION_TOOL = "mcp__kernel__approve"
DENIAL = "The owner denied this command."


def _without_system_role(validate: Any) -> Any:
    """Claude Code 2.x sends ``role: "system"`` messages, which the strict simulator
    rejects; the rest of each request is checked as usual."""

    def relaxed(body: dict[str, Any]) -> str | None:
        messages = [m for m in body.get("messages", []) if m.get("role") != "system"]
        return validate({**body, "messages": messages})

    return relaxed


@pytest.fixture
def claude(real_bin: Callable[[str], Path]) -> Path:
    return real_bin("claude")


@pytest.fixture
async def cli_model(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[AnthropicSim]:
    """The model claude talks to: scripted replies, then the echo (never an empty queue)."""
    monkeypatch.setattr(
        anthropic_sim, "validate_request", _without_system_role(anthropic_sim.validate_request)
    )
    async with AnthropicSim(fallback="echo") as sim:
        yield sim


def claude_env(home: Path, model_url: str) -> dict[str, str]:
    """Claude Code as a new user runs it, pointed at the simulator, never the internet."""
    home.mkdir(parents=True, exist_ok=True)
    keep = ("PATH", "LANG", "TERM")
    return {k: v for k, v in os.environ.items() if k in keep} | {
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": model_url,
        "ANTHROPIC_API_KEY": "sk-test-claude-code-0123456789",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


# --------------------------------------------------------------------------------------
# A recording permission server
# --------------------------------------------------------------------------------------


@dataclass
class Recorder:
    """What claude sent to the MCP endpoint, and what ``approve`` answers (``answer``
    gets the arguments; it returns the text, or raises to make a tool error)."""

    answer: Callable[[dict[str, Any]], str | Awaitable[str]]
    structured: bool = False  # declare an output schema (the SDK's default for -> str)
    calls: list[dict[str, Any]] = field(default_factory=list)  # approve's arguments
    requests: list[dict[str, Any]] = field(default_factory=list)  # method, headers, body
    responses: dict[int, str] = field(default_factory=dict)  # request index → content-type

    def app(self) -> Any:
        server = MCPServer("kernel", log_level="WARNING")

        # structured_output=False: a result with structuredContent is refused by claude
        # 2.1.332 ("Expected a single text block"), see test_structured_content_is_refused.
        @server.tool(structured_output=self.structured)
        async def approve(tool_name: str, input: dict[str, Any], tool_use_id: str = "") -> str:
            """Claude Code's permission prompt."""
            arguments = {"tool_name": tool_name, "input": input, "tool_use_id": tool_use_id}
            self.calls.append(arguments)
            answer = self.answer(arguments)
            return await answer if inspect.isawaitable(answer) else answer

        inner = server.streamable_http_app()

        async def recording(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await inner(scope, receive, send)
                return
            entry: dict[str, Any] = {
                "method": scope["method"],
                "headers": {k.decode().lower(): v.decode() for k, v in scope["headers"]},
                "body": b"",
            }
            index = len(self.requests)
            self.requests.append(entry)

            async def receive_recorded() -> Any:
                message = await receive()
                entry["body"] += message.get("body", b"")
                return message

            async def send_recorded(message: Any) -> None:
                if message["type"] == "http.response.start":
                    headers = {k.decode().lower(): v.decode() for k, v in message["headers"]}
                    self.responses[index] = headers.get("content-type", "")
                await send(message)

            await inner(scope, receive_recorded, send_recorded)

        return recording

    def tool_calls(self) -> list[dict[str, Any]]:
        """The JSON-RPC ``tools/call`` requests received, whole."""
        found = []
        for entry in self.requests:
            try:
                body = json.loads(entry["body"] or b"null")
            except ValueError:
                continue
            if isinstance(body, dict) and body.get("method") == "tools/call":
                found.append({"headers": entry["headers"], "body": body})
        return found


@dataclass
class Served:
    recorder: Recorder
    url: str


@pytest.fixture
async def permission_server() -> AsyncIterator[Callable[[Recorder], Any]]:
    """``await serve(recorder)``: the recorder's app under uvicorn on a loopback port."""
    servers: list[tuple[uvicorn.Server, asyncio.Task[None]]] = []

    async def serve(recorder: Recorder) -> Served:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = uvicorn.Server(
            uvicorn.Config(recorder.app(), log_level="warning", timeout_graceful_shutdown=1)
        )
        task = asyncio.create_task(server.serve(sockets=[sock]))
        servers.append((server, task))
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
        return Served(recorder, f"http://127.0.0.1:{port}/mcp")

    yield serve
    for server, task in servers:
        server.should_exit = True
        await task


@dataclass
class Run:
    exit_code: int
    events: list[dict[str, Any]]
    stderr: str

    def tool_results(self) -> list[dict[str, Any]]:
        return [
            block
            for event in self.events
            if event.get("type") == "user"
            for block in event["message"]["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]

    def result(self) -> dict[str, Any]:
        return next(e for e in self.events if e.get("type") == "result")


def write_mcp_config(folder: Path, url: str, **extra: Any) -> Path:
    """The file Kernel writes per run (design: data/run/<stamp>/mcp.json)."""
    path = folder / "mcp.json"
    server = {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {TOKEN}"}}
    server |= extra
    path.write_text(json.dumps({"mcpServers": {"kernel": server}}), encoding="utf-8")
    return path


async def run_claude(claude: Path, env: dict[str, str], cwd: Path, config: Path, task: str) -> Run:
    argv = [
        str(claude),
        "-p",
        "--output-format=stream-json",
        "--verbose",
        "--mcp-config",
        str(config),
        "--permission-prompt-tool",
        PERMISSION_TOOL,
        "--",
        task,
    ]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(RUN_LIMIT):
            out, err = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    events = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    assert proc.returncode is not None
    return Run(proc.returncode, events, err.decode(errors="replace"))


@dataclass
class Scene:
    """A workspace with a marker path, claude's model scripted to ``touch`` it."""

    claude: Path
    model: AnthropicSim
    env: dict[str, str]
    work: Path
    marker: Path

    @property
    def command(self) -> str:
        return f"touch {self.marker}"

    async def run(self, served: Served, **server: Any) -> Run:
        """One ``claude -p`` run; ``server``: more keys of the server's mcp.json entry."""
        self.model.enqueue(
            tool_reply("Bash", {"command": self.command, "description": "Create the marker"}),
            text_reply("Finished."),
        )
        config = write_mcp_config(self.work.parent, served.url, **server)
        return await run_claude(self.claude, self.env, self.work, config, "Make the marker")


@pytest.fixture
def scene(claude: Path, cli_model: AnthropicSim, tmp_path: Path) -> Scene:
    work = tmp_path / "work"
    work.mkdir()
    env = claude_env(tmp_path / "home", cli_model.base_url)
    return Scene(claude, cli_model, env, work, work / "marker")


def allow(arguments: dict[str, Any]) -> str:
    return json.dumps({"behavior": "allow", "updatedInput": arguments["input"]})


def deny(arguments: dict[str, Any]) -> str:
    return json.dumps({"behavior": "deny", "message": DENIAL})


# --------------------------------------------------------------------------------------
# The recorded wire shape
# --------------------------------------------------------------------------------------


@pytest.mark.timeout(600)
async def test_claude_code_asks_the_permission_tool_with_the_recorded_shape(
    scene: Scene, permission_server: Callable[[Recorder], Any]
) -> None:
    served = await permission_server(Recorder(allow))
    run = await scene.run(served)

    assert run.exit_code == 0, run.stderr
    assert scene.marker.exists()  # allowed: the command ran
    recorder = served.recorder
    assert len(recorder.calls) == 1
    arguments = recorder.calls[0]
    assert arguments["tool_name"] == "Bash"
    assert arguments["input"] == {"command": scene.command, "description": "Create the marker"}
    assert arguments["tool_use_id"].startswith("toolu_")
    [call] = recorder.tool_calls()
    params = call["body"]["params"]
    assert params["name"] == "approve"
    assert set(params["arguments"]) == {"tool_name", "input", "tool_use_id"}
    # Every request carries the header from mcp.json and the protocol version.
    for entry in recorder.requests:
        assert entry["headers"]["authorization"] == f"Bearer {TOKEN}"
        assert entry["headers"].get("mcp-protocol-version")
    headers = call["headers"]
    assert headers["accept"] == "application/json, text/event-stream"
    assert headers["user-agent"].startswith("claude-code/")
    print(
        "permission call:",
        json.dumps(params["arguments"]),
        "protocol",
        headers["mcp-protocol-version"],
        headers["user-agent"],
    )
    [bash] = run.tool_results()
    assert bash["is_error"] is False
    assert run.result()["permission_denials"] == []


@pytest.mark.timeout(600)
async def test_a_deny_answer_stops_the_command_and_claude_reports_it(
    scene: Scene, permission_server: Callable[[Recorder], Any]
) -> None:
    served = await permission_server(Recorder(deny))
    run = await scene.run(served)

    assert run.exit_code == 0, run.stderr
    assert not scene.marker.exists()
    [bash] = run.tool_results()
    assert bash["is_error"] is True and bash["content"] == DENIAL  # verbatim to its model
    [denied] = run.result()["permission_denials"]
    assert denied["tool_name"] == "Bash"
    assert denied["tool_input"]["command"] == scene.command


def _raise(arguments: dict[str, Any]) -> str:
    raise RuntimeError("the permission server failed")


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("answer", "marker", "failed"),
    [
        # allow without updatedInput: the original input runs
        (lambda a: json.dumps({"behavior": "allow"}), True, False),
        # a changed input is what runs (Kernel never changes it: the owner saw this one)
        (
            lambda a: json.dumps(
                {"behavior": "allow", "updatedInput": {**a["input"], "command": "true"}}
            ),
            False,
            False,
        ),
        (lambda a: "not JSON", False, True),  # malformed: denied, with claude's own message
        (lambda a: json.dumps({"behavior": "maybe"}), False, True),
        (_raise, False, True),  # a tool error (isError): the call fails, nothing runs
    ],
    ids=["allow-without-input", "allow-changed-input", "malformed", "unknown-behavior", "error"],
)
async def test_which_answers_let_the_command_run(
    scene: Scene,
    permission_server: Callable[[Recorder], Any],
    answer: Callable[[dict[str, Any]], str],
    marker: bool,
    failed: bool,
) -> None:
    served = await permission_server(Recorder(answer))
    run = await scene.run(served)

    assert run.exit_code == 0, run.stderr
    assert len(served.recorder.calls) == 1
    assert scene.marker.exists() is marker
    [bash] = run.tool_results()
    assert bash["is_error"] is failed


@pytest.mark.timeout(600)
async def test_structured_content_is_refused(
    scene: Scene, permission_server: Callable[[Recorder], Any]
) -> None:
    """The SDK's default for a ``-> str`` tool adds an output schema and
    ``structuredContent``; claude 2.1.332 then refuses even a valid allow."""
    served = await permission_server(Recorder(allow, structured=True))
    run = await scene.run(served)

    assert len(served.recorder.calls) == 1
    assert not scene.marker.exists()
    [bash] = run.tool_results()
    assert bash["is_error"] is True and "single text block" in bash["content"]


@pytest.mark.timeout(600)
async def test_the_servers_timeout_key_bounds_the_wait_and_denies(
    scene: Scene, permission_server: Callable[[Recorder], Any]
) -> None:
    """mcp.json's per-server ``timeout`` (ms) is claude's wall-clock limit on one call,
    the permission call included (progress notifications do not extend it): past it the
    command does not run. Kernel must set it above ``approval_timeout``."""

    async def late(arguments: dict[str, Any]) -> str:
        await asyncio.sleep(30)  # well past the 2 s below; cut short at teardown
        return allow(arguments)

    served = await permission_server(Recorder(late))
    run = await scene.run(served, timeout=2000)

    assert len(served.recorder.calls) == 1
    assert not scene.marker.exists()
    [bash] = run.tool_results()
    assert bash["is_error"] is True and "timed out" in bash["content"]


@pytest.mark.timeout(600)
async def test_an_unreachable_permission_server_fails_closed(scene: Scene) -> None:
    """Kernel down (or a token it refuses): claude starts, and the first tool that needs
    permission is not run; claude exits 1 naming the missing permission tool."""
    nobody = Served(Recorder(allow), f"http://127.0.0.1:{free_port()}/mcp")  # refused
    run = await scene.run(nobody)

    assert run.exit_code == 1
    assert not scene.marker.exists()
    init = next(e for e in run.events if e.get("subtype") == "init")
    assert init["mcp_servers"] == [{"name": "kernel", "status": "failed", "source": "dynamic"}]
    [bash] = run.tool_results()
    assert bash["is_error"] is True and PERMISSION_TOOL in bash["content"]
    assert f"{PERMISSION_TOOL} (passed via --permission-prompt-tool) not found" in run.stderr


@pytest.mark.timeout(600)
async def test_parallel_tool_calls_are_asked_one_at_a_time(
    scene: Scene, permission_server: Callable[[Recorder], Any]
) -> None:
    """Two Bash calls in one model reply: claude 2.1.332 sends the second permission
    call only after the first was answered (the stand-in's STANDIN_PARALLEL asks both
    at once, a harder case for Kernel than the real one)."""
    in_flight: list[int] = []
    busy = 0

    async def slow_allow(arguments: dict[str, Any]) -> str:
        nonlocal busy
        busy += 1
        in_flight.append(busy)
        try:
            await asyncio.sleep(1.0)  # room for a concurrent call, were claude to send one
            return allow(arguments)
        finally:
            busy -= 1

    served = await permission_server(Recorder(slow_allow))
    second = scene.work / "second"
    scene.model.enqueue(
        Reply(
            ToolUse("Bash", {"command": scene.command, "description": "First"}),
            ToolUse("Bash", {"command": f"touch {second}", "description": "Second"}),
        ),
        text_reply("Finished."),
    )
    config = write_mcp_config(scene.work.parent, served.url)
    run = await run_claude(scene.claude, scene.env, scene.work, config, "Make both")

    assert run.exit_code == 0, run.stderr
    assert scene.marker.exists() and second.exists()
    assert [c["input"]["description"] for c in served.recorder.calls] == ["First", "Second"]
    assert in_flight == [1, 1]
