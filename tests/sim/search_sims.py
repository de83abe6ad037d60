"""Web search providers at the wire level, for web_search (issue 18): one ``SearchSim``
per provider answers that provider's search request the way the real service does,
checks its key where the real one does, records every request, and fails on demand.

    async with SearchSim("brave", key="k") as sim:
        sim.hits = [Hit("Title", "https://example.org/a", "snippet", "2026-01-02")]
        sim.fail_next(429, retry_after=7)          # the next request gets a 429
        sim.answer_next(b"<html>", "text/html")     # the next gets this raw answer
        sim.stall_next(5)                           # the next answers after 5 s
        ...
        [call] = sim.calls   # .method .path .query .headers .body (parsed JSON or None)

Shapes, from each provider's documentation (read 2026-11):

- Tavily (https://docs.tavily.com/documentation/api-reference/endpoint/search):
  ``POST /search``, JSON body ``{"query", "max_results" (0-20, default 5), "search_depth",
  "topic", …}``, header ``Authorization: Bearer tvly-…``. Answer ``{"query", "answer",
  "images", "results": [{"title", "url", "content", "score", "raw_content",
  "published_date" (news topic)}], "response_time", "request_id"}``. A missing or invalid
  key: 401 ``{"detail": {"error": "Unauthorized: missing or invalid API key."}}``; 429 too
  many requests; 432/433 the plan's or pay-as-you-go limit used up.
- Brave (https://api-dashboard.search.brave.com/docs, "Web Search API"):
  ``GET /res/v1/web/search?q=&count=`` (count ≤ 20, q ≤ 400 characters), headers
  ``Accept: application/json`` and ``X-Subscription-Token``. Answer ``{"type": "search",
  "query": {"original", …}, "web": {"type": "search", "results": [{"type":
  "search_result", "title", "url", "description" (with <strong> decorations), "age"
  ("2 days ago"), "page_age" (ISO), "meta_url", …}]}, "mixed": …}``; "web" is left out
  when nothing matched. Errors: ``{"type": "ErrorResponse", "error": {"id", "status",
  "code", "detail", "meta"}, "time"}`` — a bad token is HTTP 422 with code
  ``SUBSCRIPTION_TOKEN_INVALID`` (as seen in github.com/nearai/ironclaw/issues/2780),
  a rate limit 429 ``RATE_LIMITED``.
- SerpAPI (https://serpapi.com/search-api, https://serpapi.com/api-status-and-error-codes):
  ``GET /search.json?engine=google&q=&num=&api_key=`` (the key in the query string).
  Answer ``{"search_metadata": {"id", "status": "Success", …}, "search_parameters",
  "search_information", "organic_results": [{"position", "title", "link",
  "displayed_link", "snippet", "date" (some)}]}``; no match: 200 with
  ``"error": "Google hasn't returned any results for this query."`` and no
  organic_results. Errors ``{"error": "…"}``: 401 invalid key ("Invalid API key. Your API
  key should be here: https://serpapi.com/manage-api-key"), 429 throughput or searches
  used up.
- SearXNG (https://docs.searxng.org/dev/search_api.html): ``GET /search?q=&format=json``
  (no key; no result count: one page, ~20). Answer ``{"query", "number_of_results",
  "results": [{"url", "title", "content", "engine", "engines", "positions", "score",
  "category", "publishedDate" (or null)}], "answers", "corrections", "infoboxes",
  "suggestions", "unresponsive_engines"}``. An instance whose settings.yml does not enable
  the json format answers 403 Forbidden (HTML).

Run standalone: ``uv run python -m tests.sim.search_sims --provider brave --port 8791``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from tests.sim.loopback import LoopbackServer

ROUTES = {
    "tavily": ("POST", "/search"),
    "brave": ("GET", "/res/v1/web/search"),
    "serpapi": ("GET", "/search.json"),
    "searxng": ("GET", "/search"),
}


@dataclass
class Hit:
    """One result, written in the provider's own shape by the simulator."""

    title: str
    url: str
    snippet: str = ""
    date: str = ""


@dataclass
class SearchCall:
    method: str
    path: str
    query: dict[str, str]
    headers: CIMultiDict[str]
    body: Any  # the parsed JSON body, None without one


@dataclass
class _Planned:
    status: int = 200
    raw: bytes | None = None
    content_type: str = "application/json"
    stall: float = 0.0
    encoding: str = ""  # "gzip": raw is sent compressed, whatever the client asked
    retry_after: int | None = None


class SearchSim(LoopbackServer):
    def __init__(
        self, provider: str, key: str = "sim-search-key", host: str = "127.0.0.1", port: int = 0
    ) -> None:
        if provider not in ROUTES:
            raise ValueError(f"unknown provider {provider!r}")
        self.provider = provider
        self.key = key
        self.host = host
        self.port = port
        self.hits: list[Hit] = []
        self.calls: list[SearchCall] = []
        self._plan: deque[_Planned] = deque()
        self._arrived = asyncio.Event()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def fail_next(self, status: int, *, retry_after: int | None = None, times: int = 1) -> None:
        """The next requests get ``status`` with the provider's error body."""
        self._plan.extend([_Planned(status, retry_after=retry_after)] * times)

    def answer_next(
        self, raw: bytes, content_type: str = "application/json", encoding: str = ""
    ) -> None:
        """The next request gets ``raw`` with HTTP 200, whatever it is (``encoding``
        "gzip": compressed, even when the client asked for none)."""
        self._plan.append(_Planned(200, raw, content_type, encoding=encoding))

    def stall_next(self, seconds: float) -> None:
        self._plan.append(_Planned(stall=seconds))

    # ------------------------------------------------------------ the wire

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._receive)

    async def _receive(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        call = SearchCall(
            request.method, request.path, dict(request.query), CIMultiDict(request.headers), body
        )
        self.calls.append(call)
        self._arrived.set()
        if (request.method, request.path) != ROUTES[self.provider]:
            return web.Response(status=404, text="404: Not Found")
        if not self._key_ok(call):
            return self._error(401)
        plan = self._plan.popleft() if self._plan else _Planned()
        if plan.stall:
            await asyncio.sleep(plan.stall)
        if plan.raw is not None and plan.encoding == "gzip":
            headers = {"Content-Encoding": "gzip"}
            return web.Response(
                body=gzip.compress(plan.raw),
                status=plan.status,
                content_type=plan.content_type,
                headers=headers,
            )
        if plan.raw is not None:
            return web.Response(body=plan.raw, status=plan.status, content_type=plan.content_type)
        if plan.status >= 400:
            return self._error(plan.status, plan.retry_after)
        return web.json_response(self._answer(call))

    def _key_ok(self, call: SearchCall) -> bool:
        if self.provider == "tavily":
            return call.headers.get("Authorization") == f"Bearer {self.key}"
        if self.provider == "brave":
            return call.headers.get("X-Subscription-Token") == self.key
        if self.provider == "serpapi":
            return call.query.get("api_key") == self.key
        return True  # SearXNG has no key

    def _error(self, status: int, retry_after: int | None = None) -> web.Response:
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
        if self.provider == "tavily":
            detail = {401: "Unauthorized: missing or invalid API key."}.get(status, "error")
            return web.json_response({"detail": {"error": detail}}, status=status, headers=headers)
        if self.provider == "brave":
            if status == 401:  # how Brave really refuses a token
                status, code = 422, "SUBSCRIPTION_TOKEN_INVALID"
            else:
                code = {429: "RATE_LIMITED"}.get(status, "ERROR")
            error = {"id": "sim", "status": status, "code": code, "detail": "", "meta": {}}
            body = {"type": "ErrorResponse", "error": error, "time": 0}
            return web.json_response(body, status=status, headers=headers)
        if self.provider == "serpapi":
            text = {
                401: "Invalid API key. Your API key should be here: "
                "https://serpapi.com/manage-api-key",
                429: "Your account has run out of searches.",
            }.get(status, "error")
            return web.json_response({"error": text}, status=status, headers=headers)
        reason = {403: "Forbidden", 429: "Too Many Requests"}.get(status, "Error")
        return web.Response(
            status=status, text=f"<html><h1>{status} {reason}</h1></html>", headers=headers
        )

    def _answer(self, call: SearchCall) -> dict[str, Any]:
        if self.provider == "tavily":
            wanted = int((call.body or {}).get("max_results", 5))
            return {
                "query": (call.body or {}).get("query"),
                "answer": None,
                "images": [],
                "results": [
                    {
                        "title": h.title,
                        "url": h.url,
                        "content": h.snippet,
                        "score": 0.9,
                        "raw_content": None,
                        **({"published_date": h.date} if h.date else {}),
                    }
                    for h in self.hits[:wanted]
                ],
                "response_time": 0.5,
                "request_id": "sim",
            }
        if self.provider == "brave":
            wanted = int(call.query.get("count", "20"))
            results = [
                {
                    "type": "search_result",
                    "title": h.title,
                    "url": h.url,
                    "description": h.snippet,
                    **({"page_age": h.date, "age": "2 days ago"} if h.date else {}),
                    "meta_url": {"scheme": "https", "hostname": "example"},
                }
                for h in self.hits[:wanted]
            ]
            answer: dict[str, Any] = {"type": "search", "query": {"original": call.query["q"]}}
            if results:
                answer["web"] = {"type": "search", "results": results, "family_friendly": True}
            return answer
        if self.provider == "serpapi":
            wanted = int(call.query.get("num", "10"))
            answer = {
                "search_metadata": {"id": "sim", "status": "Success"},
                "search_parameters": {"engine": "google", "q": call.query["q"]},
            }
            organic = [
                {
                    "position": i + 1,
                    "title": h.title,
                    "link": h.url,
                    "displayed_link": h.url,
                    "snippet": h.snippet,
                    **({"date": h.date} if h.date else {}),
                }
                for i, h in enumerate(self.hits[:wanted])
            ]
            if organic:
                answer["organic_results"] = organic
            else:
                answer["error"] = "Google hasn't returned any results for this query."
            return answer
        return {
            "query": call.query["q"],
            "number_of_results": len(self.hits),
            "results": [
                {
                    "url": h.url,
                    "title": h.title,
                    "content": h.snippet,
                    "engine": "sim",
                    "engines": ["sim"],
                    "positions": [i + 1],
                    "score": 1.0,
                    "category": "general",
                    "publishedDate": h.date or None,
                }
                for i, h in enumerate(self.hits[:20])
            ],
            "answers": [],
            "corrections": [],
            "infoboxes": [],
            "suggestions": [],
            "unresponsive_engines": [],
        }


async def _serve(provider: str, host: str, port: int) -> None:
    sim = SearchSim(provider, host=host, port=port)
    sim.hits = [Hit("Example", "https://example.org/", "An example page.", "2026-01-01")]
    async with sim:
        print(f"{provider} search simulator on {sim.base_url} (key {sim.key!r})", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Web search provider simulator")
    parser.add_argument("--provider", choices=sorted(ROUTES), default="searxng")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8791)
    args = parser.parse_args()
    asyncio.run(_serve(args.provider, args.host, args.port))
