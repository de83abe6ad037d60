"""``kernel personas|projects list|show|add|edit|rm`` against a live sidecar: the
handlers in a thread (their client blocks), as text and as ``--json``."""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from kernel.client.http import Sidecar as Client
from kernel.client.http import SidecarError
from tests.gateway.conftest import API_KEY, Sidecar, SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim


async def run(sc: Sidecar, *argv: str) -> str:
    from kernel.__main__ import _parser

    args = _parser().parse_args(list(argv))
    out = io.StringIO()
    code = await asyncio.to_thread(args.client, Client(sc.url, API_KEY), args, out)
    assert code == 0
    return out.getvalue()


async def test_personas_add_list_show_edit_rm(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    assert "kernel personas add" in await run(sc, "personas", "list")
    text = await run(
        sc,
        "personas",
        "add",
        "writer",
        "--description",
        "terse editor",
        "--body",
        "Cut every needless word.",
        "--tools",
        "memory_*, web_search",
        "--reasoning",
        "2048",
    )
    assert text == "created personas/writer.md\n"
    lines = (await run(sc, "personas", "list")).splitlines()
    assert lines[0].split() == ["NAME", "DESCRIPTION"]
    assert lines[1].split() == ["writer", "terse", "editor"]
    shown = await run(sc, "personas", "show", "writer")
    assert "tools: memory_*, web_search\n" in shown and "reasoning: 2048\n" in shown
    assert shown.endswith("Cut every needless word.\n")

    await run(sc, "personas", "edit", "writer", "--tools", "", "--model", "main:model-a")
    data = json.loads(await run(sc, "personas", "show", "writer", "--json"))
    assert data["tools"] == [] and data["model"] == "main:model-a"
    assert data["body"] == "Cut every needless word."

    assert await run(sc, "personas", "rm", "writer") == "deleted writer\n"
    assert json.loads(await run(sc, "personas", "list", "--json")) == {"personas": []}


async def test_projects_take_a_folder_and_refusals_exit_1(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    await run(sc, "projects", "add", "site", "--description", "the site", "--folder", "~/site")
    data = json.loads(await run(sc, "projects", "show", "site", "--json"))
    assert data["folder"] == "~/site"
    from kernel.__main__ import _parser

    args = _parser().parse_args(["projects", "show", "nope"])
    with pytest.raises(SidecarError) as caught:
        await asyncio.to_thread(args.client, Client(sc.url, API_KEY), args, io.StringIO())
    assert caught.value.code == "profile_not_found" and "site" in str(caught.value)
    with pytest.raises(SystemExit):  # projects have no allow-list
        _parser().parse_args(["projects", "add", "x", "--description", "d", "--tools", "a"])


async def test_kernel_chat_through_the_sidecar_lists_and_switches(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    from kernel.client.chat import run_remote_chat

    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    await run(sc, "personas", "add", "editor", "--description", "tightens prose")
    await run(sc, "projects", "add", "site", "--description", "the site", "--folder", "/srv/s")
    lines = "/persona\n/persona editor\n/persona\n/persona nobody\n/project site\n/persona off\n"
    out, err = io.StringIO(), io.StringIO()
    client = Client(sc.url, API_KEY)
    code = await asyncio.to_thread(run_remote_chat, client, io.StringIO(lines), out, err)
    assert code == 0, err.getvalue()
    # The shared /persona and /project (Telegram's): the buttons as commands to type.
    assert out.getvalue().splitlines() == [
        "Personas (/persona NAME switches, /persona off for none):",
        "• editor — tightens prose",
        "Current: none",
        "Type one of these commands to choose:",
        "  1) /persona editor",
        "Persona: editor — tightens prose",
        "Personas (/persona NAME switches, /persona off for none):",
        "▶ editor — tightens prose",
        "Current: editor",
        "Type one of these commands to choose:",
        "  1) /persona editor (current)",
        "  2) /persona off",
        "✗ there is no persona called nobody (available: editor; files go in personas/<name>.md)",
        "Project: site — the site",
        "Working folder: /srv/s (delegate_to_cli runs here by default)",
        "No persona now: SOUL.md alone",
    ]
    # The terminal chat starts in the default chat: the switches are its.
    _, scope, _ = await sc.call("GET", "/chats/chat-default/scope")
    assert scope == {"id": "chat-default", "persona": "", "project": "site"}
    assert anthropic_sim.requests == []  # no command reached the model
