"""The QQ bot open platform, both sides of it:

- its REST API (what Kernel calls): ``POST /app/getAppAccessToken`` (``{"appId",
  "clientSecret"}`` → ``{"access_token", "expires_in"}`` as strings, like the real one),
  and the send endpoints ``/v2/users/{openid}/messages``, ``/v2/groups/{group_openid}/
  messages``, ``/channels/{channel_id}/messages``, ``/dms/{guild_id}/messages``, which
  want ``Authorization: QQBot <live token>`` (else 401, code 11244). Sent messages are
  recorded in ``sim.messages``; ``fail_next`` makes sends fail, ``revoke_tokens`` makes
  every issued token stale;
- its callbacks (what Kernel receives): ``event(...)`` builds the payloads of
  C2C_MESSAGE_CREATE, GROUP_AT_MESSAGE_CREATE, AT_MESSAGE_CREATE and
  DIRECT_MESSAGE_CREATE, and ``signed_headers`` signs a body as the platform does
  (Ed25519, key seed = the bot secret repeated to 32 bytes, over timestamp + body).

Run standalone (the API side): ``uv run python -m tests.sim.qq_sim --port 8791``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.sim.loopback import LoopbackServer

APP_ID = "102030405"
SECRET = "QqBotSecret0123456789"
_ids = itertools.count(1)


def signing_key(secret: str) -> Ed25519PrivateKey:
    raw = secret.encode()
    return Ed25519PrivateKey.from_private_bytes((raw * (32 // len(raw) + 1))[:32])


def signed_headers(
    body: bytes, secret: str = SECRET, timestamp: str | None = None
) -> dict[str, str]:
    stamp = timestamp or str(int(time.time()))
    signature = signing_key(secret).sign(stamp.encode() + body).hex()
    return {
        "Content-Type": "application/json",
        "User-Agent": "QQBot-Callback",
        "X-Bot-Appid": APP_ID,
        "X-Signature-Method": "Ed25519",
        "X-Signature-Timestamp": stamp,
        "X-Signature-Ed25519": signature,
    }


def event(kind: str, text: str, *, where: str, who: str, msg_id: str = "") -> dict[str, Any]:
    """A callback payload: ``kind`` is c2c, group, guild or dm; ``where`` the place
    (openid, group_openid, channel_id, guild_id), ``who`` the sender."""
    n = next(_ids)
    msg_id = msg_id or f"msg-{n}"
    base: dict[str, Any] = {"id": msg_id, "content": text, "timestamp": "2025-06-01T10:00:00+08:00"}
    if kind == "c2c":
        name, data = "C2C_MESSAGE_CREATE", {**base, "author": {"user_openid": where}}
    elif kind == "group":
        data = {**base, "group_openid": where, "author": {"member_openid": who}}
        name = "GROUP_AT_MESSAGE_CREATE"
    elif kind == "guild":
        data = {**base, "channel_id": where, "guild_id": "g-1", "author": {"id": who}}
        name = "AT_MESSAGE_CREATE"
    else:
        data = {**base, "guild_id": where, "channel_id": "dm-c", "author": {"id": who}}
        name = "DIRECT_MESSAGE_CREATE"
    return {"id": f"{name}:{n:08x}", "op": 0, "s": n, "t": name, "d": data}


@dataclass
class Sent:
    kind: str  # c2c, group, guild, dm
    target: str
    body: dict[str, Any]
    token: str


class QQSim(LoopbackServer):
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        app_id: str = APP_ID,
        secret: str = SECRET,
        token_ttl: int = 7200,
    ) -> None:
        self.host = host
        self.port = port
        self.app_id = app_id
        self.secret = secret
        self.token_ttl = token_ttl
        self.live_tokens: set[str] = set()
        self.token_requests: list[dict[str, Any]] = []
        self.messages: list[Sent] = []
        self.rejected: list[tuple[int, str]] = []  # (status, path) of refused sends
        self._failures: deque[int] = deque()
        self._arrived = asyncio.Event()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def token_url(self) -> str:
        return self.base_url + "/app/getAppAccessToken"

    def fail_next(self, status: int = 500, *, times: int = 1) -> None:
        self._failures.extend([status] * times)

    def revoke_tokens(self) -> None:
        self.live_tokens.clear()

    async def _token(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.token_requests.append(body)
        self._arrived.set()
        if body.get("appId") != self.app_id or body.get("clientSecret") != self.secret:
            return web.json_response(
                {"code": 100016, "message": "invalid appid or secret"}, status=401
            )
        token = f"tok-{len(self.token_requests)}-{next(_ids)}"
        self.live_tokens.add(token)
        return web.json_response({"access_token": token, "expires_in": str(self.token_ttl)})

    async def _send(self, request: web.Request, kind: str, key: str) -> web.Response:
        raw = await request.read()
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("QQBot ")
        self._arrived.set()
        if not auth.startswith("QQBot ") or token not in self.live_tokens:
            self.rejected.append((401, request.path))
            return web.json_response(
                {"code": 11244, "message": "token not exist or expire"}, status=401
            )
        if self._failures:
            status = self._failures.popleft()
            self.rejected.append((status, request.path))
            return web.json_response(
                {"code": 500000, "message": "simulated failure"}, status=status
            )
        body = json.loads(raw)
        if not isinstance(body.get("content"), str):
            return web.json_response({"code": 40034006, "message": "content required"}, status=400)
        if kind in ("c2c", "group") and body.get("msg_type") != 0:
            return web.json_response({"code": 40034002, "message": "msg_type"}, status=400)
        seqs = [
            s.body.get("msg_seq")
            for s in self.messages
            if body.get("msg_id") and s.body.get("msg_id") == body["msg_id"]
        ]
        if body.get("msg_seq") is not None and body["msg_seq"] in seqs:
            return web.json_response({"code": 40054005, "message": "duplicate msg_seq"}, status=400)
        self.messages.append(Sent(kind, request.match_info[key], body, token))
        return web.json_response({"id": f"sent-{next(_ids)}", "timestamp": int(time.time())})

    def _route(self, kind: str, key: str) -> Callable[[web.Request], Any]:
        async def handler(request: web.Request) -> web.Response:
            return await self._send(request, kind, key)

        return handler

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/app/getAppAccessToken", self._token)
        app.router.add_post("/v2/users/{openid}/messages", self._route("c2c", "openid"))
        app.router.add_post(
            "/v2/groups/{group_openid}/messages", self._route("group", "group_openid")
        )
        app.router.add_post("/channels/{channel_id}/messages", self._route("guild", "channel_id"))
        app.router.add_post("/dms/{guild_id}/messages", self._route("dm", "guild_id"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="QQ bot open platform API simulator")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()

    async def serve() -> None:
        async with QQSim(args.host, args.port) as sim:
            print(sim.base_url, f"app_id={sim.app_id}", flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
