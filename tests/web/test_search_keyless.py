"""web_search with no key (issue 38 item 5): with no ``[web.search]`` provider, the tool
is offered and asks the keyless HTML endpoint, here DuckDuckGo's simulator on loopback
(``tests/sim/duckduckgo_sim.py``, its page built in the interface's known shape); a
robot check, an unreachable endpoint and the endpoint's own rate limit are refused in
the catalogue's words, naming the fix (a key-based provider)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kernel.core.i18n import set_language
from kernel.tools.registry import ToolRegistry
from tests.conftest import free_port
from tests.sim.duckduckgo_sim import DuckSim
from tests.sim.search_sims import Hit
from tests.web.test_search import load, results_of, tools

HITS = [
    Hit("Kernel 2.0 released", "https://example.org/kernel-2?a=1&b=2", "The <b>new</b> kernel."),
    Hit("Release notes", "https://example.org/notes", "What changed\nin 2.0."),
    Hit("Third", "https://example.org/third", "more"),
]


@pytest.fixture
def english() -> Any:
    set_language("en")
    yield
    set_language("zh")


async def search(registry: ToolRegistry, query: str = "kernel", count: int = 5) -> Any:
    return await registry.call("web_search", {"query": query, "count": count})


async def test_no_provider_searches_the_keyless_endpoint(tmp_path: Path, english: Any) -> None:
    async with DuckSim() as sim:
        sim.hits = list(HITS)
        registry = tools(load(tmp_path, keyless_url=sim.url))
        assert "web_search" in registry.names()
        outcome = await search(registry, "kernel  2.0", count=2)
        empty_sim_hits: list[Hit] = []
        sim.hits = empty_sim_hits
        nothing = await search(registry, "nothing at all")
    assert outcome.ok, outcome.content
    # the ad is left out, DuckDuckGo's redirect unwrapped, the snippet's <b> removed
    assert results_of(outcome.content, "keyless") == [
        {
            "title": "Kernel 2.0 released",
            "url": "https://example.org/kernel-2?a=1&b=2",
            "snippet": "The new kernel.",
            "date": "",
        },
        {
            "title": "Release notes",
            "url": "https://example.org/notes",
            "snippet": "What changed in 2.0.",
            "date": "",
        },
    ]
    call = sim.calls[0]
    assert (call.method, call.path, call.form) == ("POST", "/html/", {"q": "kernel 2.0", "b": ""})
    assert call.headers["User-Agent"] == "KernelTest/1.0"
    assert nothing.ok and 'no results for "nothing at all"' in nothing.content


async def test_a_robot_check_is_refused_naming_the_fix(tmp_path: Path, english: Any) -> None:
    async with DuckSim() as sim:
        sim.hits = list(HITS)
        registry = tools(load(tmp_path, keyless_url=sim.url))
        sim.block_next(202)
        challenged = await search(registry)
        sim.block_next(403)
        refused = await search(registry)
        # a 200 that is the challenge page all the same
        sim.answer_next(200, '<html><form id="challenge-form"></form></html>')
        disguised = await search(registry)
        sim.answer_next(200, "<html><body><p>a new layout</p></body></html>")
        changed = await search(registry)
    where = f"127.0.0.1:{sim.port}"
    for outcome in (challenged, refused, disguised):
        assert not outcome.ok
        assert outcome.content == (
            f"error: keyless search was blocked by {where} (it took the search for a robot: "
            "a challenge page or a refusal): try again later, or configure a key-based "
            "provider in config.toml's [web.search] (provider = tavily, brave or serpapi, "
            "with api_key)"
        )
    assert not changed.ok and "not readable search results" in changed.content
    assert "key-based provider" in changed.content


async def test_an_unreachable_endpoint_in_chinese(tmp_path: Path) -> None:
    port = free_port()
    registry = tools(load(tmp_path, keyless_url=f"http://127.0.0.1:{port}/html"))
    outcome = await search(registry)
    assert not outcome.ok
    assert outcome.content.startswith(f"error: 连不上免密钥搜索 127.0.0.1:{port}（ConnectError）")
    assert "[web.search] 配置一个需要密钥的服务" in outcome.content


async def test_the_keyless_rate_limit_refuses_without_asking(tmp_path: Path, english: Any) -> None:
    async with DuckSim() as sim:
        sim.hits = list(HITS)
        registry = tools(load(tmp_path, keyless_url=sim.url, keyless_per_minute=2))
        first, second, third = [await search(registry) for _ in range(3)]
    assert first.ok and second.ok
    assert len(sim.calls) == 2  # the third never reached the endpoint
    assert not third.ok
    assert third.content.startswith(
        "error: keyless search allows 2 searches a minute, all used: search again in "
    )
    assert "configure a key-based provider in [web.search]" in third.content


async def test_a_provider_wins_and_keyless_off_is_not_offered(tmp_path: Path) -> None:
    async with DuckSim() as sim:
        config = load(tmp_path, provider="brave", keyless_url=sim.url)
        assert "web_search" not in tools(config).names()  # the key is missing: said so
        outcome = await search(tools(config))
        assert "Brave key" in outcome.content
        assert sim.calls == []
    off = tools(load(tmp_path, keyless_url=""))
    assert "web_search" not in off.names()
    refusal = (await search(off)).content
    assert "set [web.search] provider" in refusal and "or keyless_url" in refusal
