"""``[web]`` (web_fetch and its safety), ``[web.search]`` (web_search's provider) and
``[agents]`` (sub-agents' limits), issue 18; ``[browser]`` (the browser tools), issue 38."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field

from kernel.config.schema import SECRET, Base, Env, PosFloat, PosInt, Section, Url

SearchProvider = Literal["", "tavily", "brave", "serpapi", "searxng"]
SEARCH_PROVIDERS: tuple[str, ...] = tuple(p for p in get_args(SearchProvider) if p)
# Where each provider answers when base_url is empty (SearXNG is self-hosted: required).
SEARCH_ENDPOINTS: dict[str, str] = {
    "tavily": "https://api.tavily.com",
    "brave": "https://api.search.brave.com",
    "serpapi": "https://serpapi.com",
}


class WebSearchConfig(Section):
    """``[web.search]``: which search service web_search asks. Without a provider it asks
    the keyless endpoint (``keyless_url``); with one but without the key it needs,
    web_search is not offered to the model."""

    provider: SearchProvider = Field(
        "", description='"tavily", "brave", "serpapi" or "searxng" (self-hosted); "": none'
    )
    api_key: Annotated[str, SECRET, Env("KERNEL_WEB_SEARCH_API_KEY")] = Field(
        "", description="the provider's key (SearXNG: none)"
    )
    base_url: Base = Field(
        "", description="the service's address; empty: the provider's own (SearXNG: required)"
    )
    timeout: PosFloat = Field(20.0, description="seconds per search")
    max_results: Annotated[int, Field(ge=1, le=20)] = Field(
        10, description="the most results one search returns"
    )
    keyless_url: Url = Field(
        "https://html.duckduckgo.com/html",
        description="with no provider: the keyless HTML search endpoint (DuckDuckGo's); "
        '"": none, web_search not offered',
    )
    keyless_per_minute: Annotated[int, Field(ge=1, le=60)] = Field(
        6, description="keyless searches at most per minute (more are refused)"
    )


class WebConfig(Section):
    """``[web]``: web_fetch's limits. Private, loopback, link-local and metadata
    addresses are refused (after DNS, and on every redirect) unless allow_private."""

    allow_private: bool = Field(
        False, description="true lets web_fetch reach private/loopback addresses"
    )
    fetch_timeout: PosFloat = Field(
        20.0, description="seconds for a whole fetch, redirects included"
    )
    max_bytes: PosInt = Field(5_000_000, description="the most bytes of a page read")
    max_redirects: Annotated[int, Field(ge=0, le=20)] = Field(5, description="redirects followed")
    max_chars: PosInt = Field(20_000, description="web_fetch's default max_chars")
    user_agent: str = Field("Kernel/1.0 (personal assistant)", description="sent with each request")
    # [web.search], read as its own table.
    search: WebSearchConfig = Field(
        default_factory=WebSearchConfig, json_schema_extra={"toml": False}
    )


class BrowserConfig(Section):
    """``[browser]``: the browser tools (issue 38), on Playwright driving the system's
    Chromium (nothing downloaded). Off unless enabled; Chromium starts at the first use
    and ends when no chat has used it for ``idle_seconds``. Every request it makes is
    checked by [web]'s address rule (allow_private) and size limit (max_bytes)."""

    enabled: bool = Field(False, description="offer the browser tools to the model")
    executable: str = Field(
        "", description="Chromium's path; empty: chromium, chromium-browser or google-chrome"
    )
    idle_seconds: PosFloat = Field(
        300.0, description="a chat's page is closed after this long unused (Chromium too)"
    )
    max_pages: Annotated[int, Field(ge=1, le=16)] = Field(
        3, description="chats with an open page at once (the least recently used closes)"
    )
    sandbox: bool = Field(
        True,
        description="Chromium's own sandbox (off as root); false only where it cannot start",
    )
    timeout: PosFloat = Field(30.0, description="seconds one browser action may take")
    max_chars: PosInt = Field(12_000, description="characters of a page's text returned")
    max_items: Annotated[int, Field(ge=1, le=1000)] = Field(
        150, description="links, buttons and inputs numbered on a page"
    )


class AgentsConfig(Section):
    """``[agents]``: limits of a sub-agent's run (``agents/<name>.md``, delegate_task)."""

    max_seconds: PosFloat = Field(300.0, description="a sub-agent's run is stopped after this")
    max_tool_calls: PosInt = Field(20, description="tool calls one sub-agent run may make")
