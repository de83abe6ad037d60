"""A stand-in Claude Code that asks its permission prompts through an MCP tool.

Run as ``[cli.claude_code] command`` (see :func:`make_permission_cli`), it takes the argv
the Delegator builds for ``approvals = "telegram"`` (``-p --output-format=stream-json
--verbose --mcp-config <file> --permission-prompt-tool mcp__kernel__approve -- <task>``)
and does what Claude Code 2.1.332 does in print mode with a permission prompt tool, as
recorded in ``docs/cli-wire.md``: it reads the ``--mcp-config`` file, connects to the
named server over streamable HTTP with the file's headers (the ``mcp`` SDK's client,
protocol 2026-07-28: ``server/discover``, no ``initialize``), lists its tools, and before
each tool call calls the prompt tool with exactly ``{"tool_name", "input",
"tool_use_id"}``. It reads the result as Claude Code does: one text content holding
``{"behavior": "allow", "updatedInput"?: {...}}`` runs the call (with ``updatedInput``
when given); ``{"behavior": "deny", "message": "..."}``, a tool error, anything else
(not JSON, an unknown behavior, ``structuredContent`` beside the text) or no answer
within the server's ``timeout`` (ms; 300 s without one) does not run it, and the model
gets an error tool result. It prints stream-json lines (``system/init``, ``assistant``
tool_use, ``user`` tool_result, ``result`` with ``permission_denials``) as the recorded
stand-ins in :mod:`tests.delegate.standins` do.

Behaviour from the environment (the child inherits the test's):

- ``STANDIN_CALLS``: a JSON list of ``{"name": "Bash", "input": {...}}`` tool calls
  (default: one ``Bash`` ``git status``).
- ``STANDIN_PARALLEL=1``: all calls in one assistant message, their prompts asked at
  once (as several MCP clients may; Claude Code 2.1.332 itself asks one at a time);
  else one after another.
- ``STANDIN_PAUSE``: seconds before each call one after another (the model's turn).
- ``STANDIN_START``: a file to wait for before the first call (the test sets a fault
  up first).
- ``STANDIN_RAN``: a file that gets one JSON line per call that ran (``{"name",
  "input"}`` with the input the prompt tool returned): the "command" runs only when
  allowed, and runs nothing else.
- ``STANDIN_TIMES``: a file that gets one JSON line per prompt: ``{"tool_use_id",
  "sent", "answered", "behavior"}`` (``time.monotonic()``, one clock for every process
  of the machine) for the benchmark.
- ``STANDIN_RECORD``: a file that gets ``{"argv", "pid", "config"}`` (the config file's
  content) at start.
- ``STANDIN_HOLD``: a file to wait for after the last tool result (with an assistant
  text event first, so the delegation shows a step): the run goes on until the test
  lets it end.

Without a usable prompt tool (no config, the server unreachable or refusing, the tool
not listed) it fails closed as Claude Code does: nothing runs, an error on stderr, exit 1.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

HERE = Path(__file__).resolve()
DEFAULT_CALLS = [{"name": "Bash", "input": {"command": "git status", "description": "Status"}}]
SESSION = "s-perm-1"


# The executable: this file run by the test's Python, forked from the test run's zygote
# (which has imported the mcp SDK's client: a second of CPU less a start) through
# tests/mcp/launch.py when the environment names one, so that the Delegator's process
# group holds the launcher, which passes its signals on and whose death by SIGKILL ends
# the stand-in too.
EXECUTABLE = """#!{python}
import os, runpy, sys
address = os.environ.get({address!r}, "")
if address:
    sys.argv[1:1] = [address.split(":", 1)[1], {script!r}]
    runpy.run_path({launch!r}, run_name="__main__")
else:
    runpy.run_path({script!r}, run_name="__main__")
"""


def make_permission_cli(folder: Path, name: str = "claude") -> Path:
    """An executable running this file with the test's Python; returns its path."""
    from tests.zygote import ADDRESS, LAUNCH

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(
        EXECUTABLE.format(
            python=sys.executable, address=ADDRESS, script=str(HERE), launch=str(LAUNCH)
        ),
        encoding="utf-8",
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def parse(argv: list[str]) -> tuple[dict[str, str], str]:
    """The options this stand-in reads, and the task (after ``--``)."""
    options: dict[str, str] = {}
    task, i = "", 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            task = " ".join(argv[i + 1 :])
            break
        if arg.startswith("--") and "=" in arg:
            key, _, value = arg.partition("=")
            options[key] = value
        elif arg in ("--mcp-config", "--permission-prompt-tool", "--output-format"):
            i += 1
            options[arg] = argv[i] if i < len(argv) else ""
        i += 1
    return options, task


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def append(path: str | None, line: dict[str, Any]) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


def released(path: str) -> bool:
    return os.path.exists(path)


def fail(message: str) -> NoReturn:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    sys.exit(1)


def server_of(options: dict[str, str]) -> tuple[str, str, dict[str, Any]]:
    """(server name, tool name, the server's entry) from the two options."""
    prompt_tool = options.get("--permission-prompt-tool", "")
    parts = prompt_tool.split("__")
    if len(parts) != 3 or parts[0] != "mcp":
        fail(f"Error: --permission-prompt-tool {prompt_tool} is not an MCP tool")
    config_path = options.get("--mcp-config", "")
    try:
        config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        fail(f"Error: Invalid MCP configuration: {config_path}: {type(exc).__name__}")
    servers = config.get("mcpServers", {})
    if parts[1] not in servers:
        fail(f"Error: MCP tool {prompt_tool} (passed via --permission-prompt-tool) not found")
    return parts[1], parts[2], servers[parts[1]]


INVALID = (
    "The permission prompt tool returned an invalid permission result. Expected "
    "{behavior: 'allow', updatedInput?: object} or {behavior: 'deny', message: string}"
)
NOT_TEXT = "Permission prompt tool returned an invalid result. Expected a single text block param"


def decision_of(result: Any) -> dict[str, Any]:
    """What Claude Code 2.1.332 makes of the prompt tool's result (docs/cli-wire.md)."""
    texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    if result.is_error:
        return {"behavior": "deny", "message": "Error calling tool: " + " ".join(texts)[:300]}
    if result.structured_content is not None or len(texts) != 1 or len(result.content) != 1:
        return {"behavior": "deny", "message": NOT_TEXT}
    try:
        decision = json.loads(texts[0])
    except ValueError:
        return {"behavior": "deny", "message": INVALID}
    if not isinstance(decision, dict) or decision.get("behavior") not in ("allow", "deny"):
        return {"behavior": "deny", "message": INVALID}
    return decision


async def ask(
    session: Any, tool: str, use_id: str, call: dict[str, Any], limit: float
) -> dict[str, Any]:
    """One permission prompt: the tool's decision, as Claude Code reads it; ``limit``:
    the server's ``timeout`` (seconds), after which Claude Code gives up (not run)."""
    arguments = {"tool_name": call["name"], "input": call["input"], "tool_use_id": use_id}
    sent = time.monotonic()
    try:
        result = await asyncio.wait_for(session.call_tool(tool, arguments), limit)
        decision = decision_of(result)
    except TimeoutError:
        message = f'MCP server "kernel" tool "{tool}" timed out after {limit:g}s'
        decision = {"behavior": "deny", "message": message}
    except Exception as exc:  # Claude Code denies a call its prompt tool did not allow
        decision = {"behavior": "deny", "message": f"Error calling tool: {exc!r}"[:300]}
    append(
        os.environ.get("STANDIN_TIMES"),
        {
            "tool_use_id": use_id,
            "sent": sent,
            "answered": time.monotonic(),
            "behavior": decision["behavior"],
        },
    )
    return dict(decision)


def run_call(use_id: str, call: dict[str, Any], decision: dict[str, Any]) -> dict[str, Any]:
    """The tool_result block: the call "ran" (recorded) only when allowed."""
    if decision["behavior"] == "allow":
        updated = decision.get("updatedInput")
        given = updated if isinstance(updated, dict) else call["input"]
        append(os.environ.get("STANDIN_RAN"), {"name": call["name"], "input": given})
        output = f"ran {call['name']}: {given.get('command', json.dumps(given))}"
        return {"tool_use_id": use_id, "type": "tool_result", "content": output}
    return {
        "tool_use_id": use_id,
        "type": "tool_result",
        "content": str(decision.get("message") or "Permission denied"),
        "is_error": True,
    }


async def session_run(
    server: dict[str, Any], name: str, tool: str, calls: list[dict[str, Any]], parallel: bool
) -> list[dict[str, Any]] | None:
    """Connect, check the prompt tool is there (None: it is not), then work."""
    from httpx2 import AsyncClient, Timeout
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    client = AsyncClient(headers=server.get("headers") or {}, timeout=Timeout(30.0, read=3600.0))
    async with (
        client,
        streamable_http_client(server["url"], http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.discover()  # the 2026-07-28 protocol, as Claude Code 2.1.332 speaks
        listed = await session.list_tools()
        if tool not in [t.name for t in listed.tools]:
            return None
        emit(
            {
                "type": "system",
                "subtype": "init",
                "cwd": os.getcwd(),
                "session_id": SESSION,
                "tools": ["Bash", "Read", "Edit", "Write", f"mcp__{name}__{tool}"],
                "mcp_servers": [{"name": name, "status": "connected"}],
                "model": "claude-sonnet-4-5",
                "permissionMode": "default",
            }
        )
        start = os.environ.get("STANDIN_START")
        while start and not released(start):  # noqa: ASYNC110  # a file the test writes
            await asyncio.sleep(0.05)
        limit = float(server.get("timeout") or 300_000) / 1000  # Claude Code's default: 300 s
        denials = await converse(session, tool, calls, parallel, limit)
    hold = os.environ.get("STANDIN_HOLD")
    if hold:
        emit(message("msg_wait", [{"type": "text", "text": "Checking the results."}]))
        while not released(hold):  # noqa: ASYNC110  # a file another process writes
            await asyncio.sleep(0.05)
    return denials


def main() -> None:
    options, task = parse(sys.argv[1:])
    name, tool, server = server_of(options)
    record = os.environ.get("STANDIN_RECORD")
    if record:
        config = Path(options["--mcp-config"]).read_text(encoding="utf-8")
        with open(record + ".tmp", "w", encoding="utf-8") as f:
            json.dump({"argv": sys.argv, "pid": os.getpid(), "config": config}, f)
        os.replace(record + ".tmp", record)
    asyncio.run(work(server, name, tool, task))


async def work(server: dict[str, Any], name: str, tool: str, task: str) -> None:
    calls = json.loads(os.environ.get("STANDIN_CALLS") or json.dumps(DEFAULT_CALLS))
    parallel = os.environ.get("STANDIN_PARALLEL") == "1"
    try:
        denials = await session_run(server, name, tool, calls, parallel)
    except Exception:  # unreachable, 401, gone: Claude Code fails closed
        denials = None
    if denials is None:
        fail(
            f"Error: MCP tool mcp__{name}__{tool} (passed via --permission-prompt-tool) not "
            "found. Available MCP tools: none"
        )
    ran = len(calls) - len(denials)
    answer = f"Done: {task} ({ran} of {len(calls)} tool calls ran)"
    emit(message("msg_end", [{"type": "text", "text": answer}]))
    emit(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "duration_ms": 1000,
            "num_turns": len(calls) + 1,
            "result": answer,
            "session_id": SESSION,
            "total_cost_usd": 0.01,
            "permission_denials": denials,
        }
    )


def message(msg_id: str, content: list[dict[str, Any]], role: str = "assistant") -> dict[str, Any]:
    body: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant":
        body |= {"id": msg_id, "type": "message"}
    return {"type": role, "message": body, "parent_tool_use_id": None, "session_id": SESSION}


async def converse(
    session: Any, tool: str, calls: list[dict[str, Any]], parallel: bool, limit: float
) -> list[dict[str, Any]]:
    """Each call announced, asked, run or refused; the permission denials."""
    ids = [f"toolu_{index + 1:02d}" for index in range(len(calls))]
    uses = [
        {"type": "tool_use", "id": use_id, "name": call["name"], "input": call["input"]}
        for use_id, call in zip(ids, calls, strict=True)
    ]
    decisions: list[dict[str, Any]] = []
    if parallel:
        emit(message("msg_tools", uses))
        asks = [ask(session, tool, i, c, limit) for i, c in zip(ids, calls, strict=True)]
        decisions = list(await asyncio.gather(*asks))
        results = [run_call(i, c, d) for i, c, d in zip(ids, calls, decisions, strict=True)]
        emit(message("", results, role="user"))
    else:
        pause = float(os.environ.get("STANDIN_PAUSE") or 0)
        for use_id, call, use in zip(ids, calls, uses, strict=True):
            await asyncio.sleep(pause)
            emit(message(f"msg_{use_id}", [use]))
            decision = await ask(session, tool, use_id, call, limit)
            decisions.append(decision)
            emit(message("", [run_call(use_id, call, decision)], role="user"))
    return [
        {"tool_name": c["name"], "tool_use_id": i, "tool_input": c["input"]}
        for i, c, d in zip(ids, calls, decisions, strict=True)
        if d["behavior"] != "allow"
    ]


if __name__ == "__main__":
    main()
