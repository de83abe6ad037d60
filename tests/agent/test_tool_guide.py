"""The tool guide in the system prompt: general rules and what Kernel does beside the
offered tools, never the tool list the definitions already carry (issue 16, lean)."""

from __future__ import annotations

from kernel.agent.prompt import tool_guide

BUILT_IN = ["memory_add", "memory_search", "memory_list", "memory_delete", "ask_user"]


def test_the_guide_names_no_tool_list() -> None:
    guide = tool_guide([*BUILT_IN, "cron_create", "delegate_to_cli"])
    for name in ("memory_search", "memory_list", "ask_user", "cron_create", "delegate_to_cli"):
        assert name not in guide, name
    assert guide.startswith("## 工具\n")


def test_the_remember_tag_is_explained_only_with_the_memory_tools() -> None:
    assert "<remember" in tool_guide(BUILT_IN)
    assert "<context>" in tool_guide(BUILT_IN)  # where recalled memories now arrive
    guest = tool_guide(["ask_user"])
    assert "<remember" not in guest and "长期记忆" not in guest


def test_the_mcp_note_comes_with_mcp_tools_only() -> None:
    assert "mcp_<server>__<tool>" not in tool_guide(BUILT_IN)
    assert "mcp_<server>__<tool>" in tool_guide([*BUILT_IN, "mcp_web__search"])
