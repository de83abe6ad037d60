"""``kernel chats|models|env`` and ``kernel chat``: the real command run as a process,
talking to a live sidecar."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.conftest import free_port, kernel_env, spawn_kernel
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Error, text_reply, tool_reply

pytestmark = pytest.mark.slow  # real `kernel` CLI processes


async def kernel(
    sc: Sidecar | None, *args: str, stdin: str | None = None, url: str = "", tz: str = ""
) -> tuple[int, str, str]:
    """``tz``: the machine's zone for the process (TZ)."""
    env = kernel_env(KERNEL_LANGUAGE="en", **({"TZ": tz} if tz else {}))
    env["KERNEL_GATEWAY_URL"] = url or (sc.url if sc else "")
    if sc is not None and sc.api_key:
        env["KERNEL_GATEWAY_API_KEY"] = sc.api_key
    cwd = sc.config_path.parent if sc else Path.cwd()
    process = await spawn_kernel(*args, cwd=cwd, env=env, stdin=stdin is not None)
    data = stdin.encode() if stdin is not None else None
    try:
        out, err = await asyncio.wait_for(process.communicate(data), timeout=30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_chats_list_shows_the_owners_zone_not_the_machines(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    """general.timezone is Asia/Shanghai, the process runs in New York: a chat active at
    17:30 UTC on March 1 was active on 2026-03-02 01:30 for the owner."""
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    code, out, _ = await kernel(sc, "chats", "create", "--session-id", "z", "--name", "Zone")
    assert code == 0
    with closing(sqlite3.connect(sc.kernel.config.data_dir / "kernel.db")) as db, db:
        db.execute("UPDATE sessions SET updated_at = '2026-03-01T17:30:00.000+00:00'")
    code, out, _ = await kernel(sc, "chats", "list", tz="America/New_York")
    assert code == 0
    [row] = [line for line in out.splitlines() if line.endswith("Zone")]
    assert "2026-03-02 01:30" in row


async def test_chats_verbs(sidecar: SidecarFactory, anthropic_sim: AnthropicSim) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    code, out, err = await kernel(
        sc, "chats", "create", "--session-id", "s1", "--user", "alice", "--name", "Trip"
    )
    assert (code, err) == (0, "")
    assert out.startswith("created chat-") and "(console/alice/s1)" in out
    chat_id = out.split()[1]

    anthropic_sim.enqueue(text_reply("Pack light."), text_reply("Sure."))
    code, out, err = await kernel(sc, "chats", "send", "--chat", chat_id, "what", "to", "pack?")
    assert (code, out, err) == (0, "Pack light.\n", "")
    assert anthropic_sim.requests[-1].body["messages"][-1]["content"][0]["text"] == "what to pack?"
    code, out, _ = await kernel(sc, "chats", "send", "hi", "--json")
    assert code == 0 and json.loads(out)["reply"] == "Sure."

    code, out, _ = await kernel(sc, "chats", "list")
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "CHANNEL", "USER", "SESSION", "MSGS", "UPDATED", "NAME"]
    row = next(line for line in lines if line.startswith(chat_id))
    assert row.split()[1:5] == ["console", "alice", "s1", "2"] and row.endswith("Trip")
    assert lines[-1] == "2 shown, 2 in all"
    code, out, _ = await kernel(sc, "chats", "list", "--user", "alice", "--json")
    assert [c["id"] for c in json.loads(out)["chats"]] == [chat_id]

    code, out, _ = await kernel(sc, "chats", "get", chat_id)
    assert out.splitlines()[1:] == ["user: what to pack?", "assistant: Pack light."]

    code, out, err = await kernel(sc, "chats", "delete", "chat-default")
    assert code == 1 and out == ""
    assert err.startswith("kernel: ") and "(default_chat_protected)" in err
    assert len(err.splitlines()) == 1
    code, out, _ = await kernel(sc, "chats", "delete", chat_id)
    assert (code, out) == (0, "deleted 1 chat(s)\n")
    code, _, err = await kernel(sc, "chats", "get", chat_id)
    assert code == 1 and "(not_found)" in err


async def test_chats_get_marks_a_message_set_aside(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim)
    anthropic_sim.enqueue(Error(400, "invalid_request_error", "prompt is too long"))
    status, data = await sc.process("far too long", session_id="s-mark")
    assert data["error"]["code"] == "provider_refused_input"
    code, out, _ = await kernel(sc, "chats", "get", data["error"]["details"]["chat_id"])
    assert out.splitlines()[1:] == ["user (set aside: refused by the model): far too long"]


async def test_models_and_env_verbs(sidecar: SidecarFactory, anthropic_sim: AnthropicSim) -> None:
    sc = await sidecar(anthropic_sim)
    code, out, _ = await kernel(sc, "models", "list")
    assert code == 0
    header, row, active = out.splitlines()
    assert header.split()[:4] == ["PROVIDER", "TYPE", "ENABLED", "KEY"]
    assert row.split()[:3] == ["main", "claude", "yes"] and "*model-a, model-b" in row
    assert active == "active: main / model-a"

    code, out, _ = await kernel(
        sc,
        "models",
        "config",
        "main",
        "--models",
        "model-a,model-b,model-c",
        "--alias",
        "big=model-c",
    )
    assert code == 0 and "saved provider main" in out
    code, out, _ = await kernel(sc, "models", "active-set", "main", "big")
    assert (code, out) == (0, "active: main / model-c\n")
    code, out, _ = await kernel(sc, "models", "active-get")
    assert out == "main model-c\n"
    code, out, _ = await kernel(sc, "models", "active-get", "--json")
    assert json.loads(out) == {"provider_id": "main", "model": "model-c"}
    code, _, err = await kernel(sc, "models", "active-set", "nobody")
    assert code == 1 and "(provider_not_found)" in err
    assert "big" in sc.kernel.config.runtime_path.read_text()

    code, out, _ = await kernel(sc, "env", "set", "GITHUB_TOKEN", "ghp_abcdefghijklmnop")
    assert (code, out) == (0, "set GITHUB_TOKEN = ghp_…mnop\n")
    code, out, _ = await kernel(sc, "env", "set", "REGION", "-", stdin="eu-west\n")
    assert out == "set REGION = eu-west\n"
    code, out, _ = await kernel(sc, "env", "list")
    assert out.splitlines() == [
        "KEY           VALUE      SOURCE",
        "GITHUB_TOKEN  ghp_…mnop  runtime",
        "REGION        eu-west    runtime",
    ]
    assert "ghp_abcdefghijklmnop" not in out
    code, out, _ = await kernel(sc, "env", "delete", "REGION")
    assert (code, out) == (0, "deleted REGION\n")
    assert sc.kernel.config.envs == {"GITHUB_TOKEN": "ghp_abcdefghijklmnop"}


async def test_kernel_not_running_is_one_line_and_exit_3(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # a port nothing listens on
    code, out, err = await kernel(None, "chats", "list", url=url)
    assert code == 3 and out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("kernel: cannot reach Kernel") and "uv run kernel" in err


async def test_wrong_key_is_refused(sidecar: SidecarFactory, anthropic_sim: AnthropicSim) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    sc.api_key = "not-the-key"
    code, _, err = await kernel(sc, "env", "list")
    assert code == 1 and "(unauthorized)" in err and "X-API-Key" in err


async def test_kernel_chat_uses_the_running_sidecar(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    anthropic_sim.enqueue(text_reply("Hi from the service"), text_reply("Hi again"))
    script = "hello\n/status\n/model model-b\n/new\nagain\n/history\n/exit\nnever sent\n"
    code, out, err = await kernel(sc, "chat", stdin=script)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Hi from the service"
    assert lines[1] == "Model: main / model-a"  # /status, answered by the running Kernel
    assert "Switched to model model-b" in lines and "Started a new session" in lines
    assert lines[lines.index("Started a new session") + 1] == "Hi again"
    assert "Sessions (continue one with /resume #n):" in lines
    assert sum(line.startswith(("#1 ", "#2 ")) for line in lines) == 2
    # Two messages, two model calls: the commands went to the sidecar, not to the model.
    assert [r.body["model"] for r in anthropic_sim.requests] == ["model-a", "model-b"]
    # The terminal chat began in the default chat, then /new opened another session.
    _, chat, _ = await sc.call("GET", "/chats/chat-default")
    assert chat["message_count"] == 2
    status, data, _ = await sc.call("GET", "/chats")
    assert data["total"] == 2


async def test_kernel_chat_answers_an_approval_through_the_sidecar(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    extra = "\n[tools.memory_add]\napproval = true\napproval_timeout = 20\n"
    sc = await sidecar(anthropic_sim, api_key=API_KEY, extra=extra)
    anthropic_sim.enqueue(
        tool_reply("memory_add", {"text": "likes rain"}), text_reply("Remembered.")
    )
    code, out, err = await kernel(sc, "chat", stdin="remember rain\n9\n1\n/exit\n")
    assert code == 0, err
    assert "Your approval is needed: Remember something\ntext=likes rain" in out
    assert '"text": "likes rain"' in out  # the full arguments follow
    assert "  1) ✅ Approve" in out and out.count("Answer with a number (1-2)") == 2
    assert out.rstrip().endswith("Remembered.")
    assert [m.text for m in await sc.kernel.store.list_memories()] == ["likes rain"]
