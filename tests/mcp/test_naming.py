"""Tool names: ``mcp_{server}__{tool}``, provider-safe, stable, never colliding."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from kernel.mcp.naming import NAME_LIMIT, assign_names, server_parts
from tests.mcp.conftest import MCPKernel, stdio_server
from tests.sim.anthropic_sim import AnthropicSim

PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def never(_: str) -> bool:
    return False


def names_for(servers: dict[str, list[str]]) -> dict[tuple[str, str], str]:
    parts = server_parts(servers)
    out: dict[tuple[str, str], str] = {}
    for server, tools in servers.items():
        taken = set(out.values())
        for tool, name in assign_names(parts[server], tools, {}, taken.__contains__).items():
            out[(server, tool)] = name
    return out


def test_plain_names_are_kept_as_they_are() -> None:
    names = names_for({"time": ["get_current_time", "convert-time"]})
    assert names == {
        ("time", "get_current_time"): "mcp_time__get_current_time",
        ("time", "convert-time"): "mcp_time__convert-time",
    }


def test_unsafe_characters_and_long_names_fit_provider_limits() -> None:
    long_tool = "search_" + "x" * 80
    names = names_for({"my docs.io": ["读文件", "a.b c", long_tool], "s" * 40: ["t"]})
    assert names[("my docs.io", "a.b c")] == "mcp_my_docs_io__a_b_c"
    assert names[("my docs.io", "读文件")] == "mcp_my_docs_io_____"
    assert names[("my docs.io", long_tool)] == ("mcp_my_docs_io__" + long_tool)[:NAME_LIMIT]
    server_part = names[("s" * 40, "t")].removeprefix("mcp_").split("__")[0]
    assert len(server_part) <= 24 and server_part.startswith("s" * 10)
    assert all(PROVIDER_NAME.match(n) for n in names.values())


def test_collisions_get_stable_suffixes() -> None:
    servers = {
        "docs": ["a.b", "a_b", "a b", "x" * 70 + "1", "x" * 70 + "2"],
        "my.srv": ["t"],
        "my_srv": ["t"],  # the same once sanitised: the later server gets a suffixed part
        "a": ["b__c"],
        "a__b": ["c"],  # "mcp_a__b__c" either way without care
    }
    first = names_for(servers)
    again = names_for({k: list(reversed(v)) for k, v in servers.items()})

    assert len(set(first.values())) == len(first)  # no two tools share a name
    assert first == again  # the order a server lists its tools in does not matter
    assert first[("docs", "a_b")] == "mcp_docs__a_b"  # the name that needs no change wins
    assert re.fullmatch(r"mcp_docs__a_b_[0-9a-f]{6}", first[("docs", "a.b")])
    assert re.fullmatch(r"mcp_docs__a_b_[0-9a-f]{6}", first[("docs", "a b")])
    assert first[("my.srv", "t")] == "mcp_my_srv__t"
    assert re.fullmatch(r"mcp_my_srv_[0-9a-f]{6}__t", first[("my_srv", "t")])
    assert first[("a", "b__c")] == "mcp_a__b__c"
    assert first[("a__b", "c")] == "mcp_a_b__c"
    assert all(PROVIDER_NAME.match(n) for n in first.values())


def test_kept_names_survive_and_taken_names_are_avoided() -> None:
    kept = {"echo": "mcp_s__echo_abcdef"}  # what the tool was called before a reconnect
    names = assign_names("s", ["echo", "new"], kept, {"mcp_s__new"}.__contains__)
    assert names["echo"] == "mcp_s__echo_abcdef"
    assert names["new"] != "mcp_s__new" and names["new"].startswith("mcp_s__new_")


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=30),
        st.lists(st.text(min_size=1, max_size=90), max_size=6, unique=True),
        max_size=5,
    )
)
def test_any_names_are_valid_and_distinct(servers: dict[str, list[str]]) -> None:
    names = names_for(servers)
    assert len(set(names.values())) == len(names)
    assert all(PROVIDER_NAME.match(n) for n in names.values())


async def test_colliding_tools_reach_the_right_tool_through_kernel(
    model: AnthropicSim, mcp_kernel: MCPKernel
) -> None:
    servers = [stdio_server("c.s", "--names", "collide"), stdio_server("c_s", "--names", "collide")]
    kernel = await mcp_kernel(model, servers)

    mine = {n for n in kernel.tools.names() if n.startswith("mcp_c_s")}
    assert all(PROVIDER_NAME.match(n) for n in mine)
    for server in ("c.s", "c_s"):
        names = kernel.mcp.tool_names(server)
        assert set(names.values()) <= mine
        for raw in ("a.b", "a_b", "a b", "x" * 70 + "1", "x" * 70 + "2"):
            outcome = await kernel.tools.call(names[raw], {})
            assert outcome.ok and outcome.content == f"I am {raw}"
    regular = len([n for n in kernel.tools.names() if n.startswith("mcp_test")])
    assert regular == 0
    per_server = len(kernel.mcp.tool_names("c.s"))
    assert per_server == len(kernel.mcp.tool_names("c_s")) >= 5 + 8
    assert len(mine) == 2 * per_server  # every tool of both servers, all distinct
