"""The ``qq`` channel: replies through the official QQ bot open platform's REST API.

An access token is obtained from ``token_url`` with ``app_id`` + ``client_secret``
(``{"appId", "clientSecret"}`` → ``{"access_token", "expires_in"}``), kept until shortly
before it expires, fetched anew when it has, when the settings change, or when the API
answers 401 (then the request is retried once). Messages go to the target's endpoint:

- c2c:   ``POST /v2/users/{openid}/messages``
- group: ``POST /v2/groups/{group_openid}/messages``
- guild: ``POST /channels/{channel_id}/messages``
- dm:    ``POST /dms/{guild_id}/messages``

with ``Authorization: QQBot <token>``. A reply to an inbound message carries its
``msg_id`` (a passive reply) and, for c2c/group, a ``msg_seq`` counted per ``msg_id``.
Inbound events are kernel/channels/qq_inbound.py's.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx

from kernel.config import Config, QQChannelConfig
from kernel.core.capped import BadEncoding, TooLarge, read_capped
from kernel.core.clock import Clock
from kernel.core.delivery import Target
from kernel.core.errors import ChannelError
from kernel.core.i18n import t
from kernel.core.redact import hide_quoted
from kernel.core.tls import tls_context

log = logging.getLogger(__name__)

REFRESH_MARGIN = timedelta(seconds=60)  # a token this close to expiry is replaced first
MESSAGE_LIMIT = 2000  # characters per QQ text message
MAX_PARTS = 5  # passive replies allowed per inbound message
_SEQ_KEPT = 1000
MAX_ANSWER = 1024 * 1024  # bytes of a QQ API answer read (they are small JSON objects)


def _when(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value else None


class QQChannel:
    name = "qq"

    def __init__(self, config: Config, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self._http: httpx.AsyncClient | None = None
        self._token = ""
        self._expires_at: datetime | None = None
        self._token_lock = asyncio.Lock()
        self._seq: OrderedDict[str, int] = OrderedDict()
        self.token_fetches = 0
        self.sent = 0
        self.events = 0
        self.duplicates = 0
        self.ignored = 0
        self.refused = 0
        self.declined = 0  # allowed, but too many turns were running
        self.turns_running: Callable[[], int] = lambda: 0  # set by QQInbound
        self.last_inbound: dict[str, Any] | None = None
        self.last_reply: dict[str, Any] | None = None
        self.last_error: dict[str, Any] | None = None
        self.last_refused: dict[str, Any] | None = None

    @property
    def cfg(self) -> QQChannelConfig:
        return self.config.channels.qq

    def unavailable(self) -> str:
        if not self.cfg.enabled:
            return t("channel.disabled", name=self.name, key="channels.qq.enabled")
        for key in ("app_id", "client_secret"):
            if not getattr(self.cfg, key):
                return t("config.channel_needs", key=f"channels.qq.{key}")
        return ""

    def settings_changed(self, names: set[str]) -> None:
        if self.name in names:  # a token got with the old app_id/secret is not used again
            self._token, self._expires_at = "", None

    # ----- access token -------------------------------------------------------------

    def token_state(self) -> str:
        if not self._token or self._expires_at is None:
            return "none"
        return "valid" if self.clock.now() < self._expires_at - REFRESH_MARGIN else "expired"

    async def access_token(self, *, renew: bool = False) -> str:
        async with self._token_lock:
            if renew or self.token_state() != "valid":
                await self._fetch_token()
            return self._token

    async def _fetch_token(self) -> None:
        cfg = self.cfg
        body = {"appId": cfg.app_id, "clientSecret": cfg.client_secret}
        status, data = await self._request("POST", cfg.token_url, body, {})
        token = data.get("access_token") if isinstance(data, dict) else None
        if status != 200 or not isinstance(token, str) or not token:
            detail = _api_detail(status, data)
            self.note_error("token", detail)
            raise ChannelError(
                ChannelError.DISPATCH_FAILED, t("qq.token_failed", detail=detail), channel=self.name
            )
        try:
            seconds = int(data.get("expires_in", 7200))
        except (TypeError, ValueError):
            seconds = 7200
        self._token = token
        self._expires_at = self.clock.now() + timedelta(seconds=max(seconds, 1))
        self.token_fetches += 1
        log.info("qq access token obtained (valid %d s)", seconds)

    # ----- sending ------------------------------------------------------------------

    async def send_text(self, target: Target, text: str) -> None:
        cfg = self.cfg
        kind = target.kind or cfg.target_type
        where = target.user_id or cfg.target_id
        if not where:
            raise ChannelError(ChannelError.DISPATCH_FAILED, t("qq.no_target"), channel=self.name)
        text = cfg.bot_prefix + text
        parts = [text[i : i + MESSAGE_LIMIT] for i in range(0, len(text), MESSAGE_LIMIT)]
        for part in parts[:MAX_PARTS] or [""]:
            await self._post_message(kind, where, part, target.reply_to)
        self.sent += 1
        self.last_reply = {
            "at": _when(self.clock.now()),
            "target_type": kind,
            "target_id": where,
            "msg_id": target.reply_to or None,
            "parts": min(len(parts), MAX_PARTS),
        }

    def _route(self, kind: str, where: str) -> str:
        paths = {
            "c2c": f"/v2/users/{where}/messages",
            "group": f"/v2/groups/{where}/messages",
            "guild": f"/channels/{where}/messages",
            "dm": f"/dms/{where}/messages",
        }
        if kind not in paths:
            raise ChannelError(
                ChannelError.DISPATCH_FAILED, t("qq.bad_target_type", kind=kind), channel=self.name
            )
        return self.cfg.api_base + paths[kind]

    def _next_seq(self, msg_id: str) -> int:
        seq = self._seq.pop(msg_id, 0) + 1
        self._seq[msg_id] = seq
        while len(self._seq) > _SEQ_KEPT:
            self._seq.popitem(last=False)
        return seq

    async def _post_message(self, kind: str, where: str, content: str, msg_id: str) -> None:
        url = self._route(kind, where)
        body: dict[str, Any] = {"content": content}
        if kind in ("c2c", "group"):
            body["msg_type"] = 0
        if msg_id:
            body["msg_id"] = msg_id
            if kind in ("c2c", "group"):
                body["msg_seq"] = self._next_seq(msg_id)
        for attempt in range(2):
            token = await self.access_token(renew=attempt > 0)
            headers = {"Authorization": f"QQBot {token}", "X-Union-Appid": self.cfg.app_id}
            status, data = await self._request("POST", url, body, headers)
            if 200 <= status < 300:
                return
            if status == 401 and attempt == 0:
                log.info("qq api answered 401; renewing the access token")
                continue
            detail = _api_detail(status, data)
            self.note_error("send", detail)
            raise ChannelError(
                ChannelError.DISPATCH_FAILED, t("qq.api_failed", detail=detail), channel=self.name
            )

    async def _request(
        self, method: str, url: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, Any]:
        if self._http is None or self._http.is_closed:
            # No proxy from the environment; a redirect is an answer, never followed (the
            # token stays with the configured API).
            self._http = httpx.AsyncClient(
                trust_env=False, follow_redirects=False, verify=tls_context(trust_env=False)
            )
        seconds = self.cfg.timeout_seconds
        try:
            async with (
                asyncio.timeout(seconds),  # the whole request, not each read
                self._http.stream(
                    method,
                    url,
                    json=body,
                    headers={**headers, "Accept-Encoding": "gzip"},
                    timeout=seconds,
                ) as response,
            ):
                raw = await read_capped(
                    response.aiter_raw(),
                    MAX_ANSWER,
                    encoding=response.headers.get("content-encoding"),
                )
                try:
                    data = json.loads(raw) if raw else {}
                except (UnicodeDecodeError, json.JSONDecodeError):
                    data = {}
                return response.status_code, data
        except (TimeoutError, httpx.TimeoutException):
            detail = t("webhook.timeout", seconds=f"{seconds:g}")
        except TooLarge:
            detail = t("qq.answer_too_large", limit=MAX_ANSWER)
        except (BadEncoding, httpx.HTTPError) as exc:
            detail = type(exc).__name__
        self.note_error("http", detail)
        raise ChannelError(
            ChannelError.DISPATCH_FAILED, t("qq.api_failed", detail=detail), channel=self.name
        )

    # ----- state --------------------------------------------------------------------

    def note_refusal(self, user_id: str, target_type: str, reason: str) -> None:
        """A message not answered: counted, and shown with its sender and why."""
        self.refused += 1
        self.last_refused = {
            "at": _when(self.clock.now()),
            "user_id": user_id,
            "target_type": target_type,
            "reason": reason,
        }

    def note_error(self, stage: str, detail: str) -> None:
        self.last_error = {"at": _when(self.clock.now()), "stage": stage, "error": detail}
        log.warning("qq %s failed: %s", stage, detail)

    def state(self) -> dict[str, Any]:
        return {
            "enabled": self.cfg.enabled,
            "configured": bool(self.cfg.app_id and self.cfg.client_secret),
            "token": {
                "state": self.token_state(),
                "expires_at": _when(self._expires_at),
                "fetches": self.token_fetches,
            },
            "events": self.events,
            "duplicates_ignored": self.duplicates,
            "ignored": self.ignored,
            "refused": self.refused,
            "declined_busy": self.declined,
            "turns_running": self.turns_running(),
            "allowed_users": len(self.cfg.allowed_users),
            "last_refused": self.last_refused,
            "replies_sent": self.sent,
            "last_inbound": self.last_inbound,
            "last_reply": self.last_reply,
            "last_error": self.last_error,
        }

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def _api_detail(status: int, data: Any) -> str:
    """The platform's error, shaped for the owner: status, code, message (quoted values
    hidden, since a message may echo what was sent)."""
    parts = [f"HTTP {status}"]
    if isinstance(data, dict):
        code = data.get("code")
        message = data.get("message") or data.get("msg")
        if code is not None:
            parts.append(f"code {code}")
        if isinstance(message, str) and message:
            parts.append(hide_quoted(message[:200]))
    return " ".join(parts)
