"""SOUL.md cut for a turn's tools (:mod:`kernel.agent.soul`): the sections about tools
the turn does not offer go, and a heading left with nothing under it goes with them.
The cut is kept for the last few texts and tool lists (a turn cuts the same SOUL.md
for the same tools as the turn before), so an edit must still reach the next request."""

from __future__ import annotations

from pathlib import Path

from kernel.agent.agent import UserInput
from kernel.agent.soul import TURNS_KEPT, covered, for_tools, for_turn
from kernel.core.events import Completed
from tests.conftest import KernelFactory
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import system_of
from tests.sim.script import text_reply

SOUL = """# Kay

You are Kay.

## Browsing

### browser_open
- BROWSER-RULE

### browser_click
- CLICK-RULE

## Memory

### memory_add
- MEMORY-RULE
"""


def test_a_heading_left_empty_by_the_cut_goes_with_it() -> None:
    known = ("browser_open", "browser_click", "memory_add")
    cut = for_tools(SOUL, ["memory_add"], known)
    assert cut == "# Kay\n\nYou are Kay.\n\n## Memory\n\n### memory_add\n- MEMORY-RULE"
    assert covered(cut, ["memory_add"]) == {"memory_add"}


def test_for_turn_is_the_cut_and_what_it_covers_for_each_text_and_tool_list() -> None:
    known = ("browser_open", "browser_click", "memory_add")
    for offered in (("memory_add",), ("browser_open",), ()):
        text, covers = for_turn(SOUL, offered, known)
        assert text == for_tools(SOUL, offered, known)
        assert covers == frozenset(covered(text, offered))
    edited = SOUL.replace("MEMORY-RULE", "EDITED-RULE")
    assert "EDITED-RULE" in for_turn(edited, ("memory_add",), known)[0]
    assert for_turn.cache_info().maxsize == TURNS_KEPT


async def test_an_edit_to_soul_md_between_two_turns_is_in_the_second_request(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    soul = tmp_path / "SOUL.md"
    soul.write_text("# Kay\n\n### memory_add\n- FIRST-RULE\n", encoding="utf-8")
    kernel = await make_kernel(anthropic_sim)
    systems = []
    for rule in ("FIRST-RULE", "SECOND-RULE"):
        soul.write_text(f"# Kay\n\n### memory_add\n- {rule}\n", encoding="utf-8")
        anthropic_sim.enqueue(text_reply("好"))
        final = await kernel.agent.start_turn("console:default", UserInput("你好")).wait()
        assert isinstance(final, Completed)
        systems.append(system_of(anthropic_sim.requests[-1].body))
    assert "FIRST-RULE" in systems[0] and "SECOND-RULE" not in systems[0]
    assert "SECOND-RULE" in systems[1] and "FIRST-RULE" not in systems[1]
