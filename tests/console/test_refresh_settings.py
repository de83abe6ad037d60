"""``kernel chat``'s /refresh and /settings (seed 000's terminal commands, issue 38
item 8): /refresh shows the current session's last exchanges as stored, also those
another terminal on the same Kernel sent; /settings says what the chat runs with and
where each is changed, and nothing secret."""

from __future__ import annotations

import io

from kernel.console.chat import CONVERSATION, ConsoleChat
from kernel.core.i18n import t
from tests.conftest import SECRET_KEY, KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.script import text_reply


async def test_refresh_shows_what_the_shared_session_holds_now(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    out, err = io.StringIO(), io.StringIO()
    chat = ConsoleChat(kernel, out, err, interactive=False)
    assert await chat.handle("/refresh")
    assert out.getvalue() == t("terminal.refresh_none") + "\n"

    anthropic_sim.enqueue(text_reply("answer one"), text_reply("answer two"))
    assert await chat.handle("question one")
    other = ConsoleChat(kernel, io.StringIO(), io.StringIO(), interactive=False)
    assert await other.handle("question two")  # a second terminal on the same Kernel

    mark = len(out.getvalue())
    assert await chat.handle("/refresh")
    session = kernel.agent.sessions.current_session(CONVERSATION)
    assert out.getvalue()[mark:].splitlines() == [
        f"The last exchanges of the current session #{session} “question one” "
        "(› you, ‹ the assistant):",
        "› question one",
        "‹ answer one",
        "› question two",
        "‹ answer two",
    ]
    assert err.getvalue() == ""


async def test_settings_names_what_the_chat_runs_with(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    out, err = io.StringIO(), io.StringIO()
    chat = ConsoleChat(kernel, out, err, interactive=False)
    assert await chat.handle("/settings")
    shown = out.getvalue().splitlines()
    assert shown[0] == "This chat's settings:"
    assert "• Model: main:model-a (/model, /provider to switch)" in shown
    assert "• Persona: none (/persona)" in shown
    assert "• Prompt mode: default (/mode)" in shown
    assert f"• Config file: {kernel.config.path}" in shown
    flags = "prompt_templates=off, prompt_context_introspect=off, environment_context=off"
    assert f"• [features]: {flags}" in shown
    assert SECRET_KEY not in out.getvalue() and err.getvalue() == ""
    assert await chat.handle("/help")
    assert "/refresh" in out.getvalue() and "/settings" in out.getvalue()
