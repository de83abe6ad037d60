"""Minimal wire-level simulator of the Gemini API, as gemini-cli 0.61.0 calls it with
``GOOGLE_GEMINI_BASE_URL`` (and ``security.auth.selectedType = "gemini-api-key"``):

- ``POST /v1beta/models/{model}:generateContent`` (JSON; the CLI's model router asks
  here first), and
- ``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` (SSE of
  ``GenerateContentResponse`` chunks).

Text replies only (scripted like the other simulators; the echo fallback answers the last
user text); scripted ``Error``s answer with Google's error JSON. Run standalone:

    uv run python -m tests.sim.gemini_sim --port 8789
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from tests.sim.script import (
    Error,
    Fallback,
    SimServer,
    Stall,
    run_standalone,
    split_evenly,
    sse_frame,
)

STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class GeminiSim(SimServer):
    def __init__(self, *, fallback: Fallback = None, host: str = "127.0.0.1", port: int = 0):
        super().__init__(fallback=fallback, host=host, port=port)

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1beta/models/{call}", self._call)]

    def error_response(
        self, status: int, type_: str, message: str, headers: dict[str, str] | None = None
    ) -> web.Response:
        name = STATUS_NAMES.get(status, "UNKNOWN")
        body = {"error": {"code": status, "message": message, "status": name}}
        return web.json_response(body, status=status, headers=headers)

    async def _call(self, request: web.Request) -> web.StreamResponse:
        recorded = await self.record(request)
        call = request.match_info["call"]
        model, _, method = call.partition(":")
        body = recorded.body if isinstance(recorded.body, dict) else {}
        scripted = self.next_scripted(lambda: last_user_text(body.get("contents")))
        if scripted is None:
            return self.no_reply_response()
        if isinstance(scripted, Error):
            return self.error_response(
                scripted.status, scripted.type, scripted.message, scripted.response_headers()
            )
        if isinstance(scripted, Stall):
            return await self.stall(request, scripted.seconds)
        text = scripted.text
        if method == "generateContent":
            if body.get("generationConfig", {}).get("responseMimeType") == "application/json":
                text = '{"complexity_reasoning": "simple", "complexity_score": 10}'
            return web.json_response(chunk(text, model, final=True))
        pieces = split_evenly(text) or [""]
        frames = [chunk(p, model, final=i == len(pieces) - 1) for i, p in enumerate(pieces)]
        return await self.reply_sse(
            request,
            scripted,
            [sse_frame(f) for f in frames],
            garbage=b"data: {<<\n\n",
            error_frame=sse_frame({"error": {"code": 500, "message": "simulated"}}),
        )


def chunk(text: str, model: str, *, final: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": [{"text": text}]},
        "index": 0,
    }
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
    if final:
        candidate["finishReason"] = "STOP"
        out["usageMetadata"] = {
            "promptTokenCount": 10,
            "candidatesTokenCount": 5,
            "totalTokenCount": 15,
        }
    return out


def last_user_text(contents: Any) -> str:
    for item in reversed(contents if isinstance(contents, list) else []):
        if isinstance(item, dict) and item.get("role") == "user":
            texts = [
                str(p.get("text", ""))
                for p in item.get("parts") or []
                if isinstance(p, dict) and "text" in p
            ]
            if any(t.strip() for t in texts):
                return " ".join(texts)
    return ""


if __name__ == "__main__":
    run_standalone(GeminiSim, "Gemini API simulator")
