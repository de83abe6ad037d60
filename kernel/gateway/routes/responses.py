"""``/v1/responses``: Kernel as an OpenAI Responses API endpoint (Codex with
``wire_api = "responses"``, the openai SDK's ``client.responses``), answered by the same
providers, model names, budgets and usage ledger as ``/v1/chat/completions``
(:mod:`kernel.gateway.v1`). The client's tools are passed through; Kernel never runs them.

``store`` (the API's default: true) keeps the response and its context in Kernel's
database (:mod:`kernel.store.responses`), so ``previous_response_id`` continues it and
``GET``/``DELETE /v1/responses/{response_id}`` find it; ``store: false`` keeps nothing.
A response too large to keep is answered with ``"store": false`` (and a log line saying
so), never said stored and then not found.
What each request field becomes: :mod:`kernel.gateway.responses_format`; the answer's
shape and events: :mod:`kernel.gateway.responses_reply`.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web

from kernel.core.provider import ChatRequest, Completion
from kernel.gateway.api import Router, deps_of, json_response, path_param
from kernel.gateway.model_api import OpenAIErrors, StreamCodec, run
from kernel.gateway.responses_format import (
    ITEMS_MAX,
    DeletedOut,
    ResponseOut,
    ResponsesBody,
    ResponsesRequest,
    conversation,
    parse_responses_request,
    thinking,
)
from kernel.gateway.responses_reply import Events, Shell, new_id, output_items, usage_json
from kernel.gateway.v1 import (
    V1Error,
    answerer,
    bad,
    output_tokens,
    read_body,
    refuse_missing,
)
from kernel.store.responses import ROW_MAX, ResponseStore, Row

log = logging.getLogger(__name__)
router = Router("responses", "OpenAI-compatible Responses API")

ID_MAX = 200


def _store(request: web.Request) -> ResponseStore:
    return deps_of(request).responses


def _unknown(response_id: str, field: str) -> V1Error:
    return V1Error(
        404,
        "not_found",
        f"{field}: no stored response {response_id[:ID_MAX]!r} (never stored, sent with "
        "store false, deleted, or older than general.retention_days): send the whole input "
        "instead",
        {"field": field},
    )


async def _context(request: web.Request, parsed: ResponsesRequest) -> list[Any]:
    """The items of the stored chain ``previous_response_id`` continues, then the request's."""
    if parsed.previous_response_id is None:
        return list(parsed.items)
    stored = await _store(request).get(parsed.previous_response_id)
    if stored is None:
        raise _unknown(parsed.previous_response_id, "previous_response_id")
    if len(stored.context) + len(parsed.items) > ITEMS_MAX:
        raise bad(
            "previous_response_id",
            f"the stored chain holds {len(stored.context)} items and input "
            f"{len(parsed.items)}, more than {ITEMS_MAX} together: start a new chain "
            "(send the items to keep as input, without previous_response_id)",
        )
    return [*stored.context, *parsed.items]


class Keeper:
    """Whether the answer is kept (``store`` true and small enough), decided on the whole
    response before it goes out, so the ``store`` it shows is true; :meth:`put` stores it."""

    def __init__(self, store: ResponseStore, wanted: bool, items: list[Any]) -> None:
        self.store = store
        self.wanted = wanted
        self.items = items
        self.rows: list[Row] = []

    def settle(self, response: dict[str, Any]) -> None:
        if not self.wanted:
            return
        row = self.store.row(response, [*self.items, *response["output"]])
        if row is None:
            response["store"] = False
            log.info(
                "/v1/responses: %s answered with store false: larger than %d bytes of JSON",
                response["id"],
                ROW_MAX,
            )
        else:
            self.rows.append(row)

    async def put(self) -> None:
        for row in self.rows:
            await self.store.put(row)


@router.post(
    "/v1/responses",
    summary="OpenAI Responses API (Codex), answered by Kernel's configured providers",
    body=ResponsesBody,
    response=ResponseOut,
    sse=True,
    anthropic=True,  # English /v1 errors; in OpenAI's shape on this path (api.v1_error)
    errors=(404, 429, 502),
)
async def create_response(request: web.Request) -> web.StreamResponse:
    deps = deps_of(request)
    parsed = parse_responses_request(await read_body(request))
    served = await answerer(deps, parsed.model)
    items = await _context(request, parsed)
    conv = conversation(items, parsed.tools.namespaces)
    if not conv.messages:
        raise bad("input", "at least one user or assistant message is required")
    refuse_missing(served, tools=bool(parsed.tools.specs), messages=conv.messages, where="input")
    system = "\n\n".join(s for s in [parsed.instructions or "", *conv.system] if s)
    chat = ChatRequest(
        served.model,
        system,
        conv.messages,
        parsed.tools.specs,
        output_tokens(served, parsed.max_tokens),
        sampling=parsed.sampling,
        thinking=thinking(parsed.effort, served.provider.capabilities.reasoning),
        tool_choice=parsed.tool_choice,
        history_thinking=conv.history_thinking,
    )
    shell = Shell(
        new_id("resp"),
        served.model,
        parsed.echo,
        parsed.store,
        parsed.previous_response_id,
        parsed.effort,
    )
    keeper = Keeper(_store(request), parsed.store, items)
    codec = _Codec(shell, parsed, keeper)
    result = await run(request, served, chat, codec, stream=parsed.stream)
    await keeper.put()
    return result


class _Codec(OpenAIErrors, StreamCodec):
    """The Responses API's errors, response JSON and events (numbered in sequence)."""

    def __init__(self, shell: Shell, parsed: ResponsesRequest, keeper: Keeper) -> None:
        self.shell, self.parsed, self.keeper = shell, parsed, keeper
        self.out = Events(self.send, shell, parsed.tools, keeper.settle)
        self.sequence = 0

    def render(self, completion: Completion) -> dict[str, Any]:
        response = self.shell.json("completed", output_items(completion, self.parsed.tools))
        response["usage"] = usage_json(completion)
        if completion.stop_reason in ("max_tokens", "length"):
            response["status"] = "incomplete"
            response["incomplete_details"] = {"reason": "max_output_tokens"}
        self.keeper.settle(response)
        return response

    async def send(self, kind: str, data: dict[str, Any]) -> None:
        frame = {"type": kind, "sequence_number": self.sequence} | data
        self.sequence += 1
        await self.frame(frame, kind)

    async def head(self) -> None:
        await self.out.start()

    async def text(self, text: str) -> None:
        await self.out.text_delta(text)

    async def thinking(self, text: str, signature: str) -> None:
        await self.out.thinking_delta(text, signature)

    async def finish(self, completion: Completion) -> None:
        await self.out.finish(completion)

    async def fail(self, kind: str, message: str) -> None:
        await self.out.fail("server_error", message)  # Codex retries these


@router.get(
    "/v1/responses/{response_id}",
    summary="A stored response of /v1/responses",
    response=ResponseOut,
    params=(path_param("response_id", "the id of a response sent with store true"),),
    errors=(404,),
    anthropic=True,
)
async def get_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    stored = await _store(request).get(response_id[: ID_MAX + 1])
    if stored is None:
        raise _unknown(response_id, "response_id")
    return json_response(stored.response)


@router.delete(
    "/v1/responses/{response_id}",
    summary="Forget a stored response of /v1/responses",
    response=DeletedOut,
    params=(path_param("response_id", "the id of a response sent with store true"),),
    errors=(404,),
    anthropic=True,
)
async def delete_response(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    if not await _store(request).delete(response_id[: ID_MAX + 1]):
        raise _unknown(response_id, "response_id")
    return json_response({"id": response_id, "object": "response.deleted", "deleted": True})
