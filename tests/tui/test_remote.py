"""``kernel tui`` over the running Kernel's sidecar (HTTP, SSE), driven headless by
Textual's pilot: a real Kernel with its Gateway on a free port, the simulator behind it."""

from __future__ import annotations

import pytest

from tests.conftest import free_port
from tests.gateway.conftest import SidecarFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import Stall, text_reply, tool_reply
from tests.tui.conftest import TEXTUAL_MISSING, lines, send, until

pytest.importorskip("textual", reason=TEXTUAL_MISSING)

from kernel.tui.app import KernelTui  # noqa: E402
from kernel.tui.remote import HttpBackend  # noqa: E402
from kernel.tui.screens import AskScreen, AuditScreen, TextLine  # noqa: E402

API_KEY = "tui-key-0123456789abcdef"
APPROVAL = "\n[tools.memory_add]\napproval = true\napproval_timeout = 30\n"


async def test_chats_listed_a_conversation_an_approval_and_cancel_over_http(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY, extra=APPROVAL)
    status, made, _ = await sc.call("POST", "/chats", {"channel": "console", "name": "[b]Trip[/b]"})
    assert status == 201
    anthropic_sim.enqueue(
        tool_reply("memory_add", {"text": "likes jazz"}),
        text_reply("Saved."),
        Stall(),
        text_reply("Back again."),
    )
    backend = HttpBackend(sc.url, API_KEY)
    app = KernelTui(backend)
    try:
        async with app.run_test() as pilot:
            await until(pilot, lambda: len(app.chat_list) == 2)
            labels = [w.text for w in app.query("#chats TextLine")]
            assert labels[0] == "+ New chat"
            assert labels[1].startswith("[b]Trip[/b]\n")  # the newest first, literally
            assert labels[2].startswith("Default chat\n")
            assert app.chat.ident == made["id"]  # the most recent chat is open

            await send(pilot, "remember jazz")
            await until(
                pilot,
                lambda: isinstance(app.screen, AskScreen) and bool(app.screen.query("#question")),
            )
            assert app.screen.ask.kind == "approval"
            assert "likes jazz" in app.screen.query_one("#question", TextLine).text
            await pilot.press("1")
            await until(pilot, lambda: "Saved." in lines(app, "assistant"))
            assert any(line.startswith("⚙ memory_add(") for line in lines(app, "tool"))
            assert [m.text for m in await sc.kernel.store.list_memories()] == ["likes jazz"]
            await until(pilot, lambda: not app.busy)

            # a held turn, cancelled with Ctrl+C through the cancel route
            await send(pilot, "something slow")
            await until(pilot, lambda: len(anthropic_sim.requests) == 3 and app.busy)
            await pilot.press("ctrl+c")
            await until(pilot, lambda: "[Cancelled]" in lines(app, "note"))
            await until(pilot, lambda: not app.busy)
            await send(pilot, "still there?")
            await until(pilot, lambda: "Back again." in lines(app, "assistant") and not app.busy)
            roles = [m["role"] for m in anthropic_sim.requests[-1].body["messages"]]
            assert all(a != b for a, b in zip(roles, roles[1:], strict=False))

            # a new chat is created by its first message, in the console channel
            await pilot.press("f2")
            anthropic_sim.enqueue(text_reply("Fresh."))
            await send(pilot, "hello there")
            await until(pilot, lambda: "Fresh." in lines(app, "assistant") and not app.busy)
            assert app.chat.ident.startswith("chat-") and len(app.chat_list) == 3
            _, listed, _ = await sc.call("GET", "/chats?channel=console&user_id=tui")
            assert [c["id"] for c in listed["chats"]] == [app.chat.ident]

            # the audit key reads the trajectory routes
            await pilot.press("f3")
            await until(pilot, lambda: isinstance(app.screen, AuditScreen))
            _, spec, _ = await sc.call("GET", "/openapi.json")
            if "/agent/trajectory/events" in spec["paths"]:
                verdict = app.screen.query_one("#verdict", TextLine).text
                assert verdict.startswith("✅")
            else:  # the routes are not in this Kernel: said in words, no crash
                [error] = [w.text for w in app.screen.query("TextLine.error")]
                assert error.startswith("✗ ") and "not_found" in error
    finally:
        await backend.close()


async def test_a_wrong_key_and_a_stopped_kernel_are_said_in_words(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim
) -> None:
    sc = await sidecar(anthropic_sim, api_key=API_KEY)
    backend = HttpBackend(sc.url, "not-the-key")
    app = KernelTui(backend)
    try:
        async with app.run_test() as pilot:
            await until(pilot, lambda: bool(lines(app, "error")))
            assert "(unauthorized)" in lines(app, "error")[0]
            assert app.chat_list == []
    finally:
        await backend.close()

    nowhere = HttpBackend(f"http://127.0.0.1:{free_port()}")
    app = KernelTui(nowhere)
    try:
        async with app.run_test() as pilot:
            await until(pilot, lambda: bool(lines(app, "error")))
            assert "cannot reach Kernel" in lines(app, "error")[0]
            await send(pilot, "hello")
            await until(pilot, lambda: len(lines(app, "error")) == 2 and not app.busy)
            assert "cannot reach Kernel" in lines(app, "error")[1]
    finally:
        await nowhere.close()
