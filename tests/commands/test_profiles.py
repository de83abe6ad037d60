"""/persona, /project, /status and /history project:NAME on a real Kernel (SQLite on
disk, the model simulator): one chat's switch leaves another alone, a new session and a
restart keep it, unknown names are refused with the ones there are."""

from __future__ import annotations

from pathlib import Path

from kernel.agent.agent import UserInput
from kernel.app import Kernel
from kernel.commands import Choice, Commands
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply

A, B = "console:a", "console:b"


def write_profiles(base: Path, folder: Path) -> None:
    personas = base / "personas"
    projects = base / "projects"
    personas.mkdir()
    projects.mkdir()
    (personas / "editor.md").write_text(
        "---\nname: editor\ndescription: tightens prose\ntools: []\n---\nEdit, do not add.\n"
    )
    (personas / "pirate.md").write_text("---\ndescription: arr\n---\nTalk like a pirate.\n")
    (personas / "broken.md").write_text("---\ndescription: x\ntool: web_search\n---\n")
    (personas / "elsewhere.md").write_text(
        "---\ndescription: another model\nmodel: nowhere:model-z\n---\n"
    )
    (projects / "site.md").write_text(
        f"---\ndescription: the web site\nfolder: {folder}\n---\nHugo; make deploy.\n"
    )
    (projects / "notes.md").write_text("---\ndescription: loose notes\n---\n")


async def converse(kernel: Kernel, conversation: str, text: str) -> None:
    async for _ in kernel.agent.start_turn(conversation, UserInput(text, channel="console")):
        pass


async def say(commands: Commands, conversation: str, line: str) -> tuple[str, bool]:
    name, _, arg = line.lstrip("/").partition(" ")
    reply = await commands.run(conversation, name, arg)
    assert reply is not None
    return reply.text, reply.error


async def started(make_kernel: KernelFactory, sim: AnthropicSim, tmp_path: Path) -> Kernel:
    folder = tmp_path / "site"
    if not folder.exists():
        folder.mkdir()
        write_profiles(tmp_path, folder)
    return await make_kernel(sim, language="en")


async def test_persona_switches_one_chat_and_new_sessions_inherit_it(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    kernel = await started(make_kernel, anthropic_sim, tmp_path)
    commands = Commands(kernel)
    anthropic_sim.enqueue(text_reply("one"), text_reply("two"), text_reply("three"))
    await converse(kernel, A, "hello")

    text, error = await say(commands, A, "/persona")
    lines = text.splitlines()
    assert not error and lines[0].startswith("Personas (")
    assert "• editor — tightens prose" in lines and "• pirate — arr" in lines
    assert any(line.startswith("✗ broken: ") and "tool" in line for line in lines)
    assert any(line.startswith("✗ elsewhere: ") and "nowhere" in line for line in lines)
    assert lines[-1] == "Current: none"

    text, error = await say(commands, A, "/persona editor")
    assert (text, error) == ("Persona: editor — tightens prose", False)
    assert (await kernel.agent.scopes.current(A)).persona == "editor"
    assert (await kernel.agent.scopes.current(B)).persona == ""  # the other chat is untouched
    reply = await commands.run(A, "persona", "")
    assert reply is not None
    assert "▶ editor — tightens prose" in reply.text.splitlines()
    assert reply.text.splitlines()[-1] == "Current: editor"
    assert Choice("off", "/persona off") in reply.choices
    assert Choice("pirate", "/persona pirate") in reply.choices
    assert Choice("editor", "/persona editor") not in reply.choices

    status, _ = await say(commands, A, "/status full")
    assert "Persona: editor, project: none" in status.splitlines()
    status, _ = await say(commands, B, "/status full")
    assert not [line for line in status.splitlines() if line.startswith("Persona:")]

    # The session keeps it; /new starts one that inherits the chat's choice.
    first = kernel.agent.sessions.current_session(A)
    assert first is not None and (await kernel.agent.scopes.of_session(first)).persona == "editor"
    await say(commands, A, "/new")
    await converse(kernel, A, "again")
    second = kernel.agent.sessions.current_session(A)
    assert second is not None and second != first
    assert (await kernel.agent.scopes.of_session(second)).persona == "editor"

    text, error = await say(commands, A, "/persona off")
    assert (text, error) == ("No persona now: SOUL.md alone", False)
    assert (await kernel.agent.scopes.of_session(second)).persona == ""
    assert (await kernel.agent.scopes.of_session(first)).persona == "editor"  # history kept


async def test_unknown_broken_and_unconfigured_personas_are_refused(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    kernel = await started(make_kernel, anthropic_sim, tmp_path)
    commands = Commands(kernel)
    for arg in ("nobody", "../personas/editor", "x" * 65, "éditeur"):
        text, error = await say(commands, A, f"/persona {arg}")
        assert error, arg
        assert "editor, elsewhere, pirate" in text, text  # the readable ones are named
    text, error = await say(commands, A, "/persona broken")
    assert error and "cannot be used" in text
    text, error = await say(commands, A, "/persona elsewhere")
    assert error and "nowhere" in text and "main" in text
    assert (await kernel.agent.scopes.current(A)).persona == ""
    text, error = await say(commands, A, "/project nope")
    assert error and "notes, site" in text

    await say(commands, A, "/persona pirate")
    remove(tmp_path / "personas" / "pirate.md")
    text, _ = await say(commands, A, "/persona")
    lines = text.splitlines()
    assert lines[-2:] == [
        "(the current pirate was deleted: this chat goes on without it)",
        "Current: pirate",
    ]
    text, error = await say(commands, A, "/persona off")
    assert not error and (await kernel.agent.scopes.current(A)).persona == ""


def remove(path: Path) -> None:
    path.unlink()


async def test_the_choice_survives_a_restart(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    kernel = await started(make_kernel, anthropic_sim, tmp_path)
    commands = Commands(kernel)
    await say(commands, A, "/persona pirate")
    await say(commands, A, "/project site")
    await kernel.stop()

    again = await started(make_kernel, anthropic_sim, tmp_path)  # same database
    assert again.agent.sessions.current_session(A) is None  # a restart starts a new session
    scope = await again.agent.scopes.current(A)
    assert (scope.persona, scope.project) == ("pirate", "site")
    anthropic_sim.enqueue(text_reply("arr"))
    await converse(again, A, "hi")
    session = again.agent.sessions.current_session(A)
    assert session is not None
    assert (await again.agent.scopes.of_session(session)).project == "site"
    assert (await again.agent.scopes.current(B)).persona == ""


async def test_project_says_its_folder_and_history_filters_by_it(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    kernel = await started(make_kernel, anthropic_sim, tmp_path)
    commands = Commands(kernel)
    anthropic_sim.enqueue(text_reply("1"), text_reply("2"), text_reply("3"))
    await converse(kernel, A, "plain chat")
    text, error = await say(commands, A, "/new")
    text, error = await say(commands, A, "/project site")
    assert not error
    assert text.splitlines() == [
        "Project: site — the web site",
        f"Working folder: {tmp_path / 'site'} (delegate_to_cli runs here by default)",
    ]
    await converse(kernel, A, "site work")
    await say(commands, A, "/new")  # a switch applies to the current session too
    text, _ = await say(commands, A, "/project notes")
    assert text.splitlines()[1].startswith("This project has no working folder")
    await converse(kernel, A, "notes work")

    listing, _ = await say(commands, A, "/history")
    rows = listing.splitlines()[1:]
    assert len(rows) == 3
    assert rows[0].endswith(" [notes] ← current") and rows[1].endswith(" [site]")
    assert not rows[2].endswith("]")

    listing, error = await say(commands, A, "/history project:site")
    assert not error
    [only] = listing.splitlines()[1:]
    assert only.startswith("#2 “site work” · ") and only.endswith(" [site]")
    # /resume takes the listed session, and the chat's project with it.
    text, error = await say(commands, A, "/resume #2")
    assert not error
    assert (await kernel.agent.scopes.current(A)).project == "site"

    text, error = await say(commands, A, "/history project:gone")
    assert (text, error) == ("No sessions in project gone yet", False)
    text, error = await say(commands, A, "/history yesterday")
    assert error and text == "Usage: /history, or /history project:NAME"
    text, error = await say(commands, B, "/project off")
    assert (text, error) == ("No project now", False)
