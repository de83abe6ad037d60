"""SOUL.md carries the tool and memory rules (issue 38, item 10; seed 004 "Phase 2 必须
恢复 SOUL.md 中的 delegate_to_cli / memory_add 工具规则"): a section headed with a tool's
name reaches the model in the request and replaces Kernel's built-in wording for that
tool, which still applies to every tool SOUL.md says nothing about; a section about a
tool the turn does not offer is not sent; SelfOps' preview warns when an edit drops one."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from kernel.agent.agent import UserInput
from kernel.agent.soul import covered
from kernel.app import Kernel
from kernel.core.events import Completed
from kernel.core.i18n import CATALOG, t
from tests.conftest import KernelFactory
from tests.gateway.conftest import SidecarFactory
from tests.selfops.test_mutations import preview
from tests.sim.anthropic_sim import AnthropicSim
from tests.sim.context import system_of
from tests.sim.script import text_reply

ROOT = Path(__file__).resolve().parents[2]
OWN_SOUL = """# Kay

You are Kay.

## Tool rules

### memory_add
- OWNER-RULE: remember only what the owner says twice.

### delegate_to_cli
- DELEGATE-RULE: never delegate on Sundays.
"""


def tools_of(body: dict[str, Any]) -> dict[str, str]:
    return {tool["name"]: tool["description"] for tool in body["tools"]}


async def one_turn(make_kernel: KernelFactory, sim: AnthropicSim) -> dict[str, Any]:
    kernel = await make_kernel(sim)
    sim.enqueue(text_reply("你好！"))
    final = await kernel.agent.start_turn("console:default", UserInput("你好")).wait()
    assert isinstance(final, Completed)
    body: dict[str, Any] = sim.requests[-1].body
    return body


async def test_the_owners_section_replaces_the_built_in_wording_of_that_tool_only(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    (tmp_path / "SOUL.md").write_text(OWN_SOUL, encoding="utf-8")
    body = await one_turn(make_kernel, anthropic_sim)

    system = system_of(body)
    tools = tools_of(body)
    assert "OWNER-RULE: remember only what the owner says twice." in system
    # memory_add: the owner's rule, none of Kernel's (definition nor guide line)
    assert tools["memory_add"].startswith("Remember one lasting fact")
    assert "Never passwords" not in tools["memory_add"]
    assert "<remember" not in system
    # the memory tools SOUL.md says nothing about keep Kernel's wording
    assert tools["memory_search"].endswith("Do it before answering about the owner's past.")
    assert "forget" in tools["memory_delete"]
    # no coding CLI here: delegate_to_cli is not offered, nor is its section sent
    assert "delegate_to_cli" not in tools
    assert "DELEGATE-RULE" not in system and "delegate_to_cli" not in system


async def test_the_shipped_soul_md_carries_the_rules_into_the_request(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    shutil.copy(ROOT / "SOUL.md", tmp_path / "SOUL.md")
    body = await one_turn(make_kernel, anthropic_sim)

    system = system_of(body)
    tools = tools_of(body)
    for words in ("### memory_add", "不记密码", "<remember", "### memory_search", "先查"):
        assert words in system, words
    for name in ("memory_add", "memory_search", "memory_delete"):  # said once: in SOUL.md
        assert tools[name] == tools[name].split(". ")[0].rstrip(".") + ".", name
    assert "### delegate_to_cli" not in system and "### mcp_*" not in system  # not offered
    assert system.count("<remember") == 1  # not the guide's line as well


async def test_selfops_preview_warns_when_an_edit_drops_a_tools_rules(
    sidecar: SidecarFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    shutil.copy(ROOT / "SOUL.md", tmp_path / "SOUL.md")
    sc = await sidecar(anthropic_sim)
    section = "### memory_search\n- 回答关于主人过去的问题前先查。\n\n"
    assert section in (tmp_path / "SOUL.md").read_text(encoding="utf-8")

    cut = {"kind": "text_rewrite", "path": "SOUL.md", "search": section, "replace": ""}
    p = await preview(sc, "workspace_file", cut)
    assert p["checks"]["tool_rules_removed"] == ["memory_search"]
    [warning] = p["checks"]["warnings"]
    assert warning == t("selfops.soul_rules_removed", path="SOUL.md", tools="memory_search")

    reworded = {"kind": "text_rewrite", "path": "SOUL.md", "search": "先查", "replace": "先搜"}
    p = await preview(sc, "workspace_file", reworded)
    assert p["checks"]["tool_rules_removed"] == [] and p["checks"]["warnings"] == []


def test_the_shipped_soul_md_is_the_catalogues_in_both_languages() -> None:
    """Kept as shipped, SOUL.md is read in the owner's language (issue 35), so the
    catalogue's copy is the file, and the English one has the same tool sections."""
    text = (ROOT / "SOUL.md").read_text(encoding="utf-8").strip()
    assert CATALOG["zh"]["prompt.soul"] == text
    names = ["delegate_to_cli", "memory_add", "memory_search", "memory_delete", "mcp_x__y"]
    assert covered(CATALOG["en"]["prompt.soul"], names) == covered(text, names) == set(names)


async def test_a_soul_md_left_as_an_older_release_shipped_it_gets_the_rules(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    """The owner who never edited SOUL.md finds the rules in the file, to edit them; a
    SOUL.md of their own is never rewritten."""
    soul = tmp_path / "SOUL.md"
    soul.write_text(CATALOG["zh"]["prompt.soul_before_38"] + "\n", encoding="utf-8")
    await make_kernel(anthropic_sim)
    assert soul.read_text(encoding="utf-8") == CATALOG["zh"]["prompt.soul"] + "\n"
    assert "### delegate_to_cli" in soul.read_text(encoding="utf-8")


async def test_an_edited_soul_md_is_never_rewritten(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    mine = CATALOG["zh"]["prompt.soul_before_38"] + "\n- 说话带点幽默。\n"
    (tmp_path / "SOUL.md").write_text(mine, encoding="utf-8")
    await make_kernel(anthropic_sim)
    assert (tmp_path / "SOUL.md").read_text(encoding="utf-8") == mine


async def test_the_owner_rewrites_when_to_plan_and_when_to_work_in_the_background(
    make_kernel: KernelFactory, anthropic_sim: AnthropicSim, tmp_path: Path
) -> None:
    """The new tools' usage rules are Kernel's wording too (add_rules): a SOUL.md section
    about enter_plan_mode or task_create replaces them; without one they are sent."""
    from tests.agents.kit import agent_file, write_agents

    write_agents(tmp_path, {"worker": agent_file("worker", "[memory_search]")})
    soul = "# Kay\n\n### enter_plan_mode\n- PLAN-RULE\n\n### task_create\n- TASK-RULE\n"
    soul += "\n### browser_open\n- BROWSER-RULE\n"
    (tmp_path / "SOUL.md").write_text(soul, encoding="utf-8")
    kernel = await make_kernel(anthropic_sim, extra="\n[browser]\nenabled = true\n")
    await kernel.agent.subagents.usable()
    owners = await offered(kernel, anthropic_sim)
    (tmp_path / "SOUL.md").write_text("# Kay\n\nYou are Kay.\n", encoding="utf-8")
    kernels = await offered(kernel, anthropic_sim)

    plan_rule, task_rule = "For a task that needs a plan", "'tell me when done'"
    assert plan_rule in kernels["enter_plan_mode"] and task_rule in kernels["task_create"]
    assert plan_rule not in owners["enter_plan_mode"]
    assert task_rule not in owners["task_create"]
    browser_rule = "pages web_fetch cannot read"
    assert browser_rule in kernels["browser_open"]
    assert browser_rule not in owners["browser_open"] and "[1]" in owners["browser_open"]
    # what each does stays in its definition
    assert "plan mode" in owners["enter_plan_mode"] and "sub-agent" in owners["task_create"]


async def offered(kernel: Kernel, sim: AnthropicSim) -> dict[str, str]:
    """The tools of a turn's request."""
    sim.enqueue(text_reply("ok"))
    final = await kernel.agent.start_turn("console:default", UserInput("hi")).wait()
    assert isinstance(final, Completed)
    return tools_of(sim.requests[-1].body)
