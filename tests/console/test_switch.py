"""The console chat shows a failover as one line of its own, before the fallback's
answer, and ``/model auto`` works from the terminal (an in-process Kernel, SQLite on
disk)."""

from __future__ import annotations

import io

from kernel.console.chat import ConsoleChat
from kernel.core.events import AssistantDelta, Completed, ModelSwitched
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim


async def test_the_switch_is_its_own_line_and_model_auto_answers(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim
) -> None:
    kernel = await make_kernel(anthropic_sim, language="en")
    out, err = io.StringIO(), io.StringIO()
    chat = ConsoleChat(kernel, out, err, interactive=False)
    switch = ModelSwitched(2, "main:model-a", "main:model-b", "overloaded_error")
    for event in (
        AssistantDelta(1, "Let me look."),  # an earlier step's text, left open
        switch,
        AssistantDelta(2, "Found it."),
        Completed(2, "Let me look.Found it."),
    ):
        chat._show(event)
    assert out.getvalue() == (
        "Let me look.\n"
        "⚠️ main:model-a is unavailable (overloaded); main:model-b answers instead\n"
        "Found it.\n"
    )
    assert err.getvalue() == "" and not chat.failed

    out.seek(0)
    out.truncate()
    assert await chat.handle("/model model-b")
    assert await chat.handle("/model auto")
    assert out.getvalue().splitlines() == [
        "Switched to model model-b",
        "Automatic choice again: the routing rules and the default (main / model-a) decide",
    ]
    assert not kernel.agent.selection.chosen
