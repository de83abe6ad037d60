"""The HTTP backend: the running Kernel's sidecar, through the one sidecar client
(:class:`kernel.client.http.AsyncSidecar`: its errors, its SSE reader). A turn is
``POST /agent/process`` streamed as SSE; cancel is ``POST /agent/turns/{id}/cancel``
with the stream's ``X-Turn-Id``; questions are answered through ``/agent/asks``; the
audit is ``GET /agent/trajectory/events`` and ``/agent/trajectory/verify/{id}``."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, tzinfo
from typing import Any

import httpx

from kernel.client.http import AsyncSidecar, SidecarError, SidecarUnreachable
from kernel.core.clock import zone_named
from kernel.core.event_wire import EVENT_TYPES, event_from_dict
from kernel.core.events import Completed, ErrorEvent, TurnEvent
from kernel.core.i18n import t
from kernel.tui.backend import (
    AUDIT_LIMIT,
    CHANNEL,
    CHAT_LIMIT,
    HISTORY_ROUNDS,
    AuditItem,
    AuditView,
    BackendError,
    ChatRef,
)

_CHAT_ID = re.compile(r"^chat-(\d{1,18})$")


class HttpBackend:
    def __init__(self, url: str, api_key: str = "") -> None:
        self.sidecar = AsyncSidecar(url, api_key)
        self.url = self.sidecar.url
        self._turns: dict[str, str] = {}  # chat's external id → its running turn's id
        self._cancel: set[str] = set()  # cancelled before the turn's id arrived
        self._zone: tzinfo | None = None  # general.timezone, asked once (/runtime-config)

    @property
    def zone(self) -> tzinfo:
        return self._zone or UTC

    async def _learn_zone(self) -> None:
        """The Kernel's ``general.timezone``, so that the times shown are the owner's
        and not this machine's; UTC (as stored) when the sidecar does not say (an older
        or another server: the chat list then says what else is wrong)."""
        try:
            data = await self._call("GET", "/runtime-config")
        except BackendError:
            data = {}
        self._zone = zone_named(data.get("timezone"))

    @property
    def where(self) -> str:
        return t("tui.remote", url=self.url)

    async def _call(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        try:
            data = await self.sidecar.call(method, path, **kw)
        except SidecarError as exc:
            raise BackendError(f"{exc} ({exc.code})") from None
        except SidecarUnreachable as exc:
            raise BackendError(str(exc)) from None
        except ValueError:
            raise BackendError(self._malformed()) from None
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise BackendError(self._malformed())
        return data

    def _malformed(self) -> str:
        return t("client.broken", url=self.url, detail="malformed answer")

    async def chats(self) -> list[ChatRef]:
        if self._zone is None:
            await self._learn_zone()
        data = await self._call("GET", "/chats", params={"channel": CHANNEL, "limit": CHAT_LIMIT})
        return [_chat_of(item) for item in _list(data.get("chats"))]

    async def history(self, chat: ChatRef) -> list[dict[str, Any]]:
        if not chat.stored:
            return []
        data = await self._call("GET", f"/chats/{chat.ident}", params={"rounds": HISTORY_ROUNDS})
        return _list(data.get("messages"))

    async def _create(self, chat: ChatRef) -> None:
        body = {"channel": CHANNEL, "user_id": chat.user_id, "session_id": chat.external_id}
        made = _chat_of(await self._call("POST", "/chats", json=body))
        chat.ident, chat.session = made.ident, made.session

    async def send(self, chat: ChatRef, text: str) -> AsyncIterator[TurnEvent]:
        if not chat.stored:
            await self._create(chat)
        body = {
            "input": [
                {"role": "user", "type": "message", "content": [{"type": "text", "text": text}]}
            ],
            "channel": CHANNEL,
            "user_id": chat.user_id,
            "session_id": chat.external_id,
            "stream": True,
        }
        key = chat.external_id
        self._cancel.discard(key)
        # Known as running from the request on: an Esc while the sidecar still queues it
        # (behind another turn of this chat) is kept and sent once its id arrives.
        self._turns[key] = ""

        async def opened(headers: httpx.Headers) -> None:
            self._turns[key] = headers.get("X-Turn-Id", "")
            if key in self._cancel:  # Esc came before the turn had an id
                await self.cancel(chat)

        ended = False
        try:
            async for payload in self.sidecar.stream("/agent/process", body, opened):
                event = self._event(payload)
                if event is not None:
                    ended = ended or isinstance(event, Completed | ErrorEvent)
                    yield event
            if not ended:  # the stream stopped without its end: not a whole reply
                raise BackendError(t("client.broken", url=self.url, detail="stream cut"))
        except SidecarError as exc:
            raise BackendError(f"{exc} ({exc.code})") from None
        except SidecarUnreachable as exc:
            raise BackendError(str(exc)) from None
        except ValueError:
            raise BackendError(self._malformed()) from None
        finally:
            self._turns.pop(key, None)
            self._cancel.discard(key)

    def _event(self, decoded: Any) -> TurnEvent | None:
        """One SSE payload as a turn event; None for what is none (another kind of
        event, not an object), a malformed answer for a turn event that is broken."""
        if not isinstance(decoded, dict) or decoded.get("type") not in EVENT_TYPES:
            return None
        try:
            return event_from_dict(decoded)
        except ValueError:
            raise BackendError(self._malformed()) from None

    async def cancel(self, chat: ChatRef) -> bool:
        key = chat.external_id
        turn_id = self._turns.get(key)
        if turn_id is None:
            return False
        if not turn_id:
            self._cancel.add(key)
            return True
        try:
            data = await self._call("POST", f"/agent/turns/{turn_id}/cancel")
        except BackendError:
            return False  # it ended meanwhile (404) or the sidecar is gone: the stream says
        return bool(data.get("cancelled"))

    async def answer(self, ask_id: str, choice: int) -> bool:
        try:
            await self._call("POST", f"/agent/asks/{ask_id}/answer", json={"choice": choice})
        except BackendError:
            return False  # answered elsewhere, timed out or cancelled
        return True

    async def audit(self, chat: ChatRef) -> AuditView:
        if not chat.stored:
            return AuditView([], {"ok": True, "checked": 0, "pruned": 0})
        params = {"session_id": chat.ident, "limit": AUDIT_LIMIT}  # chat-<n>, chat-default
        data = await self._call("GET", "/agent/trajectory/events", params=params)
        verdict = await self._call("GET", f"/agent/trajectory/verify/{chat.ident}")
        items = [_audit_item(item) for item in _list(data.get("items"))]
        return AuditView(items, verdict)

    async def close(self) -> None:
        await self.sidecar.close()


def _list(value: Any) -> list[dict[str, Any]]:
    """The objects of a JSON array (anything else in it, or no array, left out)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _chat_of(item: dict[str, Any]) -> ChatRef:
    ident = str(item.get("id", ""))
    match = _CHAT_ID.match(ident)
    return ChatRef(
        ident=ident,
        title=str(item.get("name") or ""),
        updated=str(item.get("updated_at") or ""),
        user_id=str(item.get("user_id", "")),
        external_id=str(item.get("session_id", "")),
        session=int(match.group(1)) if match else None,
        messages=count if isinstance(count := item.get("message_count"), int) else 0,
    )


def _audit_item(item: dict[str, Any]) -> AuditItem:
    data = item.get("data")
    return AuditItem(
        seq=item.get("seq") if isinstance(item.get("seq"), int) else None,
        at=str(item.get("at", "")),
        kind=str(item.get("kind", "")),
        actor=str(item.get("actor", "")),
        data=data if isinstance(data, dict) else None,
        text=str(item.get("text") or ""),
    )
